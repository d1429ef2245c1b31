"""Reading the namespace dict's own entry table (postcell/dict_table.py, nswatch.py): exact answers
under random cells, no crash and no lost name while another thread changes the dict, a copy that
cannot fault, and the listing way whenever the table cannot be trusted."""

from __future__ import annotations

import ctypes
import mmap
import os
import random
import sys
import threading
import warnings
from typing import Any

import pytest
from kernel_harness import Kernel

from mcp_notebook.postcell import dict_table, nswatch
from mcp_notebook.postcell.nswatch import NamespaceWatch

pytestmark = pytest.mark.skipif(dict_table.new_reader() is None, reason="dict tables are not read directly here")


def _ids(ns: dict[Any, Any]) -> dict[Any, int]:
    return {k: id(v) for k, v in ns.items()}


def _random_cell(rng: random.Random, ns: dict[Any, Any], keep: list[Any]) -> None:
    """Bind, rebind, delete, delete and bind again (same object or another), a non-str key, clear,
    popitem (which lets the next name reuse the freed slot)."""
    for _ in range(rng.choice([0, 1, 3, 30])):
        op, names = rng.random(), list(ns)
        value = object() if rng.random() < 0.7 else rng.choice([None, True, 0, "x"])
        keep.append(value)  # the old values stay alive: no address is reused in this test
        if op < 0.25 and names:
            ns[rng.choice(names)] = value
        elif op < 0.45 and names:
            del ns[rng.choice(names)]
        elif op < 0.8:
            ns[f"n{rng.randrange(3000)}"] = value
        elif op < 0.88 and names:  # deleted and bound again to the same object: not a change
            name = rng.choice(names)
            ns[name] = ns.pop(name)
        elif op < 0.93 and names:  # the same name as another str object
            name = rng.choice(names)
            ns["".join(list(str(name)))] = ns.pop(name)
        elif op < 0.97:
            ns[rng.randrange(10)] = value  # a non-str key: the table changes kind
        elif op < 0.98:
            ns.clear()
        elif ns:  # the last slot is freed for the next name to take
            ns.popitem()


@pytest.mark.parametrize("seed", range(6))
def test_the_table_finds_exactly_what_the_plain_comparison_finds(seed: int):
    rng = random.Random(seed)
    for _ in range(25):  # bounded, seeded
        ns: dict[Any, Any] = {f"v{i}": object() for i in range(rng.choice([0, 1, 5, 300, 5000]))}
        watch = NamespaceWatch(ns)
        assert watch.reads_table
        watch.reset()
        keep: list[Any] = []
        for _cell in range(12):
            before = _ids(ns)
            _random_cell(rng, ns, keep)
            rebound, removed = watch.diff()
            now = _ids(ns)
            assert sorted(rebound, key=str) == sorted((k for k, v in now.items() if before.get(k) != v), key=str)
            assert sorted(removed, key=str) == sorted((k for k in before if k not in now), key=str)
            assert sorted(watch.names(), key=str) == sorted(ns, key=str)
            assert watch.reads_table  # never had to give up


