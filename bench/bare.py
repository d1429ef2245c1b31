"""A bare HTTP/1.1 responder on uvloop (or asyncio's loop): the ceiling a Python server on that loop can reach.

    python bench/bare.py PORT [BODY_BYTES] [--framing-only] [--asyncio]

It does what any HTTP/1.1 server must do for each request and nothing else: split the head into its
request line and a dict of header fields (names lower-cased), take the body by its Content-Length,
and answer a fixed JSON body of the given size; no routing, no JSON, no checks. ``--framing-only``
skips the header dict (it only finds Content-Length): a floor no real server reaches. ``--asyncio``
runs it on asyncio's own loop instead of uvloop's (the hub's loop where uvloop does not install).
bench/varied.py runs it beside the hub with the same load. Loopback only.
"""

from __future__ import annotations

import asyncio
import sys


class Responder(asyncio.Protocol):
    """Keep-alive, pipelined: every complete request in the buffer gets the fixed reply."""

    reply = b""
    framing_only = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.io = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        out = []
        while len(out) < 1000:  # bounded per read
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            if self.framing_only:
                head = buf[:end].lower()
                at = head.find(b"content-length:")
                length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            else:
                lines = buf[:end].decode("latin-1").split("\r\n")
                _method, _path, _version = lines[0].split(" ", 2)
                fields = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    fields[name.lower()] = value.strip()
                length = int(fields.get("content-length", "0"))
            if len(buf) < end + 4 + length:
                break
            buf = buf[end + 4 + length :]
            out.append(self.reply)
        self.buf = buf
        if out:
            self.io.write(b"".join(out))


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    Responder.framing_only = "--framing-only" in sys.argv
    port = int(args[0])
    size = int(args[1]) if len(args) > 1 else 300
    body = (b'{"jsonrpc":"2.0","id":1,"result":{"contents":[{"text":"' + b"x" * max(0, size - 60) + b'"}]}}')[:size]
    Responder.reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    if "--asyncio" in sys.argv:
        loop = asyncio.new_event_loop()
    else:
        import uvloop

        loop = uvloop.new_event_loop()
    server = loop.run_until_complete(loop.create_server(Responder, "127.0.0.1", port))
    try:
        loop.run_forever()
    finally:
        server.close()


if __name__ == "__main__":
    main()
