"""Lineage, history across restarts, diffs and the origin of each execution (issue #36).

A scripted notebook session through a real kernel: cells sent as JupyterLab sends them (the cell id
in the execute request's metadata), re-runs of edited cells, in-place edits, deletions, a second
client, a restart; read through the official SDK client, directly and through the all-kernels
front. Every name's origin cell, every cell's changed names, the earlier session's inputs and the
diffs must match what was run.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from jupyter_client import BlockingKernelClient
from kernel_harness import Kernel, KernelError
from sdk import connect

from mcp_notebook.allkernels.directory import LocalDirectory
from mcp_notebook.allkernels.front import KernelsFront

pytestmark = pytest.mark.timeout(300)


def run_cell(kernel: Kernel, code: str, cell_id: str, client: Any = None) -> None:
    """Execute ``code`` as JupyterLab does: the cell id in the request's metadata."""
    kc = client or kernel.kc
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False}
    msg = kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
    kc.shell_channel.send(msg)
    reply = kc.get_shell_msg(timeout=60)
    for _ in range(50):  # bounded: other replies (a second client's) are not ours
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            break
        reply = kc.get_shell_msg(timeout=60)
    if reply["content"]["status"] != "ok":
        raise KernelError(f"{code!r}: {reply['content']}")


def seq_of(kernel: Kernel) -> int:
    """The hub's number of the cell that ran last (0: none since the hub loaded; this one not counted)."""
    code = "import mcp_notebook as _m; _c = _m.hub().capture.last; print(_c.seq if _c else 0)"
    out = kernel.run(code, store_history=False)
    return int(out.stdout.strip())


async def read(client: Any, uri: str) -> dict[str, Any]:
    return json.loads((await client.read_resource(uri)).contents[0].text)


@pytest.fixture
def notebook(tmp_path: Path):
    env = {
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "JPY_SESSION_NAME": str(tmp_path / "analysis.ipynb"),
    }
    kernel = Kernel(env=env, cwd=str(tmp_path))
    yield kernel, env, tmp_path
    kernel.shutdown()


def _script(kernel: Kernel) -> dict[str, int]:
    """The session; the hub's cell number of each step."""
    seqs: dict[str, int] = {}
    steps = [
        ("load", "load", "%load_ext mcp_notebook"),
        ("data", "data", "df = [1, 2, 3]\nname = 'a'\nimport math"),
        ("append", "edit", "df.append(4)"),
        ("data2", "data", "df = [10, 20]\nname = 'b'\ncount = 2"),
        ("delete", "cleanup", "del name"),
        ("secret", "conn", "db_password = 'hunter2-first-value'\nhost = 'db1'"),
        ("secret2", "conn", "db_password = 'hunter2-second-value'\nhost = 'db2'"),
    ]
    for step, cell_id, code in steps:
        run_cell(kernel, code, cell_id)
        seqs[step] = seq_of(kernel)
    return seqs


