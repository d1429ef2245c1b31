"""What `%load_ext mcp_notebook` costs in a fresh kernel, as a user gets it: the package's bytecode
written first (as pip does on install), then N fresh kernels, each loading once.

    .venv/bin/python bench/load.py [--kernels 10] [--read cell|client]

Timed inside each kernel: the wall time of `%load_ext mcp_notebook` (importing the package, which
a fresh kernel has not imported, the hub's start: socket, loop, server thread, runtime file) and the
main thread's CPU time over the same span (less sensitive to other load on the machine); then, in
the same cell, as soon as `%load_ext` has returned, a first `resources/read` of a variable (a raw
socket, one write of a stateless-era request, the first of a fresh connection): the time from the
end of `%load_ext` to the whole reply, and from the request's write to it. With `--read client`
the first read is sent instead by this process as a client would, once the loading cell has
ended: the runtime file read for the URL and token, then the same request; timed from the
moment the cell's end (its idle status) reached this process. Prints one JSON
document with the median, min and max of each, the machine, the Python and the load average before
and after: quote a figure with those. bench/run.py's load section times the same first load in one
kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import loadgen
import sections as S

HEAD, BODY = loadgen.stateless_request("resources/read", {"uri": "nb://vars/x"})

LOAD_ONLY = """import time as _t, json as _j
x = 41
_w0, _c0 = _t.perf_counter(), _t.thread_time()
get_ipython().run_line_magic('load_ext', 'mcp_notebook')
_w1, _c1 = _t.perf_counter(), _t.thread_time()
print('BENCHJSON ' + _j.dumps({'wall_ms': (_w1 - _w0) * 1e3, 'main_cpu_ms': (_c1 - _c0) * 1e3}))"""

CELL = """import time as _t, json as _j, socket as _so
x = 41
_w0, _c0 = _t.perf_counter(), _t.thread_time()
get_ipython().run_line_magic('load_ext', 'mcp_notebook')
_w1, _c1 = _t.perf_counter(), _t.thread_time()
import mcp_notebook as _m
_info = _m.connection_info()
_host, _port = _info['url'].split('//')[1].split('/')[0].rsplit(':', 1)
_head = dict(HEAD, Host=f'{_host}:{_port}', Authorization='Bearer ' + (_info['token'] or ''))
_req = ('POST /mcp HTTP/1.1\\r\\n' + ''.join(f'{k}: {v}\\r\\n' for k, v in _head.items())
        + f'Content-Length: {len(BODY)}\\r\\n\\r\\n').encode() + BODY
_s = _so.create_connection((_host, int(_port)), timeout=30)
_w2 = _t.perf_counter()
_s.sendall(_req)
def _more():
    data = _s.recv(65536)
    assert data, 'the hub closed the connection'
    return data
_got = b''
while b'\\r\\n\\r\\n' not in _got:
    _got += _more()
_h, _, _b = _got.partition(b'\\r\\n\\r\\n')
_n = int([l.split(b':')[1] for l in _h.split(b'\\r\\n') if l.lower().startswith(b'content-length:')][0])
while len(_b) < _n:
    _b += _more()
_w3 = _t.perf_counter()
_s.close()
assert b'"result"' in _b and b'41' in _b, _got[:300]
print('BENCHJSON ' + _j.dumps({'wall_ms': (_w1 - _w0) * 1e3, 'main_cpu_ms': (_c1 - _c0) * 1e3,
      'first_read_after_load_ms': (_w3 - _w1) * 1e3, 'first_read_ms': (_w3 - _w2) * 1e3}))"""


def _spread(values: list[float]) -> dict[str, Any]:
    s = sorted(values)
    return {"median": round(s[len(s) // 2], 1), "min": round(s[0], 1), "max": round(s[-1], 1)}


def _client_read(runtime: str) -> dict[str, float]:
    """A client's first read once the loading cell has ended: the runtime file, then one request."""
    t0 = time.perf_counter()
    info = json.loads(next(Path(runtime).glob("mcp-notebook-*.json")).read_text())
    hostport = info["url"].split("//")[1].split("/")[0]
    host, port = hostport.rsplit(":", 1)
    head = {**HEAD, "Host": hostport, "Authorization": f"Bearer {info['token']}"}
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    request = f"POST /mcp HTTP/1.1\r\n{lines}Content-Length: {len(BODY)}\r\n\r\n".encode() + BODY
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        t1 = time.perf_counter()
        sock.sendall(request)
        got = b""
        while b"\r\n\r\n" not in got:
            data = sock.recv(65536)
            assert data, "the hub closed the connection"
            got += data
        head_bytes, _, body = got.partition(b"\r\n\r\n")
        length = int(
            next(
                v
                for k, _, v in (h.partition(b":") for h in head_bytes.split(b"\r\n"))
                if k.lower() == b"content-length"
            )
        )
        while len(body) < length:
            data = sock.recv(65536)
            assert data, "the hub closed the connection"
            body += data
    t2 = time.perf_counter()
    assert b'"result"' in body and b"41" in body, got[:300]
    return {"first_read_after_load_ms": (t2 - t0) * 1e3, "first_read_ms": (t2 - t1) * 1e3}


def run(kernels: int, read: str = "cell") -> dict[str, Any]:
    S.compile_package()
    rows: list[dict[str, float]] = []
    start = os.getloadavg()
    for _ in range(kernels):
        with tempfile.TemporaryDirectory(prefix="mcpnb-load-") as runtime:
            k = S.BenchKernel(runtime)
            try:
                if read == "cell":
                    rows.append(k.json(f"HEAD, BODY = {HEAD!r}, {BODY!r}\n" + CELL))
                else:
                    row = k.json(LOAD_ONLY)  # returns when the cell's idle status has arrived
                    rows.append({**row, **_client_read(runtime)})
            finally:
                k.shutdown()
    after = "after_load_ext" if read == "cell" else "after_the_loading_cell"
    return {
        "kernels": kernels,
        "first_read_by": read,
        "load_ext_wall_ms": _spread([r["wall_ms"] for r in rows]),
        "load_ext_main_thread_cpu_ms": _spread([r["main_cpu_ms"] for r in rows]),
        f"first_read_{after}_ms": _spread([r["first_read_after_load_ms"] for r in rows]),
        "first_read_from_its_write_ms": _spread([r["first_read_ms"] for r in rows]),
        "machine": S.machine_facts(),
        "loadavg_start": start,
        "loadavg_end": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=10, help="fresh kernels, one load each")
    ap.add_argument("--read", choices=("cell", "client"), default="cell", help="who sends the first read (see above)")
    args = ap.parse_args()
    print(json.dumps(run(max(1, args.kernels), args.read), indent=1))


if __name__ == "__main__":
    main()
