"""A copy of a dict's own entry table: the key and value addresses of every slot, read without
touching a single key or value object (CPython with the GIL, on Linux).

Listing 100,000 names and values costs ~1 ms because every object's reference count is written
twice, each one a cache miss; the table itself is one contiguous array of (hash,) key, value
pointers. It is copied here with ``process_vm_readv`` on our own process, called through
``ctypes.PyDLL`` so the GIL is held while the kernel copies (no Python thread can resize the
dict meanwhile), and a read of memory that is no longer mapped returns an error instead of
faulting: nothing here can crash the kernel, whatever another thread did to the dict between two
steps. Every copy is checked against the dict before and after (same table, same header), and
the whole layout is verified on probe dicts once before it is trusted; anything unexpected (another
interpreter, a free-threaded build, an unknown layout, a refused syscall) makes :func:`reader`
return None and the caller lists names and values instead. See docs/DESIGN.md, "The post-cell hook".
"""

from __future__ import annotations

import struct
import sys
import sysconfig
from collections.abc import Callable
from ctypes import addressof, c_char, c_size_t, c_void_p  # ctypes: already imported by ipykernel
from typing import Any

from .. import portable

WORD = struct.calcsize("P")
_KEYS = 4 * WORD  # PyDictObject: refcount, type, ma_used, version/watcher tag, then ma_keys, ma_values
_UNICODE_KIND = 1  # 3.11+: a table whose keys are all str stores no hash


class DictCopy:
    """One copy of a dict's entries (``data`` is a reusable buffer; only its first ``size`` bytes count)."""

    __slots__ = ("data", "entries", "fields", "keys_addr")

    def __init__(self, keys_addr: int, entries: int, fields: int, data: bytearray):
        self.keys_addr = keys_addr  # the table object the copy came from
        self.entries = entries  # slots used so far, live or deleted (a deleted slot has key and value 0)
        self.fields = fields  # words per slot: 2 (key, value) or 3 (hash, key, value)
        self.data = data

    @property
    def size(self) -> int:
        return self.entries * self.fields * WORD

    def words(self, field: int, start: int = 0) -> memoryview:
        """One field of every slot from ``start`` on, as pointer-sized words: 0 key, 1 value."""
        first = self.fields - 2 + field
        return memoryview(self.data)[: self.size].cast("P")[start * self.fields + first :: self.fields]

    def key_words(self, start: int = 0) -> list[int]:
        return self.words(0, start).tolist()

    def value_words(self, start: int = 0) -> list[int]:
        return self.words(1, start).tolist()

    def slot(self, i: int) -> tuple[int, int]:
        """(key address, value address) of slot ``i``; (0, 0) for a deleted slot."""
        return struct.unpack_from("PP", self.data, (i * self.fields + self.fields - 2) * WORD)


Copy = Callable[..., int]  # (dest, src, size[, dest2, src2, size2]) -> bytes copied, -1 refused; never faults
_GUESS = 64  # slots read past the last count in the one-copy read (a cell adding more takes two)


