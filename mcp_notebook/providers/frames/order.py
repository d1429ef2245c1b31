"""The rows of an eager table in sorted and filtered order: a permutation, computed once and cached.

pandas frames and series and numpy arrays are ordered from the sort and filter columns alone:
boolean masks per condition, then per sort column integer codes (``pd.factorize(sort=True)``:
descending flips them, nulls go last) and one stable ``np.lexsort``. The frame itself is never
copied or sorted; a page takes its rows by position. polars, pyarrow and the other narwhals
frames get a row index, then narwhals' ``filter``/``sort`` over the needed columns only.

The permutation is cached per (cell epoch, the table's cheap fingerprint, query): deep pages of
one sort cost one sort. The frames provider moves the epoch after every cell, which empties the
cache, so a frame changed in place by a cell never gets rows from before the change.
"""

from __future__ import annotations

import importlib.util
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from ...redact import mask_secrets
from ...types import InvalidResourceParams
from .engines import EngineFrame
from .query import NOT_SORTABLE, TIE, Condition, Query, SortKey, coerce, nw_expression
from .tables import Table
from .tables.narwhals_frames import NarwhalsFrame, NarwhalsSeries
from .tables.numpy_arrays import NumpyArray
from .tables.pandas_frames import PandasFrame, PandasSeries

_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_INFERRED = {
    "string": "text",
    "empty": "text",
    "integer": "number",
    "floating": "number",
    "mixed-integer-float": "number",
    "decimal": "number",
    "boolean": "bool",
    "datetime": "datetime",
    "datetime64": "datetime",
    "date": "date",
}


class OrderCache:
    """Permutations of recent (epoch, fingerprint, query) reads; bounded by entries and rows."""

    def __init__(self, entries: int = 8, max_rows: int = 40_000_000):
        self.entries, self.max_rows = entries, max_rows
        self.epoch = 0
        self.items: OrderedDict[Hashable, Any] = OrderedDict()  # read without the lock only to see it is empty
        self._lock = threading.Lock()

    def next_epoch(self) -> None:
        """A cell ran: what was cached may be stale. Main thread only (the one writer of ``epoch``):
        a key of an older epoch is never read again, so the permutations are let go only when there
        are some (after a cell: no call, no lock for an empty cache, issue #48)."""
        self.epoch += 1
        if self.items:
            with self._lock:
                self.items.clear()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
            return found

    def put(self, key: Hashable, order: Any) -> None:
        with self._lock:
            if key[0] != self.epoch or len(order) > self.max_rows:
                return
            self.items[key] = order
            while len(self.items) > self.entries or sum(len(v) for v in self.items.values()) > self.max_rows:
                self.items.popitem(last=False)


def capabilities(table: Table) -> tuple[bool, bool, str]:
    """(sortable, filterable, why not) for ``table``."""
    if isinstance(table, EngineFrame):
        import narwhals.stable.v2 as nw

        try:
            nw.from_native(table.value)
        except TypeError:
            return False, False, f"narwhals does not support {table.kind}"
        if table.engine in NOT_SORTABLE:
            return False, True, "a global sort is a full shuffle; filter it with where="
        return True, True, ""
    if isinstance(table, (PandasFrame, PandasSeries, NarwhalsFrame, NarwhalsSeries)):
        return True, True, ""
    if isinstance(table, NumpyArray):
        if importlib.util.find_spec("pandas") is None:
            return False, False, "sorting or filtering a numpy array needs pandas installed"
        return True, True, ""
    return False, False, "this kind of table has no sort or filter here"


def eager_order(table: Table, query: Query, cache: OrderCache | None) -> Any:
    """Row positions of ``table`` filtered and sorted by ``query`` (a numpy int64 array)."""
    epoch = cache.epoch if cache is not None else None
    key: Hashable | None = (epoch, table.fingerprint(), query.key())
    try:
        hash(key)
    except TypeError:
        key = None
    if cache is not None and key is not None:
        found = cache.get(key)
        if found is not None:
            return found
    if isinstance(table, (NarwhalsFrame, NarwhalsSeries)):
        order = _narwhals_order(table, query)
    else:
        order = _pandas_order(_columns_of(table), table.nrows or 0, query)
    if cache is not None and key is not None:
        cache.put(key, order)
    return order


