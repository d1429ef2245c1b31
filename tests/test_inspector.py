"""The MCP Inspector CLI (Node) against a live kernel: over HTTP with the token header, and through the bridge.

The inspector comes from tests/node (package.json pins @modelcontextprotocol/inspector and node 22);
MCP_NODE_BIN_DIR overrides where its binaries are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(os.environ.get("MCP_NODE_BIN_DIR", Path(__file__).parent / "node" / "node_modules" / ".bin"))


def inspector(*args: str, env: dict[str, str] | None = None) -> dict:
    exe = BIN / "mcp-inspector"
    node = BIN / "node"
    if not exe.exists() or not node.exists():
        pytest.fail(
            f"MCP Inspector not found in {BIN}: run `npm ci` in tests/node (or set MCP_NODE_BIN_DIR to a "
            "node_modules/.bin holding mcp-inspector and node >= 22.19)"
        )
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # node 22 from the same folder comes first
    out = subprocess.run(
        [str(exe), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": path, **(env or {})},
    )
    assert out.returncode == 0, f"inspector failed ({out.returncode}): {out.stderr[-2000:]}"
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def target(kernel, hub):
    kernel.run("inspected = [10, 20, 30]")
    return hub


def bridge_target(hub: dict) -> list[str]:
    runtime = str(Path(hub["runtime_file"]).parent)
    return ["-e", f"JUPYTER_RUNTIME_DIR={runtime}", "--", sys.executable, "-m", "mcp_notebook.commands.cli", "bridge"]


def http_target(hub: dict) -> list[str]:
    return [hub["url"], "--header", f"Authorization: Bearer {hub['token']}"]


@pytest.mark.parametrize("via", ["http", "bridge"])
def test_inspector_lists_reads_and_templates(target, via):
    where = http_target(target) if via == "http" else bridge_target(target)
    # options before "--" so the bridge's own arguments stay its own
    listed = {r["uri"] for r in inspector("--method", "resources/list", *where)["resources"]}
    if via == "http":
        assert "nb://vars/inspected" in listed
    else:  # the bridge serves every kernel: qualified URIs listed, bare ones the current kernel's
        assert "nb://kernels" in listed and any(u.endswith("/vars/inspected") for u in listed), listed
    read = inspector("--method", "resources/read", "--uri", "nb://vars/inspected", *where)
    assert json.loads(read["contents"][0]["text"])["repr"] == "[10, 20, 30]"
    templates = inspector("--method", "resources/templates/list", *where)
    assert "nb://vars/{name}" in {t["uriTemplate"] for t in templates["resourceTemplates"]}
    tools = inspector("--method", "tools/list", *where)
    assert {t["name"] for t in tools["tools"]} == {"list_resources", "read_resource", "changes_since"}
