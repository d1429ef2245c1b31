// The frame explorer: schema, a virtually scrolled table over pages fetched through the host,
// sort (column headers) and filter (where) pushed to the hub, which pushes them to the engine.
// Where the host allows: fullscreen, and sharing what the user looks at with the assistant.
import { Bridge, Json } from './bridge';
import { cut, shareToggle } from './context';
import { fullscreenButton } from './display';
import { append, cellText, clear, el, errorBox } from './dom';

const ROW_HEIGHT = 24;
const PAGE_ROWS = 100;
const MAX_PAGES = 60; // pages kept (older ones are fetched again when scrolled back to)
const MAX_IN_FLIGHT = 2;
const MARGIN_ROWS = 20;
const MAX_SPACER_ROWS = 1_000_000; // browsers cap element heights; beyond it rows are scaled
const RETRY_MS = [1000, 2000, 5000, 15000]; // a page whose read failed is asked again after these
// What "share with the assistant" sends: a sample of the visible rows, bounded every way.
const SHARE_ROWS = 20;
const SHARE_COLUMNS = 20;
const SHARE_VALUE_CHARS = 80;
const SHARE_FILTER_CHARS = 300;
const SHARE_MAX_CHARS = 5000;

interface PageInfo {
  total_rows?: number | null;
  next?: string | null;
  sortable?: boolean;
  filterable?: boolean;
}

export interface FrameDoc {
  name: string;
  uri: string;
  schema: Json;
  page: PageInfo;
  rows: Record<string, Json>[];
}

export class FrameExplorer {
  readonly node = el('div', { cls: 'frame' });
  private readonly scroller = el('div', { cls: 'scroller', attrs: { tabindex: '0', 'data-testid': 'rows' } });
  private readonly spacer = el('div', { cls: 'spacer' });
  private readonly body = el('div', { cls: 'rows' });
  private readonly head = el('div', { cls: 'row head' });
  private readonly status = el('span', { cls: 'status', attrs: { 'data-testid': 'status' } });
  private readonly problem = el('div', { cls: 'problem' });
  private readonly columns: string[];
  private pages = new Map<number, Record<string, Json>[]>();
  private inFlight = new Set<number>();
  private failed = new Map<number, { at: number; tries: number }>(); // page -> when to ask again
  private total: number | null;
  private known: number; // rows known to exist when the total is not
  private sort = '';
  private where = '';
  private generation = 0;
  private readonly sortable: boolean;
  private visible = { first: 0, last: 0 };
  private seed: Record<string, Json>[] = []; // a short first page, shown until page 0 arrives

  constructor(
    private readonly bridge: Bridge,
    private readonly doc: FrameDoc,
  ) {
    const schema = doc.schema ?? {};
    this.columns = (schema.columns ?? []).map((c: Json) => String(c.name));
    if (!this.columns.length && doc.rows.length) this.columns = Object.keys(doc.rows[0]);
    this.total = typeof doc.page?.total_rows === 'number' ? doc.page.total_rows : null;
    this.known = doc.rows.length + (doc.page?.next ? PAGE_ROWS : 0);
    this.sortable = schema.sortable !== false && doc.page?.sortable !== false;
    // A first page cut short (the hub keeps tool results within the hosts' size budget) is shown at
    // once and read again in full; a full or last first page is page 0 as it is.
    if (doc.rows.length >= PAGE_ROWS || !doc.page?.next) this.pages.set(0, doc.rows);
    else this.seed = doc.rows;
    this.build(schema);
    this.scroller.addEventListener('scroll', () => this.paint());
    // Fullscreen shows more rows; painting on the next frame keeps the observer out of a resize loop.
    new ResizeObserver(() => requestAnimationFrame(() => this.scroller.isConnected && this.paint())).observe(
      this.scroller,
    );
    this.paint();
    requestAnimationFrame(() => this.paint()); // once attached, the scroller has its height
  }

  private build(schema: Json): void {
    const shape = schema.shape ?? [this.total, this.columns.length];
    const rows =
      shape[0] === null || shape[0] === undefined ? 'rows unknown' : `${Number(shape[0]).toLocaleString()} rows`;
    const title = el(
      'div',
      { cls: 'title' },
      el('strong', {}, this.doc.name),
      ` ${schema.type ?? 'table'} · ${rows} · ${this.columns.length} columns`,
    );
    const filter = el('input', {
      cls: 'filter',
      attrs: { placeholder: 'filter: price > 10; name ~ abc', 'aria-label': 'filter', 'data-testid': 'filter' },
    });
    filter.addEventListener('keydown', e => {
      if (e.key === 'Enter') this.requery(this.sort, filter.value.trim());
    });
    if (schema.filterable === false) {
      filter.disabled = true;
      filter.title = 'this table cannot be filtered';
    }
    const jump = el('input', {
      cls: 'jump',
      attrs: { placeholder: 'go to row', inputmode: 'numeric', 'aria-label': 'go to row', 'data-testid': 'jump' },
    });
    jump.addEventListener('keydown', e => {
      if (e.key === 'Enter') this.goTo(Number(jump.value.replace(/[,_\s]/g, '')));
    });
    const types = el('details', { cls: 'schema' }, el('summary', {}, 'schema'));
    for (const c of schema.columns ?? []) append(types, el('div', {}, `${c.name}: ${c.dtype ?? '?'}`));
    this.head.style.gridTemplateColumns = this.template();
    append(this.head, el('div', { cls: 'cell index' }, '#'));
    this.columns.forEach((name, i) => this.head.appendChild(this.header(name, schema.columns?.[i]?.dtype)));
    this.scroller.append(this.spacer, this.body);
    const share = shareToggle(
      this.bridge.context,
      'frame',
      'share this view with the assistant',
      'share',
      () => () => this.shared(),
    );
    const toolbar = el('div', { cls: 'toolbar' }, filter, jump, share, fullscreenButton(this.bridge.app), this.status);
    append(this.node, title, toolbar, this.problem, types, el('div', { cls: 'table' }, this.head, this.scroller));
  }

