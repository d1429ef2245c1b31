"""What the Jupyter server extension adds: the same kernel's hub measured directly and through
``jupyter server`` (mcp-notebook/kernels/<id>/mcp, Jupyter token).

    .venv/bin/python bench/remote.py [--reads 1000] [--cells 40]

Reads: 2026-07-28 ``resources/read`` of a small variable over one keep-alive httpx connection,
p50/p90/p99. Notifications: cell end (stamped in the kernel) to ``notifications/resources/updated``
at the official SDK client, handshake GET stream and 2026-07-28 listen stream (bench/notify.py).
Also the Jupyter server's CPU per proxied read next to its own ``/api/status`` (robust when other
processes load the machine, unlike latency). Prints a table and writes bench/results/remote.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from jserver import JupyterServer, load_hub, run  # noqa: E402
from notify import notification_latency, print_notification_rows  # noqa: E402

URI = "nb://vars/x"
VERSION = "2026-07-28"


class ServerKernel:
    """What bench/notify.py needs from a kernel: run(code) and json(expr), on a server's kernel."""

    def __init__(self, kc: Any):
        self.kc = kc

    def run(self, code: str) -> str:
        return run(self.kc, code)

    def json(self, code: str) -> Any:
        for line in reversed(self.run(code).splitlines()):
            if line.startswith("BENCHJSON "):
                return json.loads(line[len("BENCHJSON ") :])
        raise RuntimeError("no BENCHJSON line")


def server_cpu(server: JupyterServer) -> float:
    """CPU seconds the Jupyter server process has used (robust to other load, unlike latency)."""
    import psutil

    t = psutil.Process(server.proc.pid).cpu_times()
    return t.user + t.system


def read_latency(url: str, auth: str, reads: int, uri: str = URI) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/read",
        "params": {
            "uri": uri,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Authorization": auth,
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
    }
    content = json.dumps(body).encode()
    samples = []
    with httpx.Client(headers=headers, timeout=30) as http:
        for i in range(reads + 50):
            t0 = time.perf_counter()
            r = http.post(url, content=content)
            dt = time.perf_counter() - t0
            assert r.status_code == 200 and "contents" in r.text, r.text[:200]
            if i >= 50:  # warm-up
                samples.append(dt * 1e3)
    samples.sort()
    pick = lambda q: samples[min(len(samples) - 1, int(len(samples) * q))]  # noqa: E731
    return {"n": len(samples), "p50_ms": pick(0.5), "p90_ms": pick(0.9), "p99_ms": pick(0.99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=1000)
    ap.add_argument("--cells", type=int, default=40)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mcpnb-remote-bench-") as tmp:
        server = JupyterServer(Path(tmp), token="bench-token")
        try:
            kid = server.start_session("bench.ipynb")
            kc = server.client(kid)
            run(kc, f"import sys as _s; _s.path.insert(0, {str(HERE)!r}); import kside")
            run(kc, "kside.install_stamp_hook()")  # before the hub's hook: stamps the end of each cell
            hub = load_hub(kc)
            run(kc, "x = [1, 2, 3]")
            kernel = ServerKernel(kc)
            direct = {"url": hub["url"], "token": hub["token"]}
            proxied = {"url": server.mcp_url(kid), "token": server.token}
            out["read_direct"] = read_latency(direct["url"], f"Bearer {hub['token']}", args.reads)
            cpu0 = server_cpu(server)
            out["read_proxied"] = read_latency(proxied["url"], f"token {server.token}", args.reads)
            out["server_cpu_ms_per_read"] = (server_cpu(server) - cpu0) / (args.reads + 50) * 1e3
            cpu0 = server_cpu(server)
            with httpx.Client(headers={"Authorization": f"token {server.token}"}, timeout=30) as http:
                for _ in range(args.reads):
                    http.get(server.url + "api/status")
            out["server_cpu_ms_per_api_status"] = (server_cpu(server) - cpu0) / args.reads * 1e3
            out["notify_direct"] = notification_latency(kernel, direct, args.cells)
            out["notify_proxied"] = notification_latency(kernel, proxied, args.cells)
        finally:
            server.stop()
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "remote.json").write_text(json.dumps(out, indent=2))
    rd, rp = out["read_direct"], out["read_proxied"]
    print("| case | direct (hub) | through jupyter server | added |")
    print("|---|---|---|---|")
    for q in ("p50", "p90", "p99"):
        a, b = rd[f"{q}_ms"], rp[f"{q}_ms"]
        print(f"| 2026-07-28 read {q} | {a:.2f} ms | {b:.2f} ms | {b - a:+.2f} ms |")
    print(
        f"| server CPU per request | proxied read {out['server_cpu_ms_per_read']:.2f} ms | "
        f"Jupyter's own /api/status {out['server_cpu_ms_per_api_status']:.2f} ms | |"
    )
    print_notification_rows(out["notify_direct"], out["notify_proxied"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
