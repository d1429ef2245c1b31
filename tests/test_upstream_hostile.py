"""A kernel's listen read from a hostile or broken hub (issue #42): a user's own server is what
the JupyterHub service's shared listens read, on a loop every user shares. An event that never
ends, or an HTTP chunk that declares a gigabyte, must end that stream, not grow a buffer.

The hub here is an attacker: a raw socket on 127.0.0.1 that answers the listen and then streams
bytes with no end of event. Without the bounds, the reader buffers all it is sent and never lets
go; with them it closes the connection after about a megabyte."""

from __future__ import annotations

import socket
import threading

import pytest

from mcp_notebook.allkernels.upstream import MAX_EVENT_BYTES, Listens
from mcp_notebook.hubclient.address import HubAddress

PIECE = 64 * 1024
TOTAL = 32 * 1024 * 1024  # far over the bound and over what loopback's socket buffers hold


class EndlessHub:
    """Answers one listen with 200 and an event stream that never ends an event."""

    def __init__(self, declared_chunk: int | None):
        self.declared_chunk = declared_chunk  # None: 64 KiB chunks; else one chunk of this size
        self.sent = 0
        self.cut = threading.Event()  # the reader closed the connection
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._srv.settimeout(30)
        conn, _ = self._srv.accept()
        conn.settimeout(30)
        with conn:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:  # the request's head (its body is not read)
                head += conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            if self.declared_chunk is not None:
                conn.sendall(b"%x\r\n" % self.declared_chunk + b"data: ")
            try:
                while self.sent < TOTAL:
                    data = b"x" * PIECE
                    if self.declared_chunk is None:
                        data = b"%x\r\n" % PIECE + data + b"\r\n"
                    conn.sendall(data)
                    self.sent += PIECE
                if conn.recv(1) == b"":  # everything was taken: did the reader let go?
                    self.cut.set()
            except TimeoutError:  # the reader holds the stream (and all it was sent)
                pass
            except OSError:  # reset or broken pipe: the reader closed while being sent to
                self.cut.set()

    def close(self) -> None:
        self._srv.close()
        self._thread.join(10)


@pytest.mark.parametrize("declared_chunk", [None, 1 << 30], ids=["endless-event", "gigabyte-chunk"])
def test_a_hub_that_never_ends_an_event_has_its_stream_cut_at_the_bound(declared_chunk):
    hub = EndlessHub(declared_chunk)
    listens = Listens(lambda key, kind, uri: None)
    try:
        listens.want("k", HubAddress(f"http://127.0.0.1:{hub.port}/mcp", "token"), frozenset({"test://x"}))
        assert hub.cut.wait(20), f"the reader kept the stream after {hub.sent} bytes"
        assert hub.sent < TOTAL, "the reader took everything it was sent"
        assert MAX_EVENT_BYTES <= 4 * 1024 * 1024
    finally:
        listens.close()
        hub.close()
