"""A raw ``mcp-notebook bridge`` subprocess driven line by line over stdin/stdout (no SDK in between):
for tests and benchmarks that send what no well-behaved client sends. Every wait is bounded."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}


def stateless(msg_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {**(params or {}), "_meta": META}}


class RawBridge:
    """``python -m mcp_notebook.commands.cli bridge ARGS`` with the worktree first on the path."""

    def __init__(self, runtime: Path, *args: str, env: dict[str, str] | None = None):
        full_env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_notebook.commands.cli", "bridge", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=str(ROOT),
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: list[bytes] = []
        self.raw_out: list[bytes] = []
        self._by_id: dict[str, list[Any]] = {}
        self._other: list[Any] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    # -- sending ---------------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def send(self, msg: Any) -> None:
        self.send_raw(json.dumps(msg).encode())

    # -- receiving -------------------------------------------------------------------------------
    def _pump(self, timeout: float) -> bool:
        """File one more output line by id; False when nothing came in time or stdout ended."""
        try:
            line = self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return False
        if line is None:
            self.lines.put(None)
            return False
        self.raw_out.append(line)
        doc = json.loads(line)
        for item in doc if isinstance(doc, list) else [doc]:
            if isinstance(item, dict) and ("result" in item or "error" in item):
                self._by_id.setdefault(json.dumps(item.get("id")), []).append(item)
            else:
                self._other.append(item)
        return True

    def reply(self, msg_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The (first unread) answer to ``msg_id``."""
        key = json.dumps(msg_id)
        deadline = time.monotonic() + timeout
        while not self._by_id.get(key):
            if not self._pump(deadline - time.monotonic()) and time.monotonic() >= deadline:
                raise TimeoutError(f"no answer to id {msg_id!r}; stderr: {b''.join(self.stderr)[-2000:]!r}")
            if self.proc.poll() is not None and self.lines.empty() and not self._by_id.get(key):
                raise AssertionError(f"the bridge exited ({self.proc.returncode}): {b''.join(self.stderr)[-2000:]!r}")
        return self._by_id[key].pop(0)

    def ask(self, msg: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        self.send(msg)
        return self.reply(msg["id"], timeout)

    def notifications(self, timeout: float = 0.5) -> list[Any]:
        """Messages without an id seen so far (after reading for ``timeout``)."""
        deadline = time.monotonic() + timeout
        while self._pump(deadline - time.monotonic()):
            pass
        out, self._other = self._other, []
        return out

    def unread(self) -> dict[str, list[Any]]:
        """Answers received but never asked for (by id)."""
        return {k: v for k, v in self._by_id.items() if v}

    def close(self, timeout: float = 30) -> int:
        """End stdin; the exit status (the process is killed if it does not exit in time)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise
