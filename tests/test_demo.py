"""The README's first command: `mcp-notebook demo` starts a kernel with sample data and serves it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def test_demo_serves_sample_data_and_never_prints_the_token(tmp_path):
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_notebook.commands.cli", "demo", "--seconds", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    token = None
    deadline = time.monotonic() + 60
    while token is None and time.monotonic() < deadline and proc.poll() is None:
        for path in tmp_path.glob("mcp-notebook-*.json"):
            try:
                token = json.loads(path.read_text())["token"]
            except (ValueError, KeyError, OSError):
                pass
        time.sleep(0.05)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert token and token not in stdout + stderr
    assert "endpoint   http://127.0.0.1:" in stdout
    assert f"token      in {tmp_path}{os.sep}mcp-notebook-" in stdout  # the runtime file's path, not None
    for name in ("weather (pandas.DataFrame)", "readings (list)", "summary (dict)"):
        assert name in stdout
    assert list(tmp_path.glob("mcp-notebook-*.json")) == []  # the demo kernel shut down cleanly
