"""A new user's path: a separate kernel environment, autoload on, a kernel started without
%load_ext, a client connected through the generated config (absolute paths, no activated venv),
and a tool-only client learning of an in-place edit of a frame it read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import anyio
import pytest
from kernel_harness import Kernel
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_notebook.commands import autoload


def run(python: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run(
        [python, "-m", "mcp_notebook", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A separate environment (its own sys.prefix) that sees this venv's packages through a .pth file."""
    env = tmp_path_factory.mktemp("kernel-env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    python = env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "_mcp_notebook_tests.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return env


def env_python(env: Path) -> str:
    return str(env / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))


STATE = (
    "import sys, json, mcp_notebook.inkernel.lifecycle as lc; print(json.dumps([sys.prefix, lc.current() is not None]))"
)


def test_autoload_then_connect_through_the_written_config(kernel_env, tmp_path):
    pytest.importorskip("pandas")
    python = env_python(kernel_env)
    runtime, ipython_dir, project = tmp_path / "runtime", tmp_path / "ipython", tmp_path / "project"
    project.mkdir()
    env = {"JUPYTER_RUNTIME_DIR": str(runtime), "IPYTHONDIR": str(ipython_dir)}
    config_file = kernel_env / "etc" / "ipython" / "ipython_kernel_config.json"

    assert "autoload off" in run(python, "autoload", "status", env=env).stdout
    on = run(python, "autoload", "on", env=env)
    assert on.returncode == 0, on.stderr
    assert str(config_file) in on.stdout
    assert json.loads(config_file.read_text()) == {"InteractiveShellApp": {"extra_extensions": ["mcp_notebook"]}}

    kernel = Kernel(env=env, python=python)
    try:
        prefix, loaded = json.loads(kernel.run(STATE).stdout)
        assert Path(prefix).resolve() == kernel_env.resolve() and loaded  # no %load_ext: autoload did it
        assert list(runtime.glob("mcp-notebook-*.json"))
        status = kernel.run("%mcp").stdout
        assert "autoload: on" in status and str(config_file) in status
        kernel.run("import pandas as pd; df = pd.DataFrame({'region': ['n', 's'], 'sales': [10.0, 20.0]})")

        wrote = run(python, "config", "claude-code", "--write", env=env, cwd=project)
        assert wrote.returncode == 0, wrote.stderr
        assert "approve" in wrote.stdout and "claude mcp list" in wrote.stdout
        server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["notebook"]
        assert Path(server["command"]).is_absolute()
        assert server["env"] == {"JUPYTER_RUNTIME_DIR": str(runtime)}

        async def go():
            # what the host runs: the config's command, args and env, nothing activated
            params = StdioServerParameters(command=server["command"], args=server["args"], env=server["env"])
            async with Client(params, cache=None) as client:
                read = await client.call_tool("read_resource", {"uri": "nb://frames/df"})
                assert not read.is_error and "sales" in read.content[0].text
                cursor = json.loads((await client.call_tool("changes_since", {})).content[0].text)["cursor"]
                await anyio.to_thread.run_sync(kernel.run, 'df["sales"] *= 1.5')
                # through the all-kernels front a change is listed once the hub's notification came
                # (milliseconds after the cell): a host polls with wait_seconds, as documented
                for _ in range(5):  # bounded: other URIs (nb://kernels) may change meanwhile
                    args = {"cursor": cursor, "wait_seconds": 10}
                    doc = json.loads((await client.call_tool("changes_since", args)).content[0].text)
                    if "nb://frames/df" in doc["changed"] or doc.get("timed_out"):
                        break
                    cursor = doc["cursor"]
                assert "nb://frames/df" in doc["changed"], doc
                assert any(
                    line.startswith("nb://frames/df: changed in place, DataFrame shape (2, 2)")
                    for line in doc["summary"]
                )

        anyio.run(go)
    finally:
        kernel.shutdown()

    off = run(python, "autoload", "off", env=env)
    assert off.returncode == 0 and "autoload off" in off.stdout
    assert not config_file.exists()  # the file held only our entry
    kernel = Kernel(env=env, python=python)
    try:
        assert json.loads(kernel.run(STATE).stdout)[1] is False
    finally:
        kernel.shutdown()


def test_autoload_edits_are_merge_safe_and_reversible(tmp_path):
    prefix = tmp_path / "prefix"
    path = autoload.env_config_path(prefix)
    path.parent.mkdir(parents=True)
    original = {
        "InteractiveShellApp": {"extra_extensions": ["other_ext"], "exec_lines": ["x = 1"]},
        "IPKernelApp": {"matplotlib": "inline"},
    }
    path.write_text(json.dumps(original))
    out = run(sys.executable, "autoload", "on", "--prefix", str(prefix))
    assert out.returncode == 0 and "autoload on" in out.stdout and f"--prefix {prefix}" in out.stdout
    undo = f"undo with: {Path(sys.executable).with_name('mcp-notebook')} autoload off --prefix {prefix}"
    assert undo in out.stdout  # copy-pasteable without an activated venv
    doc = json.loads(path.read_text())
    assert doc["InteractiveShellApp"]["extra_extensions"] == ["other_ext", "mcp_notebook"]
    assert doc["IPKernelApp"] == {"matplotlib": "inline"}
    assert run(sys.executable, "autoload", "on", "--prefix", str(prefix)).returncode == 0  # idempotent
    assert json.loads(path.read_text())["InteractiveShellApp"]["extra_extensions"] == ["other_ext", "mcp_notebook"]
    assert "autoload on" in run(sys.executable, "autoload", "status", "--prefix", str(prefix)).stdout
    assert run(sys.executable, "autoload", "off", "--prefix", str(prefix)).returncode == 0
    assert json.loads(path.read_text()) == original

    path.write_text("{not json")
    bad = run(sys.executable, "autoload", "on", "--prefix", str(prefix))
    assert bad.returncode == 1 and "not valid JSON" in bad.stderr and path.read_text() == "{not json"


