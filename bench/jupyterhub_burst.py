"""What a burst of 100 unauthenticated requests naming a tarpit costs the JupyterHub service, by
kind: its CPU (the process and its event loop's thread) per request, how late its event loop ran
(a probe: a metadata GET sent straight to the service's port every 5 ms, its time over the quiet
median), and a signed-in user's reads through the proxy meanwhile; the CPU each process spent on the
burst (the proxy, the service, alice's server and kernel, the attacker). The kind ``control`` is the
mixed burst (same client, same bodies) sent to a trivial responder off the read path (the test's):
what the attacker's own work on the machine's cores costs the reads.

    .venv/bin/python bench/jupyterhub_burst.py [--rounds 3] [--kinds none control authorize token register mixed]

A real JupyterHub (tests/jhub.py: configurable-http-proxy, alice's server and kernel, the service
with ``cimd_allow_hosts=localhost``, a 3 s fetch deadline), a tarpit on 127.0.0.1 (accepts, never
answers), the attacker a process of its own (tests/test_jupyterhub_service_bounds.py's), its
requests read before the clock starts. Each round names fresh metadata URLs (a remembered failure
would make later rounds cheaper than the first). Prints one line per kind and round and writes
bench/results/jupyterhub_burst.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from jhub import LocalJupyterHub  # noqa: E402
from service_oauth import NAVIGATE, authorize_url, pkce, sign_in  # noqa: E402
from test_jupyterhub_service_bounds import Attacker, Reader, Responder, Tarpit  # noqa: E402

HOSTILE = 100


def spec(jupyterhub: LocalJupyterHub, port: int, kind: str, tag: str, i: int) -> dict[str, Any]:
    """One hostile request of ``kind`` naming the tarpit (the shapes of the test's)."""
    client_id = f"https://localhost:{port}/{tag}-{i % 34}"
    if kind == "authorize":
        url = authorize_url(jupyterhub, client_id, pkce()[1])
        return {"kind": kind, "method": "GET", "url": url, "headers": NAVIGATE}
    if kind == "token":
        form = {"grant_type": "authorization_code", "code": "x" * 43, "client_id": client_id, "code_verifier": "y" * 50}
        return {"kind": kind, "method": "POST", "url": jupyterhub.service_url + "oauth/token", "data": form}
    body = {"client_name": "n" * 100_000, "redirect_uris": [f"https://localhost:{port}/cb{k}" for k in range(2000)]}
    return {
        "kind": kind,
        "method": "POST",
        "url": jupyterhub.service_url + "oauth/register",
        "json": body,
        "headers": {"X-Forwarded-For": f"203.0.113.{i % 250}"},
    }


def burst(jupyterhub: LocalJupyterHub, port: int, kind: str, tag: str) -> list[dict[str, Any]]:
    kinds = ("authorize", "token", "register")
    return [spec(jupyterhub, port, kind if kind in kinds else kinds[i % 3], tag, i) for i in range(HOSTILE)]


def cpu_seconds(proc: psutil.Process) -> float:
    try:
        t = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system


class Others:
    """The other processes on the reads' path (the proxy, alice's server, her kernel): CPU seconds."""

    def __init__(self, jupyterhub: LocalJupyterHub):
        procs = psutil.Process(jupyterhub.proc.pid).children(recursive=True)

        def find(word: str) -> psutil.Process:
            return next(p for p in procs if word in " ".join(p.cmdline()))

        self.procs = {
            "proxy": find("configurable-http-proxy"),
            "server": find("singleuser"),
            "kernel": find("ipykernel"),
        }

    def cpu(self) -> dict[str, float]:
        return {name: cpu_seconds(p) for name, p in self.procs.items()}


def attacked(attacker: Attacker) -> float:
    """The burst sent and answered; the attacker's CPU seconds for it (its start-up excluded)."""
    before = cpu_seconds(psutil.Process(attacker.proc.pid))
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    attacker.attack()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime - before


class Service:
    """The service's process, its event loop's thread, and its own port (not through the proxy)."""

    def __init__(self, jupyterhub: LocalJupyterHub):
        procs = psutil.Process(jupyterhub.proc.pid).children(recursive=True)
        self.proc = next(p for p in procs if "mcp_notebook.jupyterhub_service" in " ".join(p.cmdline()))
        port = next(c.laddr.port for c in self.proc.net_connections("tcp") if c.status == psutil.CONN_LISTEN)
        self.probe_url = f"http://127.0.0.1:{port}/services/mcp-notebook/.well-known/oauth-protected-resource"

    def cpu(self) -> tuple[float, float]:
        """CPU seconds of the process, and of its main thread (the event loop)."""
        t = self.proc.cpu_times()
        main = next(th for th in self.proc.threads() if th.id == self.proc.pid)
        return t.user + t.system, main.user_time + main.system_time


def probe(url: str, done: threading.Event) -> list[float]:
    """The metadata GET every 5 ms until ``done``: each one's time (ms)."""
    out: list[float] = []
    with httpx.Client(timeout=30) as http:
        for _ in range(20_000):  # bounded
            if done.is_set():
                break
            start = time.perf_counter()
            http.get(url)
            out.append(1000 * (time.perf_counter() - start))
            time.sleep(0.005)
    return out


def cpu_of_burst(service: Service, others: Others, attacker: Attacker | None) -> dict[str, float]:
    """CPU seconds of the service and of its event loop while ``attacker``'s burst is answered
    (nothing else asks the service meanwhile), of the other processes and the attacker, and the
    seconds that took."""
    cpu0, main0 = service.cpu()
    others0 = others.cpu()
    start = time.monotonic()
    spent = attacked(attacker) if attacker is not None else 0.0
    time.sleep(0.2 if attacker is not None else 3.0)
    cpu1, main1 = service.cpu()
    row = {"cpu_s": cpu1 - cpu0, "loop_cpu_s": main1 - main0, "cpu_window_s": time.monotonic() - start}
    return row | {f"{k}_cpu_s": v - others0[k] for k, v in others.cpu().items()} | {"attacker_cpu_s": spent}


def watched_burst(service: Service, reader: Reader, attacker: Attacker | None) -> dict[str, Any]:
    """How late the event loop ran (the probe over its quiet median) and the user's reads while
    ``attacker``'s burst is answered."""
    quiet_done = threading.Event()
    threading.Timer(1.0, quiet_done.set).start()
    quiet = probe(service.probe_url, quiet_done)
    quiet_reads = [reader.once() for _ in range(10)]
    done = threading.Event()
    lags: list[float] = []
    reads: list[tuple[bool, float]] = []
    threads = [
        threading.Thread(target=lambda: lags.extend(probe(service.probe_url, done))),
        threading.Thread(target=lambda: reads.extend(reader.until(done, 0))),
    ]
    for t in threads:
        t.start()
    time.sleep(0.3)
    start = time.monotonic()
    answers = attacker.attack() if attacker is not None else []
    spent = time.monotonic() - start
    time.sleep(0.3)
    done.set()
    for t in threads:
        t.join(60)
    base = statistics.median(quiet)
    lags = lags or [base]
    slowest = [*sorted((1000 * s for _, s in reads), reverse=True), 0.0, 0.0]
    return {
        "probe_quiet_p50_ms": base,
        "reads_2nd_ms": slowest[1],
        "reads_quiet_p50_ms": statistics.median(1000 * s for _, s in quiet_reads),
        "loop_late_max_ms": max(lags) - base,
        "loop_late_over_10ms": sum(1 for x in lags if x - base > 10),
        "reads_max_ms": max((1000 * s for _, s in reads), default=0.0),
        "reads_failed": sum(1 for ok, _ in reads if not ok),
        "answered_s": spent,
        "statuses": sorted({f"{k} {s}" for k, s in answers}),
    }


class Bench:
    """What every round needs: the hub, the service and the other processes, alice's reader, the
    tarpit and the control arm's responder."""

    def __init__(self, jupyterhub: LocalJupyterHub, reader: Reader, tarpit: Tarpit, responder: Responder):
        self.jupyterhub, self.reader, self.tarpit, self.responder = jupyterhub, reader, tarpit, responder
        self.service, self.others = Service(jupyterhub), Others(jupyterhub)

    def attacker(self, kind: str, tag: str) -> Attacker | None:
        """A burst of ``kind`` ready to go (None for "none"; "control": the mixed one, elsewhere)."""
        if kind == "none":
            return None
        specs = burst(self.jupyterhub, self.tarpit.port, "mixed" if kind == "control" else kind, tag)
        return Attacker([self.responder.elsewhere(s) for s in specs] if kind == "control" else specs)


def one_round(bench: Bench, kind: str, tag: str, spy: str = "") -> dict[str, Any]:
    """One burst of ``kind`` alone (its CPU), then another while the loop is probed and the user
    reads ("none": no attacker); with ``spy``, py-spy samples the service's GIL holder during the
    second (its raw stacks written there)."""
    service = bench.service
    row = {"kind": kind} | cpu_of_burst(service, bench.others, bench.attacker(kind, tag + "c"))
    watched = bench.attacker(kind, tag + "w")
    sampler = None
    if spy:
        py_spy = str(Path(sys.executable).with_name("py-spy"))
        cmd = [py_spy, "record", "--pid", str(service.proc.pid), "--rate", "500", "--threads", "--nonblocking"]
        cmd += ["--duration", "4", "--format", "raw", "-o", spy, "--gil"]
        sampler = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    row |= watched_burst(service, bench.reader, watched)
    if sampler is not None:
        sampler.wait(60)
    return row


PARTS = ("cpu", "loop_cpu", "proxy_cpu", "server_cpu", "kernel_cpu", "attacker_cpu")


def per_request(row: dict[str, Any], idle: dict[str, float]) -> dict[str, float]:
    """Each part's CPU ms a request of the burst, over its idle rate (``idle``: seconds a second)."""
    return {
        f"{part}_ms_per_request": 1000 * (row[f"{part}_s"] - idle.get(part, 0.0) * row["cpu_window_s"]) / HOSTILE
        for part in PARTS
    }


def report(kind: str, r: int, row: dict[str, Any]) -> str:
    ms = {part: row[f"{part}_ms_per_request"] for part in PARTS}
    return (
        f"{kind:9s} round {r}: CPU ms a request: service {ms['cpu']:.2f} (loop {ms['loop_cpu']:.2f}), "
        f"proxy {ms['proxy_cpu']:.2f}, alice's server {ms['server_cpu']:.2f}, kernel {ms['kernel_cpu']:.2f}, "
        f"attacker {ms['attacker_cpu']:.2f}; loop late max {row['loop_late_max_ms']:.0f} ms "
        f"({row['loop_late_over_10ms']} probes > 10 ms), reads max {row['reads_max_ms']:.0f} ms "
        f"(2nd {row['reads_2nd_ms']:.0f}, quiet p50 {row['reads_quiet_p50_ms']:.0f}), "
        f"answered in {row['answered_s']:.1f} s {row['statuses']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", nargs="+", default=["none", "control", "authorize", "token", "register", "mixed"])
    parser.add_argument("--profile", default="", help="a folder: py-spy's raw stacks (the GIL's holder) there")
    parser.add_argument("--out", default=str(HERE / "results" / "jupyterhub_burst.json"))
    args = parser.parse_args()
    svc_args = ("--JupyterHubService.cimd_allow_hosts=localhost", "--JupyterHubService.cimd_timeout_seconds=3")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        jupyterhub = LocalJupyterHub(Path(tmp), svc_args)
        tarpit, responder = Tarpit(), Responder()
        try:
            jupyterhub.kernel("alice", "alice_nb.ipynb", "mine = 'alice-41'")
            reader = Reader(jupyterhub, sign_in(jupyterhub, "alice")[1]["access_token"])
            for _ in range(20):
                reader.once()
            bench = Bench(jupyterhub, reader, tarpit, responder)
            for r in range(args.rounds):
                idle: dict[str, float] = {}  # CPU a second of each part left alone (the service's chores)
                for kind in args.kinds:
                    spy = f"{args.profile}/{kind}-{r}.raw" if args.profile and kind != "none" else ""
                    row = one_round(bench, kind, f"r{r}{kind}", spy)
                    if kind == "none":
                        idle = {part: row[f"{part}_s"] / row["cpu_window_s"] for part in PARTS}
                    row |= per_request(row, idle)
                    results.append(row)
                    print(report(kind, r, row), flush=True)
                    time.sleep(1.0)
        finally:
            responder.close()
            tarpit.stop()
            jupyterhub.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
