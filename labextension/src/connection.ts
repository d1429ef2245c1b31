/**
 * One notebook's link to the mcp-notebook hub in its kernel: a comm to the kernel-side target
 * `mcp_notebook.document`. It pushes the live document (debounced) and the active cell and
 * selection, and receives the hub's state. It never depends on the hub being there: no target
 * (the extension is not loaded in the kernel) simply means "absent".
 */
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { describeImages, IDescribedImage } from './figures';
import { ISetupLine } from './setup';

export const COMM_TARGET = 'mcp_notebook.document';
const DOC_DEBOUNCE_MS = 300;
const ACTIVE_DEBOUNCE_MS = 150;
const MAX_TEXT = 2000; // characters kept of each text output (the hub only shows previews)
const MAX_PUSH_CHARS = 8 * 1024 * 1024;
const SUBSHELL_WAIT_MS = 5000;

/** Where the link stands. */
export type LinkStatus =
  | 'no-kernel' // the notebook has no kernel (yet)
  | 'probing' // a comm open is under way
  | 'absent' // the kernel has no hub target: mcp-notebook is not loaded
  | 'loading' // %load_ext mcp_notebook is running
  | 'connected'; // the comm is open: `state` holds the hub's state

export interface IClientRow {
  session: string;
  client: string;
  version: string;
  subscriptions: string[];
  streams: number;
  idle?: number; // seconds since a stateless (2026-07-28) client's last request
}

export interface IHubState {
  running: boolean;
  url: string | null;
  revisions: string[];
  clients: IClientRow[];
  listens: { id: string; uris: string[]; list_changed: boolean }[];
  watched: string[];
  recent: string[];
  notifications_total: number;
  variables: { name: string; type: string; hidden: boolean }[];
  variables_more: number;
  document: { source: string | null; modified: string | null } | null;
  pid?: number;
  mcp_notebook?: string;
  /** Set-up lines naming the kernel environment's mcp-notebook by absolute path (newer hubs). */
  setup?: ISetupLine[];
}

/** A deep-enough copy of the notebook JSON with outputs cut down to what the hub summarizes. */
export function trimNotebook(nb: any): any {
  const cells = Array.isArray(nb.cells) ? nb.cells : [];
  return {
    ...nb,
    cells: cells.map((cell: any) => {
      if (!Array.isArray(cell.outputs)) {
        const { attachments, ...rest } = cell; // eslint-disable-line @typescript-eslint/no-unused-vars
        return rest;
      }
      return { ...cell, outputs: cell.outputs.map(trimOutput) };
    }),
  };
}

function clip(value: unknown): unknown {
  const text = Array.isArray(value) ? value.join('') : value;
  return typeof text === 'string' && text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) : text;
}

function trimOutput(out: any): any {
  if (!out || typeof out !== 'object') {
    return out;
  }
  if (out.output_type === 'stream') {
    return { ...out, text: clip(out.text) };
  }
  if (out.output_type === 'error') {
    return { output_type: 'error', ename: out.ename, evalue: clip(out.evalue), traceback: [] };
  }
  const data: Record<string, unknown> = {};
  for (const [mime, value] of Object.entries(out.data ?? {})) {
    const textual = mime.startsWith('text/') || mime.endsWith('json');
    data[mime] = textual ? clip(typeof value === 'string' || Array.isArray(value) ? value : JSON.stringify(value)) : '';
  }
  return { ...out, data, metadata: {} };
}

export class HubConnection {
  constructor(readonly panel: NotebookPanel) {
    const ctx = panel.sessionContext;
    ctx.kernelChanged.connect(this._onKernelChanged, this);
    ctx.statusChanged.connect(this._onStatus, this);
    panel.content.activeCellChanged.connect(this._scheduleActive, this);
    panel.content.selectionChanged.connect(this._scheduleActive, this);
    panel.context.ready.then(() => {
      if (this._disposed) {
        return;
      }
      const model = panel.context.model;
      model.contentChanged.connect(this._scheduleDocument, this);
      model.cells.changed.connect(this._scheduleDocument, this);
    });
    void ctx.ready.then(() => this.probe());
  }

  get status(): LinkStatus {
    return this._status;
  }

