"""What the hostile run counts on every surface (tests/test_hostile_fuzz.py, bench/hostile.py): cases,
unanswered requests, process exits, 5xx, -32603, token leaks, and what is left open afterwards."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections import Counter
from typing import Any

PROBLEMS = ("unanswered", "exit", "5xx", "-32603", "token_leak", "leaked")
_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3}) ")
_INTERNAL = re.compile(rb'"code"\s*:\s*-32603\b')
COUNT_ONLY = os.environ.get("MCP_HOSTILE_COUNT_ONLY") == "1"  # the bench: count everything, stop at nothing


class Tally:
    """Counts per surface; ``check`` records a case's problems and (in tests) fails on the first."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, str] = {}

    def case(self, surface: str, problems: list[str], what: Any = "") -> None:
        self.counts[f"{surface}.cases"] += 1
        for p in problems:
            self.counts[f"{surface}.{p}"] += 1
            self.examples.setdefault(f"{surface}.{p}", repr(what)[:600])
        if problems and not COUNT_ONLY:
            raise AssertionError(f"{surface}: {problems}: {repr(what)[:2000]}")

    def leaked(self, surface: str, what: str, n: int) -> None:
        self.counts[f"{surface}.leaked"] += max(0, n)
        if n > 0:
            self.examples.setdefault(f"{surface}.leaked", what)
            if not COUNT_ONLY:
                raise AssertionError(f"{surface}: {n} {what} left behind")

    def problems(self) -> dict[str, int]:
        return {k: v for k, v in self.counts.items() if not k.endswith(".cases") and v}

    def report(self, path: str | None) -> None:
        if not path:
            return
        old = json.loads(open(path).read()) if os.path.exists(path) else {"counts": {}, "examples": {}}
        for key, n in self.counts.items():
            old["counts"][key] = old["counts"].get(key, 0) + n
        for key, text in self.examples.items():
            old["examples"].setdefault(key, text)
        with open(path, "w") as f:
            json.dump(old, f, indent=1)


def http_problems(out: bytes, complete: bool, secrets: list[str]) -> list[str]:
    """What is wrong with the raw bytes a server sent back for one request."""
    found = []
    statuses = [int(m.group(1)) for m in _STATUS.finditer(out[:200_000])]
    if complete and not statuses:
        found.append("unanswered")
    if any(s >= 500 for s in statuses):
        found.append("5xx")
    if _INTERNAL.search(out):
        found.append("-32603")
    if any(s and s.encode() in out for s in secrets):
        found.append("token_leak")
    return found


def rpc_problems(text: str, secrets: list[str]) -> list[str]:
    found = []
    if _INTERNAL.search(text.encode("utf-8", "surrogatepass")):
        found.append("-32603")
    if any(s and s in text for s in secrets):
        found.append("token_leak")
    return found


def exchange(port: int, raw: bytes, half_close: bool = True, timeout: float = 20.0) -> bytes:
    """Send ``raw``; read until the server closes (``half_close``: after a FIN of ours) or, for a
    server that keeps a stream open, until the first reply bytes and ``timeout`` of quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(raw)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # refused before everything was sent: what came back is still checked
        out = b""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if b"text/event-stream" in out[:4096] and b"\r\n\r\n" in out:
                    s.settimeout(0.5)  # a stream stays open: its head and first events are enough
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (ConnectionResetError, TimeoutError):
            pass
        return out
