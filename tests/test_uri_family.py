"""Reads of one URI after another (issue #26): a stateless client's head differs only in Mcp-Name and
Content-Length, its body only in the id and the URI. Once a connection has learnt that family
(protocol/families.py ``HeadFamily``), such a request is answered like a replay. Over real sockets:
every reply must equal what the general path (``McpServer.handle``) answers to the same bytes."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import test_fast_read
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_read import _mutations, mutated
from test_protocol import META, STATELESS, TOKEN, make_server, open_session
from test_replay import exchange, same

from mcp_notebook.protocol.exchange import HttpReply
from mcp_notebook.protocol.fast_read import ReadShape
from mcp_notebook.protocol.server import HttpRequest
from mcp_notebook.transport.server import HttpTransport

NS: dict[str, Any] = {"n": 3, "s": "text", "obj": object()}
for _i in range(300):  # more distinct heads than the transport remembers (latency.py HEADS_KEPT)
    NS[f"v{_i}"] = _i * 7 + 1000
SERVER, _, _ = make_server(ns=NS)  # its own server: stopping the transport closes it
SERVER.core.resources.after_cell()  # the names are exposed
# Sessions of this server standing in for test_fast_read's (its generated requests name those).
SESSIONS = {test_fast_read.SID: open_session(SERVER), test_fast_read.OLD_SID: open_session(SERVER, "2025-03-26")}
SESSION = SESSIONS[test_fast_read.SID]


@pytest.fixture(scope="module")
def transport() -> Iterator[HttpTransport]:
    t = HttpTransport(SERVER, "127.0.0.1", 0, 100_000)
    t.start()
    try:
        yield t
    finally:
        t.stop()


def general(head: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
    reply = SERVER.handle(HttpRequest("POST", {k.lower(): v for k, v in head.items()}, body, admitted=True))
    return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.body or b""


URIS = [f"nb://vars/v{i}" for i in range(300)]


@pytest.fixture
def hits() -> Iterator[list[str]]:
    """The URIs answered through a head family, or as another URI's read under a remembered
    session head (``FlatReads.replay_other``)."""
    seen: list[str] = []
    original = SERVER.family_reply

    def counting(family: Any, data: bytes) -> Any:
        found = original(family, data)
        if found is not None:
            seen.append(family.last)
        return found

    flat = SERVER.flat
    other = flat.replay_other

    def counting_other(shape: ReadShape, body: bytes) -> Any:
        found = other(shape, body)
        if found is not None:
            seen.append(json.loads(found.body)["result"]["contents"][0]["uri"])
        return found

    SERVER.family_reply = counting
    flat.replay_other = counting_other  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        SERVER.family_reply = original
        del flat.replay_other


def head_for(uri: str, **extra: str) -> dict[str, str]:
    return {
        "Host": "127.0.0.1",
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": STATELESS,
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
        **extra,
    }


def body_for(uri: str, msg_id: int) -> bytes:
    msg = {"jsonrpc": "2.0", "id": msg_id, "method": "resources/read", "params": {"uri": uri, "_meta": META}}
    return json.dumps(msg).encode()


def test_reads_of_one_uri_after_another(transport, hits):
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for n in range(700):
            uri = URIS[n % len(URIS)]
            head, body = head_for(uri), body_for(uri, 1000 + n)
            same(exchange(s, head, body), general(head, body))
        # After the first round (which fills the read cache) through the family; heads it answered are
        # then remembered while there is room, and later reads with those very heads are plain replays.
        assert len(hits) > 200
        NS["v3"] = "changed"  # the value behind a URI moves: read again, not the old reply
        SERVER.core.resources.after_cell()
        try:
            head, body = head_for("nb://vars/v3"), body_for("nb://vars/v3", 5000)
            got = exchange(s, head, body)
            assert json.loads(json.loads(got[2])["result"]["contents"][0]["text"])["repr"] == "'changed'"
            same(got, general(head, body))
        finally:
            NS["v3"] = 3 * 7 + 1000
            SERVER.core.resources.after_cell()


ODD_URIS = [
    "nb://vars/n",
    "nb://vars/obj",  # not cached (its read may run user code): the general path
    "nb://vars/missing",
    "nb://vars?limit=1",
    'nb://vars/"q"',
    "nb://vars/back\\slash",
    "=?base64?bmI6Ly92YXJzL24=?=",
    "nb://vars/sp ace",
    "x" * 9000,
]


@pytest.mark.parametrize("odd", ODD_URIS)
def test_uris_of_every_kind_get_the_general_paths_answer(transport, odd):
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for n, uri in enumerate(["nb://vars/v1", "nb://vars/v2", odd, "nb://vars/v1", odd]):
            head, body = head_for(uri), body_for(uri, 70 + n)
            same(exchange(s, head, body), general(head, body))


def test_lookalikes_take_the_general_path(transport, hits):
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        _warm([*URIS[10:13], "nb://vars/v5", "nb://vars/v6"])
        for n in range(3):  # ids of six digits: heads no other test sent (their Content-Length)
            exchange(s, head_for(URIS[10 + n]), body_for(URIS[10 + n], 800000 + n))
        assert hits
        hits.clear()
        cases = [
            (head_for("nb://vars/v5"), body_for("nb://vars/v6", 900000)),  # header and body disagree
            (head_for("nb://vars/v5 "), body_for("nb://vars/v5", 900001)),  # a space after the value
            (head_for("nb://vars/v5", **{"X-Extra": "1"}), body_for("nb://vars/v5", 900002)),  # another field
            (head_for("nb://vars/v5"), body_for("nb://vars/v5", 90003).replace(b'"id": 90003', b'"id": 090003')),
            (head_for("nb://vars/v5"), body_for("nb://vars/v5", 900004).replace(b"v5", b"v5\\u0020")),
            (head_for("nb://vars/v5"), body_for("nb://vars/v5", 90005) + b" "),
        ]
        for head, body in cases:  # (the general path gets the field values HTTP parsing leaves)
            same(exchange(s, head, body), general({k: v.strip() for k, v in head.items()}, body))
        # Raw non-ASCII in both the field and the body: HTTP reads the field as latin-1, so they
        # differ for the general path too (a header mismatch), and the family never decodes it.
        raw = json.dumps(json.loads(body_for("nb://vars/é", 900007)), ensure_ascii=False).encode()
        got = exchange(s, head_for("nb://vars/é"), raw)
        assert got[0] == 400 and json.loads(got[2])["error"]["code"] == -32020
        assert hits == []  # none of them was taken for a family member
        head, body = head_for("nb://vars/v5"), body_for("nb://vars/v5", 9000006)
        same(exchange(s, head, body), general(head, body))
        assert hits == ["nb://vars/v5"]


def test_another_token_is_not_answered_from_the_family(transport):
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for n in range(3):
            assert exchange(s, head_for(URIS[n]), body_for(URIS[n], 100 + n))[0] == 200
        old = SERVER.settings
        SERVER.settings = old.replace(token="other")
        try:
            assert exchange(s, head_for(URIS[4]), body_for(URIS[4], 110))[0] == 401
        finally:
            SERVER.settings = old


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    mutations=st.lists(st.sampled_from(_mutations("nb://vars/v9")), max_size=2),
    msg_id=st.integers(0, 10**12),
)
def test_every_departure_from_a_family_member_gets_the_general_paths_answer(transport, mutations, msg_id):
    """Each generated request (test_fast_read's departures from a well-formed read, in the stateless
    era) comes after a freshly learnt family: answered through it or not, the reply is the same."""
    _warm([*URIS[20:23], "nb://vars/v9"])
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        _learn(s, transport)
        req = mutated("stateless", "nb://vars/v9", msg_id, False, mutations)
        head = {"Host": "127.0.0.1", **{k: v for k, v in req.headers.items() if k != "host"}}
        same(exchange(s, head, req.body), general(head, req.body))


def _send(s: socket.socket, req: HttpRequest) -> tuple[int, dict[str, str], bytes]:
    head = {"Host": "127.0.0.1", **{k: v for k, v in req.headers.items() if k != "host"}}
    return exchange(s, head, req.body)


def _learn(s: socket.socket, transport: HttpTransport, first_id: int = 12000000) -> None:
    """Learn the family of test_fast_read's well-formed stateless reads on this connection; the
    transport's remembered heads are forgotten first (as when that memory fills up), so no request
    is replayed as a whole instead."""
    transport.heads.clear()
    for n in range(3):
        assert _send(s, mutated("stateless", URIS[20 + n], first_id + n, False, []))[0] == 200


def _warm(uris: list[str]) -> None:
    """Reads cached (a cell makes every cached read stale)."""
    for uri in uris:
        warm = {k.lower(): v for k, v in head_for(uri).items()}
        assert SERVER.handle(HttpRequest("POST", warm, body_for(uri, 1), True)).status == 200


def test_the_family_answers_a_well_formed_member(transport, hits):
    _warm([*URIS[20:23], "nb://vars/v9"])
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        _learn(s, transport, 1_000_000_000_000_000)
        req = mutated("stateless", "nb://vars/v9", 12345678901234, False, [])  # an id length not sent before
        head = {"Host": "127.0.0.1", **{k: v for k, v in req.headers.items() if k != "host"}}
        same(exchange(s, head, req.body), general(head, req.body))
    assert "nb://vars/v9" in hits  # the generated requests above are family members but for their departures


def _learnt(uri: str, extra: str = "", body: bytes | None = None, msg: Any = None) -> tuple[bytes, ReadShape]:
    """A head's bytes and the replay memo of a read of ``uri`` learnt under it (body id 1)."""
    head = ("POST /mcp HTTP/1.1\r\nHost: h\r\nMcp-Name: " + uri + f"\r\n{extra}Content-Length: 10\r\nX: y").encode()
    raw = body if body is not None else body_for(uri, 1)
    prefix, _, suffix = raw.partition(b"1")
    parsed = json.loads(raw) if msg is None else msg
    return head + b"\r\n\r\n", ReadShape(prefix, suffix, (STATELESS, uri), {}, None, None, HttpReply(200), parsed)


