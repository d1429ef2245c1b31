"""`mcp-notebook bridge --channel`, driven by a client of our own that speaks the Claude Code channel
contract over stdio (newline-delimited JSON-RPC): the capability is declared, a cell that changes
what the session read pushes one `notifications/claude/channel`, several changes in one cell are
one event, events are rate-limited, and nothing is pushed for what the session never looked at.
(What a logged-in Claude Code does with the event cannot be checked here.)"""

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

import pytest
from kernel_harness import Kernel

pytestmark = pytest.mark.timeout(120)


class StdioPeer:
    """The client side: writes requests, collects every line the bridge writes."""

    def __init__(self, runtime: Path):
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
        cmd = [sys.executable, "-m", "mcp_notebook", "bridge", "--channel"]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ids = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == self.ids)

    def wait(self, match: Any, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            msg = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if match(msg):
                return msg

    def channel_events(self, seconds: float) -> list[dict[str, Any]]:
        out, deadline = [], time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                msg = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if msg.get("method") == "notifications/claude/channel":
                out.append(msg)
        return out

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def test_channel_events_for_what_the_session_read(tmp_path):
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)}, cwd=str(tmp_path))
    peer = StdioPeer(tmp_path)
    try:
        kernel.run("%config MCPHub.notebook_path = 'analysis.ipynb'")
        kernel.load_hub()
        kernel.run("x = 1\ny = [1]\nunread = 0\nsecret_note = 'no'")
        init = peer.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "channel-peer", "version": "1"},
            },
        )
        assert init["result"]["capabilities"]["experimental"]["claude/channel"] == {}
        assert "channel" in init["result"]["instructions"]
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = peer.request("resources/read", {"uri": "nb://kernels"})
        read = peer.request(
            "tools/call", {"name": "read_resource", "arguments": {"uri": "nb://kernels/analysis/vars/x"}}
        )
        assert not read["result"].get("isError"), read
        assert "analysis" in listed["result"]["contents"][0]["text"]
        peer.request("resources/read", {"uri": "nb://vars/y"})
        time.sleep(1.0)  # the channel's listen opens upstream

        kernel.run("unread = 5")  # never read: nothing pushed
        assert peer.channel_events(2.5) == []
        kernel.run("x = 2\ny.append(2)")  # one cell, two changes: one event
        events = peer.channel_events(4)
        assert len(events) == 1, events
        params = events[0]["params"]
        assert "analysis" in params["content"] and "nb://kernels/analysis/vars/x" in params["content"]
        assert "nb://vars/y" in params["content"]
        assert all(isinstance(v, str) for v in params["meta"].values())
        for i in range(5):  # a burst of cells: rate-limited, nothing lost
            kernel.run(f"x = {10 + i}")
        burst = peer.channel_events(6)
        assert 1 <= len(burst) <= 3 and "vars/x" in burst[-1]["params"]["content"], burst
    finally:
        peer.close()
        kernel.shutdown()
