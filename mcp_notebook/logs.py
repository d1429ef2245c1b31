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

LOGGER = "mcp_notebook"
THREAD_PREFIX = "mcp-notebook"
MAX_BYTES = 1_000_000
BACKUPS = 1

log = logging.getLogger(LOGGER)
log.addHandler(logging.NullHandler())  # no handler at all would mean Python's last resort: sys.stderr


_MAIN = threading.main_thread().ident  # never one of the hub's threads


def on_hub_thread() -> bool:
    """Whether the caller runs on one of the hub's threads (server loop, request pool, guarded calls)."""
    if threading.get_ident() == _MAIN:  # the kernel's own thread: one call, not three (every write)
        return False
    return threading.current_thread().name.startswith(THREAD_PREFIX)


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
        self._outstream: tuple[Any, Any, Any] | None = None
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
        if cls is None or isinstance(cls.__dict__.get("write"), _HubThreadWrite):
            return
        guard = _HubThreadWrite(cls.__dict__["write"])
        cls.write = guard
        self._outstream = (cls, guard.original, guard)

    def uninstall(self) -> None:
        from .guard import stuck_count

        # A __repr__ still stuck on a hub thread may print when it finally returns: while one is
        # stuck, the guard stays (it hands every other thread the real write, so it is inert).
        if self._outstream is not None and stuck_count() == 0:
            cls, original, ours = self._outstream
            if cls.__dict__.get("write") is ours:
                cls.write = original
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


class _HubThreadWrite:
    """``OutStream.write`` as a data descriptor: text written on a hub thread goes to our log.

    IPython 9 and our own cell capture set ``stream.write`` on the instance per cell; a data
    descriptor on the class still wins over the instance's ``__dict__``, so the setter stores their
    function there and the getter wraps whatever is current. Other threads are not affected.
    """

    def __init__(self, original: Any):
        self.original = original

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self.original
        if get_ident() == _MAIN or not on_hub_thread():  # looked up on the thread that will call it
            return obj.__dict__.get("write") or self.original.__get__(obj, cls)
        return _divert

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__["write"] = value

    def __delete__(self, obj: Any) -> None:
        if obj.__dict__.pop("write", None) is None:
            raise AttributeError("write")


def _divert(string: Any) -> Any:
    log.info("output of user code on %s: %.500r", threading.current_thread().name, string)
    return len(string) if isinstance(string, str) else None


def loop_exception_handler(loop: Any, context: dict[str, Any]) -> None:
    """asyncio exception handler for the server loop: into our log, never onto stderr."""
    exc = context.get("exception")
    message = context.get("message") or "unhandled error in the server loop"
    log.error("%s", message, exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None)
