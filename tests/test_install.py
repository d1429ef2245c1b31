"""The install paths of a new user, for real: a wheel built by pip from the source tree (isolated build:
hatch-jupyter-builder runs jlpm in labextension/), installed NON-editable into fresh venvs with no Node
on PATH, then:

- the wheel holds the prebuilt JupyterLab extension and the server-extension config (#11, #12);
- `jupyter labextension list` / `jupyter server extension list` show both enabled, no extra step;
- a kernel environment (wheel + pandas, its own kernelspec, `mcp-notebook autoload on`) started by a
  JupyterLab that lives in ANOTHER venv: `/mcp-notebook/kernels` lists it behind the Jupyter token,
  the panel in headless chromium shows its hub running (screenshot in tests/artifacts/);
- the config written by the kernel env's `mcp-notebook config`, run with a bare environment
  (`env -i HOME PATH=/usr/bin:/bin`, as hosts start stdio servers): a tool-only client that read a
  frame learns of an in-place edit through `changes_since` (#16).

The wheel is shared (tests/wheels.py); the venvs are built once per module (about a minute on 2 cores);
MCP_NB_INSTALL_TESTS=0 skips the module.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from wheels import built_wheel

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("MCP_NB_ARTIFACTS") or Path(__file__).parent / "artifacts")
BARE_PATH = "/usr/bin:/bin"

pytestmark = [
    pytest.mark.skipif(os.environ.get("MCP_NB_INSTALL_TESTS") == "0", reason="MCP_NB_INSTALL_TESTS=0"),
    pytest.mark.skipif(os.name == "nt" or shutil.which("git") is None, reason="needs git and a POSIX venv"),
    pytest.mark.timeout(900),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600, **kw: Any):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _no_node_env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a user who has this venv's bin on PATH and no Node at all."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    return {**env, "PATH": str(venv / "bin"), **extra}


@pytest.fixture(scope="module")
def wheel() -> Path:
    """The wheel of a fresh clone's files (tests/wheels.py: built once per source state, shared)."""
    return built_wheel()


