"""Two notebooks' kernels on one machine: discovery lists both, the bridge picks the named one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
from kernel_harness import Kernel
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def test_list_shows_both_and_bridge_picks_by_notebook(tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    a_path, b_path = str(tmp_path / "A.ipynb"), str(tmp_path / "B.ipynb")
    env = {"JUPYTER_RUNTIME_DIR": str(runtime)}
    a = Kernel(env={**env, "JPY_SESSION_NAME": a_path})
    b = Kernel(env={**env, "JPY_SESSION_NAME": b_path})
    try:
        a_info, b_info = a.load_hub(), b.load_hub()
        a.run("only_in_a = 'alpha'")
        b.run("only_in_b = 'beta'")
        listed = subprocess.run(
            [sys.executable, "-m", "mcp_notebook.commands.cli", "list", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **env},
        )
        hubs = {h["notebook_path"]: h for h in json.loads(listed.stdout)}
        assert set(hubs) == {a_path, b_path}
        assert hubs[a_path]["url"] == a_info["url"] and hubs[b_path]["url"] == b_info["url"]
        assert all(h["alive"] for h in hubs.values())
        assert a_info["token"] not in listed.stdout and b_info["token"] not in listed.stdout

        params = StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_notebook.commands.cli", "bridge", "--notebook", a_path], env=env
        )

        async def go():
            async with Client(params, mode="legacy", cache=None) as client:
                uris = {str(r.uri) for r in (await client.list_resources()).resources}
                assert "nb://vars/only_in_a" in uris and "nb://vars/only_in_b" not in uris
                read = await client.read_resource("nb://vars/only_in_a")
                assert json.loads(read.contents[0].text)["repr"] == "'alpha'"

        anyio.run(go)
    finally:
        a.shutdown()
        b.shutdown()
