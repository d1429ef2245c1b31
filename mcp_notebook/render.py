"""Bounded, guarded rendering of arbitrary Python values.

User objects run their own code in ``__repr__`` (and ``__len__``): it can raise, hang, recurse,
or return megabytes. Everything here is bounded in output size and, for code we do not know,
in time: such calls run on a short-lived daemon thread and are abandoned after a timeout.
"""

from __future__ import annotations

import reprlib
from typing import Any

from .guard import call_guarded
from .redact import mask_secrets

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
