"""The server extension is a jupyter_server ExtensionApp whose stop closes what it opened.

A real ``jupyter server`` serves the all-kernels front with a listen open at a kernel's hub (and a
listen piped through the per-kernel route, a pooled connection of that route, a keep-alive
connection of the front's reads), then gets SIGTERM. Jupyter stops its extensions before it shuts the kernels down; the kernel records, when
the server's ``shutdown_request`` reaches it, how many listens its hub still has open and which
connections the server's process still holds to the hub's port: none of either. The server then
exits within a bound, with a log free of pending-task and unclosed-resource warnings.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from jserver import ROOT, JupyterServer, load_hub, run
from test_serverext import ACCEPT, INIT, sdk

TOKEN = "stop-jupyter-token"
AUTH = f"token {TOKEN}"
pytestmark = pytest.mark.timeout(300)

# Installed in the kernel: when the server's shutdown_request arrives, write down (after at most
# 3 s for the hub to notice closes already under way) the hub's open listens and the server's
# TCP connections to the hub's port, then shut down as usual.
PROBE = """
import json as _j, os as _os, time as _t, inspect as _i
import psutil as _ps, mcp_notebook as _m
_k = get_ipython().kernel
_orig = _k.control_handlers["shutdown_request"]
def _seen():
    conns = [c for c in _ps.Process(_os.getppid()).net_connections("tcp") if c.raddr and c.raddr.port == {port}]
    return [sorted(l.uris) for l in _m.hub().server.listens()], sorted(c.status for c in conns)
async def _probe(*args, **kwargs):
    deadline = _t.monotonic() + 3
    seen = _seen()
    while (seen[0] or seen[1]) and _t.monotonic() < deadline:
        _t.sleep(0.05)
        seen = _seen()
    with open({path!r}, "w") as f:
        _j.dump({{"listens": len(seen[0]), "watching": seen[0], "connections": seen[1]}}, f)
    result = _orig(*args, **kwargs)
    return (await result) if _i.isawaitable(result) else result
