"""Defects a hostile client found (issue #32), each pinned: tool arguments outside their schema, the
control channel's malformed requests, slots and reused ids, and the server extension's routes
(focus, kernels listing) under a foreign Origin or a deeply nested body. The bridge's stdin is in
tests/test_hostile_bridge.py; the property-based run over every surface in tests/test_hostile_fuzz.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from control_peer import ControlPeer, body_of, status_of

from mcp_notebook.nb_tools import VIEW_TOOLS, add_nb_tools
from mcp_notebook.protocol.server import HttpRequest, McpServer, ServerSettings
from mcp_notebook.protocol.tools import TOOLS
from mcp_notebook.resources import Resources
from mcp_notebook.transport.control import MAX_IN_FLIGHT, MAX_STREAMS

TOKEN = "hostile-token"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
    },
}


# == tool arguments ===================================================================================
@pytest.fixture(scope="module")
def server() -> Any:
    s = McpServer(Resources([]), ServerSettings(token=TOKEN))
    add_nb_tools(s.tools)  # as the hub and the front compose theirs
    yield s
    s.close()


def _call_tool(server: McpServer, name: str, arguments: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    body["params"]["_meta"] = META
    headers = {
        "host": "127.0.0.1",
        "authorization": f"Bearer {TOKEN}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    reply = server.handle(HttpRequest("POST", headers, json.dumps(body).encode()))
    assert reply.status < 500, reply.body
    return json.loads(reply.body)


def _outside(spec: dict[str, Any]) -> list[Any]:
    """Values outside one property's schema: other types, and past each declared bound."""
    kind = spec.get("type")
    out: list[Any] = [None, True, [], {}, "text", 1.5, -(2**70)]
    out = [v for v in out if not _fits(kind, v)]
    if "minimum" in spec:
        out.append(spec["minimum"] - 1)
    if "maximum" in spec:
        out.append(spec["maximum"] + 1)
    return out