class TableReader:
    """Copies one dict's entry table into two alternating buffers (no allocation per cell): a
    table returned (the buffer and its DictCopy, which is filled again with it) stays intact until
    the second read after it.

    The table read last time is read again in one copy (its header and its slots up to the last
    count plus ``_GUESS``, all inside the table's own allocation); a new table takes three (its
    header, its slots, its header again)."""

    def __init__(self, copy: Copy):
        self._copy = copy
        self._buffers: list[tuple[bytearray, int]] = [_buffer(0), _buffer(0)]
        self._turn = 0
        self._hdr, self._hdr_addr = _buffer(_HEADER)
        self._after, self._after_addr = _buffer(_HEADER)
        self._dict_id = 0
        self._slots = (c_void_p(), c_void_p())
        self._known: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)  # address, offset, fields, capacity, entries
        # One DictCopy per buffer, filled again with it (like the buffer, intact until the second read after)
        self._copies = (DictCopy(0, 0, 2, self._buffers[0][0]), DictCopy(0, 0, 2, self._buffers[1][0]))
        vm = getattr(copy, "vm", None)  # process_vm_readv and our pid, for the known table's read
        vec = (c_size_t * 8)()  # this reader's own two iovec pairs (local, then remote), as in the copy
        self._vm = None if vm is None else (*vm, vec, c_void_p(addressof(vec)), c_void_p(addressof(vec) + 4 * WORD))
        self._layout = b""  # the known table's header bytes that fix its layout (set when it is new)

    def read(self, d: dict[Any, Any]) -> DictCopy | None:
        """The table of ``d`` now, or None (split values, an unknown header, or ``d`` changed
        while it was copied)."""
        if not d:  # an empty dict may share a static table (and, before 3.11, a static values array)
            return DictCopy(0, 0, 2, self._buffers[self._turn ^ 1][0])
        if id(d) != self._dict_id:  # ma_keys and ma_values, read in place
            self._dict_id = id(d)
            self._slots = (c_void_p.from_address(id(d) + _KEYS), c_void_p.from_address(id(d) + _KEYS + WORD))
        keys_slot, values_slot = self._slots
        keys_addr = keys_slot.value
        if not keys_addr or values_slot.value:  # no table, or split values
            return None
        known, offset, fields, capacity, last = self._known
        if keys_addr != known:
            return self._read_new(keys_slot, keys_addr)
        # Every cell's read (the table seen last time), inlined (issue #48, eighth cut): its header and
        # its slots up to the last count plus _GUESS in one copy, the header's layout bytes compared
        # with the ones checked when the table was new (the same bytes: the same layout).
        slot_bytes = fields * WORD
        want = min(capacity, last + _GUESS) * slot_bytes
        turn = self._turn ^ 1
        buf, addr = self._buffers[turn]
        if len(buf) < want:
            buf, addr = self._next_buffer(want)
        hdr, vm = self._hdr, self._vm
        if vm is None:
            got = self._copy(self._hdr_addr, keys_addr, _HEADER, addr, keys_addr + offset, want)
        else:  # process_vm_readv called here, the reader's own iovecs: no Python call
            fn, pid, vec, local, remote = vm
            vec[0], vec[1], vec[2], vec[3] = self._hdr_addr, _HEADER, addr, want
            vec[4], vec[5], vec[6], vec[7] = keys_addr, _HEADER, keys_addr + offset, want
            got = fn(pid[0], local, 2, remote, 2, 0)
        if got == _HEADER + want and hdr.startswith(self._layout, _LAYOUT_AT) and keys_slot.value == keys_addr:
            (entries,) = _ENTRIES(hdr, _ENTRIES_AT)
            if 0 <= entries and entries * slot_bytes <= want:  # no more slots than read
                self._known, self._turn = (keys_addr, offset, fields, capacity, entries), turn
                table = self._copies[turn]  # this buffer's DictCopy, filled in place: no call
                table.keys_addr, table.entries, table.fields, table.data = keys_addr, entries, fields, buf
                return table
        return self._read_new(keys_slot, keys_addr)

    def _read_new(self, keys_slot: c_void_p, keys_addr: int) -> DictCopy | None:
        if self._copy(self._hdr_addr, keys_addr, _HEADER) != _HEADER:
            return None
        layout = _parse_header(self._hdr)
        if layout is None:
            return None
        offset, entries, fields, capacity = layout
        size = entries * fields * WORD
        buf, addr = self._next_buffer(size)
        if size and self._copy(addr, keys_addr + offset, size) != size:
            return None
        # The same table, header unchanged, after the copy: nothing resized or appended in between.
        if keys_slot.value != keys_addr or self._copy(self._after_addr, keys_addr, _HEADER) != _HEADER:
            return None
        if self._after != self._hdr:
            return None
        self._layout = bytes(self._hdr[_LAYOUT_AT : _LAYOUT_AT + _LAYOUT_LEN])
        return self._done((keys_addr, offset, fields, capacity, entries), buf)

    def _next_buffer(self, size: int) -> tuple[bytearray, int]:
        """The buffer not holding the last table returned (which the caller still compares with)."""
        turn = self._turn ^ 1
        buf, addr = self._buffers[turn]
        if len(buf) < size:
            buf, addr = self._buffers[turn] = _buffer(size + size // 4)
        return buf, addr

    def _done(self, known: tuple[int, int, int, int, int], buf: bytearray) -> DictCopy:
        self._known = known
        self._turn ^= 1
        table = self._copies[self._turn]
        table.keys_addr, table.entries, table.fields, table.data = known[0], known[4], known[2], buf
        return table


def _buffer(size: int) -> tuple[bytearray, int]:
    """A zeroed buffer and its address (stable: it is never resized)."""
    buf = bytearray(max(size, 1))
    return buf, addressof((c_char * len(buf)).from_buffer(buf))


# -- layouts ---------------------------------------------------------------------------------

_ENTRIES = struct.Struct("n").unpack_from  # the header's count of slots used
_LAYOUT_AT = WORD  # the header's bytes that fix a table's layout start here (after the refcount)

if sys.version_info >= (3, 11):
    _HEADER = 4 * WORD  # refcount; log2 size, log2 index bytes, kind, pad, version; usable; entries
    _LAYOUT_LEN, _ENTRIES_AT = 3, 3 * WORD  # log2 size, log2 index bytes, kind

    def _parse_header(hdr: bytearray) -> tuple[int, int, int, int] | None:
        """(offset of the slots, slots used, words per slot, slots allocated) or None."""
        log2_size, log2_index_bytes, kind = hdr[WORD], hdr[WORD + 1], hdr[WORD + 2]
        if kind > _UNICODE_KIND or log2_size > 40 or log2_index_bytes > 43:  # split, or not a table at all
            return None
        (entries,) = struct.unpack_from("n", hdr, 3 * WORD)
        capacity = ((1 << log2_size) << 1) // 3  # CPython's USABLE_FRACTION
        if not 0 <= entries <= capacity:
            return None
        return _HEADER + (1 << log2_index_bytes), entries, 2 if kind == _UNICODE_KIND else 3, capacity

else:
    _HEADER = 5 * WORD  # refcount, size, lookup function, usable, entries
    _LAYOUT_LEN, _ENTRIES_AT = WORD, 4 * WORD  # size (the lookup function may change: not the layout)

    def _parse_header(hdr: bytearray) -> tuple[int, int, int, int] | None:
        """(offset of the slots, slots used, words per slot, slots allocated) or None."""
        size, _lookup, _usable, entries = struct.unpack_from("nPnn", hdr, WORD)
        capacity = (size << 1) // 3  # CPython's USABLE_FRACTION
        if size <= 0 or size & (size - 1) or not 0 <= entries <= capacity:
            return None
        index_bytes = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
        return _HEADER + index_bytes * size, entries, 3, capacity


# -- the copy, and trusting it ---------------------------------------------------------------


def _process_vm_copy() -> Copy | None:
    """A fault-free memcpy of one or two ranges of our own memory that keeps the GIL, or None."""
    import ctypes
    import os

    try:
        fn = ctypes.PyDLL(None).process_vm_readv  # PyDLL: the call keeps the GIL
    except (AttributeError, OSError):
        return None
    # No argtypes (converting through them is ~1 us a call, a third of a small copy): the two
    # iovec arrays live in one array of size_t (base, length pairs: local ones, then remote ones)
    # passed as c_void_p; the pid and the counts are small ints, passed as C ints.
    fn.restype = ctypes.c_ssize_t
    vec = (ctypes.c_size_t * 8)()
    local, remote = ctypes.c_void_p(ctypes.addressof(vec)), ctypes.c_void_p(ctypes.addressof(vec) + 4 * WORD)
    # Our pid, kept (getpid is a system call, ~0.3 us a cell) and taken again in a forked child.
    pid = [os.getpid()]
    os.register_at_fork(after_in_child=lambda: pid.__setitem__(0, os.getpid()))

    def copy(dest: int, src: int, size: int, dest2: int = 0, src2: int = 0, size2: int = 0) -> int:
        vec[0], vec[1], vec[4], vec[5] = dest, size, src, size
        if not size2:
            return fn(pid[0], local, 1, remote, 1, 0)
        vec[2], vec[3], vec[6], vec[7] = dest2, size2, src2, size2
        return fn(pid[0], local, 2, remote, 2, 0)

    copy.vm = (fn, pid)  # type: ignore[attr-defined]  # the readers call it themselves on their hot path
    return copy


def _verified(copy: Copy) -> bool:
    """The layout reads back right on probe dicts (one- and two-byte indexes, str and other keys,
    deleted slots), through a new table's read and the one-copy read of a known one. (Every table
    the hub then uses is checked again against the dict's own listing the first time it is read:
    see nswatch.)"""
    reader = TableReader(copy)
    # 100 keys: a 256-slot table, the smallest with two-byte indexes (5 keys: one-byte)
    for n, make_key in ((5, str), (100, str), (5, _mixed_key), (100, _mixed_key)):
        probe = {make_key(i): object() for i in range(n)}
        for i in range(0, n, 5):
            del probe[make_key(i)]
        for _ in range(2):
            if not _reads_back(reader, probe):
                return False
            probe[make_key(n + 1)] = probe[make_key(1)] = object()  # one added, one rebound
    return True


def _reads_back(reader: TableReader, probe: dict[Any, Any]) -> bool:
    table = reader.read(probe)
    if table is None:
        return False
    keys, values = table.key_words(), table.value_words()
    live = [(k, v) for k, v in zip(keys, values, strict=True) if k]
    dead = [v for k, v in zip(keys, values, strict=True) if not k]
    return live == [(id(k), id(v)) for k, v in probe.items()] and not any(dead)


def _mixed_key(i: int) -> object:
    return i if i % 7 == 0 else str(i)


_COPY: list[Copy | None] = []


def new_reader() -> TableReader | None:
    """A reader for one dict, or None where tables cannot be read this way (checked once per process;
    None on the portable path, MCP_NOTEBOOK_PORTABLE)."""
    if portable.ON:
        return None
    if not _COPY:
        _COPY.append(_checked_copy())
    copy = _COPY[0]
    return TableReader(copy) if copy is not None else None


def _checked_copy() -> Copy | None:
    if sys.implementation.name != "cpython" or not sys.platform.startswith("linux"):
        return None
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    try:
        copy = _process_vm_copy()
        return copy if copy is not None and _verified(copy) else None
    except Exception:  # an interpreter we do not know: the portable path
        return None