  /** What the user looks at, for the assistant: the frame, its sort and filter, a sample of the visible rows. */
  private shared(): string {
    const schema = this.doc.schema ?? {};
    const columns = this.columns.slice(0, SHARE_COLUMNS);
    const of = this.total === null ? `${this.rowCount().toLocaleString('en-US')}+` : this.total.toLocaleString('en-US');
    const { first, last } = this.visible;
    const lines = [
      `The user is looking at ${this.doc.name} (${this.doc.uri}, ${schema.type ?? 'table'}, ${this.columns.length} columns) in the mcp-notebook frame explorer.`,
      `sort: ${this.sort || 'none'}; filter: ${this.where ? cut(this.where, SHARE_FILTER_CHARS) : 'none'}`,
      last > first
        ? `visible rows ${(first + 1).toLocaleString('en-US')}-${last.toLocaleString('en-US')} of ${of}`
        : 'no rows shown',
    ];
    const sample: string[] = [];
    for (let i = first; i < last && sample.length < SHARE_ROWS; i++) {
      const data = this.rowData(i);
      if (data === undefined) continue; // still loading: a later push has it
      const row: Record<string, Json> = { '#': i };
      for (const name of columns)
        row[name] = typeof data[name] === 'string' ? cut(data[name], SHARE_VALUE_CHARS) : (data[name] ?? null);
      sample.push(cut(JSON.stringify(row), SHARE_VALUE_CHARS * (columns.length + 1)));
    }
    const more =
      this.columns.length > columns.length ? `, the first ${columns.length} of ${this.columns.length} columns` : '';
    lines.push(
      sample.length
        ? `sample of the visible rows (JSON, "#" is the row position${more}):`
        : '(the visible rows are still loading)',
    );
    let text = lines.join('\n');
    let kept = 0;
    for (const row of sample) {
      if (text.length + row.length + 300 > SHARE_MAX_CHARS) break;
      text += `\n${row}`;
      kept += 1;
    }
    if (kept < sample.length) text += `\n… ${sample.length - kept} more visible rows not included`;
    return cut(
      `${text}\nThe same page: read_resource ${this.pageUri(first, Math.max(1, last - first))}`,
      SHARE_MAX_CHARS,
    );
  }

  private pageUri(offset: number, limit: number): string {
    let uri = `${this.doc.uri}?offset=${offset}&limit=${limit}&format=json`;
    if (this.sort) uri += `&sort=${encodeURIComponent(this.sort)}`;
    if (this.where) uri += `&where=${encodeURIComponent(this.where)}`;
    return uri;
  }

  private header(name: string, dtype: string | undefined): HTMLElement {
    const button = el(
      'button',
      { cls: 'cell colname', title: dtype ? `${name}: ${dtype}` : name, attrs: { 'data-column': name } },
      name,
    );
    if (!this.sortable) {
      button.disabled = true;
      button.title = 'this table cannot be sorted';
      return button;
    }
    button.addEventListener('click', () => {
      const next = this.sort === name ? `-${name}` : this.sort === `-${name}` ? '' : name;
      this.requery(next, this.where);
    });
    return button;
  }

  private template(): string {
    return `5em repeat(${Math.max(1, this.columns.length)}, minmax(7em, 1fr))`;
  }

  private rowCount(): number {
    return this.total ?? this.known;
  }

  /** Row index -> pixel scale: very long tables map onto a capped spacer height. */
  private scale(): number {
    return Math.max(1, this.rowCount() / MAX_SPACER_ROWS);
  }

  private goTo(row: number): void {
    if (!Number.isFinite(row) || row < 0) return;
    if (this.total === null) this.known = Math.max(this.known, Math.floor(row) + PAGE_ROWS); // rows unknown: look there
    const target = Math.min(Math.floor(row), Math.max(0, this.rowCount() - 1));
    this.sizeSpacer(); // first: a scroll past the old height would be clamped
    this.scroller.scrollTop = (target / this.scale()) * ROW_HEIGHT;
    this.paint();
  }