def _fits(kind: str | None, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return False


def test_show_outputs_below_its_minimum_is_a_tool_error_naming_the_argument(server):
    """Was -32603 "[REDACTED]": a KeyError formatting a maximum the schema does not declare."""
    doc = _call_tool(server, "show_outputs", {"cell": 0})
    assert doc["result"]["isError"] is True, doc
    assert (
        "arguments.cell" in doc["result"]["content"][0]["text"] and "at least 1" in doc["result"]["content"][0]["text"]
    )


@pytest.mark.parametrize("tool", [*TOOLS, *VIEW_TOOLS], ids=lambda t: t.name)
def test_every_argument_outside_every_schema_is_a_tool_error(server, tool):
    for name, spec in tool.schema["properties"].items():
        for value in _outside(spec):
            args = {"name": "df", "uri": "nb://vars"} if tool.schema.get("required") else {}
            args = {k: v for k, v in args.items() if k in tool.schema["properties"]}
            args[name] = value
            doc = _call_tool(server, tool.name, args)
            assert "result" in doc and doc["result"]["isError"] is True, (tool.name, name, value, doc)
            assert f"arguments.{name}" in doc["result"]["content"][0]["text"], doc
    doc = _call_tool(server, tool.name, {"no_such_argument": 1})
    assert doc["result"]["isError"] is True and "arguments.no_such_argument" in doc["result"]["content"][0]["text"]


# == the control channel ==============================================================================
@pytest.fixture(scope="module")
def peer(kernel, hub) -> Any:
    kernel.run("x = [1, 2, 3]")
    p = ControlPeer(kernel.km)
    yield p
    p.close()


def _hub_count(kernel, what: str) -> int:
    code = f"import mcp_notebook as _m; _c = _m.hub().control; print({what})"
    return int(kernel.run(code).stdout.strip().splitlines()[-1])


def test_malformed_requests_each_get_one_clear_answer(peer, kernel):
    """A non-string method, a body with a lone surrogate, a header value that cannot be encoded:
    each got no answer (a traceback in the hub's log); now one final reply with a JSON-RPC error."""
    good = peer.read()
    cases = [
        ({**good, "method": ["POST"]}, 405),
        ({**good, "method": 5}, 405),
        ({**good, "body": '{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "\ud800"}'}, 400),
        ({**good, "headers": {**good["headers"], "mcp-name": "nb://vars/\ud800"}}, 400),
        ({**good, "headers": {**good["headers"], "authorization": "Bearer \ud800"}}, 400),
        ({**good, "headers": {**good["headers"], "x-snow": "\u2603"}}, 400),
        ({**good, "headers": {**good["headers"], "bad name": "v"}}, 400),
        ({**good, "headers": {**good["headers"], "x-crlf": "a\r\nb: c"}}, 400),
        ({**good, "headers": {**good["headers"], "x-list": ["v"]}}, 400),
        ([1, 2], 405),
    ]
    for content, status in cases:
        replies = peer.ask("mcp_request", content)
        assert [m["content"]["final"] for m in replies] == [True], (content, replies)
        assert status_of(replies) == status, (content, replies)
        assert "error" in json.loads(body_of(replies)), replies
    assert peer.drain() == {}  # exactly one answer each: nothing came after the final ones
    assert status_of(peer.ask("mcp_request", good)) == 200


def test_failed_requests_release_their_slots(peer):
    """A failed request kept its in-flight slot: after 32 of them the sender's clean reads got 429."""
    bad = {**peer.read(), "body": '{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "\ud800"}'}
    ids = [peer.send("mcp_request", bad) for _ in range(MAX_IN_FLIGHT + 8)]
    read = peer.ask("mcp_request", peer.read())
    assert status_of(read) == 200, body_of(read)
    for msg_id in ids:
        assert status_of(peer.replies(msg_id)) == 400


def test_a_reused_msg_id_is_refused_and_the_stream_bound_holds(peer, kernel):
    """Requests reusing one msg_id escaped the 16-stream bound and orphaned streams that mcp_cancel
    could no longer end."""
    before = _hub_count(kernel, "len(_m.hub().server.listens())")
    listen = peer.listen(["nb://vars/x"])
    first = peer.ask("mcp_request", listen, msg_id="same-id", final=False)
    assert status_of(first) == 200
    for _ in range(MAX_STREAMS + 4):
        peer.send("mcp_request", listen, msg_id="same-id")
    refusals = [m for m in peer.replies("same-id", count=MAX_STREAMS + 4) if m["content"].get("final")]
    assert {m["content"]["status"] for m in refusals} == {409}
    assert _hub_count(kernel, "len(_m.hub().server.listens())") == before + 1
    peer.send("mcp_cancel", {"request": "same-id"})
    peer.send("mcp_cancel", {"request": ["not", "an", "id"]})  # ignored, answers nothing
    deadline = time.monotonic() + 10
    while _hub_count(kernel, "len(_m.hub().server.listens())") != before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _hub_count(kernel, "len(_m.hub().server.listens())") == before
    assert _hub_count(kernel, "sum(len(s.exchanges) for s in _c.senders.values())") == 0


def test_senders_cannot_multiply_the_bounds(kernel, hub):
    """The per-sender bounds hold per header.session, which a peer chooses: the senders with open
    requests are bounded too."""
    from mcp_notebook.transport.control import MAX_SENDERS

    peer = ControlPeer(kernel.km)
    try:
        listen = peer.listen(["nb://vars/x"])
        opened = []
        for i in range(MAX_SENDERS):
            opened.append(peer.send("mcp_request", listen, header={"session": f"sender-{i}"}))
        for msg_id in opened:
            assert status_of(peer.replies(msg_id, final=False)) == 200
        over = peer.ask("mcp_request", listen, header={"session": "one-too-many"})
        assert status_of(over) == 429 and "senders" in body_of(over)
        for i, msg_id in enumerate(opened):
            peer.send("mcp_cancel", {"request": msg_id}, header={"session": f"sender-{i}"})
        assert status_of(peer.ask("mcp_request", peer.read(), header={"session": "later"})) == 200
    finally:
        peer.close()


# == the server extension's routes ====================================================================
JTOKEN = "hostile-jupyter-token"


@pytest.fixture(scope="module")
def jserver(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from jserver import JupyterServer, load_hub, run

    s = JupyterServer(tmp_path_factory.mktemp("hostile-jserver"), token=JTOKEN, base_url="/user/eve/")
    try:
        kid = s.start_session("routes.ipynb")
        kc = s.client(kid)
        info = load_hub(kc)
        run(kc, "x = 'routes'")
        yield {"server": s, "id": kid, "kc": kc, "info": info}
    finally:
        s.stop()


def _jpost(jserver: dict[str, Any], route: str, body: bytes, **headers: str) -> Any:
    import httpx

    h = {"Authorization": f"token {JTOKEN}", "Content-Type": "application/json", **headers}
    return httpx.post(f"{jserver['server'].url}mcp-notebook/{route}", content=body, headers=h, timeout=30)


def test_focus_refuses_a_foreign_origin_even_with_the_token(jserver):
    """Was 204: a page on another origin holding the token moved the focus of every bridge."""
    from mcp_notebook.allkernels.directory import FOCUS_FILE

    focus_file = jserver["server"].runtime / FOCUS_FILE
    focus_file.unlink(missing_ok=True)
    body = json.dumps({"kernel_id": jserver["id"]}).encode()
    for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example"):
        r = _jpost(jserver, "focus", body, Origin=origin)
        assert r.status_code == 403 and "Origin" in r.json()["message"], (origin, r.status_code, r.text)
    assert not focus_file.exists()
    same = jserver["server"].url.split("/user/")[0]
    assert _jpost(jserver, "focus", body, Origin=same).status_code == 204  # the page of this server
    assert json.loads(focus_file.read_text())["kernel_id"] == jserver["id"]
    assert _jpost(jserver, "focus", body).status_code == 204  # no Origin: not a browser


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"kernel_id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b"null",
        b"[1]",
        b'"kernel_id"',
        b"\xff\xfe",
        b'{"kernel_id": "' + b"x" * 10_000 + b'"}',
    ],
    ids=["deep-array", "deep-value", "null", "list", "string", "not-utf8", "long"],
)
def test_focus_answers_a_bad_body_with_a_clear_4xx(jserver, body):
    """A deeply nested body was a 500."""
    r = _jpost(jserver, "focus", body)
    assert r.status_code in (400, 413), (r.status_code, r.text[:300])
    assert r.json()["message"] and "Traceback" not in r.text


