"""Regression tests from a review of the request side: races and edge cases of the sans-IO core,
the tools and the host config writer. Driven like tests/test_protocol.py, without sockets."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from test_protocol import META, STATELESS, TOKEN, req, rpc

from mcp_notebook.commands import clients_config as cc
from mcp_notebook.protocol.server import McpServer, ServerSettings
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.resources import Resources


def _server_with(uri: str, fn: Any) -> tuple[McpServer, Resources]:
    custom = CustomProvider()
    reg = make_registration(uri, fn, name="r", title=None, description=None, mime_type=None, annotations=None)
    custom.register(reg)
    hub = Resources([custom])
    return McpServer(hub, ServerSettings(token=TOKEN)), hub


def _events(stream: Any) -> list[dict[str, Any]]:
    return [json.loads(e.split(b"data: ", 1)[1]) for e in stream.drain()]


def _session(server: McpServer) -> str:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    sid = server.handle(req(rpc("initialize", init))).headers["Mcp-Session-Id"]
    server.handle(req(rpc("notifications/initialized", id=None), mcp_session_id=sid))
    return sid


def test_listen_acknowledgement_comes_before_a_concurrent_change():
    """A change reported while the listen is being set up (here: by the resource's own code, run for the
    baseline digest) must not reach the stream before the acknowledgement."""
    holder: dict[str, Resources] = {}

    def noisy() -> str:
        holder["hub"].changed(list_changed=True)  # e.g. mcp_notebook.notify() from another thread
        return "x"

    server, hub = _server_with("test://noisy", noisy)
    holder["hub"] = hub
    params = {"notifications": {"resourcesListChanged": True, "resourceSubscriptions": ["test://noisy"]}, "_meta": META}
    reply = server.handle(
        req(
            rpc("subscriptions/listen", params, id="L"),
            mcp_protocol_version=STATELESS,
            mcp_method="subscriptions/listen",
        )
    )
    events = _events(reply.stream)
    assert events[0]["method"] == "notifications/subscriptions/acknowledged", [e["method"] for e in events]
    server.stream_closed(reply.stream)
    assert hub.watched() == frozenset()
    hub.close()


def test_subscribe_racing_the_end_of_its_session_leaks_no_watch():
    """A session ended (DELETE, eviction) while its resources/subscribe runs on a worker must not leave
    a watch behind that nobody will ever release."""
    holder: dict[str, Any] = {}

    def ends_the_session() -> str:
        if not holder.get("done"):
            holder["done"] = True
            holder["server"].handle(req(b"", method="DELETE", mcp_session_id=holder["sid"]))
        return "x"

    server, hub = _server_with("test://r", ends_the_session)
    holder["server"] = server
    sid = holder["sid"] = _session(server)
    assert server.handle(req(rpc("logging/setLevel", {"level": "debug"}), mcp_session_id=sid)).status == 200
    reply = server.handle(req(rpc("resources/subscribe", {"uri": "test://r"}, id=5), mcp_session_id=sid))
    assert holder["done"] and not server.sessions()
    assert "test://r" not in hub.watched()
    assert "error" in json.loads(reply.body)
    hub.close()


def test_changes_since_with_a_non_ascii_digit_cursor_is_a_tool_error():
    server, hub = _server_with("test://r", lambda: "x")
    sid = _session(server)
    cursor = f"{hub.journal.epoch}.\u00b2"  # "²".isdigit() is True, int("²") raises
    params = {"name": "changes_since", "arguments": {"cursor": cursor}}
    reply = json.loads(server.handle(req(rpc("tools/call", params), mcp_session_id=sid)).body)
    assert "result" in reply, reply
    assert reply["result"]["isError"] is True
    hub.close()


def test_config_write_keeps_a_file_holding_a_token_owner_only(tmp_path: Path):
    path = tmp_path / ".mcp.json"
    secret = cc.entry("claude-code", bridge_args=[], url="http://127.0.0.1:1/mcp", token="s3cret")
    cc.write("claude-code", path, "http-one", secret)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    cc.write("claude-code", path, "bridge", cc.entry("claude-code", bridge_args=["--latest"]))
    doc = json.loads(path.read_text())
    assert set(doc["mcpServers"]) == {"http-one", "bridge"}  # the token is still in the file ...
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # ... so it stays owner-only
