"""Adapters that give pandas, polars, pyarrow and numpy values one small tabular interface.

Every operation slices first and converts only the slice: a page of a 10-million-row frame costs
what a page of a small one does. Libraries are imported only when a value of theirs exists (the
adapter is picked from the value's type names, without importing anything).

Cells become JSON-able Python values through :class:`CellRenderer`: bounded in size, with user
``__repr__`` failures turned into text instead of errors.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import reprlib
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any
from uuid import UUID

from ..redact import mask_secrets

SAMPLE_ROWS = 10_000  # rows hashed by digest(): head, tail and an even stride between
SAMPLE_VALUES = 5  # example values per column in a schema
MAX_CATEGORIES = 50  # categories listed per categorical column
_CONTAINER_ITEMS = 20
_CONTAINER_DEPTH = 3
_CONTAINERS = (list, tuple, dict, set, frozenset)
_MASK_MARGIN = 512  # characters past a cut that are masked with it (a token straddling the cut is whole)


# -- cells ------------------------------------------------------------------------------------
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


# -- adapters -------------------------------------------------------------------------------
class Table:
    """One tabular value. Subclasses adapt one library's type."""

    kind = "table"
    mutable = True  # may change in place (else only rebinding changes it)
    lazy = False  # a lazy engine frame (providers/engines.py): rows and counts cost engine work

    def __init__(self, value: Any):
        self.value = value

    @property
    def nrows(self) -> int | None:
        raise NotImplementedError

    def labels(self) -> list[str]:
        """Data column labels (may repeat)."""
        raise NotImplementedError

    def index_labels(self) -> list[str]:
        """Labels of index columns shown before the data columns on every page."""
        return []

    def page(self, start: int, stop: int, positions: Sequence[int]) -> list[list[Any]]:
        """Index columns then the data columns at ``positions``, rows start..stop, as Python lists."""
        raise NotImplementedError

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        """Schema facts: ``columns`` (one dict per position) plus adapter extras."""
        raise NotImplementedError

    def fingerprint(self) -> tuple:
        """Cheap identity of the current state (main thread, no data scan)."""
        return (id(self.value), type(self.value), self.nrows, len(self.labels()))

    def digest(self) -> bytes:
        """A hash of a bounded sample of the data (worker thread)."""
        return repr(self.fingerprint()).encode()

    @property
    def shape(self) -> list[int | None]:
        return [self.nrows, len(self.labels())]