def test_a_scripted_session_its_lineage_diffs_origins_and_history(notebook):
    kernel, env, tmp = notebook
    seqs = _script(kernel)
    other = BlockingKernelClient(connection_file=kernel.km.connection_file)  # a second frontend: its own session
    other.load_connection_file()
    other.start_channels()
    other.wait_for_ready(timeout=60)
    try:
        run_cell(kernel, "from_other = 1", "other-cell", client=other)
        seqs["other"] = seq_of(kernel)
    finally:
        other.stop_channels()
    info = kernel.info()

    async def session() -> None:
        async with connect(info) as (client, _):
            # the watched in-place edit that keeps the length: found by the exact digest
            assert not (await client.call_tool("read_resource", {"uri": "nb://vars/df"})).is_error
            await anyio.to_thread.run_sync(lambda: run_cell(kernel, "df[0] = 99", "poke"))
            seqs["poke"] = await anyio.to_thread.run_sync(lambda: seq_of(kernel))
            for _ in range(100):
                history = (await read(client, "nb://lineage/vars/df"))["history"]
                if history[0]["cell"] == f"nb://cells/{seqs['poke']}":
                    break
                await anyio.sleep(0.1)
            # a later cell that does not touch df adds nothing to its history (the lineage fields are
            # not part of the value's digest: they once fed back as an in-place edit on every cell)
            await anyio.to_thread.run_sync(lambda: run_cell(kernel, "unrelated = 1", "unrelated"))
            await anyio.to_thread.run_sync(kernel.run, "unrelated = 2")
            await client.call_tool("changes_since", {"wait_seconds": 0})  # settles the exact checks
            await _check_lineage(client, seqs)
            await _check_diffs(client, seqs)
            await _check_origins(client, seqs)
            await _check_listing_and_completion(client)

    anyio.run(session)

    async def handshake_era() -> None:  # the same resources to a 2025-11-25 session
        async with connect(info, mode="legacy") as (client, _):
            await _check_listing_and_completion(client)
            assert (await read(client, "nb://lineage/vars/df"))["set_by"] == f"nb://cells/{seqs['data2']}"
            runs = await read(client, "nb://diff/runs/data")
            assert [r["seq"] for r in runs["runs"]] == [seqs["data"], seqs["data2"]]

    anyio.run(handshake_era)
    kernel.restart()
    run_cell(kernel, "%load_ext mcp_notebook", "load")
    run_cell(kernel, "after_restart = 1", "new")
    set_by = seq_of(kernel)
    stranger = Kernel(env={**env, "JPY_SESSION_NAME": str(tmp / "other.ipynb")}, cwd=str(tmp))
    try:
        stranger.load_hub()
        stranger.run("only_in_the_other_notebook = 1")
    finally:
        stranger.shutdown()
    _check_history(kernel.info())
    _check_front(Path(env["JUPYTER_RUNTIME_DIR"]), set_by)


async def _check_lineage(client: Any, seqs: dict[str, int]) -> None:
    def cell(step: str) -> str:
        return f"nb://cells/{seqs[step]}"

    df = await read(client, "nb://lineage/vars/df")
    assert df["set_by"] == cell("data2") and df["last_changed_by"] == cell("poke"), df["history"]
    assert [(h["kind"], h["cell"]) for h in df["history"]] == [
        ("changed in place", cell("poke")),
        ("rebound", cell("data2")),
        ("changed in place", cell("append")),
        ("added", cell("data")),
    ]
    assert df["history"][0]["detected_by"] == "digest" and df["history"][2]["detected_by"] == "shape"
    assert df["history"][2]["before"] == {"type": "list", "len": 3} and df["history"][2]["after"]["len"] == 4
    assert df["history"][1]["before"]["len"] == 4 and df["history"][1]["after"]["len"] == 2
    name = await read(client, "nb://lineage/vars/name")
    assert name["exists"] is False and name["set_by"] == cell("data2") and name["last_changed_by"] == cell("delete")
    assert [h["kind"] for h in name["history"]] == ["removed", "rebound", "added"]
    # each cell lists what it changed, with links
    rows = {r["seq"]: r for r in (await read(client, "nb://lineage"))["cells"]}
    assert rows[seqs["data"]]["added"] == ["df", "name"]  # not the module
    assert rows[seqs["append"]]["changed_in_place"] == ["df"]
    assert sorted(rows[seqs["data2"]]["rebound"]) == ["df", "name"] and rows[seqs["data2"]]["added"] == ["count"]
    assert rows[seqs["delete"]]["removed"] == ["name"]
    assert rows[seqs["secret2"]]["rebound"] == ["host"]  # the secret-named variable is never listed
    doc = await read(client, cell("data2"))
    assert [c["name"] for c in doc["lineage"]["added"]] == ["count"]
    assert doc["lineage"]["added"][0]["uri"] == "nb://vars/count"
    assert doc["previous_run"]["uri"] == cell("data")
    var = await read(client, "nb://vars/count")
    assert var["lineage"]["set_by"] == cell("data2")
    recent = (await read(client, "nb://vars/df"))["lineage"]["recent"]  # the value says where it came from
    assert [(r["kind"], r["cell"]) for r in recent] == [
        ("changed in place", cell("poke")),
        ("rebound", cell("data2")),
        ("changed in place", cell("append")),
    ]
    removed = (await read(client, cell("delete")))["lineage"]["removed"]
    assert removed[0]["lineage"] == "nb://lineage/vars/name" and removed[0]["before"] == {"type": "str", "len": 1}
    missing = await client.call_tool("read_resource", {"uri": "nb://lineage/vars/db_password"})
    assert missing.is_error
    # changes_since links each change to its cell
    now = json.loads((await client.call_tool("changes_since", {"wait_seconds": 0})).content[0].text)
    start = now["cursor"].split(".")[0] + ".0"  # the whole journal of this hub
    since = json.loads((await client.call_tool("changes_since", {"cursor": start, "wait_seconds": 0})).content[0].text)
    assert any(f"(by cell {seqs['poke']}: {cell('poke')})" in line for line in since["summary"]), since
    assert any(c.get("cell") == cell("poke") for c in since["changes"])


