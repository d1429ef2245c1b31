/**
 * The notebook's own figure images, made readable by a screen reader (issue #44): after a cell
 * runs, the hub sends a short alt text and the full description of each image output (what the
 * figure shows, in numbers, read from the live figure); the image gets the alt text and
 * `aria-describedby` naming a hidden element that holds the description.
 */
import { NotebookPanel } from '@jupyterlab/notebook';

export interface IDescribedImage {
  index: number;
  alt: string;
  description: string;
}

const RETRIES = 10; // an image is rendered asynchronously: look again a few times
const RETRY_MS = 200;

export function describeImages(
  panel: NotebookPanel,
  cellId: string,
  images: IDescribedImage[],
  attempt = 0,
): void {
  const cell = panel.content.widgets.find(c => c.model.id === cellId) as any;
  const area = cell?.outputArea;
  if (!area || panel.isDisposed) {
    return;
  }
  let missing = false;
  for (const image of images) {
    const child = area.widgets[image.index];
    const img = child?.node.querySelector('img') as HTMLImageElement | null;
    if (!img) {
      missing = true;
      continue;
    }
    const id = `mcp-nb-description-${cellId}-${image.index}`;
    let holder = child.node.querySelector('[data-mcp-nb-description]') as HTMLElement | null;
    if (!holder) {
      holder = document.createElement('div');
      holder.hidden = true;
      holder.setAttribute('data-mcp-nb-description', '');
      child.node.appendChild(holder);
    }
    holder.id = id;
    holder.textContent = image.description;
    img.alt = image.alt;
    img.setAttribute('aria-describedby', id);
  }
  if (missing && attempt < RETRIES) {
    window.setTimeout(() => describeImages(panel, cellId, images, attempt + 1), RETRY_MS);
  }
}
