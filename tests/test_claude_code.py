"""The Claude Code channel (`mcp-notebook bridge --channel`) against the contract of Claude Code's
channels reference (code.claude.com/docs/en/channels-reference), field by field, in the order Claude
Code 2.1.x speaks (the stateless era on stdio: server/discover, then tools), and the real `claude`
CLI's non-interactive commands on what `mcp-notebook config` writes.

The contract, as published: a channel is an MCP server Claude Code spawns over stdio; it declares
``capabilities.experimental["claude/channel"] = {}`` (an empty object registers the listener) and may
give ``instructions`` (added to the system prompt: what the events are, what to do); it pushes
``notifications/claude/channel`` (a notification: no id) whose ``params`` are ``content`` (a string:
the body of the ``<channel source="NAME" …>`` tag the model sees) and ``meta`` (string values; each
key becomes an attribute, so keys must be identifiers: letters, digits, underscores; others are
dropped). What a signed-in session does with an event cannot be checked here (no account).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import Kernel
from test_channel import StdioPeer

pytestmark = pytest.mark.timeout(180)

STATELESS = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.197"},
}
IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
ROOT = Path(__file__).resolve().parents[1]


def check_channel_event(msg: dict[str, Any]) -> None:
    """One event, field by field, as the channels reference defines it."""
    assert set(msg) == {"jsonrpc", "method", "params"} and msg["jsonrpc"] == "2.0"  # a notification: no id
    assert msg["method"] == "notifications/claude/channel"
    params = msg["params"]
    assert set(params) <= {"content", "meta"} and isinstance(params["content"], str) and params["content"].strip()
    meta = params.get("meta", {})
    assert isinstance(meta, dict)
    for key, value in meta.items():
        assert IDENTIFIER.fullmatch(key), f"meta key {key!r} would be dropped by Claude Code"
        assert isinstance(value, str), f"meta[{key!r}] must be a string"


def test_the_channel_contract_in_claude_codes_order(tmp_path):
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)}, cwd=str(tmp_path))
    peer = StdioPeer(tmp_path)
    try:
        kernel.run("%config MCPHub.notebook_path = 'sales.ipynb'")
        kernel.load_hub()
        kernel.run("revenue = 1\napi_token = 'sk-proj-" + "A1b2C3d4" * 4 + "'")
        found = peer.request("server/discover", {"_meta": META})["result"]
        assert found["capabilities"]["experimental"]["claude/channel"] == {}  # registers the listener
        assert isinstance(found["instructions"], str) and "re-read" in found["instructions"]
        tools = peer.request("tools/list", {"_meta": META})["result"]["tools"]
        assert "read_resource" in {t["name"] for t in tools}
        read = peer.request(
            "tools/call", {"name": "read_resource", "arguments": {"uri": "nb://vars/revenue"}, "_meta": META}
        )
        assert not read["result"].get("isError"), read
        time.sleep(1.0)  # the channel's listen opens upstream
        kernel.run("revenue = 2")
        events = peer.channel_events(5)
        assert len(events) == 1, events
        check_channel_event(events[0])
        params = events[0]["params"]
        assert "nb://vars/revenue" in params["content"] and "sk-proj" not in json.dumps(params)
        assert params["meta"]["count"] == "1"
    finally:
        peer.close()
        kernel.shutdown()


def claude_bin() -> str | None:
    """The `claude` CLI: $MCP_CLAUDE_BIN, else tests/node's, else on PATH (npm @anthropic-ai/claude-code)."""
    pinned = ROOT / "tests" / "node" / "node_modules" / ".bin" / "claude"
    return os.environ.get("MCP_CLAUDE_BIN") or (str(pinned) if pinned.exists() else None) or shutil.which("claude")


@pytest.mark.skipif(
    claude_bin() is None, reason="no `claude` CLI: npm install @anthropic-ai/claude-code, set MCP_CLAUDE_BIN"
)
def test_the_real_claude_cli_on_what_config_writes(tmp_path):
    """`mcp-notebook config claude-code --channel --write`, then what Claude Code runs without an
    account: `claude mcp get` reads the project entry; `claude mcp add` + `claude mcp list` start
    the channel bridge and connect to it (the exchange is logged on the way)."""
    claude = claude_bin()
    assert claude is not None
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "PYTHONPATH": str(ROOT),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=120)

    wrote = run(sys.executable, "-m", "mcp_notebook", "config", "claude-code", "--channel", "--write")
    assert wrote.returncode == 0, wrote.stderr
    assert "--dangerously-load-development-channels server:notebook" in wrote.stdout
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["notebook"]
    assert entry["type"] == "stdio" and entry["args"][-2:] == ["bridge", "--channel"]
    got = run(claude, "mcp", "get", "notebook")
    assert got.returncode == 0 and "bridge --channel" in got.stdout and "Project config" in got.stdout, got.stdout

    log = tmp_path / "exchange"
    tee = f'tee -a {log}.in | "$@" | tee -a {log}.out'
    added = run(claude, "mcp", "add", "-s", "local", "nb-channel", "--", "sh", "-c", tee, "sh", sys.executable, "-m",
                "mcp_notebook", "bridge", "--channel")  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = run(claude, "mcp", "list")
    assert re.search(r"nb-channel: .*Connected", listed.stdout), listed.stdout
    sent = [json.loads(line) for line in Path(f"{log}.in").read_text().splitlines() if line.strip()]
    answered = {m.get("id"): m for m in map(json.loads, Path(f"{log}.out").read_text().splitlines()) if "id" in m}
    first = sent[0]
    assert first["method"] in ("server/discover", "initialize"), first
    assert answered[first["id"]]["result"]["capabilities"]["experimental"]["claude/channel"] == {}
    listed_tools = [answered[m["id"]]["result"]["tools"] for m in sent if m.get("method") == "tools/list"]
    for tools in listed_tools:  # each tool declares the size its results may reach (budget.py)
        assert all(t["_meta"]["anthropic/maxResultSizeChars"] == 50_000 for t in tools), tools
    print("claude", run(claude, "--version").stdout.strip(), "opened with", [m.get("method") for m in sent])
