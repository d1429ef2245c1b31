"""Kernels without the hub, served from the Jupyter server's side (issue #43): a real IRkernel beside a
Python kernel with the hub, in one real ``jupyter server``; cells run by a client of their own (not
the server's), read through the official SDK client in both eras, per kernel and through the front."""

from __future__ import annotations

import base64
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from jserver import JupyterServer, load_hub, run

pytestmark = pytest.mark.skipif(
    shutil.which("R") is None or not Path("/usr/share/jupyter/kernels/ir/kernel.json").exists(),
    reason="R and IRkernel are not installed (scripts/test.sh installs r-base-core, r-cran-irkernel, "
    "r-cran-tibble where apt-get exists)",
)
AUTH = "test-jupyter-token"


def execute(kc: Any, code: str, timeout: float = 60) -> dict[str, Any]:
    """Run code in the kernel through this client; the reply and its IOPub messages."""
    got: list[dict[str, Any]] = []
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=got.append)
    return {"reply": reply["content"], "iopub": got}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("served")
    args = ("--MCPNotebookExtension.variable_snippets=True", "--MCPNotebookExtension.snippet_seconds=1")
    s = JupyterServer(base, extra_args=args)
    try:
        r = s.http.post("api/sessions", json={"path": "stats.ipynb", "type": "notebook", "kernel": {"name": "ir"}})
        assert r.status_code == 201, r.text
        rid = r.json()["kernel"]["id"]
        pid = s.start_session("py.ipynb")
        x = s.http.post("api/sessions", json={"path": "xeus.ipynb", "type": "notebook", "kernel": {"name": "xpython"}})
        xid = x.json()["kernel"]["id"] if x.status_code == 201 else None  # xeus-python: the kernels extra
        rkc, pkc = s.client(rid), s.client(pid)
        load_hub(pkc)
        run(pkc, "x = 41")
        front = f"{s.url}mcp-notebook/mcp"
        yield {"server": s, "rid": rid, "pid": pid, "xid": xid, "rkc": rkc, "pkc": pkc, "front": front}
    finally:
        s.stop()


