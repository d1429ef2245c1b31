"""nb://notebook/active without a kernel: the provider alone (what the comm feeds it)."""

from __future__ import annotations

import json
from typing import Any

from mcp_notebook.inkernel.config import MCPHub
from mcp_notebook.providers.notebook import ACTIVE_URI, NotebookProvider


def read(p: NotebookProvider, uri: str = ACTIVE_URI) -> dict[str, Any]:
    return json.loads(p.read(uri)[0].text)


def provider(executed: dict[str, int] | None = None) -> tuple[NotebookProvider, list[list[str]]]:
    seen: list[list[str]] = []
    p = NotebookProvider(lambda: None, MCPHub(), (executed or {}).get)
    p.watched = lambda: frozenset({ACTIVE_URI, "nb://notebook"})
    p.changed = lambda uris: seen.append(sorted(uris))
    return p, seen


def doc(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": list(cells)}


def test_without_a_frontend_it_says_so():
    p, _ = provider()
    out = read(p)
    assert out["available"] is False and "JupyterLab" in out["hint"]
    assert ACTIVE_URI in {r.uri for r in p.list_resources()}


def test_active_and_selected_resolve_against_the_pushed_document():
    p, seen = provider({"c1": 3})
    p.set_document(
        doc(
            {"id": "m", "cell_type": "markdown", "source": "# Notes", "metadata": {}},
            {
                "id": "c1",
                "cell_type": "code",
                "source": "key = 'sk-ant-api03-" + "x" * 40 + "'",
                "execution_count": 3,
                "metadata": {},
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "ok\n"}],
            },
        ),
        source="jupyterlab",
    )
    p.set_active("c1", ["m", "c1", "gone", 7], source="jupyterlab")  # non-strings are dropped
    out = read(p)
    assert out["available"] is True and out["source"] == "jupyterlab"
    assert out["active"]["executed"] == "nb://cells/3" and out["active"]["outputs"][0]["text"] == "ok\n"
    assert "sk-ant-api03" not in json.dumps(out)  # credentials masked as everywhere else
    assert [c["id"] for c in out["selected"]] == ["m", "c1", "gone"]
    assert out["selected"][2]["missing"] and out["selected"][0]["cell_type"] == "markdown"
    assert [ACTIVE_URI] in seen


def test_same_active_cell_again_notifies_nobody_and_clear_forgets_it():
    p, seen = provider()
    p.set_active("a", ["a"])
    p.set_active("a", ["a"])
    assert seen.count([ACTIVE_URI]) == 1
    p.clear_document()
    assert read(p)["available"] is False


def test_large_selections_are_bounded():
    p, _ = provider()
    cells = [
        {"id": f"c{i}", "cell_type": "code", "source": "x" * 5000, "metadata": {}, "outputs": []} for i in range(80)
    ]
    p.set_document(doc(*cells))
    p.set_active("c0", [f"c{i}" for i in range(80)])
    text = p.read(ACTIVE_URI)[0].text
    assert len(json.loads(text)["selected"]) == 50
    assert len(text) <= MCPHub().max_read_chars + 5000