@pytest.mark.parametrize(
    ("uri", "extra", "body", "ok"),
    [
        ("nb://vars/a", "", None, True),
        ("nb://vars/a", "Mcp-Name: nb://vars/a\r\n", None, False),  # the field twice
        ("nb://vars/a", "Content-Length:  10\r\n", None, False),
        ("nb://vars/a", "", b'{"id":1,"params":{"uri":"nb://vars/a","x":"nb://vars/a"}}', False),  # twice
        ('nb://vars/"', "", None, False),
        ("=?base64?eA==?=", "", None, False),
    ],
)
def test_a_family_is_learnt_only_from_one_plain_place_for_each_value(uri, extra, body, ok):
    head, memo = _learnt(uri, extra, body)
    assert (SERVER.learn_family(head, memo) is not None) is ok
    if ok:  # the proof decides: a memo whose request the probe body does not reproduce learns none
        head, memo = _learnt(
            uri, extra, body, msg={"jsonrpc": "2.0", "id": 1, "method": "other", "params": {"uri": uri}}
        )
        assert SERVER.learn_family(head, memo) is None
    assert SERVER.learn_family(head, object()) is None  # a memo the families do not know


def test_two_members_in_one_read_are_both_answered(transport, hits):
    _warm([*URIS[20:23], "nb://vars/v7", "nb://vars/v8"])
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        _learn(s, transport, 3_000_000_000)
        raw = b""
        for uri, msg_id in (("nb://vars/v7", 4_000_000_001), ("nb://vars/v8", 4_000_000_002)):
            req = mutated("stateless", uri, msg_id, False, [])
            lines = "".join(f"{k}: {v}\r\n" for k, v in req.headers.items())
            raw += f"POST /mcp HTTP/1.1\r\n{lines}Content-Length: {len(req.body)}\r\n\r\n".encode() + req.body
        s.sendall(raw)  # pipelined: not one request per read, so never a family member as a whole
        data = b""
        while data.count(b'"result"') < 2:
            chunk = s.recv(65536)
            assert chunk
            data += chunk
        assert b'"id":4000000001' in data and b'"id":4000000002' in data
        assert data.index(b'"id":4000000001') < data.index(b'"id":4000000002')