def _venv(path: Path, wheel: Path, *packages: str) -> subprocess.Popen:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    cmd = [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    cmd.append("--no-compile")  # bytecode only for what a test imports (written on import)
    return subprocess.Popen(
        [*cmd, str(wheel), *packages],
        env=_no_node_env(path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture(scope="module")
def envs(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two venvs from the wheel, installed in parallel without Node: JupyterLab's and the kernel's."""
    base = tmp_path_factory.mktemp("envs")
    jobs = {
        "lab": _venv(base / "lab", wheel, "jupyterlab>=4.2,<5"),
        "kernel": _venv(base / "kernel", wheel, "pandas"),
    }
    for name, job in jobs.items():
        output, _ = job.communicate(timeout=900)
        assert job.returncode == 0, f"pip install into the {name} venv failed:\n{output[-3000:]}"
    return {"lab": base / "lab", "kernel": base / "kernel", "base": base}


def test_wheel_ships_both_extensions_prebuilt(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    data = "mcp_notebook-" + wheel.name.split("-")[1] + ".data/data/"
    lab = data + "share/jupyter/labextensions/mcp-notebook/"
    assert lab + "package.json" in names and lab + "install.json" in names and lab + "static/style.js" in names
    assert any(re.fullmatch(re.escape(lab) + r"static/remoteEntry\.[0-9a-f]+\.js", n) for n in names)
    config = data + "etc/jupyter/jupyter_server_config.d/mcp_notebook.json"
    assert config in names
    enabled = json.loads(zipfile.ZipFile(wheel).read(config))
    assert enabled["ServerApp"]["jpserver_extensions"]["mcp_notebook"] is True
    assert not any("node_modules" in n or n.startswith("labextension/") for n in names)
    assert "mcp_notebook/views/views.html" in names, "the MCP Apps views are not in the wheel"
    assert not any(n.startswith("views/") for n in names)


def test_both_extensions_listed_enabled_after_pip_install_without_node(envs):
    lab = envs["lab"]
    assert shutil.which("node", path=str(lab / "bin")) is None
    env = _no_node_env(lab, JUPYTER_CONFIG_DIR=str(envs["base"] / "cfg"), JUPYTER_DATA_DIR=str(envs["base"] / "data"))
    out = _run([str(lab / "bin" / "jupyter"), "labextension", "list"], env=env, timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    assert re.search(r"mcp-notebook v\S+ enabled\s+OK \(python, mcp-notebook\)", text), text
    out = _run([str(lab / "bin" / "jupyter"), "server", "extension", "list"], env=env, timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    assert re.search(r"mcp_notebook enabled", text) and re.search(r"mcp_notebook \S+ OK", text), text


@pytest.fixture(scope="module")
def lab_server(envs: dict[str, Path]) -> Iterator[dict[str, Any]]:
    """JupyterLab from the lab venv; the kernel venv's kernelspec (autoload on) in its JUPYTER_PATH."""
    base, kernel = envs["base"] / "lab-run", envs["kernel"]
    root, runtime, kdata = base / "root", base / "runtime", base / "kdata"
    for d in (root, runtime, base / "config" / "labconfig", base / "data"):
        d.mkdir(parents=True)
    bare = {"HOME": str(base), "PATH": BARE_PATH, "IPYTHONDIR": str(base / "ipython")}
    _run([str(kernel / "bin" / "python"), "-m", "ipykernel", "install", "--prefix", str(kdata), "--name", "kenv"], bare)
    on = _run([str(kernel / "bin" / "mcp-notebook"), "autoload", "on"], env=bare)
    assert "autoload on" in on.stdout and f"undo with: {kernel}/bin/mcp-notebook autoload off" in on.stdout
    disabled = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
    (base / "config" / "labconfig" / "page_config.json").write_text(json.dumps(disabled))
    token, port = secrets.token_hex(16), _free_port()
    env = _no_node_env(
        envs["lab"],
        HOME=str(base),
        JUPYTER_RUNTIME_DIR=str(runtime),
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTER_PATH=str(kdata / "share" / "jupyter"),
        IPYTHONDIR=str(base / "ipython"),
    )
    cmd = [str(envs["lab"] / "bin" / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    cmd += ["--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"]
    cmd += ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (base / "server.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (base / "server.log").read_text()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/api/status", params={"token": token}, timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, "jupyter lab did not start within 90 s"
            time.sleep(0.5)
        yield {"url": url, "token": token, "root": root, "runtime": runtime, "base": base, "kernel": kernel}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _kernels_with_hub(lab: dict[str, Any], kernel_id: str, timeout: float = 60) -> list[dict[str, Any]]:
    headers = {"Authorization": f"token {lab['token']}"}
    deadline = time.monotonic() + timeout
    while True:
        listed = httpx.get(f"{lab['url']}/mcp-notebook/kernels", headers=headers, timeout=10).json()
        if any(k["kernel_id"] == kernel_id for k in listed) or time.monotonic() > deadline:
            return listed
        time.sleep(0.5)


def test_server_extension_and_panel_from_the_pip_install(lab_server):
    url, token = lab_server["url"], lab_server["token"]
    assert httpx.get(f"{url}/mcp-notebook/kernels", timeout=10).status_code == 403
    assert (
        httpx.get(f"{url}/mcp-notebook/kernels", headers={"Authorization": "token nope"}, timeout=10).status_code == 403
    )
    started = httpx.post(f"{url}/api/kernels", json={"name": "kenv"}, params={"token": token}, timeout=60).json()
    listed = _kernels_with_hub(lab_server, started["id"])
    assert [k for k in listed if k["kernel_id"] == started["id"]], listed  # autoload, nothing else enabled

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    playwright_api = pytest.importorskip("playwright.async_api")
    nb = {"cells": [], "metadata": {"kernelspec": {"name": "kenv", "display_name": "kenv", "language": "python"}}}
    (lab_server["root"] / "start.ipynb").write_text(json.dumps({**nb, "nbformat": 4, "nbformat_minor": 5}))

    async def browse() -> None:
        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            try:
                page = await browser.new_page(viewport={"width": 1400, "height": 900})
                page.set_default_timeout(90_000)
                await page.goto(f"{url}/lab/tree/start.ipynb?token={token}")
                await page.wait_for_selector(".jp-Notebook")
                await page.click(".jp-SideBar [data-id='mcp-notebook-panel']")
                # the notebook's kernel (the kernel venv, autoload on) already has its hub
                await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-badge[data-status='running']")
                assert (await page.inner_text(".mcp-nb-status")).startswith("MCP: on")
                setup = await page.inner_text("#mcp-notebook-panel .mcp-nb-setup")
                assert f"-- {lab_server['kernel']}/bin/mcp-notebook bridge" in setup  # the kernel's env, not lab's
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "install-pip-lab-panel.png"))
            finally:
                await browser.close()

    anyio.run(browse)


def test_tool_only_client_through_the_generated_config_with_a_bare_environment(lab_server):
    from jupyter_client.blocking import BlockingKernelClient
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    url, token, runtime = lab_server["url"], lab_server["token"], lab_server["runtime"]
    started = httpx.post(f"{url}/api/kernels", json={"name": "kenv"}, params={"token": token}, timeout=60).json()
    assert _kernels_with_hub(lab_server, started["id"])
    kc = BlockingKernelClient(connection_file=str(runtime / f"kernel-{started['id']}.json"))
    kc.load_connection_file()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)

        def run(code: str) -> None:
            reply = kc.execute_interactive(code, timeout=60, output_hook=lambda msg: None)
            assert reply["content"]["status"] == "ok", reply["content"]

        run("import pandas as pd; df = pd.DataFrame({'region': ['n', 's'], 'sales': [10.0, 20.0]})")
        project = lab_server["base"] / "project"
        project.mkdir()
        bare = {"HOME": str(lab_server["base"]), "PATH": BARE_PATH, "JUPYTER_RUNTIME_DIR": str(runtime)}
        _run(
            [str(lab_server["kernel"] / "bin" / "mcp-notebook"), "config", "claude-code", "--write"], bare, cwd=project
        )
        server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["notebook"]
        assert server["command"] == str(lab_server["kernel"] / "bin" / "mcp-notebook")
        # what a host does: the entry's command, args and env, in a bare environment, nothing activated
        host_env = ["HOME=" + str(lab_server["base"]), "PATH=" + BARE_PATH]
        host_env += [f"{k}={v}" for k, v in server.get("env", {}).items()]
        argv = ["-i", *host_env, server["command"], *server["args"]]  # every kernel of this machine

        async def go() -> None:
            params = StdioServerParameters(command="/usr/bin/env", args=argv)
            async with Client(params, cache=None) as client:
                # this kernel has no notebook: its label is its id (another kernel may be current)
                uri = f"nb://kernels/{started['id']}/frames/df"
                read = await client.call_tool("read_resource", {"uri": uri})
                if read.is_error:  # say what the front saw: the kernels it lists (a rare failure seen once)
                    listed = await client.call_tool("read_resource", {"uri": "nb://kernels"})
                    raise AssertionError(f"{read.content[0].text}\nkernels: {listed.content[0].text}")
                assert "sales" in read.content[0].text, read
                cursor = json.loads((await client.call_tool("changes_since", {})).content[0].text)["cursor"]
                await anyio.to_thread.run_sync(run, 'df["sales"] *= 1.5')
                for _ in range(5):  # polled as a host does; bounded (nb://kernels may change meanwhile)
                    args = {"cursor": cursor, "wait_seconds": 10}
                    doc = json.loads((await client.call_tool("changes_since", args)).content[0].text)
                    if uri in doc["changed"] or doc.get("timed_out"):
                        break
                    cursor = doc["cursor"]
                assert uri in doc["changed"], doc
                assert any(
                    line.startswith(f"{uri}: changed in place, DataFrame shape (2, 2)") for line in doc["summary"]
                )

        anyio.run(go)
    finally:
        kc.stop_channels()