def test_the_kernels_listing_refuses_a_foreign_origin(jserver):
    import httpx

    url = f"{jserver['server'].url}mcp-notebook/kernels"
    h = {"Authorization": f"token {JTOKEN}"}
    assert httpx.get(url, headers=h, timeout=30).status_code == 200
    foreign = httpx.get(url, headers={**h, "Origin": "http://evil.example"}, timeout=30)
    assert foreign.status_code == 403 and jserver["id"] not in foreign.text


def test_server_front_errors_name_the_kernel_never_the_hub_address(jserver):
    """Error texts of the all-kernels endpoint carried "the hub at http://127.0.0.1:PORT/mcp"."""
    import socket

    path = Path(jserver["info"]["runtime_file"])
    saved = path.read_text()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens there once closed
    real = jserver["info"]["url"]
    doc = json.loads(saved)
    doc["url"] = f"http://127.0.0.1:{dead}/mcp"
    try:
        path.write_text(json.dumps(doc))
        time.sleep(1.1)  # the finder re-reads a file whose mtime changed; the front re-lists every second
        texts = []
        for method, params in (
            ("resources/read", {"uri": "nb://kernels/routes/vars/x"}),
            ("tools/call", {"name": "read_resource", "arguments": {"uri": "nb://kernels/routes/vars/x"}}),
        ):
            msg = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
            name = params.get("uri") or params.get("name")
            r = _jpost(
                jserver,
                "mcp",
                json.dumps(msg).encode(),
                Accept="application/json, text/event-stream",
                **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name},
            )
            assert r.status_code < 500, r.text
            texts.append(r.text)
        joined = "\n".join(texts)
        assert "did not answer" in joined and "routes" in joined, joined
        for leak in (str(dead), real, real.split("/mcp")[0], "127.0.0.1"):
            assert leak not in joined, (leak, joined)
    finally:
        path.write_text(saved)
