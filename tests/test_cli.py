"""`mcp-notebook list` and `mcp-notebook config` against a real hub's runtime files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def cli(runtime: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
    return subprocess.run(
        [sys.executable, "-m", "mcp_notebook.commands.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def runtime(hub) -> Path:
    return Path(hub["runtime_file"]).parent


def test_list_shows_live_hubs_and_removes_stale_files(hub, runtime):
    stale = runtime / "mcp-notebook-deadbeef.json"
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale.write_text(
        json.dumps({"url": "http://127.0.0.1:9/mcp", "pid": int(dead_pid.stdout), "token": "s3cret-stale"})
    )
    kept = cli(runtime, "list", "--keep-stale")
    assert "stale" in kept.stdout and stale.exists()
    out = cli(runtime, "list")
    assert out.returncode == 0, out.stderr
    assert hub["url"] in out.stdout and "alive" in out.stdout and str(hub["pid"]) in out.stdout
    assert "stale (removed)" in out.stdout and not stale.exists()
    listed = json.loads(cli(runtime, "list", "--json").stdout)
    assert [r["url"] for r in listed] == [hub["url"]] and listed[0]["alive"] is True
    for result in (out, kept):
        assert hub["token"] not in result.stdout + result.stderr and "s3cret-stale" not in result.stdout


@pytest.mark.parametrize("host", ["claude-code", "claude-desktop", "vscode", "cursor"])
def test_config_prints_bridge_snippet(runtime, host):
    out = cli(runtime, "config", host)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    server = doc["servers" if host == "vscode" else "mcpServers"]["notebook"]
    assert server["args"][-1] == "bridge"  # no selector: every kernel on this machine
    assert server["env"] == {"JUPYTER_RUNTIME_DIR": str(runtime)}


def test_http_config_prints_no_token_but_writes_it(hub, runtime, tmp_path):
    token = hub["token"]
    for host in ("claude-code", "vscode", "cursor"):
        out = cli(runtime, "config", host, "--http")
        assert out.returncode == 0, out.stderr
        assert hub["url"] in out.stdout and token not in out.stdout + out.stderr
    assert cli(runtime, "config", "claude-desktop", "--http").returncode == 1

    target = tmp_path / ".vscode" / "mcp.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"servers": {"other": {"type": "stdio", "command": "x"}}}))
    wrote = cli(runtime, "config", "vscode", "--http", "--path", str(target))
    assert wrote.returncode == 0, wrote.stderr
    assert token not in wrote.stdout + wrote.stderr
    doc = json.loads(target.read_text())
    assert set(doc["servers"]) == {"other", "notebook"}
    assert doc["servers"]["notebook"] == {
        "type": "http",
        "url": hub["url"],
        "headers": {"Authorization": f"Bearer {token}"},
    }
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_config_write_default_path_for_claude_code(runtime, tmp_path):
    out = cli(runtime, "config", "claude-code", "--write", "--notebook", "/x/y.ipynb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    server = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["notebook"]
    assert server["type"] == "stdio" and server["args"][-3:] == ["bridge", "--notebook", "/x/y.ipynb"]


def test_config_refuses_to_clobber_jsonc(runtime, tmp_path):
    target = tmp_path / "mcp.json"
    target.write_text('{ // a comment\n "servers": {} }')
    out = cli(runtime, "config", "vscode", "--path", str(target))
    assert out.returncode == 1 and "not plain JSON" in out.stderr
    assert "// a comment" in target.read_text()
