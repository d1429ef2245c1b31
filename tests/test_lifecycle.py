"""Load, unload, reload, restart and shutdown leave no port, thread, hook or runtime file behind."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from conftest import Mcp
from kernel_harness import Kernel

STATE = """\
import json as _json, threading as _th, time as _time
_deadline = _time.monotonic() + 5
while _time.monotonic() < _deadline and any(t.name.startswith(('mcp-notebook-http', 'mcp-notebook-req', 'mcp-notebook-hub')) for t in _th.enumerate()):
    _time.sleep(0.05)
_ip = get_ipython()
print(_json.dumps({
    "threads": sorted(t.name for t in _th.enumerate() if t.name.startswith("mcp-notebook")),
    "hooks": [getattr(cb, "__qualname__", repr(cb)) for ev in ("pre_run_cell", "post_run_cell", "pre_execute", "post_execute") for cb in _ip.events.callbacks[ev] if "mcp_notebook" in getattr(cb, "__module__", "")],
}))
"""


def state(kernel: Kernel) -> dict:
    return json.loads(kernel.run(STATE).stdout.strip().splitlines()[-1])


def port_open(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((parts.hostname, parts.port)) == 0


def runtime_files(runtime: Path) -> list[Path]:
    return sorted(runtime.glob("mcp-notebook-*.json"))


def test_load_prints_url_but_never_the_token(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        out = k.run("%load_ext mcp_notebook")
        info = k.info()
        assert info["url"] in out.stdout and info["token"] not in out.stdout + out.stderr
        shown = k.run("import mcp_notebook; mcp_notebook.connection_info()")
        assert info["token"] not in shown.text and "***" in shown.text
        files = runtime_files(tmp_path)
        assert len(files) == 1 and files[0].stat().st_mode & 0o777 == 0o600
        assert json.loads(files[0].read_text())["token"] == info["token"]
    finally:
        k.shutdown()
    assert runtime_files(tmp_path) == []  # shutdown removed it


def test_unload_with_open_streams_leaves_nothing(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        info = k.load_hub()
        k.run("x = 1")
        client = Mcp(info)
        client.initialize()
        ended: dict[str, bool] = {}

        def hold_get_stream() -> None:
            with httpx.stream("GET", info["url"], headers=client.headers(), timeout=30) as r:
                assert r.status_code == 200
                for _ in r.iter_bytes():
                    pass
            ended["get"] = True

        def hold_listen_stream() -> None:
            meta = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            body = {
                "jsonrpc": "2.0",
                "id": "l1",
                "method": "subscriptions/listen",
                "params": {"_meta": meta, "notifications": {"resourceSubscriptions": ["nb://vars/x"]}},
            }
            headers = {
                "Authorization": f"Bearer {info['token']}",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "subscriptions/listen",
                "Accept": "application/json, text/event-stream",
            }
            data = b""
            with httpx.stream("POST", info["url"], json=body, headers=headers, timeout=30) as r:
                for chunk in r.iter_bytes():
                    data += chunk
            ended["listen"] = b'"resultType":"complete"' in data  # the graceful final result

        threads = [threading.Thread(target=hold_get_stream), threading.Thread(target=hold_listen_stream)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while (
            time.monotonic() < deadline
            and "2 streams"
            not in k.run("import mcp_notebook as _m; _h=_m.hub(); print(len(_h.transport.streams), 'streams')").stdout
        ):
            time.sleep(0.1)
        assert state(k)["hooks"], "the post-cell hook is registered while loaded"
        k.run("%unload_ext mcp_notebook")
        for t in threads:
            t.join(10)
            assert not t.is_alive()
        assert ended == {"get": True, "listen": True}
        assert not port_open(info["url"])
        assert state(k) == {"threads": [], "hooks": []}
        assert runtime_files(tmp_path) == []
        assert k.run("print('kernel fine')").stdout.strip() == "kernel fine"
    finally:
        k.shutdown()


def test_reload_and_restart(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        first = k.load_hub()
        hooks_once = state(k)["hooks"]
        assert hooks_once
        k.run("%reload_ext mcp_notebook")
        second = k.info()
        assert second["url"] != first["url"] or second["token"] != first["token"]
        assert not port_open(first["url"]) or first["url"] == second["url"]
        assert state(k)["hooks"] == hooks_once  # no duplicates after a reload
        assert len(runtime_files(tmp_path)) == 1
        client = Mcp(second)
        client.initialize()
        assert client.result("ping") == {}
        k.restart()
        assert runtime_files(tmp_path) == []
        assert not port_open(second["url"])
        third = k.load_hub()
        assert Mcp(third).initialize()["protocolVersion"] == "2025-11-25"
    finally:
        k.shutdown()
    assert runtime_files(tmp_path) == []


def test_without_token_when_configured(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.run("%config MCPHub.require_token = False")
        out = k.run("%load_ext mcp_notebook")
        assert "require_token is False" in out.stderr
        info = k.info()
        assert info["token"] is None
        r = httpx.post(
            info["url"],
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
            },
        )
        assert r.status_code == 200
        # Origin and Host checks still apply without a token.
        r = httpx.post(info["url"], json={}, headers={"Origin": "http://evil.example.com"})
        assert r.status_code == 403
    finally:
        k.shutdown()


def test_bad_settings_fail_in_the_cell(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        k.run(f"%config MCPHub.port = {port}")
        out = k.run("%load_ext mcp_notebook", check=False)
        assert out.error is not None and "Address already in use" in out.error["evalue"]
        busy.close()
        assert state(k) == {"threads": [], "hooks": []}
        k.run("%config MCPHub.port = 0")
        assert k.load_hub()["url"].startswith("http://127.0.0.1:")
    finally:
        k.shutdown()
