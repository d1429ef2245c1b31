"""The JupyterLab extension in a real headless browser against a real JupyterLab.

Starts ``jupyter lab`` on a free loopback port (token, temporary root, runtime, config and data
dirs), drives Debian's chromium with Playwright, and reads what the hub serves through the official
MCP SDK client. Screenshots of the panel land in tests/artifacts/ (or $MCP_NB_ARTIFACTS).
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
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sdk import connect

pytest.importorskip("jupyterlab")
playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("MCP_NB_ARTIFACTS") or Path(__file__).parent / "artifacts")
FIRST_SOURCE = "shown_value = 41"
UNSAVED = "Unsaved note typed in the browser 7731"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no chromium at {CHROMIUM}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notebook() -> dict[str, Any]:
    def code(cid: str, source: str) -> dict[str, Any]:
        return {
            "id": cid,
            "cell_type": "code",
            "metadata": {},
            "source": source,
            "execution_count": None,
            "outputs": [],
        }

    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [code("first", FIRST_SOURCE), code("second", "other_value = 'kept'\nprint(other_value)")],
    }


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real JupyterLab server; yields base URL, token, root and runtime dir."""
    base = tmp_path_factory.mktemp("lab")
    root, runtime = base / "root", base / "runtime"
    for d in (root, runtime, base / "config", base / "data", base / "ipython"):
        d.mkdir()
    (root / "demo.ipynb").write_text(json.dumps(_notebook()))
    (root / "other.ipynb").write_text(json.dumps({**_notebook(), "cells": []}))
    labconfig = base / "config" / "labconfig"  # no news toast over the screenshots
    labconfig.mkdir()
    disabled = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
    (labconfig / "page_config.json").write_text(json.dumps(disabled))
    token, port = secrets.token_hex(16), _free_port()
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_DATA_DIR": str(base / "data"),
        "IPYTHONDIR": str(base / "ipython"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
        cmd.append("--allow-root")
    log = (base / "server.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited: {(base / 'server.log').read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/api/status", params={"token": token}, timeout=5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("jupyter lab did not start within 90 s")
            time.sleep(0.5)
        yield {"url": url, "token": token, "root": root, "runtime": runtime, "log": base / "server.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def test_extension_is_listed_enabled():
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    line = next((ln for ln in text.splitlines() if "mcp-notebook" in ln), "")
    assert re.search(r"mcp-notebook v\S+ enabled\s+OK", line), text


def _hub_info(runtime: Path, timeout: float = 60, not_url: str | None = None) -> dict[str, Any]:
    """The running hub's connection info, from its runtime file (a new hub's, with ``not_url``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in runtime.glob("mcp-notebook-*.json"):
            with contextlib.suppress(OSError, ValueError):
                info = json.loads(path.read_text())
                if info.get("url") != not_url:
                    return info
        time.sleep(0.2)
    raise TimeoutError("no hub runtime file appeared")


async def _poll(read: Any, check: Any, timeout: float = 20, what: str = "") -> Any:
    """Call ``read`` until ``check(value)`` holds (bounded); returns the value."""
    value = None
    with anyio.move_on_after(timeout):
        while True:
            value = await read()
            if check(value):
                return value
            await anyio.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}: last value {str(value)[:1500]}")


async def _shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"lab-{name}.png"
    await page.locator("#mcp-notebook-panel").screenshot(path=str(path))
    await page.screenshot(path=str(ARTIFACTS / f"lab-{name}-page.png"))
    return path


def test_panel_live_document_active_cell_and_hide_in_a_real_browser(lab):
    anyio.run(_scenario, lab)


async def _scenario(lab: dict[str, Any]) -> None:
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            errors: list[str] = []
            # Errors thrown by our extension's code (JupyterLab 4.2's own cell toolbar throws on its own).
            page.on(
                "pageerror", lambda exc: "mcp-notebook" in (exc.stack or "") and errors.append(f"{exc}\n{exc.stack}")
            )
            await page.goto(f"{lab['url']}/lab/tree/demo.ipynb?token={lab['token']}")
            await page.wait_for_selector(".jp-Notebook .jp-Cell")
            await page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)

            # The panel: no hub in this kernel yet, so it offers to load it.
            await page.click(".jp-SideBar [data-id='mcp-notebook-panel']")
            await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-load:not([disabled])")
            await _shot(page, "1-not-loaded")
            await page.click("#mcp-notebook-panel .mcp-nb-load")
            await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-badge[data-status='running']", timeout=90_000)
            url_shown = await page.inner_text("#mcp-notebook-panel .mcp-nb-url")
            info = _hub_info(lab["runtime"])
            assert url_shown == info["url"]
            assert info["token"] not in await page.content()  # never the token in the page

            await page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            async with connect(info) as (client, inbox):

                async def read(uri: str) -> dict[str, Any]:
                    return json.loads((await client.read_resource(uri)).contents[0].text)

                names = lambda doc: {v["name"] for v in doc["variables"]}  # noqa: E731
                await _poll(lambda: read("nb://vars"), lambda d: "shown_value" in names(d), what="variables")

                # An unsaved markdown cell, typed for real, reaches nb://notebook within seconds.
                await page.click(".jp-Notebook .jp-Cell >> nth=1")
                for command in ("notebook:enter-command-mode", "notebook:insert-cell-below"):
                    await page.evaluate(f"window.jupyterapp.commands.execute('{command}')")
                await page.evaluate("window.jupyterapp.commands.execute('notebook:change-cell-to-markdown')")
                await page.evaluate("window.jupyterapp.commands.execute('notebook:enter-edit-mode')")
                await page.wait_for_selector(".jp-Notebook .jp-Cell >> nth=2 >> .cm-content[contenteditable='true']")
                await page.keyboard.type(UNSAVED)  # real keystrokes into the cell's editor
                doc = await _poll(
                    lambda: read("nb://notebook"),
                    lambda d: any(UNSAVED in c.get("source", "") for c in d.get("cells", [])),
                    what="the typed markdown cell in nb://notebook",
                )
                typed = next(c for c in doc["cells"] if UNSAVED in c["source"])
                assert typed["cell_type"] == "markdown" and typed["source"] == UNSAVED
                assert doc["source"] == "jupyterlab"
                assert json.loads((lab["root"] / "demo.ipynb").read_text())["cells"][-1]["id"] == "second"

                # Selecting a cell shows in nb://notebook/active (and its subscribers hear of it).
                async with connect(info, "legacy") as (watcher, inbox):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        await watcher.subscribe_resource("nb://notebook/active")
                    await page.keyboard.press("Escape")
                    await page.click(".jp-Notebook .jp-Cell >> nth=0 >> .jp-InputPrompt")
                    active = await _poll(
                        lambda: read("nb://notebook/active"),
                        lambda d: (d.get("active") or {}).get("id") == "first",
                        what="the first cell as the active cell",
                    )
                    assert active["active"]["source"] == FIRST_SOURCE
                    assert active["active"]["executed"].startswith("nb://cells/")
                    assert [c["id"] for c in active["selected"]] == ["first"]
                    await inbox.wait_for(lambda i: "nb://notebook/active" in i.updated, timeout=20)

                # The panel lists this client (and the status bar counts it).
                client_name = page.locator("#mcp-notebook-panel .mcp-nb-client-name")
                await client_name.first.wait_for()
                assert (await client_name.first.inner_text()).strip()
                await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-client:has-text('stateless')")
                status = await page.inner_text(".mcp-nb-status")
                assert status.startswith("MCP: on") and "client" in status, status
                await _shot(page, "2-running")
                copy = page.locator("#mcp-notebook-panel .mcp-nb-setup .mcp-nb-copy").first
                await copy.click()
                await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-copy:text-is('Copied')")
                setup = await page.inner_text("#mcp-notebook-panel .mcp-nb-setup")
                # the kernel environment's mcp-notebook by absolute path, and the non-default runtime dir
                script = Path(sys.executable).with_name("mcp-notebook")
                assert f"claude mcp add -e JUPYTER_RUNTIME_DIR={lab['runtime']} notebook -- {script} bridge" in setup

                # Hide a variable from the panel: gone from nb://vars, shown as hidden.
                await page.click("#mcp-notebook-panel .mcp-nb-var[data-name='shown_value'] .mcp-nb-hide")
                await _poll(lambda: read("nb://vars"), lambda d: "shown_value" not in names(d), what="hidden variable")
                await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-var.mcp-nb-hidden[data-name='shown_value']")
                assert "other_value" in names(await read("nb://vars"))
                await _shot(page, "3-hidden")

            # A second notebook (its own kernel, no hub): the panel and status bar follow the current one.
            await page.evaluate("window.jupyterapp.commands.execute('docmanager:open', {path: 'other.ipynb'})")
            await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-notebook:text-is('other.ipynb')")
            await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-load", timeout=90_000)
            assert (await page.inner_text(".mcp-nb-status")) == "MCP: not loaded"
            await _shot(page, "4-second-notebook")
            await page.evaluate("window.jupyterapp.commands.execute('docmanager:open', {path: 'demo.ipynb'})")
            await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-badge[data-status='running']")

            # Kernel restart: the hub is gone ("not loaded"); loading it again re-pushes the unsaved document.
            await page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
            await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-load:not([disabled])", timeout=90_000)
            await page.click("#mcp-notebook-panel .mcp-nb-load")
            await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-badge[data-status='running']", timeout=90_000)
            fresh = _hub_info(lab["runtime"], not_url=info["url"])
            async with connect(fresh, "legacy") as (client, _inbox):
                await _poll(
                    lambda: client.read_resource("nb://notebook"),
                    lambda r: UNSAVED in r.contents[0].text,
                    what="the unsaved cell in the restarted kernel's hub",
                )
            await _shot(page, "5-after-restart")

            # Another kernel for the notebook: no hub there, the panel offers to load it again.
            await page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.changeKernel({name: 'python3'})")
            await page.wait_for_selector("#mcp-notebook-panel .mcp-nb-load:not([disabled])", timeout=90_000)
            assert (await page.inner_text(".mcp-nb-status")) == "MCP: not loaded"
            assert not errors, errors
        finally:
            await browser.close()


@contextlib.asynccontextmanager
async def _jupyter_client(url: str, headers: dict[str, str]) -> Any:
    """The official SDK client on a Jupyter server endpoint, with Jupyter's token."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
            yield client


def test_the_focused_notebook_is_the_current_kernel_of_the_server_endpoint(lab):
    """Two notebooks open; the one the browser focuses is what bare URIs address at
    {base_url}mcp-notebook/mcp (the extension reports focus to the server extension)."""
    from jupyter_client.blocking import BlockingKernelClient

    anyio.run(_focus_scenario, lab, BlockingKernelClient)


async def _focus_scenario(lab: dict[str, Any], client_class: Any) -> None:
    front = f"{lab['url']}/mcp-notebook/mcp"
    auth = {"Authorization": f"token {lab['token']}"}
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            await page.goto(f"{lab['url']}/lab/tree/demo.ipynb?token={lab['token']}")
            await page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
            await page.evaluate("window.jupyterapp.commands.execute('docmanager:open', {path: 'other.ipynb'})")

            async def sessions() -> dict[str, str]:
                listed = httpx.get(f"{lab['url']}/api/sessions", headers=auth, timeout=10).json()
                return {
                    Path((s.get("notebook") or s)["path"]).stem: s["kernel"]["id"] for s in listed if s.get("kernel")
                }

            kernels = await _poll(sessions, lambda k: {"demo", "other"} <= set(k), timeout=90, what="two sessions")
            for name, kid in kernels.items():
                kc = client_class(connection_file=str(lab["runtime"] / f"kernel-{kid}.json"))
                kc.load_connection_file()
                kc.start_channels()
                try:
                    kc.wait_for_ready(timeout=60)
                    code = f"%load_ext mcp_notebook\nwhoami = {name!r}"
                    reply = await anyio.to_thread.run_sync(lambda k=kc, c=code: k.execute_interactive(c, timeout=60))
                    assert reply["content"]["status"] == "ok"
                finally:
                    kc.stop_channels()
            async with _jupyter_client(front, auth) as client:
                for name in ("other", "demo", "other"):
                    await page.evaluate(
                        "(name) => { const w = [...window.jupyterapp.shell.widgets('main')]"
                        ".find(w => w.context && w.context.path.endsWith(name + '.ipynb'));"
                        " window.jupyterapp.shell.activateById(w.id); }",
                        name,
                    )

                    async def whoami() -> str:
                        return (await client.read_resource("nb://vars/whoami")).contents[0].text

                    await _poll(whoami, lambda text, n=name: n in text, what=f"bare URIs follow {name}")
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "labextension-focus-other.png"))
        finally:
            await browser.close()


def test_a_figure_in_the_notebook_gets_alt_text_and_its_description(lab):
    """Issue #44: the notebook's own plot image, once the hub describes it, carries a short alt text
    and aria-describedby naming the full description, as Chromium's accessibility tree shows."""
    nb = _notebook()
    nb["cells"] = [
        {**nb["cells"][0], "id": "load", "source": "%matplotlib inline\n%load_ext mcp_notebook"},
        {
            **nb["cells"][0],
            "id": "plot",
            "source": "import matplotlib.pyplot as plt\nplt.plot([2, 9, 4], label='lab')\nplt.title('In Lab')\nplt.show()",
        },
    ]
    (lab["root"] / "figs.ipynb").write_text(json.dumps(nb))
    anyio.run(_figure_scenario, lab)


_KERNEL_READY = """() => { const w = window.jupyterapp.shell.currentWidget; const k = w && w.sessionContext
  && w.sessionContext.session && w.sessionContext.session.kernel; return !!k && k.connectionStatus === 'connected'
  && w.sessionContext.kernelDisplayStatus === 'idle'; }"""


async def _run_cell(page: Any, nth: int) -> None:
    """Run the notebook's ``nth`` cell and see it start (its prompt leaves ``[ ]``). Lab can show an
    idle indicator before its kernel connection is ready, and a run asked for then is dropped: the
    test waits for the connection, and asks again (at most three times) if the cell did not start."""
    prompt = f".jp-Notebook .jp-Cell >> nth={nth} >> .jp-InputPrompt"
    await page.wait_for_function(_KERNEL_READY, timeout=90_000)
    for _ in range(3):
        await page.click(prompt)
        await page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
        try:
            await page.wait_for_function(
                "(sel) => { const p = document.querySelectorAll('.jp-Notebook .jp-Cell')[sel]"
                "  .querySelector('.jp-InputPrompt'); return !!p && p.textContent.replace(/\\s/g, '') !== '[]:'; }",
                arg=nth,
                timeout=10_000,
            )
            return
        except Exception:
            continue
    raise AssertionError(f"the notebook's cell {nth} did not start after three runs")


async def _figure_scenario(lab: dict[str, Any]) -> None:
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            # a workspace of its own: only this notebook open (not those the other tests left)
            await page.goto(f"{lab['url']}/lab/workspaces/figures/tree/figs.ipynb?token={lab['token']}&reset")
            await page.wait_for_selector(
                ".jp-Notebook-ExecutionIndicator[data-status='idle'] >> visible=true", timeout=90_000
            )
            await _run_cell(page, 0)
            try:
                await page.wait_for_selector(
                    ".mcp-nb-status[data-status='connected']", state="attached", timeout=90_000
                )
            except Exception:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "lab-figure-not-connected.png"))
                raise
            await _run_cell(page, 1)
            img = page.locator(".jp-Notebook .jp-Cell >> nth=1 >> .jp-OutputArea-output img")
            await img.wait_for()
            await page.wait_for_function(
                "() => !!document.querySelector('.jp-OutputArea-output img[aria-describedby]')", timeout=30_000
            )
            cdp = await page.context.new_cdp_session(page)
            nodes = (await cdp.send("Accessibility.getFullAXTree"))["nodes"]
            images = [
                ((n.get("name") or {}).get("value", ""), (n.get("description") or {}).get("value", ""))
                for n in nodes
                if (n.get("role") or {}).get("value") in ("image", "img")
            ]
            figure = [(name, desc) for name, desc in images if name.startswith("matplotlib Figure")]
            assert figure, images
            name, desc = figure[0]
            assert len(name) <= 150
            assert 'Axes 1 "In Lab"' in desc and 'line "lab": 3 points' in desc and "max 9 at x=1" in desc
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "lab-figure-described.png"))
        finally:
            await browser.close()
