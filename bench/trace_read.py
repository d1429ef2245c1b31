"""Follow one first read file by file: which package files it touches, how often it crosses rooms.

    .venv/bin/python bench/trace_read.py [--uri nb://vars/x] [--calls]

Loads the hub in an in-process IPython shell (as bench/request_cost.py does), then feeds one
connection's ``data_received`` a first ``resources/read`` (nothing cached, a head never seen) in
each era, with ``sys.setprofile`` (and ``threading.setprofile``: a worker thread counts too) on.
Prints, per era: the distinct package files touched, in first-touch order, and the crossings of
the transport <-> protocol boundary (a call whose callee is in one room and whose nearest package
caller is in the other; a callback through asyncio counts once), each call counted twice (there
and back), as issue 33 counts them. The wire modules (``protocol/wire_*.py``: the HTTP/1.1 codec,
the stateless header codec, SSE) are imported by both ends and hold no MCP logic: a call into one
is counted apart, as a use of the wire, not as a crossing. ``--calls`` lists every call across.

``--bridge`` follows instead one read through the all-kernels stdio bridge in this process (the
``Bridge`` and its stdio carrier driving a ``KernelsFront``, which reads the hub loaded here over
loopback HTTP): the files touched on the bridge's threads, and every call into an HTTP module
(``protocol/wire_http11.py``, ``protocol/wire_sse.py``, ``protocol/wire_stateless.py``: the
stateless era's headers; ``transport/``, ``hubclient/``,
``bridge/http_link.py``) by the room that made it. Only the front's link to the kernel's hub
should be HTTP (``allkernels`` -> ``hubclient``): the bridge -> front leg carries messages.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loadgen
from request_cost import _ListTransport, _raw


def _room(path: str) -> str:
    """A file's room for counting crossings: the wire modules are a room of their own."""
    return "wire" if path.startswith("protocol/wire_") else path.split("/")[0]


class Tracer:
    """A profile function recording package files and transport <-> protocol crossings."""

    def __init__(self, package: Path):
        self.package = str(package) + "/"
        self.files: dict[str, None] = {}
        self.crossings: list[tuple[str, str]] = []
        self.wire_calls = 0  # calls from transport/ into the wire modules both ends share

    def _rel(self, filename: str) -> str | None:
        return filename[len(self.package) :] if filename.startswith(self.package) else None

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = self._rel(frame.f_code.co_filename)
        if callee is None:
            return
        self.files.setdefault(callee, None)
        caller_frame = frame.f_back
        while caller_frame is not None and self._rel(caller_frame.f_code.co_filename) is None:
            caller_frame = caller_frame.f_back
        if caller_frame is None:
            return
        caller = self._rel(caller_frame.f_code.co_filename) or ""
        rooms = {_room(caller), _room(callee)}
        if rooms == {"transport", "wire"}:
            self.wire_calls += 1
        elif rooms == {"transport", "protocol"}:
            self.crossings.append((f"{caller}:{caller_frame.f_code.co_name}", f"{callee}:{frame.f_code.co_name}"))


def trace_one(transport: Any, data: bytes, package: Path) -> Tracer:
    """Feed ``data`` (one whole request) to a fresh connection under the tracer; wait for the reply."""
    from mcp_notebook.transport.connection import Connection

    tracer = Tracer(package)

    async def run() -> None:
        conn = Connection(transport)
        sink = _ListTransport()
        conn.connection_made(sink)  # type: ignore[arg-type]
        sys.setprofile(tracer)
        threading.setprofile(tracer)
        try:
            conn.data_received(data)
            for _ in range(2000):  # a read handed to a worker: bounded wait for its reply
                if sink.out:
                    break
                await asyncio.sleep(0.001)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        assert sink.out and b'"result"' in sink.out[-1], sink.out[-1][:300] if sink.out else "no reply"

    asyncio.run(run())
    return tracer


HTTP_MODULES = (
    "protocol/wire_http11.py",
    "protocol/wire_sse.py",
    "protocol/wire_stateless.py",
    "transport/",
    "hubclient/",
    "bridge/http_link.py",
)


