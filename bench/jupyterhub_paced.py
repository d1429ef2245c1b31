"""The JupyterHub service under a paced load: N signed-in users each reading once a second (an
open loop: a read is sent on time whether or not the last one came back), through the user's own
server and through the service, p50/p99 and what the service adds, the service's CPU per read, and
while the users read, notification latency (cell end, stamped in the kernel, to
``notifications/resources/updated`` at an official SDK client; both eras, bench/notify.py) through
the user's own server and through the service.

    .venv/bin/python bench/jupyterhub_paced.py [--users 1 20 50] [--seconds 10] [--cells 8] [--replicas 1 2]

One command, about five minutes with the defaults: the service as one replica (JupyterHub runs it,
sqlite), then as two replicas on a throwaway PostgreSQL behind haproxy, round-robin without
stickiness (tests/replicas.py, as tests/test_jupyterhub_service_replicas.py runs it; CPU is both
replicas'). Each user is a grant of its own (its own front in the service); the upstream servers
are the two test users'. Writes bench/results/jupyterhub_paced_{label}.json and prints one
markdown table for docs/start/jupyterhub.md. The table is the steady reads: cold reads (a grant's
first at each replica, and every read of a run's first ``WARM_SECONDS``, while new grants' fronts
open) are printed apart under it, p50 and max.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from jhub import LocalJupyterHub  # noqa: E402
from jserver import free_port  # noqa: E402
from jupyterhub_service import _body_and_headers, service_cpu  # noqa: E402
from notify import notification_pairs  # noqa: E402
from remote import ServerKernel  # noqa: E402
from replicas import Haproxy, Postgres, Replica, service_env  # noqa: E402
from service_oauth import sign_in  # noqa: E402

WARM_SECONDS = 2.0  # the first reads of a run, while new grants' fronts open (cold reads, reported apart)


def paced(targets: list[tuple[str, str]], seconds: float, until: threading.Event | None = None) -> dict[str, Any]:
    """Every (url, auth) read once a second for ``seconds`` (random phase; and on until ``until`` is
    set: the notifications timed meanwhile all have the load), each on its own connection.
    Cold reads are reported apart (``cold_*``): each user's first (it opens the connection) and,
    through the service, its first at each replica (named by the test-only ``X-Replica`` header of
    tests/replicas.py's haproxy): it opens the grant's front there (the token looked up in the store,
    JupyterHub asked about the user, the kernels' templates listed, listens opened), once per grant
    and replica; and every read sent in the first ``WARM_SECONDS``, while the new grants' fronts open."""
    samples: list[float] = []
    firsts: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = time.monotonic() + 1.0

    def user(url: str, auth: str) -> None:
        content, headers = _body_and_headers(auth)
        due = start + random.random()
        mine: list[float] = []
        cold: list[float] = []
        seen: set[str] = set()  # the replicas that answered this user
        with httpx.Client(headers=headers, timeout=60) as http:
            while due < start + seconds or (until is not None and not until.is_set() and due < start + 120):
                time.sleep(max(0.0, due - time.monotonic()))
                t0 = time.perf_counter()
                try:
                    r = http.post(url, content=content)
                except httpx.HTTPError as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    due += 1.0
                    continue
                ms = (time.perf_counter() - t0) * 1e3
                replica = r.headers.get("x-replica", "")
                warm = seen and replica in seen and due >= start + WARM_SECONDS
                (mine if warm else cold).append(ms)
                seen.add(replica)
                if r.status_code != 200 or "contents" not in r.text:
                    errors.append(f"{r.status_code} {r.text[:200]}")
                due += 1.0
        with lock:
            samples.extend(mine)
            firsts.extend(cold)

    threads = [threading.Thread(target=user, args=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    samples.sort()
    pick = lambda q: samples[min(len(samples) - 1, int(len(samples) * q))]  # noqa: E731
    first = errors[0] if errors else None
    firsts.sort()
    return {
        "n": len(samples),
        "errors": len(errors),
        "first_error": first,
        "p50_ms": pick(0.5),
        "p99_ms": pick(0.99),
        "cold_n": len(firsts),
        "cold_p50_ms": firsts[len(firsts) // 2] if firsts else None,
        "cold_max_ms": firsts[-1] if firsts else None,
    }


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


def proxy_cpu(hub: LocalJupyterHub) -> float:
    """CPU seconds configurable-http-proxy has used (every read and stream crosses it)."""
    import psutil

    for proc in psutil.Process(hub.proc.pid).children(recursive=True):
        if "configurable-http-proxy" in " ".join(proc.cmdline()):
            t = proc.cpu_times()
            return t.user + t.system
    return float("nan")


def measured(
    targets: list[tuple[str, str]], seconds: float, kernel: Any, infos: dict[str, dict[str, Any]], cells: int
) -> tuple:
    """The paced reads of ``targets`` and, while they run, notification latency (both eras) of one
    SDK client per path of ``infos`` (the user's own server, the service), all listening to the
    same ``cells`` cells each: what the service adds is paired cell by cell. This process's own garbage collector is off
    while it times: a full collection of its heap (fifty readers, their samples, the SDK client)
    paused every reader for ~300 ms at the same point of each run, which the table then showed as
    the service's (or the users' servers') tail."""
    box: dict[str, Any] = {}
    gc.collect()
    gc.disable()
    done = threading.Event()  # the notifications are timed: the reads may stop after ``seconds``
    try:
        reads = threading.Thread(target=lambda: box.update(reads=paced(targets, seconds, done)))
        reads.start()
        time.sleep(1.5)  # the readers are on their pace
        kernel.json("kside.listen_events()")  # counted from here
        began = time.monotonic()
        notes = notification_pairs(kernel, infos, cells, "direct")
        notes["seconds"] = time.monotonic() - began
        notes["upstream"] = kernel.json("kside.listen_events()")
        done.set()
        reads.join(seconds + 180)
    finally:
        done.set()
        gc.enable()
    return box["reads"], notes


def deployment(n_replicas: int, users: list[int], seconds: float, cells: int, tmp: Path) -> dict[str, Any]:
    """One JupyterHub with the service as ``n_replicas`` replica(s); every user count measured."""
    runs: dict[str, Any] = {}
    two = TwoReplicas(tmp) if n_replicas == 2 else None
    extra = two.config() if two else ""
    trace = os.environ.get("MCP_NOTEBOOK_HOP_TRACE")
    if trace:  # JupyterHub gives its servers and its managed service only the environment it is told
        extra += f"\nc.Spawner.environment['MCP_NOTEBOOK_HOP_TRACE'] = {trace!r}\n"
        if not two:
            extra += f"service['environment']['MCP_NOTEBOOK_HOP_TRACE'] = {trace!r}\n"
    svc = ("--JupyterHubService.registration_burst=1000",)
    hub = LocalJupyterHub(tmp / "hub", svc, extra, two.start if two else None)
    cpu_of = two.cpu if two else (lambda: service_cpu(hub))
    stamp = f"import sys as _s; _s.path.insert(0, {str(HERE)!r}); import kside; kside.install_stamp_hook()"
    try:
        kids, kernels = {}, {}
        for u in ("alice", "bob"):
            kids[u], kc = hub.kernel(u, f"{u}.ipynb", "x = [1, 2, 3]", before=stamp)
            kernels[u] = ServerKernel(kc)
        hub_tokens = {u: hub.user_token(u) for u in kids}
        pipe = {u: f"{hub.public}user/{u}/mcp-notebook/kernels/{kids[u]}/mcp" for u in kids}
        names = [("alice", "bob")[i % 2] for i in range(max(users))]
        with ThreadPoolExecutor(8) as pool:  # sign-ins in parallel: the bench stays within minutes
            grants = list(pool.map(lambda name: sign_in(hub, name)[1]["access_token"], names))
        direct_info = {"url": pipe["alice"], "token": hub_tokens["alice"]}
        service_info = {"url": hub.mcp_url, "token": grants[0]}
        for n in users:
            targets = [(pipe[names[i]], f"token {hub_tokens[names[i]]}") for i in range(n)]
            paths = {"direct": direct_info, "service": service_info}
            direct, notify_direct = measured(targets, seconds, kernels["alice"], paths, cells)
            cpu0, proxy0 = cpu_of(), proxy_cpu(hub)
            targets = [(hub.mcp_url, f"Bearer {grants[i]}") for i in range(n)]
            # the kernel writes its listens in the order they opened: the phase's own path opens first
            paths = {"service": service_info, "direct": direct_info}
            service, notify_service = measured(targets, seconds, kernels["alice"], paths, cells)
            cpu = (cpu_of() - cpu0) / max(1, service["n"] + service["cold_n"]) * 1e3
            proxy = (proxy_cpu(hub) - proxy0) / max(1, service["n"] + service["cold_n"]) * 1e3
            runs[str(n)] = {
                "direct": direct,
                "service": service,
                "service_cpu_ms_per_read": cpu,
                "proxy_cpu_ms_per_read": proxy,
                "notify_direct": notify_direct,
                "notify_service": notify_service,
            }
    finally:
        hub.stop()
        if two:
            two.stop()
    return runs


def _pair(a: dict[str, Any], p50: str, p99: str) -> str:
    x, y = a.get(p50), a.get(p99)
    return f"{x:.1f} / {y:.1f}" if isinstance(x, (int, float)) and isinstance(y, (int, float)) else "error"


def _per_change(notes: dict[str, Any]) -> str:
    """The kernel's listen events per cell while notifications were timed (bench/kside.py)."""
    up = notes.get("upstream") or {}
    if not up.get("cells"):
        return "?"
    return f"{up['events'] / up['cells']:.1f} ({up['most_listens']})"


def _added(era: dict[str, Any]) -> str:
    added = (era.get("added") or {}).get("service") or {}
    if added.get("median_ms") is None:
        return "error"
    return f"{added['median_ms']:+.1f} [{added['p10_ms']:+.1f}, {added['p90_ms']:+.1f}] (n={added['n']})"


def print_table(out: dict[str, Any]) -> None:
    """One markdown table, ready for docs/start/jupyterhub.md (all figures in ms, p50 / p99)."""
    print(
        "| replicas | users | reads: user's server | reads: service | added | "
        "notified (handshake): server → service | notified (2026-07-28): server → service | service CPU/read |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for replicas, runs in out["deployments"].items():
        for n, run in runs.items():
            d, s = run["direct"], run["service"]
            added = f"{s['p50_ms'] - d['p50_ms']:+.1f} / {s['p99_ms'] - d['p99_ms']:+.1f}"
            notes = [
                f"{_pair(run['notify_direct'][era].get('direct', {}), 'median_ms', 'p99_ms')} → "
                f"{_pair(run['notify_service'][era].get('service', {}), 'median_ms', 'p99_ms')}"
                for era in ("legacy", "2026-07-28")
            ]
            print(
                f"| {replicas} | {n} | {_pair(d, 'p50_ms', 'p99_ms')} | {_pair(s, 'p50_ms', 'p99_ms')} | {added} | "
                f"{notes[0]} | {notes[1]} | {run['service_cpu_ms_per_read']:.2f} |"
            )
    errors = sum(
        run[k]["errors"] for runs in out["deployments"].values() for run in runs.values() for k in ("direct", "service")
    )
    firsts = [
        r[k]["first_error"] for rs in out["deployments"].values() for r in rs.values() for k in ("direct", "service")
    ]
    first = next((f for f in firsts if f), None)
    colds = [
        f"{replicas} replica(s), {n} users: {_pair(run['service'], 'cold_p50_ms', 'cold_max_ms')}"
        for replicas, runs in out["deployments"].items()
        for n, run in runs.items()
    ]
    print(
        f"\ncold reads through the service (a grant's first at each replica, and the first {WARM_SECONDS:.0f} s of reads; not in the table), p50 / max: {'; '.join(colds)}"
    )
    fanout = [
        f"{replicas} replica(s), {n} users: {_per_change(run['notify_direct'])} → {_per_change(run['notify_service'])}"
        for replicas, runs in out["deployments"].items()
        for n, run in runs.items()
    ]
    proxies = [
        f"{replicas} replica(s), {n} users: {run.get('proxy_cpu_ms_per_read', float('nan')):.2f}"
        for replicas, runs in out["deployments"].items()
        for n, run in runs.items()
    ]
    print(f"\nconfigurable-http-proxy CPU per read through the service (ms): {'; '.join(proxies)}")
    print(
        "\nnotifications: what the service adds, paired cell by cell (both clients listen to every cell, each in a process of its own), median [p10, p90] ms, while the users read through their own servers (the direct client opened first) | through the service (the service's client opened first):"
    )
    for replicas, runs in out["deployments"].items():
        for n, run in runs.items():
            eras = [
                f"{era}: {_added(run['notify_direct'][era])} | {_added(run['notify_service'][era])}"
                for era in ("legacy", "2026-07-28")
            ]
            print(f"- {replicas} replica(s), {n} users: {'; '.join(eras)}")
    print(f"\nlisten events per cell at the kernel, user's server → service (most listens): {'; '.join(fanout)}")
    print(
        f"\n{errors} read(s) failed{f' (the first: {first[:200]})' if first else ''}; each read p50/p99 over {out['seconds'] - WARM_SECONDS:.0f} s per user (after {WARM_SECONDS:.0f} s of warm-up), notifications over {out['cells']} cells per era"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, nargs="+", default=[1, 20, 50])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--cells", type=int, default=8, help="cells per era for the notification latency")
    ap.add_argument("--label", default="after")
    ap.add_argument("--replicas", type=int, nargs="+", choices=(1, 2), default=[1, 2])
    ap.add_argument(
        "--trace", help="a directory: every process stamps a notification's hops there (bench/notify_hops.py)"
    )
    args = ap.parse_args()
    if args.trace:  # read once at import by every process started from here (mcp_notebook/hop_trace.py)
        Path(args.trace).mkdir(parents=True, exist_ok=True)
        os.environ["MCP_NOTEBOOK_HOP_TRACE"] = str(Path(args.trace).resolve())
    out: dict[str, Any] = {"label": args.label, "seconds": args.seconds, "cells": args.cells, "deployments": {}}
    for n_replicas in args.replicas:
        with tempfile.TemporaryDirectory(prefix="mcpnb-hub-paced-") as tmp:
            out["deployments"][str(n_replicas)] = deployment(
                n_replicas, args.users, args.seconds, args.cells, Path(tmp)
            )
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / f"jupyterhub_paced_{args.label}.json").write_text(json.dumps(out, indent=2))
    print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
