"""The control-channel carrier next to the loopback one, through the same kind of server, on the
same kernel behind a real Jupyter Kernel Gateway; and what MCP traffic does to interrupts.

    .venv/bin/python bench/gateway.py [--reads 500] [--cells 30] [--interrupts 8]

Two ``jupyter server --gateway-url`` processes stand in front of one gateway: one shares the
gateway's runtime dir (so it finds the hub's runtime file and uses loopback TCP, as for a kernel
on its own host), the other does not (so it uses the kernel's control channel through the
gateway's websocket). Reads: 2026-07-28 ``resources/read`` of a small variable over one keep-alive
httpx connection, p50/p90/p99. Notifications: cell end (stamped in the kernel) to
``notifications/resources/updated`` at the official SDK client, both eras (bench/notify.py).
Interrupts: a pure-Python busy cell interrupted through the server's REST API, time to its
``execute_reply``, quiet and with two clients reading as fast as they can plus a GET stream and a
listen stream open over the control channel. Writes bench/results/gateway.json.
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

import anyio
import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from jserver import JupyterServer  # noqa: E402
from kernel_gateway import KernelGateway, KernelSocket  # noqa: E402
from notify import notification_latency  # noqa: E402
from remote import read_latency  # noqa: E402
from sdk import connect  # noqa: E402


class SocketKernel:
    """What bench/notify.py needs from a kernel, through the server's kernel websocket."""

    def __init__(self, sock: KernelSocket):
        self.sock = sock

    def run(self, code: str) -> str:
        return self.sock.execute(code)

    def json(self, code: str) -> Any:
        for line in reversed(self.run(code).splitlines()):
            if line.startswith("BENCHJSON "):
                return json.loads(line[len("BENCHJSON ") :])
        raise RuntimeError("no BENCHJSON line")


def busy_reads(server: JupyterServer, sock: KernelSocket, kid: str, reads: int) -> dict[str, Any]:
    """Reads while a pure-Python cell runs (each hop between the kernel's threads waits for the GIL)."""
    msg_id = sock.execute("import time as _t\n_e = _t.time() + 60\nwhile _t.time() < _e: pass", wait=False)
    time.sleep(0.5)
    try:
        return read_latency(server.mcp_url(kid), f"token {server.token}", reads)
    finally:
        assert server.http.post(f"api/kernels/{kid}/interrupt").status_code == 204
        try:
            sock.wait_reply(msg_id, 30)
        except AssertionError:  # KeyboardInterrupt
            pass


