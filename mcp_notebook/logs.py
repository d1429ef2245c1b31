"""Where the hub's own messages go: a bounded rotating file beside the runtime file, never the
kernel's stdout/stderr (in a kernel those are the user's cell output, and ``nb://cells``).

Five leaks are closed here: the ``mcp_notebook.*`` loggers get their own handler and do not
propagate (Python's last-resort handler would print to ``sys.stderr``); the server loop gets an
exception handler that logs there; asyncio log records and ``warnings`` raised on the hub's own
threads (names starting with ``mcp-notebook``) are diverted into the same file; and text that user
code run by the hub (a ``__repr__``, a resource function) prints on those threads goes there too,
instead of into whichever cell ran last (ipykernel's ``OutStream.write``, wrapped while a hub runs);
and an exception escaping a hub thread (``threading.excepthook`` would print it).
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
import warnings
from pathlib import Path
from threading import get_ident
from typing import Any

from .cell_streams import MAIN, NEW_STREAM, THREAD_PREFIX, divert, guard_write, is_guard, on_hub_thread

LOGGER = "mcp_notebook"
MAX_BYTES = 1_000_000
BACKUPS = 1
__all__ = ["THREAD_PREFIX", "HubLog", "log", "loop_exception_handler", "on_hub_thread"]

log = logging.getLogger(LOGGER)
log.addHandler(logging.NullHandler())  # no handler at all would mean Python's last resort: sys.stderr


class _HubThreadsOnly(logging.Filter):
    """On the asyncio logger: records from the hub's threads go to our file and stop there."""

    def __init__(self, handler: logging.Handler):
        super().__init__()
        self.handler = handler

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.threadName or not record.threadName.startswith(THREAD_PREFIX):
            return True
        try:
            if record.levelno >= self.handler.level:
                self.handler.handle(record)
        except Exception:
            pass
        return False


class HubLog:
    """Installs (and removes) the destinations above for one running hub."""

    def __init__(self, path: Path | None):
        self.path = path
        self.handler: logging.Handler = logging.NullHandler()
        self._filter: _HubThreadsOnly | None = None
        self._showwarning: Any = None
        self._ours: Any = None
        self._previous_propagate = True
        self._outstream: _StreamGuards | None = None
        self._excepthook: Any = None
        self._previous_excepthook: Any = None

    def install(self) -> None:
        if self.path is not None:
            try:
                handler = logging.handlers.RotatingFileHandler(
                    self.path, maxBytes=MAX_BYTES, backupCount=BACKUPS, delay=True, encoding="utf-8"
                )
                handler.setFormatter(
                    logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s")
                )
                self.handler = handler
            except OSError:
                self.path = None
        self.handler.setLevel(logging.INFO)
        self._previous_propagate = log.propagate
        log.propagate = False
        if log.level == logging.NOTSET:
            log.setLevel(logging.INFO)
        log.addHandler(self.handler)
        self._filter = _HubThreadsOnly(self.handler)
        logging.getLogger("asyncio").addFilter(self._filter)
        self._showwarning = warnings.showwarning
        previous = self._showwarning

        def showwarning(
            message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
        ) -> None:
            if on_hub_thread():
                log.warning("%s: %s (%s:%s)", getattr(category, "__name__", category), message, filename, lineno)
                return
            previous(message, category, filename, lineno, file, line)

        self._ours = showwarning
        warnings.showwarning = showwarning
        self._previous_excepthook = threading.excepthook
        previous_hook = self._previous_excepthook

        def excepthook(args: Any) -> None:
            thread = args.thread
            if thread is not None and thread.name.startswith(THREAD_PREFIX):
                exc = (args.exc_type, args.exc_value, args.exc_traceback)
                log.error("uncaught exception in %s", thread.name, exc_info=exc)
                return
            previous_hook(args)

        self._excepthook = excepthook
        threading.excepthook = excepthook
        self._wrap_outstream()

    def _wrap_outstream(self) -> None:
        iostream = sys.modules.get("ipykernel.iostream")
        cls = getattr(iostream, "OutStream", None)
        if cls is not None:
            self._outstream = _StreamGuards(cls)
            self._outstream.install()

    def uninstall(self) -> None:
        from .guard import stuck_count

        # A __repr__ still stuck on a hub thread may print when it finally returns: while one is
        # stuck, the guards stay (they hand every other thread the real write, so they are inert).
        if self._outstream is not None:
            self._outstream.uninstall(keep=stuck_count() > 0)
            self._outstream = None
        if self._filter is not None:
            logging.getLogger("asyncio").removeFilter(self._filter)
            self._filter = None
        if self._excepthook is not None and threading.excepthook is self._excepthook:
            threading.excepthook = self._previous_excepthook
        self._excepthook = None
        if self._ours is not None and warnings.showwarning is self._ours:
            warnings.showwarning = self._showwarning
        self._ours = None
        log.removeHandler(self.handler)
        log.propagate = self._previous_propagate
        self.handler.close()
        if self.path is not None:  # an empty log is noise in the runtime dir
            try:
                if self.path.stat().st_size == 0:
                    self.path.unlink()
            except OSError:
                pass