def _hash_text(h: Any, values: Iterable[Any]) -> None:
    cells = CellRenderer(200)
    for v in values:
        h.update(cell_text(cells.value(v)).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")


def _num(v: Any) -> Any:
    """A stat as JSON: numpy/pandas scalars become Python values, NaN becomes null."""
    return CellRenderer(80).value(v)


# pandas ---------------------------------------------------------------------------------------
class _PandasBase(Table):
    def _index_lists(self, index: Any) -> list[list[Any]]:
        if not self.index_labels():
            return []
        if index.nlevels > 1:
            return [index.get_level_values(i).tolist() for i in range(index.nlevels)]
        return [index.tolist()]

    def index_labels(self) -> list[str]:
        index = self.value.index
        if type(index).__name__ == "RangeIndex" and index.name is None:
            return []
        if index.nlevels > 1:
            return [str(n) if n is not None else f"level_{i}" for i, n in enumerate(index.names)]
        return [str(index.name) if index.name is not None else "index"]

    def _index_info(self, stats_rows: int) -> dict[str, Any]:
        index = self.value.index
        info: dict[str, Any] = {"type": type(index).__name__}
        if index.nlevels > 1:
            info["names"] = [None if n is None else str(n) for n in index.names]
            info["levels"] = [
                {
                    "name": None if level.name is None else str(level.name),
                    "dtype": str(level.dtype),
                    "size": len(level),
                    "values": examples(level[:MAX_CATEGORIES], count=10),
                }
                for level in index.levels
            ]
            return info
        info["name"] = None if index.name is None else str(index.name)
        info["dtype"] = str(index.dtype)
        if type(index).__name__ == "RangeIndex":
            info.update(start=index.start, stop=index.stop, step=index.step)
            return info
        head = index[:stats_rows]
        if index.dtype.kind in "mMiuf" and len(head):
            info["min"], info["max"] = _num(head.min()), _num(head.max())
        freq = getattr(index, "freqstr", None)
        if freq:
            info["freq"] = freq
        info["examples"] = examples(index[:1000])
        return info

    def _hash_series(self, h: Any, s: Any) -> None:
        import pandas as pd

        try:
            h.update(pd.util.hash_pandas_object(s, index=False).to_numpy().tobytes())
        except Exception:  # unhashable cells (lists, dicts): hash their bounded text
            _hash_text(h, s.tolist())


def _describe_pandas(label: str, s: Any) -> dict[str, Any]:
    import pandas as pd

    d: dict[str, Any] = {"name": label, "dtype": str(s.dtype), "nulls": int(s.isna().sum())}
    dtype = s.dtype
    kind = getattr(dtype, "kind", "O")
    if isinstance(dtype, pd.CategoricalDtype):
        cats = dtype.categories
        d["categories"] = examples(cats[:MAX_CATEGORIES], count=MAX_CATEGORIES)
        d["n_categories"] = len(cats)
        d["ordered"] = bool(dtype.ordered)
    elif kind in "iuf" and len(s) > d["nulls"]:
        d.update(min=_num(s.min()), max=_num(s.max()), mean=_num(s.mean()))
    elif kind == "b":
        d["true"] = int(s.sum())
    elif kind in "mM" and len(s) > d["nulls"]:
        d.update(min=_num(s.min()), max=_num(s.max()))
    d["examples"] = examples(s.iloc[:1000].tolist())
    return d


class PandasFrame(_PandasBase):
    kind = "pandas.DataFrame"

    @property
    def nrows(self) -> int:
        return len(self.value.index)

    def labels(self) -> list[str]:
        return [label_of(c) for c in self.value.columns]

    def page(self, start: int, stop: int, positions: Sequence[int]) -> list[list[Any]]:
        part = self.value.iloc[start:stop]
        return self._index_lists(part.index) + [part.iloc[:, p].tolist() for p in positions]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        head = self.value.iloc[:stats_rows]
        labels = self.labels()
        cols = [_guard_column(labels[p], lambda p=p: _describe_pandas(labels[p], head.iloc[:, p])) for p in positions]
        return {"columns": cols, "index": self._index_info(stats_rows)}

    def fingerprint(self) -> tuple:
        # The columns Index by identity (kept alive, so its id is not reused): comparing labels would run
        # their __eq__, and a NaN label is unequal to itself, so the frame would look changed after every cell.
        df = self.value
        return (id(df), df.shape, id(getattr(df, "_mgr", None)), _Same(df.columns))

    def digest(self) -> bytes:
        df = self.value
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((df.shape, self.labels(), [str(t) for t in df.dtypes])).encode())
        part = df.iloc[sample_positions(len(df.index))]
        for p in range(part.shape[1]):
            self._hash_series(h, part.iloc[:, p])
        self._hash_series(h, part.index.to_series())
        return h.digest()


class PandasSeries(_PandasBase):
    kind = "pandas.Series"

    @property
    def nrows(self) -> int:
        return len(self.value)

    def labels(self) -> list[str]:
        name = self.value.name
        return [label_of(name) if name is not None else "value"]

    def page(self, start: int, stop: int, positions: Sequence[int]) -> list[list[Any]]:
        part = self.value.iloc[start:stop]
        return self._index_lists(part.index) + [part.tolist() for _ in positions]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        label = self.labels()[0]
        head = self.value.iloc[:stats_rows]
        cols = [_guard_column(label, lambda: _describe_pandas(label, head)) for _ in positions]
        return {"columns": cols, "index": self._index_info(stats_rows)}

    def fingerprint(self) -> tuple:
        s = self.value
        return (id(s), len(s), id(getattr(s, "_mgr", None)), str(s.dtype), s.name if _simple(s.name) else id(s.name))

    def digest(self) -> bytes:
        s = self.value
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((len(s), str(s.dtype), label_of(s.name))).encode())
        part = s.iloc[sample_positions(len(s))]
        self._hash_series(h, part)
        self._hash_series(h, part.index.to_series())
        return h.digest()


