"""The flat path for cached reads (protocol/fast_read.py) answers exactly as the general path would.

Generated requests vary everything the general path looks at (era headers, ``_meta``, ids, URIs,
sessions, content types, log levels, extra fields, JSON shapes). Whenever ``fast_read`` answers,
its reply must equal ``handle()``'s reply to the same request, byte for byte; and it must answer
the plain cached read of each era (or it would be dead code).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_protocol import META, STATELESS, TOKEN, make_server, open_session

from mcp_notebook.protocol.server import HttpRequest

NS = {"n": 3, "s": "text", "big": 10**20, "obj": object()}
URIS = ["nb://vars/n", "nb://vars/s", "nb://vars/big", "nb://vars/obj", "nb://vars/missing", "nb://vars", "x", ""]


def base_headers() -> dict[str, str]:
    return {"host": "127.0.0.1:9", "authorization": f"Bearer {TOKEN}", "content-type": "application/json"}


def request(headers: dict[str, str], body: Any) -> HttpRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return HttpRequest("POST", headers, raw, admitted=True)


def answer(reply: Any) -> tuple[int, bytes | None, dict[str, str]]:
    return reply.status, reply.body, dict(reply.headers)


SERVER, _, _ = make_server(ns=NS)
SID = open_session(SERVER)
OLD_SID = open_session(SERVER, "2025-03-26")


def warm() -> None:
    """Fill the read cache through the general path, in both eras and both session versions."""
    for uri in URIS:
        h = {**base_headers(), "mcp-protocol-version": STATELESS, "mcp-method": "resources/read", "mcp-name": uri}
        SERVER.handle(
            request(h, {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": META}})
        )
        for sid in (SID, OLD_SID):
            h = {**base_headers(), "mcp-session-id": sid}
            SERVER.handle(request(h, {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}}))


ODD_IDS = [None, True, 1.5, [], {"a": 1}, "", "ü", -(2**70)]


def _mutations(uri: str) -> list[tuple[str, Any]]:
    """(what, value) pairs, each a small departure from a well-formed cached read."""
    return [
        ("header:mcp-protocol-version", None),
        ("header:mcp-protocol-version", "2025-11-25"),
        ("header:mcp-protocol-version", "2025-03-26"),
        ("header:mcp-protocol-version", STATELESS),
        ("header:mcp-protocol-version", "bogus"),
        ("header:mcp-session-id", None),
        ("header:mcp-session-id", "nope"),
        ("header:mcp-session-id", ""),
        ("header:mcp-session-id", OLD_SID),
        ("header:mcp-method", None),
        ("header:mcp-method", "resources/list"),
        ("header:mcp-name", None),
        ("header:mcp-name", uri + "x"),
        ("header:mcp-name", "=?base64?bmI6Ly92YXJzL24=?="),
        ("header:content-type", None),
        ("header:content-type", "application/json; charset=utf-8"),
        ("header:content-type", "text/plain"),
        ("header:content-type", "APPLICATION/JSON"),
        *(("id", v) for v in ODD_IDS),
        ("drop", "id"),
        ("jsonrpc", "1.0"),
        ("method", "resources/list"),
        ("method", "ping"),
        ("params", None),
        ("params", [1]),
        ("uri", 5),
        ("uri", None),
        ("uri", "nb://vars/missing"),
        ("uri", "nb://vars/obj"),
        ("uri", "nb://vars"),
        ("drop-param", "uri"),
        ("meta", None),
        ("meta", "m"),
        ("meta", {}),
        ("meta", dict(META)),
        ("meta-field", ("io.modelcontextprotocol/protocolVersion", "2025-11-25")),
        ("meta-field", ("io.modelcontextprotocol/protocolVersion", 7)),
        ("meta-field", ("io.modelcontextprotocol/protocolVersion", None)),
        ("meta-field", ("io.modelcontextprotocol/clientCapabilities", [])),
        ("meta-field", ("io.modelcontextprotocol/clientCapabilities", None)),
        ("meta-field", ("io.modelcontextprotocol/logLevel", "debug")),
        ("meta-field", ("io.modelcontextprotocol/logLevel", "loud")),
        ("meta-field", ("io.modelcontextprotocol/clientInfo", {"name": "c", "version": "1"})),
        ("meta-field", ("io.modelcontextprotocol/clientInfo", "x")),
        ("meta-drop", "io.modelcontextprotocol/protocolVersion"),
        ("meta-drop", "io.modelcontextprotocol/clientCapabilities"),
        ("extra-param", {"a": [1]}),
        ("batch", None),
        ("raw", b" "),
        ("raw", b"}"),
    ]


def _apply(headers: dict[str, str], body: dict[str, Any], what: str, value: Any) -> Any:
    if what.startswith("header:"):
        name = what[7:]
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    elif what == "drop":
        body.pop(value, None)
    elif what in ("id", "jsonrpc", "method", "params"):
        body[what] = value
    elif isinstance(body.get("params"), dict):
        params = body["params"]
        if what == "uri":
            params["uri"] = value
        elif what == "drop-param":
            params.pop(value, None)
        elif what == "extra-param":
            params["extra"] = value
        elif what == "meta":
            params["_meta"] = value
        elif isinstance(params.get("_meta"), dict):
            meta = params["_meta"] = dict(params["_meta"])
            if what == "meta-field":
                meta[value[0]] = value[1]
            elif what == "meta-drop":
                meta.pop(value, None)
    return None


def well_formed(era: str, uri: str, msg_id: Any, old_header: bool) -> tuple[dict[str, str], dict[str, Any]]:
    headers = base_headers()
    params: dict[str, Any] = {"uri": uri}
    if era == "stateless":
        headers.update({"mcp-protocol-version": STATELESS, "mcp-method": "resources/read", "mcp-name": uri})
        params["_meta"] = dict(META)
    else:
        headers["mcp-session-id"] = SID if era == "handshake" else OLD_SID
        if old_header:
            headers["mcp-protocol-version"] = "2025-11-25" if era == "handshake" else "2025-03-26"
    return headers, {"jsonrpc": "2.0", "id": msg_id, "method": "resources/read", "params": params}


def mutated(era: str, uri: str, msg_id: Any, old_header: bool, mutations: list[tuple[str, Any]]) -> HttpRequest:
    headers, body = well_formed(era, uri, msg_id, old_header)
    batch, tail = False, b""
    for what, value in mutations:
        if what == "batch":
            batch = True
        elif what == "raw":
            tail = value
        else:
            _apply(headers, body, what, value)
    raw = json.dumps([body] if batch else body).encode() + tail
    return request(headers, raw)


ERAS = ["stateless", "handshake", "old"]


@st.composite
def requests(draw: st.DrawFn) -> HttpRequest:
    """A well-formed cached read of either era, with zero to three departures from it."""
    uri = draw(st.sampled_from(URIS[:3]))
    msg_id = draw(st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=4)))
    mutations = draw(st.lists(st.sampled_from(_mutations(uri)), max_size=3))
    return mutated(draw(st.sampled_from(ERAS)), uri, msg_id, draw(st.booleans()), mutations)


def same_answer(req: HttpRequest) -> bool:
    """True when the flat path answered; asserts its answer is the general path's."""
    fast = SERVER.flat.answer(HttpRequest(req.method, req.headers, req.body, admitted=True))
    if fast is None:
        return False
    general = SERVER.handle(HttpRequest(req.method, req.headers, req.body, admitted=True))
    assert answer(fast) == answer(general), (req.headers, req.body)
    return True