async def _check_diffs(client: Any, seqs: dict[str, int]) -> None:
    runs = await read(client, "nb://diff/runs/data")
    assert [r["seq"] for r in runs["runs"]] == [seqs["data"], seqs["data2"]]
    assert "-df = [1, 2, 3]" in runs["diff"] and "+df = [10, 20]" in runs["diff"] and "+count = 2" in runs["diff"]
    secret = await read(client, "nb://diff/runs/conn")
    assert "hunter2" not in json.dumps(secret) and "+host = 'db2'" in secret["diff"]
    cells = await read(client, f"nb://diff/cells/{seqs['data']}/{seqs['append']}")
    assert cells["diff"].startswith(f"--- nb://cells/{seqs['data']}\n+++ nb://cells/{seqs['append']}")
    ns = await read(client, f"nb://diff/namespace/{seqs['data']}/{seqs['delete']}")
    rows = {r["name"]: r for r in ns["changes"]}
    assert rows["df"]["change"] == "rebound" and rows["df"]["before"]["len"] == 3 and rows["df"]["after"]["len"] == 2
    assert rows["name"]["change"] == "removed" and rows["count"]["change"] == "added"
    assert set(rows) == {"df", "name", "count"} and "reach" not in ns
    assert "+ count: int" in ns["text"] and "- name: str len 1" in ns["text"]
    whole = await read(client, f"nb://diff/namespace/{seqs['load']}/{seqs['delete']}")
    assert {r["name"]: r["change"] for r in whole["changes"]} == {
        "df": "added",
        "name": "added and removed",
        "count": "added",
    }
    bad = await client.call_tool("read_resource", {"uri": "nb://diff/runs/data?a=1"})
    assert bad.is_error and "not a run of data" in bad.content[0].text


async def _check_origins(client: Any, seqs: dict[str, int]) -> None:
    mine = (await read(client, f"nb://cells/{seqs['data']}"))["origin"]
    theirs = (await read(client, f"nb://cells/{seqs['other']}"))["origin"]
    assert mine["session"] != theirs["session"] and mine["msg_id"] != theirs["msg_id"]
    assert set(mine) >= {"session", "username", "msg_id", "date"}
    assert isinstance(mine["date"], str) and datetime.fromisoformat(mine["date"])  # formatted when read (#48)
    rows = {r["seq"]: r for r in (await read(client, "nb://lineage"))["cells"]}
    assert rows[seqs["other"]]["origin"]["session"] == theirs["session"]


