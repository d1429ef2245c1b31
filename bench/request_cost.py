"""Python cost of one small read through the HTTP layer and the protocol, without sockets.

    .venv/bin/python bench/request_cost.py [--requests 20000]

Loads the hub in an in-process IPython shell and feeds whole requests for ``nb://vars/x`` (each
with its own id, as a client sends them) to one connection's ``data_received``, replies going to
a list instead of a socket. Prints microseconds (CPU time of the thread, so a busy machine
inflates it less than wall time) per request for both eras: what the hub's own
Python costs per read (the replay path after the first request), the figure docs/DESIGN.md quotes;
then the same for reads of 1,000 URIs in turn (``nb://vars/v0`` .. ``v999``, each cached: a head
family's path, or the general one where no family applies), and for 25 URIs in turn on one
connection and spread over 16 (each request on the next one, as wrk sends them: what bench/varied.py loads).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loadgen


class _ListTransport:
    """Stands in for a socket transport: keeps what is written."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def get_extra_info(self, name: str) -> Any:
        return None

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return False


def _raw(head: dict[str, str], body: bytes, msg_id: int, uri: str | None = None) -> bytes:
    data = body.replace(b'"id": 1,', b'"id": %d,' % msg_id)
    if uri is not None:  # another URI, in the body and (stateless era) in Mcp-Name
        data = data.replace(b"nb://vars/x", uri.encode())
        head = {k: (uri if k == "Mcp-Name" else v) for k, v in head.items()}
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    return f"POST /mcp HTTP/1.1\r\n{lines}Content-Length: {len(data)}\r\n\r\n".encode() + data


def _connections(transport: Any, n: int) -> list[tuple[Any, _ListTransport]]:
    from mcp_notebook.transport.connection import Connection

    out = []
    for _ in range(n):
        conn = Connection(transport)
        sink = _ListTransport()
        conn.connection_made(sink)  # type: ignore[arg-type]
        out.append((conn, sink))
    return out


async def _run(transport: Any, requests: list[bytes], warm: int, conns: int) -> float:
    """CPU µs per request fed to ``conns`` connections in turn, after ``warm`` requests that learn the
    heads and fill the read cache."""
    pairs = _connections(transport, conns)
    for i, data in enumerate(requests[:warm]):
        pairs[i % conns][0].data_received(data)
    assert all(b'"result"' in sink.out[-1] for _, sink in pairs), pairs[0][1].out[-1][:300]
    t0 = time.thread_time()  # CPU time of this thread: what the hub's Python costs, robust to load
    for i, data in enumerate(requests):
        pairs[i % conns][0].data_received(data)
    elapsed = time.thread_time() - t0
    assert sum(len(sink.out) for _, sink in pairs) == warm + len(requests)
    assert all(b'"result"' in sink.out[-1] for _, sink in pairs)
    return elapsed / len(requests) * 1e6


async def _calls(transport: Any, requests: list[bytes], warm: int, conns: int) -> float:
    """Python and C function calls per read, over 1,000 reads after the same warm-up."""
    pairs = _connections(transport, conns)
    for i, data in enumerate(requests[:warm]):
        pairs[i % conns][0].data_received(data)
    n = [0]

    def count(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            n[0] += 1

    sys.setprofile(count)
    for i, data in enumerate(requests[warm : warm + 1000]):
        pairs[(warm + i) % conns][0].data_received(data)
    sys.setprofile(None)
    return n[0] / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument(
        "--calls", action="store_true", help="also count function calls per read (a figure load does not move)"
    )
    args = ap.parse_args()
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("x = 1\nfor _i in range(1000): globals()[f'v{_i}'] = _i")
    shell.run_cell("%load_ext mcp_notebook")
    import mcp_notebook

    kh = mcp_notebook.hub()
    transport = kh.transport
    assert transport is not None
    auth = {"Authorization": f"Bearer {kh.token}", "Host": f"127.0.0.1:{transport.port}"}
    try:
        for era in ("stateless", "handshake"):
            if era == "stateless":
                head, body = loadgen.stateless_request("resources/read", {"uri": "nb://vars/x"})
                head.update(auth)
            else:
                session = loadgen.handshake_session(transport.url, {"Authorization": auth["Authorization"]})
                head, body = loadgen.handshake_request(session, "resources/read", {"uri": "nb://vars/x"})
                head.update(auth)
            # Ids of one digit count: one head, as a client sends between two powers of ten.
            first = 10**5
            same = [_raw(head, body, first + i) for i in range(args.requests)]
            # Rotating over 1,000 URIs (v0 .. v999): more heads than the transport remembers.
            rotating = [_raw(head, body, first + i, f"nb://vars/v{i % 1000}") for i in range(args.requests)]
            # Rotating over 25 URIs on 16 connections, each request on the next connection (wrk's way
            # with 16 connections and one thread, as bench/varied.py runs it).
            spread = [_raw(head, body, first + i, f"nb://vars/v{i % 25}") for i in range(args.requests)]
            cases = (
                ("one URI", same, 100, 1),
                ("1,000 URIs in turn", rotating, 1000, 1),
                ("25 URIs in turn", spread, 400, 1),
                ("25 URIs in turn on 16 connections", spread, 400, 16),
            )
            for kind, requests, warm, conns in cases:
                cost = asyncio.run(_run(transport, requests, warm, conns))
                extra = f", {asyncio.run(_calls(transport, requests, warm, conns)):.1f} calls" if args.calls else ""
                print(f"{era}, {kind}: {cost:.2f} µs per small read (HTTP layer + protocol, no sockets){extra}")
    finally:
        shell.run_cell("%unload_ext mcp_notebook")


if __name__ == "__main__":
    main()
