"""Start a kernel for our own commands without ipykernel's TCP notice reaching the user's terminal.

ipykernel 7 warns on stderr that a TCP kernel is unencrypted ("IPKernelApp WARNING | Kernel is
running over TCP without encryption ..."). The kernels our commands start listen on loopback only,
for this process, so the notice only alarms. Everything else the kernel writes to stderr is
passed through unchanged.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import IO, Any

DROPPED = ("Kernel is running over TCP without encryption",)


def start_quiet_kernel(km: Any, **kwargs: Any) -> None:
    """``km.start_kernel(**kwargs)`` with the kernel's stderr filtered through a daemon thread."""
    km.start_kernel(stderr=subprocess.PIPE, **kwargs)
    proc = getattr(km, "provisioner", None)
    popen = getattr(proc, "process", None)
    pipe = getattr(popen, "stderr", None)
    if pipe is not None:
        threading.Thread(
            target=_forward, args=(pipe, sys.stderr), name="mcp-notebook-kernel-stderr", daemon=True
        ).start()


def _forward(pipe: IO[bytes], out: IO[str]) -> None:
    """Copy lines until the kernel closes its stderr, minus the dropped notices."""
    try:
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace")
            if any(text in line for text in DROPPED):
                continue
            try:
                out.write(line)
                out.flush()
            except (OSError, ValueError):  # our stderr went away
                return
    finally:
        pipe.close()
