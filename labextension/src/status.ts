/** The status-bar item: is the current notebook's hub on, and how many clients are connected. */
import { ConnectionView } from './view';

export class HubStatus extends ConnectionView {
  constructor(private readonly _open: () => void) {
    super();
    this.addClass('mcp-nb-status');
    this.node.title = 'mcp-notebook hub (click for the panel)';
    this.node.addEventListener('click', () => this._open());
    this.render();
  }

  protected render(): void {
    const conn = this.conn;
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
}
