"""The cell capture's ``write`` on sys.stdout/stderr: put on once, kept between cells (issue #48).

The capture used to wrap both streams at every pre_run_cell and unwrap them at every post_run_cell.
Now ours stays: where nothing else wraps per cell (IPython 8) the next cell finds it on top and does
nothing; IPython 9 sets its own per-cell tee on the instance before pre_run_cell and puts back what
it found after post_run_cell, so ours goes on the tee each cell and comes off with it, never taken
off by us. A stream that stops being sys.stdout/stderr is let go after the outermost cell; all of
them at uninstall. Ours records only while a cell runs (the capture's ``current``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


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