class _StreamGuards:
    """The hub-thread guard on ipykernel's streams (``sys.stdout``/``stderr``, instances of ``OutStream``).

    What a stream's instance holds as ``write`` between cells is made a guard (cell_streams.guard_write),
    and the capture's own write diverts too while a cell runs, so neither the user's cell nor IPython 9's
    per-cell tee ever sees a hub thread's text. Where nothing is on the instance (IPython 8, or a load
    outside a cell) the guard is put there at once. Where something is (IPython 9: its tee, set on the
    instance for the cell that loads us and put back after it), a data descriptor on the class
    (``_HubThreadWrite``) guards every lookup until that cell's end, and turns the plain write the tee
    puts back into a guard; then it takes itself off, so a cell's tee sets and reads a plain instance
    attribute (issue #48: the descriptor cost six Python calls a cell). A stream the capture meets for
    the first time (sys.stdout replaced) brings the descriptor back until it is guarded too.
    """

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.original = cls.__dict__["write"]
        self.descriptor: _HubThreadWrite | None = None
        self.guarded: dict[int, Any] = {}  # id: stream, whose write between cells is a guard (held: ids stay)
        self.placed: list[tuple[Any, Any]] = []  # (stream, guard) put on an empty instance here

    def install(self) -> None:
        NEW_STREAM.append(self.new_stream)
        for stream in (sys.stdout, sys.stderr):
            self.new_stream(stream)

    def new_stream(self, stream: Any) -> None:
        """Guard ``stream`` between cells: at once if its instance holds no write, else through the class."""
        if not isinstance(stream, self.cls) or id(stream) in self.guarded:
            return
        try:
            own = vars(stream).get("write")
            if own is None:
                guard = guard_write(self.original.__get__(stream, self.cls))
                vars(stream)["write"] = guard
                self.placed.append((stream, guard))
                self.guarded[id(stream)] = stream
                return
            if is_guard(own, between_cells=True):  # left by an earlier load (kept while a call was stuck)
                self.guarded[id(stream)] = stream
                return
        except Exception:
            pass
        if self.descriptor is None and not isinstance(self.cls.__dict__.get("write"), _HubThreadWrite):
            self.descriptor = _HubThreadWrite(self.original, self)
            self.cls.write = self.descriptor  # type: ignore[attr-defined]

    def stored(self, obj: Any, value: Any) -> Any:
        """What the descriptor stores on ``obj`` for ``value`` (any thread): the plain write made a guard."""
        if getattr(value, "__self__", None) is obj and getattr(value, "__func__", None) is self.original:
            value = guard_write(value)
        if is_guard(value, between_cells=True):
            self.guarded[id(obj)] = obj
        return value

    def settled(self) -> None:
        """After a store: the descriptor goes once the current streams are guarded between cells."""
        current = [s for s in (sys.stdout, sys.stderr) if isinstance(s, self.cls)]
        if self.descriptor is not None and all(id(s) in self.guarded for s in current):
            if self.cls.__dict__.get("write") is self.descriptor:
                self.cls.write = self.original  # type: ignore[attr-defined]
            self.descriptor = None

    def uninstall(self, keep: bool) -> None:
        """Take the guards off where they are on top; ``keep``: a hub thread is stuck in user code."""
        if self.new_stream in NEW_STREAM:
            NEW_STREAM.remove(self.new_stream)
        if keep:
            return
        if self.descriptor is not None and self.cls.__dict__.get("write") is self.descriptor:
            self.cls.write = self.original  # type: ignore[attr-defined]
        self.descriptor = None
        for stream, guard in self.placed:
            try:
                if vars(stream).get("write") is guard:
                    del vars(stream)["write"]
            except Exception:
                pass
        # A guard the tee keeps putting back (IPython 9) stays: it passes every write through once no
        # hub thread runs, and a later load finds it guarded already.
        self.placed.clear()
        self.guarded.clear()


class _HubThreadWrite:
    """``OutStream.write`` as a data descriptor, while a stream is not yet guarded between cells: a
    hub thread's lookup gets the diverting write; a set stores on the instance (the plain write as a
    guard). It wins over the instance's ``__dict__``, so it guards whatever is set there meanwhile."""

    def __init__(self, original: Any, guards: _StreamGuards):
        self.original = original
        self.guards = guards

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self.original
        if get_ident() == MAIN or not on_hub_thread():  # looked up on the thread that will call it
            return obj.__dict__.get("write") or self.original.__get__(obj, cls)
        return divert

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__["write"] = self.guards.stored(obj, value)
        self.guards.settled()

    def __delete__(self, obj: Any) -> None:
        if obj.__dict__.pop("write", None) is None:
            raise AttributeError("write")


def loop_exception_handler(loop: Any, context: dict[str, Any]) -> None:
    """asyncio exception handler for the server loop: into our log, never onto stderr."""
    exc = context.get("exception")
    message = context.get("message") or "unhandled error in the server loop"
    log.error("%s", message, exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None)
