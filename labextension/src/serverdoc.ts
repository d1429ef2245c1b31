/**
 * The live document of a notebook whose kernel has no mcp-notebook hub (R, xeus-python, …): pushed
 * to the server extension's `mcp-notebook/kernels/{id}/document`, which serves that kernel from the
 * server's side (the comm reaches only an in-kernel hub). Debounced like the comm's pushes; best
 * effort: a server without the route (404) or a kernel that has a hub (409) is left alone.
 */
import { NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';

import { HubConnection, trimNotebook } from './connection';

const DEBOUNCE_MS = 500;
const MAX_PUSH_CHARS = 8 * 1024 * 1024;

export class ServerDocument {
  constructor(
    private panel: NotebookPanel,
    private conn: HubConnection,
  ) {
    void panel.context.ready.then(() => {
      panel.context.model.contentChanged.connect(this._schedule, this);
      this._schedule();
    });
    conn.changed.connect(this._schedule, this);
    panel.sessionContext.kernelChanged.connect(() => {
      this._refused = null;
      this._schedule();
    });
  }

  dispose(): void {
    window.clearTimeout(this._timer);
    this._disposed = true;
  }

  private _schedule(): void {
    if (this._disposed || this.conn.status !== 'absent') {
      return; // only a kernel without a hub: the comm carries the others'
    }
    window.clearTimeout(this._timer);
    this._timer = window.setTimeout(() => void this._push(), DEBOUNCE_MS);
  }

  private async _push(): Promise<void> {
    const kernelId = this.panel.sessionContext.session?.kernel?.id;
    const model = this.panel.context.isReady ? this.panel.context.model : null;
    if (!kernelId || !model || this._refused === kernelId || this.conn.status !== 'absent') {
      return;
    }
    const body = JSON.stringify({ nb: trimNotebook(model.toJSON()), path: this.panel.context.path });
    if (body.length > MAX_PUSH_CHARS) {
      return; // the server falls back to the saved file
    }
    const settings = ServerConnection.makeSettings();
    const base = settings.baseUrl.endsWith('/') ? settings.baseUrl : settings.baseUrl + '/';
    try {
      const reply = await ServerConnection.makeRequest(
        `${base}mcp-notebook/kernels/${kernelId}/document`,
        { method: 'POST', body },
        settings,
      );
      if (reply.status === 404 || reply.status === 409) {
        this._refused = kernelId; // no such route, or the kernel has a hub: stop until it changes
      }
    } catch {
      // the server is away: the next edit tries again
    }
  }

  private _timer = 0;
  private _disposed = false;
  private _refused: string | null = null;
}
