"""Every reply within a host's budget, measured on the wire (issue #35).

A real kernel holds the largest values of every kind (a big frame, a 2,500-column frame, strings
full of quotes, newlines and non-ASCII so JSON escaping expands them, a dict of 100,000 keys, a
cell printing a megabyte, long tracebacks, a notebook of 300 big cells, 1,300 variables rebound at
once, user resources returning or raising huge texts). Each resource is read and each tool called
in both eras, with and without MCP Apps, over raw HTTP; the serialized ``result`` must fit
``RESULT_CHARS`` and an error ``ERROR_CHARS``. Following next links and cursors must give everything.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import Mcp
from kernel_harness import Kernel
from test_apps_protocol import Wire

from mcp_notebook import budget
from mcp_notebook.allkernels.directory import LocalDirectory
from mcp_notebook.allkernels.front import KernelsFront
from mcp_notebook.protocol.tools import _page_of

RESULT_CHARS = 50_000
ERROR_CHARS = 10_000
TRICKY = 'say "hi"\\n\n\té中\u2028'  # quotes, backslashes, newlines, tabs, non-ASCII: escaping expands it
N_VARS = 1300
SETUP = f"""
import pandas as pd, numpy as np, mcp_notebook
TRICKY = {TRICKY!r}
big_df = pd.DataFrame({{'id': np.arange(20000), 'text': [TRICKY * 3 + str(i) for i in range(20000)],
                       'x': np.linspace(0, 1, 20000)}})
wide_df = pd.DataFrame(np.arange(10 * 2500).reshape(10, 2500), columns=[f'col "{{i}}" é' for i in range(2500)])
long_s = TRICKY * 40000
huge_d = {{f'key "{{i}}"\\n': TRICKY for i in range(100000)}}
records = [{{'q': TRICKY, 'i': i}} for i in range(20000)]
@mcp_notebook.resource('app://big', mime_type='text/plain')
def _big():
    return TRICKY * 30000
@mcp_notebook.resource('app://bad')
def _bad():
    raise ValueError('bad ' + TRICKY * 20000)
for _i in range({N_VARS}):
    globals()[f'v{{_i}}'] = _i
for _i in range(150):
    globals()['long_' + 'n' * 990 + str(_i)] = _i
"""


def wire(value: Any) -> int:
    """Characters of ``value`` as the hub serializes it (compact JSON, non-ASCII kept)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def test_cut_text_counts_escaping():
    text = '"\n\\é' * 50_000
    cut = budget.cut_text(text, 10_000, " [cut]")
    assert budget.wire_chars(cut) <= 10_000 and cut.endswith(" [cut]") and text.startswith(cut[: -len(" [cut]")])
    assert len(cut) < 10_000 / 1.5  # the escaped size was measured, not the string's length


def test_fit_lowers_the_scale_until_it_fits():
    seen: list[float] = []

    def build() -> str:
        seen.append(budget.scale())
        return "x" * budget.scaled(200_000)

    value, size = budget.fit(build, 50_000)
    assert size == budget.wire_chars(value) <= 50_000 and seen[0] == 1.0 and len(seen) >= 2
    assert budget.scale() == 1.0  # the scale holds for the call only


def test_fit_gets_past_a_count_clipped_by_what_is_left():
    """26 items of 3,000 characters left on the last page: scaling 100 down to 72, 52… changes nothing
    until the count drops under 26; the loop must keep going instead of cutting."""
    value, size = budget.fit(lambda: "x" * (min(budget.scaled(100), 26) * 3000), 49_000)
    assert size <= 49_000 and len(value) >= 3000


def test_errors_are_cut_to_their_budget():
    err = budget.bounded_error({"code": -32603, "message": '"' * 50_000, "data": {"uri": "q" * 20_000, "n": 1}})
    assert budget.wire_chars(err) <= budget.ERROR_CHARS and err["data"]["n"] == 1 and err["message"].endswith("]")


