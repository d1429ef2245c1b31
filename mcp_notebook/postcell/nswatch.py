"""What each cell rebound, added or deleted in the user's namespace (the post-cell hook's core).

Two ways, the same answers:

- **the table** (CPython, Linux): the dict's own entry table copied as raw bytes (dict_table.py),
  compared with the previous cell's copy by memcmp; a slot whose value address changed is a
  rebinding, a slot emptied is a deletion, slots past the old end are new names (named by walking
  the dict backwards over just those, each checked against its slot's key address). No key or
  value object is touched, so 100,000 names cost a copy and a compare of their table, not 200,000
  cache misses. A new table (the dict grew, was cleared, changed kind) is named once from the
  dict's own listing and checked slot by slot against it before it is trusted;
- **the listing** (everywhere else, or when the table cannot be read): nsdiff.Snapshot.

No reference to any value is kept between cells, and no address is ever turned back into an object.
See docs/DESIGN.md, "The post-cell hook".
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, MutableMapping
from itertools import compress, islice
from typing import Any

from .dict_table import WORD, DictCopy, TableReader, new_reader
from .nsdiff import ARRAY_CODE, NEAR_WORDS, Snapshot, changed_words, pointers

_RESYNC_TRIES = 5  # reads of a new table per cell before the listing answers that cell
_GIVE_UP = 3  # cells in a row whose new table never agreed with the listing: the listing for good
_PAIR = struct.Struct("PP").unpack_from  # (key, value) words of a slot at a byte offset
_NO_NAME = object()  # never a key of the namespace: what an empty dict's last name is taken to be


class NamespaceWatch:
    """Finds what changed in one namespace between calls of :meth:`diff`."""

    def __init__(self, ns: MutableMapping[str, Any], table_reads: bool = True, table_from: int = 0):
        self._ns = ns
        # Below ``table_from`` names the listing answers even where the table can be read: a few
        # hundred names list faster than a system call and its bookkeeping (it stays until twice
        # as many). 0: the table whenever it can be read.
        self._table_from = table_from
        self._small = False  # the listing answered the last cell although the table can be read
        self._reader: TableReader | None = None
        # Made when the namespace first reaches ``table_from`` names (its check of the layout costs
        # ~0.5 ms: not in %load_ext; DESIGN, "Loading, eighth cut"), until then the listing answers.
        self._later = table_reads and type(ns) is dict and len(ns) < table_from
        if table_reads and type(ns) is dict and not self._later:
            self._reader = new_reader()
        self._snap = Snapshot([], b"", b"")  # the listing way's baseline
        self._table: DictCopy | None = None  # the table way's baseline
        self._names: list[str | None] = []  # the name in each slot of that table (None: deleted)
        self._listed: dict[str, int] = {}  # name -> value address, when the listing answered the last cell
        self._failed_cells = 0
        self._near: list[int] = []  # the table's words that changed last cell: compared first next time

    @property
    def reads_table(self) -> bool:
        if self._later:  # asked before the namespace needed it
            self._make_reader()
        return self._reader is not None

    def _make_reader(self) -> None:
        """The reader, made late: the listing answered so far, so the table takes over from it as
        from a small namespace (``_leave_small``, at the next :meth:`diff` past the size)."""
        self._later = False
        self._reader = new_reader()
        self._small = self._reader is not None

    def names(self) -> list[str]:
        """The names as of the last :meth:`reset` or :meth:`diff`."""
        if self._reader is None or self._small:
            return list(self._snap.keys)
        return [n for n in self._names if n is not None]

    def seen(self, name: str) -> bool:
        """Was ``name`` bound at the last :meth:`reset` or :meth:`diff`?"""
        return name in (self._snap.keys if self._reader is None or self._small else self._names)

    def reset(self) -> list[str]:
        """Take the namespace as it is now as the baseline; its names."""
        self.diff()
        return self.names()

    def diff(self) -> tuple[list[str], list[str]]:
        """(names bound to another object or new since the last call, names gone since then)."""
        if self._later and len(self._ns) >= self._table_from:
            self._make_reader()
        if self._reader is not None:
            small = len(self._ns) < self._table_from * (2 if self._small else 1)
            if not small:
                if self._small:
                    self._leave_small()
                return self._diff_table()
            if not self._small:
                self._enter_small()
        snap = Snapshot.take(self._ns, self._snap)
        changes = snap.diff(self._snap)
        self._snap = snap
        return changes

    def _enter_small(self) -> None:
        """The listing takes over: its baseline made from the table's (names in slot order, the
        values' addresses as of the last cell; O(names), once)."""
        before = self._by_name(self._table)
        keys = list(before)
        self._snap = Snapshot(keys, pointers(keys), array(ARRAY_CODE, before.values()).tobytes())
        self._small = True

    def _leave_small(self) -> None:
        """The table takes over: its next read is named from the dict's own listing (checked slot by
        slot) and compared by name with what the listing saw last."""
        self._table, self._small = None, False
        self._listed = dict(zip(self._snap.keys, self._snap.ids(), strict=True))

    # -- the table way ------------------------------------------------------------------------
    def _diff_table(self) -> tuple[list[str], list[str]]:
        assert self._reader is not None
        prev, cur = self._table, self._reader.read(self._ns)  # type: ignore[arg-type]
        if cur is None or prev is None or cur.keys_addr != prev.keys_addr or cur.fields != prev.fields:
            return self._resync(prev)
        if cur.entries < prev.entries:
            return self._resync(prev)
        names = self._names
        rebound: list[str] = []
        deleted: list[int] = []
        fields, old, new = cur.fields, prev.data, cur.data
        words = changed_words(new, old, prev.entries * fields, self._near)  # below prev's end, in order
        self._near = words if len(words) <= NEAR_WORDS else []
        slots = [words[0] // fields] if len(words) == 1 else sorted({w // fields for w in words})  # usually one
        for i in slots:
            at = (i * fields + fields - 2) * WORD
            (k0, v0), (k1, v1) = _PAIR(old, at), _PAIR(new, at)
            if k0 and k1 == k0:
                if v1 != v0:
                    rebound.append(names[i])  # type: ignore[arg-type]
            elif k0 and not k1:
                deleted.append(i)
            elif k0 or k1:  # a slot never takes another key within one table: not the table we think
                return self._resync(prev)
        count = cur.entries - prev.entries
        if not count:
            added: list[tuple[str, int]] | None = []
        elif count == 1 and (kv := _PAIR(new, (prev.entries * fields + fields - 2) * WORD))[0] == id(
            last := next(reversed(self._ns), _NO_NAME)  # type: ignore[call-overload]
        ):  # one new slot, IPython's _iN on most cells: its key word is the dict's last name (no call)
            names.append(last)
            added = [(last, kv[1])]
        else:
            added = self._name_new_slots(prev, cur)
        if added is None:
            return self._resync(prev)
        self._table = cur
        if not deleted:  # the usual cell: every new slot is a name bound
            rebound += [name for name, _ in added]
            return rebound, []
        gone = {names[i]: prev.slot(i)[1] for i in deleted}
        for i in deleted:
            names[i] = None
        for name, value in added:  # a name deleted and bound again in one cell is not gone
            if gone.pop(name, None) != value:  # new, or bound again to another object
                rebound.append(name)
        return rebound, list(gone)  # type: ignore[arg-type]

    def _name_new_slots(self, prev: DictCopy, cur: DictCopy) -> list[tuple[str, int]] | None:
        """(name, value address) in the slots past ``prev``'s end, appended to ``self._names``; None
        when the dict's last names are not the ones in those slots (it changed since the copy)."""
        count = cur.entries - prev.entries
        if not count:
            return []
        fields = cur.fields  # the new slots' words in one unpack (usually one or two slots)
        words = struct.unpack_from(f"{count * fields}P", cur.data, prev.entries * fields * WORD)
        keys, values = words[fields - 2 :: fields], words[fields - 1 :: fields]
        live = [k for k in keys if k]
        try:
            got = list(islice(reversed(self._ns), len(live)))  # type: ignore[call-overload]
        except RuntimeError:  # resized by another thread while walked
            return None
        got.reverse()
        if list(map(id, got)) != live:
            return None
        if len(live) == count:  # no slot deleted since it was added (the usual case)
            self._names += got
            return list(zip(got, values, strict=True))
        it = iter(got)
        self._names += [next(it) if k else None for k in keys]
        return list(zip(got, compress(values, keys), strict=True))

    def _resync(self, prev: DictCopy | None) -> tuple[list[str], list[str]]:
        """A table not seen before: name its slots from the dict's own listing (checked slot by slot)
        and compare by name."""
        before = self._by_name(prev)
        for _ in range(_RESYNC_TRIES):
            try:
                keys, values = list(self._ns), list(self._ns.values())
            except RuntimeError:
                continue
            table = self._reader.read(self._ns) if self._reader else None  # type: ignore[arg-type]
            names = _slot_names(table, keys, values) if table is not None and len(keys) == len(values) else None
            if names is not None:
                self._table, self._names, self._failed_cells, self._listed = table, names, 0, {}
                return _by_name_diff(before, keys, map(id, values))
        # The table never agreed with the listing: another thread keeps changing the dict, or (after
        # _GIVE_UP such cells in a row) its layout is not what the probes said. The listing answers.
        self._failed_cells += 1
        snap = Snapshot.take(self._ns)
        if self._failed_cells >= _GIVE_UP:
            self._reader, self._snap = None, snap
        self._table, self._names = None, list(snap.keys)
        self._listed = dict(zip(snap.keys, snap.ids(), strict=True))  # the next table is compared with this
        return _by_name_diff(before, snap.keys, snap.ids())

    def _by_name(self, table: DictCopy | None) -> dict[str, int]:
        if table is None:
            return self._listed
        return {n: v for n, v in zip(self._names, table.value_words(), strict=True) if n is not None}


def _by_name_diff(before: dict[str, int], keys: list[str], ids: Iterable[int]) -> tuple[list[str], list[str]]:
    now = dict(zip(keys, ids, strict=True))
    return [k for k, v in now.items() if before.get(k) != v], [k for k in before if k not in now]


def _slot_names(table: DictCopy, keys: list[str], values: list[Any]) -> list[str | None] | None:
    """The name in each slot of ``table``, if its live slots hold exactly ``keys`` and ``values``."""
    key_words = table.words(0)
    if table.entries == len(keys):  # no deleted slot: compare the raw words directly
        if key_words.tobytes() != pointers(keys) or table.words(1).tobytes() != pointers(values):
            return None
        return list(keys)
    kw = key_words.tolist()
    live_keys = array(ARRAY_CODE, compress(kw, kw)).tobytes()
    live_values = array(ARRAY_CODE, compress(table.value_words(), kw)).tobytes()
    if live_keys != pointers(keys) or live_values != pointers(values):
        return None
    it = iter(keys)
    return [next(it) if k else None for k in kw]
