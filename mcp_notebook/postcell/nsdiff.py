"""What a cell rebound, added or deleted in a namespace, at memcmp speed (the post-cell hook).

A snapshot is the list of names (``list(ns)``) and the *addresses* of the values, as raw bytes:
the item pointers of ``list(ns.values())``, copied out of the list in one ``string_at`` (CPython
lays a list out as a pointer array; the layout is checked once, on a probe list, before it is
trusted, and anything else falls back to ``array(map(id, ...))``, the same bytes made slower).
Comparing two snapshots is then ``bytes.startswith`` (one memcmp) in the usual case, and only
the words that differ are turned into names: no int per name, no per-name Python code, and no
reference to any value kept between cells (a deleted 1 GB array is freed at once). See
docs/DESIGN.md, "The post-cell hook".
"""

from __future__ import annotations

import struct
import sys
import sysconfig
from array import array
from collections.abc import Iterable, Mapping
from itertools import compress, count
from operator import ne
from typing import Any

WORD = struct.calcsize("P")
_LEAF = 64  # words compared one by one once a differing range is this small
_FANOUT = 64  # pieces a long range is first cut in (halving it instead reads it once per difference)
_PIECE = 4096  # words: ranges up to this long are simply halved
NEAR_WORDS = 32  # at most this many words that changed last time are compared on their own first
ARRAY_CODE = next(c for c in "QLI" if array(c).itemsize == WORD)


def _probe_offset() -> int | None:
    """Byte offset of a list's item-pointer field, when this interpreter lays lists out as CPython
    does (verified on a probe list); None: use the slow, portable path."""
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    try:
        import ctypes  # already imported by ipykernel: free in a kernel
    except ImportError:
        return None
    probe = [object(), object(), object()]
    base = id(probe)
    try:  # PyVarObject head (refcount, type, size), then the item pointer, then the allocated count
        if ctypes.c_ssize_t.from_address(base + 2 * WORD).value != len(probe):
            return None
        if ctypes.c_ssize_t.from_address(base + 4 * WORD).value < len(probe):
            return None
        items = ctypes.c_void_p.from_address(base + 3 * WORD).value
        if not items or ctypes.string_at(items, 3 * WORD) != struct.pack("3P", *map(id, probe)):
            return None
    except Exception:
        return None
    return 3 * WORD


_OFFSET = _probe_offset()
if _OFFSET is not None:
    from ctypes import c_void_p, string_at


def pointers(items: list[Any]) -> bytes:
    """The addresses of ``items`` (the ids of the values), ``WORD`` bytes each, in order.

    ``items`` must be a list nobody else holds (it is read in place, under the GIL)."""
    if not items:
        return b""
    if _OFFSET is None:
        return array(ARRAY_CODE, map(id, items)).tobytes()
    return string_at(c_void_p.from_address(id(items) + _OFFSET).value, len(items) * WORD)


def changed_words(
    a: bytes | bytearray, b: bytes | bytearray, words: int | None = None, near: Iterable[int] = ()
) -> list[int]:
    """Indexes of the words that differ between ``a`` and ``b`` over their common length (or
    their first ``words``).

    ``near``: words likely to differ (those that did last time, in order). Each is compared on its
    own and the ranges between them as wholes, so when they are the ones that changed again (a
    cell run again rebinds the same names) the bytes are read once, in a handful of memcmps.
    A range that differs is cut in up to ``_FANOUT`` pieces, then halves: pieces and halves that
    compare equal (``startswith`` on a view: a memcmp, no copy) are skipped, so the bytes are read
    about once, plus a few small pieces per difference; small runs are unpacked."""
    n = min(len(a), len(b)) // WORD if words is None else words
    view = memoryview(b)
    if not near:
        return _search(a, view, 0, n, [])
    # The usual cell (issue #48, ninth cut): walked in order, no range stack; each hinted word and
    # each span between two is one memcmp, and only a span that differs is searched.
    out: list[int] = []
    lo = 0
    for w in near:
        if lo <= w < n:
            if lo < w and not a.startswith(view[lo * WORD : w * WORD], lo * WORD):
                _search(a, view, lo, w, out)
            if not a.startswith(view[w * WORD : w * WORD + WORD], w * WORD):
                out.append(w)
            lo = w + 1
    if lo < n and not a.startswith(view[lo * WORD : n * WORD], lo * WORD):
        _search(a, view, lo, n, out)
    return out


