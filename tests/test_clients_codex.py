"""`mcp-notebook config codex`: Codex's config.toml, written so that everything else stays, and read
back by the real `codex` CLI (tests/node's @openai/codex) without an account."""

from __future__ import annotations

import json
import os
import select
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kernel_harness import Kernel

from mcp_notebook.commands import clients_config as cc
from mcp_notebook.commands.clients_toml import TomlError, merged_toml, parse, table

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)

OTHER = """\
# my Codex settings: this comment stays
model = "o3"  # and this one

[mcp_servers.other]
command = "x"
args = ["a", "b"]
env = { KEY = "v" }

[mcp_servers.notebook]
command = "old"
args = []

[mcp_servers.notebook.env]
OLD = "1"

[profiles.fast]
model = "o4-mini"   # spacing kept
"""


def codex_bin() -> str | None:
    """The `codex` CLI: $MCP_CODEX_BIN, else tests/node's, else on PATH (npm @openai/codex)."""
    pinned = ROOT / "tests" / "node" / "node_modules" / ".bin" / "codex"
    return os.environ.get("MCP_CODEX_BIN") or (str(pinned) if pinned.exists() else None) or shutil.which("codex")


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_notebook", *args], capture_output=True, text=True, timeout=60, env=env
    )


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    (tmp_path / "codex").mkdir()
    return {
        **os.environ,
        "CODEX_HOME": str(tmp_path / "codex"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "PYTHONPATH": str(ROOT),
    }


def test_table_round_trips_awkward_values():
    server = {"command": 'C:\\x "y"\tz', "args": ["bridge", "ünï", "\x7f"], "env": {"A B": "1", "C": "é\n"}}
    assert parse(table("my server", server), "t")["mcp_servers"]["my server"] == server
    assert parse(table("nb", {"url": "http://h/mcp", "http_headers": {"Authorization": "Bearer t"}}), "t") == {
        "mcp_servers": {"nb": {"url": "http://h/mcp", "http_headers": {"Authorization": "Bearer t"}}}
    }


def test_merge_replaces_our_table_and_keeps_every_other_line():
    server = {"command": "/bin/mcp-notebook", "args": ["bridge"], "env": {"JUPYTER_RUNTIME_DIR": "/r"}}
    text = merged_toml(OTHER, "notebook", server, "config.toml")
    doc = parse(text, "config.toml")
    assert doc["mcp_servers"]["notebook"] == server
    assert doc["mcp_servers"]["other"] == {"command": "x", "args": ["a", "b"], "env": {"KEY": "v"}}
    assert doc["profiles"] == {"fast": {"model": "o4-mini"}} and doc["model"] == "o3"
    kept = [
        line
        for line in OTHER.splitlines()
        if "notebook" not in line and line not in ('command = "old"', "args = []", 'OLD = "1"')
    ]
    assert [line for line in text.splitlines() if line in kept] == kept  # byte for byte, in order
    assert "OLD" not in text and text.count("[mcp_servers.notebook]") == 1
    assert merged_toml(text, "notebook", server, "config.toml") == text  # idempotent


def test_merge_appends_to_a_file_without_our_table_and_to_an_empty_one():
    server = {"command": "c", "args": ["bridge"]}
    start = OTHER.split("[mcp_servers.notebook]")[0].rstrip("\n")  # no final newline
    text = merged_toml(start, "notebook", server, "f")
    assert text.startswith(start + "\n") and parse(text, "f")["mcp_servers"]["notebook"] == server
    assert parse(merged_toml("", "notebook", server, "f"), "f") == {"mcp_servers": {"notebook": server}}


def test_refuses_invalid_toml_and_forms_it_does_not_edit():
    with pytest.raises(TomlError, match="not valid TOML"):
        merged_toml('model = "o3"\n[mcp_servers.other\n', "notebook", {"command": "c"}, "cfg")
    inline = '[mcp_servers]\nnotebook = { command = "old" }\n'
    with pytest.raises(TomlError, match="in a form this command does not edit"):
        merged_toml(inline, "notebook", {"command": "c", "args": []}, "cfg")
    with pytest.raises(TomlError, match="not a table"):
        merged_toml('mcp_servers = "x"\n', "notebook", {"command": "c"}, "cfg")


def test_cli_writes_codex_home_and_refuses_a_broken_file(env):
    path = Path(env["CODEX_HOME"]) / "config.toml"
    path.write_text(OTHER)
    printed = cli(env, "config", "codex")
    assert printed.returncode == 0, printed.stderr
    entry = parse(printed.stdout, "stdout")["mcp_servers"]["notebook"]
    assert entry["args"] == ["bridge"] and entry["env"] == {"JUPYTER_RUNTIME_DIR": env["JUPYTER_RUNTIME_DIR"]}
    assert path.read_text() == OTHER  # printing writes nothing
    wrote = cli(env, "config", "codex", "--write", "--latest")
    assert wrote.returncode == 0 and str(path) in wrote.stdout, wrote.stderr
    assert parse(path.read_text(), "f")["mcp_servers"]["notebook"] == {**entry, "args": ["bridge", "--latest"]}
    path.write_text("model = [\n")
    bad = cli(env, "config", "codex", "--write")
    assert bad.returncode == 1 and "is not valid TOML" in bad.stderr and path.read_text() == "model = [\n"
    assert cli(env, "config", "codex", "--channel").returncode == 1  # Claude Code only


def test_http_entry_holds_the_token_only_in_the_written_file(hub, env, tmp_path):
    env["JUPYTER_RUNTIME_DIR"] = str(Path(hub["runtime_file"]).parent)
    printed = cli(env, "config", "codex", "--http")
    assert printed.returncode == 0 and hub["token"] not in printed.stdout + printed.stderr, printed.stderr
    assert parse(printed.stdout, "stdout")["mcp_servers"]["notebook"]["url"] == hub["url"]
    path = tmp_path / "elsewhere.toml"
    wrote = cli(env, "config", "codex", "--http", "--path", str(path))
    assert wrote.returncode == 0 and hub["token"] not in wrote.stdout + wrote.stderr, wrote.stderr
    assert parse(path.read_text(), "f")["mcp_servers"]["notebook"] == {
        "url": hub["url"],
        "http_headers": {"Authorization": f"Bearer {hub['token']}"},
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_setup_lines_offer_codex(monkeypatch):
    monkeypatch.setattr(cc, "_setup_lines", None)
    lines = {row["client"]: row["line"] for row in cc.setup_lines()}
    assert lines["Codex"].endswith(" config codex --write")
    monkeypatch.setattr(cc, "_setup_lines", None)


@pytest.mark.skipif(codex_bin() is None, reason="no `codex` CLI: cd tests/node && npm ci (or set MCP_CODEX_BIN)")
def test_the_real_codex_cli_reads_what_config_writes(env):
    codex = codex_bin()
    assert codex is not None
    path = Path(env["CODEX_HOME"]) / "config.toml"
    path.write_text(OTHER)
    assert cli(env, "config", "codex", "--write").returncode == 0
    entry = parse(path.read_text(), "f")["mcp_servers"]["notebook"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([codex, *args], capture_output=True, text=True, timeout=120, env=env)

    listed = run("mcp", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    servers = {s["name"]: s for s in json.loads(listed.stdout)}
    assert set(servers) == {"notebook", "other"}
    got = run("mcp", "get", "notebook", "--json")
    assert got.returncode == 0, got.stderr
    for shown in (servers["notebook"], json.loads(got.stdout)):
        transport = shown["transport"]
        assert shown["enabled"] is True and transport["type"] == "stdio"
        assert (transport["command"], transport["args"], transport["env"]) == (
            entry["command"],
            entry["args"],
            entry["env"],
        )
    print("codex", run("--version").stdout.strip(), "read", transport)


def app_server_status(codex: str, env: dict[str, str], timeout: float = 90) -> dict:
    """`codex app-server` (no account needed): initialize, then mcpServerStatus/list, which starts
    the configured MCP servers and lists their tools and resources. Bounded by ``timeout``."""
    proc = subprocess.Popen(
        [codex, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    messages = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "mcp-notebook-tests", "version": "0"}}},
        {"method": "initialized"},
        {"id": 2, "method": "mcpServerStatus/list", "params": {}},
    ]
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    proc.stdin.flush()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = proc.stdout.readline() if ready else b""
            if not line:
                break
            msg = json.loads(line)
            if msg.get("id") == 2:
                return msg
    finally:
        proc.kill()
        proc.wait(timeout=30)
    raise AssertionError("codex app-server did not answer mcpServerStatus/list")


@pytest.mark.skipif(codex_bin() is None, reason="no `codex` CLI: cd tests/node && npm ci (or set MCP_CODEX_BIN)")
@pytest.mark.parametrize("http", [False, True], ids=["bridge", "http"])
def test_codex_connects_to_what_config_wrote_and_lists_a_live_kernel(env, tmp_path, http):
    """Codex starts the bridge `config codex --write` wrote (or reaches the hub over HTTP with the
    written header) and lists its tools and a real kernel's variable."""
    codex = codex_bin()
    assert codex is not None
    runtime = Path(env["JUPYTER_RUNTIME_DIR"])
    runtime.mkdir()
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)}, cwd=str(tmp_path))
    try:
        kernel.run("%config MCPHub.notebook_path = 'sales.ipynb'")
        kernel.load_hub()
        kernel.run("revenue_by_region = {'north': 1234}")
        assert cli(env, "config", "codex", "--write", *(["--http"] if http else [])).returncode == 0
        reply = app_server_status(codex, env)
    finally:
        kernel.shutdown()
    status = {s["name"]: s for s in reply["result"]["data"]}["notebook"]
    assert status["serverInfo"]["name"] == "mcp-notebook" and not status.get("toolsError"), status
    assert {"read_resource", "list_resources"} <= set(status["tools"])
    uris = [r["uri"] for r in status["resources"]]
    assert (http or "nb://kernels" in uris) and any(u.endswith("/revenue_by_region") for u in uris), uris
    print("codex app-server", "http" if http else "bridge", "listed", sorted(status["tools"]), len(uris), "resources")
