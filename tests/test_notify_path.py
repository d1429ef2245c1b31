"""A notification's path (issue #42, sixth pass): the bench-only hop trace is off unless its
variable names a directory when the process starts, and writes one line per hop when on; an
event stream carried by tornado (the service, the server extension) goes out with Nagle's
algorithm off, which tornado leaves on while a reply is open."""

from __future__ import annotations

import asyncio
import http.client
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tornado import web

from mcp_notebook.allkernels.sse_replies import no_delay

ROOT = Path(__file__).resolve().parents[1]
PROBE = "import mcp_notebook.hop_trace as h; print(h.ON); h.ON and h.stamp('listen.read', 'nb://vars/x')"


def _python(code: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k != "MCP_NOTEBOOK_HOP_TRACE"} | {"PYTHONPATH": str(ROOT)} | env
    done = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_hop_trace_is_off_by_default_and_writes_one_line_per_hop_when_on(tmp_path):
    assert _python(PROBE) == "False"
    assert list(tmp_path.iterdir()) == []
    assert _python(PROBE, MCP_NOTEBOOK_HOP_TRACE=str(tmp_path)) == "True"
    (trace,) = tmp_path.glob("*.tsv")
    header, line = trace.read_text().splitlines()
    assert header.startswith("#\t")
    _, hop, thread, detail = line.split("\t")
    assert (hop, thread, detail) == ("listen.read", "MainThread", "nb://vars/x")


def test_uri_in_finds_the_watched_uri_of_an_event():
    from mcp_notebook.hop_trace import uri_in

    event = (
        b'event: message\ndata: {"method":"notifications/resources/updated","params":{"uri":"nb://vars/counter"}}\n\n'
    )
    assert uri_in(event) == "nb://vars/counter"
    assert uri_in(b": keepalive\n\n") == ""


class _Stream(web.RequestHandler):
    """An event stream's head, then the server socket's TCP_NODELAY as its one event."""

    async def get(self) -> None:
        self.set_header("Content-Type", "text/event-stream")
        if self.get_argument("no_delay", "") == "1":
            no_delay(self)
        sock = self.request.connection.stream.socket
        self.write(f"data: {sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)}\n\n")
        await self.flush()
        self.finish()


def test_an_event_stream_goes_out_with_nagle_off():
    ready = threading.Event()
    box: dict = {}

    def serve() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        server = web.Application([("/s", _Stream)]).listen(0, "127.0.0.1")
        box["port"] = next(iter(server._sockets.values())).getsockname()[1]
        box["loop"], box["server"] = loop, server
        loop.call_soon(ready.set)
        loop.run_forever()
        server.stop()
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        seen = {}
        for flag in ("0", "1"):
            conn = http.client.HTTPConnection("127.0.0.1", box["port"], timeout=10)
            conn.request("GET", f"/s?no_delay={flag}")
            seen[flag] = conn.getresponse().read().decode()
            conn.close()
        assert seen["0"].strip() == "data: 0"  # tornado's own default while a reply is open
        assert seen["1"].strip() != "data: 0"
    finally:
        box["loop"].call_soon_threadsafe(box["loop"].stop)
        thread.join(10)


def test_the_hop_trace_names_the_program_not_its_arguments(monkeypatch):
    """A server's command line may carry a token: the trace's header keeps only the program."""
    from mcp_notebook import hop_trace

    monkeypatch.setattr("sys.argv", ["/usr/bin/jupyterhub-singleuser", "--ServerApp.token=s3cr3t", "--token", "x9"])
    assert hop_trace._whose() == "/usr/bin/jupyterhub-singleuser"
