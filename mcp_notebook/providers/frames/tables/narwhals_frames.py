"""polars, pyarrow, modin, cuDF and every other eager frame narwhals supports."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from .base import Table, guard_column, hash_text, is_simple, stat_value
from .cells import MAX_CATEGORIES, examples, sample_positions


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
        d.update(min=stat_value(head.min()), max=stat_value(head.max()), mean=stat_value(head.mean()))
    elif dtype.is_temporal() and has_values and not isinstance(dtype, nw.Duration):
        d.update(min=stat_value(head.min()), max=stat_value(head.max()))
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

    def take(self, rows: Sequence[int], positions: Sequence[int]) -> list[list[Any]]:
        names = self.frame.columns
        part = self.frame.select(list(dict.fromkeys(names[p] for p in positions)))[[int(r) for r in rows]]
        return [part.get_column(names[p]).to_list() for p in positions]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        df = self.frame
        head = df.head(stats_rows)
        names, labels = df.columns, self.labels()
        cols = [
            guard_column(
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
    hash_text(h, s.to_list())


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

    def take(self, rows: Sequence[int], positions: Sequence[int]) -> list[list[Any]]:
        part = self.series[[int(r) for r in rows]].to_list()
        return [part for _ in positions]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        s = self.series
        label = self.labels()[0]
        cols = [guard_column(label, lambda: _describe_nw(label, s.head(stats_rows), s)) for _ in positions]
        return {"columns": cols, "nulls_over": "all rows"}

    def fingerprint(self) -> tuple:
        s = self.series
        return (id(self.value), len(s), s.name if is_simple(s.name) else id(s.name), str(s.dtype))

    def digest(self) -> bytes:
        s = self.series
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((len(s), s.name, str(s.dtype))).encode())
        _hash_nw(h, s[sample_positions(len(s))] if len(s) else s)
        return h.digest()