# -- the handshake era: a session's reads of one URI after another ----------------------------------


def session_head(sid: str = SESSION, **extra: str) -> dict[str, str]:
    return {
        "Host": "127.0.0.1",
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        "Mcp-Session-Id": sid,
        "MCP-Protocol-Version": "2025-11-25",
        **extra,
    }


def session_body(uri: str, msg_id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "resources/read", "params": {"uri": uri}}).encode()


def _warm_session(uris: list[str], sid: str = SESSION) -> None:
    for uri in uris:
        warm = {k.lower(): v for k, v in session_head(sid).items()}
        assert SERVER.handle(HttpRequest("POST", warm, session_body(uri, 1), True)).status == 200


def test_a_sessions_reads_of_one_uri_after_another(transport, hits):
    """The handshake era's head carries the session id and no Mcp-Name: a family of the URI in the
    body alone, answered like the general path (also a URI not found, and a changed value)."""
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for n in range(700):
            uri = URIS[n % len(URIS)]
            head, body = session_head(), session_body(uri, 2000 + n)
            same(exchange(s, head, body), general(head, body))
        assert len(hits) > 200
        for n, uri in enumerate(["nb://vars/missing", "nb://vars/missing", "nb://vars/obj", "nb://vars/n"]):
            head, body = session_head(), session_body(uri, 3000 + n)
            got = exchange(s, head, body)
            same(got, general(head, body))
            if uri.endswith("missing"):
                assert json.loads(got[2])["error"]["code"] == -32002
        NS["v3"] = "changed"
        SERVER.core.resources.after_cell()
        try:
            head, body = session_head(), session_body("nb://vars/v3", 5000)
            got = exchange(s, head, body)
            assert json.loads(json.loads(got[2])["result"]["contents"][0]["text"])["repr"] == "'changed'"
            same(got, general(head, body))
        finally:
            NS["v3"] = 3 * 7 + 1000
            SERVER.core.resources.after_cell()


