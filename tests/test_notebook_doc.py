"""The notebook document as resources (nb://notebook...), from a real .ipynb and a real kernel."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from conftest import Mcp
from kernel_harness import Kernel
from sdk import connect


def make_notebook(path: Path, title: str = "Analysis") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# {title}\nSome words.", id="intro"),
        nbformat.v4.new_code_cell("x = 40 + 2\nx", id="compute", execution_count=1),
        nbformat.v4.new_code_cell("print('sk-proj-' + 'A1b2C3d4' * 4)", id="leaky", execution_count=2),
    ]
    nb.cells[1].outputs = [
        nbformat.v4.new_output("execute_result", data={"text/plain": "42"}, execution_count=1),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}),
    ]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="sk-proj-" + "A1b2C3d4" * 4 + "\n")]
    nbformat.write(nb, str(path))
    return nb


@pytest.fixture(scope="module")
def nb_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nbdir") / "analysis.ipynb"
    make_notebook(path)
    return path


@pytest.fixture(scope="module")
def hub(kernel: Kernel, nb_path: Path) -> dict[str, Any]:
    """A hub told where the notebook is through %config before %load_ext."""
    return kernel.load_hub(f"%config MCPHub.notebook_path = {str(nb_path)!r}")


def read_json(mcp: Mcp, uri: str) -> dict[str, Any]:
    return json.loads(mcp.result("resources/read", {"uri": uri})["contents"][0]["text"])


def test_document_from_file(mcp, hub, nb_path):
    assert hub["notebook_path"] == str(nb_path)  # the setting reaches connection_info and nb://kernel
    assert read_json(mcp, "nb://kernel")["notebook_path"] == str(nb_path)
    doc = read_json(mcp, "nb://notebook")
    assert doc["available"] and doc["source"] == "file" and doc["path"] == str(nb_path)
    assert doc["cell_count"] == 3 and doc["kernelspec"] == "python3" and doc["nbformat"].startswith("4.")
    intro, compute, leaky = doc["cells"]
    assert intro["cell_type"] == "markdown" and intro["source"].startswith("# Analysis")
    assert compute["id"] == "compute" and compute["execution_count"] == 1
    assert [o["output_type"] for o in compute["outputs"]] == ["execute_result", "display_data"]
    assert compute["outputs"][1]["mime_types"] == ["image/png", "text/plain"]
    assert "iVBOR" not in json.dumps(doc)  # outputs summarized, not embedded
    assert "[REDACTED]" in leaky["outputs"][0]["text"] and "A1b2C3d4A1b2" not in json.dumps(doc)
    assert compute["uri"] == "nb://notebook/cells/compute"


def test_one_cell_and_completion(mcp):
    cell = read_json(mcp, "nb://notebook/cells/compute")
    assert cell["source"] == "x = 40 + 2\nx" and cell["index"] == 1 and cell["outputs"][0]["text"] == "42"
    missing = mcp.call("resources/read", {"uri": "nb://notebook/cells/nope"})
    assert missing["error"]["code"] == -32002
    done = mcp.result(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "nb://notebook/cells/{cell_id}"},
            "argument": {"name": "cell_id", "value": "c"},
        },
    )
    assert done["completion"]["values"] == ["compute"]
    templates = {t["uriTemplate"] for t in mcp.result("resources/templates/list")["resourceTemplates"]}
    assert "nb://notebook/cells/{cell_id}" in templates
    assert "nb://notebook" in {r["uri"] for r in mcp.result("resources/list")["resources"]}


def test_executed_cell_is_linked_by_cell_id(kernel, mcp):
    msg = kernel.kc.session.msg(
        "execute_request",
        {"code": "x = 40 + 2\nx", "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False},
        metadata={"cellId": "compute"},
    )
    kernel.kc.shell_channel.send(msg)
    kernel.wait_idle(msg["header"]["msg_id"])
    cell = read_json(mcp, "nb://notebook/cells/compute")
    executed = read_json(mcp, cell["executed"])
    assert executed["cell_id"] == "compute" and executed["source"] == "x = 40 + 2\nx"


def test_paging_of_the_document(mcp):
    page = read_json(mcp, "nb://notebook?offset=1&limit=1")
    assert [c["id"] for c in page["cells"]] == ["compute"] and page["next"] == "nb://notebook?offset=2&limit=1"


def test_pushed_document_is_preferred_while_newer(kernel, mcp, nb_path):
    pushed = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [{"id": "live", "cell_type": "markdown", "metadata": {}, "source": ["# Live ", "edit"]}],
    }
    kernel.run(f"import mcp_notebook\nmcp_notebook.hub().notebook.set_document({json.dumps(pushed)!r})")
    doc = read_json(mcp, "nb://notebook")
    assert doc["source"] == "frontend" and [c["id"] for c in doc["cells"]] == ["live"]
    assert doc["cells"][0]["source"] == "# Live edit"
    later = nb_path.stat().st_mtime + 60
    os.utime(nb_path, (later, later))  # the file is saved after the push: the file wins again
    doc = read_json(mcp, "nb://notebook")
    assert doc["source"] == "file" and doc["cell_count"] == 3
    kernel.run("mcp_notebook.hub().notebook.clear_document()")


def test_watched_notebook_notifies_when_the_file_changes(kernel, hub, nb_path):
    async def go():
        async with connect(hub, "legacy") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://notebook")
            await anyio.to_thread.run_sync(kernel.run, "unrelated = 1")  # baseline: no change
            assert "nb://notebook" not in inbox.updated
            make_notebook(nb_path, title="Changed")
            later = nb_path.stat().st_mtime + 120
            os.utime(nb_path, (later, later))
            await anyio.to_thread.run_sync(kernel.run, "unrelated = 2")
            await inbox.wait_for(lambda i: "nb://notebook" in i.updated)
            read = await client.read_resource("nb://notebook")
            assert json.loads(read.contents[0].text)["cells"][0]["source"].startswith("# Changed")

    anyio.run(go)


def test_notebook_found_through_jpy_session_name(tmp_path):
    path = tmp_path / "session.ipynb"
    make_notebook(path, title="From session")
    k = Kernel(env={"JPY_SESSION_NAME": str(path)}, cwd=str(tmp_path))
    try:
        info = k.load_hub()
        client = Mcp(info)
        client.initialize()
        try:
            doc = read_json(client, "nb://notebook")
            assert doc["path"] == str(path) and doc["cells"][0]["source"].startswith("# From session")
        finally:
            client.close()
    finally:
        k.shutdown()


def test_no_notebook_is_reported_not_invented(tmp_path):
    k = Kernel(env={"JPY_SESSION_NAME": ""}, cwd=str(tmp_path))
    try:
        client = Mcp(k.load_hub())
        client.initialize()
        try:
            doc = read_json(client, "nb://notebook")
            assert doc["available"] is False and "notebook_path" in doc["hint"]
            assert client.call("resources/read", {"uri": "nb://notebook/cells/x"})["error"]["code"] == -32002
        finally:
            client.close()
    finally:
        k.shutdown()