def test_autoload_user_profile(tmp_path):
    env = {"IPYTHONDIR": str(tmp_path / "ipy")}
    out = run(sys.executable, "autoload", "on", "--user", env=env)
    assert out.returncode == 0, out.stderr
    path = tmp_path / "ipy" / "profile_default" / "ipython_kernel_config.json"
    assert json.loads(path.read_text())["InteractiveShellApp"]["extra_extensions"] == ["mcp_notebook"]
    assert "autoload on" in run(sys.executable, "autoload", "status", "--user", env=env).stdout
    assert run(sys.executable, "autoload", "off", "--user", env=env).returncode == 0
    assert not path.exists()


def test_panel_setup_lines_name_this_environment(monkeypatch, tmp_path):
    from mcp_notebook.commands import clients_config

    monkeypatch.setattr(clients_config, "_setup_lines", None)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    lines = {row["client"]: row["line"] for row in clients_config.setup_lines()}
    script = Path(sys.executable).with_name("mcp-notebook")
    assert lines["Claude Code"] == f"claude mcp add -e JUPYTER_RUNTIME_DIR={tmp_path} notebook -- {script} bridge"
    assert lines["Cursor"] == f"JUPYTER_RUNTIME_DIR={tmp_path} {script} config cursor --write"
    assert lines["Codex"] == f"JUPYTER_RUNTIME_DIR={tmp_path} {script} config codex --write"
    assert set(lines) == {"Claude Code", "Claude Desktop", "VS Code", "Cursor", "Codex"}


HINTS = {
    "claude-code": "claude mcp list",
    "claude-desktop": "Restart Claude Desktop",
    "vscode": "start the 'notebook' server",
    "cursor": "enable the 'notebook' server",
}


@pytest.mark.parametrize("host", sorted(HINTS))
def test_config_write_says_what_the_host_needs_next(host, tmp_path):
    target = tmp_path / "cfg.json"
    out = run(sys.executable, "config", host, "--path", str(target), env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert HINTS[host] in out.stdout
    server = json.loads(target.read_text())["servers" if host == "vscode" else "mcpServers"]["notebook"]
    assert Path(server["command"]).is_absolute() and "bridge" in server["args"]
    assert server["env"] == {"JUPYTER_RUNTIME_DIR": str(tmp_path)}


def test_config_leaves_out_the_default_runtime_dir(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR")}
    out = subprocess.run(
        [sys.executable, "-m", "mcp_notebook", "config", "cursor"], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    server = json.loads(out.stdout)["mcpServers"]["notebook"]
    assert "env" not in server and server["args"][-1] == "bridge"
    assert "enable the 'notebook' server" in out.stderr  # the next step, on stderr: stdout stays pasteable JSON


def test_http_write_warns_about_the_token_and_offers_gitignore(hub, tmp_path):
    runtime = {"JUPYTER_RUNTIME_DIR": str(Path(hub["runtime_file"]).parent)}
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".gitignore").write_text("*.pyc")
    out = run(sys.executable, "config", "claude-code", "--http", "--write", env=runtime, cwd=repo)
    assert out.returncode == 0, out.stderr
    assert "holds a token" in out.stderr and "--gitignore" in out.stderr
    assert hub["token"] not in out.stdout + out.stderr
    assert (repo / ".gitignore").read_text() == "*.pyc"  # nothing added unless asked

    for _ in range(2):  # idempotent
        again = run(sys.executable, "config", "claude-code", "--http", "--gitignore", env=runtime, cwd=repo)
        assert again.returncode == 0, again.stderr
        assert "added .mcp.json" in again.stderr and "warning" not in again.stderr
    lines = (repo / ".gitignore").read_text().splitlines()
    assert lines[0] == "*.pyc" and lines.count("/.mcp.json") == 1

    outside = tmp_path / "loose"
    outside.mkdir()
    lone = run(sys.executable, "config", "cursor", "--http", "--gitignore", env=runtime, cwd=outside)
    assert lone.returncode == 0 and "not inside a git repository" in lone.stderr and "warning" in lone.stderr


def test_demo_says_how_to_connect_and_keeps_the_kernel_notice_away(tmp_path):
    out = run(sys.executable, "demo", "--seconds", "1", env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert "showing 8 of" in out.stdout
    assert f"JUPYTER_RUNTIME_DIR={tmp_path} " in out.stdout and " bridge\n" in out.stdout
    assert "claude mcp add -e JUPYTER_RUNTIME_DIR=" in out.stdout
    assert " config claude-code|claude-desktop|vscode|cursor --write" in out.stdout
    assert "running over TCP without encryption" not in out.stderr