  get state(): IHubState | null {
    return this._state;
  }

  /** The last message from the kernel (a command's result or a load failure). */
  get message(): string {
    return this._message;
  }

  /** Whether that message reports a failure. */
  get messageIsError(): boolean {
    return this._messageIsError;
  }

  /** When the document was last pushed (ms since epoch), 0 if never. */
  get lastPush(): number {
    return this._lastPush;
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get kernel(): Kernel.IKernelConnection | null {
    return this.panel.sessionContext.session?.kernel ?? null;
  }

  /** Open the comm if the kernel has the target; "absent" if it refuses. */
  probe(): void {
    const kernel = this.kernel;
    if (this._disposed || this._comm || this._status === 'probing') {
      return;
    }
    if (!kernel) {
      this._set('no-kernel');
      return;
    }
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(COMM_TARGET);
    } catch (err) {
      this._set('absent', String(err));
      return;
    }
    this._comm = comm;
    this._set('probing');
    comm.onMsg = msg => this._onMsg(comm, msg);
    comm.onClose = () => this._onClose(comm);
    void this._open(kernel, comm);
  }

  /**
   * With JupyterLab 4.4+ and a kernel with subshells (ipykernel 7), the comm gets its own subshell:
   * open it there, so the kernel serves this comm while a cell runs on the main shell.
   */
  private async _open(kernel: Kernel.IKernelConnection, comm: Kernel.IComm): Promise<void> {
    const started: Promise<void> | undefined = (comm as any).subshellStarted;
    try {
      await kernel.info;
      const useSubshell =
        started !== undefined &&
        (kernel as any).supportsSubshells === true &&
        (comm as any).commsOverSubshells !== 'disabled';
      if (useSubshell) {
        await Promise.race([started, new Promise(resolve => window.setTimeout(resolve, SUBSHELL_WAIT_MS))]);
      }
    } catch {
      // no subshell: the main shell serves the comm between cells
    }
    if (comm !== this._comm || comm.isDisposed) {
      return;
    }
    try {
      comm.open({ version: 1, path: this.panel.context.path });
    } catch {
      this._onClose(comm);
    }
  }

  /** Run `%load_ext mcp_notebook` silently, then connect. */
  async load(): Promise<void> {
    const kernel = this.kernel;
    if (!kernel || this._status === 'connected') {
      return;
    }
    this._set('loading', '');
    try {
      const future = kernel.requestExecute({ code: '%load_ext mcp_notebook', silent: true, store_history: false });
      let error = '';
      future.onIOPub = msg => {
        if (msg.header.msg_type === 'error') {
          const content = msg.content as KernelMessage.IErrorMsg['content'];
          error = `${content.ename}: ${content.evalue}`;
        }
      };
      const reply = await future.done;
      if (reply.content.status !== 'ok') {
        const content = reply.content as any;
        this._set('absent', `could not load mcp-notebook: ${error || `${content.ename}: ${content.evalue}`}`);
        return;
      }
    } catch (err) {
      this._set('absent', `could not load mcp-notebook: ${err}`);
      return;
    }
    this._status = 'absent';
    this.probe();
  }

  /** The notebook became the current one: tell the hub where the user is (several notebooks, one kernel). */
  focus(): void {
    this._scheduleActive();
  }

  /** A panel command: hide/show a variable, start/stop the hub, refresh the state. */
  command(command: 'hide' | 'show' | 'start' | 'stop' | 'state', name?: string): void {
    this._send({ type: 'command', command, name: name ?? null });
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    window.clearTimeout(this._docTimer);
    window.clearTimeout(this._activeTimer);
    const comm = this._comm;
    this._comm = null;
    if (comm && !comm.isDisposed) {
      try {
        comm.close({ reason: 'notebook closed' });
      } catch {
        // the kernel may already be gone
      }
    }
    Signal.clearData(this);
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  // -- kernel events -------------------------------------------------------------------
  private _onKernelChanged(): void {
    this._drop();
    this._set(this.kernel ? 'absent' : 'no-kernel');
    void this.panel.sessionContext.ready.then(() => this.probe());
  }

  private _onStatus(_: unknown, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      this._drop();
      this._set(status === 'dead' ? 'no-kernel' : 'absent');
      this._reprobe = true;
    } else if (status === 'idle' && this._reprobe && !this._comm) {
      this._reprobe = false; // a restarted kernel may load the hub from its config
      this.probe();
    }
  }

