"""A real Jupyter Kernel Gateway in its own process, with its own runtime, data and config dirs
(a stand-in for another host: it shares no files with the Jupyter server in front of it), and code
run in its kernels through the server's kernel websocket, as a browser would.

Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import live_logs
from jserver import PORT_TRIES, free_port


class KernelGateway:
    """``jupyter kernelgateway`` (jupyter-websocket mode) on a loopback port, with a token."""

    def __init__(self, base: Path, token: str = "test-gateway-token"):
        self.token = token
        self.dirs = {name: base / name for name in ("runtime", "data", "config", "root")}
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(self.dirs["runtime"]),
            "JUPYTER_DATA_DIR": str(self.dirs["data"]),
            "JUPYTER_CONFIG_DIR": str(self.dirs["config"]),
            # the gateway gives its kernels only the variables named here: its own dirs, so hubs
            # write their runtime files and logs on the "other host", not in the user's home
            "KG_ENV_PROCESS_WHITELIST": "JUPYTER_RUNTIME_DIR,JUPYTER_DATA_DIR,JUPYTER_CONFIG_DIR,PATH,HOME",
        }
        for name in ("JUPYTER_TOKEN", "MCP_NOTEBOOK_AUTOLOAD"):
            env.pop(name, None)
        args = [
            sys.executable,
            "-m",
            "jupyter",
            "kernelgateway",
            "--KernelGatewayApp.ip=127.0.0.1",
            "--KernelGatewayApp.port_retries=0",
            f"--KernelGatewayApp.auth_token={token}",
            "--JupyterWebsocketPersonality.list_kernels=True",  # jupyter server lists kernels through it
        ]
        for attempt in range(1, PORT_TRIES + 1):  # a free port can be taken before the gateway binds it
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.log = open(base / "gateway.log", "wb")  # closed in stop()
            self.proc = subprocess.Popen(
                [*args, f"--KernelGatewayApp.port={self.port}"],
                env=env,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                cwd=str(self.dirs["root"]),
            )
            live_logs.register(self, "kernel gateway", Path(self.log.name), runtime=self.dirs["runtime"])
            try:
                self._wait_ready()
                return
            except RuntimeError:
                if attempt == PORT_TRIES or "already in use" not in self.log_text().lower():
                    raise
                self.log.close()

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        headers = {"Authorization": f"token {self.token}"}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kernel gateway exited: {self.log_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/api/kernelspecs", headers=headers, timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"kernel gateway did not start: {self.log_text()[-2000:]}")

    @property
    def server_args(self) -> tuple[str, ...]:
        """What a ``jupyter server`` in front of this gateway is started with."""
        return (f"--gateway-url={self.url}", f"--GatewayClient.auth_token={self.token}")

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        live_logs.unregister(self)
        self.log.close()


class KernelSocket:
    """A kernel's channels websocket on the Jupyter server (what JupyterLab opens), to run code."""

    def __init__(self, server_url: str, token: str, kernel_id: str):
        import websocket

        ws_url = server_url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels"
        self.session = uuid.uuid4().hex
        self.ws = websocket.create_connection(
            f"{ws_url}?session_id={self.session}", header=[f"Authorization: token {token}"], timeout=60
        )

    def _msg(self, channel: str, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
        header = {
            "msg_id": uuid.uuid4().hex,
            "msg_type": msg_type,
            "username": "test",
            "session": self.session,
            "date": "2026-01-01T00:00:00Z",
            "version": "5.3",
        }
        return {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": channel}

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        msg = self._msg(channel, msg_type, content)
        self.ws.send(json.dumps(msg))
        return msg["header"]["msg_id"]

    def execute(self, code: str, timeout: float = 60, wait: bool = True) -> str:
        """Run code; its stdout (raises on an error). ``wait=False``: send and return at once."""
        msg_id = self.send("shell", "execute_request", {"code": code, "silent": False, "store_history": True})
        if not wait:
            return msg_id
        return self.wait_reply(msg_id, timeout)

    def wait_reply(self, msg_id: str, timeout: float = 60) -> str:
        """The cell's stdout, once both its execute_reply and its idle status came (IOPub and shell
        are separate channels: output may arrive after the reply)."""
        out: list[str] = []
        reply: dict[str, Any] | None = None
        idle = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (reply is None or not idle):
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "stream" and msg["content"].get("name") == "stdout":
                out.append(msg["content"]["text"])
            elif kind == "error":
                raise AssertionError("\n".join(msg["content"]["traceback"]))
            elif kind == "execute_reply":
                reply = msg
            elif kind == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
        if reply is None or not idle:
            raise TimeoutError(f"no execute_reply and idle status in {timeout} s")
        if reply["content"]["status"] != "ok":
            raise AssertionError(reply["content"])
        return "".join(out)

    def close(self) -> None:
        self.ws.close()
