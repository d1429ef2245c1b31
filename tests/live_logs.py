"""Logs of the servers a test started (Jupyter servers, kernel gateways, their hubs): on a failing
test, conftest.py adds the tail of each live one to the report, so a failure seen only in CI says
what the server and the hub saw (a kernel that died, a hub that stopped answering)."""

from __future__ import annotations

from pathlib import Path

TAIL_CHARS = 3000
_live: dict[int, tuple[str, Path, Path | None]] = {}  # id(owner) -> (name, log, runtime dir of its hubs)


def register(owner: object, name: str, log: Path, runtime: Path | None = None) -> None:
    _live[id(owner)] = (name, log, runtime)


def unregister(owner: object) -> None:
    _live.pop(id(owner), None)


def tails() -> list[tuple[str, str]]:
    """(section title, last TAIL_CHARS of the log) for every live server and each hub log beside it."""
    out = []
    for name, log, runtime in list(_live.values()):
        logs = [(name, log)]
        if runtime is not None and runtime.is_dir():
            logs += [(f"{name} hub {p.name}", p) for p in sorted(runtime.glob("mcp-notebook-*.log"))[:8]]
        for title, path in logs:
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            out.append((f"log of {title}", text[-TAIL_CHARS:]))
    return out