def sdk(url: str, mode: str) -> Any:
    import contextlib

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from sdk import Inbox

    @contextlib.asynccontextmanager
    async def opened() -> Any:
        inbox = Inbox()
        headers = {"Authorization": f"token {AUTH}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
            async with Client(
                streamable_http_client(url, http_client=http), message_handler=inbox.handle, mode=mode, cache=None
            ) as client:
                yield client, inbox

    return opened()


async def text(client: Any, uri: str) -> Any:
    return json.loads((await client.read_resource(uri)).contents[0].text)


def wait_listed(server: dict[str, Any]) -> None:
    """The R kernel is watched once it is listed (the watch looks every 0.5 s)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = server["server"].http.get("mcp-notebook/kernels").json()
        if any(r["kernel_id"] == server["rid"] and r.get("carrier") == "server" for r in rows):
            return
        time.sleep(0.2)
    raise AssertionError(f"the R kernel was never listed: {rows}")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_kernel_listed_with_language_and_r_cells_read(server, mode):
    wait_listed(server)
    rkc = server["rkc"]
    df = execute(
        rkc, 'library(tibble); df <- data.frame(a = 1:3, b = c("x", "y", "z")); tb <- tibble(n = 1:25); print(df)'
    )
    assert df["reply"]["status"] == "ok", df
    plot = execute(rkc, "plot(1:10)")
    png = [m["content"]["data"]["image/png"] for m in plot["iopub"] if m["msg_type"] == "display_data"]
    assert png, plot
    err = execute(rkc, 'stop("boom")')
    assert err["reply"]["status"] == "error"

    async def go() -> None:
        async with sdk(server["front"], mode) as (client, _):
            kernels = (await text(client, "nb://kernels"))["kernels"]
            by_label = {k["label"]: k for k in kernels}
            assert by_label["stats"]["language"] == "R" and by_label["stats"]["served_by"] == "jupyter-server"
            assert by_label["stats"]["display_name"] == "R"
            assert by_label["py"]["served_by"] == "hub" and by_label["py"]["language"] == "python"
            cells = (await text(client, "nb://kernels/stats/cells"))["cells"]
            sources = [c["source"] if "source" in c else c.get("first_line") for c in cells]
            assert any("data.frame" in (s or "") for s in sources), cells
            last = cells[-1]
            assert last["status"] == "error", last
            seq_plot = cells[-2]["seq"]
            blob = (await client.read_resource(f"nb://kernels/stats/cells/{seq_plot}/outputs/0")).contents[0]
            assert base64.b64decode(blob.blob) == base64.b64decode(png[0])  # the exact bytes
            cell = await text(client, f"nb://kernels/stats/cells/{last['seq']}")
            assert "boom" in json.dumps(cell)
            # the Python kernel with the hub keeps what it has
            assert "41" in (await client.read_resource("nb://kernels/py/vars/x")).contents[0].text

    anyio.run(go)


def r_state(rkc: Any) -> dict[str, Any]:
    """The R kernel's names, execution count and .Last.value as a cell sees them."""
    out = execute(rkc, "cat(jsonlite::toJSON(list(names = ls(), last = deparse(.Last.value)), auto_unbox = TRUE))")
    text = "".join(m["content"].get("text", "") for m in out["iopub"] if m["msg_type"] == "stream")
    return {**json.loads(text), "count": out["reply"]["execution_count"]}


def test_r_variables_read_only(server):
    wait_listed(server)
    rkc = server["rkc"]
    setup = 'library(tibble); df <- data.frame(a = 1:3, b = c("x", "y", "z")); tb <- tibble(n = 1:25)'
    execute(rkc, setup + '; api_token <- "tok-5ecret-value-0001"')
    before = r_state(rkc)
    count = execute(rkc, "43L")["reply"]["execution_count"]  # .Last.value is 43L from here on

    async def go() -> None:
        async with sdk(server["front"], "auto") as (client, _):
            listing = await text(client, "nb://kernels/stats/vars")
            rows = {r["name"]: r for r in listing["variables"]}
            assert rows["df"]["dim"] == [3, 2] and "data.frame" in rows["df"]["class"]
            assert rows["tb"]["class"][0] == "tbl_df"
            var = await text(client, "nb://kernels/stats/vars/df")
            assert var["class"] == ["data.frame"] and "x" in var["printed"]
            page = (await client.read_resource("nb://kernels/stats/frames/tb?offset=20&limit=10")).contents[0]
            assert page.text.splitlines() == ['"n"', "21", "22", "23", "24", "25"]
            assert rows["api_token"]["hidden"] is True and "5ecret" not in json.dumps(listing)
            hidden = await text(client, "nb://kernels/stats/vars/api_token")
            assert hidden["hidden"] is True and "5ecret" not in json.dumps(hidden)
            with pytest.raises(Exception, match="not a syntactic R name"):
                await client.read_resource("nb://kernels/stats/vars/a%28%29")

    anyio.run(go)
    after = r_state(rkc)
    assert after["names"] == before["names"]  # nothing assigned in the global environment
    assert after["last"] == "43L"  # .Last.value is still the user's last value
    assert after["count"] == count + 1  # the reads moved no execution count (only this cell did)


def test_a_long_cell_reads_still_answer_and_variables_wait(server):
    wait_listed(server)
    rkc = server["rkc"]
    done = threading.Event()
    thread = threading.Thread(target=lambda: (execute(rkc, 'cat("start\\n"); Sys.sleep(4); cat("end\\n")'), done.set()))
    thread.start()

    async def go() -> None:
        async with sdk(server["front"], "legacy") as (client, inbox):
            await client.subscribe_resource("nb://kernels/stats/cells")
            with anyio.fail_after(10):
                while True:
                    cells = (await text(client, "nb://kernels/stats/cells"))["cells"]
                    if cells[-1]["status"] == "running":
                        break
                    await anyio.sleep(0.1)
            with pytest.raises(Exception, match="idle"):
                await client.read_resource("nb://kernels/stats/vars/df")
            await inbox.wait_for(lambda i: "nb://kernels/stats/cells" in i.updated, timeout=20)

    anyio.run(go)
    thread.join(30)
    assert done.is_set()


def test_snippet_timeout_and_other_kernels_unaffected(server):
    wait_listed(server)
    rkc = server["rkc"]
    execute(rkc, 'delayedAssign("slow", {x <- 0; for (i in 1:1e9) x <- x + 1; x})')

    async def go() -> None:
        async with sdk(server["front"], "auto") as (client, _):
            with pytest.raises(Exception, match="longer than 1 s"):
                await client.read_resource("nb://kernels/stats/vars")
            assert "41" in (await client.read_resource("nb://kernels/py/vars/x")).contents[0].text
            assert (await text(client, "nb://kernels/stats/cells"))["cells"]

    anyio.run(go)
    assert execute(rkc, "rm(slow); 1 + 1")["reply"]["status"] == "ok"


def test_per_kernel_route_and_listing(server):
    wait_listed(server)
    s = server["server"]
    rows = {r["kernel_id"]: r for r in s.http.get("mcp-notebook/kernels").json()}
    assert rows[server["rid"]]["language"] == "R" and rows[server["pid"]]["carrier"] == "tcp"

    async def go() -> None:
        async with sdk(s.mcp_url(server["rid"]), "auto") as (client, _):
            summary = await text(client, "nb://kernel")
            assert summary["language"] == "R" and summary["served_by"] == "jupyter-server"

    anyio.run(go)
    r = httpx.post(s.mcp_url(server["rid"]), json={}, timeout=10)
    assert r.status_code == 403  # Jupyter's auth first


def test_a_restart_keeps_the_history_and_says_so(server):
    wait_listed(server)
    s = server["server"]
    execute(server["rkc"], 'gone <- 1; cat("before restart\\n")')
    assert s.http.post(f"api/kernels/{server['rid']}/restart").status_code == 200
    server["rkc"].wait_for_ready(timeout=60)

    async def go() -> None:
        async with sdk(server["front"], "auto") as (client, _):
            with anyio.fail_after(15):
                while (await text(client, "nb://kernels/stats/kernel"))["restarts"] < 1:
                    await anyio.sleep(0.2)
            cells = (await text(client, "nb://kernels/stats/cells"))["cells"]
            assert cells, "the history outlives the restart"
            with anyio.fail_after(15):  # the restarted kernel answers once it is idle again
                while True:
                    try:
                        await client.read_resource("nb://kernels/stats/vars/gone")
                    except Exception as exc:
                        if "no R variable 'gone'" in str(exc):
                            break  # gone with the restart
                    await anyio.sleep(0.2)

    anyio.run(go)
    assert execute(server["rkc"], "1 + 1")["reply"]["status"] == "ok"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_cell_of_r_is_notified_in_both_eras(server, mode):
    wait_listed(server)
    uri = "nb://kernels/stats/cells"

    async def go() -> None:
        async with sdk(server["front"], mode) as (client, inbox):
            if mode == "legacy":
                await client.subscribe_resource(uri)
                await anyio.sleep(0.3)
                await anyio.to_thread.run_sync(execute, server["rkc"], f'cat("{mode}\\n")')
                await inbox.wait_for(lambda i: uri in i.updated, timeout=15)
                return
            async with client.listen(resource_subscriptions=[uri]) as sub:
                await anyio.sleep(0.3)
                await anyio.to_thread.run_sync(execute, server["rkc"], f'cat("{mode}\\n")')
                with anyio.fail_after(15):
                    async for event in sub:
                        if getattr(event, "uri", None) == uri:
                            break

    anyio.run(go)


def test_xeus_python_served_without_a_hub(server):
    if server["xid"] is None:
        pytest.skip("xeus-python is not installed (pip install mcp-notebook[kernels])")
    s = server["server"]
    xkc = s.client(server["xid"])
    assert execute(xkc, "y = 6 * 7\nprint('from xeus', y)")["reply"]["status"] == "ok"
    assert execute(xkc, "1 / 0")["reply"]["status"] == "error"

    async def go() -> None:
        async with sdk(server["front"], "auto") as (client, _):
            with anyio.fail_after(15):
                while True:
                    cells = (await text(client, "nb://kernels/xeus/cells"))["cells"]
                    if len(cells) >= 2 and cells[-1]["status"] == "error":
                        break
                    await anyio.sleep(0.2)
            first = await text(client, f"nb://kernels/xeus/cells/{cells[-2]['seq']}")
            assert "from xeus 42" in json.dumps(first)
            with pytest.raises(Exception, match=r"xeus-python.*inspectVariables"):
                await client.read_resource("nb://kernels/xeus/vars/y")  # one sentence: why, what works
            kernels = {k["label"]: k for k in (await text(client, "nb://kernels"))["kernels"]}
            assert kernels["xeus"]["served_by"] == "jupyter-server" and kernels["xeus"]["language"] == "python"

    anyio.run(go)


def test_a_flood_is_bounded_and_a_dying_kernel_says_so(server):
    wait_listed(server)
    rkc = server["rkc"]
    flood = execute(rkc, 'for (i in 1:20000) cat("line", i, strrep("x", 100), "\\n")', timeout=120)
    assert flood["reply"]["status"] == "ok"

    async def go() -> None:
        async with sdk(server["front"], "auto") as (client, _):
            cells = (await text(client, "nb://kernels/stats/cells"))["cells"]
            flooded = await text(client, f"nb://kernels/stats/cells/{cells[-1]['seq']}")
            assert "truncated" in json.dumps(flooded)  # kept to MCPHub.max_output_chars, cut with a note
            before = (await text(client, "nb://kernels/stats/kernel"))["restarts"]
            rkc.execute("tools::pskill(Sys.getpid(), 9)")  # the kernel dies mid-cell; Jupyter restarts it
            with anyio.fail_after(30):
                while (await text(client, "nb://kernels/stats/kernel"))["restarts"] <= before:
                    await anyio.sleep(0.2)
            last = (await text(client, "nb://kernels/stats/cells"))["cells"][-1]
            assert last["status"] == "error" and "pskill" in json.dumps(last)
            assert "41" in (await client.read_resource("nb://kernels/py/vars/x")).contents[0].text

    anyio.run(go)
    rkc.wait_for_ready(timeout=60)
    assert execute(rkc, "1 + 1")["reply"]["status"] == "ok"


def test_the_bridge_pointed_at_the_server_reads_r(server):
    """``mcp-notebook bridge --server``: the all-kernels bridge over stdio, the official SDK's stdio client."""
    import os
    import sys

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    wait_listed(server)
    execute(server["rkc"], 'bridged <- data.frame(k = 1:2); cat("for the bridge\\n")')
    env = {**os.environ, "MCP_NOTEBOOK_SERVER_TOKEN": AUTH}
    args = ["-m", "mcp_notebook", "bridge", "--server", server["server"].url]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)

    async def bridged() -> None:
        async with Client(params, cache=None) as client:
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            assert {k["label"]: k["language"] for k in listed}["stats"] == "R"
            cells = json.loads((await client.read_resource("nb://kernels/stats/cells")).contents[0].text)["cells"]
            assert "for the bridge" in json.dumps(cells[-1]) or "bridged" in json.dumps(cells[-1])
            read = await client.call_tool("read_resource", {"uri": "nb://kernels/stats/vars/bridged"})
            assert not read.is_error and "data.frame" in read.content[0].text

    anyio.run(bridged)


