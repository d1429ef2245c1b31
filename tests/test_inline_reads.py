"""Which reads the transport may answer on its own loop (no worker-pool hop): only those whose
provider says, from types alone, that no user code runs."""

from __future__ import annotations

import json

from test_protocol import TOKEN, call, make_server, open_session, req, stateless

from mcp_notebook.protocol.server import HttpRequest

HEADERS = {"host": "127.0.0.1:9", "content-type": "application/json", "authorization": f"Bearer {TOKEN}"}


class Loud:
    def __repr__(self) -> str:
        return "loud"


class IntSub(int):
    def __repr__(self) -> str:
        return "sub"


def read_request(uri: str) -> HttpRequest:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}}).encode()
    return HttpRequest("POST", HEADERS, body)


def test_builtin_scalars_and_the_index_are_read_inline_everything_else_on_the_pool():
    ns = {"n": 3, "s": "text", "f": 1.5, "none": None, "obj": Loud(), "sub": IntSub(2), "lst": [Loud()]}
    server, _, _ = make_server(ns=ns)
    inline = ["nb://vars/n", "nb://vars/s", "nb://vars/f", "nb://vars/none", "nb://vars", "nb://vars?limit=2"]
    pooled = ["nb://vars/obj", "nb://vars/sub", "nb://vars/lst", "nb://vars/obj/schema", "test://static", "zz://none"]
    for uri in inline:
        assert server.may_run_user_code(read_request(uri)) is False, uri
    for uri in pooled:
        assert server.may_run_user_code(read_request(uri)) is True, uri


def test_an_inline_read_answers_in_both_eras():
    server, _, _ = make_server(ns={"n": 3})
    assert server.may_run_user_code(read_request("nb://vars/n")) is False
    status, body = stateless(server, "resources/read", {"uri": "nb://vars/n"})
    assert status == 200 and json.loads(body["result"]["contents"][0]["text"])["repr"] == "3"
    sid = open_session(server)
    reply = call(server, sid, "resources/read", {"uri": "nb://vars/n"})
    assert json.loads(reply["result"]["contents"][0]["text"])["repr"] == "3"


def test_cached_reads_splice_the_id_and_follow_the_value():
    ns = {"n": 3}
    server, _, hub = make_server(ns=ns)
    first = stateless(server, "resources/read", {"uri": "nb://vars/n"})[1]
    body = {"jsonrpc": "2.0", "id": "abc", "method": "resources/read", "params": {"uri": "nb://vars/n"}}
    sid = open_session(server)
    again = json.loads(server.handle(req(body, mcp_session_id=sid)).body)
    assert again["id"] == "abc" and again["result"]["contents"] == first["result"]["contents"]
    ns["n"] = 4  # rebound outside a cell: the token holds the value itself
    assert (
        json.loads(call(server, sid, "resources/read", {"uri": "nb://vars/n"})["result"]["contents"][0]["text"])["repr"]
        == "4"
    )
    hub.after_cell()
    ns["n"] = "sk-ant-api03-" + "a" * 40  # a secret shape: masked, never served from an old entry
    text = call(server, sid, "resources/read", {"uri": "nb://vars/n"})
    assert "aaaaaaaaaaaaaaaa" not in json.dumps(text)