class HttpTracer(Tracer):
    """Package files touched, and calls into HTTP modules by the (room/file of the) caller."""

    def __init__(self, package: Path):
        super().__init__(package)
        self.http: dict[tuple[str, str], int] = {}
        self.calls = 0  # Python calls made on the traced threads (the package's, the library's)
        self.on = False  # set for the read followed (threads started before stay profiled)

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not self.on:
            return
        self.calls += 1
        callee = self._rel(frame.f_code.co_filename)
        if callee is None:
            return
        self.files.setdefault(callee, None)
        if not callee.startswith(HTTP_MODULES):
            return
        caller_frame = frame.f_back
        while caller_frame is not None and self._rel(caller_frame.f_code.co_filename) is None:
            caller_frame = caller_frame.f_back
        caller = self._rel(caller_frame.f_code.co_filename) if caller_frame is not None else "?"
        if caller is not None and not caller.startswith(HTTP_MODULES):
            key = (caller, callee)
            self.http[key] = self.http.get(key, 0) + 1


def trace_bridge(package: Path, uri: str) -> HttpTracer:
    """One stateless read of ``uri`` (the current kernel's) through the all-kernels stdio bridge."""
    import io
    import json
    import os
    import time

    from mcp_notebook.allkernels.directory import LocalDirectory
    from mcp_notebook.allkernels.front import KernelsFront
    from mcp_notebook.bridge.hub_selection import FrontRecord, FrontSelector
    from mcp_notebook.bridge.stdio import Bridge
    from mcp_notebook.bridge.stdio_carrier import StdioCarrier

    front = KernelsFront(LocalDirectory())
    record = FrontRecord(Path(), {"pid": os.getpid(), "started_at": time.time()}, True)
    carrier = StdioCarrier(front.server, record)
    out = io.BytesIO()
    bridge = Bridge(FrontSelector(record), out=out, log=io.StringIO(), connect=lambda _: carrier)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    tracer = HttpTracer(package)
    try:
        sys.setprofile(tracer)  # from the start: a request thread the bridge keeps is profiled too
        threading.setprofile(tracer)
        for n, traced in ((1, False), (2, True)):  # a first read warms the front's link to the hub
            msg = {"jsonrpc": "2.0", "id": n, "method": "resources/read", "params": {"uri": uri, "_meta": meta}}
            tracer.on = traced
            bridge.dispatch(msg)
            for _ in range(5000):  # bounded wait for the answer on stdout
                if out.getvalue().count(b"\n") >= n:
                    break
                time.sleep(0.001)
            tracer.on = False
            last = json.loads(out.getvalue().splitlines()[-1])
            assert "result" in last, last
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        carrier.close()
        front.close()
    return tracer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uri", default="nb://vars/x")
    ap.add_argument("--calls", action="store_true", help="list every crossing")
    ap.add_argument("--bridge", action="store_true", help="follow a read through the all-kernels stdio bridge")
    args = ap.parse_args()
    if args.bridge:  # the front finds only the hub loaded here
        import os
        import tempfile

        os.environ["JUPYTER_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="trace-read-")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("x = 1\ny = 2")
    shell.run_cell("%load_ext mcp_notebook")
    import mcp_notebook

    package = Path(mcp_notebook.__file__).resolve().parent
    kh = mcp_notebook.hub()
    transport = kh.transport
    assert transport is not None
    auth = {"Authorization": f"Bearer {kh.token}", "Host": f"127.0.0.1:{transport.port}"}
    try:
        if args.bridge:
            bridged = trace_bridge(package, args.uri)
            print(
                f"stdio bridge: a read of {args.uri}: {len(bridged.files)} package files on the bridge's threads, "
                f"{bridged.calls} Python calls (the kernel's hub, on its own thread, not counted)"
            )
            print("  files: " + ", ".join(bridged.files))
            print("  calls into HTTP modules, by caller:")
            for (caller, callee), count in sorted(bridged.http.items()):
                print(f"    {caller} -> {callee}: {count}")
            return
        for era, uri in (("stateless", args.uri), ("handshake", args.uri.replace("/x", "/y"))):
            if era == "stateless":
                head, body = loadgen.stateless_request("resources/read", {"uri": uri})
            else:
                session = loadgen.handshake_session(transport.url, {"Authorization": auth["Authorization"]})
                head, body = loadgen.handshake_request(session, "resources/read", {"uri": uri})
            tracer = trace_one(transport, _raw({**head, **auth}, body, 1), package)
            print(f"{era}: first read of {uri}: {len(tracer.files)} package files, ", end="")
            n = len(tracer.crossings)
            print(
                f"{n} calls across transport<->protocol ({2 * n} crossings, counting each return); "
                f"{tracer.wire_calls} calls from transport into the shared wire modules"
            )
            print("  files: " + ", ".join(tracer.files))
            if args.calls:
                for caller, callee in tracer.crossings:
                    print(f"  {caller} -> {callee}")
    finally:
        shell.run_cell("%unload_ext mcp_notebook")


if __name__ == "__main__":
    main()
