"""The JupyterHub service under a paced load: N signed-in users each reading once a second (an
open loop: a read is sent on time whether or not the last one came back), through the user's own
server and through the service, p50/p99 and what the service adds, and the service's CPU per read.

    .venv/bin/python bench/jupyterhub_paced.py [--users 1 20 50] [--seconds 20] [--replicas 2]

``--replicas 2``: the service as two replicas on a throwaway PostgreSQL behind haproxy
(tests/replicas.py, as tests/test_jupyterhub_service_replicas.py runs it); CPU is both replicas'.

Each user is a grant of its own (its own front in the service); the upstream servers are the two
test users'. Writes bench/results/jupyterhub_paced.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
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
from jserver import free_port  # noqa: E402
from jupyterhub_service import _body_and_headers, service_cpu  # noqa: E402
from replicas import Haproxy, Postgres, Replica, service_env  # noqa: E402
from service_oauth import sign_in  # noqa: E402


def paced(targets: list[tuple[str, str]], seconds: float) -> dict[str, Any]:
    """Every (url, auth) read once a second for ``seconds`` (random phase), each on its own connection."""
    samples: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = time.monotonic() + 1.0

    def user(url: str, auth: str) -> None:
        content, headers = _body_and_headers(auth)
        due = start + random.random()
        mine: list[float] = []
        with httpx.Client(headers=headers, timeout=60) as http:
            while due < start + seconds:
                time.sleep(max(0.0, due - time.monotonic()))
                t0 = time.perf_counter()
                r = http.post(url, content=content)
                mine.append((time.perf_counter() - t0) * 1e3)
                if r.status_code != 200 or "contents" not in r.text:
                    errors.append(f"{r.status_code} {r.text[:200]}")
                due += 1.0
        with lock:
            samples.extend(mine[1:])  # the first opens the connection

    threads = [threading.Thread(target=user, args=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    samples.sort()
    pick = lambda q: samples[min(len(samples) - 1, int(len(samples) * q))]  # noqa: E731
    return {"n": len(samples), "errors": len(errors), "p50_ms": pick(0.5), "p99_ms": pick(0.99)}


EXTERNAL = """
for key in ("command", "cwd", "environment"):
    service.pop(key, None)
service["api_token"] = {token!r}
service["url"] = "http://127.0.0.1:{port}"
"""


class TwoReplicas:
    """PostgreSQL, haproxy and two replicas of the service (JupyterHub knows haproxy's URL)."""

    def __init__(self, base: Path):
        self.pg_dir = Path(tempfile.mkdtemp(prefix="mcpnb-pg-"))
        self.pg = Postgres(self.pg_dir)
        self.ports = [free_port(), free_port()]
        self.lb = Haproxy(base, self.ports)
        self.token = "svc-" + random.randbytes(16).hex()
        self.base = base
        self.replicas: list[Replica] = []

    def config(self) -> str:
        return EXTERNAL.format(token=self.token, port=self.lb.port)

    def start(self, hub: LocalJupyterHub) -> None:
        env = service_env(hub.public, hub.api_url, self.token)
        args = [f"--JupyterHubService.db_url={self.pg.url}", "--JupyterHubService.registration_burst=1000"]
        args.append(f"--JupyterHubService.upstream_url={hub.public.rstrip('/')}")
        self.replicas = [Replica(self.base, f"replica{i}", p, env, args) for i, p in enumerate(self.ports)]
        for replica in self.replicas:
            replica.wait()

    def cpu(self) -> float:
        import psutil

        return sum(sum(psutil.Process(r.proc.pid).cpu_times()[:2]) for r in self.replicas)

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()
        self.lb.stop()
        self.pg.stop()
        shutil.rmtree(self.pg_dir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, nargs="+", default=[1, 20, 50])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--label", default="after")
    ap.add_argument("--replicas", type=int, choices=(1, 2), default=1)
    args = ap.parse_args()
    out: dict[str, Any] = {"label": args.label, "replicas": args.replicas, "seconds": args.seconds, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="mcpnb-hub-paced-") as tmp:
        two = TwoReplicas(Path(tmp)) if args.replicas == 2 else None
        extra = two.config() if two else ""
        svc = ("--JupyterHubService.registration_burst=1000",)
        hub = LocalJupyterHub(Path(tmp) / "hub", svc, extra, two.start if two else None)
        cpu_of = two.cpu if two else (lambda: service_cpu(hub))
        try:
            kids = {u: hub.kernel(u, f"{u}.ipynb", "x = [1, 2, 3]")[0] for u in ("alice", "bob")}
            hub_tokens = {u: hub.user_token(u) for u in kids}
            pipe = {u: f"{hub.public}user/{u}/mcp-notebook/kernels/{kids[u]}/mcp" for u in kids}
            names = [("alice", "bob")[i % 2] for i in range(max(args.users))]
            grants = [sign_in(hub, name)[1]["access_token"] for name in names]
            for n in args.users:
                direct = paced([(pipe[names[i]], f"token {hub_tokens[names[i]]}") for i in range(n)], args.seconds)
                cpu0 = cpu_of()
                service = paced([(hub.mcp_url, f"Bearer {grants[i]}") for i in range(n)], args.seconds)
                cpu = (cpu_of() - cpu0) / max(1, service["n"] + n) * 1e3
                out["runs"][str(n)] = {"direct": direct, "service": service, "service_cpu_ms_per_read": cpu}
        finally:
            hub.stop()
            if two:
                two.stop()
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / f"jupyterhub_paced_{args.label}_{args.replicas}.json").write_text(json.dumps(out, indent=2))
    print(
        f"| users ({args.label}, {args.replicas} replica(s)) | user's server p50 / p99 | service p50 / p99 | added p50 / p99 | CPU/read |"
    )
    print("|---|---|---|---|---|")
    for n, run in out["runs"].items():
        d, s = run["direct"], run["service"]
        print(
            f"| {n} | {d['p50_ms']:.1f} / {d['p99_ms']:.1f} ms | {s['p50_ms']:.1f} / {s['p99_ms']:.1f} ms | "
            f"{s['p50_ms'] - d['p50_ms']:+.1f} / {s['p99_ms'] - d['p99_ms']:+.1f} ms | "
            f"{run['service_cpu_ms_per_read']:.2f} ms |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
