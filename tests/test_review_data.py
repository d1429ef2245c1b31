"""Regression tests from a review of the data side: change detection, guarded user code, secrets."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import numpy as np
import pandas as pd

from mcp_notebook.capture import CellCapture
from mcp_notebook.inkernel.config import MCPHub
from mcp_notebook.providers.base import ResourceReadError
from mcp_notebook.providers.cells import CellsProvider
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.providers.frames.provider import FramesProvider
from mcp_notebook.providers.variables import VariablesProvider
from mcp_notebook.redact import NameFilter
from mcp_notebook.resources import UPDATED, Resources

GH_TOKEN = "ghp_" + "A1b2C3d4E5" * 4  # credential-shaped (GitHub), 44 characters


def _filter() -> NameFilter:
    cfg = MCPHub()
    return NameFilter(cfg.secret_words, cfg.include_names, cfg.exclude_names)


def _hub(ns: dict) -> tuple[Resources, VariablesProvider, list]:
    limits = MCPHub()
    variables = VariablesProvider(ns, {}, _filter, limits)
    frames = FramesProvider(variables, limits)
    variables.rows.register(frames.rows_serve, frames.index_links)  # wired as the kernel's hub wires them
    variables.reprs.register(frames.reprs_serve, frames.engine_repr)
    hub = Resources([variables, frames])
    events: list = []
    hub.add_listener(lambda kind, uris: events.append((kind, uris)))
    return hub, variables, events


def _updated(events: list) -> set[str]:
    return {u for kind, uris in events if kind == UPDATED for u in uris}


def _run_guarded_read(fn) -> tuple[threading.Thread, dict]:
    """Run ``fn`` on a thread; the caller checks it finished (a hang shows as a live thread)."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    return t, box


# -- change detection -------------------------------------------------------------------------
def test_watched_frame_with_nan_column_labels_settles():
    """A NaN column label compares unequal to itself: the fingerprint must not say "changed" every cell."""
    ns = {"df": pd.DataFrame(np.zeros((3, 3)), columns=[1.0, np.nan, 2.0])}
    hub, _, events = _hub(ns)
    try:
        hub.after_cell()
        hub.watch("nb://frames/df")
        for _ in range(3):
            hub.after_cell()
        assert hub.drain()
        assert "nb://frames/df" not in _updated(events)
        ns["df"].iloc[0, 0] = 5.0  # a real change is still seen
        hub.after_cell()
        assert hub.drain()
        assert "nb://frames/df" in _updated(events)
    finally:
        hub.close()


def test_hide_inside_a_cell_keeps_the_cells_other_changes():
    """``%mcp hide y`` after ``x = ...`` in one cell: x's rebinding is still reported after the cell."""
    ns = {"x": 1, "y": 2}
    hub, variables, events = _hub(ns)
    try:
        hub.after_cell()
        events.clear()
        ns["x"] = [1, 2, 3]  # the cell rebinds x ...
        variables.set_hidden("y", True)  # ... then runs %mcp hide y
        hub.after_cell()
        journal, _ = hub.journal.since(0)
        seen = {u for _, _, kind, uris, _ in journal if kind == UPDATED for u in uris}
        assert "nb://vars/x" in seen
        assert "y" not in variables.exposed_names()
    finally:
        hub.close()


# -- user code on the request path ------------------------------------------------------------
class _Gate:
    """Blocks user code until the test releases it (so a missing guard shows as a hang, not a delay)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def wait(self) -> None:
        self.event.wait(60)


def test_custom_resource_result_conversion_is_guarded():
    gate = _Gate()

    class Slow:
        def __str__(self) -> str:
            gate.wait()
            return "slow"

    provider = CustomProvider()
    provider.register(
        make_registration(
            "demo://slow",
            lambda: Slow(),
            name=None,
            title=None,
            description=None,
            mime_type=None,
            annotations=None,
            timeout=0.5,
        )
    )
    try:
        t, box = _run_guarded_read(lambda: provider.read("demo://slow"))
        assert not t.is_alive(), "str() of a resource function's result ran unguarded"
        assert isinstance(box.get("error"), ResourceReadError)
    finally:
        gate.event.set()


def test_custom_completer_is_guarded():
    gate = _Gate()

    def completer(value: str) -> list[str]:
        gate.wait()
        return ["a"]

    provider = CustomProvider()
    provider.register(
        make_registration(
            "demo://items/{item}",
            lambda item: item,
            name=None,
            title=None,
            description=None,
            mime_type=None,
            annotations=None,
            complete={"item": completer},
            timeout=0.5,
        )
    )
    try:
        t, box = _run_guarded_read(lambda: provider.complete("demo://items/{item}", "item", "", {}))
        assert not t.is_alive(), "a user completer ran unguarded on the request thread"
        assert box.get("value") == []
    finally:
        gate.event.set()


def test_message_of_an_exception_from_user_repr_is_guarded():
    gate = _Gate()

    class Odd(Exception):
        def __str__(self) -> str:
            gate.wait()
            return "odd"

    class Broken:
        def __repr__(self) -> str:
            raise Odd()

    ns = {"thing": Broken()}
    hub, _, _ = _hub(ns)
    hub._providers[0]._limits.repr_timeout = 0.5
    try:
        t, box = _run_guarded_read(lambda: hub.read("nb://vars/thing"))
        assert not t.is_alive(), "str() of an exception raised by user code ran unguarded"
        assert isinstance(box.get("error"), ResourceReadError)
        assert "Odd" in str(box["error"])
    finally:
        gate.event.set()
        hub.close()


# -- secrets ----------------------------------------------------------------------------------
def test_frame_pages_and_schema_mask_credentials():
    ns = {"accounts": pd.DataFrame({"user": ["ann", "bob"], "note": [f"uses {GH_TOKEN}", "none"]})}
    hub, _, _ = _hub(ns)
    try:
        hub.after_cell()
        for uri in ("nb://frames/accounts", "nb://frames/accounts?format=json", "nb://frames/accounts/schema"):
            text = "".join(c.text or "" for c in hub.read(uri))
            assert GH_TOKEN[:12] not in text, uri
            assert "[REDACTED]" in text, uri
    finally:
        hub.close()


def test_cell_previews_and_titles_mask_before_cutting():
    """A token straddling a preview cut must not leak its first characters."""
    capture = CellCapture(None, MCPHub())
    capture._active = True
    line = "x" * 45 + f" = '{GH_TOKEN}'"  # the 60-char title cut falls inside the token
    capture.pre_run_cell(SimpleNamespace(raw_cell=line + "\n", store_history=True, cell_id=None))
    capture.add_stream("stdout", "y" * 289 + " " + GH_TOKEN)  # the 300-char preview cut falls inside it
    capture.add_error("ValueError", "z" * 289 + " " + GH_TOKEN, [])
    capture.post_run_cell(None)
    cells = CellsProvider(capture, MCPHub())
    listed = json.dumps([r.title for r in cells.list_resources()])
    doc = cells.read("nb://cells/1")[0].text
    index = cells.read("nb://cells")[0].text
    for text in (listed, doc, index):
        assert GH_TOKEN[:8] not in text


def test_vars_repr_masks_a_token_cut_at_the_read_limit():
    limits = MCPHub()
    limits.max_read_chars = 1200  # repr budget: 200 characters
    ns = {"notes": ["n" * 170, GH_TOKEN]}  # the 200-char cut falls inside the token
    variables = VariablesProvider(ns, {}, _filter, limits)
    doc = json.loads(variables.read("nb://vars/notes")[0].text)
    assert GH_TOKEN[:8] not in doc["repr"]
