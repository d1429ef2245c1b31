"""Which kernels of a Jupyter server have a hub, and where: runtime files matched by kernel id.

A hub writes ``mcp-notebook-<kernel id>.json`` (mode 0600) into Jupyter's runtime dir, the
directory that also holds the kernel's connection file. The server looks there, and only for
kernels its own kernel manager knows, so a URL can never reach a hub of another server's kernel.
A kernel on another host (a gateway, a remote provisioner) writes its file on that host: out of
reach, and said so.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..runtime import PREFIX, HubRecord, pid_alive


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
class HubAddress:
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


def address(record: HubRecord, kernel_id: str) -> HubAddress | None:
    parts = urlsplit(record.url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        return None
    return HubAddress(kernel_id, parts.hostname, parts.port, parts.path or "/mcp", record.token, record)


class HubFinder:
    """Looks up hubs for the kernels of one server's kernel manager."""

    def __init__(self, kernel_manager: Any, runtime_dirs: list[str | os.PathLike[str]], gateway: bool = False):
        self.kernel_manager = kernel_manager
        self.gateway = gateway
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

    def locate(self, kernel_id: str) -> HubAddress:
        """The hub of a kernel of this server, or :class:`HubUnavailable` naming why not."""
        if not self.known(kernel_id):
            raise HubUnavailable(404, "unknown_kernel", f"No kernel {kernel_id} on this Jupyter server.", kernel_id)
        record = self.record(kernel_id)
        found = address(record, kernel_id) if record is not None else None
        if found is not None:
            return found
        remote = self.remote_reason(kernel_id)
        if remote is not None:
            raise HubUnavailable(
                503,
                "remote_kernel",
                f"Kernel {kernel_id} runs through {remote}, on another host than this Jupyter server: its "
                "mcp-notebook hub listens on that host's loopback and is out of reach of the server extension "
                "(it finds hubs only for kernels on the server's own host).",
                kernel_id,
            )
        raise HubUnavailable(
            503,
            "no_hub",
            f"Kernel {kernel_id} has no running mcp-notebook hub: run `%load_ext mcp_notebook` in it. "
            "(Kernels on another host than the Jupyter server are out of reach of the server extension.)",
            kernel_id,
        )

    def hubs(self, notebook_paths: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Kernels of this server that have a live hub: what a client needs to pick one, no secrets."""
        out = []
        for kernel_id in self.kernel_ids():
            record = self.record(kernel_id)
            if record is None:
                continue
            info = record.info
            out.append(
                {
                    "kernel_id": kernel_id,
                    "notebook_path": info.get("notebook_path") or (notebook_paths or {}).get(kernel_id),
                    "protocol_versions": list(info.get("protocol_versions") or []),
                    "server_version": info.get("server_version"),
                    "started_at": info.get("started_at"),
                }
            )
        out.sort(key=lambda e: e.get("started_at") or 0, reverse=True)
        return out
