"""What `%load_ext mcp_notebook` costs in a fresh kernel, as a user gets it: the package's bytecode
written first (as pip does on install), then N fresh kernels, each loading once.

    .venv/bin/python bench/load.py [--kernels 10]

Timed inside each kernel: the wall time of `%load_ext mcp_notebook` (importing the package, which
a fresh kernel has not imported, the hub's start: socket, loop, server thread, runtime file) and the
main thread's CPU time over the same span (less sensitive to other load on the machine); then, in
the same cell, as soon as `%load_ext` has returned, a first `resources/read` of a variable (a raw
socket, one write of a stateless-era request, the first of a fresh connection): the time from the
end of `%load_ext` to the whole reply, and from the request's write to it. Prints one JSON
document with the median, min and max of each, the machine, the Python and the load average before
and after: quote a figure with those. bench/run.py's load section times the same first load in one
kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import loadgen
import sections as S

HEAD, BODY = loadgen.stateless_request("resources/read", {"uri": "nb://vars/x"})

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


def run(kernels: int) -> dict[str, Any]:
    S.compile_package()
    rows: list[dict[str, float]] = []
    start = os.getloadavg()
    for _ in range(kernels):
        with tempfile.TemporaryDirectory(prefix="mcpnb-load-") as runtime:
            k = S.BenchKernel(runtime)
            try:
                rows.append(k.json(f"HEAD, BODY = {HEAD!r}, {BODY!r}\n" + CELL))
            finally:
                k.shutdown()
    return {
        "kernels": kernels,
        "load_ext_wall_ms": _spread([r["wall_ms"] for r in rows]),
        "load_ext_main_thread_cpu_ms": _spread([r["main_cpu_ms"] for r in rows]),
        "first_read_after_load_ext_ms": _spread([r["first_read_after_load_ms"] for r in rows]),
        "first_read_from_its_write_ms": _spread([r["first_read_ms"] for r in rows]),
        "machine": S.machine_facts(),
        "loadavg_start": start,
        "loadavg_end": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=10, help="fresh kernels, one load each")
    args = ap.parse_args()
    print(json.dumps(run(max(1, args.kernels)), indent=1))


if __name__ == "__main__":
    main()
