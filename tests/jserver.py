"""A real ``jupyter server`` with the mcp-notebook extension, and kernels started through its REST API.

Every wait is bounded. The server runs with a token on a free loopback port, its own root,
config and runtime dirs; kernels inherit the runtime dir, so their hubs' runtime files land
where the extension looks.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import live_logs
from jupyter_client import BlockingKernelClient

ROOT = Path(__file__).resolve().parents[1]


PORT_TRIES = 3  # starts of a server whose port another process took meanwhile


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    """``python -m jupyter server`` with the extension enabled, stopped by :meth:`stop`."""

    def __init__(
        self,
        base: Path,
        token: str = "test-jupyter-token",
        base_url: str = "/",
        by_config_file: bool = False,
        extra_args: tuple[str, ...] = (),
        runtime_dir: Path | None = None,
        extra_env: dict[str, str] | None = None,
        app: str = "server",
    ):
        """``by_config_file``: enable the extension by the package's config file in the server's config
        dir (what ``pip install`` puts into ``etc/jupyter/jupyter_server_config.d``), not by a flag.
        ``extra_args``: more command-line options (``--gateway-url=…``); ``runtime_dir``: another
        runtime dir than its own (one it shares with something else); ``extra_env``: more environment variables;
        ``app``: ``jupyter server`` or ``jupyter lab``."""
        self.token = token
        self.root = base / "root"
        self.runtime = runtime_dir or base / "runtime"
        for d in (self.root, self.runtime, base / "config", base / "data"):
            d.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(self.runtime),
            "JUPYTER_CONFIG_DIR": str(base / "config"),
            "JUPYTER_DATA_DIR": str(base / "data"),
        }
        env.pop("JUPYTER_TOKEN", None)
        env.update(extra_env or {})
        args = [
            sys.executable,
            "-m",
            "jupyter",
            app,
            "--ServerApp.port_retries=0",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            "--allow-root",
            f"--ServerApp.base_url={base_url}",
            "--no-browser",
            f"--ServerApp.root_dir={self.root}",
        ]
        if by_config_file:
            conf_d = base / "config" / "jupyter_server_config.d"
            conf_d.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / "jupyter-config" / "server-config" / "mcp_notebook.json", conf_d)
        else:
            args.append("--ServerApp.jpserver_extensions=mcp_notebook=True")
        args.extend(extra_args)
        self.clients: list[BlockingKernelClient] = []
        for attempt in range(1, PORT_TRIES + 1):  # a free port can be taken before the server binds it
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}{base_url}"
            self.log = open(base / "server.log", "wb")  # closed in stop()
            self.proc = subprocess.Popen(
                [*args, f"--port={self.port}"], env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=str(self.root)
            )
            live_logs.register(self, "jupyter server", Path(self.log.name), runtime=self.runtime)
            self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"token {token}"}, timeout=60)
            try:
                self._wait_ready()
                return
            except RuntimeError:
                if attempt == PORT_TRIES or "is not available" not in self.log_text():
                    raise
                self.http.close()
                self.log.close()

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter server exited: {self.log_text()[-2000:]}")
            try:
                if self.http.get("api/status").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"jupyter server did not start: {self.log_text()[-2000:]}")

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    # -- kernels through the REST API -------------------------------------------------------
    def start_session(self, path: str) -> str:
        """A notebook session (the kernel learns its path as JPY_SESSION_NAME); returns the kernel id."""
        r = self.http.post("api/sessions", json={"path": path, "type": "notebook", "kernel": {"name": "python3"}})
        assert r.status_code == 201, r.text
        return r.json()["kernel"]["id"]

    def start_kernel(self) -> str:
        r = self.http.post("api/kernels", json={"name": "python3"})
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def client(self, kernel_id: str) -> BlockingKernelClient:
        """A client on the kernel's connection file (in the server's runtime dir)."""
        kc = BlockingKernelClient(connection_file=str(self.runtime / f"kernel-{kernel_id}.json"))
        kc.load_connection_file()
        # no heartbeat: on a loaded machine a kernel still starting misses beats and the client
        # would call it dead; waiting for kernel_info is the bounded check that matters
        kc.start_channels(hb=False)
        kc.wait_for_ready(timeout=90)
        self.clients.append(kc)
        return kc

    def mcp_url(self, kernel_id: str) -> str:
        return f"{self.url}mcp-notebook/kernels/{kernel_id}/mcp"

    def stop(self) -> None:
        for kc in self.clients:
            kc.stop_channels()
        try:
            for k in self.http.get("api/kernels").json():
                self.http.delete(f"api/kernels/{k['id']}")
        except (httpx.HTTPError, ValueError):
            pass
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        live_logs.unregister(self)
        self.log.close()


def run(kc: BlockingKernelClient, code: str, timeout: float = 60) -> str:
    """Execute code, return its stdout; raise on an error."""
    stdout: list[str] = []
    error: list[str] = []

    def output(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            stdout.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            error.append("\n".join(msg["content"]["traceback"]))

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=output)
    if reply["content"]["status"] != "ok" or error:
        raise AssertionError(error[0] if error else reply["content"])
    return "".join(stdout)


def load_hub(kc: BlockingKernelClient) -> dict[str, Any]:
    run(kc, "%load_ext mcp_notebook")
    out = run(kc, "import json as _j, mcp_notebook as _m; print(_j.dumps(dict(_m.connection_info())))")
    return json.loads(out.strip().splitlines()[-1])