def test_an_ended_session_is_not_answered_from_the_family(transport, hits):
    sid = open_session(SERVER)
    _warm_session(URIS[40:80], sid)
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        transport.heads.clear()  # no plain replays of heads remembered by other tests
        for n, uri in enumerate(URIS[40:70]):
            head, body = session_head(sid), session_body(uri, 6000 + n)
            same(exchange(s, head, body), general(head, body))
        assert hits  # the family answers this session's reads
        ended = SERVER.handle(HttpRequest("DELETE", {k.lower(): v for k, v in session_head(sid).items()}))
        assert ended.status in (200, 202, 204)
        hits.clear()
        for n, uri in enumerate([*URIS[70:80], *URIS[40:45]]):  # new URIs, and ones replayed before
            head, body = session_head(sid), session_body(uri, 7000 + n)
            got = exchange(s, head, body)
            assert got[0] == 404
            same(got, general(head, body))
        assert hits == []


def _send_session(s: socket.socket, req: HttpRequest) -> tuple[int, dict[str, str], bytes]:
    """``req`` (test_fast_read's, naming its sessions) sent with this server's sessions."""
    head = {
        "Host": "127.0.0.1",
        **{k: SESSIONS.get(v, v) if k == "mcp-session-id" else v for k, v in req.headers.items() if k != "host"},
    }
    return exchange(s, head, req.body)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    mutations=st.lists(st.sampled_from(_mutations("nb://vars/v9")), max_size=2),
    msg_id=st.integers(0, 10**12),
    era=st.sampled_from(["handshake", "old"]),
)
def test_every_departure_from_a_sessions_family_member_gets_the_general_paths_answer(transport, mutations, msg_id, era):
    """As the stateless test above, for sessions of both handshake revisions (2025-11-25, 2025-03-26)."""
    sid = SESSIONS[test_fast_read.SID if era == "handshake" else test_fast_read.OLD_SID]
    _warm_session([*URIS[20:23], "nb://vars/v9"], sid)
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        transport.heads.clear()
        for n in range(3):
            assert _send_session(s, mutated(era, URIS[20 + n], 13000000 + n, True, []))[0] == 200
        req = mutated(era, "nb://vars/v9", msg_id, True, mutations)
        got = _send_session(s, req)
        head = {k: SESSIONS.get(v, v) if k == "mcp-session-id" else v for k, v in req.headers.items()}
        same(got, general({"Host": "127.0.0.1", **{k: v for k, v in head.items() if k != "host"}}, req.body))


def test_a_sessions_family_answers_a_well_formed_member(transport, hits):
    _warm_session([*URIS[20:23], "nb://vars/v9"])
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        transport.heads.clear()
        for n in range(3):
            assert _send_session(s, mutated("handshake", URIS[20 + n], 14000000 + n, True, []))[0] == 200
        req = mutated("handshake", "nb://vars/v9", 12345678901234, True, [])
        got = _send_session(s, req)
        head = {k: SESSIONS.get(v, v) if k == "mcp-session-id" else v for k, v in req.headers.items()}
        same(got, general({"Host": "127.0.0.1", **{k: v for k, v in head.items() if k != "host"}}, req.body))
    assert "nb://vars/v9" in hits


