"""Issue #10, request side, in-process: type confusion before auth, lone surrogates, wrong param types.

Driven like tests/test_protocol.py: McpServer.handle(HttpRequest) without sockets.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from test_protocol import META, STATELESS, TOKEN, make_server, open_session, req, rpc

from mcp_notebook.protocol import jsonrpc
from mcp_notebook.protocol.server import HttpRequest


def answer(reply: Any) -> dict[str, Any]:
    assert reply.status < 500, reply.body
    return json.loads(reply.body)


def call(server, sid, method, params=None, **headers) -> dict[str, Any]:
    return answer(server.handle(req(rpc(method, params), mcp_session_id=sid, **headers)))


def stateless(server, method, params, **headers) -> Any:
    body = rpc(method, {**params, "_meta": META})
    h = {"mcp_protocol_version": STATELESS, "mcp_method": method, **headers}
    return server.handle(req(body, **h))


# -- class 1: nothing before auth depends on the body's shape ------------------------------------
@pytest.mark.parametrize("method", [{}, [], 5, None, True, "ping"])
@pytest.mark.parametrize("token", [None, "wrong", TOKEN])
def test_any_method_shape_with_or_without_a_token_gets_an_answer(method, token):
    server, _, _ = make_server()
    headers = {"host": "127.0.0.1:9", "content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    r = HttpRequest("POST", headers, json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}).encode())
    assert server.may_run_user_code(r) is False  # decided without raising, and never for a refused request
    reply = server.handle(r)
    assert reply.status < 500
    if token != TOKEN:
        assert reply.status == 401


def test_may_run_user_code_does_not_look_at_the_body_of_a_refused_request():
    server, _, _ = make_server()
    headers = {"host": "127.0.0.1:9", "content-type": "application/json"}
    heavy = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "x"}}).encode()
    assert server.may_run_user_code(HttpRequest("POST", headers, heavy)) is False
    authed = {**headers, "authorization": f"Bearer {TOKEN}"}
    assert server.may_run_user_code(HttpRequest("POST", authed, heavy)) is True


# -- class 2: lone surrogates --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "code", "echo"),
    [
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":7,"method":"pi\\udc80ng"}', -32600, 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"nb://vars/\\udc80"}}', -32602, 7),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"\\ud800":1}}', -32602, 7),
        (b'[{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":["\\udfff"]}}]', -32602, 8),
    ],
)
def test_lone_surrogates_get_a_json_rpc_error(raw, code, echo):
    server, _, _ = make_server()
    sid = open_session(server, "2025-03-26")
    reply = server.handle(req(raw, mcp_session_id=sid))
    assert reply.status == 400
    body = json.loads(reply.body)
    assert body["error"]["code"] == code and body["id"] == echo
    reply.body.decode("utf-8")  # strict UTF-8 on the wire


def test_a_surrogate_pair_is_ordinary_text():
    server, _, _ = make_server()
    sid = open_session(server)
    raw = b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"ping"}'
    assert answer(server.handle(req(raw, mcp_session_id=sid))) == {"jsonrpc": "2.0", "id": "\U0001f600", "result": {}}


def test_bodies_that_are_not_strict_json_are_parse_errors():
    server, _, _ = make_server()
    sid = open_session(server)
    for raw in (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', b"\xff\xfe{}", b'"\xed\xa0\x80"'):
        reply = server.handle(req(raw, mcp_session_id=sid))
        assert reply.status == 400 and json.loads(reply.body)["error"]["code"] == -32700


def test_encoding_never_fails():
    assert json.loads(jsonrpc.dumps({"text": "a\ud800b"})) == {"text": "a\ud800b"}
    jsonrpc.dumps({"text": "a\ud800b"}).decode("ascii")


def test_a_value_holding_a_lone_surrogate_is_served():
    server, ns, hub = make_server()
    ns["s"] = "bad \udc80 text"
    hub.after_cell()
    sid = open_session(server)
    reply = call(server, sid, "resources/read", {"uri": "nb://vars/s"})
    assert "result" in reply, reply


# -- class 4: every param's type -----------------------------------------------------------------
_RES = {"type": "ref/resource", "uri": "test://item/{id}"}
WRONG_TYPES = [
    ("initialize", {"protocolVersion": 5, "capabilities": {}}, "protocolVersion"),
    ("initialize", {"protocolVersion": "2025-11-25", "capabilities": []}, "capabilities"),
    ("initialize", {"protocolVersion": "2025-11-25", "clientInfo": {"name": 5}}, "clientInfo.name"),
    ("ping", {"_meta": "x"}, "_meta"),
    ("logging/setLevel", {"level": ["debug"]}, "level"),
    ("logging/setLevel", {}, "level"),
    ("resources/list", {"cursor": 5}, "cursor"),
    ("resources/list", {"cursor": {}}, "cursor"),
    ("resources/templates/list", {"cursor": []}, "cursor"),
    ("resources/read", {"uri": 5}, "uri"),
    ("resources/read", {"uri": {"a": 1}}, "uri"),
    ("resources/subscribe", {"uri": []}, "uri"),
    ("resources/unsubscribe", {"uri": True}, "uri"),
    ("completion/complete", {"ref": _RES, "argument": {"name": "id", "value": "a"}, "context": []}, "context"),
    (
        "completion/complete",
        {"ref": _RES, "argument": {"name": "id", "value": "a"}, "context": {"arguments": {"seq": 5}}},
        "context.arguments.seq",
    ),
    (
        "completion/complete",
        {"ref": _RES, "argument": {"name": "id", "value": "a"}, "context": {"arguments": []}},
        "context.arguments",
    ),
    ("completion/complete", {"ref": {**_RES, "uri": 5}, "argument": {"name": "id", "value": "a"}}, "ref.uri"),
    ("completion/complete", {"ref": {"type": 5}, "argument": {"name": "id", "value": "a"}}, "ref.type"),
    ("completion/complete", {"ref": _RES, "argument": {"name": "id", "value": 5}}, "argument.value"),
    ("completion/complete", {"ref": _RES, "argument": "id"}, "argument"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": {}}, "argument": {"name": "a"}}, "ref.name"),
    ("tools/list", {"cursor": 5}, "cursor"),
    ("tools/call", {"name": 5}, "name"),
    ("tools/call", {"name": "read_resource", "arguments": "nb://vars"}, "arguments"),
    ("tools/call", {"name": "read_resource", "arguments": [1]}, "arguments"),
]


@pytest.mark.parametrize(("method", "params", "param"), WRONG_TYPES, ids=[f"{m}:{p}" for m, _, p in WRONG_TYPES])
def test_wrong_param_types_are_invalid_params_naming_the_param(method, params, param, caplog):
    server, ns, hub = make_server()
    ns["seq"] = 1
    hub.after_cell()
    caplog.set_level(logging.WARNING, "mcp_notebook")
    if method == "initialize":
        body = answer(server.handle(req(rpc(method, params))))
    else:
        body = call(server, open_session(server), method, params)
    assert body["error"]["code"] == -32602, body
    assert param in body["error"]["message"], body
    assert not caplog.records  # an expected input error, not an internal failure


STATELESS_WRONG = [
    ("resources/read", {"uri": ""}, "uri", {"mcp_name": ""}),
    ("resources/list", {"cursor": 5}, "cursor", {}),
    ("tools/call", {"name": "list_resources", "arguments": 5}, "arguments", {"mcp_name": "list_resources"}),
    (
        "completion/complete",
        {"ref": _RES, "argument": {"name": "id", "value": ""}, "context": {"arguments": {"id": None}}},
        "context.arguments.id",
        {},
    ),
    ("subscriptions/listen", {"notifications": {"resourcesListChanged": "yes"}}, "resourcesListChanged", {}),
    ("subscriptions/listen", {"notifications": {"resourceSubscriptions": [5]}}, "resourceSubscriptions[0]", {}),
    ("subscriptions/listen", {"notifications": []}, "notifications", {}),
]


@pytest.mark.parametrize(("method", "params", "param", "headers"), STATELESS_WRONG, ids=[m[2] for m in STATELESS_WRONG])
def test_stateless_era_wrong_param_types(method, params, param, headers):
    server, _, _ = make_server()
    reply = stateless(server, method, params, **headers)
    body = answer(reply)
    assert body["error"]["code"] == -32602, body
    assert param in body["error"]["message"], body


@pytest.mark.parametrize(
    "meta",
    [
        {"io.modelcontextprotocol/protocolVersion": {}, "io.modelcontextprotocol/clientCapabilities": {}},
        {"io.modelcontextprotocol/protocolVersion": [STATELESS], "io.modelcontextprotocol/clientCapabilities": {}},
        {**META, "io.modelcontextprotocol/logLevel": ["debug"]},
        {**META, "io.modelcontextprotocol/logLevel": {}},
    ],
)
def test_stateless_meta_of_the_wrong_type(meta):
    server, _, _ = make_server()
    body = rpc("server/discover", {"_meta": meta})
    reply = server.handle(req(body, mcp_protocol_version=STATELESS, mcp_method="server/discover"))
    assert reply.status == 400
    assert json.loads(reply.body)["error"]["code"] in (-32602, -32020)


def test_tool_argument_values_of_the_wrong_type_are_tool_errors_naming_them():
    """MCP 2025-11-25 (SEP-1303): input validation of a tool's arguments is a tool execution error, so the
    model sees it; the CallToolRequest's own shape (name, arguments object) is a protocol error above."""
    server, _, _ = make_server()
    sid = open_session(server)
    for args, named in (
        ({"uri": 5}, "arguments.uri"),
        ({}, "arguments.uri"),
        ({"uri": "x", "extra": 1}, "arguments.extra"),
    ):
        result = call(server, sid, "tools/call", {"name": "read_resource", "arguments": args})["result"]
        assert result["isError"] is True and named in result["content"][0]["text"]
    for args, named in (({"wait_seconds": "5"}, "arguments.wait_seconds"), ({"cursor": 5}, "arguments.cursor")):
        result = call(server, sid, "tools/call", {"name": "changes_since", "arguments": args})["result"]
        assert result["isError"] is True and named in result["content"][0]["text"]


def test_completion_with_context_arguments_of_the_right_type_still_works():
    server, _, _ = make_server()
    sid = open_session(server)
    params = {"ref": _RES, "argument": {"name": "id", "value": "ap"}, "context": {"arguments": {"other": "x"}}}
    assert call(server, sid, "completion/complete", params)["result"]["completion"]["values"] == ["apple", "apricot"]
