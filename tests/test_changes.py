"""``mcp-notebook changes --follow`` against real kernels: cells that succeed and fail, a consumer
that goes away mid-stream and comes back with ``--since`` (nothing lost, nothing repeated), a
restart, a death, the same on a remote Jupyter server with the bridge's credentials, and a clean
end on SIGINT/SIGTERM."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import jserver
import pytest
from kernel_harness import Kernel

from mcp_notebook.commands.changes import MAX_LINE, CursorError, parse_since

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[1]


class Follow:
    """``mcp-notebook changes --follow …`` as a subprocess; its stdout lines parsed as they come."""

    def __init__(self, env: dict[str, str], *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_notebook", "changes", "--follow", "--grace", "3", *args],
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.raw: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        said = [self.proc.stderr.readline() for _ in range(1)]
        while "following" not in said[-1] and said[-1] and len(said) < 50:  # (a warning may come first)
            said.append(self.proc.stderr.readline())
        assert "following" in said[-1], said  # "following N kernel(s)": each kernel's start is known

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(line)

    def next(self, timeout: float = 30) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert len(line) <= MAX_LINE + 1
        return json.loads(line)

    def until(self, predicate: Any, timeout: float = 60) -> list[dict[str, Any]]:
        """Lines up to and including the first one matching."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            event = self.next(max(0.1, deadline - time.monotonic()))
            seen.append(event)
            if predicate(event):
                return seen

    def quiet(self, seconds: float) -> list[str]:
        time.sleep(seconds)
        out = []
        while not self.lines.empty():
            out.append(self.lines.get_nowait())
        return out

    def end(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(sig)
        rc = self.proc.wait(20)
        return rc, self.proc.stderr.read()


def cells(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "cell"]


def test_cells_restart_death_and_a_consumer_that_reconnects(tmp_path):
    env = {"JUPYTER_RUNTIME_DIR": str(tmp_path)}
    kernel = Kernel(env=env, cwd=str(tmp_path))
    follow = again = None
    try:
        kernel.load_hub()
        kernel.run("x = 1")
        follow = Follow(env)
        kernel.run("import time; time.sleep(0.2); y = [1, 2]")
        kernel.run("1/0", check=False)
        kernel.run("print('no names changed')")
        first = cells(follow.until(lambda e: e.get("first_line") == "print('no names changed')"))
        assert [e["status"] for e in first] == ["ok", "error", "ok"], first
        ok, failed, printed = first
        assert ok["changed"] == ["y"] and ok["duration"] >= 0.2 and ok["uri"].endswith(f"/cells/{ok['cell']}")
        assert failed["changed"] == [] and "ZeroDivisionError" in failed.get("error", ""), failed
        assert printed["changed"] == [] and printed["cell"] == failed["cell"] + 1
        assert all(e["kernel"] and e["cursor"].startswith(e["kernel"] + "@") for e in first)
        assert follow.quiet(0.5) == []  # x = 1 ran before: not reported

        rc, err = follow.end(signal.SIGTERM)  # the consumer goes away mid-stream...
        assert rc == 0 and "Traceback" not in err, err
        kernel.run("z = 3")  # ...a cell runs meanwhile...
        once = subprocess.run(  # (without --follow: what came after the cursor, then exit)
            [sys.executable, "-m", "mcp_notebook", "changes", "--since", printed["cursor"]],
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert once.returncode == 0 and [json.loads(x)["changed"] for x in once.stdout.splitlines()] == [["z"]]
        again = Follow(env, "--since", printed["cursor"])  # ...and it comes back where it was
        resumed = again.next()
        assert resumed["event"] == "cell" and resumed["changed"] == ["z"], resumed
        assert resumed["cell"] == printed["cell"] + 1  # nothing lost, nothing repeated
        assert again.quiet(0.5) == []

        kernel.restart()
        kernel.load_hub()
        kernel.run("w = 4")
        after = again.until(lambda e: e.get("changed") == ["w"])
        kinds = [e["event"] for e in after]
        assert kinds.count("kernel_restarted") == 1 and kinds.index("kernel_restarted") < len(kinds) - 1, after
        restarted = after[kinds.index("kernel_restarted")]
        assert restarted["cursor"].split("@")[1].split(".")[0] != printed["cursor"].split("@")[1].split(".")[0]
        cursors = [e["cursor"] for e in cells(after)]
        assert len(cursors) == len(set(cursors))

        kernel.shutdown()
        kernel = None
        died = again.until(lambda e: e["event"] == "kernel_died", timeout=30)[-1]
        assert died["kernel"] == resumed["kernel"]
        rc, err = again.end(signal.SIGINT)
        assert rc == 0 and "Traceback" not in err, err
        again = None
    finally:
        for f in (follow, again):
            if f is not None and f.proc.poll() is None:
                f.proc.kill()
        if kernel is not None:
            kernel.shutdown()


def test_a_remote_servers_kernels_with_the_bridges_credentials(tmp_path):
    server = jserver.JupyterServer(tmp_path)
    follow = None
    try:
        kid = server.start_session("remote.ipynb")
        kc = server.client(kid)
        jserver.load_hub(kc)
        token_file = tmp_path / "token"
        token_file.write_text(server.token + "\n")
        follow = Follow({}, "--server", server.url, "--token-file", str(token_file), "--kernel", kid[:8])
        jserver.run(kc, "frame = {'a': 1}")
        event = follow.until(lambda e: e["event"] == "cell")[-1]
        assert event["kernel"] == kid and event["changed"] == ["frame"] and event["notebook"].endswith("remote.ipynb")
        assert event["uri"] == f"nb://kernels/{kid}/cells/{event['cell']}"
        rc, _ = follow.end()
        assert rc == 0
        bad = subprocess.run(
            [sys.executable, "-m", "mcp_notebook", "changes", "--server", server.url],
            env={**os.environ, "PYTHONPATH": str(ROOT), "MCP_NOTEBOOK_SERVER_TOKEN": "", "JUPYTER_TOKEN": ""},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2 and "no Jupyter token" in bad.stderr
    finally:
        if follow is not None and follow.proc.poll() is None:
            follow.proc.kill()
        server.stop()


def test_a_bad_cursor_is_a_clear_error():
    assert parse_since(["abc@1f2e.7"])["abc"].cell == 7
    for bad in ("nope", "k@e", "k@e.x", "@e.1"):
        with pytest.raises(CursorError):
            parse_since([bad])
    out = subprocess.run(
        [sys.executable, "-m", "mcp_notebook", "changes", "--since", "garbage"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "KERNEL@EPOCH.CELL" in out.stderr
