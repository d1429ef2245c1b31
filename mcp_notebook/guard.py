"""The user-code guard: a call into user code on a short-lived daemon thread, abandoned after a
timeout (RenderTimeout); a call still stuck poisons only its own key (the object, the resource
function and its arguments) until it returns, and at most MAX_STUCK are stuck at once."""

from __future__ import annotations

import contextlib
import contextvars
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
MAX_STUCK = 64  # distinct calls allowed to be stuck at once (each keeps a thread)
_lock = threading.Lock()
# Calls still running after their timeout, by key: (the object, so its id cannot be reused meanwhile;
# how many reads were refused). A key is removed by its thread when the call finally returns.
_stuck: dict[Any, list[Any]] = {}
_stuck_anonymous = 0


class RenderTimeout(TimeoutError):
    """User code did not return in time."""


def _key_of(key: Any) -> Any:
    """A hashable stand-in for ``key`` that runs no user code (no ``__hash__``/``__eq__``)."""
    if type(key) is tuple:
        return tuple(_key_of(k) for k in key)
    if type(key) in (str, int):
        return key
    return ("id", id(key))


_context = threading.local()


@contextlib.contextmanager
def guarding(key: Any) -> Iterator[None]:
    """Within this block, guarded calls made without a key of their own use ``key`` (the hub sets
    the URI being read, so a provider that passes no key is still poisoned only per resource)."""
    previous = getattr(_context, "key", None)
    _context.key = key
    try:
        yield
    finally:
        _context.key = previous


def stuck_count() -> int:
    """Calls into user code that timed out and have not returned yet."""
    with _lock:
        return len(_stuck) + _stuck_anonymous


def call_guarded(fn: Callable[[], T], timeout: float, key: Any = None) -> T:
    """Run ``fn`` on a daemon thread; raise RenderTimeout if it does not finish in time.

    A call that never returns keeps its thread (threads cannot be killed). ``key`` names what the
    call renders (the object whose ``__repr__`` runs, a resource function and its arguments): while
    a call for a key is stuck, further calls for the same key are refused at once, so a hanging
    object poisons only itself, and it recovers when its call returns. Other keys keep working;
    only when ``MAX_STUCK`` distinct calls are stuck at once are new calls refused.
    """
    global _stuck_anonymous
    if key is None:
        key = getattr(_context, "key", None)
    k = None if key is None else _key_of(key)
    with _lock:
        if k is not None and k in _stuck:
            entry = _stuck[k]
            entry[1] += 1
            raise RenderTimeout(
                f"an earlier rendering of this {entry[2]} is still running (stuck in user code); "
                "it is refused until that call returns"
            )
        if len(_stuck) + _stuck_anonymous >= MAX_STUCK:
            raise RenderTimeout(f"{MAX_STUCK} renderings of different objects are stuck in user code")
    box: dict[str, Any] = {}
    done = threading.Event()
    state = {"stuck": False}

    def run() -> None:
        global _stuck_anonymous
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc
        finally:
            with _lock:
                done.set()
                if state["stuck"]:
                    if k is None:
                        _stuck_anonymous -= 1
                    else:
                        _stuck.pop(k, None)

    context = contextvars.copy_context()  # the caller's context (the reply's budget scale) goes along
    threading.Thread(target=context.run, args=(run,), name="mcp-notebook-render", daemon=True).start()
    if not done.wait(timeout):
        with _lock:
            if not done.is_set():
                state["stuck"] = True
                if k is None:
                    _stuck_anonymous += 1
                else:
                    _stuck[k] = [key, 0, _what(key)]
        if state["stuck"]:
            raise RenderTimeout(f"user code did not return within {timeout:g}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _what(key: Any) -> str:
    if type(key) is tuple and key:
        key = key[0]
    if isinstance(key, types.FunctionType):
        return f"function {key.__qualname__}"
    return f"{type(key).__qualname__} object"
