"""Which kernels of a Jupyter server have a hub, and where: runtime files matched by kernel id.

A hub writes ``mcp-notebook-<kernel id>.json`` (mode 0600) into Jupyter's runtime dir, the
directory that also holds the kernel's connection file. The server looks there, and only for
kernels its own kernel manager knows, so a URL can never reach a hub of another server's kernel.
A kernel on another host (a gateway, a remote provisioner) writes its file on that host: its hub
is reached over the kernel's control channel instead (control_client.py), the route chosen per kernel
(``c.MCPNotebookExtension.route``: auto, tcp or control).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..hubclient.rules import UpstreamError
from ..runtime import PREFIX, HubRecord, pid_alive
from .control_client import LISTING_NO_HUB_SECONDS, KernelChannel, KernelHasNoHub
from .wires import GatewayWire, Wire, ZmqWire

IDLE_WIRE_SECONDS = 600.0  # a kernel's control connection unused this long is closed (reopened on use)
INFO_LISTING_SECONDS = 2.0  # how long the kernels listing waits for a kernel's control channel


class HubUnavailable(Exception):
    """No hub to talk to for this kernel; ``status`` and ``reason`` go into the HTTP reply."""

    def __init__(self, status: int, reason: str, message: str, kernel_id: str):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.kernel_id = kernel_id

    def body(self) -> dict[str, Any]:
        """A JSON-RPC error object (MCP clients show its message) that also reads as a Jupyter API error."""
        data = {"kernel_id": self.kernel_id, "reason": self.reason}
        return {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32000, "message": self.message, "data": data},
            "message": self.message,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class LoopbackHub:
    """Where a kernel's hub listens, with its token (which never leaves the server)."""

    kernel_id: str
    host: str
    port: int
    path: str
    token: str | None
    record: HubRecord

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def address(record: HubRecord, kernel_id: str) -> LoopbackHub | None:
    parts = urlsplit(record.url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        return None
    return LoopbackHub(kernel_id, parts.hostname, parts.port, parts.path or "/mcp", record.token, record)


class HubFinder:
    """Looks up hubs for the kernels of one server's kernel manager."""

    def __init__(
        self,
        kernel_manager: Any,
        runtime_dirs: list[str | os.PathLike[str]],
        gateway: bool = False,
        route: str = "auto",
    ):
        self.kernel_manager = kernel_manager
        self.gateway = gateway
        self.route = route  # auto: loopback TCP when the hub's file is here, else the control channel
        self.channels: dict[str, KernelChannel] = {}
        self.loop: Any = None  # the server's event loop (set by the handlers), where channels live
        self.hubless: Callable[[str], bool] = lambda kernel_id: False  # known silent (the watch's probe)
        seen: list[Path] = []
        for d in runtime_dirs:
            if d and Path(d) not in seen:
                seen.append(Path(d))
        self.dirs = seen
        self._cache: dict[Path, tuple[int, dict[str, Any]]] = {}

    # -- runtime files ---------------------------------------------------------------------------
    def _read(self, path: Path) -> dict[str, Any] | None:
        """A runtime file's content, re-read only when it changed."""
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            self._cache.pop(path, None)
            return None
        cached = self._cache.get(path)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(info, dict):
            return None
        if len(self._cache) > 1024:
            self._cache.clear()
        self._cache[path] = (mtime, info)
        return info

    def record(self, kernel_id: str) -> HubRecord | None:
        """The live hub of ``kernel_id``: its own file first, then any file naming the kernel."""
        for d in self.dirs:
            path = d / f"{PREFIX}{kernel_id}.json"
            info = self._read(path)
            if info is not None and info.get("kernel_id") == kernel_id and pid_alive(info.get("pid")):
                return HubRecord(path, info, True)
        for d in self.dirs:
            with contextlib.suppress(OSError):
                for path in d.glob(f"{PREFIX}*.json"):
                    info = self._read(path)
                    if info is not None and info.get("kernel_id") == kernel_id and pid_alive(info.get("pid")):
                        return HubRecord(path, info, True)
        return None

    # -- kernels ---------------------------------------------------------------------------------
    def known(self, kernel_id: str) -> bool:
        try:
            return kernel_id in self.kernel_manager
        except Exception:
            return False

    def kernel_ids(self) -> list[str]:
        try:
            return list(self.kernel_manager.list_kernel_ids())
        except Exception:
            return []

    def remote_reason(self, kernel_id: str) -> str | None:
        """Why this kernel runs on another host than the server, if it does."""
        if self.gateway:
            return "a kernel gateway"
        try:
            provisioner = getattr(self.kernel_manager.get_kernel(kernel_id), "provisioner", None)
        except Exception:
            return None
        if provisioner is None:
            return None
        try:
            from jupyter_client.provisioning import LocalProvisioner
        except ImportError:  # an old jupyter_client: no provisioners, kernels are local
            return None
        if isinstance(provisioner, LocalProvisioner):
            return None
        return f"the {type(provisioner).__name__} kernel provisioner"

    def locate(self, kernel_id: str) -> LoopbackHub:
        """The loopback hub of a kernel of this server, or :class:`HubUnavailable` naming why not."""
        if not self.known(kernel_id):
            raise HubUnavailable(404, "unknown_kernel", f"No kernel {kernel_id} on this Jupyter server.", kernel_id)
        record = self.record(kernel_id) if self.route != "control" else None
        found = address(record, kernel_id) if record is not None else None
        if found is not None:
            return found
        raise HubUnavailable(
            503,
            "no_hub",
            f"Kernel {kernel_id} has no running mcp-notebook hub: run `%load_ext mcp_notebook` in it. (This "
            "kernel runs on the server's host, so its hub is found by its runtime file; kernels on another host "
            "are reached over their control channel.)",
            kernel_id,
        )

    # -- the control channel -------------------------------------------------------------------
    def by_channel(self, kernel_id: str) -> bool:
        """Whether this kernel's hub is reached over its control channel rather than loopback TCP."""
        if self.route == "control":
            return True
        if self.route == "tcp":
            return False
        return self.remote_reason(kernel_id) is not None and self.record(kernel_id) is None

    def channel(self, kernel_id: str) -> KernelChannel:
        """The kernel's control channel (one per kernel, opened on first use)."""
        found = self.channels.get(kernel_id)
        if found is None:
            for gone in [k for k in self.channels if not self.known(k)]:
                self.channels.pop(gone).close()
            found = self.channels[kernel_id] = KernelChannel(kernel_id, lambda: self._wire(kernel_id))
        for other in self.channels.values():  # a websocket nobody uses still carries all IOPub: close it
            if (
                other is not found
                and other.is_open
                and other.idle
                and time.monotonic() - other.last_used > IDLE_WIRE_SECONDS
            ):
                other.close()
        return found

    def _wire(self, kernel_id: str) -> Wire:
        return GatewayWire(kernel_id) if self.gateway else ZmqWire(self.kernel_manager, kernel_id)

    async def reach(self, kernel_id: str) -> LoopbackHub | KernelChannel:
        """The way to a kernel's hub: its loopback address, or its control channel once the hub there
        answered; :class:`HubUnavailable` naming why not."""
        if not self.known(kernel_id):
            raise HubUnavailable(404, "unknown_kernel", f"No kernel {kernel_id} on this Jupyter server.", kernel_id)
        if not self.by_channel(kernel_id):
            return self.locate(kernel_id)
        channel = self.channel(kernel_id)
        try:
            await channel.info()
        except KernelHasNoHub as exc:
            raise self.no_hub(kernel_id, exc) from None
        except UpstreamError as exc:
            raise HubUnavailable(502, "hub_unreachable", str(exc), kernel_id) from None
        return channel

    async def probe(self, kernel_id: str) -> bool | None:
        """Whether a hub answers on the kernel's control channel now (asked afresh, at most 5 s);
        None when the channel cannot be reached. A silent kernel's channel is closed (no hub: nothing
        to keep it for)."""
        channel = self.channel(kernel_id)
        channel.forget_info()
        try:
            await channel.info(no_hub_seconds=0.0)
            return True
        except KernelHasNoHub:
            if self.channels.get(kernel_id) is channel and channel.idle:
                self.channels.pop(kernel_id).close()
            return False
        except UpstreamError:
            return None

    def no_hub(self, kernel_id: str, exc: KernelHasNoHub) -> HubUnavailable:
        """Why a kernel reached over its control channel has no hub for us, in words."""
        where = self.remote_reason(kernel_id) or "its control channel"
        if exc.reason == "no_answer":
            message = (
                f"Kernel {kernel_id} (through {where}) did not answer mcp_info_request on its control channel: "
                "run `%load_ext mcp_notebook` in it (with mcp-notebook installed in the kernel's environment). "
                "If it is loaded, the kernel or the gateway does not carry custom control messages (a gateway's "
                "allowed_message_types must include mcp_info_request, mcp_request, mcp_cancel and mcp_keepalive)."
            )
        else:
            message = f"Kernel {kernel_id} (through {where}) cannot serve MCP on its control channel: {exc.message}"
        return HubUnavailable(503, "no_hub", message, kernel_id)

    async def channel_hubs(self, kernel_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The hub facts of kernels reached over their control channels (asked at once, briefly)."""
        wanted = [k for k in kernel_ids if self.by_channel(k) and not self.hubless(k)]

        async def ask(kernel_id: str) -> dict[str, Any] | None:
            try:
                return await self.channel(kernel_id).info(INFO_LISTING_SECONDS, LISTING_NO_HUB_SECONDS)
            except (KernelHasNoHub, UpstreamError):
                return None

        answers = await asyncio.gather(*(ask(k) for k in wanted))
        return {k: a for k, a in zip(wanted, answers, strict=True) if a is not None}

    def channel_hubs_now(self, kernel_ids: list[str]) -> dict[str, dict[str, Any]]:
        """:meth:`channel_hubs` from a thread other than the server's loop (the front's)."""
        loop = self.loop
        if loop is None or not any(self.by_channel(k) and not self.hubless(k) for k in kernel_ids):
            return {}
        try:
            if asyncio.get_running_loop() is loop:
                return {}  # never block the server's own loop
        except RuntimeError:
            pass
        future = asyncio.run_coroutine_threadsafe(self.channel_hubs(kernel_ids), loop)
        try:
            return future.result(INFO_LISTING_SECONDS + 1)
        except Exception:
            future.cancel()
            return {}

    def hubs(
        self, notebook_paths: dict[str, str] | None = None, by_channel: dict[str, dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """Kernels of this server that have a live hub: what a client needs to pick one, no secrets.
        ``by_channel``: the facts of hubs reached over control channels (:meth:`channel_hubs`)."""
        out = []
        for kernel_id in self.kernel_ids():
            record = self.record(kernel_id) if self.route != "control" else None
            info = record.info if record is not None else (by_channel or {}).get(kernel_id)
            if info is None:
                continue
            route = "tcp" if record is not None else "control"
            out.append(
                {
                    "kernel_id": kernel_id,
                    "notebook_path": info.get("notebook_path") or (notebook_paths or {}).get(kernel_id),
                    "protocol_versions": list(info.get("protocol_versions") or []),
                    "server_version": info.get("server_version"),
                    "started_at": info.get("started_at"),
                    "route": route,
                    "carrier": route,  # deprecated alias of "route" (its name until 0.1.x), kept for a release
                }
            )
        out.sort(key=lambda e: e.get("started_at") or 0, reverse=True)
        return out
