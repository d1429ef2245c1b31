"""`mcp-notebook bridge` as a subprocess, driven by the official SDK's stdio client, against a real kernel."""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from kernel_harness import Kernel
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from sdk import Inbox

NOTEBOOK = "/tmp/mcp-notebook-tests/bridge-demo.ipynb"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bridge-runtime")


@pytest.fixture(scope="module")
def nb_kernel(runtime: Path) -> Iterator[Kernel]:
    """A kernel that knows its notebook path, as Jupyter Server tells it (JPY_SESSION_NAME)."""
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime), "JPY_SESSION_NAME": NOTEBOOK})
    try:
        k.load_hub()
        yield k
    finally:
        k.shutdown()


def bridge_params(runtime: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_notebook.commands.cli", "bridge", *args],
        env={"JUPYTER_RUNTIME_DIR": str(runtime)},
    )


@contextlib.asynccontextmanager
async def bridged(runtime: Path, *args: str, mode: str = "legacy") -> AsyncIterator[tuple[Client, Inbox]]:
    inbox = Inbox()
    client = Client(bridge_params(runtime, *args), mode=mode, message_handler=inbox.handle, cache=None)
    async with client:
        yield client, inbox


async def in_kernel(kernel: Kernel, code: str) -> Any:
    return await anyio.to_thread.run_sync(kernel.run, code)


def var(read: Any) -> dict[str, Any]:
    return json.loads(read.contents[0].text)


def test_list_read_subscribe_and_survive_restart(nb_kernel, runtime):
    nb_kernel.run("bx = [1, 2]")

    async def go():
        async with bridged(runtime, "--notebook", NOTEBOOK) as (client, inbox):
            assert client.protocol_version == "2025-11-25"
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert {"nb://vars", "nb://vars/bx"} <= uris
            assert var(await client.read_resource("nb://vars/bx"))["repr"] == "[1, 2]"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://vars/bx")
            await in_kernel(nb_kernel, "bx.append(3)")
            await inbox.wait_for(lambda i: "nb://vars/bx" in i.updated)

            # the kernel restarts; its new process loads the extension again (a new port and token)
            old_url = nb_kernel.info()["url"]
            await anyio.to_thread.run_sync(nb_kernel.restart)
            info = await anyio.to_thread.run_sync(nb_kernel.load_hub)
            assert info["url"] != old_url
            await in_kernel(nb_kernel, "bx = 'after restart'")
            with anyio.fail_after(30):
                read = await client.read_resource("nb://vars/bx")
            assert var(read)["repr"] == "'after restart'"
            # the subscription was restored on the new hub
            await inbox.wait_for(lambda i: i.list_changed >= 1)
            before = inbox.updated.count("nb://vars/bx")
            await in_kernel(nb_kernel, "bx = 'changed again'")
            await inbox.wait_for(lambda i: i.updated.count("nb://vars/bx") > before, timeout=15)

    anyio.run(go)


def test_stateless_era_through_the_bridge(nb_kernel, runtime):
    nb_kernel.run("mx = {'k': 1}")

    async def go():
        async with bridged(runtime, "--latest", mode="auto") as (client, _):
            assert client.protocol_version == "2026-07-28"
            assert var(await client.read_resource("nb://vars/mx"))["type"] == "dict"
            async with client.listen(resource_subscriptions=["nb://vars/mx"]) as sub:
                await in_kernel(nb_kernel, "mx['j'] = 2")
                with anyio.fail_after(15):
                    async for event in sub:
                        if getattr(event, "uri", None) == "nb://vars/mx":
                            break

    anyio.run(go)


def test_tools_through_the_bridge_see_a_change(nb_kernel, runtime):
    async def go():
        async with bridged(runtime, "--notebook", NOTEBOOK) as (client, _):
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"list_resources", "read_resource", "changes_since"}
            start = json.loads((await client.call_tool("changes_since", {"wait_seconds": 0})).content[0].text)["cursor"]
            await in_kernel(nb_kernel, "tool_seen = 7")
            result = await client.call_tool("changes_since", {"cursor": start, "wait_seconds": 10})
            doc = json.loads(result.content[0].text)
            assert "nb://vars/tool_seen" in doc["changed"]
            links = [c for c in result.content if isinstance(c, types.ResourceLink)]
            assert "nb://vars/tool_seen" in {str(link.uri) for link in links}
            read = await client.call_tool("read_resource", {"uri": "nb://vars/tool_seen"})
            assert json.loads(read.content[0].text)["repr"] == "7"

    anyio.run(go)


def test_no_hub_is_a_clear_error(tmp_path):
    async def go():
        for mode in ("legacy", "auto"):
            with pytest.raises(BaseException) as info:
                async with bridged(tmp_path, "--notebook", "/nowhere/missing.ipynb", mode=mode):
                    pass
            errors = [info.value]
            while hasattr(errors[0], "exceptions"):  # an ExceptionGroup from the client's task groups
                errors = list(errors[0].exceptions)
            assert isinstance(errors[0], MCPError), errors
            assert "No running mcp-notebook hub" in str(errors[0])
            assert "%load_ext mcp_notebook" in str(errors[0])

    anyio.run(go)


def test_bridge_output_never_holds_the_token(nb_kernel, runtime):
    """Raw stdio: everything the bridge writes (stdout and stderr) is free of the token."""
    import subprocess

    token = nb_kernel.info()["token"]
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    lines = [
        init,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/list"},
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_notebook.commands.cli", "bridge", "--notebook", NOTEBOOK],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        timeout=60,
        env={"JUPYTER_RUNTIME_DIR": str(runtime), "PATH": "/usr/bin:/bin"},
    )
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert replies[0]["result"]["protocolVersion"] == "2025-06-18"
    assert any(r.get("id") == 2 and r["result"]["resources"] for r in replies)
    assert token not in proc.stdout and token not in proc.stderr