def test_the_notebook_from_disk_then_the_live_document_through_the_server_route(server):
    wait_listed(server)
    s = server["server"]
    saved = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "ir", "language": "R"}},
        "cells": [
            {
                "cell_type": "code",
                "id": "c1",
                "source": "saved <- 1",
                "metadata": {},
                "outputs": [],
                "execution_count": 1,
            }
        ],
    }
    (s.root / "stats.ipynb").write_text(json.dumps(saved))
    live = {
        **saved,
        "cells": [*saved["cells"], {"cell_type": "markdown", "id": "m1", "source": "# unsaved edit", "metadata": {}}],
    }
    route = f"mcp-notebook/kernels/{server['rid']}/document"

    async def read_notebook() -> str:
        async with sdk(server["front"], "auto") as (client, _):
            return json.dumps(await text(client, "nb://kernels/stats/notebook"))

    assert "saved <- 1" in anyio.run(read_notebook)
    assert httpx.post(s.url + route, json={"nb": live}, timeout=10).status_code == 403  # Jupyter's auth
    assert s.http.post(route, json={"nb": "not a notebook"}).status_code == 400
    assert s.http.post(f"mcp-notebook/kernels/{server['pid']}/document", json={"nb": live}).status_code == 409
    assert s.http.post(route, json={"nb": live}).status_code == 204
    assert "unsaved edit" in anyio.run(read_notebook)


