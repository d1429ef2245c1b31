/** The side panel: the current notebook's hub, its clients, variables and set-up lines. */
import { Clipboard } from '@jupyterlab/apputils';
import { HubConnection, IHubState } from './connection';
import { button, h } from './dom';
import { ISetupLine, SETUP_LINES } from './setup';
import { ConnectionView } from './view';

const SHOWN_VARIABLES = 200;
const COPIED_MS = 1500;

export class HubPanel extends ConnectionView {
  constructor() {
    super();
    this.id = 'mcp-notebook-panel';
    this.addClass('mcp-nb-panel');
    this.title.caption = 'mcp-notebook: the MCP hub of this notebook';
    this.render();
  }

  protected onAfterShow(): void {
    this.render();
  }

  protected render(): void {
    if (!this.isVisible && this.isAttached) {
      this._stale = true;
      return;
    }
    this._stale = false;
    const conn = this.conn;
    const body = h('div', { class: 'mcp-nb-body' });
    body.appendChild(h('div', { class: 'mcp-nb-title' }, 'MCP hub'));
    if (!conn) {
      body.appendChild(h('p', { class: 'mcp-nb-muted' }, 'Open a notebook to see its hub.'));
      this._replace(body);
      return;
    }
    const name = conn.panel.context.path.split('/').pop() ?? '';
    const state = conn.state;
    const status = conn.status;
    const badge =
      status === 'connected'
        ? state?.running
          ? ['running', 'mcp-nb-on']
          : ['stopped', 'mcp-nb-off']
        : status === 'probing' || status === 'loading'
          ? ['connecting…', 'mcp-nb-off']
          : status === 'no-kernel'
            ? ['no kernel', 'mcp-nb-off']
            : ['not loaded', 'mcp-nb-off'];
    body.appendChild(
      h(
        'div',
        { class: 'mcp-nb-header' },
        h('span', { class: 'mcp-nb-notebook', title: conn.panel.context.path }, name),
        h('span', { class: `mcp-nb-badge ${badge[1]}`, 'data-status': badge[0] }, badge[0]),
      ),
    );
    if (conn.message) {
      body.appendChild(
        h('div', { class: `mcp-nb-message${conn.messageIsError ? ' mcp-nb-error' : ''}` }, conn.message),
      );
    }
    if (status === 'absent' || status === 'loading') {
      body.appendChild(
        h(
          'p',
          { class: 'mcp-nb-muted' },
          'This kernel has no MCP hub. Loading it runs ',
          h('code', {}, '%load_ext mcp_notebook'),
          ' in the kernel (mcp-notebook must be installed in its environment).',
        ),
      );
      const load = button('Load mcp-notebook', 'mcp-nb-load', () => void conn.load());
      load.disabled = status === 'loading';
      body.appendChild(load);
    } else if (status === 'connected' && state) {
      this._hub(body, conn, state);
    }
    body.appendChild(this._setup(state?.setup?.length ? state.setup : SETUP_LINES));
    this._replace(body);
  }

