"""Every reply within a host's budget, measured on the wire (issue #35).

A real kernel holds the largest values of every kind (a big frame, a 2,500-column frame, strings
full of quotes, newlines and non-ASCII so JSON escaping expands them, a dict of 100,000 keys, a
cell printing a megabyte, long tracebacks, a notebook of 300 big cells, 1,300 variables rebound at
once, user resources returning or raising huge texts). Each resource is read and each tool called
in both eras, with and without MCP Apps, over raw HTTP; the serialized ``result`` must fit
``RESULT_CHARS`` and an error ``ERROR_CHARS``. Following next links and cursors must give everything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import Mcp
from kernel_harness import Kernel
from test_apps_protocol import Wire

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
"""


def wire(value: Any) -> int:
    """Characters of ``value`` as the hub serializes it (compact JSON, non-ASCII kept)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def make_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    for i in range(300):
        cell = nbformat.v4.new_code_cell(f"# cell {i}\n" + TRICKY * 100, execution_count=i + 1)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=TRICKY * 500)]
        nb.cells.append(cell)
    nbformat.write(nb, str(path))


@pytest.fixture(scope="module")
def hub(kernel: Kernel, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("nb") / "big.ipynb"
    make_notebook(path)
    info = kernel.load_hub(f"%config MCPHub.notebook_path = {str(path)!r}")
    kernel.run(SETUP)
    kernel.run("print(TRICKY * 70000)")  # a cell with a big output
    kernel.run("def deep(n):\n    return deep(n - 1) if n else 1 / 0\ndeep(900)", check=False)
    kernel.run("raise ValueError('long ' + TRICKY * 20000)", check=False)
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
    assert set(found) == {"output", "deep", "raise"}, cells
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
    print("tools", client.era, client.apps, sizes)
    assert max(sizes.values()) <= RESULT_CHARS, sizes