class _Same:
    """Equal only to a wrapper of the very same object (no user __eq__ runs)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return type(other) is _Same and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"<same {id(self.obj):#x}>"


def _simple(v: Any) -> bool:
    return v is None or type(v) in (str, int, float, bool)


# narwhals: polars, pyarrow, modin, cuDF and every other eager frame narwhals supports -----------
def _nw() -> Any:
    import narwhals as nw

    return nw


def _native_dtype(series: Any) -> str:
    """The library's own dtype name (``Int64`` in polars, ``int64`` in pyarrow), as users know it."""
    native = series.to_native()
    dtype = getattr(native, "dtype", None)
    if dtype is None:
        dtype = getattr(native, "type", None)
    return str(dtype) if dtype is not None else str(series.dtype)


def _describe_nw(label: str, head: Any, full: Any) -> dict[str, Any]:
    """Facts of one narwhals Series: nulls over ``full``, statistics over ``head`` (the leading rows)."""
    nw = _nw()
    dtype = head.dtype
    d: dict[str, Any] = {"name": label, "dtype": _native_dtype(full), "nulls": int(full.null_count())}
    has_values = len(head) > head.null_count()
    if isinstance(dtype, nw.Enum):
        cats = list(dtype.categories)
        d["categories"] = examples(cats[:MAX_CATEGORIES], count=MAX_CATEGORIES)
        d["n_categories"] = len(cats)
    elif isinstance(dtype, nw.Categorical):
        cats = full.cat.get_categories()
        d["categories"] = examples(cats.head(MAX_CATEGORIES).to_list(), count=MAX_CATEGORIES)
        d["n_categories"] = len(cats)
    elif dtype.is_numeric() and has_values:
        d.update(min=_num(head.min()), max=_num(head.max()), mean=_num(head.mean()))
    elif dtype.is_temporal() and has_values and not isinstance(dtype, nw.Duration):
        d.update(min=_num(head.min()), max=_num(head.max()))
    elif isinstance(dtype, nw.Boolean):
        d["true"] = int(head.sum() or 0)
    d["examples"] = examples(head.head(1000).to_list())
    return d


class NarwhalsFrame(Table):
    """An eager DataFrame of any library narwhals supports (polars, pyarrow, modin, cuDF, ...)."""

    def __init__(self, value: Any):
        super().__init__(value)
        cls = type(value)
        self.kind = f"{(cls.__module__ or '').partition('.')[0]}.{cls.__qualname__}"
        self.mutable = self.kind != "pyarrow.Table" and self.kind != "pyarrow.RecordBatch"
        native = value
        if self.kind == "pyarrow.RecordBatch":  # narwhals takes tables; a one-batch table shares its buffers
            import pyarrow as pa

            native = pa.Table.from_batches([value])
        self.frame = _nw().from_native(native, eager_only=True)

    @property
    def nrows(self) -> int:
        return len(self.frame)

    def labels(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    def page(self, start: int, stop: int, positions: Sequence[int]) -> list[list[Any]]:
        part = self.frame[start : max(start, stop)]
        names = self.frame.columns
        return [part.get_column(names[p]).to_list() for p in positions]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        df = self.frame
        head = df.head(stats_rows)
        names, labels = df.columns, self.labels()
        cols = [
            _guard_column(
                labels[p], lambda p=p: _describe_nw(labels[p], head.get_column(names[p]), df.get_column(names[p]))
            )
            for p in positions
        ]
        return {"columns": cols, "nulls_over": "all rows"}

    def fingerprint(self) -> tuple:
        v = self.value
        shape = self.frame.shape
        cols = tuple(self.frame.columns) if shape[1] <= 1000 else shape[1]
        return (id(v), shape, cols)

    def digest(self) -> bytes:
        df = self.frame
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((df.shape, df.columns, [str(t) for t in df.schema.dtypes()])).encode())
        part = df[sample_positions(len(df))] if len(df) else df
        for name in part.columns:
            _hash_nw(h, part.get_column(name))
        return h.digest()


