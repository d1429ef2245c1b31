"""The cell capture's ``write`` on sys.stdout/stderr: put on once, kept between cells (issue #48).

The capture used to wrap both streams at every pre_run_cell and unwrap them at every post_run_cell.
Now ours stays: where nothing else wraps per cell (IPython 8) the next cell finds it on top and does
nothing; IPython 9 sets its own per-cell tee on the instance before pre_run_cell and puts back what
it found after post_run_cell, so ours goes on the tee each cell and comes off with it, never taken
off by us. A stream that stops being sys.stdout/stderr is let go after the outermost cell; all of
them at uninstall. Ours records only while a cell runs (the capture's ``current``).

Also here, the hub-thread guard of a stream's ``write`` (issue #48, logs.py puts it on): text that
user code run by the hub prints on the hub's own threads goes to the hub's log, never to a cell.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from threading import get_ident
from typing import Any

THREAD_PREFIX = "mcp-notebook"  # every thread of the hub is named so
MAIN = threading.main_thread().ident  # never one of the hub's threads
_log = logging.getLogger("mcp_notebook")  # logs.py gives it its file
NEW_STREAM: list[Callable[[Any], None]] = []  # told of a stream the capture meets for the first time


def on_hub_thread() -> bool:
    """Whether the caller runs on one of the hub's threads (server loop, request pool, guarded calls)."""
    if get_ident() == MAIN:  # the kernel's own thread: one call, not three (every write)
        return False
    return threading.current_thread().name.startswith(THREAD_PREFIX)


def divert(string: Any) -> Any:
    """A write on a hub thread: into the hub's log (bounded), as a stream's write answers."""
    _log.info("output of user code on %s: %.500r", threading.current_thread().name, string)
    return len(string) if isinstance(string, str) else None


def guard_write(inner: Callable[..., Any]) -> Callable[..., Any]:
    """``inner`` behind the hub-thread check: what a hub thread writes is diverted (one compare on
    the main thread)."""

    def write(string: Any, *args: Any, **kwargs: Any) -> Any:
        if get_ident() != MAIN and on_hub_thread():
            return divert(string)
        return inner(string, *args, **kwargs)

    write.mcp_hub_guard = "stream"  # type: ignore[attr-defined]
    return write


def is_guard(write: Any, between_cells: bool = False) -> bool:
    """Whether ``write`` diverts the hub threads' text itself: a guard, or the capture's write (which
    IPython 9's tee takes off after a cell: not ``between_cells``)."""
    mark = getattr(write, "mcp_hub_guard", None)
    return mark == "stream" or (mark == "capture" and not between_cells)


class CellStreams:
    """Our ``write`` on the current sys.stdout/stderr (main thread, the capture's hooks only)."""

    def __init__(self, make_write: Callable[[Callable[[str], Any], str], Callable[[str], Any]]) -> None:
        self._make_write = make_write
        self._streams: dict[int, tuple[Any, Callable[..., Any], bool, Any]] = {}  # id: stream, ours, had, previous
        self.on_this_cell: set[int] = set()  # ids of the streams ours is on this outermost cell (maybe under a tee)

    def attach(self) -> None:
        """At a cell's start: ours on top of each stream where it is not already, once per outermost
        cell (a nested cell keeps the outer's, maybe under its own tee: wrapping again would record twice)."""
        streams, this_cell = self._streams, self.on_this_cell
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name, None)
            if stream is None or id(stream) in this_cell:
                continue
            entry = streams.get(id(stream))
            if entry is None:
                for tell in NEW_STREAM:  # logs.py: guard it between cells too
                    tell(stream)
            try:
                current = vars(stream).get("write")
                if entry is None or current is not entry[1]:
                    wrapper = self._make_write(stream.write if current is None else current, name)
                    stream.write = wrapper
                    streams[id(stream)] = (stream, wrapper, current is not None, current)  # held: the id stays
            except Exception:
                continue  # a stream that takes no attributes: degrade to no stream capture
            this_cell.add(id(stream))

    def release(self) -> None:
        """After the outermost cell: let go of the streams that are no longer sys.stdout/stderr."""
        self.on_this_cell.clear()
        streams = self._streams
        if len(streams) > 2 or not streams.keys() <= {id(sys.stdout), id(sys.stderr)}:
            current = (sys.stdout, sys.stderr)
            for key in [k for k, entry in streams.items() if not any(entry[0] is c for c in current)]:
                stream, wrapper, had, previous = streams.pop(key)
                unpatch(stream, "write", wrapper, had, previous)

    def detach(self) -> None:
        """Take ours off every stream where it is still on top (uninstall)."""
        self.on_this_cell.clear()
        while self._streams:
            stream, wrapper, had, previous = self._streams.popitem()[1]  # the last wrapped first
            unpatch(stream, "write", wrapper, had, previous)


def unpatch(obj: Any, attr: str, wrapper: Any, had: bool, previous: Any) -> None:
    """Put back what the instance had, if our wrapper is still on top; never disturb someone else's."""
    try:
        if vars(obj).get(attr) is not wrapper:
            return  # wrapped again on top of ours: ours stays in that chain, inert once uninstalled
        if had:
            setattr(obj, attr, previous)
        else:
            delattr(obj, attr)
    except Exception:
        pass
