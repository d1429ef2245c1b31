// The changes feed: long-polls changes_since through the host and shows each batch as it lands;
// a URI opens its own view in place (frame explorer, output viewer, or the resource as text).
import { Bridge, Json } from "./bridge";
import { append, clear, el, errorBox } from "./dom";

const WAIT_SECONDS = 20;
const MAX_ENTRIES = 200;

export type Opener = (uri: string) => void;

export class ChangesFeed {
  readonly node = el("div", { cls: "changes" });
  private readonly list = el("div", { cls: "feed", attrs: { "data-testid": "feed" } });
  private readonly state = el("div", { cls: "muted" }, "watching for changes…");
  private stopped = false;

  constructor(private readonly bridge: Bridge, private cursor: string, first: Json, private readonly open: Opener) {
    append(this.node, el("div", { cls: "title" }, el("strong", {}, "Notebook changes"), " since this view opened"), this.state, this.list);
    if (first?.changes?.length) this.add(first);
    void this.poll();
  }

  stop(): void {
    this.stopped = true;
  }

  private async poll(): Promise<void> {
    let backoff = 1000;
    while (!this.stopped) {
      try {
        const result = await this.bridge.tool("changes_since", { cursor: this.cursor, wait_seconds: WAIT_SECONDS });
        const doc = result.structuredContent ?? {};
        if (typeof doc.cursor === "string") this.cursor = doc.cursor;
        if (doc.changes?.length || doc.reset) this.add(doc);
        this.state.textContent = `watching for changes… (last checked ${new Date().toLocaleTimeString()})`;
        backoff = 1000;
      } catch (err) {
        this.state.replaceChildren(errorBox(`${(err as Error).message} — retrying`));
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 15000);
      }
    }
  }

  private add(doc: Json): void {
    const last = doc.changes?.[doc.changes.length - 1];
    const when = last?.time ? new Date(last.time).toLocaleTimeString() : new Date().toLocaleTimeString();
    const entry = el("div", { cls: "entry" }, el("div", { cls: "when" }, when));
    if (doc.reset) append(entry, el("div", { cls: "muted" }, String(doc.note ?? "the kernel restarted")));
    for (const line of doc.summary ?? []) append(entry, el("div", { cls: "summary" }, String(line)));
    const links = el("div", { cls: "links" });
    for (const uri of doc.changed ?? []) {
      const button = el("button", { cls: "link", attrs: { "data-uri": String(uri) } }, String(uri));
      button.addEventListener("click", () => this.open(String(uri)));
      links.appendChild(button);
    }
    entry.appendChild(links);
    this.list.prepend(entry);
    while (this.list.childElementCount > MAX_ENTRIES) this.list.lastElementChild?.remove();
  }
}

/** A resource shown as text (for URIs that have no view of their own). */
export async function resourceText(bridge: Bridge, uri: string): Promise<HTMLElement> {
  const node = el("div", { cls: "resource" }, el("div", { cls: "title" }, el("strong", {}, uri)));
  try {
    for (const item of await bridge.read(uri)) {
      append(node, el("pre", { cls: "text" }, item.text ?? `(${item.mimeType ?? "binary"} content)`));
    }
  } catch (err) {
    clear(node);
    node.appendChild(errorBox((err as Error).message));
  }
  return node;
}
