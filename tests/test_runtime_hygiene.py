"""The runtime dir stays clean: kernels killed hard leave at most their runtime file and log, which
the next hub sweeps; a live hub's files survive other hubs' sweeps; an orphan log goes once it is
older than a starting hub's grace time. MCP_NB_HYGIENE_KERNELS sets how many kernels are killed
(default 6; the acceptance check is 100)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from kernel_harness import Kernel

from mcp_notebook import runtime

KILLED = int(os.environ.get("MCP_NB_HYGIENE_KERNELS", "6"))


def _ours(runtime_dir: Path) -> list[str]:
    return sorted(p.name for p in runtime_dir.glob("mcp-notebook-*"))


def _kill(kernel: Kernel) -> None:
    pid = kernel.pid()
    os.kill(pid, signal.SIGKILL)
    process = getattr(getattr(kernel.km, "provisioner", None), "process", None)
    if process is not None:  # reaped, as the Jupyter server that started it does (without /proc, as on
        process.wait(10)  # macOS or on the portable path, an unreaped zombie looks alive)
    deadline = time.monotonic() + 10
    while runtime.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    kernel.kc.stop_channels()
    kernel.km.cleanup_resources()


@pytest.mark.timeout(60 + 20 * KILLED)
def test_kernels_killed_hard_leave_a_handful_of_files(tmp_path):
    env = {"JUPYTER_RUNTIME_DIR": str(tmp_path)}
    for _ in range(KILLED):
        kernel = Kernel(env=env)
        kernel.run("%load_ext mcp_notebook\nimport logging; logging.getLogger('mcp_notebook').warning('x')")
        _kill(kernel)
        # at most this one's runtime file and log are left (the previous ones were swept at its start)
        assert len(_ours(tmp_path)) <= 2, _ours(tmp_path)
    survivor = Kernel(env=env)
    try:
        survivor.load_hub()
        left = _ours(tmp_path)
        key = survivor.info().get("kernel_id") or f"pid{survivor.pid()}"
        assert len(left) <= 2 and all(key in name for name in left), left
    finally:
        survivor.shutdown()


def test_a_live_hub_keeps_its_files_and_orphans_go_after_the_grace(tmp_path):
    env = {"JUPYTER_RUNTIME_DIR": str(tmp_path)}
    first = Kernel(env=env)
    try:
        first.load_hub()
        first.run("import logging; logging.getLogger('mcp_notebook').warning('hello from the first hub')")
        mine = _ours(tmp_path)
        assert any(n.endswith(".json") for n in mine) and any(n.endswith(".log") for n in mine), mine
        young, old = tmp_path / "mcp-notebook-young.log", tmp_path / "mcp-notebook-old.log"
        stranger = tmp_path / "kernel-123.json"  # not ours: never touched
        for path in (young, old, stranger):
            path.write_text("x")
        past = time.time() - runtime.LOG_GRACE_SECONDS - 5
        os.utime(old, (past, past))
        second = Kernel(env=env)
        try:
            second.load_hub()
            left = set(_ours(tmp_path))
            assert set(mine) <= left and young.name in left and old.name not in left
            assert stranger.exists()
        finally:
            second.shutdown()
    finally:
        first.shutdown()