def test_a_python_kernel_without_the_hub_lists_variables_through_its_debugger(server):
    s = server["server"]
    r = s.http.post("api/sessions", json={"path": "plain.ipynb", "type": "notebook", "kernel": {"name": "python3"}})
    kid = r.json()["kernel"]["id"]
    try:
        kc = s.client(kid)
        assert execute(kc, "z = 7 * 6\nz")["reply"]["status"] == "ok"

        def seen() -> list[str]:  # the last result, the history's length and the count, as a cell sees them
            out = execute(kc, "print(repr(_), len(In), get_ipython().execution_count)")
            return "".join(m["content"].get("text", "") for m in out["iopub"] if m["msg_type"] == "stream").split()

        execute(kc, "'last'")
        before = seen()
        execute(kc, "'last'")

        async def go() -> None:
            async with sdk(server["front"], "auto") as (client, _):
                with anyio.fail_after(20):
                    while "plain" not in {k["label"] for k in (await text(client, "nb://kernels"))["kernels"]}:
                        await anyio.sleep(0.2)
                listing = await text(client, "nb://kernels/plain/vars")
                assert {"name": "z", "type": "int", "value": "42"}.items() <= next(
                    r for r in listing["variables"] if r["name"] == "z"
                ).items()
                assert (await text(client, "nb://kernels/plain/vars/z"))["value"] == "42"
                with pytest.raises(Exception, match="%load_ext mcp_notebook"):
                    await client.read_resource("nb://kernels/plain/frames/z")

        anyio.run(go)
        after = seen()
        # one more cell ('last') and this one: no history, count or result of ours in between
        assert after == [before[0], str(int(before[1]) + 2), str(int(before[2]) + 2)], (before, after)
    finally:
        s.http.delete(f"api/kernels/{kid}")


