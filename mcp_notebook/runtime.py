"""Runtime files: one JSON file per running hub in Jupyter's runtime dir (mode 0600).

They let the CLI and the stdio bridge find a hub and its token without anything being printed.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

PREFIX = "mcp-notebook-"


def runtime_dir() -> Path:
    from jupyter_core.paths import jupyter_runtime_dir

    path = Path(jupyter_runtime_dir())
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def write_runtime_file(info: dict[str, Any], key: str) -> Path:
    """Write ``info`` atomically, readable by the owner only."""
    path = runtime_dir() / f"{PREFIX}{key}.json"
    tmp = path.with_suffix(".json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(info, fh, indent=2)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def remove_runtime_file(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def read_runtime_files() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(runtime_dir().glob(f"{PREFIX}*.json")):
        with contextlib.suppress(OSError, ValueError):
            out.append((path, json.loads(path.read_text())))
    return out
