"""The server's kernels, watched: for each kernel of the kernel manager that runs on this host, an
IOPub subscription of our own (``kernel.connect_iopub()``, the seam jupyter_server's own activity
tracking uses: a SUB socket receives everything the kernel publishes, whichever client ran the cell,
and sends the kernel nothing), feeding that kernel's :class:`~.kernel.ServedKernel`.

:meth:`KernelWatch.sync` runs on the server's loop (a periodic callback and every request): new
kernels are watched, gone ones closed, a restart (the kernel's process changed) told. What a kernel
published before the server watched it is not seen: its notebook on disk holds those outputs.

A kernel behind a Kernel Gateway has no socket here: it is fed by the gateway's own websocket, which
relays every IOPub message of the kernel (``remote_feed``); whether its hub serves it is asked on its
control channel once, and again only on evidence (``probe``: a cell naming mcp_notebook ended, a hub
printed its start line, a restart), never per request.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..revisions import HANDSHAKE_VERSIONS, STATELESS_VERSIONS
from ..version import __version__
from .kernel import ServedKernel, remote_spec_of, spec_of
from .shell import ShellAsker

log = logging.getLogger(__name__)
HUB_ANNOUNCES = "mcp-notebook: MCP server at"  # the line a hub prints when it starts (inkernel/lifecycle.py)
FEED_RETRY_SECONDS = 5.0  # a gateway feed that closed while its kernel lives is reopened after this long
FEED_AFTER_RESTART_SECONDS = 1.0  # a restarting gateway kernel's feed is reopened after this long
PROBE_WAIT_SECONDS = 6.0  # the longest a request waits for the answer to "has this gateway kernel a hub?"
GATEWAY_VARIABLES = (
    "variables of this kernel behind a gateway are not read: no way to send our idle-only reads through "
    "the gateway is configured; load the hub in it (%load_ext mcp_notebook in a Python kernel) for variables"
)

RemoteFeed = Callable[[str, Callable[[dict[str, Any]], None], Callable[[], None]], Any]


class KernelWatch:
    """Every local kernel of one kernel manager, served from the server's side."""

    def __init__(
        self,
        kernel_manager: Any,
        notebook_paths: Callable[[], dict[str, str]],
        root_dir: str,
        opted_in: Callable[[], bool],
        seconds: Callable[[], float],
        local: Callable[[str], bool],
        has_hub: Callable[[str], bool] = lambda kernel_id: False,
        remote_feed: RemoteFeed | None = None,
        probe: Callable[[str], Awaitable[bool | None]] | None = None,
        remote_asker: Callable[..., Any] | None = None,
    ):
        self.kernel_manager = kernel_manager
        self.notebook_paths = notebook_paths
        self.root_dir = root_dir
        self.opted_in = opted_in
        self.seconds = seconds
        self.local = local  # whether a kernel's sockets are reachable from here (not behind a gateway)
        self.has_hub = has_hub  # whether a kernel's own hub serves it (its runtime file is here)
        self.served: dict[str, ServedKernel] = {}
        self._streams: dict[str, Any] = {}
        self._pids: dict[str, Any] = {}
        # kernels behind a gateway: fed by the gateway's websocket (serverext/gateway_feed.py), hub probed
        self.remote_feed = remote_feed  # (kernel id, on_message, on_close) -> a feed with close()
        self.probe = probe  # whether a gateway kernel's hub answers on its control channel (None: unknown)
        self.remote_asker = remote_asker  # (feed getter, idle, mark_ours) -> a ShellAsker over the feed
        self._remote: set[str] = set()
        self._attaching: dict[str, asyncio.Future[None]] = {}
        self._feed_lost: dict[str, float] = {}
        self._probes: dict[str, asyncio.Future[None]] = {}
        self._probe_after: dict[str, str] = {}  # kernel id -> the request whose end asks for the hub again
        self._sessions: dict[str, str] = {}  # kernel id -> the session id its process publishes with

    def get(self, kernel_id: str) -> ServedKernel | None:
        return self.served.get(kernel_id)

    def sync(self) -> None:
        """Watch new kernels, close gone ones, tell restarts (the server's loop)."""
        try:
            ids = set(self.kernel_manager.list_kernel_ids())
        except Exception:
            return
        for gone in [k for k in self.served if k not in ids]:
            self._drop(gone)
        for kernel_id in ids:
            if kernel_id not in self.served:
                self._attach(kernel_id)
            else:
                self._check_restart(kernel_id)
            served = self.served.get(kernel_id)
            if served is not None and kernel_id not in self._remote:
                served.hub_loaded = self.has_hub(kernel_id)

    def _attach(self, kernel_id: str) -> None:
        if not self.local(kernel_id):
            self._attach_remote(kernel_id)
            return
        try:
            kernel = self.kernel_manager.get_kernel(kernel_id)
            stream = kernel.connect_iopub()
        except Exception as exc:
            log.debug("mcp-notebook: cannot watch kernel %s: %s", kernel_id, exc)
            return
        session = kernel.session
        served = ServedKernel(
            kernel_id,
            spec_of(self.kernel_manager, kernel),
            lambda: self._notebook(kernel_id),
            None,
            self.opted_in,
            self.seconds,
        )
        served.asker = ShellAsker(
            kernel.get_connection_info, session, lambda: self._idle(kernel_id), served.capture.mark_ours
        )
        if served.variables.reason is None:
            served.variables.asker = served.asker
        stream.on_recv(lambda frames: self._received(served, session, frames))
        self.served[kernel_id] = served
        self._streams[kernel_id] = stream
        self._pids[kernel_id] = _pid(kernel)
        log.info("mcp-notebook: serving kernel %s (%s) from the server's side", kernel_id, served.language)

    def _received(self, served: ServedKernel, session: Any, frames: list[Any]) -> None:
        try:
            _, fed = session.feed_identities(frames, copy=True)
            msg = session.deserialize(fed, content=True, copy=True)
        except Exception:
            return
        try:
            served.on_message(msg)
        except Exception:
            log.exception("mcp-notebook: an IOPub message of kernel %s could not be recorded", served.kernel_id)

    def _check_restart(self, kernel_id: str) -> None:
        if kernel_id in self._remote:
            self._check_feed(kernel_id)
            return
        try:
            pid = _pid(self.kernel_manager.get_kernel(kernel_id))
        except Exception:
            return
        if pid is not None and pid != self._pids.get(kernel_id):
            self._pids[kernel_id] = pid
            self.served[kernel_id].restarted("restarted")

    # -- kernels behind a gateway: fed by what the gateway relays ---------------------------------
    def _attach_remote(self, kernel_id: str) -> None:
        if self.remote_feed is None or kernel_id in self._attaching:
            return
        self._attaching[kernel_id] = asyncio.ensure_future(self._attach_remote_now(kernel_id))

    async def _attach_remote_now(self, kernel_id: str) -> None:
        """Serve a gateway kernel: its kernelspec (asked of the gateway), its feed, a probe of its hub."""
        try:
            spec = await remote_spec_of(self.kernel_manager, self.kernel_manager.get_kernel(kernel_id))
            if kernel_id in self.served or kernel_id not in set(self.kernel_manager.list_kernel_ids()):
                return
            served = ServedKernel(kernel_id, spec, lambda: self._notebook(kernel_id), None, self.opted_in, self.seconds)
            served.hub_loaded = None  # not known until its control channel answered (or stayed silent)
            if self.remote_asker is None:
                served.variables.reason = served.variables.reason or GATEWAY_VARIABLES
            else:
                served.asker = self.remote_asker(
                    lambda: self._streams.get(kernel_id), lambda: self._remote_idle(served), served.capture.mark_ours
                )
                if served.variables.reason is None:
                    served.variables.asker = served.asker
            self.served[kernel_id] = served
            self._remote.add(kernel_id)
            self._open_feed(kernel_id, served)
            self._reprobe(kernel_id)
            log.info("mcp-notebook: watching gateway kernel %s (%s) through the gateway", kernel_id, served.language)
        except Exception as exc:
            log.debug("mcp-notebook: cannot watch gateway kernel %s: %s", kernel_id, exc)
        finally:
            self._attaching.pop(kernel_id, None)

    def _open_feed(self, kernel_id: str, served: ServedKernel) -> None:
        def lost() -> None:
            if self._streams.get(kernel_id) is feed:
                self._streams.pop(kernel_id, None)
                self._feed_lost[kernel_id] = time.monotonic()

        assert self.remote_feed is not None
        feed = self.remote_feed(kernel_id, lambda msg: self._relayed(served, msg), lost)
        self._streams[kernel_id] = feed

    def _check_feed(self, kernel_id: str) -> None:
        """A feed the gateway closed is opened again (what was published meanwhile is not seen)."""
        lost = self._feed_lost.get(kernel_id)
        if lost is not None and time.monotonic() - lost > FEED_RETRY_SECONDS:
            del self._feed_lost[kernel_id]
            self._open_feed(kernel_id, self.served[kernel_id])
            self._reprobe(kernel_id)

    def _relayed(self, served: ServedKernel, msg: dict[str, Any]) -> None:
        """One IOPub message the gateway relayed; a hub loaded, unloaded or a restart asks for the hub again."""
        parent = msg.get("parent_header") if isinstance(msg.get("parent_header"), dict) else {}
        if str(parent.get("msg_type") or "").startswith("mcp_"):
            return  # the kernel's busy/idle around our own probe of its hub
        header = msg.get("header") if isinstance(msg.get("header"), dict) else {}
        content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
        kind, kernel_id, state = header.get("msg_type"), served.kernel_id, content.get("execution_state")
        if kind == "status" and not parent.get("msg_id") and state in ("restarting", "dead"):
            self._remote_restart(served, "died" if state == "dead" else "restarted")  # the gateway's restarter
            return
        if kind == "shutdown_reply" and content.get("restart") is True:  # a restart asked through the API
            served.on_message(msg)
            self._remote_restart(served, "restarted")
            return
        if self._new_process(kernel_id, header, parent):  # a new process nobody announced
            served.restarted("restarted")
            self._reprobe(kernel_id)
        probe_now = False
        if kind == "execute_input" and "mcp_notebook" in str(content.get("code") or ""):
            self._probe_after[kernel_id] = str(parent.get("msg_id"))  # asked again once that cell ends
        elif kind == "stream" and HUB_ANNOUNCES in str(content.get("text") or ""):
            probe_now = True  # a hub started (autoloaded, or loaded by a cell)
        elif kind == "status" and state == "idle" and parent.get("msg_id") == self._probe_after.get(kernel_id):
            del self._probe_after[kernel_id]
            probe_now = True
        try:
            served.on_message(msg)
        except Exception:
            log.exception("mcp-notebook: a relayed message of kernel %s could not be recorded", kernel_id)
        if probe_now:
            self._reprobe(kernel_id)

    def _remote_restart(self, served: ServedKernel, how: str) -> None:
        """A gateway kernel restarts: told, its hub asked about again, and its feed opened anew in a
        moment (the gateway's websocket may keep listening to the old process's ports)."""
        kernel_id = served.kernel_id
        self._sessions.pop(kernel_id, None)
        served.restarted(how)
        self._reprobe(kernel_id)
        feed = self._streams.pop(kernel_id, None)
        if feed is not None:
            feed.close()
            self._feed_lost[kernel_id] = time.monotonic() - FEED_RETRY_SECONDS + FEED_AFTER_RESTART_SECONDS

    def _new_process(self, kernel_id: str, header: dict[str, Any], parent: dict[str, Any]) -> bool:
        """Whether the kernel's own session id changed: each kernel process signs what it publishes in
        answer to a request with a session id of its own, so a new one is a restarted kernel."""
        session = header.get("session")
        if not parent.get("msg_id") or not isinstance(session, str) or not session:
            return False
        before = self._sessions.get(kernel_id)
        self._sessions[kernel_id] = session
        return before is not None and before != session

    def _reprobe(self, kernel_id: str) -> None:
        """Ask the gateway kernel's control channel whether a hub serves it (one probe at a time)."""
        served = self.served.get(kernel_id)
        if served is None or self.probe is None:
            return
        old = self._probes.pop(kernel_id, None)
        if old is not None:
            old.cancel()
        if served.hub_loaded:  # its hub may be gone: requests wait for the answer (at most once)
            served.hub_loaded = None  # (a kernel known without one stays served from here meanwhile)
        self._probes[kernel_id] = asyncio.ensure_future(self._probe_now(kernel_id, served))

    async def _probe_now(self, kernel_id: str, served: ServedKernel) -> None:
        assert self.probe is not None
        try:
            found = await self.probe(kernel_id)
        except Exception:
            found = None
        if self.served.get(kernel_id) is served:
            served.hub_loaded = bool(found)  # unreachable: served from here (the feed works)
            log.info("mcp-notebook: gateway kernel %s %s", kernel_id, "has a hub" if found else "has no hub")

    async def settled(self, kernel_id: str) -> None:
        """Until a gateway kernel's hub is known (at most :data:`PROBE_WAIT_SECONDS`; the server's loop)."""
        deadline = time.monotonic() + PROBE_WAIT_SECONDS
        served = self.served.get(kernel_id)
        if served is None or served.hub_loaded is not None:
            return  # known (a re-probe of a kernel without a hub does not hold its requests)
        while (probe := self._probes.get(kernel_id)) is not None and not probe.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.wait([probe], timeout=left)  # a newer probe may replace it: look again

    def hubless(self, kernel_id: str) -> bool:
        """A gateway kernel known to have no hub (its control channel stayed silent)."""
        served = self.served.get(kernel_id)
        return served is not None and kernel_id in self._remote and served.hub_loaded is False

    @staticmethod
    def _remote_idle(served: ServedKernel) -> bool:
        """Idle by the kernel's IOPub as the gateway relays it, no cell open (the server's own count of
        a gateway kernel's state lags: it is the gateway's model, refreshed now and then)."""
        return served.capture.current is None and served.capture.state == "idle"

    def _idle(self, kernel_id: str) -> bool:
        """Idle by the kernel's own IOPub and by the server's count of it, no cell open."""
        served = self.served.get(kernel_id)
        try:
            state = self.kernel_manager.get_kernel(kernel_id).execution_state
        except Exception:
            state = None
        return (
            served is not None
            and served.capture.current is None
            and served.capture.state in ("idle", "unknown")
            and state == "idle"
        )

    def _notebook(self, kernel_id: str) -> str | None:
        path = self.notebook_paths().get(kernel_id)
        return os.path.join(self.root_dir, path) if path else None

    def _drop(self, kernel_id: str) -> None:
        self._remote.discard(kernel_id)
        self._feed_lost.pop(kernel_id, None)
        self._probe_after.pop(kernel_id, None)
        self._sessions.pop(kernel_id, None)
        probe = self._probes.pop(kernel_id, None)
        if probe is not None:
            probe.cancel()
        stream = self._streams.pop(kernel_id, None)
        if stream is not None:
            try:
                stream.close()
            except Exception:
                pass
        self._pids.pop(kernel_id, None)
        served = self.served.pop(kernel_id)
        threading.Thread(target=served.close, name="mcp-notebook-served-close", daemon=True).start()

    def close(self) -> None:
        for kernel_id in list(self.served):
            self._drop(kernel_id)


