"""The post-cell hook's namespace comparison (postcell/nswatch.py, dict_table.py, nsdiff.py): every
way (the dict's own table, the listing with in-place pointers, the portable listing) finds exactly
what the plain dict comparison finds, and the hub still sees rebinding, mutation and deletion."""

from __future__ import annotations

import random
import struct
from types import SimpleNamespace
from typing import Any

import pytest

from mcp_notebook.postcell import nsdiff, nswatch
from mcp_notebook.postcell.nsdiff import WORD, Snapshot, changed_words, pointers
from mcp_notebook.providers.variables import VariablesProvider
from mcp_notebook.redact import DEFAULT_SECRET_WORDS, NameFilter
from mcp_notebook.resources import LIST_CHANGED, UPDATED, Resources


@pytest.fixture(params=["table", "in-place", "portable"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every way of reading the namespace: the dict's own entry table, the listing read from the
    list's own pointer array, and the listing through array(map(id, ...))."""
    if request.param == "table":
        if nswatch.new_reader() is None:
            pytest.skip("this interpreter's dict tables are not read directly")
        return request.param
    monkeypatch.setattr(nswatch, "new_reader", lambda: None)
    if request.param == "portable":
        monkeypatch.setattr(nsdiff, "_OFFSET", None)
    elif nsdiff._OFFSET is None:
        pytest.skip("this interpreter does not lay lists out as CPython does")
    return request.param


@pytest.mark.parametrize("size", [0, 1, 2, 63, 64, 65, 1000])
def test_pointers_are_the_ids_in_order(path: str, size: int):
    items = [object() for _ in range(size)]
    assert pointers(list(items)) == struct.pack(f"{size}P", *map(id, items))


def _brute(a: bytes, b: bytes) -> list[int]:
    n = min(len(a), len(b)) // WORD
    return [i for i in range(n) if a[i * WORD : (i + 1) * WORD] != b[i * WORD : (i + 1) * WORD]]


def test_changed_words_matches_a_word_by_word_comparison():
    rng = random.Random(26)
    for _ in range(300):  # bounded, seeded
        n = rng.choice([0, 1, 5, 63, 64, 65, 127, 128, 129, 1000, 4097])
        a = bytearray(rng.randbytes(n * WORD))
        b = bytearray(a)
        for _ in range(rng.choice([0, 1, 2, 5, 40, n])):
            if n:
                i = rng.randrange(n * WORD)  # a single byte anywhere in a word changes the word
                b[i] = (b[i] + 1) % 256
        b = b[: rng.choice([len(b), max(0, len(b) - WORD), len(b)])] + rng.randbytes(rng.choice([0, WORD, 3 * WORD]))
        assert changed_words(bytes(a), bytes(b)) == _brute(bytes(a), bytes(b))


def test_changed_words_with_words_that_changed_before_finds_the_same():
    """``near`` (last cell's changed words, compared first) is only a hint: right or wrong, in
    range or past the end, the answer is the word-by-word comparison's."""
    rng = random.Random(48)
    for _ in range(300):  # bounded, seeded
        n = rng.choice([1, 5, 64, 65, 200, 1000, 4097, 9000])
        a = bytearray(rng.randbytes(n * WORD))
        b = bytearray(a)
        for _ in range(rng.choice([0, 1, 3, 8])):
            i = rng.randrange(n * WORD)
            b[i] = (b[i] + 1) % 256
        truth = _brute(bytes(a), bytes(b))
        guess = rng.sample(range(n + 3), min(n + 3, rng.choice([0, 1, 4, 31])))
        near = sorted(set(guess) | (set(truth) if rng.random() < 0.5 else set()))
        assert changed_words(bytes(a), bytes(b), None, near) == truth
        assert changed_words(bytes(a), bytes(b), n // 2, near) == [w for w in truth if w < n // 2]


def test_changed_words_with_hints_close_together_unsorted_or_repeated_finds_the_same():
    """The hinted words are walked in order, each and each span between two one memcmp (issue #48, ninth
    cut): a change next to a hinted word, between two, or in a run of them is found, and hints out of
    order or repeated change nothing in the answer."""
    rng = random.Random(4809)
    for _ in range(400):  # bounded, seeded
        n = rng.choice([3, 16, 70, 300, 5000])
        a = bytearray(rng.randbytes(n * WORD))
        b = bytearray(a)
        base = rng.randrange(n)
        for _ in range(rng.choice([0, 1, 2, 6])):  # changes among and next to the hints
            i = min(n - 1, base + rng.randrange(12)) * WORD + rng.randrange(WORD)
            b[i] = (b[i] + 1) % 256
        truth = _brute(bytes(a), bytes(b))
        near = [min(n + 2, base + rng.randrange(0, 20, 2)) for _ in range(rng.choice([1, 3, 5]))]
        if rng.random() < 0.5:
            near.sort()
        assert changed_words(bytes(a), bytes(b), None, near) == truth
        assert changed_words(bytes(a), bytes(b), None, sorted(set(near))) == truth


def _reference(prev: dict[str, int], cur: dict[str, int]) -> tuple[set[str], set[str]]:
    """The plain comparison: names whose value id differs or that are new, names gone."""
    return {k for k, v in cur.items() if prev.get(k) != v}, set(prev) - set(cur)


def _ids(ns: dict[str, Any]) -> dict[str, int]:
    return {k: id(v) for k, v in ns.items()}


def test_snapshot_diff_matches_the_plain_comparison(path: str):
    rng = random.Random(7)
    shared = [None, True, 0, "x"]  # the same object under many names: shifts that look alike
    for _ in range(60):  # bounded, seeded: random cells over one namespace
        ns: dict[str, Any] = {f"v{i}": rng.choice(shared) if rng.random() < 0.5 else object() for i in range(300)}
        snap = Snapshot.take(ns)
        for _cell in range(8):
            before = _ids(ns)
            keep = list(ns.values())  # the old values stay alive: no address is reused in this test
            for _op in range(rng.choice([0, 1, 3, 20])):
                op = rng.random()
                names = list(ns)
                if op < 0.3 and names:
                    ns[rng.choice(names)] = rng.choice(shared) if rng.random() < 0.5 else object()
                elif op < 0.5 and names:
                    del ns[rng.choice(names)]
                elif op < 0.7:
                    ns[f"n{rng.randrange(400)}"] = rng.choice(shared)
                elif op < 0.85 and names:  # deleted and bound again: it moves to the end
                    name = rng.choice(names)
                    value = ns.pop(name)
                    ns[name] = value
                elif names:  # the same name as another str object
                    name = rng.choice(names)
                    value = ns.pop(name)
                    ns["".join(list(name))] = value
            cur = Snapshot.take(ns)
            rebound, removed = cur.diff(snap)
            want_rebound, want_removed = _reference(before, _ids(ns))
            assert set(removed) == want_removed
            assert want_rebound <= set(rebound)
            # A name that moved (deleted, bound again) may be reported even with the same value: never fewer.
            assert set(rebound) - want_rebound <= {k for k in ns if list(before).count(k)}
            snap = cur
            del keep


def test_delete_and_add_with_identical_values_is_seen(path: str):
    """Values alone cannot tell [a, b, c] from [b, d, c] when every value is None: names are compared too."""
    ns: dict[str, Any] = {"a": None, "b": None, "c": None}
    snap = Snapshot.take(ns)
    del ns["a"]
    del ns["c"]
    ns["d"] = None
    ns["c"] = None
    rebound, removed = Snapshot.take(ns).diff(snap)
    assert removed == ["a"] and "d" in rebound


def _provider(ns: dict[str, Any]) -> tuple[VariablesProvider, Resources]:
    limits = SimpleNamespace(max_read_chars=60_000, repr_timeout=2.0)
    variables = VariablesProvider(ns, {}, lambda: NameFilter(DEFAULT_SECRET_WORDS, [], []), limits)
    return variables, Resources([variables])


@pytest.mark.parametrize("size", [10, 100_000])
def test_the_hub_sees_rebinding_mutation_and_deletion(path: str, size: int):
    ns: dict[str, Any] = {f"v{i}": i * 7 + 1000 for i in range(size)}
    ns.update(watched=[1, 2], deep={"k": 1}, gone=1, kept=2)
    variables, hub = _provider(ns)
    seen: list[tuple[str, tuple[str, ...]]] = []
    hub.add_listener(lambda kind, uris: seen.append((kind, tuple(uris))))
    for uri in ("nb://vars/watched", "nb://vars/deep", "nb://vars/kept", f"nb://vars/v{size // 2}"):
        hub.watch(uri)
    hub.after_cell()
    assert hub.drain()
    seen.clear()

    def cell() -> set[str]:
        seen.clear()
        hub.after_cell()
        assert hub.drain()
        return {u for kind, uris in seen if kind == UPDATED for u in uris}

    ns[f"v{size // 2}"] = "rebound"  # a rebinding deep in the namespace
    assert f"nb://vars/v{size // 2}" in cell()
    ns["watched"].append(3)  # in place, and the length moves
    assert "nb://vars/watched" in cell()
    ns["deep"]["k"] = 2  # in place, same length: the exact check finds it
    assert "nb://vars/deep" in cell()
    del ns["gone"]
    assert cell() == set() and any(kind == LIST_CHANGED for kind, _ in seen)
    assert "gone" not in variables.exposed_names()
    del ns["kept"]  # a watched name deleted
    assert "nb://vars/kept" in cell()
    assert cell() == set()  # nothing changed: nothing announced


def test_a_watched_scalar_rebound_at_its_old_address_is_seen(path: str):
    """``f = f * 2`` twice puts a new float where the old one was (the allocator reuses the freed
    block): the snapshot sees the same address, the watched scalar's check must still see it."""
    ns: dict[str, Any] = {"f": 1.5, "other": 1}
    _, hub = _provider(ns)
    seen: list[tuple[str, tuple[str, ...]]] = []
    hub.add_listener(lambda kind, uris: seen.append((kind, tuple(uris))))
    hub.watch("nb://vars/f")
    hub.after_cell()
    assert hub.drain()
    for _ in range(20):  # without a held baseline the old float is freed and its block reused
        seen.clear()
        for _ in range(2):
            ns["f"] = ns["f"] * 2
        hub.after_cell()
        assert hub.drain()
        assert "nb://vars/f" in {u for kind, uris in seen if kind == UPDATED for u in uris}
