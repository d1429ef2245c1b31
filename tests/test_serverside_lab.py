"""The live document of an R notebook open in a real JupyterLab (headless chromium) reaches
``nb://kernels/{kernel}/notebook`` through the server's route (issue #43): the Lab comm reaches only an
in-kernel hub, so the extension pushes a hub-less kernel's document to ``kernels/{id}/document``."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from jserver import JupyterServer

playwright_api = pytest.importorskip("playwright.async_api")
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[1]
BUILT = ROOT / "mcp_notebook" / "labextension"
TYPED = "An unsaved thought typed in the R notebook 4417"
pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no chromium at {CHROMIUM}"),
    pytest.mark.skipif(
        shutil.which("R") is None or not Path("/usr/share/jupyter/kernels/ir/kernel.json").exists(),
        reason="R and IRkernel are not installed (scripts/test.sh installs them where apt-get exists)",
    ),
    pytest.mark.skipif(not (BUILT / "package.json").exists(), reason="the JupyterLab extension is not built"),
]


def r_notebook() -> dict[str, Any]:
    cell = {"id": "r1", "cell_type": "code", "metadata": {}, "source": "x <- 1", "execution_count": None, "outputs": []}
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "ir", "display_name": "R", "language": "R"}},
        "cells": [cell],
    }


def read(server: JupyterServer, uri: str) -> dict[str, Any]:
    """A stateless read through the server's front."""
    version = "2026-07-28"
    meta = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": meta}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
    }
    reply = server.http.post("mcp-notebook/mcp", json=body, headers=headers).json()
    return reply


def test_an_unsaved_edit_of_an_r_notebook_reaches_the_server(tmp_path):
    first = tmp_path / "first"  # JUPYTER_PATH: first on the labextensions path, before the environment's
    (first / "labextensions").mkdir(parents=True)
    (first / "labextensions" / "mcp-notebook").symlink_to(BUILT)  # this tree's build
    s = JupyterServer(
        tmp_path,
        app="lab",
        extra_args=(
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.expose_app_in_browser=True",
        ),
        extra_env={"JUPYTER_PATH": str(first)},
    )
    try:
        (s.root / "stats.ipynb").write_text(json.dumps(r_notebook()))
        anyio.run(type_in_lab, s)
    finally:
        s.stop()


async def type_in_lab(s: JupyterServer) -> None:
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            sent: list[str] = []  # the extension's requests to the server extension (for the failure message)
            page.on("request", lambda r: "mcp-notebook" in r.url and sent.append(f"{r.method} {r.url}"))
            await page.goto(f"{s.url}lab/tree/stats.ipynb?token={s.token}")
            await page.wait_for_selector(".jp-Notebook .jp-Cell")
            await page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
            await page.click(".jp-Notebook .jp-Cell >> nth=0")
            for command in (
                "notebook:enter-command-mode",
                "notebook:insert-cell-below",
                "notebook:change-cell-to-markdown",
            ):
                await page.evaluate(f"window.jupyterapp.commands.execute('{command}')")
            await page.evaluate("window.jupyterapp.commands.execute('notebook:enter-edit-mode')")
            await page.wait_for_selector(".jp-Notebook .jp-Cell >> nth=1 >> .cm-content[contenteditable='true']")
            await page.keyboard.type(TYPED)
            deadline = time.monotonic() + 30
            last: Any = None
            while time.monotonic() < deadline:
                last = await anyio.to_thread.run_sync(read, s, "nb://kernels/stats/notebook")
                text = (last.get("result") or {}).get("contents", [{}])[0].get("text", "")
                if TYPED in text:
                    doc = json.loads(text)
                    typed = next(c for c in doc["cells"] if TYPED in c.get("source", ""))
                    assert typed["cell_type"] == "markdown"
                    assert TYPED not in (s.root / "stats.ipynb").read_text()  # never saved: the live document
                    return
                await anyio.sleep(0.3)
            raise AssertionError(f"the typed cell never reached nb://kernels/stats/notebook: {str(last)[:600]}; {sent}")
        finally:
            await browser.close()