@pytest.mark.parametrize("seed", range(4))
def test_the_listing_below_a_size_and_the_table_above_find_the_same(seed: int):
    """``table_from``: small namespaces are listed, larger ones read from the table; crossing the
    size either way (names added 30 at a time, deleted, cleared) hands the baseline over exactly."""
    rng = random.Random(100 + seed)
    for _ in range(12):  # bounded, seeded
        ns: dict[Any, Any] = {f"v{i}": object() for i in range(rng.choice([0, 5, 40, 300]))}
        watch = NamespaceWatch(ns, table_from=rng.choice([8, 30, 100]))
        watch.reset()
        keep: list[Any] = []
        for _cell in range(20):
            before = _ids(ns)
            _random_cell(rng, ns, keep)
            if rng.random() < 0.3:  # grow past the size, or shrink below it
                for _i in range(rng.choice([50, 150])):
                    ns[f"g{rng.randrange(100_000)}"] = obj = object()
                    keep.append(obj)
            elif rng.random() < 0.2:
                for name in list(ns)[: len(ns) * 3 // 4]:
                    del ns[name]
            rebound, removed = watch.diff()
            now = _ids(ns)
            assert sorted(rebound, key=str) == sorted((k for k, v in now.items() if before.get(k) != v), key=str)
            assert sorted(removed, key=str) == sorted((k for k in before if k not in now), key=str)
            assert sorted(watch.names(), key=str) == sorted(ns, key=str)
            assert all(watch.seen(k) for k in ns)


def test_a_slot_freed_by_popitem_and_taken_again():
    """popitem frees the last slot: the next name takes it (another key in the same slot)."""
    ns: dict[str, Any] = {"a": 1, "b": 2, "c": object()}
    watch = NamespaceWatch(ns)
    watch.reset()
    ns.popitem()
    ns["d"] = 4
    assert watch.diff() == (["d"], ["c"])
    ns.popitem()
    ns["d"] = 5  # the same name in the same slot, another value
    assert watch.diff() == (["d"], [])
    value = ns.popitem()[1]
    ns["d"] = value  # and the same object: nothing changed
    assert watch.diff() == ([], [])
    assert watch.reads_table


@pytest.mark.parametrize("switch_s", [0.005, 0.00001])
def test_another_thread_changing_the_dict_loses_nothing(switch_s: float):
    """A thread binds, rebinds and deletes (growing the table many times) while cells are diffed,
    with CPython's switch interval and with threads switching every 10 µs: no crash, and the names
    the diffs add up to are the dict's names once it stops."""
    ns: dict[str, Any] = {f"base{i}": i for i in range(2000)}
    watch = NamespaceWatch(ns)
    known = set(watch.reset())
    stop = threading.Event()

    def mutate() -> None:
        rng = random.Random(3)
        k = 0
        while not stop.is_set() and k < 2_000_000:  # bounded
            k += 1
            name = f"t{rng.randrange(50_000)}"
            if rng.random() < 0.3:
                ns.pop(name, None)
            else:
                ns[name] = k

    thread = threading.Thread(target=mutate, daemon=True)
    old_switch = sys.getswitchinterval()
    sys.setswitchinterval(switch_s)
    thread.start()
    try:
        for _ in range(400):
            rebound, removed = watch.diff()
            known |= set(rebound)
            known -= set(removed)
    finally:
        stop.set()
        thread.join(30)
        sys.setswitchinterval(old_switch)
    rebound, removed = watch.diff()
    known = (known | set(rebound)) - set(removed)
    assert known == set(ns)
    assert sorted(watch.names()) == sorted(ns)


def test_the_copy_cannot_fault():
    """Reading memory that is not mapped is refused, not a crash."""
    copy = dict_table._process_vm_copy()
    assert copy is not None
    dest = ctypes.create_string_buffer(64)
    area = mmap.mmap(-1, mmap.PAGESIZE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(area))
    assert copy(ctypes.addressof(dest), addr, 64) == 64
    area.close()  # unmapped
    assert copy(ctypes.addressof(dest), addr, 64) == -1
    assert copy(ctypes.addressof(dest), 0, 64) == -1
    assert copy(ctypes.addressof(dest), addr - 64, 128) in (-1, 64)  # up to the unmapped page at most


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_reads_its_own_table():
    """The copy keeps our pid (no system call a cell) and takes the child's after a fork: a child
    reading with the parent's pid would read the parent's unchanged table and see nothing."""
    ns: dict[str, Any] = {f"v{i}": object() for i in range(2000)}
    watch = NamespaceWatch(ns)
    watch.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running: the child only reads
        pid = os.fork()
    if pid == 0:
        code = 3
        try:
            ns["v7"] = object()  # in the child's memory only
            ns["fresh"] = 1
            code = 0 if watch.diff() == (["v7", "fresh"], []) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert watch.diff() == ([], [])  # the parent's table did not change


def test_an_unknown_layout_is_never_trusted(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(dict_table, "_COPY", [])
    monkeypatch.setattr(dict_table, "_HEADER", dict_table._HEADER + dict_table.WORD)  # as if the header grew
    assert dict_table.new_reader() is None
    ns = {"a": 1}
    watch = NamespaceWatch(ns)
    assert not watch.reads_table and watch.reset() == ["a"]


def test_a_table_disagreeing_with_the_listing_falls_back_to_listing(monkeypatch: pytest.MonkeyPatch):
    """Each cell whose new table disagrees with the listing is answered by the listing; three in a
    row, and the listing answers for good. Nothing is lost or invented on the way."""
    ns: dict[str, Any] = {f"v{i}": object() for i in range(100)}
    watch = NamespaceWatch(ns)
    watch.reset()
    monkeypatch.setattr(nswatch, "_slot_names", lambda *a: None)  # every new table looks wrong
    ns.update({f"w{i}": i for i in range(1000)})  # the table grows: a new one, checked, refused
    del ns["v3"]
    rebound, removed = watch.diff()
    assert set(rebound) == {f"w{i}" for i in range(1000)} and removed == ["v3"]
    assert watch.reads_table and "w5" in watch.names()
    ns["v4"] = "again"
    assert watch.diff() == (["v4"], [])
    assert watch.reads_table
    assert watch.diff() == ([], [])
    assert not watch.reads_table  # the third cell in a row
    del ns["v5"]
    assert watch.diff() == ([], ["v5"])


def test_a_kernel_hub_reads_the_table_and_sees_every_change():
    kernel = Kernel()
    try:
        kernel.load_hub()
        code = (
            "import mcp_notebook\n"
            "_w = mcp_notebook.hub().variables._watch\n"
            "for _i in range(100_000): globals()[f'n{_i}'] = _i\n"
        )
        kernel.run(code)
        kernel.run("n50000 = 'rebound'; del n7; n9 = n9")
        out = kernel.run(
            "_seen = dict(mcp_notebook.hub().variables.exposed_items())\n"
            "print(_w.reads_table, 'n7' in _seen, _seen['n50000'].__name__, _seen['n9'].__name__, len(_seen))"
        )
        assert out.stdout.split() == ["True", "False", "str", "int", "99999"]
        kernel.run("%config MCPHub.namespace_table_reads = False\n%reload_ext mcp_notebook")
        out = kernel.run("print(mcp_notebook.hub().variables._watch.reads_table)")
        assert out.stdout.split() == ["False"]
    finally:
        kernel.shutdown()
