"""Runtime files: one JSON file per running hub in Jupyter's runtime dir (mode 0600).

They let the CLI and the stdio bridge find a hub and its token without anything being printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from . import portable

PREFIX = "mcp-notebook-"


def runtime_dir() -> Path:
    from jupyter_core.paths import jupyter_runtime_dir

    path = Path(jupyter_runtime_dir())
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def write_runtime_file(info: dict[str, Any], key: str) -> Path:
    """Write ``info`` atomically, readable by the owner only.

    The file is created new (a stale temporary file of a crashed hub is removed first), so its
    mode is 0600 from the start; the chmod after it only repeats that, and a filesystem that
    refuses modes (Windows, where the per-user runtime dir's ACL is what protects the file; FAT or
    network mounts) does not stop the hub."""
    path = runtime_dir() / f"{PREFIX}{key}.json"
    tmp = path.with_suffix(".json.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(info, fh, indent=2)
    with contextlib.suppress(OSError):
        os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def log_path(key: str) -> Path:
    """The hub's own log, beside its runtime file (not matched by the runtime-file glob)."""
    return runtime_dir() / f"{PREFIX}{key}.log"


def remove_runtime_file(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


LOG_GRACE_SECONDS = 60.0  # a log without a runtime file younger than this may be a hub still starting


def _log_key(runtime_key: str) -> str:
    """The key of a hub's log from its runtime file's key: the kernel id, or ``pid<n>`` (the
    runtime file of a hub outside a kernel also names its port, unknown when the log starts)."""
    return runtime_key.split("-", 1)[0] if runtime_key.startswith("pid") else runtime_key


def remove_hub_files(path: Path) -> None:
    """A hub's runtime file and its log (with the log's rotated copy)."""
    remove_runtime_file(path)
    log = log_path(_log_key(path.name[len(PREFIX) :].removesuffix(".json")))
    remove_runtime_file(log)
    remove_runtime_file(log.with_name(log.name + ".1"))


def sweep(now: float | None = None) -> int:
    """Remove what hubs that are gone left in the runtime dir: runtime files of dead processes with
    their logs, and logs (or half-written runtime files) with no runtime file beside them, once
    older than LOG_GRACE_SECONDS. Costs one listing of our files; returns how many went."""
    now = time.time() if now is None else now
    removed = sum(1 for record in discover(clean=True) if not record.alive)
    ours = _ours(runtime_dir())
    live = {_log_key(p.name[len(PREFIX) :].removesuffix(".json")) for p in ours if p.name.endswith(".json")}
    for path in ours:
        name = path.name[len(PREFIX) :]
        if name.endswith(".json"):
            continue
        key = name.removesuffix(".1").removesuffix(".log").removesuffix(".json.tmp")
        if key in live or name == key:  # a live hub's log, or not a file of ours
            continue
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > LOG_GRACE_SECONDS:
                path.unlink()
                removed += 1
    return removed


def _ours(directory: Path, suffix: str = "") -> list[Path]:
    """Our files in ``directory`` (named PREFIX...suffix): one listing and no pattern to compile (a
    glob compiles a regular expression: milliseconds of ``%load_ext``); none if it cannot be listed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [directory / name for name in names if name.startswith(PREFIX) and name.endswith(suffix)]


def read_runtime_files(directory: Path | None = None) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(_ours(directory or runtime_dir(), ".json")):
        with contextlib.suppress(OSError, ValueError):
            out.append((path, json.loads(path.read_text())))
    return out


# -- discovery ----------------------------------------------------------------------------------
class HubRecord:
    """One runtime file and what we know about the process behind it."""

    __slots__ = ("alive", "info", "path")

    def __init__(self, path: Path, info: dict[str, Any], alive: bool) -> None:
        self.path = path
        self.info = info
        self.alive = alive

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return (self.path, self.info, self.alive) == (other.path, other.info, other.alive)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"HubRecord({str(self.path)!r}, alive={self.alive!r})"

    @property
    def kernel_id(self) -> str | None:
        return self.info.get("kernel_id")

    @property
    def notebook_path(self) -> str | None:
        return self.info.get("notebook_path")

    @property
    def url(self) -> str:
        return str(self.info.get("url", ""))

    @property
    def token(self) -> str | None:
        return self.info.get("token")

    @property
    def pid(self) -> int | None:
        pid = self.info.get("pid")
        return pid if isinstance(pid, int) else None

    @property
    def started_at(self) -> float:
        value = self.info.get("started_at")
        return float(value) if isinstance(value, (int, float)) else 0.0

    def describe(self) -> str:
        where = self.notebook_path or (f"kernel {self.kernel_id}" if self.kernel_id else "a kernel")
        return f"{where} at {self.url} (pid {self.pid})"

    def public(self) -> dict[str, Any]:
        """What may be shown: everything but the token."""
        out = {k: v for k, v in self.info.items() if k != "token"}
        out["alive"] = self.alive
        out["runtime_file"] = str(self.path)
        return out


WINDOWS = sys.platform == "win32"


def pid_alive(pid: int | None) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    if WINDOWS:  # os.kill(pid, 0) would TerminateProcess the hub's kernel there
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return not _zombie(pid)


def _windows_pid_alive(pid: int) -> bool:
    """OpenProcess and GetExitCodeProcess: a process still running says STILL_ACTIVE (259)."""
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return ctypes.get_last_error() == 5  # ERROR_ACCESS_DENIED: exists, someone else's
    try:
        code = ctypes.c_ulong()
        return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259
    finally:
        kernel32.CloseHandle(handle)


def _zombie(pid: int) -> bool:
    """A process that exited and was not reaped yet (Linux; elsewhere, and on the portable path,
    MCP_NOTEBOOK_PORTABLE, we cannot tell cheaply)."""
    if portable.ON:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z"


def discover(clean: bool = True, directory: Path | None = None) -> list[HubRecord]:
    """Hubs of this machine from their runtime files (in ``directory``, else Jupyter's runtime dir),
    newest first; files of dead processes are removed."""
    records = []
    for path, info in read_runtime_files(directory):
        if not isinstance(info, dict):
            continue
        alive = pid_alive(info.get("pid"))
        if not alive and clean:
            remove_hub_files(path)
        records.append(HubRecord(path, info, alive))
    records.sort(key=lambda r: r.started_at, reverse=True)
    return records


def _same_path(stored: str | None, wanted: str) -> bool:
    if not stored:
        return False
    if stored == wanted:
        return True
    a = os.path.normcase(os.path.abspath(os.path.expanduser(stored)))
    b = os.path.normcase(os.path.abspath(os.path.expanduser(wanted)))
    if a == b:
        return True
    # a relative notebook path ("analysis/x.ipynb") matches the end of an absolute one
    tail = wanted.replace("\\", "/").lstrip("./")
    return bool(tail) and stored.replace("\\", "/").endswith("/" + tail)


class AmbiguousHub(LookupError):
    """A kernel-id prefix matches more than one running hub."""

    def __init__(self, wanted: str, matches: list[HubRecord]):
        self.matches = matches
        listed = "; ".join(f"{r.kernel_id} ({r.describe()})" for r in matches)
        super().__init__(
            f"kernel {wanted!r} is ambiguous: it matches {len(matches)} running hubs: {listed}. "
            "Pass more of the kernel id."
        )


def select(
    records: list[HubRecord],
    notebook: str | None = None,
    kernel: str | None = None,
    prefer: tuple[str | None, str | None] | None = None,
) -> HubRecord | None:
    """The live hub matching ``notebook`` or ``kernel`` (an id or a unique prefix), else the newest one.

    ``prefer`` = (kernel_id, notebook_path) of a hub used before: a restarted kernel's new hub wins.
    A kernel prefix matching several kernels raises :class:`AmbiguousHub` (never a guess).
    """
    live = [r for r in records if r.alive]
    if kernel:
        exact = [r for r in live if r.kernel_id == kernel]
        if exact:
            return exact[0]
        found = [r for r in live if (r.kernel_id or "").startswith(kernel)]
        if len({r.kernel_id for r in found}) > 1:
            raise AmbiguousHub(kernel, found)
        return found[0] if found else None
    if notebook:
        found = [r for r in live if _same_path(r.notebook_path, notebook)]
        return found[0] if found else None
    if prefer is not None:
        kid, path = prefer
        for r in live:
            if (kid and r.kernel_id == kid) or (path and r.notebook_path == path):
                return r
    return live[0] if live else None