  /** After a cell that may have loaded the hub (`%load_ext`, `%mcp start`, an import), try again. */
  cellExecuted(source: string, cellId?: string): void {
    if (!this._comm && this._status !== 'loading' && /mcp/.test(source)) {
      this.probe();
    } else if (this._comm && this._status === 'connected') {
      this.command('state');
      if (cellId) {
        this._send({ type: 'command', command: 'describe', cell_id: cellId }); // its figures' descriptions
      }
    }
  }

  private _drop(): void {
    const comm = this._comm;
    this._comm = null;
    this._state = null;
    if (comm && !comm.isDisposed) {
      comm.dispose();
    }
  }

  // -- comm messages ---------------------------------------------------------------------
  private _onMsg(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    if (comm !== this._comm) {
      return;
    }
    const data = msg.content.data as any;
    if (data?.type === 'state') {
      const first = this._status !== 'connected';
      this._state = data.state as IHubState;
      this._set('connected');
      if (first) {
        this._pushDocument();
        this._pushActive();
      }
    } else if (data?.type === 'descriptions' && typeof data.cell_id === 'string' && Array.isArray(data.outputs)) {
      describeImages(this.panel, data.cell_id, data.outputs as IDescribedImage[]);
    } else if (data?.type === 'result') {
      this._message = String(data.message ?? '');
      this._messageIsError = data.ok === false;
      this._changed.emit();
    }
  }

  private _onClose(comm: Kernel.IComm): void {
    if (comm !== this._comm) {
      return;
    }
    this._comm = null;
    this._state = null;
    this._set('absent');
  }

  private _send(data: any): boolean {
    const comm = this._comm;
    if (!comm || comm.isDisposed || this._status !== 'connected') {
      return false;
    }
    try {
      comm.send(data);
      return true;
    } catch {
      return false;
    }
  }

  private _set(status: LinkStatus, message?: string): void {
    this._status = status;
    if (message !== undefined) {
      this._message = message;
      this._messageIsError = message.startsWith('could not');
    }
    if (!this._disposed) {
      this._changed.emit();
    }
  }

  // -- pushes ------------------------------------------------------------------------------
  private _scheduleDocument(): void {
    if (this._status !== 'connected') {
      return;
    }
    window.clearTimeout(this._docTimer);
    this._docTimer = window.setTimeout(() => this._pushDocument(), DOC_DEBOUNCE_MS);
  }

  private _scheduleActive(): void {
    if (this._status !== 'connected') {
      return;
    }
    window.clearTimeout(this._activeTimer);
    this._activeTimer = window.setTimeout(() => this._pushActive(), ACTIVE_DEBOUNCE_MS);
  }

  private _pushDocument(): void {
    const model = this.panel.context.isReady ? this.panel.context.model : null;
    if (!model) {
      return;
    }
    const nb = trimNotebook(model.toJSON());
    if (JSON.stringify(nb).length > MAX_PUSH_CHARS) {
      return; // the hub falls back to the saved file
    }
    if (this._send({ type: 'document', nb, path: this.panel.context.path, dirty: model.dirty })) {
      this._lastPush = Date.now();
      this._changed.emit();
    }
  }

  private _pushActive(): void {
    const notebook = this.panel.content;
    const active = notebook.activeCell?.model.id ?? null;
    const selected = notebook.widgets.filter(cell => notebook.isSelectedOrActive(cell)).map(cell => cell.model.id);
    this._send({ type: 'active', active, selected, path: this.panel.context.path });
  }

  private _comm: Kernel.IComm | null = null;
  private _status: LinkStatus = 'no-kernel';
  private _state: IHubState | null = null;
  private _message = '';
  private _messageIsError = false;
  private _lastPush = 0;
  private _reprobe = false;
  private _disposed = false;
  private _docTimer = 0;
  private _activeTimer = 0;
  private _changed = new Signal<this, void>(this);
}
