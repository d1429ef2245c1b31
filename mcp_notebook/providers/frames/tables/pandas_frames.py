"""pandas DataFrame and Series: pages by position, schemas with pandas' own statistics."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from .base import Same, Table, guard_column, hash_text, is_simple, stat_value
from .cells import MAX_CATEGORIES, examples, label_of, sample_positions


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
            info["min"], info["max"] = stat_value(head.min()), stat_value(head.max())
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
            hash_text(h, s.tolist())


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
        d.update(min=stat_value(s.min()), max=stat_value(s.max()), mean=stat_value(s.mean()))
    elif kind == "b":
        d["true"] = int(s.sum())
    elif kind in "mM" and len(s) > d["nulls"]:
        d.update(min=stat_value(s.min()), max=stat_value(s.max()))
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

    def take(self, rows: Sequence[int], positions: Sequence[int]) -> list[list[Any]]:
        part = self.value.iloc[rows, list(positions)]
        return self._index_lists(part.index) + [part.iloc[:, j].tolist() for j in range(len(positions))]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        head = self.value.iloc[:stats_rows]
        labels = self.labels()
        cols = [guard_column(labels[p], lambda p=p: _describe_pandas(labels[p], head.iloc[:, p])) for p in positions]
        return {"columns": cols, "index": self._index_info(stats_rows)}

    def fingerprint(self) -> tuple:
        # The columns Index by identity (kept alive, so its id is not reused): comparing labels would run
        # their __eq__, and a NaN label is unequal to itself, so the frame would look changed after every cell.
        df = self.value
        return (id(df), df.shape, id(getattr(df, "_mgr", None)), Same(df.columns))

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

    def take(self, rows: Sequence[int], positions: Sequence[int]) -> list[list[Any]]:
        part = self.value.iloc[rows]
        return self._index_lists(part.index) + [part.tolist() for _ in positions]

    def describe(self, positions: Sequence[int], stats_rows: int) -> dict[str, Any]:
        label = self.labels()[0]
        head = self.value.iloc[:stats_rows]
        cols = [guard_column(label, lambda: _describe_pandas(label, head)) for _ in positions]
        return {"columns": cols, "index": self._index_info(stats_rows)}

    def fingerprint(self) -> tuple:
        s = self.value
        return (id(s), len(s), id(getattr(s, "_mgr", None)), str(s.dtype), s.name if is_simple(s.name) else id(s.name))

    def digest(self) -> bytes:
        s = self.value
        h = hashlib.blake2b(digest_size=16)
        h.update(repr((len(s), str(s.dtype), label_of(s.name))).encode())
        part = s.iloc[sample_positions(len(s))]
        self._hash_series(h, part)
        self._hash_series(h, part.index.to_series())
        return h.digest()
