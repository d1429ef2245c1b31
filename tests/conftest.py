"""Shared fixtures: a real kernel with the hub loaded, and an HTTP client bound to it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kernel_harness import Kernel

INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "pytest", "version": "1"},
}


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A fresh kernel per test module, with its own Jupyter runtime dir."""
    runtime = tmp_path_factory.mktemp("runtime")
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
    try:
        yield k
    finally:
        k.shutdown()


@pytest.fixture(scope="module")
def hub(kernel: Kernel) -> dict[str, Any]:
    """connection_info() of a hub loaded in the module's kernel."""
    return kernel.load_hub()


class Mcp:
    """A raw JSON-RPC-over-HTTP client for protocol-level assertions (headers, status codes)."""

    def __init__(self, info: dict[str, Any]):
        self.url = info["url"]
        self.token = info["token"]
        self.http = httpx.Client(timeout=30)
        self.session: str | None = None
        self.version = "2025-11-25"
        self._id = 0

    def headers(self, **extra: str) -> dict[str, str]:
        h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if self.session:
            h["Mcp-Session-Id"] = self.session
            h["MCP-Protocol-Version"] = self.version
        h.update(extra)
        return h

    def post(self, body: Any, **headers: str) -> httpx.Response:
        return self.http.post(self.url, json=body, headers=self.headers(**headers))

    def initialize(self, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        params = {**INIT, "protocolVersion": version}
        if capabilities is not None:
            params["capabilities"] = capabilities
        r = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert r.status_code == 200, r.text
        self.session = r.headers["mcp-session-id"]
        self.version = r.json()["result"]["protocolVersion"]
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        return r.json()["result"]

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        r = self.post({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params or {}})
        assert r.status_code == 200, r.text
        return r.json()

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.call(method, params)
        assert "result" in reply, reply
        return reply["result"]

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def mcp(hub: dict[str, Any]) -> Iterator[Mcp]:
    client = Mcp(hub)
    client.initialize()
    try:
        yield client
    finally:
        client.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test's report carries the tails of the live servers' and hubs' logs (live_logs.py)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        import live_logs

        for title, text in live_logs.tails():
            report.sections.append((title, text))
