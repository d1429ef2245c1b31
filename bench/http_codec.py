"""Our sans-IO HTTP/1.1 codec against h11 on the hub's hot path (issue #45): CPU per request.

    .venv/bin/python bench/http_codec.py [--requests 20000] [--rounds 5]

Both roles, no sockets, no MCP: the server reads one whole MCP read request as a client sends it
(a stateless-era head with its Mcp-* fields and a ~150-byte JSON body, in one piece, as on the
wire) and writes a ~300-byte JSON reply kept alive; the client writes that request and reads that
reply. Each codec does the whole job (our ``protocol.wire_http11``: RequestReader, parse_head,
reply_bytes; h11: ``Connection(our_role=...)``, receive_data, next_event, send, start_next_cycle).
Rounds alternate between the two and the median of each is printed, in microseconds of this
thread's CPU time per request (a loaded machine inflates it less than wall time). h11 is only
needed here: ``pip install h11``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_notebook.protocol import wire_http11 as http11

BODY = (
    b'{"jsonrpc":"2.0","id":17,"method":"resources/read","params":{"uri":"nb://vars/x","_meta":'
    b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
)
HEAD = [
    ("Host", "127.0.0.1:8765"),
    ("Authorization", "Bearer 0123456789abcdef0123456789abcdef"),
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", "2026-07-28"),
    ("Mcp-Method", "resources/read"),
    ("Mcp-Name", "nb://vars/x"),
]
REQUEST = (
    b"POST /mcp HTTP/1.1\r\n"
    + b"".join(f"{k}: {v}\r\n".encode() for k, v in HEAD)
    + b"Content-Length: %d\r\n\r\n" % len(BODY)
    + BODY
)
REPLY_BODY = b'{"jsonrpc":"2.0","id":17,"result":{"contents":[{"uri":"nb://vars/x","mimeType":"application/json",' + (
    b'"text":"{\\"name\\":\\"x\\",\\"type\\":\\"int\\",\\"repr\\":\\"42\\"}"}],"resultType":"complete","ttlMs":0}}'
)
REPLY_HEADERS = {"Content-Type": "application/json"}


def ours_server(n: int) -> None:
    reader = http11.RequestReader(1 << 20)
    out = []
    for _ in range(n):
        reader.buf += REQUEST
        head = http11.parse_head(reader.next_head() or b"")
        reader.expect_body(head)
        body = reader.next_body()
        assert body is not None
        out.append(http11.reply_bytes(200, REPLY_HEADERS, REPLY_BODY, keep=head.keep_alive, head=head))
        out.clear()


def h11_server(n: int) -> None:
    import h11

    conn = h11.Connection(our_role=h11.SERVER, max_incomplete_event_size=65536)
    headers = [(b"Content-Type", b"application/json"), (b"Cache-Control", b"no-store")]
    for _ in range(n):
        conn.receive_data(REQUEST)
        req = conn.next_event()
        assert isinstance(req, h11.Request)
        body = b""
        while True:
            ev = conn.next_event()
            if isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                break
        reply = [(b"Content-Length", b"%d" % len(REPLY_BODY)), *headers]
        out = conn.send(h11.Response(status_code=200, headers=reply))
        out += conn.send(h11.Data(data=REPLY_BODY))  # type: ignore[operator]
        out += conn.send(h11.EndOfMessage())  # type: ignore[operator]
        conn.start_next_cycle()


def _reply_wire() -> bytes:
    head = http11.RequestHead("POST", "/mcp", "HTTP/1.1", {})
    return http11.reply_bytes(200, REPLY_HEADERS, REPLY_BODY, keep=True, head=head)


def ours_client(n: int) -> None:
    """What hubclient/aio.py does today with the codec's pieces: the request's bytes, the reply's
    head parsed and its Content-Length body cut."""
    wire = _reply_wire()
    headers = dict(HEAD)
    for _ in range(n):
        data = http11.request_bytes("POST", "/mcp", headers, BODY)
        assert data
        head = http11.parse_response_head(wire[: http11.head_end(wire)])
        start = http11.head_end(wire) + 4
        body = wire[start : start + head.length]
        assert len(body) == len(REPLY_BODY)


def h11_client(n: int) -> None:
    import h11

    wire = _reply_wire()
    conn = h11.Connection(our_role=h11.CLIENT)
    headers = [(k.encode(), v.encode()) for k, v in HEAD] + [(b"Content-Length", b"%d" % len(BODY))]
    for _ in range(n):
        data = conn.send(h11.Request(method=b"POST", target=b"/mcp", headers=headers))
        data += conn.send(h11.Data(data=BODY))  # type: ignore[operator]
        data += conn.send(h11.EndOfMessage())  # type: ignore[operator]
        conn.receive_data(wire)
        resp = conn.next_event()
        assert isinstance(resp, h11.Response)
        body = b""
        while True:
            ev = conn.next_event()
            if isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                break
        conn.start_next_cycle()


def _cpu_us(fn: Callable[[int], None], n: int) -> float:
    start = time.thread_time()
    fn(n)
    return (time.thread_time() - start) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    cases = {"server": (ours_server, h11_server), "client": (ours_client, h11_client)}
    for role, (ours, theirs) in cases.items():
        ours(200), theirs(200)  # warm up (imports, caches)
        a, b = [], []
        for _ in range(args.rounds):  # alternating: a machine's load hits both alike
            a.append(_cpu_us(ours, args.requests))
            b.append(_cpu_us(theirs, args.requests))
        mo, mt = statistics.median(a), statistics.median(b)
        print(f"{role:6}  ours {mo:6.2f} us/request   h11 {mt:6.2f} us/request   h11/ours {mt / mo:4.1f}x")


if __name__ == "__main__":
    main()