def _hash_nw(h: Any, s: Any) -> None:
    native = s.to_native()
    try:
        if type(native).__module__.startswith("polars") and type(native.dtype).__name__ != "Object":
            h.update(native.hash(seed=0).to_numpy().tobytes())
            return
    except Exception:
        pass
    _hash_text(h, s.to_list())


class NarwhalsSeries(Table):
    """An eager Series of any library narwhals supports (polars, pyarrow ChunkedArray, modin, ...)."""

    def __init__(self, value: Any):
        super().__init__(value)
        cls = type(value)
        self.kind = f"{(cls.__module__ or '').partition('.')[0]}.{cls.__qualname__}"
        self.mutable = not self.kind.startswith("pyarrow.")
        self.series = _nw().from_native(value, series_only=True)

    @property
    def nrows(self) -> int:
        return len(self.series)

    def labels(self) -> list[str]:
        return [str(self.series.name or "value")]

    def page(self, start: int, stop: int, positions: Sequence[int]) -> list[list[Any]]:
        part = self.series[start : max(start, stop)].to_list()
        return [part for _ in positions]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        s = self.series
        label = self.labels()[0]
        cols = [_guard_column(label, lambda: _describe_nw(label, s.head(stats_rows), s)) for _ in positions]
        return {"columns": cols, "nulls_over": "all rows"}

    def fingerprint(self) -> tuple:
        s = self.series
        return (id(self.value), len(s), s.name if _simple(s.name) else id(s.name), str(s.dtype))

    def digest(self) -> bytes:
        s = self.series
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((len(s), s.name, str(s.dtype))).encode())
        _hash_nw(h, s[sample_positions(len(s))] if len(s) else s)
        return h.digest()


# numpy ----------------------------------------------------------------------------------------
class NumpyArray(Table):
    """1-D arrays are one column ("value", or the fields of a structured array); 2-D arrays have
    columns "0".."n-1"; higher dimensions flatten the leading axes into rows, shown as index
    columns i0, i1, ... next to the last axis as columns."""

    kind = "numpy.ndarray"

    @property
    def nrows(self) -> int:
        shape = self.value.shape
        return math.prod(shape[:-1]) if len(shape) > 2 else shape[0]

    def _fields(self) -> tuple[str, ...] | None:
        a = self.value
        return a.dtype.names if a.ndim == 1 and a.dtype.names else None

    def labels(self) -> list[str]:
        a = self.value
        fields = self._fields()
        if fields:
            return list(fields)
        if a.ndim == 1:
            return ["value"]
        return [str(j) for j in range(a.shape[-1])]

    def index_labels(self) -> list[str]:
        nd = self.value.ndim
        return [f"i{k}" for k in range(nd - 1)] if nd > 2 else []

    def _rows(self, start: int, stop: int) -> tuple[Any, list[list[int]]]:
        import numpy as np

        a = self.value
        if a.ndim <= 2:
            return a[start:stop], []
        lead = np.unravel_index(np.arange(start, stop), a.shape[:-1])
        return a[lead], [ix.tolist() for ix in lead]

    def _column(self, rows: Any, p: int) -> Any:
        fields = self._fields()
        if fields:
            return rows[fields[p]]
        return rows if rows.ndim == 1 else rows[:, p]

    def page(self, start: int, stop: int, positions: Sequence[int]) -> list[list[Any]]:
        rows, index = self._rows(start, stop)
        out = list(index)
        for p in positions:
            out.append(_np_list(self._column(rows, p)))
        return out

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        a = self.value
        rows, _ = self._rows(0, min(self.nrows, stats_rows))
        labels = self.labels()
        cols = [
            _guard_column(labels[p], lambda p=p: _describe_numpy(labels[p], self._column(rows, p))) for p in positions
        ]
        extra: dict[str, Any] = {"columns": cols, "array_shape": list(a.shape), "dtype": str(a.dtype)}
        if a.ndim > 2:
            extra["note"] = "leading axes are flattened into rows; i0, i1, ... give each row's position"
        return extra

    def fingerprint(self) -> tuple:
        a = self.value
        return (id(a), a.shape, a.strides, a.dtype.str, a.__array_interface__["data"][0])

    def digest(self) -> bytes:
        import numpy as np

        a = self.value
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((a.shape, a.strides, a.dtype.str)).encode())
        if a.size:
            flat = np.asarray(sample_positions(a.size), dtype=np.int64)
            part = a[np.unravel_index(flat, a.shape)]
            if a.dtype.hasobject:
                _hash_text(h, part.tolist())
            else:
                h.update(np.ascontiguousarray(part).tobytes())
        return h.digest()


