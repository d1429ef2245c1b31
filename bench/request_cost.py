"""Python cost of one small read through the HTTP layer and the protocol, without sockets.

    .venv/bin/python bench/request_cost.py [--requests 20000]

Loads the hub in an in-process IPython shell and feeds whole requests for ``nb://vars/x`` (each
with its own id, as a client sends them) to one connection's ``data_received``, replies going to
a list instead of a socket. Prints microseconds (CPU time of the thread, so a busy machine
inflates it less than wall time) per request for both eras: what the hub's own
Python costs per read (the replay path after the first request), the figure docs/DESIGN.md quotes;
then the same for reads of 1,000 URIs in turn (``nb://vars/v0`` .. ``v999``, each cached: a head
family's path, or the general one where no family applies).
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
    from mcp_notebook.transport.connection import Connection

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

            async def run(requests: list[bytes], warm: int) -> float:
                conn = Connection(transport)
                sink = _ListTransport()
                conn.connection_made(sink)  # type: ignore[arg-type]
                for data in requests[:warm]:  # the first requests learn the head and fill the read cache
                    conn.data_received(data)
                assert b'"result"' in sink.out[-1], sink.out[-1][:300]
                t0 = time.thread_time()  # CPU time of this thread: what the hub's Python costs, robust to load
                for data in requests:
                    conn.data_received(data)
                elapsed = time.thread_time() - t0
                assert len(sink.out) == warm + len(requests) and b'"result"' in sink.out[-1]
                return elapsed / len(requests) * 1e6

            def calls(requests: list[bytes], warm: int) -> float:
                """Python and C function calls per read, over 1,000 reads after the same warm-up."""

                async def counted() -> int:
                    conn = Connection(transport)
                    conn.connection_made(_ListTransport())  # type: ignore[arg-type]
                    for data in requests[:warm]:
                        conn.data_received(data)
                    n = [0]

                    def count(frame: Any, event: str, arg: Any) -> None:
                        if event in ("call", "c_call"):
                            n[0] += 1

                    sys.setprofile(count)
                    for data in requests[warm : warm + 1000]:
                        conn.data_received(data)
                    sys.setprofile(None)
                    return n[0]

                return asyncio.run(counted()) / 1000

            for kind, requests, warm in (("one URI", same, 100), ("1,000 URIs in turn", rotating, 1000)):
                cost = asyncio.run(run(requests, warm))
                extra = f", {calls(requests, warm):.1f} calls" if args.calls else ""
                print(f"{era}, {kind}: {cost:.2f} µs per small read (HTTP layer + protocol, no sockets){extra}")
    finally:
        shell.run_cell("%unload_ext mcp_notebook")


if __name__ == "__main__":
    main()
