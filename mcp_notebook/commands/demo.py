"""``mcp-notebook demo``: a real kernel with the extension and sample data, serving until Ctrl-C."""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

from ..hubclient.address import HubAddress
from ..hubclient.blocking import exchange

SAMPLE_CELLS = [
    "%load_ext mcp_notebook",
    # Sample data: uses pandas/numpy when installed, plain Python otherwise.
    """\
import random
random.seed(7)
cities = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka"]
readings = [{"city": random.choice(cities), "day": d, "temp_c": round(random.uniform(-5, 35), 1)} for d in range(200)]
try:
    import pandas as pd
    weather = pd.DataFrame(readings)
except ImportError:
    weather = readings
summary = {c: sum(r["temp_c"] for r in readings if r["city"] == c) for c in cities}
notes = "Sample session started by `mcp-notebook demo`."
""",
    """\
import mcp_notebook

@mcp_notebook.resource("demo://greeting/{who}", description="A greeting for anyone")
def greeting(who: str) -> str:
    return f"Hello, {who}, from the kernel!"
""",
    "print(f'{len(readings)} readings from {len(cities)} cities')",
]


def _rpc(url: str, token: str | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One stateless (2026-07-28) request through the hub client."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    hub = HubAddress(url, token)
    status, _, raw = exchange(hub.endpoint, "POST", hub.headers(method, params), json.dumps(body).encode(), 10.0)
    if status != 200:
        raise OSError(f"the hub answered {status}")
    return json.loads(raw)


def run_demo(seconds: float | None = None) -> int:
    """Start the kernel, load sample data, show a first exchange, serve until Ctrl-C or ``seconds``."""
    from jupyter_client.manager import KernelManager

    from .kernel_launch import start_quiet_kernel

    km = KernelManager(kernel_name="python3")
    km.kernel_spec.argv[0] = sys.executable
    previous = _stop_on_sigterm()
    start_quiet_kernel(km)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        for code in SAMPLE_CELLS:
            reply = kc.execute_interactive(code, timeout=60, output_hook=lambda msg: None)
            if reply["content"]["status"] != "ok":
                print(f"demo cell failed: {reply['content'].get('evalue')}", file=sys.stderr)
                return 1
        info = _hub_info(getattr(getattr(km.provisioner, "process", None), "pid", None))
        url, token = info["url"], info.get("token")
        listed = _rpc(url, token, "resources/list", {})["result"]["resources"]
        read = _rpc(url, token, "resources/read", {"uri": "nb://vars"})["result"]
        index = json.loads(read["contents"][0]["text"])
        print("mcp-notebook demo: a kernel with sample data is serving MCP resources.\n")
        print(f"  endpoint   {url}")
        print(f"  token      in {info.get('runtime_file')} (mode 0600; never printed)")
        shown = listed[:8]
        count = f"showing {len(shown)} of {len(listed)}, a client's list has all" if len(listed) > len(shown) else ""
        print(f"  resources  {count or len(listed)}: " + ", ".join(r["uri"] for r in shown))
        print("  variables  " + ", ".join(f"{v['name']} ({v['type']})" for v in index["variables"]))
        print(_connect_help())
        print("Press Ctrl-C to stop." if seconds is None else f"Serving for {seconds:g} s.")
        sys.stdout.flush()
        deadline = None if seconds is None else time.monotonic() + seconds
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2 if deadline is None else min(0.2, max(0.0, deadline - time.monotonic())))
            if not km.is_alive():
                print("the demo kernel died", file=sys.stderr)
                return 1
    except KeyboardInterrupt:
        print("\nstopping")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)  # the kernel removes its runtime file on the way out
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def _connect_help() -> str:
    """How to connect an assistant: the stdio bridge by absolute path, the config command, or HTTP."""
    import shlex

    from .clients_config import _env, bridge_command

    command, args = bridge_command([])
    bridge = shlex.join([command, *args])
    cli = shlex.join([command, *args[: args.index("bridge")]])
    env = _env()
    prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())
    claude_env = "".join(f"-e {k}={shlex.quote(v)} " for k, v in env.items())
    return (
        "\nConnect an assistant (in another terminal, while this runs):\n"
        f"  stdio bridge   {prefix}{bridge}\n"
        f"  Claude Code    claude mcp add {claude_env}notebook -- {bridge}\n"
        f"  config files   {prefix}{cli} config claude-code|claude-desktop|vscode|cursor --write\n"
        f"  HTTP           {prefix}{cli} config <host> --http --write  (puts the token in that file only)\n"
        f"  running hubs   {prefix}{cli} list"
    )


def _stop_on_sigterm() -> Any:
    """SIGTERM stops the demo like Ctrl-C does: the kernel is shut down and leaves no runtime file."""

    def on_sigterm(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread
        return None


def _hub_info(pid: int | None, timeout: float = 30.0) -> dict[str, Any]:
    """The demo kernel's runtime file (found by its pid): the token is read from there, never printed in a cell."""
    from ..runtime import discover

    deadline = time.monotonic() + timeout
    while True:
        for record in discover(clean=False):
            if record.pid == pid:
                return {**record.info, "runtime_file": str(record.path)}
        if time.monotonic() > deadline:
            raise RuntimeError(f"no runtime file of the demo kernel (pid {pid}) appeared")
        time.sleep(0.1)