@pytest.mark.parametrize("odd", [*ODD_URIS, 'nb://vars/v1", "x": "', "nb://vars/v1\\u0022"])
def test_a_sessions_uris_of_every_kind_get_the_general_paths_answer(transport, odd):
    """In the handshake era the URI is found in the body alone: quotes, escapes, spaces, look-alike
    JSON around it must all take the general path (or be answered exactly as it would)."""
    _warm_session(["nb://vars/v1", "nb://vars/v2"])
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        transport.heads.clear()
        for n, uri in enumerate(["nb://vars/v1", "nb://vars/v2", odd, "nb://vars/v1", odd]):
            head = session_head()
            body = session_body(uri, 170 + n)
            if uri.startswith('nb://vars/v1"') or uri.endswith("\\u0022"):  # raw bytes, not a JSON string
                body = b'{"jsonrpc": "2.0", "id": %d, "method": "resources/read", "params": {"uri": "%s"}}' % (
                    170 + n,
                    uri.encode(),
                )
            same(exchange(s, head, body), general(head, body))


# -- many connections, one memory: a session head's replay answers every URI, on every connection ------


def test_sixteen_connections_reading_25_uris_in_turn(transport, hits):
    """wrk's way at 16 connections: each request on the next connection, the next URI, a fresh id.
    Heads are remembered by the transport (every connection sends the same ones), so a session head's
    one replay memo answers reads of every URI on every connection (``ReadShape.others``): the
    replies stay the general path's, for the stateless era as well."""
    _warm_session(URIS[:25])
    _warm(URIS[:25])
    transport.heads.clear()
    socks = [socket.create_connection(("127.0.0.1", transport.port), timeout=5) for _ in range(16)]
    try:
        for n in range(400):
            uri = URIS[n % 25]
            head, body = session_head(), session_body(uri, 20000 + n)
            same(exchange(socks[n % 16], head, body), general(head, body))
        assert len(hits) > 300  # all but the first requests of each head (a few Content-Lengths)
        hits.clear()
        for n in range(400):
            uri = URIS[n % 25]
            head, body = head_for(uri), body_for(uri, 30000 + n)
            same(exchange(socks[n % 16], head, body), general(head, body))
    finally:
        for s in socks:
            s.close()


_BODIES = (  # a read's body with its id before its URI, and after it
    b'{"jsonrpc": "2.0", "id": %s, "method": "resources/read", "params": {"uri": "%s"}}',
    b'{"params": {"uri": "%s"}, "jsonrpc": "2.0", "method": "resources/read", "id": %s}',
)


def _body(form: int, msg_id: bytes, uri: bytes) -> bytes:
    return _BODIES[form] % ((msg_id, uri) if form == 0 else (uri, msg_id))


def _session_memo(sid: str, uri: str = "nb://vars/v9", msg_id: int = 12345, form: int = 0) -> ReadShape:
    """The replay memo the flat path learns for a session's read of ``uri``."""
    _warm_session([uri], sid)
    body = _body(form, b"%d" % msg_id, uri.encode())
    req = HttpRequest("POST", {k.lower(): v for k, v in session_head(sid).items()}, body, True)
    assert SERVER.flat.answer(req, learn=True) is not None
    memo = req.replay
    assert isinstance(memo, ReadShape) and memo.others is not None
    return memo


_OTHER_URIS = [
    *URIS[:5],
    "nb://vars/v9",  # the URI the memo was learnt on: answered in the same form as the others (issue #48)
    "nb://vars/n",
    "nb://vars/obj",
    "nb://vars/missing",
    "nb://vars",
    "nb://vars?limit=1",
    "=nb://vars/v1",
    "nb://vars/v1 ",
    "nb://vars/v1\\u0031",
    'nb://vars/v1", "x": "y',
    "nb://vars/é",
    "",
]
_IDS = ["7", "0", "01", "-1", "1.0", "1e3", '"7"', "null", "9" * 15, "9" * 16, "", " 7"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    uri=st.one_of(st.sampled_from(_OTHER_URIS), st.text(max_size=12)),
    msg_id=st.sampled_from(_IDS),
    cut=st.tuples(st.integers(0, 120), st.integers(0, 3), st.binary(max_size=2)),
    old=st.booleans(),
    form=st.sampled_from([0, 1]),
)
def test_any_body_under_a_session_heads_memo_gets_the_general_paths_answer(uri, msg_id, cut, old, form):
    """Whatever body comes under a remembered session head (another URI of any kind, any id token,
    bytes cut or inserted anywhere), ``replay`` answers it exactly as ``handle()`` would, or not at all."""
    sid = SESSIONS[test_fast_read.OLD_SID if old else test_fast_read.SID]
    memo = _session_memo(sid, form=form)
    _warm_session(URIS[:5], sid)
    body = _body(form, msg_id.encode(), uri.encode())
    at, drop, insert = cut
    body = body[:at] + insert + body[at + drop :]
    reply = SERVER.replay(memo, body)
    if reply is not None:
        assert reply.status == 200
        want = general(session_head(sid), body)
        assert (reply.status, reply.body) == (want[0], want[2])
        assert {k.lower(): v for k, v in reply.headers.items()} == want[1]