def test_changes_pages_split_an_entry_and_lose_nothing():
    entries = [(1, 0.0, "updated", tuple(f"u{i}" for i in range(5)), 7), (2, 0.0, "updated", ("a", "b"), None)]
    got, seq, skip = [], 0, 0
    for _ in range(20):
        page, more, (seq, skip) = _page_of([e for e in entries if e[0] > seq], seq, skip, 3, 200)
        got += [u for e in page for u in e[3]]
        assert all(len(e) == 5 and e[4] == {1: 7, 2: None}[e[0]] for e in page)  # each piece keeps its cell
        if not more:
            break
    assert got == [*(f"u{i}" for i in range(5)), "a", "b"]


def make_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    for i in range(300):
        cell = nbformat.v4.new_code_cell(f"# cell {i}\n" + TRICKY * 100, execution_count=i + 1)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=TRICKY * 500)]
        nb.cells.append(cell)
    nbformat.write(nb, str(path))


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runtime")


@pytest.fixture(scope="module")
def kernel(runtime: Path) -> Iterator[Kernel]:
    """The module's kernel, in a runtime dir of its own (the all-kernels front finds it there)."""
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
    try:
        yield k
    finally:
        k.shutdown()


@pytest.fixture(scope="module")
def hub(kernel: Kernel, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("nb") / "big.ipynb"
    make_notebook(path)
    info = kernel.load_hub(f"%config MCPHub.notebook_path = {str(path)!r}")
    kernel.run(SETUP)
    kernel.run("print(TRICKY * 70000)")  # a cell with a big output
    kernel.run("def deep(n):\n    return deep(n - 1) if n else 1 / 0\ndeep(900)", check=False)
    kernel.run("raise ValueError('long ' + TRICKY * 20000)", check=False)
    kernel.run(
        "from IPython.display import display as _d; import base64 as _b, random as _r\n"
        "_d({'image/png': _b.b64encode(b'\\x89PNG\\r\\n\\x1a\\n' + _r.Random(1).randbytes(150_000)).decode()}, raw=True)"
    )
    return info


@pytest.fixture(scope="module")
def seqs(hub: dict[str, Any]) -> dict[str, int]:
    """The seq numbers of the big cells (from nb://cells)."""
    client = Mcp(hub)
    client.initialize()
    index = json.loads(client.result("resources/read", {"uri": "nb://cells?limit=100"})["contents"][0]["text"])
    cells = index["cells"]
    found = {}
    for row in cells:
        source = row["first_line"]
        if "print(TRICKY" in source:
            found["output"] = row["seq"]
        elif source.startswith("def deep"):
            found["deep"] = row["seq"]
        elif "raise ValueError" in source:
            found["raise"] = row["seq"]
        elif source.startswith("from IPython.display"):
            found["image"] = row["seq"]
    assert set(found) == {"output", "deep", "raise", "image"}, cells
    return found


def reads(seqs: dict[str, int]) -> list[str]:
    out, deep, bad = seqs["output"], seqs["deep"], seqs["raise"]
    return [
        "nb://kernel",
        "nb://vars",
        "nb://vars/long_s",
        "nb://vars/huge_d",
        "nb://vars/records",
        "nb://vars/big_df",
        "nb://vars/wide_df",
        "nb://frames/big_df",
        "nb://frames/big_df?format=json&limit=10000",
        "nb://frames/big_df?format=markdown&limit=10000",
        "nb://frames/big_df/schema",
        "nb://frames/wide_df",
        "nb://frames/wide_df?format=json",
        "nb://frames/wide_df/schema",
        "nb://cells",
        f"nb://cells/{out}",
        f"nb://cells/{out}/outputs/0",
        f"nb://cells/{deep}",
        f"nb://cells/{deep}/outputs/0",
        f"nb://cells/{bad}",
        f"nb://cells/{bad}/outputs/0",
        "nb://notebook",
        "app://big",
    ]


CLIENTS = [("handshake", False), ("handshake", True), ("stateless", False), ("stateless", True)]


@pytest.fixture(params=CLIENTS, ids=[f"{e}-{'apps' if a else 'plain'}" for e, a in CLIENTS])
def client(request, hub) -> Wire:
    era, apps = request.param
    return Wire(hub, era, apps)


def result_size(reply: dict[str, Any]) -> int:
    if "error" in reply:
        size = wire(reply["error"])
        assert size <= ERROR_CHARS, (size, str(reply["error"])[:300])
        return size
    size = wire(reply["result"])
    if reply["result"].get("isError"):
        assert size <= ERROR_CHARS, size
    return size


def test_every_resource_read_fits(client, seqs):
    sizes = {}
    for uri in reads(seqs):
        reply = client.call("resources/read", {"uri": uri})
        assert "result" in reply, (uri, str(reply)[:300])
        sizes[uri] = result_size(reply)
    print("resources/read", client.era, client.apps, sizes)
    assert max(sizes.values()) <= RESULT_CHARS, sizes


def test_every_read_through_the_tool_fits(client, seqs):
    sizes = {}
    for uri in reads(seqs):
        reply = client.call("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
        assert "result" in reply and not reply["result"].get("isError"), (uri, str(reply)[:300])
        sizes[uri] = result_size(reply)
        if client.apps:  # the text is sent once: content for the model, structuredContent says where it is
            assert "structuredContent" in reply["result"], (uri, sizes[uri])
            structured = reply["result"]["structuredContent"]["contents"]
            assert all("text" not in c and "content" in c for c in structured), uri
    print("read_resource", client.era, client.apps, sizes)
    assert max(sizes.values()) <= RESULT_CHARS, sizes


def test_every_tool_fits(client, seqs):
    calls = [
        ("list_resources", {}),
        ("changes_since", {"wait_seconds": 0}),
    ]
    if client.apps:
        calls += [
            ("explore_frame", {"name": "wide_df"}),
            ("explore_frame", {"name": "big_df"}),
            ("show_outputs", {"cell": seqs["output"]}),
            ("show_outputs", {"cell": seqs["deep"]}),
            ("show_outputs", {"cell": seqs["raise"]}),
            ("watch_changes", {}),
        ]
    sizes = {}
    for name, args in calls:
        reply = client.call("tools/call", {"name": name, "arguments": args})
        assert "result" in reply and not reply["result"].get("isError"), (name, str(reply)[:300])
        sizes[f"{name} {args}"] = result_size(reply)
        if args.get("name") == "wide_df":  # a wide table: the columns shown are bounded, the rest a read away
            assert "?columns=" in reply["result"]["content"][0]["text"]
    print("tools", client.era, client.apps, sizes)
    assert max(sizes.values()) <= RESULT_CHARS, sizes


def test_errors_fit_their_budget(client):
    """A resource raising a huge message, a tool given a huge URI, an unknown huge URI: each error
    (JSON-RPC or isError) fits ERROR_CHARS."""
    replies = [
        client.call("resources/read", {"uri": "app://bad"}),
        client.call("resources/read", {"uri": "nb://vars/" + 'q"' * 4000}),
        client.call("tools/call", {"name": "read_resource", "arguments": {"uri": "app://bad"}}),
        client.call("tools/call", {"name": "read_resource", "arguments": {"uri": "nb://vars/" + 'q"' * 4000}}),
        client.call("tools/call", {"name": "changes_since", "arguments": {"cursor": "x" * 8000}}),
    ]
    sizes = [result_size(reply) for reply in replies]
    assert all("error" in r or r["result"].get("isError") for r in replies), [str(r)[:200] for r in replies]
    assert "bad say" in json.dumps(replies[0]) and max(sizes) <= ERROR_CHARS, sizes


def test_changes_since_pages_1200_rebinds_with_a_cursor(client, kernel):
    start = client.call("tools/call", {"name": "changes_since", "arguments": {"wait_seconds": 0}})["result"]
    cursor = (
        json.loads(start["content"][0]["text"])["cursor"] if not client.apps else start["structuredContent"]["cursor"]
    )
    kernel.run("for _i in range(1200):\n    globals()[f'v{_i}'] = str(_i) * 40")
    seen: set[str] = set()
    sizes = []
    for _ in range(200):
        reply = client.call("tools/call", {"name": "changes_since", "arguments": {"cursor": cursor, "wait_seconds": 5}})
        sizes.append(result_size(reply))
        result = reply["result"]
        doc = result["structuredContent"] if client.apps else json.loads(result["content"][0]["text"])
        if client.apps:  # the model's text is the summary, not the document again
            assert (
                result["content"][0]["text"].startswith(doc["summary"][0])
                and "cursor: " in result["content"][0]["text"]
            )
        seen |= set(doc["changed"])
        cursor = doc["cursor"]
        if not doc.get("more"):
            break
    print("changes_since pages", client.era, client.apps, len(sizes), max(sizes))
    assert {f"nb://vars/v{i}" for i in range(1200)} <= seen
    assert len(sizes) > 1 and max(sizes) <= RESULT_CHARS, sizes


def test_list_pages_shrink_and_lose_nothing(client):
    listed, cursor, sizes = [], None, []
    for _ in range(100):
        reply = client.call("resources/list", {"cursor": cursor} if cursor else {})
        sizes.append(result_size(reply))
        listed += [r["uri"] for r in reply["result"]["resources"]]
        cursor = reply["result"].get("nextCursor")
        if not cursor:
            break
    tool, cursor = [], None
    for _ in range(200):
        reply = client.call("tools/call", {"name": "list_resources", "arguments": {"cursor": cursor} if cursor else {}})
        sizes.append(result_size(reply))
        doc = json.loads(reply["result"]["content"][0]["text"])
        tool += [r["uri"] for r in doc["resources"]]
        cursor = doc.get("nextCursor")
        if not cursor:
            break
    assert len(listed) > N_VARS and tool == [u for u in listed if not u.startswith("ui://")]  # (views: listed only)
    assert max(sizes) <= RESULT_CHARS, sizes


def test_following_next_links_reads_every_row(hub):
    client = Wire(hub, "stateless", apps=False)
    uri, ids, sizes = "nb://frames/big_df?format=json&limit=10000", [], []
    for _ in range(500):
        reply = client.call("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
        sizes.append(result_size(reply))
        rows, info = (json.loads(c["text"]) for c in reply["result"]["content"][:2])
        ids += [row["id"] for row in rows]
        uri = info.get("next")
        if not uri:
            break
    assert ids == list(range(20000)) and max(sizes) <= RESULT_CHARS, max(sizes)


@pytest.fixture(scope="module")
def front(runtime: Path, hub: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The all-kernels front over this kernel's runtime dir: URIs qualified, so results grow."""
    served = KernelsFront(LocalDirectory(runtime))
    url = served.serve_http()
    yield {"url": url, "token": served.settings.token, "runtime": runtime}
    served.close()


@pytest.mark.parametrize("era,apps", [("stateless", False), ("handshake", True)])
def test_through_the_all_kernels_front(front, seqs, era, apps):
    client = Wire(front, era, apps)
    sizes = {}
    for uri in ["nb://vars", "nb://frames/wide_df/schema", "nb://notebook", f"nb://cells/{seqs['output']}/outputs/0"]:
        sizes[uri] = result_size(client.call("resources/read", {"uri": uri}))
        reply = client.call("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
        sizes["tool " + uri] = result_size(reply)
    listed, cursor = [], None
    for _ in range(200):
        reply = client.call("tools/call", {"name": "list_resources", "arguments": {"cursor": cursor} if cursor else {}})
        sizes[f"list_resources {len(listed)}"] = result_size(reply)
        doc = json.loads(reply["result"]["content"][0]["text"])
        listed += [r["uri"] for r in doc["resources"]]
        cursor = doc.get("nextCursor")
        if not cursor:
            break
    print("front", era, apps, sizes)
    assert len([u for u in listed if u.startswith("nb://kernels/")]) > N_VARS
    assert max(sizes.values()) <= RESULT_CHARS, sizes


def test_the_all_kernels_bridge_on_stdio(front):
    """The stdio bridge (all kernels): the first list_resources page, raw JSON lines in and out."""
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(front["runtime"])}
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_resources", "arguments": {}}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "read_resource", "arguments": {"uri": "nb://vars"}},
        },
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_notebook", "bridge"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    replies = {m.get("id"): m for m in map(json.loads, proc.stdout.splitlines()) if "id" in m}
    sizes = [result_size(replies[2]), result_size(replies[3])]
    assert "nb://kernels/" in replies[2]["result"]["content"][0]["text"]
    assert max(sizes) <= RESULT_CHARS, sizes


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_official_sdk_client_within_the_budget(hub, seqs, mode):
    """mcp 2.x: each tool declares the size it may need; the largest replies parse and fit."""
    import anyio
    import sdk

    async def run() -> None:
        async with sdk.connect(hub, mode=mode) as (client, _):
            tools = (await client.list_tools()).tools
            assert {t.meta["anthropic/maxResultSizeChars"] for t in tools} == {RESULT_CHARS}
            for uri in ("nb://vars", "nb://vars/long_s", "nb://frames/wide_df/schema", "app://big"):
                result = await client.call_tool("read_resource", {"uri": uri})
                dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
                assert wire(dumped) <= RESULT_CHARS, (uri, wire(dumped))
                read = await client.read_resource(uri)
                assert wire(read.model_dump(by_alias=True, exclude_none=True, mode="json")) <= RESULT_CHARS

    anyio.run(run)


def test_the_front_shrinks_a_hub_with_a_larger_budget(front, kernel):
    """A hub allowed 150,000 characters behind a front allowed 50,000: the front's reads and tools fit,
    as the front asks the hub for a smaller page (budget.META_SCALE) instead of cutting what it got."""
    runtime = front["runtime"]
    other = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
    try:
        other.load_hub("%config MCPHub.max_result_chars = 150_000\n%config MCPHub.max_read_chars = 140_000")
        other.run("roomy = 'x' * 300_000\nimport pandas as pd\nroomy_df = pd.DataFrame({'t': ['y' * 50] * 20000})")
        info = other.info()
        ids = {info.get("kernel_id"), f"pid{info['pid']}"}
        client = Wire(front, "stateless", apps=False)
        listing = json.loads(client.result("resources/read", {"uri": "nb://kernels"})["contents"][0]["text"])
        label = next(k["label"] for k in listing["kernels"] if k["id"] in ids or k.get("pid") == info["pid"])
        direct = Wire(info, "stateless", apps=False)
        assert wire(direct.result("resources/read", {"uri": "nb://vars/roomy"})) > 100_000  # the hub's own budget
        sizes = {}
        for inner in ("vars/roomy", "frames/roomy_df"):
            uri = f"nb://kernels/{label}/{inner}"
            reply = client.call("resources/read", {"uri": uri})
            sizes[uri] = result_size(reply)
            assert "cut at the hub's result budget" not in json.dumps(reply)  # a smaller page, not a cut one
            tool = client.call("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
            sizes["tool " + uri] = result_size(tool)
        page = json.loads(
            client.result("resources/read", {"uri": f"nb://kernels/{label}/frames/roomy_df"})["contents"][1]["text"]
        )
        assert page["next"] and page["rows"] < 20000
        assert max(sizes.values()) <= RESULT_CHARS, sizes
    finally:
        other.shutdown()


def test_completion_fits_with_long_names(client):
    reply = client.call(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "nb://vars/{name}"}, "argument": {"name": "name", "value": "long_n"}},
    )
    completion = reply["result"]["completion"]
    assert completion["total"] == 150 and completion["hasMore"] and len(completion["values"]) > 10
    assert result_size(reply) <= RESULT_CHARS


def test_an_image_comes_whole(client, seqs):
    """Images are outside the character budget (hosts count them in tokens; a cut PNG is no PNG)."""
    uri = f"nb://cells/{seqs['image']}/outputs/0"
    item = client.result("resources/read", {"uri": uri})["contents"][0]
    assert len(base64.b64decode(item["blob"])) == 150_008
    tool = client.result("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
    image = next(c for c in tool["content"] if c["type"] == "image")
    assert len(base64.b64decode(image["data"])) == 150_008 and not tool.get("isError")