async def _check_listing_and_completion(client: Any) -> None:
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"nb://lineage", "nb://history"} <= uris
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert {
        "nb://lineage/vars/{name}",
        "nb://diff/cells/{a}/{b}",
        "nb://diff/runs/{cell_id}{?a,b}",
        "nb://diff/namespace/{a}/{b}",
        "nb://history/{session}{?offset,limit}",
    } <= templates
    ref = types.ResourceTemplateReference(type="ref/resource", uri="nb://lineage/vars/{name}")
    assert "df" in (await client.complete(ref, {"name": "name", "value": "d"})).completion.values
    ref = types.ResourceTemplateReference(type="ref/resource", uri="nb://diff/runs/{cell_id}{?a,b}")
    assert "data" in (await client.complete(ref, {"name": "cell_id", "value": "da"})).completion.values
    ref = types.ResourceTemplateReference(type="ref/resource", uri="nb://history{?q,offset,limit}")
    assert (await client.complete(ref, {"name": "q", "value": "x"})).completion.values == []
    listed = json.loads((await client.call_tool("list_resources", {})).content[0].text)
    assert "nb://lineage/vars/{name}" in {t.get("uriTemplate") for t in listed["templates"]}


def _check_history(info: dict[str, Any]) -> None:
    async def go() -> None:
        async with connect(info) as (client, _):
            doc = await read(client, "nb://history")
            assert doc["available"] and doc["matched_by"] == "notebook path"
            assert [s["session"] for s in doc["sessions"]] == [doc["current_session"] - 1] or len(doc["sessions"]) == 1
            sources = [i["source"] for i in doc["inputs"]]
            assert sources.index("df.append(4)") < sources.index("df = [1, 2, 3]\nname = 'a'\nimport math")
            assert "after_restart = 1" not in sources  # the current session is nb://cells
            assert not any("only_in_the_other_notebook" in s for s in sources)
            assert not any("hunter2" in s for s in sources)  # literals of secret-named variables masked
            found = await read(client, "nb://history?q=APPEND")
            assert [i["source"] for i in found["inputs"]] == ["df.append(4)"]
            earlier = await read(client, found["inputs"][0]["uri"])
            ordered = [i["source"] for i in earlier["inputs"]]
            assert ordered.index("%load_ext mcp_notebook") < ordered.index("df.append(4)") < ordered.index("del name")
            page = await read(client, "nb://history?limit=2")
            assert len(page["inputs"]) == 2 and page["next"] == "nb://history?offset=2&limit=2"
            stranger = await client.call_tool("read_resource", {"uri": "nb://history/99999"})
            assert stranger.is_error

    anyio.run(go)


def _check_front(runtime: Path, set_by: int) -> None:
    front = KernelsFront(LocalDirectory(runtime))
    url = front.serve_http()
    try:

        async def go() -> None:
            async with connect({"url": url, "token": front.settings.token}) as (client, _):
                doc = await read(client, "nb://kernels/analysis/lineage/vars/after_restart")
                assert doc["set_by"].endswith(f"cells/{set_by}")  # a link the front may qualify
                history = await read(client, "nb://kernels/analysis/history?q=append")
                assert [i["source"] for i in history["inputs"]] == ["df.append(4)"]
                templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
                assert "nb://kernels/{kernel}/lineage/vars/{name}" in templates
                ref = types.ResourceTemplateReference(
                    type="ref/resource", uri="nb://kernels/{kernel}/lineage/vars/{name}"
                )
                done = await client.complete(
                    ref, {"name": "name", "value": "after"}, context_arguments={"kernel": "analysis"}
                )
                assert done.completion.values == ["after_restart"]
                tool = await client.call_tool("read_resource", {"uri": "nb://kernels/analysis/diff/runs/new"})
                assert not tool.is_error

        anyio.run(go)
    finally:
        front.close()


SIZES = """
import json as _json, mcp_notebook as _m
_L = _m.hub().lineage
_changes = {id(c) for r in _L.cells.values() for c in r.changes} | {id(e) for v in _L.vars.values() for e in v.events}
print(_json.dumps({"cells": len(_L.cells), "vars": len(_L.vars), "changes": len(_changes),
    "events": max(len(v.events) for v in _L.vars.values()), "journal": len(_m.hub().resources.journal._entries)}))
"""