_k.control_handlers["shutdown_request"] = _probe
print("probe installed")
"""

BAD_LOG_LINES = ("Task was destroyed but it is pending", "unclosed", "Unclosed", "Exception ignored", "Traceback")


def _listens(kc: Any) -> int:
    return int(run(kc, "import mcp_notebook as _m; print(len(_m.hub().server.listens()))").strip().splitlines()[-1])


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


# control: set by its deprecated name (MCPNotebookProxy.carrier, until 0.1.x), which still works
@pytest.mark.parametrize("route", ["tcp", "control"])
def test_stop_closes_the_front_its_listens_and_the_connections(tmp_path: Path, route: str) -> None:
    setting = "--MCPNotebookExtension.route=tcp" if route == "tcp" else "--MCPNotebookProxy.carrier=control"
    s = JupyterServer(
        tmp_path,
        token=TOKEN,
        # the kernel gets SIGTERM half this long after the shutdown_request: time for the probe's wait
        extra_args=(setting, "--KernelManager.shutdown_wait_time=12"),
        extra_env={"PYTHONWARNINGS": "always::ResourceWarning"},
    )
    record = tmp_path / "at-shutdown.json"
    try:
        kid = s.start_session("one.ipynb")
        kc = s.client(kid)
        hub_port = urlsplit(load_hub(kc)["url"]).port
        run(kc, "x = 1")
        (listed,) = s.http.get("mcp-notebook/kernels").json()
        assert listed["route"] == listed["carrier"] == route  # ("carrier": the key's deprecated name)
        # the per-kernel route leaves a pooled connection (tcp), the front reads and listens
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
        assert s.http.post(s.mcp_url(kid), json=init, headers=ACCEPT).status_code == 200

        async def serve_then_stop() -> None:
            with contextlib.suppress(Exception):  # the server ends the client's stream as it stops
                async with (
                    sdk(f"{s.url}mcp-notebook/mcp", "auto", AUTH) as (client, _),
                    sdk(s.mcp_url(kid), "auto", AUTH) as (piped, _),
                ):
                    read = await client.read_resource("nb://kernels/one/vars/x")
                    steps.append(read.contents[0].text)
                    async with (
                        client.listen(resource_subscriptions=["nb://kernels/one/vars/x"]),
                        piped.listen(resource_subscriptions=["nb://vars/piped"]),
                    ):
                        # the front's listen, and one piped through the per-kernel route
                        await anyio.to_thread.run_sync(_wait, lambda: _listens(kc) == 2, 30, "no listens at the hub")
                        steps.append("listening")
                        steps.append(
                            await anyio.to_thread.run_sync(run, kc, PROBE.format(port=hub_port, path=str(record)))
                        )
                        s.proc.terminate()
                        steps.append(await anyio.to_thread.run_sync(lambda: s.proc.wait(60)))

        steps: list[Any] = []
        anyio.run(serve_then_stop)
        assert len(steps) == 4 and "1" in steps[0], steps
        assert steps[1:] == ["listening", "probe installed\n", 0], (steps, s.log_text()[-3000:])
        assert record.exists(), "the kernel never got the server's shutdown_request: " + s.log_text()[-3000:]
        seen = json.loads(record.read_text())
        assert seen["listens"] == 0, f"the hub still had listens open when the server shut it down: {seen}"
        if route == "tcp":  # (over the control channel the hub's port is never dialled)
            assert seen["connections"] == [], f"the server still held connections to the hub: {seen}"
        log = s.log_text()
        assert "mcp-notebook: stopped (front closed" in log, log[-3000:]
        deprecated = "c.MCPNotebookProxy.carrier is deprecated: use c.MCPNotebookExtension.route"
        assert (deprecated in log) == (route == "control"), log[-3000:]
        bad = [line for line in log.splitlines() if any(b in line for b in BAD_LOG_LINES)]
        assert not bad, "\n".join(bad)
    finally:
        if s.proc.poll() is None:
            s.stop()
        else:
            for c in s.clients:
                c.stop_channels()
            s.http.close()
            s.log.close()


def test_extension_list_shows_the_app_enabled_and_valid(tmp_path: Path) -> None:
    conf_d = tmp_path / "config" / "jupyter_server_config.d"
    conf_d.mkdir(parents=True)
    (conf_d / "mcp_notebook.json").write_text(
        (ROOT / "jupyter-config" / "server-config" / "mcp_notebook.json").read_text()
    )
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "server", "extension", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # without its colours
    assert out.returncode == 0, text
    assert "mcp_notebook enabled" in text, text
    assert re.search(r"- Validating mcp_notebook\.\.\.\s+mcp_notebook \S+ OK", text), text
    from mcp_notebook import _jupyter_server_extension_points
    from mcp_notebook.serverext.extension import MCPNotebookExtension

    assert _jupyter_server_extension_points() == [{"module": "mcp_notebook.serverext", "app": MCPNotebookExtension}]


def test_jupyter_lab_loads_the_app_and_stops_it(tmp_path: Path) -> None:
    lab = ("--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly")
    s = JupyterServer(tmp_path, token=TOKEN, app="lab", extra_args=lab)
    try:
        assert s.http.get("mcp-notebook/kernels").json() == []
        s.proc.terminate()
        assert s.proc.wait(60) == 0
        log = s.log_text()
        assert "mcp_notebook | extension was successfully loaded" in log, log[-3000:]
        # the start-up heap frozen once the loop ran (serverext/extension.py, mcp_notebook/heap.py)
        settled = re.search(r"start-up heap is settled \((\d+) objects frozen", log)
        assert settled is not None and int(settled.group(1)) > 50_000, log[-3000:]
        assert (
            "mcp-notebook: stopped (front never started, 0 piped requests, 0 hub connections, 0 control channels closed)"
            in log
        )
    finally:
        if s.proc.poll() is None:
            s.stop()
        else:
            s.http.close()
            s.log.close()


def test_the_heap_is_left_alone_when_told(tmp_path: Path) -> None:
    """``settle_heap = False``: the collector is not touched (no collection, nothing frozen)."""
    s = JupyterServer(tmp_path, token=TOKEN, extra_args=("--MCPNotebookExtension.settle_heap=False",))
    try:
        assert s.http.get("mcp-notebook/kernels").json() == []
        assert "heap is settled" not in s.log_text()
    finally:
        s.stop()