  private _hub(body: HTMLElement, conn: HubConnection, state: IHubState): void {
    const toggle = state.running
      ? button('Stop', 'mcp-nb-stop', () => conn.command('stop'), 'Stop the hub (clients are disconnected)')
      : button('Start', 'mcp-nb-start', () => conn.command('start'), 'Start the hub again');
    body.appendChild(
      h(
        'div',
        { class: 'mcp-nb-section mcp-nb-endpoint' },
        state.running ? h('div', {}, 'endpoint ', h('code', { class: 'mcp-nb-url' }, state.url ?? '')) : null,
        h('div', { class: 'mcp-nb-muted' }, `revisions ${state.revisions.join(', ')}`),
        h('div', { class: 'mcp-nb-muted mcp-nb-doc' }, documentLine(conn, state)),
        h(
          'div',
          { class: 'mcp-nb-actions' },
          toggle,
          button('Refresh', 'mcp-nb-refresh', () => conn.command('state')),
        ),
      ),
    );
    if (!state.running) {
      return;
    }
    const clients = h(
      'div',
      { class: 'mcp-nb-section mcp-nb-clients' },
      h('h3', {}, `Clients (${state.clients.length})`),
    );
    if (state.clients.length === 0 && state.listens.length === 0) {
      clients.appendChild(h('div', { class: 'mcp-nb-muted' }, 'No client connected. Set one up below.'));
    }
    for (const c of state.clients) {
      clients.appendChild(
        h(
          'div',
          { class: 'mcp-nb-client' },
          h(
            'div',
            {},
            h('b', { class: 'mcp-nb-client-name' }, c.client),
            ` · MCP ${c.version} · `,
            c.session === 'stateless' ? `stateless, seen ${c.idle ?? 0}s ago` : h('code', {}, c.session),
          ),
          h(
            'div',
            { class: 'mcp-nb-muted' },
            c.subscriptions.length ? `watching ${c.subscriptions.join(', ')}` : 'no subscriptions',
          ),
        ),
      );
    }
    for (const l of state.listens) {
      clients.appendChild(
        h(
          'div',
          { class: 'mcp-nb-client' },
          h('div', {}, h('b', {}, 'listen stream'), ' ', h('code', {}, l.id)),
          h(
            'div',
            { class: 'mcp-nb-muted' },
            `watching ${l.uris.join(', ') || '—'}${l.list_changed ? ' + list changes' : ''}`,
          ),
        ),
      );
    }
    body.appendChild(clients);

    const vars = h(
      'div',
      { class: 'mcp-nb-section mcp-nb-variables' },
      h('h3', {}, `Variables (${state.variables.filter(v => !v.hidden).length} exposed)`),
    );
    if (state.variables.length === 0) {
      vars.appendChild(h('div', { class: 'mcp-nb-muted' }, 'No variables exposed yet.'));
    }
    for (const v of state.variables.slice(0, SHOWN_VARIABLES)) {
      const toggleVar = button(
        v.hidden ? 'show' : 'hide',
        v.hidden ? 'mcp-nb-show' : 'mcp-nb-hide',
        () => conn.command(v.hidden ? 'show' : 'hide', v.name),
        v.hidden ? `Expose ${v.name} to MCP clients again (%mcp show)` : `Hide ${v.name} from MCP clients (%mcp hide)`,
      );
      vars.appendChild(
        h(
          'div',
          { class: `mcp-nb-var${v.hidden ? ' mcp-nb-hidden' : ''}`, 'data-name': v.name },
          h('code', { class: 'mcp-nb-var-name' }, v.name),
          h('span', { class: 'mcp-nb-muted mcp-nb-var-type' }, v.type),
          toggleVar,
        ),
      );
    }
    if (state.variables_more > 0) {
      vars.appendChild(h('div', { class: 'mcp-nb-muted' }, `… and ${state.variables_more} more`));
    }
    body.appendChild(vars);

    const recent = h(
      'div',
      { class: 'mcp-nb-section mcp-nb-recent' },
      h('h3', {}, `Recent notifications (${state.notifications_total})`),
    );
    const list = h('ul', {});
    for (const line of [...state.recent].reverse().slice(0, 10)) {
      list.appendChild(h('li', {}, h('code', {}, line)));
    }
    recent.appendChild(state.recent.length ? list : h('div', { class: 'mcp-nb-muted' }, 'None yet.'));
    body.appendChild(recent);
  }

  private _setup(lines: ISetupLine[]): HTMLElement {
    const box = h(
      'div',
      { class: 'mcp-nb-section mcp-nb-setup' },
      h('h3', {}, 'Client set-up'),
      h(
        'div',
        { class: 'mcp-nb-muted' },
        'Each line configures the stdio bridge, which finds this kernel by itself (no token).',
      ),
    );
    for (const s of lines) {
      const copied = (this._copiedUntil.get(s.line) ?? 0) > Date.now();
      const copy = button(
        copied ? 'Copied' : 'Copy',
        'mcp-nb-copy',
        () => {
          Clipboard.copyToSystem(s.line);
          this._copiedUntil.set(s.line, Date.now() + COPIED_MS);
          this.render();
          window.setTimeout(() => this.render(), COPIED_MS + 50);
        },
        `Copy the ${s.client} set-up line`,
      );
      box.appendChild(
        h(
          'div',
          { class: 'mcp-nb-setup-row' },
          h('div', { class: 'mcp-nb-muted' }, s.client),
          h('div', { class: 'mcp-nb-setup-line' }, h('code', {}, s.line), copy),
        ),
      );
    }
    return box;
  }

  private _replace(body: HTMLElement): void {
    this.node.replaceChildren(body);
  }

  protected onAfterAttach(): void {
    if (this._stale) {
      this.render();
    }
  }

  private _stale = false;
  private _copiedUntil = new Map<string, number>();
}

function documentLine(conn: HubConnection, state: IHubState): string {
  if (conn.lastPush) {
    return `live document: pushed ${new Date(conn.lastPush).toLocaleTimeString()}`;
  }
  const doc = state.document;
  return doc?.source ? `document: ${doc.source}` : 'document: waiting for the first push';
}
