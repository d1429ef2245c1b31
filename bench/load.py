"""What `%load_ext mcp_notebook` costs in a fresh kernel, as a user gets it: the package's bytecode
written first (as pip does on install), then N fresh kernels, each loading once.

    .venv/bin/python bench/load.py [--kernels 10] [--read cell|client] [--steps]

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

With ``--steps``, no read: each line of ``load_ipython_extension``, ``lifecycle.start``,
``KernelHub.__init__`` and ``KernelHub.start`` is timed (``sys.monitoring`` LINE events enabled on
those four functions' code only, Python 3.12+), with the main thread's CPU and its run-queue wait
(``/proc/self/task/<tid>/schedstat``): per step, the median, min and max of the wall and the median
CPU over the kernels, and the load's wall minus its CPU (time the main thread waited: the GIL or
the run queue). docs/DESIGN.md, "Loading, seventh cut".
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
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


STEPS = """import sys as _sys, time as _t, json as _j, threading as _th
x = 41
_M = _sys.monitoring
_M.use_tool_id(4, 'load-steps')
_rows, _on = [], set()
def _watch(code):
    if code not in _on:
        _on.add(code)
        _M.set_local_events(4, code, _M.events.LINE)
def _line(code, line):
    _rows.append((code.co_qualname, line, _t.perf_counter(), _t.thread_time()))
    m = _sys.modules
    if code.co_qualname == 'load_ipython_extension' and 'mcp_notebook.inkernel.lifecycle' in m:
        _watch(m['mcp_notebook.inkernel.lifecycle'].start.__code__)
    if code.co_qualname == 'start' and 'mcp_notebook.inkernel.kernel_hub' in m:
        _watch(m['mcp_notebook.inkernel.kernel_hub'].KernelHub.__init__.__code__)
        _watch(m['mcp_notebook.inkernel.kernel_hub'].KernelHub.start.__code__)
_M.register_callback(4, _M.events.LINE, _line)
import mcp_notebook as _mn
_watch(_mn.load_ipython_extension.__code__)
def _queued():
    return int(open(f'/proc/self/task/{_th.get_native_id()}/schedstat').read().split()[1])
_q0 = _queued()
_w0, _c0 = _t.perf_counter(), _t.thread_time()
get_ipython().run_line_magic('load_ext', 'mcp_notebook')
_w1, _c1 = _t.perf_counter(), _t.thread_time()
_q1 = _queued()
for _c in _on:
    _M.set_local_events(4, _c, 0)
_M.free_tool_id(4)
print('BENCHJSON ' + _j.dumps({'wall_ms': (_w1 - _w0) * 1e3, 'main_cpu_ms': (_c1 - _c0) * 1e3,
      'run_queue_ms': (_q1 - _q0) / 1e6, 'rows': [('BEGIN', 0, _w0, _c0), *_rows, ('END', 0, _w1, _c1)]}))"""


def _steps(rows: list[list[Any]]) -> dict[str, tuple[float, float]]:
    """(wall, CPU) in ms from each line event to the next, keyed by function:line (summed if repeated)."""
    out: dict[str, tuple[float, float]] = {}
    for (name, line, w0, c0), (_, _, w1, c1) in itertools.pairwise(rows):
        wall, cpu = out.get(f"{name}:{line}", (0.0, 0.0))
        out[f"{name}:{line}"] = (wall + (w1 - w0) * 1e3, cpu + (c1 - c0) * 1e3)
    return out


def in_fresh_kernels(kernels: int, one: Callable[[S.BenchKernel, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """``one(kernel, its runtime dir)`` in each of ``kernels`` fresh kernels, the bytecode written first."""
    S.compile_package()
    rows: list[dict[str, Any]] = []
    for _ in range(kernels):
        with tempfile.TemporaryDirectory(prefix="mcpnb-load-") as runtime:
            k = S.BenchKernel(runtime)
            try:
                rows.append(one(k, runtime))
            finally:
                k.shutdown()
    return rows


def run_steps(kernels: int) -> dict[str, Any]:
    start = os.getloadavg()
    rows = in_fresh_kernels(kernels, lambda k, _runtime: k.json(STEPS))
    per_kernel = [_steps(r["rows"]) for r in rows]
    steps = {}
    for key in per_kernel[0]:
        walls = [p.get(key, (0.0, 0.0))[0] for p in per_kernel]
        if max(walls) >= 0.3:  # the steps that cost something somewhere
            cpus = sorted(p.get(key, (0.0, 0.0))[1] for p in per_kernel)
            steps[key] = {"wall_ms": _spread(walls), "cpu_ms_median": round(cpus[len(cpus) // 2], 2)}
    return {
        "kernels": kernels,
        "load_ext_wall_ms": _spread([r["wall_ms"] for r in rows]),
        "load_ext_main_thread_cpu_ms": _spread([r["main_cpu_ms"] for r in rows]),
        "wall_minus_cpu_ms": _spread([r["wall_ms"] - r["main_cpu_ms"] for r in rows]),
        "main_thread_run_queue_wait_ms": _spread([r["run_queue_ms"] for r in rows]),
        "steps": steps,
        "machine": S.machine_facts(),
        "loadavg_start": start,
        "loadavg_end": os.getloadavg(),
    }


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
    def one(k: S.BenchKernel, runtime: str) -> dict[str, Any]:
        if read == "cell":
            return k.json(f"HEAD, BODY = {HEAD!r}, {BODY!r}\n" + CELL)
        row = k.json(LOAD_ONLY)  # returns when the cell's idle status has arrived
        return {**row, **_client_read(runtime)}

    start = os.getloadavg()
    rows = in_fresh_kernels(kernels, one)
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
    ap.add_argument("--steps", action="store_true", help="time each line of the load instead (see above)")
    args = ap.parse_args()
    result = run_steps(max(1, args.kernels)) if args.steps else run(max(1, args.kernels), args.read)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
