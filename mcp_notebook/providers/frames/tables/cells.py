"""Table cells as bounded JSON values, example values and the row samples digests hash.

Cells become JSON-able Python values through :class:`CellRenderer`: bounded in size, with user
``__repr__`` failures turned into text instead of errors.
"""

from __future__ import annotations

import contextlib
import json
import math
import reprlib
import sys
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any
from uuid import UUID

from ....redact import mask_secrets

SAMPLE_ROWS = 10_000  # rows hashed by digest(): head, tail and an even stride between
SAMPLE_VALUES = 5  # example values per column in a schema
MAX_CATEGORIES = 50  # categories listed per categorical column
_CONTAINER_ITEMS = 20
_CONTAINER_DEPTH = 3
_CONTAINERS = (list, tuple, dict, set, frozenset)
_MASK_MARGIN = 512  # characters past a cut that are masked with it (a token straddling the cut is whole)


class _CellRepr(reprlib.Repr):
    def __init__(self, cap: int):
        super().__init__()
        self.maxlevel = _CONTAINER_DEPTH
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = _CONTAINER_ITEMS
        self.maxdict = _CONTAINER_ITEMS
        self.maxstring = self.maxother = cap
        self.maxlong = 100

    def repr_instance(self, obj: Any, level: int) -> str:
        text = repr(obj)
        return text if len(text) <= self.maxother else text[: self.maxother] + "…"


class CellRenderer:
    """Turns one cell value into None/bool/int/float/str/list/dict, cut to ``cap`` characters."""

    def __init__(self, cap: int):
        self.cap = cap
        self.cut = 0  # values that were shortened
        self._repr = _CellRepr(cap)

    def value(self, v: Any) -> Any:
        if type(v) in _CONTAINERS or _is_ndarray(v):
            nested = self._nested(v, 0)
            text = json.dumps(nested, ensure_ascii=False)
            return nested if len(text) <= self.cap else self._text(text)
        return self._leaf(v)

    def _text(self, s: str) -> str:
        # Mask credentials before cutting, so a token at the cut cannot leak its first characters.
        if len(s) > self.cap:
            self.cut += 1
            return mask_secrets(s[: self.cap + _MASK_MARGIN])[: max(1, self.cap - 1)] + "…"
        return mask_secrets(s)

    def _leaf(self, v: Any) -> Any:
        if v is None:
            return None
        cls = type(v)
        if cls is str:
            return self._text(v)
        if cls is bool or cls is int:
            return v
        if cls is float:
            return v if math.isfinite(v) else (None if v != v else str(v))
        module = cls.__module__ or ""
        if module.startswith("numpy"):
            if cls.__name__ in ("datetime64", "timedelta64"):
                text = str(v)
                return None if text == "NaT" else text
            item = getattr(v, "item", None)
            if item is not None:
                try:
                    return self._leaf(item())
                except Exception:
                    pass
        elif module.startswith("pandas"):
            name = cls.__name__
            if name in ("NAType", "NaTType"):
                return None
            if name == "Timestamp":
                return v.isoformat()
            if name in ("Timedelta", "Period", "Interval"):
                return str(v)
        if isinstance(v, (datetime, date, time)):
            return v.isoformat()
        if isinstance(v, (timedelta, Decimal, UUID, Fraction)):
            return self._text(str(v))
        if isinstance(v, (bytes, bytearray, memoryview)):
            head = bytes(v[: self.cap])
            text = repr(head) + ("…" if len(v) > self.cap else "")
            return self._text(text)
        if isinstance(v, bool):
            return bool(v)
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return self._leaf(float(v))
        if isinstance(v, str):
            return self._text(str(v))
        try:
            text = self._repr.repr(v)
        except Exception as exc:  # the object's __repr__ is broken: say so, do not fail the page
            text = f"<{cls.__qualname__} object; repr failed: {type(exc).__name__}>"
        return self._text(text)

    def _nested(self, v: Any, depth: int) -> Any:
        if depth >= _CONTAINER_DEPTH:
            return self._leaf(v) if type(v) not in _CONTAINERS and not _is_ndarray(v) else "…"
        if type(v) is dict:
            out: dict[str, Any] = {}
            for i, (k, item) in enumerate(v.items()):
                if i >= _CONTAINER_ITEMS:
                    out["…"] = f"{len(v) - i} more"
                    self.cut += 1
                    break
                key = k if type(k) is str else str(self._leaf(k))
                out[key[: self.cap]] = self._nested(item, depth + 1)
            return out
        if type(v) in _CONTAINERS or _is_ndarray(v):
            items = v.flat if _is_ndarray(v) else v
            size = v.size if _is_ndarray(v) else len(v)
            seq = []
            for i, item in enumerate(items):
                if i >= _CONTAINER_ITEMS:
                    seq.append(f"… {size - i} more")
                    self.cut += 1
                    break
                seq.append(self._nested(item, depth + 1))
            return seq
        return self._leaf(v)


def _is_ndarray(v: Any) -> bool:
    return type(v).__name__ == "ndarray" and (type(v).__module__ or "").startswith("numpy")


def cell_text(p: Any) -> str:
    """A rendered cell as CSV/markdown text: null is empty, containers are JSON."""
    if p is None:
        return ""
    if type(p) is str:
        return p
    if type(p) is float:
        return repr(p)
    if type(p) in (bool, int):
        return str(p)
    return json.dumps(p, ensure_ascii=False)


def examples(values: Iterable[Any], cap: int = 80, count: int = SAMPLE_VALUES) -> list[Any]:
    """Up to ``count`` distinct rendered non-null values."""
    cells = CellRenderer(cap)
    out: list[Any] = []
    seen: set[str] = set()
    for v in values:
        p = cells.value(v)
        if p is None:
            continue
        key = json.dumps(p, ensure_ascii=False)
        if key not in seen:
            seen.add(key)
            out.append(p)
            if len(out) >= count:
                break
    return out


def quiet() -> contextlib.AbstractContextManager[Any]:
    """Silence numpy floating-point warnings (inf - inf in a mean): from a server thread they
    would be printed into the output of whichever cell ran last. numpy's errstate is per thread."""
    np = sys.modules.get("numpy")
    return np.errstate(all="ignore") if np is not None else contextlib.nullcontext()


def sample_positions(n: int, k: int = SAMPLE_ROWS) -> list[int]:
    """Row positions to hash: all of them for small n, else head, tail and an even stride."""
    if n <= k:
        return list(range(n))
    edge = k // 5
    step = max(1, (n - 2 * edge) // (k - 2 * edge))
    return sorted({*range(edge), *range(edge, n - edge, step), *range(n - edge, n)})


def label_of(col: Any) -> str:
    """Column name as text; MultiIndex column tuples are joined with '|'."""
    if isinstance(col, tuple):
        return "|".join(str(c) for c in col)
    return str(col)