def test_memory_stays_bounded_over_ten_thousand_cells(tmp_path):
    from mcp_notebook.providers.history.lineage import MAX_CELL_CHANGES, MAX_EVENTS, MAX_VARS

    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "IPYTHONDIR": str(tmp_path / "ipython")})
    try:
        info = kernel.load_hub()
        cells = (
            "_ip = get_ipython()\n"
            "for _i in range({start}, {end}):\n"
            "    _ip.run_cell(f'v{{_i}} = list(range(_i % 7))\\nkeep = {{_i}}' + "
            "(f'\\ndel v{{_i - 3}}' if _i % 3 == 0 and _i >= 3 else ''), store_history=False)"
        )
        kernel.run(cells.format(start=0, end=5_000), timeout=240)
        half = json.loads(kernel.run(SIZES).stdout)
        kernel.run(cells.format(start=5_000, end=10_000), timeout=240)
        full = json.loads(kernel.run(SIZES).stdout)
        last = seq_of(kernel) - 1  # the cell that printed the sizes ran after the last nested one
        max_cells = 200  # MCPHub.max_cells
        for sizes in (half, full):
            assert sizes["cells"] <= max_cells and sizes["vars"] <= MAX_VARS and sizes["events"] <= MAX_EVENTS
            assert sizes["changes"] <= max_cells * MAX_CELL_CHANGES + MAX_VARS * MAX_EVENTS
            assert sizes["journal"] <= 1000
        assert full["vars"] == MAX_VARS and full["changes"] <= half["changes"] * 1.1  # a bound, not growth

        async def go() -> None:
            async with connect(info) as (client, _):
                keep = await read(client, "nb://lineage/vars/keep")
                assert len(keep["history"]) == MAX_EVENTS and keep["history"][0]["cell"].startswith("nb://cells/")
                assert int(keep["set_by"].rsplit("/", 1)[1]) == last
                index = await read(client, "nb://lineage?limit=5")
                assert index["count"] == max_cells and len(index["cells"]) == 5 and "next" in index

        anyio.run(go)
        _check_budgets(kernel, info)
    finally:
        kernel.shutdown()


def _check_budgets(kernel: Kernel, info: dict[str, Any]) -> None:
    """A cell that changes 300 names: every new read stays within max_read_chars and says it was cut."""
    from mcp_notebook.providers.history.lineage import MAX_CELL_CHANGES

    kernel.run("import mcp_notebook as _m; _m.hub().config.max_read_chars = 4000")
    before = seq_of(kernel)
    kernel.run("for _i in range(300):\n    globals()[f'bulk_value_with_a_long_name_{_i}'] = [_i] * 3")
    bulk = seq_of(kernel)

    async def go() -> None:
        async with connect(info) as (client, _):
            for uri in ("nb://lineage", f"nb://diff/namespace/{before}/{bulk}", f"nb://cells/{bulk}"):
                text = (await client.read_resource(uri)).contents[0].text
                doc = json.loads(text)
                part = doc.get("lineage", doc)
                assert len(json.dumps(part)) <= 4000 and part.get("truncated") is True, uri
                if "changes" in doc:  # the namespace diff: as many names as fit, not none
                    kept = f"of {MAX_CELL_CHANGES} names (some cells changed more than is kept)"
                    assert 3 <= len(doc["changes"]) < 200 and doc["shown"].endswith(kept), doc["shown"]

    anyio.run(go)


