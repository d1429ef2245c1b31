"""The shorter GIL switch interval (transport/latency.py): on only while a cell runs and a client is
connected, never above the user's own setting, put back exactly, and off with a setting."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcp_notebook.transport.latency import CellSwitchInterval


@pytest.fixture
def user_interval() -> Iterator[float]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.004)
    try:
        yield sys.getswitchinterval()
    finally:
        sys.setswitchinterval(before)


def test_lowered_only_while_a_cell_runs_with_a_client(user_interval: float):
    sw = CellSwitchInterval(0.0005)
    sw.cell(True)
    assert sys.getswitchinterval() == user_interval and not sw.lowered  # nobody connected
    sw.client(1)
    assert sw.lowered and sys.getswitchinterval() == pytest.approx(0.0005)
    sw.client(1)
    sw.client(-1)
    assert sw.lowered  # one client is still there
    sw.cell(False)
    assert sys.getswitchinterval() == user_interval and not sw.lowered  # exactly the user's value
    sw.cell(True)
    assert sw.lowered
    sw.client(-1)
    assert sys.getswitchinterval() == user_interval and not sw.lowered  # the last client left
    sw.client(-1)  # never below zero clients
    assert sw.clients == 0


def test_the_users_own_setting_wins(user_interval: float):
    sw = CellSwitchInterval(0.0005)
    sw.client(1)
    sw.cell(True)
    sys.setswitchinterval(0.002)  # the cell sets its own interval while ours is in force
    sw.cell(False)
    assert sys.getswitchinterval() == pytest.approx(0.002)  # not overwritten with the old value
    sys.setswitchinterval(0.0001)  # already shorter than ours: never raised
    sw.cell(True)
    assert sys.getswitchinterval() == pytest.approx(0.0001) and not sw.lowered
    sw.cell(False)
    assert sys.getswitchinterval() == pytest.approx(0.0001)


def test_off_and_restore(user_interval: float):
    off = CellSwitchInterval(0.0)
    off.client(1)
    off.cell(True)
    assert sys.getswitchinterval() == user_interval and not off.lowered
    sw = CellSwitchInterval(0.0005)
    sw.client(1)
    sw.cell(True)
    assert sw.lowered
    sw.restore()  # the hub stops mid-cell
    assert sys.getswitchinterval() == user_interval and not sw.lowered


# -- in a real kernel, with a real client -------------------------------------------------------

PROBE = "import sys as _s; print(_s.getswitchinterval())"


def _interval(kernel: Any) -> float:
    return float(kernel.run(PROBE).stdout.strip().splitlines()[-1])


def _read(http: httpx.Client, info: dict[str, Any]) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": _META}}
    headers = {
        "Authorization": f"Bearer {info['token']}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "server/discover",
    }
    assert http.post(info["url"], json=body, headers=headers).status_code == 200


_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _until(kernel: Any, want: float) -> float:
    got = _interval(kernel)
    for _ in range(50):  # bounded: the hub thread sees a closed connection within milliseconds
        if got == pytest.approx(want):
            break
        time.sleep(0.05)
        got = _interval(kernel)
    return got


def test_in_a_kernel(kernel: Any):
    kernel.run("import sys as _s; _s.setswitchinterval(0.004)\n_after = []")
    kernel.run("%load_ext mcp_notebook")
    info = kernel.info()
    kernel.run(  # after the hub's own post-cell hook: what the interval is once a cell has ended
        "get_ipython().events.register('post_run_cell', lambda r=None: _after.append(_s.getswitchinterval()))"
    )
    assert _interval(kernel) == pytest.approx(0.004)  # no client connected
    with httpx.Client(timeout=30) as http:
        _read(http, info)
        assert _interval(kernel) == pytest.approx(0.00025)  # a cell runs, a client is connected
        assert float(kernel.run("print(_after[-1])").stdout.split()[-1]) == pytest.approx(0.004)
        kernel.run("_s.setswitchinterval(0.003)")  # the user's own change inside a cell stays
        assert float(kernel.run("print(_after[-1])").stdout.split()[-1]) == pytest.approx(0.003)
        kernel.run("_s.setswitchinterval(0.004)")
        kernel.run("%config MCPHub.switch_interval_us = 0")
        assert _interval(kernel) == pytest.approx(0.004)  # turned off
        kernel.run("%config MCPHub.switch_interval_us = 1000")
        assert _interval(kernel) == pytest.approx(0.001)
        kernel.run("%unload_ext mcp_notebook")  # unloaded mid-cell: put back at once
        assert _interval(kernel) == pytest.approx(0.004)
        kernel.run("%load_ext mcp_notebook")
        info = kernel.info()
        _read(http, info)
        assert _interval(kernel) == pytest.approx(0.001)  # the %config setting of this kernel
    assert _until(kernel, 0.004) == pytest.approx(0.004)  # the client left
    kernel.run("%unload_ext mcp_notebook")
