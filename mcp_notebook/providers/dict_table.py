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
from ctypes import addressof, c_char, c_void_p  # ctypes: already imported by ipykernel
from dataclasses import dataclass
from typing import Any

WORD = struct.calcsize("P")
_KEYS = 4 * WORD  # PyDictObject: refcount, type, ma_used, version/watcher tag, then ma_keys, ma_values
_UNICODE_KIND = 1  # 3.11+: a table whose keys are all str stores no hash


@dataclass(frozen=True)
class Table:
    """One copy of a dict's entries (``data`` is a reusable buffer; only its first ``size`` bytes count)."""

    keys_addr: int  # the table object the copy came from
    entries: int  # slots used so far, live or deleted (a deleted slot has key and value 0)
    fields: int  # words per slot: 2 (key, value) or 3 (hash, key, value)
    data: bytearray

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


class TableReader:
    """Copies one dict's entry table into two alternating buffers (no allocation per cell): a
    table returned stays intact until the second read after it."""

    def __init__(self, copy: Callable[[int, int, int], bool]):
        self._copy = copy  # (dest address, source address, size) -> all copied; never faults
        self._buffers: list[tuple[bytearray, int]] = [_buffer(0), _buffer(0)]
        self._turn = 0
        self._hdr, self._hdr_addr = _buffer(_HEADER)
        self._after, self._after_addr = _buffer(_HEADER)

    def read(self, d: dict[Any, Any]) -> Table | None:
        """The table of ``d`` now, or None (split values, an unknown header, or ``d`` changed
        while it was copied)."""
        if not d:  # an empty dict may share a static table (and, before 3.11, a static values array)
            return Table(0, 0, 2, self._buffers[self._turn][0])
        slot = c_void_p.from_address(id(d) + _KEYS)
        keys_addr = slot.value
        if not keys_addr or c_void_p.from_address(id(d) + _KEYS + WORD).value:  # no table, or split values
            return None
        if not self._copy(self._hdr_addr, keys_addr, _HEADER):
            return None
        layout = _parse_header(self._hdr)
        if layout is None:
            return None
        offset, entries, fields = layout
        size = entries * fields * WORD
        self._turn ^= 1
        buf, addr = self._buffers[self._turn]
        if len(buf) < size:
            buf, addr = self._buffers[self._turn] = _buffer(size + size // 4)
        if size and not self._copy(addr, keys_addr + offset, size):
            return None
        # The same table, header unchanged, after the copy: nothing resized or appended in between.
        if slot.value != keys_addr or not self._copy(self._after_addr, keys_addr, _HEADER) or self._after != self._hdr:
            return None
        return Table(keys_addr, entries, fields, buf)


def _buffer(size: int) -> tuple[bytearray, int]:
    """A zeroed buffer and its address (stable: it is never resized)."""
    buf = bytearray(max(size, 1))
    return buf, addressof((c_char * len(buf)).from_buffer(buf))


# -- layouts ---------------------------------------------------------------------------------

if sys.version_info >= (3, 11):
    _HEADER = 4 * WORD  # refcount; log2 size, log2 index bytes, kind, pad, version; usable; entries

    def _parse_header(hdr: bytearray) -> tuple[int, int, int] | None:
        log2_size, log2_index_bytes, kind = hdr[WORD], hdr[WORD + 1], hdr[WORD + 2]
        if kind > _UNICODE_KIND or log2_size > 40 or log2_index_bytes > 43:  # split, or not a table at all
            return None
        (entries,) = struct.unpack_from("n", hdr, 3 * WORD)
        if not 0 <= entries <= (1 << log2_size):
            return None
        return _HEADER + (1 << log2_index_bytes), entries, 2 if kind == _UNICODE_KIND else 3

else:
    _HEADER = 5 * WORD  # refcount, size, lookup function, usable, entries

    def _parse_header(hdr: bytearray) -> tuple[int, int, int] | None:
        size, _lookup, _usable, entries = struct.unpack_from("nPnn", hdr, WORD)
        if size <= 0 or size & (size - 1) or not 0 <= entries <= size:
            return None
        index_bytes = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
        return _HEADER + index_bytes * size, entries, 3


# -- the copy, and trusting it ---------------------------------------------------------------


def _process_vm_copy() -> Any:
    """A fault-free memcpy from our own address space that keeps the GIL, or None."""
    import ctypes
    from os import getpid

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    try:
        fn = ctypes.PyDLL(None).process_vm_readv  # PyDLL: the call keeps the GIL
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(IoVec), ctypes.c_ulong, ctypes.POINTER(IoVec), ctypes.c_ulong]
    fn.argtypes += [ctypes.c_ulong]
    fn.restype = ctypes.c_ssize_t
    local, remote = IoVec(), IoVec()
    local_ref, remote_ref = ctypes.byref(local), ctypes.byref(remote)

    def copy(dest: int, src: int, size: int) -> bool:
        local.base, local.len, remote.base, remote.len = dest, size, src, size
        return fn(getpid(), local_ref, 1, remote_ref, 1, 0) == size  # this process, also after a fork

    return copy


def _verified(copy: Callable[[int, int, int], bool]) -> bool:
    """The layout reads back right on probe dicts: one- and two-byte indexes, str and other keys,
    deleted slots. (Every table the hub then uses is checked again against the dict's own listing
    the first time it is read: see nswatch.)"""
    reader = TableReader(copy)
    for n, make_key in ((5, str), (300, str), (5, _mixed_key), (300, _mixed_key)):
        probe = {make_key(i): object() for i in range(n)}
        for i in range(0, n, 5):
            del probe[make_key(i)]
        table = reader.read(probe)
        if table is None:
            return False
        keys, values = table.key_words(), table.value_words()
        live = [(k, v) for k, v in zip(keys, values, strict=True) if k]
        if live != [(id(k), id(v)) for k, v in probe.items()] or any(
            v for k, v in zip(keys, values, strict=True) if not k
        ):
            return False
    return True


def _mixed_key(i: int) -> object:
    return i if i % 7 == 0 else str(i)


_COPY: list[Callable[[int, int, int], bool] | None] = []


def new_reader() -> TableReader | None:
    """A reader for one dict, or None where tables cannot be read this way (checked once per process)."""
    if not _COPY:
        _COPY.append(_checked_copy())
    copy = _COPY[0]
    return TableReader(copy) if copy is not None else None


def _checked_copy() -> Callable[[int, int, int], bool] | None:
    if sys.implementation.name != "cpython" or not sys.platform.startswith("linux"):
        return None
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    try:
        copy = _process_vm_copy()
        return copy if copy is not None and _verified(copy) else None
    except Exception:  # an interpreter we do not know: the portable path
        return None
