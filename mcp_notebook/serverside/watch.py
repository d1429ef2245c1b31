"""The server's kernels, watched: for each kernel of the kernel manager that runs on this host, an
IOPub subscription of our own (``kernel.connect_iopub()``, the seam jupyter_server's own activity
tracking uses: a SUB socket receives everything the kernel publishes, whichever client ran the cell,
and sends the kernel nothing), feeding that kernel's :class:`~.kernel.ServedKernel`.

:meth:`KernelWatch.sync` runs on the server's loop (a periodic callback and every request): new
kernels are watched, gone ones closed, a restart (the kernel's process changed) told. What a kernel
published before the server watched it is not seen: its notebook on disk holds those outputs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from ..revisions import HANDSHAKE_VERSIONS, STATELESS_VERSIONS
from ..version import __version__
from .kernel import ServedKernel, spec_of
from .shell import ShellAsker

log = logging.getLogger(__name__)


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
            if served is not None:
                served.hub_loaded = self.has_hub(kernel_id)

    def _attach(self, kernel_id: str) -> None:
        if not self.local(kernel_id):
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
        try:
            pid = _pid(self.kernel_manager.get_kernel(kernel_id))
        except Exception:
            return
        if pid is not None and pid != self._pids.get(kernel_id):
            self._pids[kernel_id] = pid
            self.served[kernel_id].restarted("restarted")

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


def kernel_watch(settings: dict[str, Any]) -> Any:
    """The ExtensionApp's watch over hub-less kernels, or None (turned off, or not started)."""
    return getattr(settings.get("mcp_notebook"), "kernel_watch", None)


def served_here(settings: dict[str, Any], finder: Any, kernel_id: str) -> Any:
    """The kernel's server-side server when it has no hub of its own, else None (its hub wins)."""
    watch = kernel_watch(settings)
    served = watch.get(kernel_id) if watch is not None else None
    if served is None or finder.by_channel(kernel_id) or finder.record(kernel_id) is not None:
        return None
    return served


def served_rows(settings: dict[str, Any], finder: Any, paths: dict[str, str], listed: set[str]) -> list[dict[str, Any]]:
    """Listing rows of the kernels served from the server's side (no secrets: nothing is needed)."""
    watch = kernel_watch(settings)
    if watch is None:
        return []
    out = []
    for kernel_id in finder.kernel_ids():
        served = served_here(settings, finder, kernel_id) if kernel_id not in listed else None
        if served is None:
            continue
        out.append(
            {
                "kernel_id": kernel_id,
                "notebook_path": paths.get(kernel_id),
                "protocol_versions": [*HANDSHAKE_VERSIONS, *STATELESS_VERSIONS],
                "server_version": __version__,
                "started_at": served.watched_since,
                "carrier": "server",
                "language": served.language,
                "display_name": served.display_name,
            }
        )
    return out
