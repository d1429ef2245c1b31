// Building the DOM without markup: kernel text only ever becomes text nodes or attribute values.
export type Child = Node | string | null | undefined | false;

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { cls?: string; title?: string; attrs?: Record<string, string> } = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.cls) node.className = props.cls;
  if (props.title) node.title = props.title;
  for (const [name, value] of Object.entries(props.attrs ?? {})) node.setAttribute(name, value);
  append(node, ...children);
  return node;
}

export function append(node: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
}

export function clear(node: Node): void {
  while (node.firstChild) node.removeChild(node.firstChild);
}

const ANSI = /\u001b\[[0-9;?]*[A-Za-z]/g;

export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/** A cell value as text (null, NaN and objects spelled out). */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number' && Number.isNaN(value)) return 'NaN';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/svg+xml']);

/** An <img> from base64 data of an allowed image type (SVG in an <img> runs no script). */
export function image(mime: string, base64: string, alt: string): HTMLImageElement | null {
  if (!IMAGE_TYPES.has(mime) || !/^[A-Za-z0-9+/=\s]*$/.test(base64)) return null;
  const img = el('img', { cls: 'output-image', attrs: { alt } });
  img.src = `data:${mime};base64,${base64.replace(/\s/g, '')}`;
  return img;
}

export function errorBox(message: string): HTMLElement {
  return el('div', { cls: 'error', attrs: { role: 'alert' } }, message);
}
