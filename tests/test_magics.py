"""The %mcp magic in a real kernel: status, clients, hide/show, stop/start, unload."""

from __future__ import annotations

import json

import httpx
from conftest import Mcp


def test_status_and_clients_never_show_the_token(kernel, hub, mcp):
    mcp.result("resources/subscribe", {"uri": "nb://vars"})
    status = kernel.run("%mcp").stdout
    assert hub["url"] in status and "1 session(s)" in status and "subscriptions: 1" in status
    assert "resources:" in status
    clients = kernel.run("%mcp clients").stdout
    assert "pytest 1" in clients and "nb://vars" in clients
    assert hub["token"] not in status + clients


def test_hide_and_show_a_variable(kernel, hub, mcp):
    kernel.run("visible_one = 1")
    assert "nb://vars/visible_one" in {r["uri"] for r in mcp.result("resources/list")["resources"]}
    out = kernel.run("%mcp hide visible_one").stdout
    assert "hidden" in out
    assert "nb://vars/visible_one" not in {r["uri"] for r in mcp.result("resources/list")["resources"]}
    assert "visible_one" in kernel.run("%mcp").stdout
    kernel.run("%mcp show visible_one")
    assert "nb://vars/visible_one" in {r["uri"] for r in mcp.result("resources/list")["resources"]}


def test_panel_and_browser_from_the_magic(kernel, hub):
    kernel.run("panel_var = [1, 2]")
    panel = kernel.run("%mcp panel")
    bundle = panel.results[-1]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert hub["url"] in bundle["text/plain"] and hub["token"] not in bundle["text/plain"]
    browse = kernel.run("%mcp browse vars panel_var")
    assert "nb://vars/panel_var" in browse.results[-1]["text/plain"]


def test_stop_start_and_unload(kernel, hub):
    out = kernel.run("%mcp stop").stdout
    assert "stopped" in out
    try:
        httpx.post(hub["url"], json={}, timeout=2)
        raise AssertionError("the hub still answers after %mcp stop")
    except httpx.TransportError:
        pass
    assert "stopped" in kernel.run("%mcp").stdout
    started = kernel.run("%mcp start").stdout
    assert "MCP server at" in started and hub["token"] not in started
    info = kernel.info()
    client = Mcp(info)
    try:
        client.initialize()
        assert client.result("resources/list")["resources"]
    finally:
        client.close()
    threads = (
        "import threading; print(sorted(t.name for t in threading.enumerate() if t.name.startswith('mcp-notebook')))"
    )
    kernel.run("%unload_ext mcp_notebook")
    assert kernel.run(threads).stdout.strip() == "[]"
    gone = kernel.run("print('mcp' in get_ipython().magics_manager.magics['line'])").stdout.strip()
    assert gone == "False"
    hooks = kernel.run(
        "import json; print(json.dumps([f.__qualname__ for f in get_ipython().events.callbacks['post_run_cell']]))",
        check=False,
    )
    if hooks.error is None:
        assert not any("KernelHub" in h for h in json.loads(hooks.stdout))
    kernel.run("%load_ext mcp_notebook")  # leave the module's kernel as we found it
