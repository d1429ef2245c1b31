/** The status-bar item: is the current notebook's hub on, and how many clients are connected. */
import { Widget } from '@lumino/widgets';

import { HubConnection } from './connection';

export class HubStatus extends Widget {
  constructor(private readonly _open: () => void) {
    super();
    this.addClass('mcp-nb-status');
    this.node.title = 'mcp-notebook hub (click for the panel)';
    this.node.addEventListener('click', () => this._open());
    this._render();
  }

  setConnection(conn: HubConnection | null): void {
    if (conn === this._conn) {
      return;
    }
    this._conn?.changed.disconnect(this._render, this);
    this._conn = conn;
    conn?.changed.connect(this._render, this);
    this._render();
  }

  private _render(): void {
    const conn = this._conn;
    const state = conn?.state;
    let text = 'MCP: –';
    if (conn?.status === 'connected' && state) {
      const n = state.clients.length; // sessions and recently seen stateless clients (who also own the listens)
      text = state.running ? `MCP: on · ${n} client${n === 1 ? '' : 's'}` : 'MCP: off';
    } else if (conn?.status === 'absent') {
      text = 'MCP: not loaded';
    }
    this.node.textContent = text;
    this.node.dataset.status = conn?.status ?? 'none';
  }

  private _conn: HubConnection | null = null;
}