def _describe_numpy(label: str, col: Any) -> dict[str, Any]:
    import numpy as np

    d: dict[str, Any] = {"name": label, "dtype": str(col.dtype)}
    kind = col.dtype.kind
    if kind == "f":
        finite_mask = ~np.isnan(col)
        d["nulls"] = int(col.size - np.count_nonzero(finite_mask))
        values = col[finite_mask]
    elif kind in "mM":
        mask = ~np.isnat(col)
        d["nulls"] = int(col.size - np.count_nonzero(mask))
        values = col[mask]
    elif kind == "O":
        d["nulls"] = sum(1 for v in col.tolist() if v is None)
        values = None
    else:
        d["nulls"] = 0
        values = col
    if values is not None and values.size:
        if kind in "iuf":
            d.update(min=_num(values.min()), max=_num(values.max()), mean=_num(values.mean()))
        elif kind in "mM":
            d.update(min=_num(values.min()), max=_num(values.max()))
        elif kind == "b":
            d["true"] = int(np.count_nonzero(values))
    d["examples"] = examples(_np_list(col[:1000]))
    return d


def _np_list(col: Any) -> list[Any]:
    """Python values of a 1-D array; datetimes as ISO text (``tolist`` would give ints for ns)."""
    if col.dtype.kind in "mM":
        return [None if text == "NaT" else text for text in col.astype(str).tolist()]
    return col.tolist()


def _guard_column(label: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except Exception as exc:  # one odd column must not sink the whole schema
        return {"name": label, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}


# -- dispatch -----------------------------------------------------------------------------------
_ADAPTERS: dict[tuple[str, str], type[Table]] = {
    ("pandas", "DataFrame"): PandasFrame,
    ("pandas", "Series"): PandasSeries,
    ("polars", "DataFrame"): NarwhalsFrame,
    ("polars", "Series"): NarwhalsSeries,
    ("pyarrow", "Table"): NarwhalsFrame,
    ("pyarrow", "RecordBatch"): NarwhalsFrame,
    ("pyarrow", "ChunkedArray"): NarwhalsSeries,
    ("modin", "DataFrame"): NarwhalsFrame,
    ("modin", "Series"): NarwhalsSeries,
    ("cudf", "DataFrame"): NarwhalsFrame,
    ("cudf", "Series"): NarwhalsSeries,
    ("numpy", "ndarray"): NumpyArray,
}
_LIBS = frozenset(lib for lib, _ in _ADAPTERS)
_by_type: dict[type, type[Table] | None] = {}


def adapter_for_type(cls: type) -> type[Table] | None:
    """The adapter for values of ``cls`` (subclasses included), from type names alone."""
    try:
        return _by_type[cls]
    except (KeyError, TypeError):
        pass
    found = None
    for base in getattr(cls, "__mro__", ()):
        lib = (getattr(base, "__module__", None) or "").partition(".")[0]
        if lib in _LIBS:
            found = _ADAPTERS.get((lib, base.__qualname__))
            if found is not None:
                break
    if len(_by_type) > 4096:
        _by_type.clear()
    _by_type[cls] = found
    return found


def table_for(value: Any) -> Table | None:
    """An adapter around ``value`` when it is tabular (a 0-d array is not)."""
    adapter = adapter_for_type(type(value))
    if adapter is None:
        return None
    if adapter is NumpyArray and getattr(value, "ndim", 0) < 1:
        return None
    return adapter(value)
