"""IPython glue: start and stop the hub inside a shell, the post-cell hook, kernel facts."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import portable
from ..budget import Limits
from ..capture import CellCapture
from ..figures.live import FigureReader
from ..lazy_re import compile_all
from ..logs import HubLog, log
from ..protocol.server import McpServer, ServerSettings
from ..providers.base import LazyProvider
from ..providers.cells import CellsProvider, cell_uri
from ..providers.custom import CUSTOM
from ..providers.frames import (
    CONNECTION_LIBRARIES,
    DATABASES_PREFIX,
    ENGINE_LIBRARIES,
    FRAMES_PREFIX,
    TABLE_LIBRARIES,
)
from ..providers.history.diffs import DiffsProvider
from ..providers.history.lineage import Lineage
from ..providers.history.sessions import HistoryProvider
from ..providers.kernel_info import KernelProvider
from ..providers.notebook import NotebookProvider
from ..providers.variables import EVERY_TYPE, Serves, VariablesProvider
from ..providers.views import ViewsProvider
from ..redact import REDACTOR, ConfiguredNames
from ..resources import Resources
from ..revisions import ALL_VERSIONS
from ..runtime import log_path, remove_runtime_file, sweep, write_runtime_file
from ..transport.server import HttpTransport
from ..version import __version__
from .activity import recent_notifications
from .config import MCPHub

if TYPE_CHECKING:
    from ..transport.control import ControlCarrier


class ConnectionInfo(dict):
    """Connection details; the token is in the dict but never in its repr (cell outputs get shared)."""

    def __repr__(self) -> str:
        shown = {k: ("***" if k == "token" and v else v) for k, v in self.items()}
        return f"ConnectionInfo({shown!r})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


class KernelHub:
    """One running hub: providers, protocol server, HTTP transport, hooks and runtime file."""

    def __init__(self, shell: Any, config: MCPHub | None = None):
        self.shell = shell
        self.config = config or MCPHub(parent=shell)
        # The settings as providers and the cell hooks see them: max_read_chars at the reply's scale,
        # traits kept as plain attributes between changes.
        self.limits = cfg = Limits(self.config)
        self.token = cfg.token or secrets.token_urlsafe(32)
        REDACTOR.add([self.token])  # the hub's own token never leaves in any content
        register_configurable(shell, self.config)
        self.started_at = time.time()
        self.cell_started: float | None = None  # while a cell runs (nb://kernel's state: busy)
        self.last_execution: float | None = None  # when the last cell finished
        self.resources = Resources()
        self._lazy: list[LazyProvider] = []  # rooms imported at first use, or after the loading cell
        self.variables = VariablesProvider(
            shell.user_ns, getattr(shell, "user_ns_hidden", {}), ConfiguredNames(cfg), cfg
        )
        self.resources.add_provider(KernelProvider(self.summary, self.resources.facts, self.resources.variable_name))
        self.resources.add_provider(self.variables)
        self._add_tables(cfg)
        self.capture = CellCapture(shell, cfg)
        self.figures = FigureReader(shell, self.config)
        self.capture.annotate = self.figures.annotate
        cells = CellsProvider(self.capture, cfg)
        self.resources.add_provider(cells)
        self._add_lineage(shell, cells)
        self.notebook = NotebookProvider(self.notebook_path, cfg, self.capture.seq_for_cell_id)
        self.resources.add_provider(self.notebook)
        self.resources.add_provider(ViewsProvider())  # the MCP Apps views (listed to Apps clients only)
        self.resources.add_provider(CUSTOM)  # last: user templates never shadow the nb:// resources
        self.server = McpServer(self.resources, self._settings())
        self.server.core.tool_setup.append(_add_nb_tools)  # when the tools are made (at their first use)
        self.transport: HttpTransport | None = None
        self.control: ControlCarrier | None = None
        self._control_held: tuple[Any, Any] | None = None  # (stream, kernel) while _hold_control stands in
        self.runtime_file: Path | None = None
        self._hook_registered = False
        self._later: threading.Thread | None = None
        self._later_due = False
        self.log: HubLog | None = None
        self._sigterm: Any = None  # our SIGTERM handler while installed
        self._previous_sigterm: Any = None

    def _add_tables(self, cfg: Limits) -> None:
        """Frames and databases over the variables, each adding its links to nb://vars rows. The
        tables room is imported at its first use (a frame's row, read or listing), not here."""
        variables = self.variables

        def frames() -> Any:
            from ..providers.frames.provider import FramesProvider

            return FramesProvider(variables, cfg)

        def databases() -> Any:
            from ..providers.frames.databases import DatabasesProvider

            return DatabasesProvider(variables, cfg)

        tabular, connections = (
            Serves(libraries=TABLE_LIBRARIES | ENGINE_LIBRARIES),
            Serves(libraries=CONNECTION_LIBRARIES),
        )
        lazy_frames = LazyProvider((FRAMES_PREFIX,), frames, lists_nothing=lambda: variables.serves_none(tabular))
        lazy_dbs = LazyProvider(
            (DATABASES_PREFIX,), databases, lists_nothing=lambda: variables.serves_none(connections)
        )
        variables.rows.register(tabular, lambda *a: lazy_frames.real().index_links(*a))
        variables.rows.register(connections, lambda *a: lazy_dbs.real().index_links(*a))
        # a lazy frame's repr may run its query
        variables.reprs.register(Serves(libraries=ENGINE_LIBRARIES), lambda v: lazy_frames.real().engine_repr(v))
        self.resources.add_provider(lazy_frames)
        self.resources.add_provider(lazy_dbs)
        self._lazy += [lazy_frames, lazy_dbs]

    def _add_lineage(self, shell: Any, cells: CellsProvider) -> None:
        """Lineage, diffs and earlier sessions (docs/DESIGN.md, "Lineage and history")."""
        resources, capture = self.resources, self.capture
        self.lineage = Lineage(capture, self.variables, shell.user_ns, self.limits, resources.variable_name)
        diffs = DiffsProvider(capture, self.lineage, self.config)
        self.history = HistoryProvider(shell, self.notebook_path, kernel_id, self.config)
        self.variables.deltas.append(self.lineage.record)
        self.variables.reads.register(EVERY_TYPE, self.lineage.var_fields)  # any variable has a history
        cells.cell_extras += [self.lineage.cell_fields, diffs.cell_fields]
        resources.follow_cells(
            lambda: capture.last.seq if capture.last is not None else None, cell_uri, self.lineage.in_place
        )
        for provider in (self.lineage, diffs, self.history):
            resources.add_provider(provider)

    # -- settings -----------------------------------------------------------------------
    def _settings(self) -> ServerSettings:
        cfg = self.config
        return ServerSettings(
            version=__version__,
            instructions=cfg.instructions,
            page_size=cfg.page_size,
            max_result_chars=max(2_000, cfg.max_result_chars),
            max_batch=cfg.max_batch,
            max_sessions=cfg.max_sessions,
            require_token=cfg.require_token,
            token=self.token,
            allowed_origins=tuple(cfg.allowed_origins),
            allowed_hosts=tuple(cfg.allowed_hosts) + (() if _is_loopback(cfg.host) else (cfg.host,)),
        )

    # -- lifecycle ----------------------------------------------------------------------
    def start(self, hold: bool = False) -> None:
        """Listen, install the hook and streams, start the server thread (held until :meth:`release`
        with ``hold``: ``%load_ext`` releases it as it returns)."""
        cfg = self.config
        _remove_stale_runtime_files()
        self.log = HubLog(_log_path(kernel_id() or f"pid{os.getpid()}"))
        self.log.install()
        if not _is_loopback(cfg.host):
            hint = (
                f" Clients may name it as {', '.join(cfg.allowed_hosts)} (MCPHub.allowed_hosts)."
                if cfg.allowed_hosts
                else " Only loopback names and the bound address are accepted in Host headers: set "
                "MCPHub.allowed_hosts to the names remote clients use."
            )
            _warn(f"MCPHub.host={cfg.host!r} is not a loopback address: other machines may reach this kernel.{hint}")
        if not cfg.require_token:
            _warn("MCPHub.require_token is False: any local process can read this kernel's data.")
        self.transport = HttpTransport(
            self.server,
            cfg.host,
            cfg.port,
            cfg.max_body_bytes,
            busy_poll_seconds=max(0, cfg.busy_poll_us) * 1e-6,
            loop_kind=cfg.event_loop,
            switch_interval=max(0, cfg.switch_interval_us) * 1e-6,
            held_sockets=cfg.held_sockets,
        )
        CUSTOM.on_change = lambda: self.resources.changed(list_changed=True)
        self.shell.events.register("pre_run_cell", self._pre_run_cell)
        self.shell.events.register("post_run_cell", self._post_run_cell)
        self._hook_registered = True
        self.capture.install(cell_hooks=False)  # its cell start and end called from the hub's two hooks
        self.figures.install()
        self.notebook.watched, self.notebook.changed = self.resources.watched, self.resources.changed
        # After the loading cell: the history sidecar's write and the rooms left for later (_after_load).
        self._later = threading.Thread(target=self._after_load, name="mcp-notebook-later", daemon=True)
        self._later_due = True  # started once, at the end of the loading cell (a flag: no Thread.ident a cell)
        self.runtime_file = write_runtime_file(self.connection_info(), self._file_key())
        atexit.register(self.stop)
        self._install_sigterm()
        recent_notifications(self.resources)  # what views show of notifications starts with the hub
        self._hold_control()
        try:  # last, not awaited (held, when loading: until %load_ext returns): the thread makes its loop
            # (uvloop) and the control carrier while the cell ends; a request waits in the socket's backlog
            self.transport.start(on_ready=self._start_control, wait=False, hold=hold)
        except BaseException:
            self.stop()
            raise
        log.info("serving at %s", self.transport.url)

    def release(self) -> None:
        """Let the server thread of ``start(hold=True)`` make its loop and serve."""
        if self.transport is not None:
            self.transport.release()

    def stop(self) -> None:
        """Leave nothing behind: hook, streams, server thread, socket, runtime file."""
        atexit.unregister(self.stop)
        if self._hook_registered:
            for event, callback in (("pre_run_cell", self._pre_run_cell), ("post_run_cell", self._post_run_cell)):
                try:
                    self.shell.events.unregister(event, callback)
                except ValueError:
                    pass
            self._hook_registered = False
        self.capture.uninstall()
        self.figures.uninstall()
        later, self._later, self._later_due = self._later, None, False
        if later is not None and later.ident is None:  # stopped before the loading cell ended
            self.history.remember()
        elif later is not None:
            later.join(2.0)  # its write done: the session is recorded
        self.notebook.changed = None
        if CUSTOM.on_change is not None:
            CUSTOM.on_change = None
        if self.transport is not None:
            self.transport.wait_ready(5.0)  # the control carrier is installed on the server thread
        self._release_control()
        if self.control is not None:
            self.control.uninstall()  # no new exchanges; open streams still get their final events
            self.control = None
        if self.transport is not None:
            self.transport.stop()
        self.resources.close()
        remove_runtime_file(self.runtime_file)
        self.runtime_file = None
        self._uninstall_sigterm()
        if self.log is not None:
            self.log.uninstall()
            self.log = None

    def _hold_control(self) -> None:
        """Until the server thread installs the control carrier, a message on the control channel
        waits for it (at most a few milliseconds after loading): a server that asks the kernel's
        control channel whether a hub is there as soon as the loading cell ends (serverside/watch.py)
        would otherwise get no answer and take the kernel for one without a hub. The carrier's own
        ``install`` replaces this handler on the control thread, in order."""
        kernel = getattr(self.shell, "kernel", None)
        stream = getattr(kernel, "control_stream", None)
        if not self.config.control_channel or stream is None or getattr(kernel, "session", None) is None:
            return
        transport = self.transport
        assert transport is not None

        def on_recv(frames: list[Any]) -> Any:
            transport.wait_ready(5.0)  # (set once the carrier is made, or could not be)
            control = self.control
            return control.receive_raw(frames) if control is not None else kernel.dispatch_control(frames)

        stream.io_loop.add_callback(stream.on_recv, on_recv, copy=False)
        self._control_held = (stream, kernel)

    def _release_control(self) -> None:
        """Give the control stream back to ipykernel when no carrier took it over from the hold."""
        held, self._control_held = self._control_held, None
        if held is not None and self.control is None:
            stream, kernel = held
            stream.io_loop.add_callback(stream.on_recv, kernel.dispatch_control, copy=False)

    def _start_control(self) -> None:
        """MCP on the kernel's control channel too, where there is one (docs/DESIGN.md, "Kernels
        anywhere"); called on the server thread once its loop is made, before it serves. With no
        carrier, the stand-in of ``_hold_control`` gives the stream back at once."""
        self.control = self._control_carrier()
        if self.control is None:
            self._release_control()

    def _control_carrier(self) -> ControlCarrier | None:
        kernel = getattr(self.shell, "kernel", None)
        transport = self.transport
        if not self.config.control_channel or transport is None or transport.loop is None:
            return None
        if getattr(kernel, "control_stream", None) is None or getattr(kernel, "session", None) is None:
            return None
        from ..transport.control import ControlCarrier  # imported here, on the server thread, not by %load_ext

        carrier = ControlCarrier(
            self.server,
            kernel,
            transport.loop,
            transport.executor,
            self.config.max_body_bytes,
            self._control_info,
            transport.switch.client,  # a sender on control counts as a connected client
        )
        try:
            carrier.install()
        except Exception:  # an ipykernel we do not know: the loopback carrier still serves
            log.exception("could not serve MCP on the control channel")
            return None
        return carrier

    def _control_info(self) -> dict[str, Any]:
        """What a peer on the control channel learns: the runtime file's content (docs/DESIGN.md)."""
        info = dict(self.connection_info())
        info.pop("runtime_file", None)
        return info

    def _install_sigterm(self) -> None:
        """On SIGTERM remove the runtime file, then do what was there before (default: die)."""
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
            return  # no SIGTERM at all (a platform without it): atexit still removes the file
        try:
            previous = signal.getsignal(signal.SIGTERM)
        except (ValueError, OSError):
            return
        runtime_file = self.runtime_file

        def on_sigterm(signum: int, frame: Any) -> None:
            remove_runtime_file(runtime_file)
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

        try:
            signal.signal(signal.SIGTERM, on_sigterm)
        except (ValueError, OSError):
            return
        self._sigterm, self._previous_sigterm = on_sigterm, previous

    def _uninstall_sigterm(self) -> None:
        if self._sigterm is None or threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGTERM) is self._sigterm:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
        except (ValueError, OSError, TypeError):
            pass
        self._sigterm = None

    @property
    def running(self) -> bool:
        return self.transport is not None and self.transport.alive

    @property
    def url(self) -> str | None:
        """Where the hub serves MCP (loopback HTTP), once started."""
        return self.transport.url if self.transport is not None else None

    def set_hidden(self, names: list[str], hidden: bool) -> None:
        """Hide variables from clients (``%mcp hide``) or expose them again, and say so to clients."""
        for name in names:
            self.variables.set_hidden(name, hidden)
        self.resources.changed(
            [self.variables.uri_of(n) for n in names] + [self.variables.index_uri], list_changed=True
        )

    # -- the hot path -------------------------------------------------------------------
    def _pre_run_cell(self, info: Any = None) -> None:
        """The one pre_run_cell callback of the hub (issue #48: one IPython callback, not three)."""
        self.cell_started = time.time()
        transport = self.transport
        if transport is not None:
            transport.busy_poll.enabled = False  # the cell gets the GIL; the server sleeps between requests
            switch = transport.switch
            switch.seconds = max(0, self.limits.switch_interval_us) * 1e-6  # %config after loading applies
            switch.cell_running = True  # switch.cell(True), inlined: first, as there (latency.py)
            if switch.clients or switch.saved is not None:
                switch.update()  # a shorter GIL switch interval while a client is connected
        self.capture.pre_run_cell(info)

    def _post_run_cell(self, result: Any = None) -> None:
        """The one post_run_cell callback: the switch interval back, the cell's record, then the changes."""
        self.cell_started, self.last_execution = None, time.time()
        if self._later_due:  # the loading cell ended
            self._later_due = False
            if self._later is not None:
                self._later.start()
        transport = self.transport
        if transport is not None:
            switch = transport.switch
            switch.cell_running = False  # switch.cell(False), inlined: the user's interval, exactly as it was
            if switch.clients or switch.saved is not None:
                switch.update()
            poll = transport.busy_poll
            poll.window = max(0, self.limits.busy_poll_us) * 1e-6  # %config after loading applies from here
            poll.enabled = True
        capture = self.capture
        capture.post_run_cell(result)  # finish the cell record before change detection
        last = capture.last
        self.resources.after_cell(last.seq if last is not None else None)

    def _after_load(self) -> None:
        """Once the loading cell has ended, off the main thread: record this session in the history
        sidecar (an sqlite commit) and import the rooms left for their first use, so that neither
        ``%load_ext`` nor a first listing pays them (each import lets go of the GIL at its file reads:
        a read meanwhile waits little); then the tools. docs/DESIGN.md, "Loading, fourth cut", "sixth cut" and "seventh cut"."""
        try:
            compile_all()  # the patterns a first read masks and parses with (~1.5 ms): "Loading, eighth cut"
            self.history.remember()  # this session is this notebook's (a small sidecar beside IPython's history)
            for lazy in self._lazy:
                lazy.real()
            from ..providers import structured  # noqa: F401 -- a structured value's first read: not waiting for it

            self.server.tools  # noqa: B018 -- made now, not by the first tools/list
        except Exception:  # a room that fails to build is built (and fails) again at its first use
            log.exception("after loading")

    # -- facts --------------------------------------------------------------------------
    def connection_info(self) -> ConnectionInfo:
        assert self.transport is not None
        return ConnectionInfo(
            url=self.transport.url,
            token=self.token if self.config.require_token else None,
            pid=os.getpid(),
            kernel_id=kernel_id(),
            notebook_path=self.notebook_path(),
            protocol_versions=list(ALL_VERSIONS),
            started_at=self.started_at,
            server_version=__version__,
            runtime_file=str(self.runtime_file) if self.runtime_file else None,
            connection_file=connection_file(),
            cwd=os.getcwd(),
        )

    def summary(self) -> dict[str, Any]:
        import IPython

        return {
            "language": "python",
            "python": sys.version.split()[0],
            "ipython": IPython.__version__,
            "mcp_notebook": __version__,
            "pid": os.getpid(),
            "kernel_id": kernel_id(),
            "notebook_path": self.notebook_path(),
            "connection_file": connection_file(),
            "state": "busy" if self.cell_started is not None else "idle",
            "last_execution": self.last_execution,
            "variables": len(self.variables.exposed_names()),
            "cells_executed": self.resources.cells_seen,
            "url": self.transport.url if self.transport else None,
            "fast_paths": self.fast_paths(),
        }

    def fast_paths(self) -> dict[str, Any]:
        """Which platform-specific fast paths are in force (all off with MCP_NOTEBOOK_PORTABLE=1)."""
        if self.transport is not None and self.transport.alive:
            self.transport.wait_ready(5.0)  # its loop is made on the server thread, just after loading
        loop = self.transport.loop if self.transport else None
        return {
            "portable": portable.ON,
            "loop": type(loop).__module__.split(".")[0] if loop is not None else None,
            "namespace_table_reads": self.variables.reads_table(),
            "busy_poll": bool(self.transport and self.transport.busy_poll.window > 0 and not portable.ON),
            "held_sockets": bool(self.transport and self.transport.held_sockets),
            "precise_timers": bool(self.transport and self.transport.precise_timers),
        }

    def notebook_path(self) -> str | None:
        """The explicit setting wins over what the frontend tells."""
        return self.config.notebook_path or notebook_path(self.shell)

    def _file_key(self) -> str:
        return kernel_id() or f"pid{os.getpid()}-{self.transport.port if self.transport else 0}"