  private requery(sort: string, where: string): void {
    this.sort = sort;
    this.where = where;
    this.generation += 1;
    this.pages.clear();
    this.inFlight.clear();
    this.failed.clear();
    this.total = null;
    this.known = PAGE_ROWS;
    clear(this.problem);
    for (const b of Array.from(this.head.querySelectorAll<HTMLElement>('[data-column]'))) {
      const col = b.dataset.column ?? '';
      b.dataset.sort = sort === col ? 'asc' : sort === `-${col}` ? 'desc' : '';
    }
    this.scroller.scrollTop = 0;
    this.paint();
  }

  private sizeSpacer(): void {
    this.spacer.style.height = `${Math.ceil(this.rowCount() / this.scale()) * ROW_HEIGHT}px`;
  }

  private paint(): void {
    const count = this.rowCount();
    const scale = this.scale();
    this.sizeSpacer();
    const top = Math.floor((this.scroller.scrollTop / ROW_HEIGHT) * scale);
    const visible = Math.ceil(this.scroller.clientHeight / ROW_HEIGHT) + 1;
    const first = Math.max(0, top);
    const last = Math.min(count, first + visible);
    clear(this.body);
    this.body.style.top = `${this.scroller.scrollTop}px`;
    for (let i = first; i < last; i++) this.body.appendChild(this.row(i));
    const wanted = new Set<number>();
    for (let i = Math.max(0, first - MARGIN_ROWS); i < Math.min(count, last + MARGIN_ROWS); i++)
      wanted.add(Math.floor(i / PAGE_ROWS));
    for (const page of wanted) this.fetch(page);
    this.visible = { first, last };
    if (this.bridge.context.has('frame')) this.bridge.context.changed();
    const range = count
      ? `rows ${(first + 1).toLocaleString()}–${last.toLocaleString()} of ${this.total === null ? `${count.toLocaleString()}+` : count.toLocaleString()}`
      : 'no rows';
    this.status.textContent = this.inFlight.size ? `${range} · loading…` : range;
    this.status.dataset.loading = this.inFlight.size ? 'true' : 'false';
  }

  private rowData(i: number): Record<string, Json> | undefined {
    const page = this.pages.get(Math.floor(i / PAGE_ROWS));
    return page ? page[i % PAGE_ROWS] : this.generation === 0 ? this.seed[i] : undefined;
  }

  private row(i: number): HTMLElement {
    const data = this.rowData(i);
    const row = el(
      'div',
      { cls: 'row', attrs: { 'data-row': String(i) } },
      el('div', { cls: 'cell index' }, String(i)),
    );
    row.style.gridTemplateColumns = this.template();
    for (const name of this.columns) {
      const value = data === undefined ? '…' : cellText(data[name]);
      append(
        row,
        el(
          'div',
          { cls: data !== undefined && (data[name] === null || data[name] === undefined) ? 'cell null' : 'cell' },
          value,
        ),
      );
    }
    return row;
  }

  private fetch(page: number): void {
    if (this.pages.has(page) || this.inFlight.has(page) || this.inFlight.size >= MAX_IN_FLIGHT) return;
    const failed = this.failed.get(page);
    if (failed && failed.at > Date.now()) return; // a timer paints again when it is due
    const generation = this.generation;
    this.inFlight.add(page);
    this.bridge
      .read(this.pageUri(page * PAGE_ROWS, PAGE_ROWS))
      .then(contents => {
        if (generation !== this.generation) return; // a page of an earlier sort or filter
        const rows = JSON.parse(contents[0]?.text ?? '[]') as Record<string, Json>[];
        const info: PageInfo = contents[0]?._meta?.['mcp-notebook/page'] ?? JSON.parse(contents[1]?.text ?? '{}');
        this.pages.set(page, rows);
        if (this.failed.delete(page) && !this.failed.size) clear(this.problem);
        if (this.pages.size > MAX_PAGES) this.pages.delete(this.pages.keys().next().value as number);
        if (typeof info.total_rows === 'number') this.total = info.total_rows;
        else if (info.next) this.known = Math.max(this.known, (page + 2) * PAGE_ROWS);
        else if (rows.length)
          this.total = page * PAGE_ROWS + rows.length; // the last page: the end is known
        else this.known = Math.min(this.known, page * PAGE_ROWS); // past the end: the rows stop earlier
      })
      .catch((err: Error) => {
        if (generation !== this.generation) return;
        clear(this.problem);
        this.problem.appendChild(errorBox(err.message));
        if (this.sort || this.where) {
          this.total = 0; // a sort or filter the table refuses: no rows until it changes
          return;
        }
        const tries = (this.failed.get(page)?.tries ?? 0) + 1; // no hot loop on a page that keeps failing
        const wait = RETRY_MS[Math.min(tries, RETRY_MS.length) - 1];
        this.failed.set(page, { at: Date.now() + wait, tries });
        setTimeout(() => generation === this.generation && this.paint(), wait + 10);
      })
      .finally(() => {
        if (generation !== this.generation) return;
        this.inFlight.delete(page);
        this.paint();
      });
  }
}