def _search(a: bytes | bytearray, view: memoryview, lo: int, hi: int, out: list[int]) -> list[int]:
    """Append to ``out`` the words in [lo, hi) where ``a`` and ``view`` differ, in order."""
    stack = [(lo, hi)]
    while stack:  # bounded: every step splits a range or drops it
        lo, hi = stack.pop()
        if a.startswith(view[lo * WORD : hi * WORD], lo * WORD):
            continue
        if hi - lo == 1:  # a word alone (a halving's last): it differs
            out.append(lo)
            continue
        if hi - lo <= _LEAF:
            fmt = f"{hi - lo}P"
            pairs = map(ne, struct.unpack_from(fmt, a, lo * WORD), struct.unpack_from(fmt, view, lo * WORD))
            out += compress(count(lo), pairs)
            continue
        if hi - lo > _PIECE:  # a long range: up to _FANOUT pieces first
            step = max(_PIECE, -(-(hi - lo) // _FANOUT))
            stack += reversed([(i, min(i + step, hi)) for i in range(lo, hi, step)])
            continue
        mid = (lo + hi) // 2
        stack += ((mid, hi), (lo, mid))  # the lower half first: indexes come out in order
    return out


class Snapshot:
    """Names and value addresses of a namespace at one moment (no references to values)."""

    __slots__ = ("key_ptrs", "keys", "near", "value_ptrs")

    def __init__(self, keys: list[str], key_ptrs: bytes, value_ptrs: bytes):
        self.keys, self.key_ptrs, self.value_ptrs = keys, key_ptrs, value_ptrs
        self.near: list[int] = []  # the values that changed since the snapshot before (compared first next time)

    @classmethod
    def take(cls, ns: Mapping[str, Any], fallback: Snapshot | None = None) -> Snapshot:
        """The namespace now; another thread may resize it between the two copies (then retry,
        and after five tries keep ``fallback``, the previous snapshot)."""
        for _ in range(5):
            try:
                keys = list(ns)
                values = list(ns.values())
            except RuntimeError:
                continue
            if len(keys) == len(values):
                return cls(keys, pointers(keys), pointers(values))
        return fallback if fallback is not None else cls([], b"", b"")

    def ids(self, start: int = 0) -> tuple[int, ...]:
        """The value ids from position ``start`` on (the slow path only)."""
        return struct.unpack_from(f"{len(self.keys) - start}P", self.value_ptrs, start * WORD)

    def diff(self, prev: Snapshot) -> tuple[list[str], list[str]]:
        """(names bound to another object or new since ``prev``, names gone since ``prev``)."""
        keys, n = self.keys, len(prev.keys)
        if self.key_ptrs.startswith(prev.key_ptrs):  # the same names, perhaps more at the end (usual)
            if self.value_ptrs.startswith(prev.value_ptrs):
                return keys[n:], []
            moved = changed_words(self.value_ptrs, prev.value_ptrs, None, prev.near)
            self.near = moved if len(moved) <= NEAR_WORDS else []
            return [keys[i] for i in moved] + keys[n:], []
        # A name went away (or a key object was replaced): the same names up to the first
        # difference, compared by position; the rest by name.
        moved = changed_words(self.key_ptrs, prev.key_ptrs)
        p = moved[0] if moved else min(len(keys), n)
        cut = p * WORD
        rebound = [keys[i] for i in changed_words(self.value_ptrs[:cut], prev.value_ptrs[:cut])]
        cur = dict(zip(keys[p:], self.ids(p), strict=True))
        old = dict(zip(prev.keys[p:], prev.ids(p), strict=True))
        rebound += [k for k, _ in cur.items() - old.items()]
        return rebound, list(old.keys() - cur.keys())
