"""``mcp-notebook changes [--follow]``: one bounded JSON line per change of the kernels' hubs.

A line says a cell finished or failed (its number, status, duration, the names it changed), or that
a kernel restarted, died or started. It is meant for a stream a host turns into conversation turns
(Claude Code's Monitor tool reads each stdout line), since hosts drop ``resources/updated``.

Each followed kernel has a thread that waits on its hub's ``changes_since`` tool (the change journal,
resources.py) and then walks the hub's executed cells (``nb://cells/{seq}``) from the last one it
reported: the journal only wakes it up, so a cell is reported once, in order, whatever the journal
kept. Every line carries a ``cursor`` (``KERNEL@EPOCH.CELL``): given back with ``--since``, a new run
starts right after that line, so a consumer that reconnects loses and repeats nothing. A hub that
stops answering is retried (its address re-read from the directory); a kernel missing for
``--grace`` seconds is reported dead; one whose hub comes back with another journal epoch restarted.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..allkernels.directory import KernelEntry, LocalDirectory
from ..allkernels.upstream import HubError, HubGone, call
from ..hubclient.address import HubAddress
from ..hubclient.rules import SERVER_SCHEME
from ..redact import mask_secrets

WAIT_SECONDS = 10.0  # one changes_since wait (the hub's bound is 30)
SCAN_SECONDS = 1.0  # how often the directory of kernels is read again
RETRY_SECONDS = 1.0  # after a hub did not answer
READY_SECONDS = 10.0  # at most this long before "following" is said (each kernel's starting point known)
WALK_CELLS = 200  # cells reported per walk before the journal is asked again
MAX_LINE = 2_000  # characters of one line, at most
MAX_NAMES = 20  # changed names in one line ("more" counts the rest)
MAX_NAME = 60
MAX_TEXT = 160  # first_line, error
NOT_FOUND = (-32002, -32602)  # a resource not found, in either era


class CursorError(ValueError):
    """A --since value that is not KERNEL@EPOCH.CELL."""


@dataclass
class Position:
    """The last cell reported for a kernel: its hub's journal epoch and the cell's number."""

    epoch: str
    cell: int

    def cursor(self, kernel: str) -> str:
        return f"{kernel}@{self.epoch}.{self.cell}"


def parse_since(values: list[str]) -> dict[str, Position]:
    """``--since`` values (``KERNEL@EPOCH.CELL``, the ``cursor`` of a line) by kernel id."""
    out: dict[str, Position] = {}
    for value in values:
        kernel, at, rest = value.strip().rpartition("@")
        epoch, dot, cell = rest.partition(".")
        if not (kernel and at and dot and epoch.isalnum() and cell.isascii() and cell.isdigit()):
            raise CursorError(f"--since {value[:80]!r}: expected KERNEL@EPOCH.CELL (a line's cursor)")
        out[kernel] = Position(epoch, int(cell))
    return out


def _cut(text: Any, limit: int) -> str:
    text = mask_secrets(str(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Output:
    """Lines to a stream, whole and one at a time; False once the reader has gone."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self._lock = threading.Lock()
        self.closed = False

    def write(self, event: dict[str, Any]) -> bool:
        line = json.dumps(event, ensure_ascii=False)
        if len(line) > MAX_LINE:  # (the parts are bounded; this is the last guard)
            event = {k: v for k, v in event.items() if k not in ("changed", "first_line", "error")}
            line = json.dumps({**event, "cut": True}, ensure_ascii=False)
        with self._lock:
            if self.closed:
                return False
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.closed = True
                return False
        return True


