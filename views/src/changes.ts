// The changes feed: long-polls changes_since through the host and shows each batch as it lands;
// a URI opens its own view in place (frame explorer, output viewer, or the resource as text).
// "Keep the assistant up to date" (where the host takes model context) shares the newest changes.
import { Bridge, Json } from './bridge';
import { clock, cut, shareToggle } from './context';
import { append, clear, el, errorBox } from './dom';

const WAIT_SECONDS = 20;
const MAX_ENTRIES = 200;
// What the assistant is sent: the newest lines first, since the user turned the control on.
const MAX_POSTED_LINES = 20;
const MAX_LINE_CHARS = 200;
const MAX_POSTED_CHARS = 2000;

export type Opener = (uri: string) => void;

export class ChangesFeed {
  readonly node = el('div', { cls: 'changes' });
  private readonly list = el('div', { cls: 'feed', attrs: { 'data-testid': 'feed' } });
  private readonly state = el('div', { cls: 'muted' }, 'watching for changes…');
  private stopped = false;
  private posted: string[] = []; // change lines (newest first) while the assistant is kept posted
  private postedCount = 0; // lines since the user turned it on (the newest MAX_POSTED_LINES are kept)
  private postedSince = { cursor: '', time: '' };

  constructor(
    private readonly bridge: Bridge,
    private cursor: string,
    first: Json,
    private readonly open: Opener,
  ) {
    const toggle = shareToggle(bridge.context, 'changes', 'keep the assistant up to date', 'keep-posted', () =>
      this.keepPosted(),
    );
    append(
      this.node,
      el('div', { cls: 'title' }, el('strong', {}, 'Notebook changes'), ' since this view opened'),
      toggle,
      this.state,
      this.list,
    );
    if (first?.changes?.length) this.add(first);
    void this.poll();
  }

  stop(): void {
    this.stopped = true;
  }

  /** The user turned "keep the assistant up to date" on: lines from now on. */
  private keepPosted(): () => string {
    this.posted = [];
    this.postedCount = 0;
    this.postedSince = { cursor: this.cursor, time: clock() };
    return () => this.digest();
  }

  /** The newest change lines, bounded, and how to get every change since the user turned this on. */
  private digest(): string {
    const lines = this.posted;
    let text = `Notebook changes (the user keeps you up to date from the mcp-notebook changes feed since ${this.postedSince.time}), newest first:`;
    if (!lines.length) text += '\n(no change yet)';
    let shown = 0;
    for (const line of lines) {
      if (text.length + line.length + 1 > MAX_POSTED_CHARS - 200) break;
      text += `\n${line}`;
      shown += 1;
    }
    if (shown < this.postedCount) text += `\n… ${this.postedCount - shown} earlier lines not shown`;
    const how = `Every change since then: changes_since {"cursor": "${this.postedSince.cursor}"}; read_resource reads any URI above.`;
    return cut(`${text}\n${how}`, MAX_POSTED_CHARS);
  }

  private async poll(): Promise<void> {
    let backoff = 1000;
    while (!this.stopped) {
      try {
        const result = await this.bridge.tool('changes_since', { cursor: this.cursor, wait_seconds: WAIT_SECONDS });
        const doc = result.structuredContent ?? {};
        if (typeof doc.cursor === 'string') this.cursor = doc.cursor;
        if (doc.changes?.length || doc.reset) this.add(doc);
        this.state.textContent = `watching for changes… (last checked ${new Date().toLocaleTimeString()})`;
        backoff = 1000;
      } catch (err) {
        this.state.replaceChildren(errorBox(`${(err as Error).message} — retrying`));
        await new Promise(r => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 15000);
      }
    }
  }

  private add(doc: Json): void {
    const last = doc.changes?.[doc.changes.length - 1];
    const when = last?.time ? new Date(last.time).toLocaleTimeString() : new Date().toLocaleTimeString();
    const entry = el('div', { cls: 'entry' }, el('div', { cls: 'when' }, when));
    if (doc.reset) append(entry, el('div', { cls: 'muted' }, String(doc.note ?? 'the kernel restarted')));
    for (const line of doc.summary ?? []) append(entry, el('div', { cls: 'summary' }, String(line)));
    const links = el('div', { cls: 'links' });
    for (const uri of doc.changed ?? []) {
      const button = el('button', { cls: 'link', attrs: { 'data-uri': String(uri) } }, String(uri));
      button.addEventListener('click', () => this.open(String(uri)));
      links.appendChild(button);
    }
    entry.appendChild(links);
    this.list.prepend(entry);
    while (this.list.childElementCount > MAX_ENTRIES) this.list.lastElementChild?.remove();
    if (this.bridge.context.has('changes')) this.post(doc, last?.time ? clock(new Date(last.time)) : clock());
  }

  /** Add a batch's lines (served by the hub, already masked) to what the assistant is sent. */
  private post(doc: Json, when: string): void {
    const lines: string[] = doc.reset ? [String(doc.note ?? 'the kernel restarted')] : [];
    for (const line of doc.summary ?? []) lines.push(String(line));
    const posted = lines.map(line => cut(`${when} ${line}`, MAX_LINE_CHARS));
    this.postedCount += posted.length;
    this.posted = [...posted, ...this.posted].slice(0, MAX_POSTED_LINES);
    this.bridge.context.changed();
  }
}

/** A resource shown as text (for URIs that have no view of their own). */
export async function resourceText(bridge: Bridge, uri: string): Promise<HTMLElement> {
  const node = el('div', { cls: 'resource' }, el('div', { cls: 'title' }, el('strong', {}, uri)));
  try {
    for (const item of await bridge.read(uri)) {
      append(node, el('pre', { cls: 'text' }, item.text ?? `(${item.mimeType ?? 'binary'} content)`));
    }
  } catch (err) {
    clear(node);
    node.appendChild(errorBox((err as Error).message));
  }
  return node;
}
