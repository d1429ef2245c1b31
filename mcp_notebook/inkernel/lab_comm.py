"""The JupyterLab extension's channel into the hub: the comm target ``mcp_notebook.document``.

The extension opens one comm per open notebook. Over it, the frontend pushes the live document
(debounced, unsaved edits included) and the active cell and selection, asks for the hub's state and
sends panel commands (hide/show a variable, start/stop the hub). The kernel answers with
``{"type": "state"}`` messages, pushed again (throttled) when the hub notifies or a client comes
or goes; the answer to a ``state`` command that named a ``request`` (a short string or a number)
carries it back, so a frontend can tell its answer from a push queued before it. Nothing in the kernel needs this: without the extension no comm is ever opened.

Threading: with ipykernel 7 and JupyterLab 4.4+ comm messages may be handled on a subshell thread
while a cell runs on the main thread. Handlers never block: documents and the active cell go
through the notebook provider's lock; commands that touch the namespace or the shell's hooks
(hide/show/start/stop) are handed to the kernel's main thread (they run once the running cell
ends); state is read from copies and retried when a dict changes under it.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ..version import __version__
from . import lifecycle
from .lab_target import TARGET, comm_manager

STATE_DELAY = 0.4  # seconds: hub events within this window make one state push
MAX_VARIABLES = 500
MAX_CELLS = 20_000
_NAME_MAX = 200

log = logging.getLogger(__name__)


class ViewComm:
    """One comm from one notebook view; remembers what it pushed last (replayed to a restarted hub)."""

    def __init__(self, channel: LabComm, comm: Any, path: str | None):
        self.channel = channel
        self.comm = comm
        self.path = path
        self.document: dict[str, Any] | None = None
        self.active: tuple[str | None, list[str]] | None = None
        self.closed = False
        self.parent: dict[str, Any] | None = None  # the frontend's latest message on this comm

    def send(self, data: dict[str, Any]) -> None:
        """Send from any thread, as a reply to the frontend's latest message.

        ipykernel 7 routes a comm's incoming messages to the subshell of the parent of the comm's
        last outgoing message; replying under the frontend's own message keeps its messages on the
        subshell it chose (handled while a cell runs) instead of falling back to the main shell.
        """
        if self.closed:
            return
        from ..redact import REDACTOR

        data = REDACTOR.mask_obj(data)  # client names, subscribed URIs, error texts: masked like any exit
        try:
            var = getattr(getattr(self.comm, "kernel", None), "_shell_parent", None)
            if self.parent is not None and isinstance(var, contextvars.ContextVar):
                contextvars.copy_context().run(self._send_as, var, self.parent, data)
            else:
                self.comm.send(data)
        except Exception:  # the kernel is shutting down, or the comm went away
            log.debug("comm send failed", exc_info=True)

    def _send_as(self, var: contextvars.ContextVar, parent: dict[str, Any], data: dict[str, Any]) -> None:
        var.set(parent)  # only in this copied context: the cell's own parent is untouched
        self.comm.send(data)

    def on_msg(self, msg: dict[str, Any]) -> None:
        if isinstance(msg.get("header"), dict):
            self.parent = msg
            self.channel.note_session(msg)
        data = (msg.get("content") or {}).get("data")
        try:
            self.channel.handle(self, data if isinstance(data, dict) else {})
        except Exception as exc:  # a bad message gets an answer, never a traceback in a cell
            log.debug("frontend message failed", exc_info=True)
            self.send({"type": "result", "ok": False, "message": f"{type(exc).__name__}: {exc}"})

    def on_close(self, msg: Any = None) -> None:
        self.closed = True
        self.channel.drop(self)


class LabComm:
    """All open links, the hub they feed, and throttled state pushes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._links: dict[str, ViewComm] = {}
        self._owner: ViewComm | None = None  # whose document the hub shows
        self._shell: Any = None
        self._main: Any = None
        self._hub: Any = None  # the running KernelHub, if any
        self._timer: threading.Timer | None = None
        self._manager: Any = None

    # -- registration (load/unload of the IPython extension) -----------------------------
    def register(self, shell: Any) -> bool:
        """Register the comm target in ``shell``'s kernel; False outside a kernel (plain IPython)."""
        manager = comm_manager(shell)
        if manager is None:
            return False
        from .activity import MainThread

        self._shell, self._main = shell, MainThread(shell)
        manager.register_target(TARGET, self._on_open)
        self._manager = manager
        lifecycle.unfollow(self.attach)
        lifecycle.follow(self.attach, self.detach)
        return True

    def unregister(self) -> None:
        """Close every link (the frontend shows "not loaded") and remove the target."""
        lifecycle.unfollow(self.attach)
        with self._lock:
            links, self._links = list(self._links.values()), {}
            self._owner = None
            manager, self._manager = self._manager, None
        for link in links:
            link.closed = True
            with contextlib.suppress(Exception):
                link.comm.close()
        if manager is not None:
            with contextlib.suppress(Exception):
                manager.unregister_target(TARGET, self._on_open)
        self._cancel_timer()

    def _on_open(self, comm: Any, msg: dict[str, Any]) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        link = ViewComm(self, comm, data.get("path") if isinstance(data.get("path"), str) else None)
        link.parent = msg if isinstance(msg.get("header"), dict) else None
        self.note_session(link.parent)
        comm.on_msg(link.on_msg)
        comm.on_close(link.on_close)
        with self._lock:
            self._links[comm.comm_id] = link
        link.send(self._state_msg())

    def note_session(self, msg: dict[str, Any] | None) -> None:
        """The client session this comm speaks for is JupyterLab's: cells it runs say so in their origin."""
        kh = self._hub
        if kh is not None and msg is not None:
            kh.capture.origins.note_frontend(msg["header"].get("session"), "jupyterlab")

    # -- the hub (lifecycle calls these after a hub starts and before it stops) -----------
    def attach(self, kernel_hub: Any) -> None:
        """A hub started: replay the latest document and active cell, listen for changes."""
        with self._lock:
            self._hub = kernel_hub
            owner = self._owner
        kernel_hub.resources.add_listener(self._on_hub_event)
        kernel_hub.server.activity_listeners.append(self.poke)
        for link in list(self._links.values()):
            self.note_session(link.parent)
        if owner is not None and owner.document is not None:
            with contextlib.suppress(Exception):
                kernel_hub.notebook.set_document(owner.document, source="jupyterlab")
        if owner is not None and owner.active is not None:
            kernel_hub.notebook.set_active(owner.active[0], owner.active[1], source="jupyterlab")
        self.poke()

    def detach(self, kernel_hub: Any) -> None:
        with self._lock:
            if self._hub is kernel_hub:
                self._hub = None
        kernel_hub.resources.remove_listener(self._on_hub_event)
        with contextlib.suppress(ValueError):
            kernel_hub.server.activity_listeners.remove(self.poke)
        self.poke()

    def _running_hub(self) -> Any:
        kh = self._hub
        return kh if kh is not None and kh.running else None

    # -- messages from the frontend (any thread; never blocking) -------------------------
    def handle(self, link: ViewComm, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "document":
            self._document(link, data)
        elif kind == "active":
            self._active(link, data)
        elif kind == "command":
            self._command(link, data)
        else:
            raise ValueError(f"unknown message type {kind!r}")

    def _document(self, link: ViewComm, data: dict[str, Any]) -> None:
        nb = data.get("nb")
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise ValueError("a document message needs nb: a notebook with a cells list")
        if len(nb["cells"]) > MAX_CELLS:
            raise ValueError(f"the document has more than {MAX_CELLS} cells")
        if isinstance(data.get("path"), str):
            link.path = data["path"]
        link.document = nb
        with self._lock:
            self._owner = link
        kh = self._running_hub()
        if kh is not None:
            kh.notebook.set_document(nb, source="jupyterlab")

    def _active(self, link: ViewComm, data: dict[str, Any]) -> None:
        active = data.get("active")
        selected = data.get("selected") or []
        if active is not None and not isinstance(active, str):
            raise ValueError("active must be a cell id or null")
        if not isinstance(selected, list):
            raise ValueError("selected must be a list of cell ids")
        link.active = (active, [s for s in selected if isinstance(s, str)])
        with self._lock:  # the view the user moves in is the one the hub shows (several views, one kernel)
            before = self._owner
            if before is None or before.closed or link.document is not None:
                self._owner = link
            owner = self._owner
        kh = self._running_hub()
        if kh is None or owner is not link:
            return
        if before is not link and link.document is not None:
            kh.notebook.set_document(link.document, source="jupyterlab")
        kh.notebook.set_active(active, link.active[1], source="jupyterlab")

    def _command(self, link: ViewComm, data: dict[str, Any]) -> None:
        command = data.get("command")
        if command == "state":
            msg = self._state_msg()
            request = data.get("request")
            if isinstance(request, (int, float)) and not isinstance(request, bool):
                msg["request"] = request
            elif isinstance(request, str) and len(request) <= _NAME_MAX:
                msg["request"] = request
            link.send(msg)
            return
        if command in ("hide", "show"):
            name = data.get("name")
            if not isinstance(name, str) or not name or len(name) > _NAME_MAX:
                raise ValueError(f"{command} needs the name of a variable")
            self._on_main(link, (command, name), lambda: self._set_hidden(name, command == "hide"))
        elif command in ("start", "stop"):
            self._on_main(link, (command,), self._start if command == "start" else self._stop)
        elif command == "describe":
            cell_id = data.get("cell_id")
            if not isinstance(cell_id, str) or not cell_id or len(cell_id) > _NAME_MAX:
                raise ValueError("describe needs the id of a cell")
            outputs = described_images(self._running_hub(), cell_id)
            link.send({"type": "descriptions", "cell_id": cell_id, "outputs": outputs})
        else:
            raise ValueError(f"unknown command {command!r}")

    def _on_main(self, link: ViewComm, key: tuple[str, ...], fn: Any) -> None:
        """Run a command on the kernel's main thread (after the running cell), then answer.

        A command already queued with the same key (a double click) runs once.
        """
        command = key[0]

        def run() -> None:
            try:
                message = fn()
                link.send({"type": "result", "ok": True, "command": command, "message": message})
            except Exception as exc:
                link.send({"type": "result", "ok": False, "command": command, "message": f"{command} failed: {exc}"})
            self.broadcast()

        self._main.call(("mcp-nb-command", id(link), *key), run)

    # -- commands (main thread) ----------------------------------------------------------
    def _set_hidden(self, name: str, hidden: bool) -> str:
        kh = self._running_hub()
        if kh is None:
            raise RuntimeError("the hub is stopped")
        kh.set_hidden([name], hidden)
        return f"{'hidden from' if hidden else 'exposed again to'} MCP clients: {name}"

    def _start(self) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lifecycle.start(self._shell)
        return out.getvalue().strip()

    def _stop(self) -> str:
        lifecycle.stop()
        return "stopped; Start serves again"

    # -- state -----------------------------------------------------------------------------
    def _on_hub_event(self, kind: str, uris: tuple[str, ...]) -> None:
        self.poke()

    def poke(self) -> None:
        """Push the state to every link soon (coalesced; called from any thread)."""
        with self._lock:
            if self._timer is not None or not self._links:
                return
            timer = self._timer = threading.Timer(STATE_DELAY, self._flush)
        timer.daemon = True
        timer.start()

    def _flush(self) -> None:
        with self._lock:
            self._timer = None
        self.broadcast()

    def broadcast(self) -> None:
        with self._lock:
            links = list(self._links.values())
        if not links:
            return
        msg = self._state_msg()
        for link in links:
            link.send(msg)

    def _cancel_timer(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def drop(self, link: ViewComm) -> None:
        """A notebook closed (or its view went away): forget its link and, if it fed the hub, its document."""
        with self._lock:
            self._links.pop(getattr(link.comm, "comm_id", None), None)
            was_owner = self._owner is link
            if was_owner:
                others = [li for li in self._links.values() if li.document is not None]
                self._owner = others[-1] if others else None
            owner = self._owner
        kh = self._running_hub()
        if kh is None or not was_owner:
            return
        if owner is not None and owner.document is not None:
            kh.notebook.set_document(owner.document, source="jupyterlab")
        else:
            kh.notebook.clear_document()

    def _state_msg(self) -> dict[str, Any]:
        for _ in range(5):  # a dict may change under us while a cell runs
            try:
                return {"type": "state", "state": hub_state(self._running_hub())}
            except RuntimeError:
                continue
        return {"type": "state", "state": hub_state(None)}

    def links(self) -> int:
        with self._lock:
            return len(self._links)


def described_images(kh: Any, cell_id: str) -> list[dict[str, Any]]:
    """The image outputs of the latest run of a notebook cell, each with a short alt text and its
    full description (issue #44), masked: what the panel gives the notebook's own images."""
    if kh is None or not kh.config.figure_descriptions:
        return []
    from ..providers.cells import alt_text, describe_output
    from ..redact import REDACTOR

    seq = kh.capture.seq_for_cell_id(cell_id)
    cell = kh.capture.get(seq) if seq is not None else None
    if cell is None:
        return []
    with kh.capture.lock:
        outputs = list(cell.outputs)
    rows = []
    for index, out in enumerate(outputs[:50]):
        if not any(m.startswith("image/") for m in out.data):
            continue
        text = describe_output(out, kh.config.figure_description_chars)
        if text:
            text = REDACTOR.mask(text)
            rows.append({"index": index, "alt": alt_text(text), "description": text})
    return rows


def hub_state(kh: Any) -> dict[str, Any]:
    """What the panel shows, as plain JSON: never the token."""
    from ..commands.clients_config import setup_lines
    from ..revisions import ALL_VERSIONS

    state: dict[str, Any] = {
        "running": kh is not None,
        "url": None,
        "revisions": list(ALL_VERSIONS),
        "clients": [],
        "listens": [],
        "watched": [],
        "recent": [],
        "notifications_total": 0,
        "variables": [],
        "variables_more": 0,
        "document": None,
        "mcp_notebook": __version__,
        "setup": setup_lines(),
    }
    if kh is None:
        return state
    from .activity import listen_rows, recent_notifications, session_rows

    state["url"] = kh.transport.url if kh.transport is not None else None
    state["clients"] = session_rows(kh.server)
    for name, version, revision, idle in kh.server.stateless_clients():
        state["clients"].append(
            {
                "session": "stateless",
                "client": f"{name} {version}".strip(),
                "version": revision,
                "subscriptions": [],
                "streams": 0,
                "idle": round(idle),
            }
        )
    state["listens"] = listen_rows(kh.server)
    state["watched"] = sorted(kh.resources.watched())
    recent = recent_notifications(kh.resources)
    state["recent"] = [n.line() for n in recent.items()[-20:]]
    state["notifications_total"] = recent.total
    hidden = set(list(kh.variables.user_hidden))
    rows = [{"name": n, "type": t.__name__, "hidden": False} for n, t in kh.variables.exposed_items()]
    rows += [{"name": n, "type": "", "hidden": True} for n in hidden]
    rows.sort(key=lambda r: r["name"])
    state["variables"] = rows[:MAX_VARIABLES]
    state["variables_more"] = max(0, len(rows) - MAX_VARIABLES)
    with contextlib.suppress(Exception):
        found = kh.notebook.document()
        if found is not None:
            state["document"] = {"source": found[1].get("source"), "modified": found[1].get("modified")}
    return state


LAB_COMM = LabComm()


def take_over(shell: Any, comm: Any, msg: dict[str, Any]) -> Callable[[], None]:
    """The first comm since ``%load_ext`` (lab_target.py registered the target; the package imports
    this module for it): register ``LAB_COMM`` in its place, follow the running hub, serve the
    comm. Returns how to let go (``LAB_COMM.unregister``)."""
    LAB_COMM.register(shell)
    kernel_hub = lifecycle.current()
    if kernel_hub is not None:
        LAB_COMM.attach(kernel_hub)
    LAB_COMM._on_open(comm, msg)
    return LAB_COMM.unregister
