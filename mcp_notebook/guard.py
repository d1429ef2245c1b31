"""The user-code guard, and the bounded rendering of any value made through it.

A call into user code runs on a short-lived daemon thread, abandoned after a timeout
(RenderTimeout); a call still stuck poisons only its own key (the object, the resource function
and its arguments) until it returns, and at most MAX_STUCK are stuck at once.

User objects run their own code in ``__repr__`` (and ``__len__``): it can raise, hang, recurse,
or return megabytes. Every rendering here (repr, str, type names, cheap shapes, a function's
signature) is bounded in output size and, for code we do not know, in time.
"""

from __future__ import annotations

import contextlib
import contextvars
import reprlib
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .redact import mask_secrets

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


# -- bounded rendering ---------------------------------------------------------------------
_DOC_MARGIN = 512  # characters of a docstring masked past its cut, so a secret at the cut is masked whole

# Types whose repr is our own C code: fast, bounded by our limits, no user code.
SAFE_SCALARS = (type(None), bool, int, float, complex, str, bytes, bytearray)


def safe_str(exc: BaseException, timeout: float, limit: int = 1000) -> str:
    """str() of an exception user code raised: guarded (its __str__ is user code too), bounded, masked."""
    try:
        text = call_guarded(lambda: str(exc)[: limit + 512], timeout, key=exc)
    except Exception:
        return "<the exception's message could not be rendered>"
    return mask_secrets(text)[:limit]


class _BoundedRepr(reprlib.Repr):
    def __init__(self, max_chars: int):
        super().__init__()
        self.maxlevel = 4
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = 50
        self.maxdict = 50
        self.maxstring = max_chars
        self.maxlong = 400
        self.maxother = max_chars

    def repr_instance(self, obj: Any, level: int) -> str:
        text = repr(obj)
        return text if len(text) <= self.maxother else text[: self.maxother] + "…"


def bounded_repr(value: Any, max_chars: int, timeout: float) -> tuple[str, bool]:
    """repr() of ``value`` cut to ``max_chars``; returns (text, truncated)."""
    if type(value) in SAFE_SCALARS and not isinstance(value, (str, bytes, bytearray)):
        text = repr(value)
    elif isinstance(value, str) and type(value) is str:
        text = repr(value[: max_chars + 1])
    else:
        text = call_guarded(lambda: _BoundedRepr(max_chars).repr(value), timeout, key=value)
    if len(text) > max_chars:
        return text[:max_chars], True
    return text, False


def type_name(value: Any) -> str:
    """Qualified type name: ``pandas.core.frame.DataFrame`` becomes ``pandas.DataFrame``."""
    cls = type(value)
    module = cls.__module__ or ""
    if module == "builtins":
        return cls.__qualname__
    return f"{module.split('.')[0]}.{cls.__qualname__}"


def callable_info(value: Any, timeout: float) -> dict[str, Any]:
    """A function's signature and docstring (masked, the docstring cut at 2000 characters), guarded."""
    import inspect

    def info() -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:  # defaults may hold credentials: masked here, before any cut
            out["signature"] = mask_secrets(str(inspect.signature(value)))
        except (TypeError, ValueError):
            pass
        doc = inspect.getdoc(value)
        if doc:
            out["doc"] = mask_secrets(doc[: 2000 + _DOC_MARGIN])[:2000]
        return out

    try:
        return call_guarded(info, timeout, key=value)
    except Exception:
        return {}


_SIZED_BUILTINS = frozenset({list, tuple, dict, set, frozenset, str, bytes, bytearray})
_ARRAY_LIBS = frozenset({"numpy", "pandas", "polars", "pyarrow", "torch", "xarray", "jax", "scipy"})


def cheap_shape(value: Any) -> tuple | int | None:
    """len() of builtin containers or .shape of known array types; never runs user code."""
    cls = type(value)
    if cls in _SIZED_BUILTINS:
        return len(value)
    if cls.__module__.partition(".")[0] in _ARRAY_LIBS:
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple):
            return shape
    return None
