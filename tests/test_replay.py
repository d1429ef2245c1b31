"""Replayed reads: a request repeating the head and body of a cached read but for its id.

Over real sockets on 127.0.0.1. Every reply that comes back must equal what the general path
(``McpServer.handle``) answers to the same bytes; reads are repeated with other ids so the replay
path is taken, and state that may change between requests (the value, the session, the token)
is changed to check it is looked at again.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import test_fast_read
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_read import ERAS, _mutations, mutated
from test_protocol import META, STATELESS, TOKEN, make_server, open_session

from mcp_notebook.protocol.server import HttpRequest
from mcp_notebook.transport.server import HttpTransport

NS: dict[str, Any] = {"n": 3, "s": "text", "big": 10**20, "obj": object()}
SERVER, _, _ = make_server(ns=NS)  # its own server: stopping the transport closes it
SESSIONS = {test_fast_read.SID: open_session(SERVER), test_fast_read.OLD_SID: open_session(SERVER, "2025-03-26")}


@pytest.fixture(scope="module")
def transport() -> Iterator[HttpTransport]:
    t = HttpTransport(SERVER, "127.0.0.1", 0, 100_000)
    t.start()
    try:
        yield t
    finally:
        t.stop()


_LEFT: dict[int, bytes] = {}


def exchange(s: socket.socket, head: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    s.sendall(f"POST /mcp HTTP/1.1\r\n{lines}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    data = _LEFT.pop(s.fileno(), b"")
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    top, _, rest = data.partition(b"\r\n\r\n")
    fields = top.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        rest += s.recv(65536)
    _LEFT[s.fileno()] = rest[length:]
    return int(fields[0].split(" ")[1]), headers, rest[:length]


def general(head: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
    reply = SERVER.handle(HttpRequest("POST", {k.lower(): v for k, v in head.items()}, body, admitted=True))
    return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.body or b""


def same(got: tuple[int, dict[str, str], bytes], want: tuple[int, dict[str, str], bytes]) -> None:
    assert got[0] == want[0] and got[2] == want[2], (got, want)
    for name in ("content-type", "mcp-session-id"):
        assert got[1].get(name) == want[1].get(name), (name, got, want)


def read_body(uri: str, msg_id: int, stateless: bool) -> bytes:
    params: dict[str, Any] = {"uri": uri}
    if stateless:
        params["_meta"] = META
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "resources/read", "params": params}).encode()


def stateless_head(uri: str) -> dict[str, str]:
    return {
        "Host": "127.0.0.1",
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": STATELESS,
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
    }


def test_repeated_reads_follow_the_value_and_the_session(transport):
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        head = stateless_head("nb://vars/n")
        for msg_id in (11, 12, 13):  # same digit count: same head bytes, so replayed after the first
            got = exchange(s, head, read_body("nb://vars/n", msg_id, True))
            same(got, general(head, read_body("nb://vars/n", msg_id, True)))
            assert json.loads(got[2])["id"] == msg_id
        NS["n"] = 4
        try:
            got = exchange(s, head, read_body("nb://vars/n", 14, True))
            assert json.loads(json.loads(got[2])["result"]["contents"][0]["text"])["repr"] == "4"
        finally:
            NS["n"] = 3
        sid = open_session(SERVER)
        head = {
            "Host": "127.0.0.1",
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            "Mcp-Session-Id": sid,
        }
        for msg_id in (21, 22, 23):
            got = exchange(s, head, read_body("nb://vars/s", msg_id, False))
            assert got[0] == 200 and got[1]["mcp-session-id"] == sid and json.loads(got[2])["id"] == msg_id
        reply = SERVER.handle(
            HttpRequest("DELETE", {"host": "127.0.0.1", "authorization": f"Bearer {TOKEN}", "mcp-session-id": sid}, b"")
        )
        assert reply.status in (200, 202, 204)
        got = exchange(s, head, read_body("nb://vars/s", 24, False))
        assert got[0] == 404  # the session ended: not replayed from before


def test_another_token_is_not_replayed(transport):
    head = stateless_head("nb://vars/n")
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for msg_id in (31, 32):
            assert exchange(s, head, read_body("nb://vars/n", msg_id, True))[0] == 200
        old = SERVER.settings
        SERVER.settings = old.replace(token="other")
        try:
            assert exchange(s, head, read_body("nb://vars/n", 33, True))[0] == 401
        finally:
            SERVER.settings = old


def test_bodies_that_only_look_alike_take_the_general_path(transport):
    head = stateless_head("nb://vars/n")
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for msg_id in (41, 42):
            exchange(s, head, read_body("nb://vars/n", msg_id, True))
        for odd in (b"04", b"-1", b"4.", b"1e", b"  "):  # not a JSON integer in the id's place
            body = read_body("nb://vars/n", 99, True).replace(b"99", odd)
            same(exchange(s, head, body), general(head, body))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    era=st.sampled_from(ERAS),
    old_header=st.booleans(),
    mutations=st.lists(st.sampled_from(_mutations("nb://vars/n")), max_size=2),
)
def test_every_reply_equals_the_general_paths(transport, era, old_header, mutations):
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for msg_id in (51, 52, 53):
            req = mutated(era, "nb://vars/n", msg_id, old_header, mutations)
            head = {"Host": "127.0.0.1", **{k: v for k, v in req.headers.items() if k != "host"}}
            if "mcp-session-id" in head:  # the builder names test_fast_read's sessions: use ours
                head["mcp-session-id"] = SESSIONS.get(head["mcp-session-id"], head["mcp-session-id"])
            if era != "stateless" and not mutations:
                assert exchange(s, head, req.body)[0] == 200  # (the fixture's sessions are alive)
            same(exchange(s, head, req.body), general(head, req.body))


def test_a_body_is_split_around_its_id_only_when_that_is_provably_the_id():
    from mcp_notebook.protocol.fast_read import body_shape, id_between
    from mcp_notebook.protocol.jsonrpc import parse_body

    def shape(raw: bytes) -> tuple[bytes, bytes] | None:
        return body_shape(raw, parse_body(raw))

    plain = b'{"jsonrpc":"2.0","id":12,"method":"resources/read","params":{"uri":"nb://vars/n"}}'
    prefix, suffix = shape(plain)
    assert prefix.endswith(b'"id":') and suffix.startswith(b',"method"')
    assert id_between(plain.replace(b"12", b"345"), prefix, suffix) == b"345"
    for odd in (b"012", b"-12", b"1.5", b"", b"12 ", b"1" * 16):
        assert id_between(prefix + odd + suffix, prefix, suffix) is None, odd
    assert shape(b'{"id":5,"params":{"x":{"id":5}}}') is None  # twice: which one is the id?
    assert shape(b'{"params":{"x":{"id":5}},"id":6}') is not None  # the nested 5 is not the id 6
    assert shape(b'{"id":5.0}') is None and shape(b'{"id":"5"}') is None and shape(b'{"id":-5}') is None
