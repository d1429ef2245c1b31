"""One module per wire, imported by both ends (issue #33): the stateless era's request rules and
header codec, server-sent events, the control channel's messages and timing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcp_notebook.allkernels import upstream
from mcp_notebook.bridge import http_link
from mcp_notebook.hubclient import address
from mcp_notebook.protocol import stateless, wire_sse, wire_stateless
from mcp_notebook.protocol.streams import Stream
from mcp_notebook.serverext import control_client as channel
from mcp_notebook.serverext import wires
from mcp_notebook.transport import control, control_wire

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_notebook"


def test_both_ends_share_one_definition():
    assert stateless._NAMED is wire_stateless.NAMED_PARAM
    assert stateless.decode_header_value is wire_stateless.decode_header_value
    assert http_link.request_headers is address.request_headers is wire_stateless.request_headers
    assert upstream.sse_data is wire_sse.sse_data
    assert control.REQUEST == control_wire.REQUEST and control.OURS is control_wire.TO_HUB
    assert control.SENDER_IDLE_SECONDS is control_wire.SENDER_IDLE_SECONDS
    assert channel.KEEPALIVE_SECONDS is control_wire.KEEPALIVE_SECONDS
    assert wires.REPLY_TYPES is control_wire.FROM_HUB


def test_a_sender_says_it_is_alive_well_within_the_hubs_idle_time():
    assert control_wire.KEEPALIVE_SECONDS * 3 == control_wire.SENDER_IDLE_SECONDS


def test_one_sse_parser_and_no_second_copy_of_the_wire_tables():
    copies = []
    for path in PACKAGE.rglob("*.py"):
        if path.name in ("wire_sse.py", "wire_stateless.py", "control_wire.py"):
            continue
        text = path.read_text()
        for pattern in (r'startswith\(b"data:"\)', r'"resources/read": "uri"', r'"mcp_(request|reply|keepalive)"'):
            if re.search(pattern, text):
                copies.append(f"{path.relative_to(PACKAGE)}: {pattern}")
    assert copies == []


@pytest.mark.parametrize(
    "value", ["nb://vars/x", "nb://vars/é", " padded", "=?base64?looks encoded?=", "line\r\nbreak", "tab\there", ""]
)
def test_the_header_codec_round_trips_and_writes_only_plain_header_text(value):
    encoded = wire_stateless.encode_header_value(value)
    assert wire_stateless.decode_header_value(encoded) == value
    assert encoded.isascii() and encoded.isprintable() and "\r" not in encoded and "\n" not in encoded


def test_named_header_follows_the_table():
    assert wire_stateless.named_header("resources/read", {"uri": "nb://vars/é"}) == "=?base64?bmI6Ly92YXJzL8Op?="
    assert wire_stateless.named_header("tools/call", {"name": "read_resource"}) == "read_resource"
    assert wire_stateless.named_header("resources/list", {"uri": "x"}) is None
    assert wire_stateless.named_header("resources/read", {"uri": 5}) is None


STREAM = b': keepalive\r\n\r\nevent: message\r\ndata: {"a":1}\r\n\r\ndata:{"b":\r\ndata: 2}\r\nid: 7\r\n\r\n'


@pytest.mark.parametrize("ending", [b"\r\n", b"\n", b"\r"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_the_sse_parser_reads_any_chunking_and_line_ending(ending, size):
    raw = STREAM.replace(b"\r\n", ending)
    parser = wire_sse.SseParser()
    got = []
    for i in range(0, len(raw), size):
        got += parser.feed(raw[i : i + size])
    assert got == [b'{"a":1}', b'{"b":\n2}']
    assert wire_sse.sse_data(raw) == got


def test_the_sse_parser_reads_what_the_hub_writes():
    stream = Stream("listen")
    stream.push({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
    raw = b"".join(stream.drain())
    assert wire_sse.sse_data(raw) == [b'{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}']
    assert wire_sse.sse_data(raw[:-1]) == []  # an event without its blank line is not complete


def test_request_headers_are_one_codec_for_every_client():
    h = wire_stateless.request_headers("resources/read", {"uri": "nb://vars/é"}, "2026-07-28")
    assert h == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "resources/read",
        "Mcp-Name": "=?base64?bmI6Ly92YXJzL8Op?=",
    }
    assert "Mcp-Name" not in wire_stateless.request_headers("resources/list", {}, "2026-07-28")


def test_one_client_of_a_hub():
    """Nothing outside hubclient/ opens an HTTP connection (the JupyterHub service's calls to JupyterHub's
    API and its client-metadata fetches reach other peers than hubs)."""
    others = {"jupyterhub_service/users.py", "jupyterhub_service/cimd.py"}
    found = []
    for path in PACKAGE.rglob("*.py"):
        name = str(path.relative_to(PACKAGE))
        if name.startswith("hubclient/") or name in others:
            continue
        text = path.read_text()
        for pattern in (r"^import http\.client", r"urllib\.request", r"open_connection\(", r"HTTPS?Connection\("):
            if re.search(pattern, text, re.M):
                found.append(f"{name}: {pattern}")
    assert found == []


# HTTP/1.1 bytes parsed or written: a status or request line, the blank line ending a head, a
# framing field written by hand, a client library of HTTP. Only the codec may (issue #45).
HTTP_BY_HAND = re.compile(
    r"""b?["']HTTP/1\.[01x]|\\r\\n\\r\\n|["'](?:Content-Length|Transfer-Encoding): |^import http\.client|^from http\.client"""
    r"""|\.readuntil\(b"|\.find\(b"\\r\\n""",
    re.MULTILINE,
)
CODEC = "protocol/wire_http11.py"
# What may still handle HTTP itself, each with its reason: the JupyterHub service's outbound calls
# (to JupyterHub, to metadata-document hosts) through a well-kept client library.
ALLOWED = {"jupyterhub_service/cimd.py"}


def test_nothing_but_the_codec_parses_or_writes_http_bytes():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name == CODEC or name in ALLOWED:
            continue
        hits = [m.group() for m in HTTP_BY_HAND.finditer(path.read_text())]
        if hits:
            found[name] = hits
    assert found == {}


def test_the_search_sees_http_by_hand():
    """The pattern finds what it is for (else the test above could not fail)."""
    for text in ('b"HTTP/1.1 200 OK\\r\\n"', 'raw.find(b"\\r\\n\\r\\n")', '"Content-Length: %d"', "import http.client"):
        assert HTTP_BY_HAND.search(text), text
    assert HTTP_BY_HAND.search((PACKAGE / CODEC).read_text())
