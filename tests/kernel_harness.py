"""A real IPython kernel driven through jupyter_client, for end-to-end tests.

Every wait is bounded. ``run`` returns the outputs the kernel published for one execution.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from jupyter_client.manager import KernelManager


class KernelError(AssertionError):
    """The code raised inside the kernel."""


@dataclass
class Execution:
    status: str = ""
    stdout: str = ""
    stderr: str = ""
    results: list[dict[str, Any]] = field(default_factory=list)  # execute_result / display_data data
    error: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The text/plain of the last result, or stdout."""
        for data in reversed(self.results):
            if "text/plain" in data:
                return data["text/plain"]
        return self.stdout


class Kernel:
    """Start, drive and stop one kernel process."""

    def __init__(self, env: dict[str, str] | None = None, cwd: str | None = None, python: str | None = None):
        self.km = KernelManager(kernel_name="python3")
        self.km.kernel_spec.argv[0] = python or sys.executable  # the venv running the tests by default
        kw: dict[str, Any] = {"env": {**os.environ, **(env or {})}}
        if cwd:
            kw["cwd"] = cwd
        self.km.start_kernel(**kw)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str, timeout: float = 60, check: bool = True, store_history: bool = True) -> Execution:
        msg_id = self.kc.execute(code, store_history=store_history)
        out = Execution()
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"kernel did not finish within {timeout}s: {code[:80]!r}")
            try:
                msg = self.kc.get_iopub_msg(timeout=remaining)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                if content["name"] == "stdout":
                    out.stdout += content["text"]
                else:
                    out.stderr += content["text"]
            elif kind in ("execute_result", "display_data"):
                out.results.append(content["data"])
            elif kind == "error":
                out.error = content
            elif kind == "status" and content["execution_state"] == "idle":
                break
        reply = self.kc.get_shell_msg(timeout=timeout)
        out.status = reply["content"]["status"]
        if check and out.error is not None:
            raise KernelError("\n".join(out.error.get("traceback", [])) or out.error.get("evalue", ""))
        return out

    def execute_nowait(self, code: str) -> str:
        """Start code without waiting (e.g. a long sleep); returns the message id."""
        return self.kc.execute(code)

    def wait_idle(self, msg_id: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                continue
            if (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            ):
                self.kc.get_shell_msg(timeout=timeout)
                return
        raise TimeoutError("kernel did not become idle")

    def load_hub(self, config: str = "") -> dict[str, Any]:
        """Load the extension (after optional %config lines) and return connection_info()."""
        if config:
            self.run(config)
        self.run("%load_ext mcp_notebook")
        return self.info()

    def info(self) -> dict[str, Any]:
        out = self.run("import json as _j, mcp_notebook as _m; print(_j.dumps(dict(_m.connection_info())))")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def pid(self) -> int:
        return int(self.run("import os; print(os.getpid())").stdout.strip())

    def shutdown(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=False)

    def restart(self) -> None:
        self.km.restart_kernel(now=False)
        self.kc.wait_for_ready(timeout=60)
