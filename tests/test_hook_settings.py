"""Settings the post-cell hook reads every cell are kept as plain attributes (issue #48) and still
follow every change: a trait assigned later (``%config``) is what the next read sees, the name
filter is rebuilt, and the name verdicts it gave are forgotten."""

from __future__ import annotations

import threading

from mcp_notebook.budget import Limits
from mcp_notebook.inkernel.config import MCPHub
from mcp_notebook.providers.base import NO_CHANGE, ChangeSet
from mcp_notebook.redact import ConfiguredNames, ExposureRules


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
