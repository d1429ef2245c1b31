// The output viewer: a cell's source and outputs. Text is shown as text; HTML outputs show their
// text/plain form (or their source, as text); images come as blobs into <img src="data:...">.
import { Bridge, Json } from './bridge';
import { append, el, errorBox, image, stripAnsi } from './dom';

const IMAGE_ORDER = ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/svg+xml'];

export class OutputViewer {
  readonly node = el('div', { cls: 'outputs' });

  constructor(
    private readonly bridge: Bridge,
    private readonly cell: Json,
  ) {
    const status = cell.status && cell.status !== 'ok' ? ` · ${cell.status}` : '';
    append(
      this.node,
      el(
        'div',
        { cls: 'title' },
        el('strong', {}, `In [${cell.execution_count ?? ' '}]`),
        ` cell ${cell.seq}${status}`,
      ),
      el('pre', { cls: 'source', attrs: { 'data-testid': 'source' } }, String(cell.source ?? '')),
    );
    const list = el('div', { cls: 'output-list' });
    this.node.appendChild(list);
    const outputs: Json[] = cell.outputs ?? [];
    if (!outputs.length) list.appendChild(el('div', { cls: 'muted' }, 'no outputs'));
    for (const out of outputs) {
      const slot = el(
        'div',
        { cls: 'output', attrs: { 'data-index': String(out.index) } },
        el('div', { cls: 'muted' }, 'loading…'),
      );
      list.appendChild(slot);
      this.fill(slot, out).catch((err: Error) => slot.replaceChildren(errorBox(err.message)));
    }
    if (cell.outputs_dropped)
      list.appendChild(el('div', { cls: 'muted' }, `${cell.outputs_dropped} more outputs were not kept`));
  }

  private async fill(slot: HTMLElement, out: Json): Promise<void> {
    const mimes: string[] = out.mime_types ?? [];
    const uri = String(out.uri ?? `nb://cells/${this.cell.seq}/outputs/${out.index}`);
    const picture = IMAGE_ORDER.find(m => mimes.includes(m));
    const described = await this.description(out);
    if (picture) {
      const [item] = await this.bridge.read(`${uri}?mime=${encodeURIComponent(picture)}`);
      // Short alt text; the full description linked with aria-describedby (issue #44).
      const firstLine = described?.text.split('\n', 1)[0];
      const alt = String(out.alt ?? firstLine ?? `output ${out.index} of cell ${this.cell.seq}`);
      const img = item?.blob ? image(picture, item.blob, alt) : null;
      if (img && described) img.setAttribute('aria-describedby', described.id);
      const fallback = item?.text ? el('pre', {}, item.text) : el('div', { cls: 'muted' }, '(image not available)');
      slot.replaceChildren(img ?? fallback, ...(described ? [described.node] : []));
      return;
    }
    const htmlOnly = out.default_mime === 'text/html' && !mimes.includes('text/plain');
    const mime = mimes.includes('text/plain') ? 'text/plain' : undefined;
    const [item] = await this.bridge.read(
      mime && out.default_mime !== mime ? `${uri}?mime=${encodeURIComponent(mime)}` : uri,
    );
    const text = stripAnsi(item?.text ?? '');
    const cls = out.output_type === 'error' ? 'text error-output' : out.name === 'stderr' ? 'text stderr' : 'text';
    const label =
      out.output_type === 'error'
        ? el('div', { cls: 'ename' }, stripAnsi(`${out.ename ?? 'Error'}: ${out.evalue ?? ''}`))
        : null;
    const note = htmlOnly ? el('div', { cls: 'muted' }, 'HTML output, shown as its source text') : null;
    const parts: HTMLElement[] = [];
    if (label) parts.push(label);
    if (note) parts.push(note);
    parts.push(el('pre', { cls, attrs: { 'data-testid': 'output-text' } }, text));
    if (described) parts.push(described.node);
    slot.replaceChildren(...parts);
  }

  /** What the output shows, as the hub describes it (figures in numbers), when it has a description. */
  private async description(out: Json): Promise<{ id: string; text: string; node: HTMLElement } | null> {
    if (!out.description_uri) return null;
    const [item] = await this.bridge.read(String(out.description_uri));
    const text = item?.text;
    if (!text) return null;
    const id = `description-${this.cell.seq}-${out.index}`;
    // Shown folded for the eye; a hidden copy is what aria-describedby names (a closed <details>
    // is left out of the accessibility tree's descriptions).
    const node = el(
      'div',
      {},
      el(
        'details',
        { cls: 'description' },
        el('summary', {}, 'What it shows'),
        el('pre', { cls: 'text', attrs: { 'data-testid': 'description' } }, text),
      ),
      el('div', { attrs: { id, hidden: '' } }, text),
    );
    return { id, text, node };
  }
}
