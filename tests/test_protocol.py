"""The sans-IO protocol core, driven without sockets: McpServer.handle(HttpRequest) -> HttpReply."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace
from typing import Any

import pytest

from mcp_notebook.budget import Limits
from mcp_notebook.protocol.server import HttpRequest, McpServer, ServerSettings
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.providers.variables import VariablesProvider
from mcp_notebook.redact import DEFAULT_SECRET_WORDS, NameFilter
from mcp_notebook.resources import Resources
from mcp_notebook.revisions import HANDSHAKE_VERSIONS

TOKEN = "t0ken"
STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}


def make_server(page_size: int = 500, ns: dict[str, Any] | None = None) -> tuple[McpServer, dict[str, Any], Resources]:
    ns = {} if ns is None else ns
    limits = Limits(SimpleNamespace(max_read_chars=60_000, repr_timeout=2.0))
    variables = VariablesProvider(ns, {}, lambda: NameFilter(DEFAULT_SECRET_WORDS, [], []), limits)
    custom = CustomProvider()
    custom.register(
        make_registration(
            "test://static",
            lambda: "hello",
            name="static",
            title="Static",
            description=None,
            mime_type="text/plain",
            annotations={"lastModified": "2026-01-01T00:00:00Z", "priority": 0.5},
            icons=[{"src": "data:image/png;base64,AA==", "mimeType": "image/png"}],
        )
    )
    custom.register(
        make_registration(
            "test://item/{id}",
            lambda id: f"item {id}",
            name="item",
            title=None,
            description=None,
            mime_type=None,
            annotations=None,
            complete={"id": ["apple", "apricot", "banana"]},
        )
    )
    hub = Resources([variables, custom])
    server = McpServer(hub, ServerSettings(token=TOKEN, page_size=page_size))
    return server, ns, hub


def req(body: Any, method: str = "POST", **headers: str) -> HttpRequest:
    h = {"host": "127.0.0.1:9", "authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    h.update({k.lower().replace("_", "-"): v for k, v in headers.items()})
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return HttpRequest(method, h, raw if method == "POST" else b"")


def rpc(method: str, params: dict[str, Any] | None = None, id: int | None = 1) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if id is not None:
        msg["id"] = id
    return msg


def open_session(server: McpServer, version: str = "2025-11-25") -> str:
    init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    reply = server.handle(req(rpc("initialize", init)))
    assert reply.status == 200
    sid = reply.headers["Mcp-Session-Id"]
    assert server.handle(req(rpc("notifications/initialized", id=None), mcp_session_id=sid)).status == 202
    return sid


def call(server: McpServer, sid: str, method: str, params: dict[str, Any] | None = None, **headers: str) -> dict:
    reply = server.handle(req(rpc(method, params), mcp_session_id=sid, **headers))
    assert reply.status == 200, reply.body
    return json.loads(reply.body)


def stateless(server: McpServer, method: str, params: dict[str, Any] | None = None, **headers: str):
    h = {"mcp_protocol_version": STATELESS, "mcp_method": method}
    if method == "resources/read":
        h["mcp_name"] = (params or {}).get("uri", "")
    h.update(headers)
    reply = server.handle(req(rpc(method, {**(params or {}), "_meta": META}), **h))
    return reply.status, json.loads(reply.body) if reply.body else None


# -- lifecycle and sessions ---------------------------------------------------------------------
@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_initialize_echoes_supported_versions(version):
    server, _, _ = make_server()
    reply = server.handle(req(rpc("initialize", {"protocolVersion": version, "capabilities": {}})))
    result = json.loads(reply.body)["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    assert ("completions" in result["capabilities"]) == (version >= "2025-03-26")
    assert ("title" in result["serverInfo"]) == (version >= "2025-06-18")


def test_initialize_offers_latest_for_unknown_version():
    server, _, _ = make_server()
    reply = server.handle(req(rpc("initialize", {"protocolVersion": "1999-01-01", "capabilities": {}})))
    assert json.loads(reply.body)["result"]["protocolVersion"] == "2025-11-25"


def test_session_header_rules():
    server, _, _ = make_server()
    assert server.handle(req(rpc("ping"))).status == 400  # no session
    assert server.handle(req(rpc("ping"), mcp_session_id="nope")).status == 404
    sid = open_session(server)
    assert call(server, sid, "ping")["result"] == {}
    bad = server.handle(req(rpc("ping"), mcp_session_id=sid, mcp_protocol_version="1999-01-01"))
    assert bad.status == 400
    # An older revision in the header inside a newer session is accepted (real peers do this).
    assert call(server, sid, "ping", mcp_protocol_version="2025-03-26")["result"] == {}
    assert server.handle(req(b"", "DELETE", mcp_session_id=sid)).status == 200
    assert server.handle(req(rpc("ping"), mcp_session_id=sid)).status == 404


def test_logging_set_level():
    server, _, _ = make_server()
    sid = open_session(server)
    assert call(server, sid, "logging/setLevel", {"level": "warning"})["result"] == {}
    assert call(server, sid, "logging/setLevel", {"level": "loud"})["error"]["code"] == -32602


# -- framing and errors -----------------------------------------------------------------------
def test_parse_and_request_errors():
    server, _, _ = make_server()
    sid = open_session(server)
    bad_json = server.handle(req(b"{nope", mcp_session_id=sid))
    assert bad_json.status == 400 and json.loads(bad_json.body)["error"]["code"] == -32700
    deep = server.handle(req(b"[" * 100_000 + b"]" * 100_000, mcp_session_id=sid))
    assert deep.status == 400 and json.loads(deep.body)["error"]["code"] == -32700
    no_version = server.handle(req({"id": 1, "method": "ping"}, mcp_session_id=sid))
    assert json.loads(no_version.body)["error"]["code"] == -32600
    params_list = server.handle(req({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": [1]}, mcp_session_id=sid))
    assert json.loads(params_list.body)["error"]["code"] == -32602
    assert call(server, sid, "no/such/method")["error"]["code"] == -32601
    assert call(server, sid, "resources/read", {})["error"]["code"] == -32602
    wrong_type = server.handle(HttpRequest("POST", {**req({}).headers, "content-type": "text/plain"}, b"{}"))
    assert wrong_type.status == 415


def test_batches_follow_the_revision():
    server, _, _ = make_server()
    old = open_session(server, "2025-03-26")
    batch = [rpc("ping", id=1), rpc("notifications/initialized", id=None), {"bad": True}, rpc("resources/list", id=2)]
    reply = server.handle(req(batch, mcp_session_id=old))
    answers = json.loads(reply.body)
    assert [a.get("id") for a in answers] == [1, None, 2]
    assert answers[1]["error"]["code"] == -32600
    only_notes = server.handle(req([rpc("notifications/initialized", id=None)], mcp_session_id=old))
    assert only_notes.status == 202
    new = open_session(server, "2025-06-18")
    refused = server.handle(req([rpc("ping", id=3), rpc("notifications/initialized", id=None)], mcp_session_id=new))
    assert refused.status == 400  # each request gets the error by its id, the notification nothing
    assert [(a["id"], a["error"]["code"]) for a in json.loads(refused.body)] == [(3, -32600)]
    assert "not part of MCP 2025-06-18" in json.loads(refused.body)[0]["error"]["message"]
    only_notes = server.handle(req([rpc("notifications/initialized", id=None)], mcp_session_id=new))
    assert only_notes.status == 400 and json.loads(only_notes.body)["id"] is None  # no request: one error
    assert server.handle(req([], mcp_session_id=old)).status == 400


def test_notifications_and_responses_get_202():
    server, _, _ = make_server()
    sid = open_session(server)
    assert (
        server.handle(req(rpc("notifications/cancelled", {"requestId": 3}, id=None), mcp_session_id=sid)).status == 202
    )
    response = {"jsonrpc": "2.0", "id": 9, "result": {}}
    assert server.handle(req(response, mcp_session_id=sid)).status == 202


# -- resources ----------------------------------------------------------------------------------
def test_pagination_with_opaque_cursors():
    ns = {f"v{i}": i for i in range(7)}
    server, _, _ = make_server(page_size=3, ns=ns)
    sid = open_session(server)
    seen, cursor, pages = [], None, 0
    while pages < 10:
        pages += 1
        result = call(server, sid, "resources/list", {"cursor": cursor} if cursor else {})["result"]
        seen += [r["uri"] for r in result["resources"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert {f"nb://vars/v{i}" for i in range(7)} <= set(seen)
    assert len(seen) == len(set(seen)) == 7 + 2  # nb://vars index and test://static
    for bad in ("garbage", 5, "eyJvIjogLTF9"):
        assert call(server, sid, "resources/list", {"cursor": bad})["error"]["code"] == -32602


def test_fields_are_filtered_per_revision():
    server, _, _ = make_server()
    by_version = {}
    for version in HANDSHAKE_VERSIONS:
        sid = open_session(server, version)
        resources = call(server, sid, "resources/list")["result"]["resources"]
        by_version[version] = next(r for r in resources if r["uri"] == "test://static")
    assert "title" not in by_version["2024-11-05"] and "title" in by_version["2025-06-18"]
    assert "icons" not in by_version["2025-06-18"] and by_version["2025-11-25"]["icons"][0]["mimeType"] == "image/png"
    assert "lastModified" not in by_version["2025-03-26"]["annotations"]
    assert by_version["2025-06-18"]["annotations"]["lastModified"] == "2026-01-01T00:00:00Z"


def test_read_text_template_and_not_found():
    server, ns, _ = make_server()
    ns["x"] = [1, 2]
    sid = open_session(server)
    hub_text = call(server, sid, "resources/read", {"uri": "test://item/42"})["result"]["contents"][0]
    assert hub_text == {"uri": "test://item/42", "mimeType": "text/plain", "text": "item 42"}
    missing = call(server, sid, "resources/read", {"uri": "test://nothing"})["error"]
    assert missing["code"] == -32002 and missing["data"] == {"uri": "test://nothing"}
    var_missing = call(server, sid, "resources/read", {"uri": "nb://vars/nope"})["error"]
    assert var_missing["code"] == -32002


def test_completion_for_templates_and_prompts():
    server, _, _ = make_server()
    sid = open_session(server)
    params = {"ref": {"type": "ref/resource", "uri": "test://item/{id}"}, "argument": {"name": "id", "value": "ap"}}
    assert call(server, sid, "completion/complete", params)["result"]["completion"]["values"] == ["apple", "apricot"]
    prompt = {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}}
    assert call(server, sid, "completion/complete", prompt)["result"]["completion"]["values"] == []
    bad = {"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": ""}}
    assert call(server, sid, "completion/complete", bad)["error"]["code"] == -32602


def test_subscriptions_reach_only_subscribers():
    server, ns, hub = make_server()
    ns["a"], ns["b"] = [1], [1]
    hub.after_cell()
    watcher, other = open_session(server), open_session(server)
    streams = {}
    for sid in (watcher, other):
        streams[sid] = server.handle(req(b"", "GET", mcp_session_id=sid, accept="text/event-stream")).stream
    call(server, watcher, "resources/subscribe", {"uri": "nb://vars/a"})
    ns["a"] = [2]
    hub.after_cell()
    got = b"".join(streams[watcher].drain())
    assert b"notifications/resources/updated" in got and b"nb://vars/a" in got
    assert b"resources/updated" not in b"".join(streams[other].drain())
    ns["c"] = 1
    hub.after_cell()
    assert b"list_changed" in b"".join(streams[other].drain())
    call(server, watcher, "resources/unsubscribe", {"uri": "nb://vars/a"})
    assert "nb://vars/a" not in hub.watched()


# -- the stateless era -----------------------------------------------------------------------------
def test_discover_and_stateless_results():
    server, _, _ = make_server()
    status, body = stateless(server, "server/discover")
    result = body["result"]
    assert status == 200 and "2026-07-28" in result["supportedVersions"]
    assert result["resultType"] == "complete" and result["cacheScope"] in ("public", "private")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-notebook"
    for method in ("resources/list", "resources/templates/list"):
        status, body = stateless(server, method)
        assert status == 200 and body["result"]["ttlMs"] == 0 and body["result"]["resultType"] == "complete"
    status, body = stateless(server, "resources/read", {"uri": "test://static"})
    assert body["result"]["contents"][0]["text"] == "hello" and "cacheScope" in body["result"]


def test_stateless_errors():
    server, _, _ = make_server()
    status, body = stateless(server, "resources/read", {"uri": "test://missing"})
    assert body["error"]["code"] == -32602 and body["error"]["data"]["uri"] == "test://missing"
    no_meta = server.handle(req(rpc("resources/list"), mcp_protocol_version=STATELESS, mcp_method="resources/list"))
    assert no_meta.status == 400 and json.loads(no_meta.body)["error"]["code"] == -32602
    old_meta = {**META, "io.modelcontextprotocol/protocolVersion": "2031-01-01"}
    unsupported = server.handle(
        req(rpc("resources/list", {"_meta": old_meta}), mcp_protocol_version="2031-01-01", mcp_method="resources/list")
    )
    err = json.loads(unsupported.body)["error"]
    assert unsupported.status == 400 and err["code"] == -32022 and err["data"]["requested"] == "2031-01-01"
    status, body = stateless(server, "resources/list", mcp_method="resources/read")
    assert status == 400 and body["error"]["code"] == -32020
    status, body = stateless(server, "resources/read", {"uri": "test://static"}, mcp_name="test://other")
    assert status == 400 and body["error"]["code"] == -32020
    status, body = stateless(server, "initialize")
    assert status == 404 and body["error"]["code"] == -32601
    assert server.handle(req(b"", "GET")).status == 405
    assert server.handle(req(b"", "DELETE")).status == 405


def test_mcp_name_base64_form():
    server, _, _ = make_server()
    uri = "test://item/é"
    encoded = "=?base64?" + base64.b64encode(uri.encode()).decode() + "?="
    status, body = stateless(server, "resources/read", {"uri": uri}, mcp_name=encoded)
    assert status == 200 and body["result"]["contents"][0]["text"] == "item é"


def test_listen_stream_acknowledges_then_notifies_and_releases():
    server, ns, hub = make_server()
    ns["w"] = {"k": 1}
    hub.after_cell()
    params = {"notifications": {"resourcesListChanged": True, "resourceSubscriptions": ["nb://vars/w"]}, "_meta": META}
    body = rpc("subscriptions/listen", params, id="listen-1")
    reply = server.handle(req(body, mcp_protocol_version=STATELESS, mcp_method="subscriptions/listen"))
    stream = reply.stream
    events = [json.loads(e.split(b"data: ", 1)[1]) for e in stream.drain()]
    assert events[0]["method"] == "notifications/subscriptions/acknowledged"
    assert events[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"
    ns["w"]["k"] = 2  # in-place: found by the exact check on the hub worker
    hub.after_cell()
    assert hub.drain()
    ns["new"] = 1
    hub.after_cell()
    events = [json.loads(e.split(b"data: ", 1)[1]) for e in stream.drain()]
    methods = [e["method"] for e in events]
    assert "notifications/resources/updated" in methods and "notifications/resources/list_changed" in methods
    assert all(e["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1" for e in events)
    server.stream_closed(stream)
    assert "nb://vars/w" not in hub.watched()


def test_listen_ends_gracefully_on_close():
    server, _, _ = make_server()
    params = {"notifications": {"resourceSubscriptions": ["test://static"]}, "_meta": META}
    reply = server.handle(
        req(
            rpc("subscriptions/listen", params, id=7), mcp_protocol_version=STATELESS, mcp_method="subscriptions/listen"
        )
    )
    server.close()
    events = [json.loads(e.split(b"data: ", 1)[1]) for e in reply.stream.drain()]
    assert events[-1] == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": 7}},
    }
    assert reply.stream.closed


# -- admission ----------------------------------------------------------------------------------
def test_token_origin_and_host_checks():
    server, _, _ = make_server()
    body = rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    no_token = req(body)
    del no_token.headers["authorization"]
    assert server.handle(no_token).status == 401
    assert server.handle(req(body, authorization="Bearer wrong")).status == 401
    assert server.handle(req(body, origin="http://evil.example.com")).status == 403
    assert server.handle(req(body, origin="null")).status == 403
    assert server.handle(req(body, host="evil.example.com")).status == 403
    assert server.handle(req(body, host="localhost:8888", origin="http://localhost:3000")).status == 200
    assert server.handle(req(body, host="[::1]:8888")).status == 200


# -- logging ------------------------------------------------------------------------------------
def _sse_messages(reply) -> list[dict[str, Any]]:
    return [json.loads(e.split(b"data: ", 1)[1]) for e in reply.stream.drain()]


def test_per_request_log_level_puts_logs_on_the_response_stream():
    server, ns, hub = make_server()

    class Boom:
        def __repr__(self):
            raise RuntimeError("bad repr")

    ns["boom"] = Boom()
    hub.after_cell()
    accept = "application/json, text/event-stream"
    meta = {**META, "io.modelcontextprotocol/logLevel": "warning"}
    body = rpc("resources/read", {"uri": "nb://vars/boom", "_meta": meta})
    headers = {"mcp_protocol_version": STATELESS, "mcp_method": "resources/read", "mcp_name": "nb://vars/boom"}
    reply = server.handle(req(body, accept=accept, **headers))
    messages = _sse_messages(reply)
    assert messages[0]["method"] == "notifications/message" and messages[0]["params"]["level"] == "error"
    assert messages[-1]["error"]["code"] == -32603 and reply.stream.closed
    # Without a log level: plain JSON, no log messages.
    plain = server.handle(
        req(rpc("resources/read", {"uri": "nb://vars/boom", "_meta": META}), accept=accept, **headers)
    )
    assert plain.stream is None and json.loads(plain.body)["error"]["code"] == -32603
    bad = server.handle(
        req(
            rpc("resources/list", {"_meta": {**META, "io.modelcontextprotocol/logLevel": "loud"}}),
            mcp_protocol_version=STATELESS,
            mcp_method="resources/list",
        )
    )
    assert bad.status == 400


def test_session_log_level_applies_to_its_requests():
    server, _, _ = make_server()
    sid = open_session(server)
    call(server, sid, "logging/setLevel", {"level": "info"})
    reply = server.handle(
        req(
            rpc("resources/subscribe", {"uri": "nb://vars/later"}),
            mcp_session_id=sid,
            accept="application/json, text/event-stream",
        )
    )
    messages = _sse_messages(reply)
    assert messages[0]["params"]["level"] == "info" and "does not exist yet" in messages[0]["params"]["data"]["message"]
    assert messages[-1]["result"] == {}


def test_variables_index_pages_under_the_read_budget():
    ns = {f"name_{i:05d}": list(range(3)) for i in range(3000)}
    server, _, hub = make_server(ns=ns)
    hub.after_cell()
    sid = open_session(server)
    uri, seen, pages = "nb://vars", [], 0
    while uri and pages < 100:
        pages += 1
        text = call(server, sid, "resources/read", {"uri": uri})["result"]["contents"][0]["text"]
        assert len(text) <= 60_000
        doc = json.loads(text)
        assert doc["count"] == 3000
        seen += [row["name"] for row in doc["variables"]]
        uri = doc.get("next")
        assert ("truncated" in doc) == (uri is not None)
    assert pages > 1 and seen == sorted(ns)
    small = json.loads(
        call(server, sid, "resources/read", {"uri": "nb://vars?offset=10&limit=5"})["result"]["contents"][0]["text"]
    )
    assert [r["name"] for r in small["variables"]] == [f"name_{i:05d}" for i in range(10, 15)]
    for bad in ("nb://vars?limit=0", "nb://vars?offset=-1", "nb://vars?limit=x", "nb://vars?page=2"):
        assert call(server, sid, "resources/read", {"uri": bad})["error"]["code"] == -32602


def test_batch_and_uri_limits():
    server, _, _ = make_server()
    old = open_session(server, "2025-03-26")
    too_many = [rpc("ping", id=i) for i in range(51)]
    reply = server.handle(req(too_many, mcp_session_id=old))
    answers = json.loads(reply.body)  # refused as a whole: each request answered with the error, by its id
    assert reply.status == 400 and [a["id"] for a in answers] == list(range(51))
    assert all("exceeds 50" in a["error"]["message"] for a in answers)
    assert len(json.loads(server.handle(req(too_many[:50], mcp_session_id=old)).body)) == 50
    long_uri = "test://item/" + "x" * 9000
    assert call(server, old, "resources/read", {"uri": long_uri})["error"]["code"] == -32602


@pytest.mark.parametrize(
    "uri, fn, words",
    [
        ("test://q{?q}", lambda q: q, ["q", "default"]),
        ("test://p/{id}{?a,b}", lambda id, a, b=1: a, ["'a'", "default"]),
        ("test://seg{/part}", lambda part: part, ["part", "default"]),
        ("test://item/{id}", lambda: "x", ["must accept", "id"]),
    ],
)
def test_a_template_variable_a_uri_may_leave_out_needs_a_default_at_declaration(uri, fn, words):
    """A query parameter or optional segment a URI may omit is refused at ``register`` when the
    function has no default for it (it would fail only at the first read that omits it)."""
    custom = CustomProvider()
    reg = make_registration(uri, fn, name=None, title=None, description=None, mime_type=None, annotations=None)
    with pytest.raises(TypeError) as caught:
        custom.register(reg)
    assert all(word in str(caught.value) for word in words), caught.value
    assert custom.registrations() == []


def test_optional_variables_with_defaults_or_kwargs_are_accepted_and_read():
    custom = CustomProvider()
    for uri, fn in (
        ("test://q{?q}", lambda q="none": f"q={q}"),
        ("test://k{?a,b}", lambda **kw: f"kw={sorted(kw.items())}"),
        ("test://seg{/part}", lambda part=None: f"part={part}"),
    ):
        custom.register(
            make_registration(uri, fn, name=None, title=None, description=None, mime_type=None, annotations=None)
        )
    assert custom.read("test://q")[0].text == "q=none"
    assert custom.read("test://q?q=1")[0].text == "q=1"
    assert custom.read("test://k?b=2")[0].text == "kw=[('b', '2')]"
    assert custom.read("test://seg")[0].text == "part=None"
    assert custom.read("test://seg/x")[0].text == "part=x"
