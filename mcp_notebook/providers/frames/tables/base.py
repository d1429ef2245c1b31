"""The one small tabular interface every adapter implements, and helpers adapters share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .cells import CellRenderer, cell_text


class Table:
    """One tabular value. Subclasses adapt one library's type."""

    kind = "table"
    mutable = True  # may change in place (else only rebinding changes it)
    lazy = False  # a lazy engine frame (providers/frames/engines.py): rows and counts cost engine work

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

    def take(self, rows: Sequence[int], positions: Sequence[int]) -> list[list[Any]]:
        """As :meth:`page`, for the rows at positions ``rows`` (a sorted or filtered page)."""
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


def hash_text(h: Any, values: Iterable[Any]) -> None:
    cells = CellRenderer(200)
    for v in values:
        h.update(cell_text(cells.value(v)).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")


def stat_value(v: Any) -> Any:
    """A stat as JSON: numpy/pandas scalars become Python values, NaN becomes null."""
    return CellRenderer(80).value(v)


class Same:
    """Equal only to a wrapper of the very same object (no user __eq__ runs)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return type(other) is Same and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"<same {id(self.obj):#x}>"


def is_simple(v: Any) -> bool:
    return v is None or type(v) in (str, int, float, bool)


def guard_column(label: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except Exception as exc:  # one odd column must not sink the whole schema
        return {"name": label, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