def _columns_of(table: Table) -> Callable[[int], Any]:
    """A pandas Series of the column at a position (a view where pandas allows)."""
    import pandas as pd

    if isinstance(table, PandasFrame):
        return lambda p: table.value.iloc[:, p]
    if isinstance(table, PandasSeries):
        return lambda p: table.value
    if isinstance(table, NumpyArray):
        return lambda p: pd.Series(table.column(p), copy=False)
    raise InvalidResourceParams(f"a {table.kind} cannot be sorted or filtered here")


# -- pandas and numpy: masks and codes over the named columns only -----------------------------------
def _pandas_order(column: Callable[[int], Any], n: int, query: Query) -> Any:
    import numpy as np

    rows = np.arange(n, dtype=np.int64)
    if query.where:
        mask = np.ones(n, dtype=bool)
        for cond in query.where:
            for p in cond.positions:
                mask &= _pandas_mask(column(p), cond)
        rows = np.flatnonzero(mask)
    if query.sort:
        keys, seen = [], set()
        for key in query.sort:
            for p in key.positions:
                if p not in seen:
                    seen.add(p)
                    keys.append(_sort_codes(column(p), rows, n, key))
        rows = rows[np.lexsort(keys[::-1])]  # lexsort: last key first; stable
    return rows


def _sort_codes(series: Any, rows: Any, n: int, key: SortKey) -> Any:
    """Integer codes ordering the column's values at ``rows``: descending flipped, nulls last."""
    import numpy as np
    import pandas as pd

    part = series if len(rows) == n else series.take(rows)
    try:
        codes, uniques = pd.factorize(part, sort=True)
    except TypeError as exc:
        raise InvalidResourceParams(
            f"sort: {mask_secrets(key.label)} cannot be sorted, its values do not compare ({exc})"
        ) from None
    codes = np.asarray(codes, dtype=np.int64)
    nulls = codes < 0
    if key.descending:
        codes = (len(uniques) - 1) - codes
    codes[nulls] = len(uniques)
    return codes


def _family(series: Any) -> str:
    import pandas as pd

    dtype = series.dtype
    api = pd.api.types
    if api.is_bool_dtype(dtype):
        return "bool"
    if isinstance(dtype, pd.CategoricalDtype):
        return "other"
    if api.is_numeric_dtype(dtype):
        return "number"
    if api.is_datetime64_any_dtype(dtype):
        return "datetime"
    if api.is_string_dtype(dtype) or api.is_object_dtype(dtype):
        return _INFERRED.get(api.infer_dtype(series.iloc[:1000], skipna=True), "other")
    return "other"


def _pandas_mask(series: Any, cond: Condition) -> Any:
    """Rows of ``series`` meeting ``cond`` (a comparison never matches a missing value)."""
    import numpy as np

    present = series.notna().to_numpy(dtype=bool)
    if cond.value is None:
        return ~present if cond.op == "==" else present
    if cond.op == "~":
        found = series.astype(str).str.lower().str.contains(str(cond.value).lower(), regex=False)
        return present & found.to_numpy(dtype=bool, na_value=False)
    value = coerce(cond, _family(series), str(series.dtype))
    try:
        with np.errstate(all="ignore"):
            result = _COMPARE[cond.op](series, value)
    except (TypeError, ValueError) as exc:
        raise InvalidResourceParams(
            f"where: {mask_secrets(cond.label)} {cond.op} {mask_secrets(cond.raw)} cannot be compared "
            f"({series.dtype}): {str(exc)[:200]}"
        ) from None
    return present & np.asarray(result.to_numpy(dtype=bool, na_value=False))


# -- narwhals frames: a row index through filter and sort ---------------------------------------------
def _narwhals_order(table: NarwhalsFrame | NarwhalsSeries, query: Query) -> Any:
    import narwhals as nw
    import numpy as np

    frame = table.frame if isinstance(table, NarwhalsFrame) else table.series.to_frame()
    names = list(frame.columns)
    tie = TIE
    while tie in names:
        tie += "_"
    wanted = [p for c in query.where for p in c.positions] + [p for k in query.sort for p in k.positions]
    df = frame.select(list(dict.fromkeys(names[p] for p in wanted))).with_row_index(tie)
    if query.where:
        schema = df.schema
        df = df.filter(*(nw_expression(nw, schema, names[p], c) for c in query.where for p in c.positions))
    if query.sort:
        first: dict[str, bool] = {}
        for k in query.sort:
            for p in k.positions:
                first.setdefault(names[p], k.descending)
        keys = [*first.items(), (tie, False)]
        df = df.sort([n for n, _ in keys], descending=[d for _, d in keys], nulls_last=True)
    return np.asarray(df.get_column(tie).to_numpy(), dtype=np.int64)