def test_a_session_heads_memo_answers_other_uris_and_only_while_everything_holds():
    """Replays of other URIs: answered from the reply cache shared by sessions (a URI another
    session read), not once its value or the redactor moved (the general path's answer then), nor
    for an ended session (404), nor for a URI not cached (the general path)."""
    import secrets

    from mcp_notebook.redact import REDACTOR

    other = open_session(SERVER)
    memo = _session_memo(other)
    value = "plainvalue-" + secrets.token_hex(6)
    NS["v11"] = value
    SERVER.core.resources.after_cell()
    try:
        _warm_session(["nb://vars/v11", "nb://vars/v12"], SESSION)  # cached by another session
        for uri, msg_id in (("nb://vars/v11", 41), ("nb://vars/v12", 4242)):
            body = session_body(uri, msg_id)
            reply = SERVER.replay(memo, body)
            assert reply is not None
            assert (reply.status, reply.body) == general(session_head(other), body)[::2]
        body = session_body("nb://vars/v11", 43)
        REDACTOR.add([value])  # the value becomes a secret: the cached reply is stale
        assert SERVER.replay(memo, body) is None
        want = general(session_head(other), body)
        assert value.encode() not in want[2] and b"REDACTED" in want[2]
        NS["v12"] = 12
        SERVER.core.resources.after_cell()  # a cell: every cached read is stale
        assert SERVER.replay(memo, session_body("nb://vars/v12", 44)) is None
        assert SERVER.replay(memo, session_body("nb://vars/v13", 45)) is None  # not cached
        _warm_session(["nb://vars/v13"], other)
        assert SERVER.replay(memo, session_body("nb://vars/v13", 46)) is not None
        SERVER.handle(HttpRequest("DELETE", {k.lower(): v for k, v in session_head(other).items()}))
        body = session_body("nb://vars/v13", 47)
        assert SERVER.replay(memo, body) is None
        assert general(session_head(other), body)[0] == 404
    finally:
        NS["v11"], NS["v12"] = 11 * 7 + 1000, 12 * 7 + 1000
        SERVER.core.resources.after_cell()


def test_a_session_heads_memo_answers_its_own_uri_like_the_others_and_only_while_the_session_lives():
    """A session head's memo answers the URI it was learnt on in the other URIs' form (issue #48: no
    second matching first): any id, byte for byte the general path's reply; once the session ended
    (its lookup takes no lock), nothing: the general path answers 404."""
    other = open_session(SERVER)
    for form in (0, 1):
        memo = _session_memo(other, "nb://vars/v9", 12345, form)
        for msg_id in (b"7", b"12345", b"0", b"999999999999999"):
            body = _body(form, msg_id, b"nb://vars/v9")
            reply = SERVER.replay(memo, body)
            assert reply is not None
            want = general(session_head(other), body)
            assert (reply.status, reply.body) == (want[0], want[2])
            assert {k.lower(): v for k, v in reply.headers.items()} == want[1]
    SERVER.handle(HttpRequest("DELETE", {k.lower(): v for k, v in session_head(other).items()}))
    body = _body(0, b"8", b"nb://vars/v9")
    assert SERVER.replay(memo, body) is None
    assert general(session_head(other), body)[0] == 404


def test_a_cached_read_keeps_its_provider_only_while_the_providers_hold():
    """A cached read asks the provider kept in its entry for the value's token (issue #48); a provider
    added since moves the resources' generation, so the entry is stale: no replay answers until the
    general path has read it again, and then the replay equals the general path's reply."""
    from mcp_notebook.providers.custom import CustomProvider

    memo = _session_memo(SESSION, "nb://vars/v9")
    body = _body(0, b"31", b"nb://vars/v9")
    assert SERVER.replay(memo, body) is not None
    SERVER.core.resources.add_provider(CustomProvider())  # serves nothing here; the generation moves
    assert SERVER.replay(memo, body) is None
    assert SERVER.core.cached_read(memo.key) is None
    want = general(session_head(SESSION), body)  # the general path reads and caches it again
    reply = SERVER.replay(memo, _body(0, b"32", b"nb://vars/v9"))
    assert reply is not None and reply.status == want[0] == 200
    assert reply.body == want[2].replace(b'"id":31', b'"id":32')


