"""Tool-only clients see in-place edits of what they read: the official SDK client calling tools
against a real kernel, in both eras, plus the watch bookkeeping (session end, idle expiry, LRU)."""

from __future__ import annotations

import json

import anyio
import pytest
from sdk import connect

from mcp_notebook.protocol.tool_watch import Facts, ToolWatches, change_line
from mcp_notebook.resources import Resources


def text_doc(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def watched(kernel) -> set[str]:
    out = kernel.run("import mcp_notebook as _m; print(sorted(_m.hub().resources.watched()))").stdout
    return set(eval(out.strip()))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_in_place_edit_of_a_frame_read_through_tools(kernel, hub, mode):
    pytest.importorskip("pandas")
    name = f"sales_{mode}"
    kernel.run(f"import pandas as pd; {name} = pd.DataFrame({{'region': ['a', 'b', 'c'], 'sales': [1.0, 2.0, 3.0]}})")

    async def go():
        async with connect(hub, mode) as (client, _):
            read = await client.call_tool("read_resource", {"uri": f"nb://frames/{name}?limit=2"})
            assert not read.is_error and "region" in read.content[0].text
            assert f"nb://frames/{name}" in await anyio.to_thread.run_sync(watched, kernel)
            await anyio.to_thread.run_sync(kernel.run, f"{name}['sales'] *= 1.5")
            # no cursor: changes since this client's first read; waits by default for the exact check
            doc = text_doc(await client.call_tool("changes_since", {}))
            assert f"nb://frames/{name}" in doc["changed"], doc
            line = next(s for s in doc["summary"] if s.startswith(f"nb://frames/{name}:"))
            assert "changed in place" in line and "DataFrame" in line and "(3, 2)" in line
            # a row appended in place: the shape before -> after
            await anyio.to_thread.run_sync(kernel.run, f"{name}.loc[3] = ['d', 4.0]")
            doc = text_doc(await client.call_tool("changes_since", {"cursor": doc["cursor"]}))
            line = next(s for s in doc["summary"] if s.startswith(f"nb://frames/{name}:"))
            assert "(3, 2) → shape (4, 2)" in line, line
            # rebinding the name to another type
            await anyio.to_thread.run_sync(kernel.run, f"{name} = [1, 2]")
            doc = text_doc(await client.call_tool("changes_since", {"cursor": doc["cursor"]}))
            line = next(s for s in doc["summary"] if s.startswith(f"nb://frames/{name}:"))
            assert "rebound" in line and "DataFrame" in line and "list len 2" in line, line
            quiet = text_doc(await client.call_tool("changes_since", {"cursor": doc["cursor"], "wait_seconds": 0}))
            assert quiet["changed"] == [] and "timed_out" not in quiet

        if mode == "legacy":  # the session ended (the SDK client sends DELETE): its watches are gone
            left = await anyio.to_thread.run_sync(watched, kernel)
            assert f"nb://frames/{name}" not in left

    anyio.run(go)


def test_unread_in_place_edits_are_not_tracked_but_rebinds_are(kernel, hub):
    kernel.run("untracked = [1, 2]")

    async def go():
        async with connect(hub, "auto") as (client, _):
            cursor = text_doc(await client.call_tool("changes_since", {"wait_seconds": 0}))["cursor"]
            await anyio.to_thread.run_sync(kernel.run, "untracked.append(3)")
            doc = text_doc(await client.call_tool("changes_since", {"cursor": cursor, "wait_seconds": 1}))
            assert "nb://vars/untracked" not in doc["changed"]
            await anyio.to_thread.run_sync(kernel.run, "untracked = {'now': 'a dict'}")
            doc = text_doc(await client.call_tool("changes_since", {"cursor": doc["cursor"]}))
            assert any(line.startswith("nb://vars/untracked: now dict len 1") for line in doc["summary"]), doc
            await anyio.to_thread.run_sync(kernel.run, "brand_new = (1, 2)\ndel untracked")
            doc = text_doc(await client.call_tool("changes_since", {"cursor": doc["cursor"]}))
            assert any(line.startswith("nb://vars/brand_new: added tuple len 2") for line in doc["summary"]), doc
            assert any(
                line.startswith("nb://vars/untracked: removed (or no longer exposed)") for line in doc["summary"]
            ), doc

    anyio.run(go)


def test_watch_bookkeeping_lru_idle_and_forget():
    hub = Resources()  # no providers: watch() of any URI just counts
    try:
        watches = ToolWatches(hub, idle_seconds=60, max_per_client=2)
        a = watches.client("client:a")
        for uri in ("test://1", "test://2", "test://1", "test://3"):
            watches.note_read(a, uri)
        assert hub.watched() == {"test://1", "test://3"}  # LRU: test://2 was the least recently read
        b = watches.client("client:b")
        watches.note_read(b, "test://1")
        watches.forget("client:a")
        assert hub.watched() == {"test://1"}  # still held by b
        watches.sweep(now=b.last_call + 61)
        assert hub.watched() == frozenset() and watches.counts() == (0, 0)
        watches.note_read(b, "test://9")  # a swept client's record no longer watches anything
        assert hub.watched() == frozenset()
        watches.close()
    finally:
        hub.close()


def test_change_lines():
    df = Facts("DataFrame", (3, 2), 1)
    assert change_line("nb://frames/df", df, Facts("DataFrame", (3, 2), 1), variable=True) == (
        "nb://frames/df: changed in place, DataFrame shape (3, 2)"
    )
    assert change_line("nb://vars/x", None, None, variable=True) == "nb://vars/x: removed (or no longer exposed)"
    assert change_line("nb://cells/3", None, None, variable=False) == "nb://cells/3: changed"


def test_magics_and_browser_say_what_they_show(kernel, hub):
    kernel.run("many = {f'v{i}': i for i in range(30)}; globals().update(many)")

    async def go():
        async with connect(hub, "auto") as (client, _):
            await client.call_tool("read_resource", {"uri": "nb://vars/v1"})
            text = (await anyio.to_thread.run_sync(kernel.run, "%mcp clients")).stdout
            assert "tool client client:" in text and "nb://vars/v1" in text
            status = (await anyio.to_thread.run_sync(kernel.run, "%mcp")).stdout
            assert "tool clients: " in status and "autoload: " in status

    anyio.run(go)
    summary = kernel.run("import mcp_notebook; print(mcp_notebook.browser().summary())").stdout
    assert "… showing 20 of " in summary


def test_in_place_edit_is_reported_without_waiting(kernel, hub):
    kernel.run("basket = ['apple', 'pear']")

    async def go():
        async with connect(hub, "legacy") as (client, _):
            await client.call_tool("read_resource", {"uri": "nb://vars/basket"})
            cursor = text_doc(await client.call_tool("changes_since", {"wait_seconds": 0}))["cursor"]
            await anyio.to_thread.run_sync(kernel.run, "basket.append('plum')")
            doc = text_doc(await client.call_tool("changes_since", {"cursor": cursor, "wait_seconds": 0}))
            assert any(
                line.startswith("nb://vars/basket: changed in place, list len 2 → len 3") for line in doc["summary"]
            ), doc

    anyio.run(go)