def _pid(kernel: Any) -> Any:
    provisioner = getattr(kernel, "provisioner", None)
    process = getattr(provisioner, "process", None)
    return getattr(process, "pid", None)


def served_here(watch: Any, finder: Any, kernel_id: str, channel_silent: bool = False) -> Any:
    """The kernel's server-side server when it has no hub of its own, else None (its hub wins).
    ``watch``: the ExtensionApp's ``kernel_watch`` (None when turned off). A kernel reached over its
    control channel is served here once that channel is known silent (the watch's probe, or
    ``channel_silent``: the listing just asked it)."""
    served = watch.get(kernel_id) if watch is not None else None
    if served is None or not finder.known(kernel_id) or finder.record(kernel_id) is not None:
        return None  # (a kernel just shut down is gone before the watch's next look)
    if finder.by_channel(kernel_id) and served.hub_loaded is not False:
        if served.hub_loaded or not channel_silent:
            return None
    return served


def served_rows(watch: Any, finder: Any, paths: dict[str, str], listed: set[str]) -> list[dict[str, Any]]:
    """Listing rows of the kernels served from the server's side (no secrets: nothing is needed)."""
    if watch is None:
        return []
    out = []
    for kernel_id in finder.kernel_ids():
        served = served_here(watch, finder, kernel_id, channel_silent=True) if kernel_id not in listed else None
        if served is None:
            continue
        out.append(
            {
                "kernel_id": kernel_id,
                "notebook_path": paths.get(kernel_id),
                "protocol_versions": [*HANDSHAKE_VERSIONS, *STATELESS_VERSIONS],
                "server_version": __version__,
                "started_at": served.watched_since,
                "route": "server",
                "carrier": "server",  # the deprecated name of "route" (one release)
                "language": served.language,
                "display_name": served.display_name,
            }
        )
    return out