def test_a_stateless_head_learns_no_other_uris():
    """A stateless head names its URI (Mcp-Name): its memo answers only that URI's body."""
    _warm(["nb://vars/v9", "nb://vars/v8"])
    req = HttpRequest("POST", {k.lower(): v for k, v in head_for("nb://vars/v9").items()}, body_for("nb://vars/v9", 5))
    req.admitted = True
    assert SERVER.flat.answer(req, learn=True) is not None
    assert isinstance(req.replay, ReadShape) and req.replay.others is None
    assert SERVER.replay(req.replay, body_for("nb://vars/v8", 6)) is None


def test_a_head_the_family_answers_is_replayed_from_then_on(transport, hits):
    """A head first seen when its read was not cached (answered by the general path, not learnt: the
    connection had a family) takes the memo of the member the family answers under it; after that
    its requests are plain replays, not family reads (issue #48: such heads stayed on the family
    path for good)."""
    _warm([*URIS[20:23]])
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        transport.heads.clear()
        for n, uri in enumerate(URIS[20:23]):  # this connection learns the family of head_for's heads
            assert exchange(s, head_for(uri), body_for(uri, 5_000_000_000_000 + n))[0] == 200
        SERVER.core.resources.after_cell()  # every cached read is stale: the next read of v5 is not learnt
        hits.clear()
        for n in range(3):  # ids of 13 digits: a head no other request sent
            head, body = head_for("nb://vars/v5"), body_for("nb://vars/v5", 6_000_000_000_000 + n)
            same(exchange(s, head, body), general(head, body))
            assert hits == ([] if n == 0 else ["nb://vars/v5"])  # general path, family, replay
        remembered = transport.heads.get(_head_bytes(head, body), SERVER.settings)
        assert remembered is not None and remembered.replay is not None


def _head_bytes(head: dict[str, str], body: bytes) -> bytes:
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    return f"POST /mcp HTTP/1.1\r\n{lines}Content-Length: {len(body)}".encode()


def test_a_replayed_stateless_read_marks_its_client_seen():
    """The client's key is taken once, when the replay is learnt; each replay still marks it seen."""
    meta = {**META, "io.modelcontextprotocol/clientInfo": {"name": "replayer-" + "x" * 120, "version": "9"}}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "nb://vars/v9", "_meta": meta}}
    ).encode()
    _warm(["nb://vars/v9"])
    req = HttpRequest("POST", {k.lower(): v for k, v in head_for("nb://vars/v9").items()}, body, True)
    assert SERVER.flat.answer(req, learn=True) is not None and isinstance(req.replay, ReadShape)
    SERVER.stateless._clients.clear()
    reply = SERVER.replay(req.replay, body.replace(b'"id": 5', b'"id": 6'))
    assert reply is not None and reply.after_send is not None
    reply.after_send()
    assert [c[:3] for c in SERVER.stateless_clients()] == [("replayer-" + "x" * 91, "9", STATELESS)]


# -- many connections, third cut: the family first once the memory of heads is full (issue #48) ------


