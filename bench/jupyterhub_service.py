"""What the JupyterHub service adds: the same kernel read and watched through the user's own server
(``/user/{name}/mcp-notebook/kernels/{id}/mcp`` with the user's JupyterHub token, through the proxy) and
through ``/services/mcp-notebook/mcp`` (an MCP access token from the OAuth flow).

    .venv/bin/python bench/jupyterhub_service.py [--reads 500] [--cells 30] [--clients 20]

Reads: 2026-07-28 ``resources/read`` of a small variable, one keep-alive connection per client,
p50/p99, and the service's CPU per read (robust to other load, unlike latency); first one
client, then ``--clients`` signed-in clients reading at once (each its own
grant, so its own front in the service: the service sees as many users; the upstream servers are
the two test users'). Notifications: cell end (stamped in the kernel) to
``notifications/resources/updated`` at the official SDK client (bench/notify.py), both eras.
Prints a table and writes bench/results/jupyterhub_service.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from jhub import LocalJupyterHub  # noqa: E402
from notify import notification_latency, print_notification_rows  # noqa: E402
from remote import ServerKernel, read_latency  # noqa: E402
from service_oauth import sign_in  # noqa: E402

VERSION = "2026-07-28"
URI = "nb://vars/x"


def _body_and_headers(auth: str) -> tuple[bytes, dict[str, str]]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/read",
        "params": {
            "uri": URI,
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
        "Mcp-Name": URI,
    }
    return json.dumps(body).encode(), headers


def service_cpu(jupyterhub: LocalJupyterHub) -> float:
    """CPU seconds the service process has used (robust to other load, unlike latency)."""
    import psutil

    for proc in psutil.Process(jupyterhub.proc.pid).children(recursive=True):
        if "mcp_notebook.jupyterhub_service" in " ".join(proc.cmdline()):
            t = proc.cpu_times()
            return t.user + t.system
    raise RuntimeError("the service process was not found")


def concurrent_reads(targets: list[tuple[str, str]], reads: int) -> dict[str, Any]:
    """Every (url, auth) read ``reads`` times at once, each on its own connection."""
    samples: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []

    def worker(url: str, auth: str) -> None:
        content, headers = _body_and_headers(auth)
        mine = []
        with httpx.Client(headers=headers, timeout=60) as http:
            for i in range(reads + 10):
                t0 = time.perf_counter()
                r = http.post(url, content=content)
                dt = time.perf_counter() - t0
                if r.status_code != 200 or "contents" not in r.text:
                    errors.append(r.text[:200])
                    return
                if i >= 10:
                    mine.append(dt * 1e3)
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=worker, args=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    if errors:
        raise RuntimeError(errors[0])
    samples.sort()
    pick = lambda q: samples[min(len(samples) - 1, int(len(samples) * q))]  # noqa: E731
    return {"n": len(samples), "p50_ms": pick(0.5), "p90_ms": pick(0.9), "p99_ms": pick(0.99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--cells", type=int, default=30)
    ap.add_argument("--clients", type=int, default=20)
    args = ap.parse_args()
    out: dict[str, Any] = {"clients": args.clients}
    stamp = f"import sys as _s; _s.path.insert(0, {str(HERE)!r}); import kside; kside.install_stamp_hook()"
    with tempfile.TemporaryDirectory(prefix="mcpnb-hub-bench-") as tmp:
        jupyterhub = LocalJupyterHub(Path(tmp))
        try:
            kids = {}
            kernels = {}
            for user in ("alice", "bob"):
                kids[user], kc = jupyterhub.kernel(user, f"{user}.ipynb", "x = [1, 2, 3]", before=stamp)
                kernels[user] = ServerKernel(kc)
            hub_tokens = {user: jupyterhub.user_token(user) for user in kids}
            pipe = {u: f"{jupyterhub.public}user/{u}/mcp-notebook/kernels/{kids[u]}/mcp" for u in kids}
            grants = [sign_in(jupyterhub, ("alice", "bob")[i % 2])[1]["access_token"] for i in range(args.clients)]
            out["read_direct"] = read_latency(pipe["alice"], f"token {hub_tokens['alice']}", args.reads)
            cpu0 = service_cpu(jupyterhub)
            out["read_service"] = read_latency(jupyterhub.mcp_url, f"Bearer {grants[0]}", args.reads)
            out["service_cpu_ms_per_read"] = (service_cpu(jupyterhub) - cpu0) / (args.reads + 50) * 1e3
            per = max(20, args.reads // 5)
            direct_many = [
                (pipe[("alice", "bob")[i % 2]], f"token {hub_tokens[('alice', 'bob')[i % 2]]}")
                for i in range(args.clients)
            ]
            out["read_direct_many"] = concurrent_reads(direct_many, per)
            out["read_service_many"] = concurrent_reads([(jupyterhub.mcp_url, f"Bearer {g}") for g in grants], per)
            direct = {"url": pipe["alice"], "token": hub_tokens["alice"]}
            service = {"url": jupyterhub.mcp_url, "token": grants[0]}
            out["notify_direct"] = notification_latency(kernels["alice"], direct, args.cells)
            out["notify_service"] = notification_latency(kernels["alice"], service, args.cells)
        finally:
            jupyterhub.stop()
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "jupyterhub_service.json").write_text(json.dumps(out, indent=2))
    print("| case | user's server | through the service | added |")
    print("|---|---|---|---|")
    for label, a, b in (
        ("read, 1 client", out["read_direct"], out["read_service"]),
        (f"read, {args.clients} clients at once", out["read_direct_many"], out["read_service_many"]),
    ):
        for q in ("p50", "p99"):
            x, y = a[f"{q}_ms"], b[f"{q}_ms"]
            print(f"| {label} {q} | {x:.2f} ms | {y:.2f} ms | {y - x:+.2f} ms |")
    print(f"| service CPU per read (1 client) | | {out['service_cpu_ms_per_read']:.2f} ms | |")
    print_notification_rows(out["notify_direct"], out["notify_service"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
