"""Adapters that give pandas, polars, pyarrow and numpy values one small tabular interface.

Every operation slices first and converts only the slice: a page of a 10-million-row frame costs
what a page of a small one does. Libraries are imported only when a value of theirs exists (the
adapter is picked from the value's type names, without importing anything): cells.py (cell values
as JSON), base.py (:class:`Table`), one module per family of libraries, and the dispatch here.
"""

from __future__ import annotations

from typing import Any

from .base import Table
from .cells import CellRenderer, cell_text, quiet
from .narwhals_frames import NarwhalsFrame, NarwhalsSeries
from .numpy_arrays import NumpyArray
from .pandas_frames import PandasFrame, PandasSeries

__all__ = ["CellRenderer", "Table", "adapter_for_type", "cell_text", "quiet", "table_for"]

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
LIBRARIES = frozenset(lib for lib, _ in _ADAPTERS)  # whose types an adapter may serve (root module of a type or a base)
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
        if lib in LIBRARIES:
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