def test_cells_sent_by_the_jupyterlab_session_say_so(tmp_path):
    """The session whose comm is the extension's is JupyterLab's; another client's cells are not."""
    from test_frontend_comm import Frontend

    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "IPYTHONDIR": str(tmp_path / "ipython")})
    other = BlockingKernelClient(connection_file=kernel.km.connection_file)
    try:
        info = kernel.load_hub()
        lab = Frontend(kernel)
        lab.open()
        lab.wait(lambda d: d.get("type") == "state")
        run_cell(kernel, "from_lab = 1", "lab-cell")
        lab_seq = seq_of(kernel)
        other.load_connection_file()
        other.start_channels()
        run_cell(kernel, "from_agent = 1", "agent-cell", client=other)
        agent_seq = seq_of(kernel)

        async def go() -> None:
            async with connect(info) as (client, _):
                mine = (await read(client, f"nb://cells/{lab_seq}"))["origin"]
                theirs = (await read(client, f"nb://cells/{agent_seq}"))["origin"]
                assert mine["frontend"] == "jupyterlab" and mine["session"] == kernel.kc.session.session
                assert "frontend" not in theirs and theirs["session"] == other.session.session
                rows = {r["seq"]: r for r in (await read(client, "nb://lineage"))["cells"]}
                assert rows[lab_seq]["origin"]["frontend"] == "jupyterlab"

        anyio.run(go)
    finally:
        other.stop_channels()
        kernel.shutdown()


def test_a_failing_lineage_recorder_never_costs_the_cell_its_notifications():
    from mcp_notebook.inkernel.config import MCPHub
    from mcp_notebook.providers.variables import VariablesProvider
    from mcp_notebook.redact import NameFilter

    ns: dict[str, Any] = {"x": 1}
    cfg = MCPHub()
    variables = VariablesProvider(ns, {}, lambda: NameFilter(cfg.secret_words, [], []), cfg)

    def broken(delta: Any) -> None:
        raise RuntimeError("a recorder bug")

    variables.deltas.append(broken)
    ns["x"] = [1, 2]
    ns["y"] = 2
    changes = variables.snapshot(frozenset())
    assert {"nb://vars/x", "nb://vars/y"} <= changes.updated and changes.list_changed


def test_records_replayed_after_many_cells_read_as_if_taken_at_once(tmp_path):
    """Issue #48: a cell only takes the facts (its record is replayed later, on a read or every
    MAX_PENDING cells). Over more cells than that, mixing in-place edits seen through the source,
    mentions that change nothing, rebinds and deletions, with the same source run again: each
    variable's history says what each cell did, its before as the previous cell left it."""
    from mcp_notebook.providers.history.lineage import MAX_EVENTS, MAX_PENDING

    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "IPYTHONDIR": str(tmp_path / "ipython")})
    try:
        info = kernel.load_hub()
        kernel.run("acc = []")
        cells = 3 * (MAX_PENDING + 10)
        kernel.run(  # each inner cell is a cell of its own for the hub (its pre/post_run_cell hooks run)
            "_ip = get_ipython()\n"
            f"for _k in range({cells}):\n"
            "    _ip.run_cell(('acc.append(1)', 'len(acc)', f'n = {_k}\\ngone = 1\\ndel gone')[_k % 3])",
            timeout=120,
        )
        last = seq_of(kernel) + cells  # the outer cell finished last; its inner cells came after it in number

        async def go() -> None:
            async with connect(info) as (client, _):
                acc = await read(client, "nb://lineage/vars/acc")
                lens = [(e["before"]["len"], e["after"]["len"]) for e in acc["history"]]
                top = cells // 3
                assert lens == [(top - 1 - i, top - i) for i in range(MAX_EVENTS)]  # newest first
                assert {(e["kind"], e["detected_by"]) for e in acc["history"]} == {("changed in place", "shape")}
                n = await read(client, "nb://lineage/vars/n")
                assert n["set_by"] == f"nb://cells/{last}" and n["history"][0]["kind"] == "rebound"
                mention = await read(client, f"nb://cells/{last - 1}")
                assert mention["lineage"]["mentioned"] == ["acc"] and not mention["lineage"]["changed_in_place"]
                edit = await read(client, f"nb://cells/{last - 2}")
                assert [c["name"] for c in edit["lineage"]["changed_in_place"]] == ["acc"]
                index = await read(client, "nb://lineage?limit=5")
                assert {last, last - 1, last - 2} <= {c["seq"] for c in index["cells"]}

        anyio.run(go)
    finally:
        kernel.shutdown()
