"""What a burst of 100 unauthenticated requests naming a tarpit costs the JupyterHub service, by
kind: its CPU (the process and its event loop's thread) per request, how late its event loop ran
(a probe: a metadata GET sent straight to the service's port every 5 ms, its time over the quiet
median), and a signed-in user's reads through the proxy meanwhile.

    .venv/bin/python bench/jupyterhub_burst.py [--rounds 3] [--kinds authorize token register mixed]

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
from test_jupyterhub_service_bounds import Attacker, Reader, Tarpit  # noqa: E402

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


def cpu_of_burst(service: Service, attacker: Attacker | None) -> tuple[float, float, float]:
    """CPU seconds of the process and of its event loop while ``attacker``'s burst is answered
    (nothing else asks the service meanwhile), and the seconds that took."""
    cpu0, main0 = service.cpu()
    start = time.monotonic()
    if attacker is not None:
        attacker.attack()
    time.sleep(0.2 if attacker is not None else 3.0)
    cpu1, main1 = service.cpu()
    return cpu1 - cpu0, main1 - main0, time.monotonic() - start


def watched_burst(service: Service, reader: Reader, attacker: Attacker | None) -> dict[str, Any]:
    """How late the event loop ran (the probe over its quiet median) and the user's reads while
    ``attacker``'s burst is answered."""
    quiet_done = threading.Event()
    threading.Timer(1.0, quiet_done.set).start()
    quiet = probe(service.probe_url, quiet_done)
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
    return {
        "probe_quiet_p50_ms": base,
        "loop_late_max_ms": max(lags) - base,
        "loop_late_over_10ms": sum(1 for x in lags if x - base > 10),
        "reads_max_ms": max((1000 * s for _, s in reads), default=0.0),
        "reads_failed": sum(1 for ok, _ in reads if not ok),
        "answered_s": spent,
        "statuses": sorted({f"{k} {s}" for k, s in answers}),
    }


def one_round(
    jupyterhub: LocalJupyterHub, service: Service, reader: Reader, tarpit: Tarpit, kind: str, tag: str, spy: str = ""
) -> dict[str, Any]:
    """One burst of ``kind`` alone (its CPU), then another while the loop is probed and the user
    reads ("none": the control, no attacker); with ``spy``, py-spy samples the service's GIL
    holder during the second (its raw stacks written there)."""

    def attacker(suffix: str) -> Attacker | None:
        return Attacker(burst(jupyterhub, tarpit.port, kind, tag + suffix)) if kind != "none" else None

    cpu, loop_cpu, took = cpu_of_burst(service, attacker("c"))
    watched = attacker("w")
    sampler = None
    if spy:
        py_spy = str(Path(sys.executable).with_name("py-spy"))
        cmd = [py_spy, "record", "--pid", str(service.proc.pid), "--rate", "500", "--threads", "--nonblocking"]
        cmd += ["--duration", "4", "--format", "raw", "-o", spy, "--gil"]
        sampler = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    row = {"kind": kind, "cpu_s": cpu, "loop_cpu_s": loop_cpu, "cpu_window_s": took} | watched_burst(
        service, reader, watched
    )
    if sampler is not None:
        sampler.wait(60)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", nargs="+", default=["none", "authorize", "token", "register", "mixed"])
    parser.add_argument("--profile", default="", help="a folder: py-spy's raw stacks (the GIL's holder) there")
    parser.add_argument("--out", default=str(HERE / "results" / "jupyterhub_burst.json"))
    args = parser.parse_args()
    svc_args = ("--JupyterHubService.cimd_allow_hosts=localhost", "--JupyterHubService.cimd_timeout_seconds=3")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        jupyterhub = LocalJupyterHub(Path(tmp), svc_args)
        tarpit = Tarpit()
        try:
            jupyterhub.kernel("alice", "alice_nb.ipynb", "mine = 'alice-41'")
            reader = Reader(jupyterhub, sign_in(jupyterhub, "alice")[1]["access_token"])
            for _ in range(20):
                reader.once()
            service = Service(jupyterhub)
            for r in range(args.rounds):
                idle = (0.0, 0.0)  # CPU a second of the service left alone (its chores)
                for kind in args.kinds:
                    spy = f"{args.profile}/{kind}-{r}.raw" if args.profile and kind != "none" else ""
                    row = one_round(jupyterhub, service, reader, tarpit, kind, f"r{r}{kind}", spy)
                    if kind == "none":
                        idle = (row["cpu_s"] / row["cpu_window_s"], row["loop_cpu_s"] / row["cpu_window_s"])
                        row["cpu_ms_per_request"] = row["loop_cpu_ms_per_request"] = 0.0
                    else:
                        row["cpu_ms_per_request"] = 1000 * (row["cpu_s"] - idle[0] * row["cpu_window_s"]) / HOSTILE
                        row["loop_cpu_ms_per_request"] = (
                            1000 * (row["loop_cpu_s"] - idle[1] * row["cpu_window_s"]) / HOSTILE
                        )
                    results.append(row)
                    print(
                        f"{kind:9s} round {r}: {row['cpu_ms_per_request']:.2f} ms CPU a request "
                        f"({row['loop_cpu_ms_per_request']:.2f} on the loop), loop late max "
                        f"{row['loop_late_max_ms']:.0f} ms ({row['loop_late_over_10ms']} probes > 10 ms), "
                        f"reads max {row['reads_max_ms']:.0f} ms, answered in {row['answered_s']:.1f} s "
                        f"{row['statuses']}",
                        flush=True,
                    )
                    time.sleep(1.0)
        finally:
            tarpit.stop()
            jupyterhub.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
