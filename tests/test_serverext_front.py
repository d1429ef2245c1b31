"""`{base_url}mcp-notebook/mcp`: every kernel of a real `jupyter server` behind one endpoint, with
Jupyter's auth, both eras through the official SDK client; the focus reported by a frontend picks
the kernel bare URIs address; `mcp-notebook bridge --server URL` with no selector uses it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from jserver import JupyterServer, load_hub, run
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_serverext import sdk

TOKEN = "front-jupyter-token"
AUTH = f"token {TOKEN}"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    s = JupyterServer(tmp_path_factory.mktemp("jfront"), token=TOKEN, base_url="/user/ann/")
    try:
        kernels = {}
        for name in ("sales", "ops"):
            kid = s.start_session(f"{name}.ipynb")
            kc = s.client(kid)
            load_hub(kc)
            run(kc, f"x = {name!r}")
            kernels[name] = {"id": kid, "kc": kc}
        yield {"server": s, "kernels": kernels, "url": f"{s.url}mcp-notebook/mcp"}
    finally:
        s.stop()


def test_refused_without_jupyter_auth(server):
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    assert httpx.post(server["url"], json=body, timeout=10).status_code == 403
    wrong = httpx.post(server["url"], json=body, headers={"Authorization": "token nope"}, timeout=10)
    assert wrong.status_code == 403


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_kernel_of_the_server(server, mode):
    kernels = server["kernels"]

    async def go() -> None:
        async with sdk(server["url"], mode, AUTH) as (client, inbox):
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            assert sorted(k["label"] for k in listed) == ["ops", "sales"]
            assert {k["notebook"] for k in listed} == {"sales.ipynb", "ops.ipynb"}
            for name in ("sales", "ops"):
                read = await client.read_resource(f"nb://kernels/{name}/vars/x")
                assert name in read.contents[0].text
            uri = "nb://kernels/ops/vars/x"
            if mode == "legacy":
                await client.subscribe_resource(uri)
                await anyio.sleep(0.5)
                await anyio.to_thread.run_sync(run, kernels["ops"]["kc"], f"x = 'ops {mode}'")
                await inbox.wait_for(lambda i: uri in i.updated, timeout=15)
            else:
                async with client.listen(resource_subscriptions=[uri]) as sub:
                    await anyio.sleep(0.5)
                    await anyio.to_thread.run_sync(run, kernels["ops"]["kc"], f"x = 'ops {mode}'")
                    with anyio.fail_after(15):
                        async for event in sub:
                            if getattr(event, "uri", None) == uri:
                                break

    anyio.run(go)


def test_focus_picks_the_current_kernel_and_the_bridge_uses_the_endpoint(server):
    focus = f"{server['server'].url}mcp-notebook/focus"
    headers = {"Authorization": AUTH}
    assert httpx.post(focus, json={"kernel_id": server["kernels"]["sales"]["id"]}, timeout=10).status_code == 403
    assert httpx.post(focus, json={"kernel_id": "nope"}, headers=headers, timeout=10).status_code == 400
    for name in ("sales", "ops"):
        r = httpx.post(focus, json={"kernel_id": server["kernels"][name]["id"]}, headers=headers, timeout=10)
        assert r.status_code == 204

        async def bare(name: str = name) -> None:
            async with sdk(server["url"], "auto", AUTH) as (client, _):
                listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
                assert [k["label"] for k in listed if k["current"]] == [name]
                text = (await client.read_resource("nb://vars/x")).contents[0].text
                assert name in text

        anyio.run(bare)

    env = {**os.environ, "MCP_NOTEBOOK_SERVER_TOKEN": TOKEN}
    base = server["server"].url
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_notebook", "bridge", "--server", base], env=env
    )

    async def bridged() -> None:
        async with Client(params, cache=None) as client:
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            assert sorted(k["label"] for k in listed) == ["ops", "sales"]
            read = await client.call_tool("read_resource", {"uri": "nb://kernels/sales/vars/x"})
            assert not read.is_error and "sales" in read.content[0].text

    anyio.run(bridged)
