// Keeping the assistant posted (ui/update-model-context): only where the host declares it, only
// after the user turned a view's control on, and only text the hub served (already masked). Each
// view contributes a section (the changes feed, the frame explorer shown); one push carries them
// all and replaces the previous one, at most one push per PUSH_INTERVAL_MS, at most MAX_PUSH_CHARS.
import { App } from '@modelcontextprotocol/ext-apps';
import { el } from './dom';

const PUSH_INTERVAL_MS = 2000; // at most one push per 2 s: a burst of changes becomes one push
const SETTLE_MS = 250; // wait this long after a change, so a scroll or a many-name cell pushes once
const MAX_PUSH_CHARS = 8000; // one push, all sections (each section has its own, smaller bound)
const STOPPED = 'The user stopped sharing this mcp-notebook view: what it shared before is out of date.';

/** A section's text, computed when a push goes out (so a burst of changes costs one rendering). */
export type Producer = () => string;

type Listener = (sent: string | null, error: string | null) => void;

/** Text cut to `max` characters, marked where it was cut. */
export function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

export function clock(date = new Date()): string {
  return `${date.toISOString().slice(11, 19)} UTC`;
}

export class ModelContext {
  private readonly sections = new Map<string, Producer>();
  private readonly listeners = new Map<string, Listener>(); // per section: its control's status
  private timer: ReturnType<typeof setTimeout> | null = null;
  private lastAt = -Infinity;
  private last = ''; // the text of the last push the host took (not sent twice)
  private shared = false; // the host holds something of ours: stopping sharing must replace it

  constructor(private readonly app: App) {}

  /** The host takes context updates (as text, or without naming any content kind). */
  get supported(): boolean {
    const kinds = this.app.getHostCapabilities()?.updateModelContext;
    return !!kinds && (Object.keys(kinds).length === 0 || 'text' in kinds);
  }

  /** Share a section (the user turned its control on) or stop sharing it (null). */
  set(section: string, producer: Producer | null): void {
    if (producer) this.sections.set(section, producer);
    else if (!this.sections.delete(section)) return;
    this.changed();
  }

  has(section: string): boolean {
    return this.sections.has(section);
  }

  /** Something a shared section shows changed: push it (settled, rate-limited). */
  changed(): void {
    if (this.timer !== null || !this.supported) return;
    const wait = Math.max(SETTLE_MS, this.lastAt + PUSH_INTERVAL_MS - performance.now());
    this.timer = setTimeout(() => void this.push(), wait);
  }

  /** Called after each push with the text sent (or the error); one per section, the newest control's. */
  listen(section: string, listener: Listener): void {
    this.listeners.set(section, listener);
  }

  /** The sections' text (what dedupes), or the stop notice once sharing ended. */
  private body(): string {
    if (!this.sections.size) return this.shared ? STOPPED : '';
    return Array.from(this.sections.values(), produce => produce()).join('\n\n');
  }

  private async push(): Promise<void> {
    this.timer = null;
    const body = this.body();
    if (!body || body === this.last) return; // nothing shared, or the same as the last push
    this.lastAt = performance.now();
    const head = `[mcp-notebook views, ${clock()}] Shared by the user from the notebook views; this replaces earlier updates from this view.`;
    const text = cut(`${head}\n\n${body}`, MAX_PUSH_CHARS);
    let error: string | null = null;
    try {
      await this.app.updateModelContext({ content: [{ type: 'text', text }] });
      this.last = body;
      this.shared = this.sections.size > 0;
    } catch (err) {
      this.last = ''; // refused: the next change tries again (still at most one push per interval)
      error = (err as Error).message || 'the host refused the update';
    }
    for (const listener of this.listeners.values()) listener(error ? null : text, error);
  }
}

/** A checkbox sharing a section while checked (`start` gives its text's producer), with the last
 * push's time; none at all where the host takes no context. */
export function shareToggle(
  context: ModelContext,
  section: string,
  label: string,
  testid: string,
  start: () => Producer,
): HTMLElement | null {
  if (!context.supported) return null;
  const box = el('input', { attrs: { type: 'checkbox', 'data-testid': testid } });
  const state = el('span', { cls: 'muted', attrs: { 'data-testid': `${testid}-state` } });
  box.addEventListener('change', () => {
    state.textContent = '';
    context.listen(section, (sent, error) => {
      if (box.checked)
        state.textContent = error ? `(not sent: ${error})` : sent ? `(sent ${clock()})` : state.textContent;
    });
    context.set(section, box.checked ? start() : null);
  });
  const hint =
    'Off until you turn it on. Sends a short summary (masked like every read) to the assistant for its next turns.';
  return el('label', { cls: 'share', title: hint }, box, ` ${label} `, state);
}
