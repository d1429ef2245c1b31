// One bundle for the three views; each HTML file names its view in <html data-view="...">.
import { App, PostMessageTransport, applyDocumentTheme, applyHostStyleVariables } from '@modelcontextprotocol/ext-apps';
import { Bridge, Json } from './bridge';
import { ChangesFeed, resourceText } from './changes';
import { applyDisplayMode } from './display';
import { clear, el, errorBox } from './dom';
import { FrameExplorer } from './frame';
import { OutputViewer } from './outputs';

const root = document.getElementById('root') as HTMLElement;
const view = document.documentElement.dataset.view ?? 'frame';
// Every view renders at any size: the frame explorer offers fullscreen where the host lists it.
const app = new App({ name: 'mcp-notebook', version: '0.1.0' }, { availableDisplayModes: ['inline', 'fullscreen'] });
const bridge = new Bridge(app);
let feed: { node: HTMLElement; changes: ChangesFeed } | null = null;

function show(node: HTMLElement, back: boolean): void {
  bridge.context.set('frame', null); // the frame the user shared is no longer shown
  clear(root);
  if (back && feed) {
    const button = el('button', { cls: 'back', attrs: { 'data-testid': 'back' } }, '← changes');
    button.addEventListener('click', () => feed && show(feed.node, false));
    root.appendChild(button);
  }
  root.appendChild(node);
}

function render(doc: Json, back = false): void {
  if (doc?.view === 'frame') show(new FrameExplorer(bridge, doc).node, back);
  else if (doc?.view === 'outputs') show(new OutputViewer(bridge, doc.cell).node, back);
  else if (doc?.view === 'changes' && !feed) {
    const changes = new ChangesFeed(bridge, String(doc.cursor), doc, openUri);
    feed = { node: changes.node, changes };
    show(changes.node, false);
  } else if (!doc?.view) show(errorBox('the tool result carries nothing this view can show'), back);
}

const FRAME =
  /^nb:\/\/(kernels\/[^/]+\/)?(frames|vars)\/[^/?#]+$|^nb:\/\/(kernels\/[^/]+\/)?db\/[^/]+\/tables\/[^/?#]+$/;
const CELL = /^nb:\/\/(?:kernels\/[^/]+\/)?cells\/(\d+)$/;

/** Open a changed resource in place: its own view when it has one, else its text. */
async function openUri(uri: string): Promise<void> {
  show(el('div', { cls: 'muted' }, `opening ${uri}…`), true);
  try {
    const cell = CELL.exec(uri);
    if (FRAME.test(uri)) {
      try {
        render((await bridge.tool('explore_frame', { name: uri })).structuredContent, true);
        return;
      } catch {
        // not a table: shown as text below
      }
    } else if (cell && !uri.includes('/kernels/')) {
      render((await bridge.tool('show_outputs', { cell: Number(cell[1]) })).structuredContent, true);
      return;
    }
    show(await resourceText(bridge, uri), true);
  } catch (err) {
    show(errorBox((err as Error).message), true);
  }
}

function theme(): void {
  const context = app.getHostContext();
  if (context?.theme) applyDocumentTheme(context.theme);
  if (context?.styles?.variables) applyHostStyleVariables(context.styles.variables);
  applyDisplayMode(context?.displayMode);
}

app.addEventListener('toolresult', params => {
  if (params.isError) {
    const text = (params.content ?? []).map((c: Json) => (c.type === 'text' ? c.text : '')).join(' ');
    show(errorBox(text || 'the tool failed'), false);
    return;
  }
  render(params.structuredContent);
});
app.addEventListener('hostcontextchanged', theme);
app.onteardown = async () => {
  feed?.changes.stop();
  return {};
};

root.appendChild(el('div', { cls: 'muted' }, `waiting for the ${view} data…`));
app
  .connect(new PostMessageTransport(window.parent, window.parent))
  .then(theme)
  .catch((err: Error) => show(errorBox(`could not connect to the host: ${err.message}`), false));