def interrupt_latency(server: JupyterServer, sock: KernelSocket, kid: str, n: int) -> dict[str, float]:
    """Interrupt a busy cell through the server n times: seconds from the REST call to the reply."""
    took = []
    for _ in range(n):
        msg_id = sock.execute("while True: pass", wait=False)
        time.sleep(0.5)
        t0 = time.perf_counter()
        assert server.http.post(f"api/kernels/{kid}/interrupt").status_code == 204
        try:
            sock.wait_reply(msg_id, 30)
        except AssertionError:  # KeyboardInterrupt: what we want
            pass
        took.append((time.perf_counter() - t0) * 1e3)
    took.sort()
    return {"n": n, "p50_ms": took[len(took) // 2], "max_ms": took[-1]}


def busy_interrupts(server: JupyterServer, sock: KernelSocket, kid: str, n: int) -> dict[str, Any]:
    """Interrupts while two readers hammer the control channel and two streams are open on it."""
    url, auth = server.mcp_url(kid), f"token {server.token}"
    stop = threading.Event()
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            with httpx.Client(timeout=30) as http:
                headers = {"Authorization": auth, "Accept": "application/json, text/event-stream"}
                body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
                while not stop.is_set():
                    http.post(url, json=body, headers={**headers, "Content-Type": "application/json"})
                    reads[0] += 1

    result: dict[str, Any] = {}

    async def with_streams() -> None:
        info = {"url": url, "token": server.token}
        async with connect(info, "legacy") as (legacy, _), connect(info, "auto") as (modern, _):
            await legacy.subscribe_resource("nb://vars/x")
            async with modern.listen(resource_subscriptions=["nb://vars/x"]):
                await anyio.sleep(0.5)
                result.update(await anyio.to_thread.run_sync(interrupt_latency, server, sock, kid, n))

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    start, before = time.perf_counter(), reads[0]
    try:
        anyio.run(with_streams)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    result["mcp_requests_per_s_meanwhile"] = (reads[0] - before) / (time.perf_counter() - start)
    return result


def served(server: JupyterServer, reads: int, cells: int) -> dict[str, Any]:
    """A gateway kernel without the hub, served from what the gateway relays: how long until it is
    served, reads of an output and of a variable (ipykernel's debugger through the gateway), and
    notifications (cell end to the SDK client) through the per-kernel route."""
    t0 = time.perf_counter()
    kid = server.start_session("served.ipynb")
    sock = KernelSocket(server.url, server.token, kid)
    out: dict[str, Any] = {}
    try:
        while not any(
            r["kernel_id"] == kid and r["route"] == "server" for r in server.http.get("mcp-notebook/kernels").json()
        ):
            if time.perf_counter() - t0 > 60:
                raise TimeoutError("the gateway kernel was never served from the server's side")
            time.sleep(0.05)
        out["served_after_start_s"] = time.perf_counter() - t0
        sock.execute(f"import sys as _s; _s.path.insert(0, {str(HERE)!r}); import kside")
        sock.execute("kside.install_stamp_hook()")
        sock.execute("x = [1, 2, 3]\nprint('an output')")
        url, auth = server.mcp_url(kid), f"token {server.token}"
        out["read_output"] = read_latency(url, auth, reads, "nb://cells/3/outputs/0")
        out["read_variable"] = read_latency(url, auth, max(50, reads // 5), "nb://vars/x")
        out["notify"] = notification_latency(SocketKernel(sock), {"url": url, "token": server.token}, cells)
    finally:
        sock.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--cells", type=int, default=30)
    ap.add_argument("--interrupts", type=int, default=8)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mcpnb-gateway-bench-") as tmp:
        base = Path(tmp)
        gw = KernelGateway(base / "gateway")
        servers: list[JupyterServer] = []
        try:
            control = JupyterServer(base / "control", token="bench-token", extra_args=gw.server_args)
            servers.append(control)
            tcp = JupyterServer(
                base / "tcp", token="bench-token", extra_args=gw.server_args, runtime_dir=gw.dirs["runtime"]
            )
            servers.append(tcp)
            kid = control.start_session("bench.ipynb")
            sock = KernelSocket(control.url, control.token, kid)
            sock.execute(f"import sys as _s; _s.path.insert(0, {str(HERE)!r}); import kside")
            sock.execute("kside.install_stamp_hook()")  # before the hub's hook: stamps each cell's end
            sock.execute("%load_ext mcp_notebook\nx = [1, 2, 3]")
            adopt = {"path": "bench.ipynb", "type": "notebook", "kernel": {"id": kid}}
            assert tcp.http.post("api/sessions", json=adopt).status_code == 201  # the same kernel, adopted
            carriers = {c["carrier"] for c in tcp.http.get("mcp-notebook/kernels").json()}
            assert carriers == {"tcp"}, carriers
            kernel = SocketKernel(sock)
            for name, server in (("tcp", tcp), ("control", control)):
                out[f"read_{name}"] = read_latency(server.mcp_url(kid), f"token {server.token}", args.reads)
                info = {"url": server.mcp_url(kid), "token": server.token}
                out[f"notify_{name}"] = notification_latency(kernel, info, args.cells)
                out[f"busy_read_{name}"] = busy_reads(server, sock, kid, max(50, args.reads // 5))
            out["interrupt_quiet"] = interrupt_latency(control, sock, kid, args.interrupts)
            out["interrupt_busy_mcp"] = busy_interrupts(control, sock, kid, args.interrupts)
            out["served"] = served(control, args.reads, args.cells)
            sock.close()
        finally:
            for server in servers:
                server.stop()
            gw.stop()
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "gateway.json").write_text(json.dumps(out, indent=2))
    report(out)
    return 0


def report(out: dict[str, Any]) -> None:
    print("| through the same jupyter server | loopback TCP | control channel (gateway websocket) |")
    print("|---|---|---|")
    for q in ("p50", "p90", "p99"):
        print(
            f"| 2026-07-28 read {q} | {out['read_tcp'][f'{q}_ms']:.2f} ms | {out['read_control'][f'{q}_ms']:.2f} ms |"
        )
    for q in ("p50", "p99"):
        a, b = out["busy_read_tcp"][f"{q}_ms"], out["busy_read_control"][f"{q}_ms"]
        print(f"| read during a pure-Python cell {q} | {a:.2f} ms | {b:.2f} ms |")
    for era in ("legacy", "2026-07-28"):
        a, b = out["notify_tcp"].get(era, {}), out["notify_control"].get(era, {})
        for q in ("median", "p99"):
            x, y = a.get(f"{q}_ms"), b.get(f"{q}_ms")
            shown = [f"{v:.2f} ms" if isinstance(v, float) else str(e.get("error")) for v, e in ((x, a), (y, b))]
            print(f"| notification {era} {q} | {shown[0]} | {shown[1]} |")
    report_served(out["served"])
    quiet, busy = out["interrupt_quiet"], out["interrupt_busy_mcp"]
    print(
        f"\ninterrupt of a busy cell, REST call to execute_reply: quiet p50 {quiet['p50_ms']:.1f} ms "
        f"(max {quiet['max_ms']:.1f}); with {busy['mcp_requests_per_s_meanwhile']:.0f} MCP requests/s and two "
        f"streams on the control channel p50 {busy['p50_ms']:.1f} ms (max {busy['max_ms']:.1f})"
    )


def report_served(got: dict[str, Any]) -> None:
    print(
        f"\na gateway kernel without the hub, served from the server's side {got['served_after_start_s']:.2f} s after start:"
    )
    for name in ("read_output", "read_variable"):
        print(f"| {name.replace('_', ' ')} | p50 {got[name]['p50_ms']:.2f} ms | p99 {got[name]['p99_ms']:.2f} ms |")
    for era, found in got["notify"].items():
        shown = {q: found.get(f"{q}_ms") for q in ("median", "p99")}
        print(f"| notification {era} | {shown} |")


if __name__ == "__main__":
    sys.exit(main())
