"""Where the front finds kernels: this machine's runtime files, or a Jupyter server's kernels (the
server extension supplies its own directory with the same shape)."""

from __future__ import annotations

import json
import os
import posixpath
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..hubclient.address import HubAddress
from ..runtime import PREFIX, HubRecord, discover, pid_alive, runtime_dir

FOCUS_FILE = "mcp_notebook_focus.json"  # not matched by the runtime-file globs


@dataclass(frozen=True)
class KernelEntry:
    """One running kernel with a hub."""

    id: str
    notebook: str | None
    hub: HubAddress
    started_at: float = 0.0
    state: str | None = None  # idle / busy, when the directory knows
    pid: int | None = None
    where: str | None = None  # the kernel's working directory, for a label when no notebook is known
    language: str | None = None  # the kernelspec's language, when the directory knows
    display_name: str | None = None  # the kernelspec's display name, when the directory knows
    served_by: str = "hub"  # "hub": its in-kernel hub; "jupyter-server": served from the server's side


class Directory(Protocol):
    def entries(self, fresh: bool = False) -> list[KernelEntry]:
        """The running kernels with a hub, oldest first (``fresh``: look now, whatever was cached)."""
        ...

    def focused(self) -> tuple[str, float] | None:
        """The kernel id a frontend focused last and when (epoch seconds), if known."""
        ...


class LocalDirectory:
    """The hubs of this machine, from the runtime files (re-read only when the directory changes).

    The front's tick thread and its request threads ask at once: one lock holds a look, so no one
    sees the new directory signature beside the old (empty) listing while another thread reads."""

    FRESH_SECONDS = 0.25  # a listing this recent is answered again without looking

    def __init__(self, path: Path | None = None):
        self.path = path
        self._seen: tuple[tuple[str, int], ...] | None = None
        self._entries: list[KernelEntry] = []
        self._looked = 0.0
        self._lock = threading.Lock()

    def _dir(self) -> Path:
        return self.path or runtime_dir()

    def entries(self, fresh: bool = False) -> list[KernelEntry]:
        with self._lock:
            return self._look(fresh)

    def _look(self, fresh: bool) -> list[KernelEntry]:
        now = time.monotonic()
        if not fresh and now - self._looked < self.FRESH_SECONDS:
            return list(self._entries)
        try:
            files = tuple(
                sorted(
                    (e.name, e.stat().st_mtime_ns)
                    for e in os.scandir(self._dir())
                    if e.name.startswith(PREFIX) and e.name.endswith(".json")
                )
            )
        except OSError:
            files = ()
        if files != self._seen or any(e.pid is not None and not pid_alive(e.pid) for e in self._entries):
            self._entries = [
                KernelEntry(
                    local_id(r),
                    r.notebook_path,
                    HubAddress(r.url, r.token),
                    r.started_at,
                    pid=r.pid,
                    where=r.info.get("cwd") if isinstance(r.info.get("cwd"), str) else None,
                )
                for r in reversed(discover(clean=False, directory=self.path))
                if r.alive and r.url
            ]
            self._seen = files  # only once the listing it stands for is in place
        self._looked = time.monotonic()
        return list(self._entries)

    def focused(self) -> tuple[str, float] | None:
        try:
            doc = json.loads((self._dir() / FOCUS_FILE).read_text())
            return str(doc["kernel_id"]), float(doc["at"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def local_id(record: HubRecord) -> str:
    """A kernel's id: Jupyter's (its connection file is ``kernel-<id>.json``), else the name of its
    connection file (a kernel started by plain jupyter_client, ``tmpab12cd34``: what
    ``jupyter console --existing`` takes), else its hub's process id."""
    if record.kernel_id:
        return record.kernel_id
    path = record.info.get("connection_file")
    if isinstance(path, str) and path:
        stem = posixpath.basename(path.replace("\\", "/")).removesuffix(".json")
        if stem:
            return stem
    return f"pid{record.pid}"


def write_focus(directory: Path, kernel_id: str) -> None:
    """Record the kernel a frontend focused (owner-only, replaced atomically)."""
    path = directory / FOCUS_FILE
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"kernel_id": kernel_id, "at": time.time()}, fh)
    os.replace(tmp, path)