def test_every_single_departure_in_every_era():
    warm()
    answered = 0
    for era in ERAS:
        for old_header in (False, True):
            for mutation in _mutations("nb://vars/n"):
                answered += same_answer(mutated(era, "nb://vars/n", 5, old_header, [mutation]))
    assert answered > 20  # the harmless departures (an extra param, another cached uri, ...) stay fast


def test_the_plain_cached_read_of_each_era_takes_the_flat_path():
    warm()
    stateless_headers = {
        **base_headers(),
        "mcp-protocol-version": STATELESS,
        "mcp-method": "resources/read",
        "mcp-name": "nb://vars/n",
    }
    body = {"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": "nb://vars/n", "_meta": META}}
    fast = SERVER.flat.answer(request(stateless_headers, body))
    assert fast is not None and answer(fast) == answer(SERVER.handle(request(stateless_headers, body)))
    for sid in (SID, OLD_SID):
        h = {**base_headers(), "mcp-session-id": sid}
        body = {"jsonrpc": "2.0", "id": "x", "method": "resources/read", "params": {"uri": "nb://vars/s"}}
        fast = SERVER.flat.answer(request(h, body))
        assert fast is not None and answer(fast) == answer(SERVER.handle(request(h, body)))


def test_a_changed_value_is_not_served_from_the_flat_path():
    warm()
    h = {**base_headers(), "mcp-session-id": SID}
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "nb://vars/n"}}
    assert SERVER.flat.answer(request(h, body)) is not None
    NS["n"] = 4
    try:
        assert SERVER.flat.answer(request(h, body)) is None  # stale entry: the general path re-reads
        reply = json.loads(SERVER.handle(request(h, body)).body)
        assert json.loads(reply["result"]["contents"][0]["text"])["repr"] == "4"
        assert SERVER.flat.answer(request(h, body)) is not None  # and refills the cache
    finally:
        NS["n"] = 3


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_whenever_the_flat_path_answers_it_answers_like_the_general_path(req: HttpRequest):
    warm()
    same_answer(req)