def cell_event(kernel: KernelEntry, epoch: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The line of one finished cell, from its ``nb://cells/{seq}`` document."""
    seq = int(doc["seq"])
    lineage = doc.get("lineage") if isinstance(doc.get("lineage"), dict) else {}
    names: dict[str, None] = {}
    for key in ("added", "rebound", "changed_in_place", "removed"):
        for item in lineage.get(key) or []:
            name = item.get("name") if isinstance(item, dict) else item  # (a cell's read gives name and URIs)
            if isinstance(name, str):
                names.setdefault(_cut(name, MAX_NAME), None)
    event: dict[str, Any] = {
        "event": "cell",
        "kernel": kernel.id,
        "notebook": _cut(kernel.notebook, 200) if kernel.notebook else None,
        "cell": seq,
        "status": doc.get("status"),
        "duration": None if doc.get("duration") is None else round(float(doc["duration"]), 3),
        "changed": list(names)[:MAX_NAMES],
        "first_line": _cut((doc.get("source") or "").strip().split("\n", 1)[0], MAX_TEXT),
        "uri": f"nb://kernels/{kernel.id}/cells/{seq}",
        "time": doc.get("finished"),
        "cursor": Position(epoch, seq).cursor(kernel.id),
    }
    if len(names) > MAX_NAMES:
        event["more"] = len(names) - MAX_NAMES
    error = next((o for o in doc.get("outputs") or [] if o.get("output_type") == "error"), None)
    if error is not None:
        event["error"] = _cut(error.get("preview") or error.get("ename") or "error", MAX_TEXT)
    return event


def kernel_event(kind: str, kernel: KernelEntry, position: Position | None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "event": kind,
        "kernel": kernel.id,
        "notebook": _cut(kernel.notebook, 200) if kernel.notebook else None,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if position is not None:
        event["cursor"] = position.cursor(kernel.id)
    return event


@dataclass
class Follower:
    """One kernel: waits on its hub's journal, reports its cells in order, and a restart."""

    entry: KernelEntry
    out: Output
    stop: threading.Event
    position: Position | None = None  # None: from now on
    announce: str | None = None  # "kernel_started" for a kernel found after the start
    journal: str | None = field(default=None, repr=False)
    thread: threading.Thread | None = field(default=None, repr=False)

    def _tool(self, args: dict[str, Any]) -> dict[str, Any]:
        result = call(self.entry.hub, "tools/call", {"name": "changes_since", "arguments": args})
        if result.get("isError"):
            raise HubError({"message": str(result.get("content"))[:200]})
        return json.loads(result["content"][0]["text"])

    def _read(self, uri: str) -> dict[str, Any] | None:
        try:
            result = call(self.entry.hub, "resources/read", {"uri": uri})
        except HubError as exc:
            if exc.code in NOT_FOUND:
                return None  # evicted, or not run yet
            raise
        return json.loads(result["contents"][0]["text"])

    def sync(self, wait: float) -> bool:
        """Wait (bounded) on the journal; a new epoch means the kernel restarted (or its hub reloaded).
        False when the hub's waiting slots were all taken (it answered at once: poll a little later)."""
        args: dict[str, Any] = {"wait_seconds": wait}
        if self.journal is not None:
            args["cursor"] = self.journal
        doc = self._tool(args)
        self.journal = str(doc["cursor"])
        epoch = self.journal.split(".", 1)[0]
        if self.position is None:
            index = self._read("nb://cells") or {}
            self.position = Position(epoch, int(index.get("last_seq") or 0))
            if self.announce:
                self.out.write(kernel_event(self.announce, self.entry, self.position))
        elif self.position.epoch != epoch:
            self.position = Position(epoch, 0)
            self.out.write(kernel_event("kernel_restarted", self.entry, self.position))
        return not doc.get("busy")

    def walk(self) -> int:
        """Report the finished cells after the last one reported; how many."""
        assert self.position is not None
        done = 0
        while done < WALK_CELLS and not self.stop.is_set():
            doc = self._read(f"nb://cells/{self.position.cell + 1}")
            if doc is None:
                index = self._read("nb://cells") or {}
                first = index.get("first_seq")
                if isinstance(first, int) and first > self.position.cell + 1:  # evicted before we came
                    self.position.cell = first - 1
                    continue
                return done
            if doc.get("status") not in ("ok", "error"):
                return done  # still running: reported when it ends
            if not self.out.write(cell_event(self.entry, self.position.epoch, doc)):
                self.stop.set()
                return done
            self.position.cell = int(doc["seq"])
            done += 1
        return done

    def once(self) -> None:
        self.sync(0)
        self.walk()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                waited = self.sync(0 if self.journal is None else WAIT_SECONDS)
                while self.walk() >= WALK_CELLS:
                    pass
                if not waited:
                    self.stop.wait(RETRY_SECONDS)
            except (HubGone, HubError, ValueError, KeyError, IndexError, TypeError):
                self.stop.wait(RETRY_SECONDS)  # the directory gives the new address, if any

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=f"changes-{self.entry.id[:12]}", daemon=True)
        self.thread.start()


Lister = Callable[[], list[KernelEntry]]


@dataclass
class Selection:
    """Which kernels: one id (or prefix), one notebook, the newest, or all of them."""

    kernel: str | None = None
    notebook: str | None = None
    latest: bool = False
    pinned: str | None = None  # the newest, once chosen

    def pick(self, entries: list[KernelEntry]) -> list[KernelEntry]:
        if self.kernel:
            exact = [e for e in entries if e.id == self.kernel]
            return exact or [e for e in entries if e.id.startswith(self.kernel)][:1]
        if self.notebook:
            want = self.notebook.rstrip("/")
            return [e for e in entries if e.notebook and (e.notebook == want or e.notebook.endswith("/" + want))]
        if self.latest:
            if self.pinned is None and entries:
                self.pinned = max(entries, key=lambda e: e.started_at).id
            return [e for e in entries if e.id == self.pinned]
        return entries


class Watch:
    """The directory's kernels, each with a follower; reports deaths and new kernels."""

    def __init__(
        self, lister: Lister, selection: Selection, out: Output, since: dict[str, Position], grace: float
    ) -> None:
        self.lister, self.selection, self.out, self.grace = lister, selection, out, grace
        self.since = since
        self.stop = threading.Event()
        self.followers: dict[str, Follower] = {}
        self.missing: dict[str, float] = {}  # kernel id -> when it was first missed
        self.gone: dict[str, Position | None] = {}  # reported dead: where it was
        self.first = True

    def scan(self) -> None:
        """Read the directory once: follow new kernels, update addresses, report the dead."""
        try:
            entries = self.selection.pick(self.lister())
        except (OSError, ValueError, HubGone, HubError):
            return  # the server restarts or the network blinks: the kernels are kept
        now = time.monotonic()
        seen = {e.id for e in entries}
        for entry in entries:
            self.missing.pop(entry.id, None)
            found = self.followers.get(entry.id)
            if found is not None:
                found.entry = entry  # a restarted kernel's hub has a new address
                continue
            self._follow(entry)
        for kid, follower in list(self.followers.items()):
            if kid in seen:
                continue
            since = self.missing.setdefault(kid, now)
            if now - since >= self.grace:
                follower.stop.set()
                del self.followers[kid]
                self.gone[kid] = follower.position
                self.out.write(kernel_event("kernel_died", follower.entry, follower.position))
        self.first = False

    def _follow(self, entry: KernelEntry) -> None:
        position = self.since.get(entry.id) or self.gone.pop(entry.id, None)
        announce = None if self.first or position is not None else "kernel_started"
        follower = Follower(entry, self.out, threading.Event(), position, announce)
        self.followers[entry.id] = follower
        follower.start()

    def ready(self, timeout: float) -> int:
        """Wait (bounded) until every follower knows where it starts; how many kernels are followed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(f.position is None for f in self.followers.values()):
            self.stop.wait(0.05)
        return len(self.followers)

    def run(self) -> None:
        self.scan()
        count = self.ready(READY_SECONDS)
        print(
            f"mcp-notebook changes: following {count} kernel(s); one JSON line per change", file=sys.stderr, flush=True
        )
        while not self.stop.is_set() and not self.out.closed:
            self.stop.wait(SCAN_SECONDS)
            self.scan()
        for follower in self.followers.values():
            follower.stop.set()

    def once(self) -> None:
        """One pass, no waiting: every selected kernel's cells after --since (or none)."""
        for entry in self.selection.pick(self.lister()):
            follower = Follower(entry, self.out, self.stop, self.since.get(entry.id))
            try:
                follower.once()
            except (HubGone, HubError) as exc:
                print(f"mcp-notebook changes: {entry.id}: {exc}", file=sys.stderr)


def local_lister() -> Lister:
    directory = LocalDirectory()
    return lambda: directory.entries(fresh=True)


def remote_lister(server: str, token: str) -> Lister:
    """A Jupyter server's kernels with a hub, each reached through its extension with the Jupyter token."""
    from ..bridge.remote import RemoteSelector

    selector = RemoteSelector(server=server, token=token)

    def entries() -> list[KernelEntry]:
        return [
            KernelEntry(r.kernel_id or "", r.notebook_path, HubAddress(r.url, r.token, SERVER_SCHEME), r.started_at)
            for r in selector.records()
            if r.kernel_id
        ]

    return entries


def run_changes(lister: Lister, selection: Selection, since: dict[str, Position], follow: bool, grace: float) -> int:
    """Print the lines; with ``follow``, until SIGINT/SIGTERM or the reader goes away."""
    watch = Watch(lister, selection, Output(sys.stdout), since, grace)
    if not follow:
        watch.once()
        return 0

    def stop(_signum: int, _frame: Any) -> None:
        watch.stop.set()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        watch.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