def _add_nb_tools(tools: Any) -> None:
    """The nb:// words of the tools and the Apps views' tools (nb_tools.py, imported with the tools)."""
    from ..nb_tools import add_nb_tools

    add_nb_tools(tools)


def _warn(message: str) -> None:
    """A plain one-line warning in the loading cell (no source lines of ours), and in the hub's log."""
    print(f"mcp-notebook: warning: {message}", file=sys.stderr)
    log.warning("%s", message)


def register_configurable(shell: Any, config: MCPHub) -> None:
    """Make ``%config MCPHub`` (help, current values, settings) work: one MCPHub in shell.configurables."""
    configurables = getattr(shell, "configurables", None)
    if not isinstance(configurables, list):
        return
    configurables[:] = [c for c in configurables if not isinstance(c, MCPHub)]
    configurables.append(config)


def unregister_configurable(shell: Any) -> None:
    configurables = getattr(shell, "configurables", None)
    if isinstance(configurables, list):
        configurables[:] = [c for c in configurables if not isinstance(c, MCPHub)]


def _remove_stale_runtime_files() -> None:
    """What hubs that are gone left (a SIGKILLed kernel, an nbval run): runtime files and logs."""
    with contextlib.suppress(Exception):
        sweep()


def _log_path(key: str) -> Path | None:
    try:
        return log_path(key)
    except Exception:
        return None


def _is_loopback(host: str) -> bool:
    from ..protocol.security import is_loopback_host

    return is_loopback_host(host)


def connection_file() -> str | None:
    """The kernel's connection file (what ``jupyter console --existing`` takes), when in a kernel."""
    try:
        from ipykernel.connect import get_connection_file

        return str(get_connection_file())
    except Exception:
        return None


def kernel_id() -> str | None:
    """The kernel id from the connection file name (kernel-<id>.json), when in a kernel."""
    path = connection_file()
    m = re.match(r"kernel-(.+)\.json$", Path(path).name) if path else None
    return m.group(1) if m else None


def notebook_path(shell: Any) -> str | None:
    """Where the notebook lives, when the frontend tells: VS Code or Jupyter Server."""
    ns = getattr(shell, "user_ns", {})
    for candidate in (ns.get("__vsc_ipynb_file__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None
