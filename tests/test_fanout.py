"""Notifications to many subscriptions (issue #26): events built from parts are byte-identical to the
plain encoding, masked the same way, and a stream wakes once per change however many URIs."""

from __future__ import annotations

import json

import pytest

from mcp_notebook.protocol import jsonrpc as rpc
from mcp_notebook.protocol.streams import MAX_BACKLOG, Stream, sse_event, updated_messages
from mcp_notebook.redact import REDACTOR

SECRET = "sk-fanout0123456789abcdefghijklmnopqrstu"


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {"io.modelcontextprotocol/subscriptionId": 7},
        {"io.modelcontextprotocol/subscriptionId": "listen-é"},
        {"io.modelcontextprotocol/subscriptionId": f"id-{SECRET}"},
    ],
)
def test_updated_messages_equal_the_plain_encoding(meta):
    REDACTOR.add([SECRET])
    uris = ["nb://vars/a", "nb://vars/é", f"test://item/{SECRET}", 'nb://vars/"q"', "nb://vars/a"]
    for _ in range(2):  # the second time from the remembered URI encodings
        got = updated_messages(uris, meta)
        params = (lambda u: {"uri": u}) if meta is None else (lambda u: {"_meta": meta, "uri": u})
        want = [rpc.dumps(rpc.notification("notifications/resources/updated", params(u))) for u in uris]
        assert got == want
    assert all(SECRET not in e.decode() for e in got)
    json.loads(got[0])


def test_a_new_secret_is_masked_in_remembered_uris():
    uri = "test://item/zebrafishlater42lantern"
    assert b"zebrafish" in updated_messages([uri])[0]
    REDACTOR.add(["zebrafishlater42lantern"])
    assert b"zebrafish" not in updated_messages([uri])[0]


def test_push_many_wakes_once_and_keeps_the_backlog_bound():
    stream = Stream("listen")
    wakes = []
    stream.set_waker(lambda: wakes.append(1))
    assert stream.push_encoded([b"a", b"b", b"c"])
    assert wakes == [1] and stream.drain_messages() == [b"a", b"b", b"c"]
    stream.push_encoded([b"%d" % i for i in range(MAX_BACKLOG + 5)])
    events = stream.drain_messages()
    assert len(events) == MAX_BACKLOG and events[0] == b"5" and stream.dropped == 5
    stream.push({"jsonrpc": "2.0", "method": "m"})
    assert stream.drain() == [sse_event({"jsonrpc": "2.0", "method": "m"})]  # an HTTP carrier's framing
    stream.close()
    assert not stream.push_encoded([b"late"]) and not stream.push({"jsonrpc": "2.0", "method": "m"})