def test_a_full_memory_of_heads_puts_the_family_first(transport, hits):
    """A stateless client rotating over more URIs than the memory of heads holds fills it; its
    connection then tries its head family first (no hash of each head, no per-head objects), each
    URI's cached read found by the URI's bytes (``Core.plain_reads``). Every reply stays the general
    path's: a changed value, a value the redactor learnt as a secret, a provider added later, a URI
    whose read is not cached."""
    import secrets

    from mcp_notebook.providers.custom import CustomProvider
    from mcp_notebook.redact import REDACTOR

    _warm(URIS)
    transport.heads.clear()
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for n in range(700):
            uri = URIS[n % len(URIS)]
            head, body = head_for(uri), body_for(uri, 7_000_000 + n)
            same(exchange(s, head, body), general(head, body))
        assert transport.heads.full
        assert any(conn.memos.family_first for conn in transport.connections)
        hits.clear()
        for n, uri in enumerate(URIS[:40]):
            head, body = head_for(uri), body_for(uri, 7_100_000 + n)
            same(exchange(s, head, body), general(head, body))
        assert hits == URIS[:40]  # the family answered each, first
        secret = "plainvalue-" + secrets.token_hex(6)
        NS["v3"] = secret
        SERVER.core.resources.after_cell()
        try:
            head, body = head_for("nb://vars/v3"), body_for("nb://vars/v3", 7_200_001)
            got = exchange(s, head, body)
            assert secret.encode() in got[2]
            same(got, general(head, body))
            same(
                exchange(s, head, body_for("nb://vars/v3", 7_200_002)),
                general(head, body_for("nb://vars/v3", 7_200_002)),
            )
            hits.clear()
            REDACTOR.add([secret])  # a secret now: the cached reply is stale, the general path masks it
            got = exchange(s, head, body_for("nb://vars/v3", 7_200_003))
            assert secret.encode() not in got[2] and hits == []
            same(got, general(head, body_for("nb://vars/v3", 7_200_003)))
            SERVER.core.resources.add_provider(CustomProvider())  # the generation moves: every entry stale
            got = exchange(s, head_for("nb://vars/v4"), body_for("nb://vars/v4", 7_200_004))
            assert hits == []
            same(got, general(head_for("nb://vars/v4"), body_for("nb://vars/v4", 7_200_004)))
            same(
                exchange(s, head_for("nb://vars/v4"), body_for("nb://vars/v4", 7_200_005)),
                general(head_for("nb://vars/v4"), body_for("nb://vars/v4", 7_200_005)),
            )
            for n, uri in enumerate(["nb://vars/obj", "nb://vars/missing", "nb://vars/n"]):
                head, body = head_for(uri), body_for(uri, 7_300_000 + n)
                same(exchange(s, head, body), general(head, body))
        finally:
            NS["v3"] = 3 * 7 + 1000
            SERVER.core.resources.after_cell()


def _raw_exchange(s: socket.socket, raw: bytes) -> tuple[int, bytes]:
    s.sendall(raw)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk
        data += chunk
    top, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(f for f in top.split(b"\r\n") if f.lower().startswith(b"content-length:")).split(b":")[1])
    while len(rest) < length:
        rest += s.recv(65536)
    return int(top.split(b" ")[1]), rest[:length]


@pytest.mark.parametrize("spelling", ["0%d", "00%d", "+%d", " %d", "%d "])
def test_a_content_length_spelled_otherwise_is_not_a_family_member(transport, hits, spelling):
    """The family compares Content-Length with the body's length as plain digits: any other spelling
    (leading zeros, a sign, spaces) is answered as a connection without a family
    answers the same bytes."""
    _warm(URIS)
    transport.heads.clear()
    uri = "nb://vars/v6"
    body = body_for(uri, 8_000_001)
    lines = "".join(f"{k}: {v}\r\n" for k, v in head_for(uri).items())
    raw = f"POST /mcp HTTP/1.1\r\n{lines}Content-Length: {spelling % len(body)}\r\n\r\n".encode() + body
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as s:
        for n in range(300):
            u = URIS[n % len(URIS)]
            assert exchange(s, head_for(u), body_for(u, 8_100_000 + n))[0] == 200
        hits.clear()
        got = _raw_exchange(s, raw)
    assert hits == []
    transport.heads.clear()
    with socket.create_connection(("127.0.0.1", transport.port), timeout=5) as fresh:
        assert _raw_exchange(fresh, raw) == got


def test_the_per_uri_records_are_the_read_caches_plain_entries(monkeypatch):
    """``Core.plain_reads`` holds, by the URI's bytes, the very entries of the read cache whose URI is
    plain, and nothing else; it is cleared with the cache (memory bounded)."""
    from mcp_notebook.protocol import core as core_module
    from mcp_notebook.protocol.core import plain_bytes

    core = SERVER.core
    monkeypatch.setattr(core_module, "READ_CACHE_SIZE", 40)
    SERVER.core.resources.after_cell()  # every cached read stale: the reads below are cached again
    _warm(URIS[:100])
    index = core.plain_reads(STATELESS)
    assert 0 < len(index) <= len(core._read_cache) <= 40
    for raw, entry in index.items():
        assert core._read_cache[(STATELESS, raw.decode("ascii"))] is entry
    for uri in ("nb://vars/sp ace", "=nb://vars/v1", "nb://vars/é", 'nb://vars/"q"', "nb://vars/back\\slash", ""):
        assert plain_bytes(uri) is None
    assert plain_bytes("nb://vars?limit=1") == b"nb://vars?limit=1"
