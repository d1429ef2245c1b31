"""numpy arrays as tables: 1-d and 2-d arrays, structured arrays by field."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

from .base import Table, guard_column, hash_text, stat_value
from .cells import examples, sample_positions


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
        return self._rows_at(np.arange(start, stop))

    def _rows_at(self, rows: Any) -> tuple[Any, list[list[int]]]:
        import numpy as np

        a = self.value
        rows = np.asarray(rows, dtype=np.int64)
        if a.ndim <= 2:
            return a[rows], []
        lead = np.unravel_index(rows, a.shape[:-1])
        return a[lead], [ix.tolist() for ix in lead]

    def column(self, p: int) -> Any:
        """The whole column at position ``p`` as a 1-D array (a view, but for n-d arrays)."""
        a = self.value
        fields = self._fields()
        if fields:
            return a[fields[p]]
        if a.ndim == 1:
            return a
        return a[:, p] if a.ndim == 2 else a[..., p].reshape(-1)

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

    def take(self, rows: Sequence[int], positions: Sequence[int]) -> list[list[Any]]:
        part, index = self._rows_at(rows)
        return list(index) + [_np_list(self._column(part, p)) for p in positions]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        a = self.value
        rows, _ = self._rows(0, min(self.nrows, stats_rows))
        labels = self.labels()
        cols = [
            guard_column(labels[p], lambda p=p: _describe_numpy(labels[p], self._column(rows, p))) for p in positions
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
                hash_text(h, part.tolist())
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
            d.update(min=stat_value(values.min()), max=stat_value(values.max()), mean=stat_value(values.mean()))
        elif kind in "mM":
            d.update(min=stat_value(values.min()), max=stat_value(values.max()))
        elif kind == "b":
            d["true"] = int(np.count_nonzero(values))
    d["examples"] = examples(_np_list(col[:1000]))
    return d


def _np_list(col: Any) -> list[Any]:
    """Python values of a 1-D array; datetimes as ISO text (``tolist`` would give ints for ns)."""
    if col.dtype.kind in "mM":
        return [None if text == "NaT" else text for text in col.astype(str).tolist()]
    return col.tolist()
