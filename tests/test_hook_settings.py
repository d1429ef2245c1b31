"""Settings the post-cell hook reads every cell are kept as plain attributes (issue #48) and still
follow every change: a trait assigned later (``%config``) is what the next read sees, the name
filter is rebuilt, and the name verdicts it gave are forgotten."""

from __future__ import annotations

import threading

from mcp_notebook.budget import Limits
from mcp_notebook.inkernel.config import MCPHub
from mcp_notebook.providers.base import NO_CHANGE, ChangeSet, LazyProvider, Provider
from mcp_notebook.redact import ConfiguredNames, ExposureRules
from mcp_notebook.resources import Resources
from mcp_notebook.types import Contents


def test_a_trait_read_once_follows_every_later_assignment():
    cfg = MCPHub()
    limits = Limits(cfg)
    assert limits.max_cells == cfg.max_cells
    assert "max_cells" in vars(limits)  # kept: the next read is a plain attribute
    cfg.max_cells = 7
    assert limits.max_cells == 7 and limits.settings_version == 1
    cfg.max_cells = 7  # the same value: traitlets reports no change
    assert limits.max_cells == 7 and limits.settings_version == 1
    assert limits.max_read_chars == cfg.max_read_chars  # the scaled property still reads the base


def test_a_change_racing_a_read_on_another_thread_is_not_kept_stale():
    cfg = MCPHub()
    limits = Limits(cfg)
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            limits.switch_interval_us  # noqa: B018  # reads (and keeps) while the main thread assigns

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        for value in range(100, 400):  # bounded
            cfg.switch_interval_us = value
            assert limits.switch_interval_us == value
    finally:
        stop.set()
        t.join(5)
    assert limits.switch_interval_us == 399


def test_names_hidden_by_secret_words_follow_a_change_of_them():
    cfg = MCPHub()
    limits = Limits(cfg)
    names = ConfiguredNames(limits)
    rules = ExposureRules({}, names)
    first = names()
    assert names() is first  # nothing changed: the same filter, no rebuild
    assert rules.exposable("zebra_count", 3)
    cfg.secret_words = [*cfg.secret_words, "zebra"]
    assert names() is not first
    assert not rules.exposable("zebra_count", 3)  # the verdict remembered for the old filter is gone
    cfg.secret_words = [w for w in cfg.secret_words if w != "zebra"]
    assert rules.exposable("zebra_count", 3)


def test_no_change_is_shared_and_refuses_changes():
    assert NO_CHANGE == ChangeSet()
    for attempt in (
        lambda: setattr(NO_CHANGE, "list_changed", True),
        lambda: NO_CHANGE.updated.add("nb://vars/x"),  # type: ignore[attr-defined]
    ):
        try:
            attempt()
        except AttributeError:
            continue
        raise AssertionError("NO_CHANGE accepted a change")
    assert NO_CHANGE == ChangeSet()


class _Counting(Provider):
    """A provider with a compare of its own, counting the post-cell calls it gets."""

    uri_prefixes = ("count://",)

    def __init__(self) -> None:
        self.calls = 0

    def owns(self, uri: str) -> bool:
        return uri.startswith("count://")

    def read(self, uri: str) -> list[Contents]:
        return [Contents(uri=uri, text=str(self.calls))]

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        self.calls += 1
        return ChangeSet(updated={"count://x"} & watched)


class _Quiet(Provider):
    """A provider that keeps the base class's snapshot: nothing to compare."""

    uri_prefixes = ("quiet://",)

    def owns(self, uri: str) -> bool:
        return uri.startswith("quiet://")


def test_a_lazy_provider_costs_the_post_cell_hook_nothing_until_built():
    """Issue #48, fifth cut: an unbuilt lazy provider is not called after a cell at all; once built
    (on any thread), its real provider's compare is, from the next cell on; one that keeps the base
    snapshot never is; a lazy provider built before the hub has it is compared at once."""
    lazy = LazyProvider(("count://",), _Counting)
    spy: list[str] = []
    lazy.snapshot = lambda watched: spy.append("lazy") or NO_CHANGE  # type: ignore[method-assign]
    quiet = LazyProvider(("quiet://",), _Quiet)
    resources = Resources([lazy, quiet])
    for _ in range(3):
        resources.after_cell()
    assert spy == [] and not lazy.built and not quiet.built
    built = threading.Thread(target=lambda: resources.read("count://x"))  # built by a read, on another thread
    built.start()
    built.join(10)
    real = lazy.real()
    assert isinstance(real, _Counting) and real.calls == 0
    resources.watch("count://x")
    resources.after_cell()
    resources.after_cell()
    assert real.calls == 2 and spy == []  # the real provider's own compare, not the lazy wrapper's
    assert resources.journal.since(0)[0][-1][3] == ("count://x",)
    quiet.real()
    resources.after_cell()
    assert real.calls == 3 and _Quiet not in {type(p) for p in resources._snapshots}
    early = LazyProvider(("count://",), _Counting)
    early.real()
    again = Resources([early])
    again.after_cell()
    assert early.real().calls == 1  # type: ignore[attr-defined]


class _WatchedOnly(_Counting):
    """Reports only its watched URIs: nothing to say (and nothing kept) while none is watched."""

    snapshot_unwatched = False


def test_a_provider_that_reports_only_watched_uris_is_not_called_while_nothing_is_watched():
    """Issue #48, sixth cut: the kernel and notebook providers' kind (``snapshot_unwatched = False``)
    is skipped after a cell with nothing watched, called again once anything is, and reports then."""
    only, always = _WatchedOnly(), _Counting()
    resources = Resources([only, always])
    for _ in range(3):
        resources.after_cell()
    assert only.calls == 0 and always.calls == 3
    resources.watch("count://x")
    resources.after_cell()
    assert only.calls == 1 and always.calls == 4
    assert resources.journal.since(0)[0][-1][3] == ("count://x",)
    resources.unwatch("count://x")
    resources.after_cell()
    assert only.calls == 1 and always.calls == 5


def test_a_gated_listener_is_called_only_while_its_owner_has_someone_to_tell():
    """Issue #48, ninth cut: the server's and the tool watches' listeners are gated on their owners'
    containers (sessions and listen streams, watching clients): with all of them empty a change costs
    no call; with one filled (on any thread, without a lock) the next change reaches the listener; an
    ungated listener hears everything, and removing a listener removes only the first of equal ones."""
    sessions: dict[str, int] = {}
    listens: dict[int, int] = {}
    gated: list[tuple[str, tuple[str, ...]]] = []
    plain: list[tuple[str, tuple[str, ...]]] = []
    resources = Resources([_Counting()])
    resources.add_listener(lambda kind, uris: gated.append((kind, uris)), (sessions, listens))
    plain_listener = lambda kind, uris: plain.append((kind, uris))  # noqa: E731
    resources.add_listener(plain_listener)
    resources.add_listener(plain_listener)
    resources.changed(["count://a"], list_changed=True)
    assert gated == [] and len(plain) == 2  # list_changed told to both plain listeners
    listens[1] = 1  # a listen stream opened (by another thread, in the server)
    resources.changed([], list_changed=True)
    assert len(gated) == 1 and len(plain) == 4
    listens.clear()
    sessions["s"] = 1
    resources.changed([], list_changed=True)
    assert len(gated) == 2
    resources.remove_listener(plain_listener)
    resources.changed([], list_changed=True)
    assert len(plain) == 7  # one of the two equal listeners left
    sessions.clear()
    resources.changed([], list_changed=True)
    assert len(gated) == 3 and len(plain) == 8