def test_a_kernel_without_the_hub_has_its_outputs_described_from_their_bundles(server):
    """Issue #44 from the server's side: a Plotly bundle and an HTML table, published by a Python
    kernel that never loaded the hub, are read with their descriptions (figures/bundle.py: no
    kernel needed)."""
    s = server["server"]
    r = s.http.post("api/sessions", json={"path": "nohub.ipynb", "type": "notebook", "kernel": {"name": "python3"}})
    kid = r.json()["kernel"]["id"]
    try:
        kc = s.client(kid)
        plotly = {"data": [{"type": "bar", "x": ["a", "b", "c"], "y": [3, 9, 4], "name": "votes"}], "layout": {}}
        code = (
            "from IPython.display import display\n"
            f"display({{'application/vnd.plotly.v1+json': {plotly!r}, 'text/plain': 'chart'}}, raw=True)\n"
            "display({'text/html': '<table><tr><th>k</th><th>v</th></tr><tr><td>x</td><td>5</td></tr></table>',"
            " 'text/plain': 'table'}, raw=True)"
        )

        async def go() -> None:
            async with sdk(server["front"], "auto") as (client, _):
                with anyio.fail_after(30):
                    while "nohub" not in {k["label"] for k in (await text(client, "nb://kernels"))["kernels"]}:
                        await anyio.sleep(0.2)
                assert execute(kc, code)["reply"]["status"] == "ok"
                with anyio.fail_after(30):
                    while True:
                        index = await text(client, "nb://kernels/nohub/cells")
                        rows = [c for c in index["cells"] if c["outputs"] >= 2]
                        if rows:
                            break
                        await anyio.sleep(0.2)
                base = f"nb://kernels/nohub/cells/{rows[-1]['seq']}/outputs"
                chart = (await client.read_resource(f"{base}/0/description")).contents[0].text
                assert 'bar "votes"' in chart and "max 9 at x=b" in chart
                table = (await client.read_resource(f"{base}/1")).contents
                assert "| x | 5 |" in table[-1].text

        anyio.run(go)
    finally:
        s.http.delete(f"api/kernels/{kid}")
