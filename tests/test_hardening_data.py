"""Issue #10, kernel side: nothing the server does lands in the notebook, a hanging __repr__ poisons
only itself, stale runtime files go away, %config MCPHub works, bridge --kernel says "ambiguous".

Every test drives a real kernel through jupyter_client and the hub over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Mcp
from kernel_harness import Kernel


def run_all(kernel: Kernel, code: str, timeout: float = 60) -> list[dict[str, Any]]:
    """Execute ``code`` and return EVERY iopub stream message seen meanwhile, whatever its parent
    (output written from another thread is filed under an older cell's header)."""
    msg_id = kernel.kc.execute(code)
    streams: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kernel.kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["msg_type"] == "stream":
            streams.append(msg["content"])
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            kernel.kc.get_shell_msg(timeout=timeout)
            return streams
    raise TimeoutError(code[:80])


def drain(kernel: Kernel, seconds: float = 1.0) -> list[dict[str, Any]]:
    """Stream messages that arrive within ``seconds`` while the kernel is idle."""
    streams = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            msg = kernel.kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            continue
        if msg["msg_type"] == "stream":
            streams.append(msg["content"])
    return streams


PROVOKE = """
import asyncio, warnings, mcp_notebook
from mcp_notebook.providers.base import Provider

class BrokenProvider(Provider):
    def owns(self, uri):
        return uri.startswith("broken://")
    def list_resources(self):
        raise RuntimeError("MARKER-list-failed")
    def read(self, uri):
        raise RuntimeError("MARKER-read-failed")

def broken_listener(kind, uris):
    raise RuntimeError("MARKER-listener-failed")

_kh = mcp_notebook.hub()
_kh.resources.add_listener(broken_listener)
_kh.resources.add_provider(BrokenProvider())

@mcp_notebook.resource("noisy://thing")
def noisy():
    print("MARKER-printed-by-a-resource")
    warnings.warn("MARKER-warned-by-a-resource")
    import sys
    sys.stderr.write("MARKER-stderr-of-a-resource\\n")
    return "fine"

class NoisyRepr:
    def __repr__(self):
        print("MARKER-printed-by-repr")
        raise ValueError("MARKER-repr-raised")

noisy_value = NoisyRepr()
"""


def test_server_errors_never_reach_cell_output_or_cells(tmp_path: Path) -> None:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    mcp = None
    try:
        info = k.load_hub()
        seen = run_all(k, PROVOKE)
        mcp = Mcp(info)
        mcp.initialize()
        seen += run_all(k, "x_after = 1")  # the broken listener fires after this cell
        reply = mcp.call("resources/list")  # the broken provider raises on a request thread
        assert "error" in reply
        assert "error" in mcp.call("resources/read", {"uri": "broken://x"})
        assert mcp.result("resources/read", {"uri": "noisy://thing"})["contents"][0]["text"] == "fine"
        assert "error" in mcp.call("resources/read", {"uri": "nb://vars/noisy_value"})
        # An exception in a callback on the server's own loop (asyncio's handler would print it).
        seen += run_all(k, "_kh.transport._loop.call_soon_threadsafe(lambda: 1 / 0); import time; time.sleep(0.5)")
        # An exception escaping a hub-named thread (threading.excepthook would print it).
        seen += run_all(
            k,
            "import threading\n"
            "def _die():\n    raise RuntimeError('MARKER-thread-died')\n"
            "_t = threading.Thread(target=_die, name='mcp-notebook-req_99'); _t.start(); _t.join()",
        )
        seen += run_all(k, "y_after = 2")
        seen += drain(k)
        leaked = [s for s in seen if "MARKER" in s["text"] or "Traceback" in s["text"] or "Error" in s["text"]]
        assert leaked == [], leaked
        index = json.loads(mcp.result("resources/read", {"uri": "nb://cells"})["contents"][0]["text"])
        docs = [
            json.loads(mcp.result("resources/read", {"uri": c["uri"]})["contents"][0]["text"]) for c in index["cells"]
        ]
        assert len(docs) >= 4
        cells = json.dumps([doc["outputs"] for doc in docs])
        for marker in ("MARKER-listener", "MARKER-list-failed", "MARKER-printed", "MARKER-warned", "ZeroDivision"):
            assert marker not in cells
        log = tmp_path.glob("mcp-notebook-*.log")
        text = "".join(p.read_text() for p in log)
        assert "hub listener failed" in text and "MARKER-listener-failed" in text
        assert "ZeroDivisionError" in text  # the loop's exception handler logged it
        assert "MARKER-thread-died" in text
        assert "MARKER-warned-by-a-resource" in text and "MARKER-printed-by-a-resource" in text
        # The hub still answers, and the user's own output is untouched.
        assert mcp.result("ping") == {}
        assert k.run("print('users own output')").stdout == "users own output\n"
    finally:
        if mcp is not None:
            mcp.close()
        k.shutdown()


HUB_PRINTS = """
import sys, threading, time
def _hub_print(tag, delay=0.0):
    def run():
        time.sleep(delay)
        print(f"MARKER-{tag}-out")
        sys.stderr.write(f"MARKER-{tag}-err\\n")
    t = threading.Thread(target=run, name="mcp-notebook-test-" + tag, daemon=True)
    t.start()
    return t
"""

STREAM_STATE = (
    "import sys, json, ipykernel.iostream as _io\n"
    "print(json.dumps({'class': type(_io.OutStream.__dict__['write']).__name__,"
    " 'mark': [getattr(vars(s).get('write'), 'mcp_hub_guard', None) for s in (sys.stdout, sys.stderr)]}))"
)


def test_a_hub_thread_writes_to_the_log_during_and_between_cells_and_the_class_stays_plain(tmp_path: Path) -> None:
    """Text printed on a hub thread while a cell runs and between cells goes to the hub's log: not to
    the cell's output, not to nb://cells, not to IPython 9's history of outputs; a user's own thread
    still prints into the cell. Once loaded, ``OutStream.write`` is the plain function again (no data
    descriptor a cell's tee goes through, issue #48), and unloading leaves no guard on an instance."""
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    mcp = None
    try:
        before = json.loads(k.run(STREAM_STATE).stdout)
        info = k.load_hub()
        seen = run_all(k, HUB_PRINTS)
        loaded = json.loads(k.run(STREAM_STATE).stdout)
        assert loaded["class"] == "function", loaded  # the descriptor took itself off after the loading cell
        seen += run_all(k, "_hub_print('during').join(5)")
        seen += run_all(k, "_late = _hub_print('between', 0.3)")  # prints after its cell has ended
        seen += drain(k, 1.5)
        mine = run_all(
            k, "import threading\n_t = threading.Thread(target=print, args=('MINE-thread',)); _t.start(); _t.join(5)"
        )
        assert any("MINE-thread" in s["text"] for s in mine), mine
        leaked = [s for s in seen + mine if "MARKER" in s["text"]]
        assert leaked == [], leaked
        history = k.run("print(repr(dict(getattr(get_ipython().history_manager, 'outputs', {}))))").stdout
        assert "MARKER" not in history
        mcp = Mcp(info)
        mcp.initialize()
        index = json.loads(mcp.result("resources/read", {"uri": "nb://cells"})["contents"][0]["text"])
        docs = [mcp.result("resources/read", {"uri": c["uri"]})["contents"][0]["text"] for c in index["cells"]]
        outputs = json.dumps([json.loads(doc)["outputs"] for doc in docs])  # the sources name the markers
        assert "MARKER" not in outputs and "MINE-thread" in outputs
        text = "".join(p.read_text() for p in tmp_path.glob("mcp-notebook-*.log"))
        for marker in ("during-out", "during-err", "between-out", "between-err"):
            assert f"MARKER-{marker}" in text, marker
        mcp.close()
        mcp = None
        k.run("%unload_ext mcp_notebook")
        assert json.loads(k.run(STREAM_STATE).stdout) == before
        assert k.run("print('users own output')").stdout == "users own output\n"
    finally:
        if mcp is not None:
            mcp.close()
        k.shutdown()


STUCK = """
import threading
import mcp_notebook
forever = threading.Event()
gate = threading.Event()

class Stuck:
    def __repr__(self):
        forever.wait()
        return "never"

class Slow:
    def __repr__(self):
        gate.wait()
        return "Slow(done)"

stuck = Stuck()
stuck_list = [Stuck(), 1]
slow = Slow()
fine = {"a": 1}

def helper(x=1):
    "A function."
    return x

@mcp_notebook.resource("custom://ok")
def ok_resource():
    return "ok"

class HangStr:
    def __str__(self):
        forever.wait()
        return "never"
    __repr__ = __str__

try:
    import pandas as pd
    frame = pd.DataFrame({"a": [1, 2, 3]})
    bad_frame = pd.DataFrame({"a": [HangStr()]})
except ImportError:
    frame = [[1], [2], [3]]
"""


def test_a_hanging_repr_poisons_only_itself(tmp_path: Path) -> None:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    mcp = None
    try:
        info = k.load_hub("%config MCPHub.repr_timeout = 0.3")
        k.run(STUCK)
        mcp = Mcp(info)
        mcp.initialize()

        def read(uri: str) -> dict[str, Any]:
            return mcp.call("resources/read", {"uri": uri})

        for _ in range(30):
            reply = read("nb://vars/stuck")
            assert "error" in reply, reply
        assert "still running" in read("nb://vars/stuck")["error"]["message"]
        for _ in range(10):
            assert "error" in read("nb://vars/stuck_list")
            assert "error" in read("nb://vars/slow")
        if (
            "error" not in read("nb://vars/frame")
            and "pandas" in read("nb://vars/frame")["result"]["contents"][0]["text"]
        ):
            for _ in range(30):  # a frame page stuck in a cell's __str__: poisons that frame only
                assert "error" in read("nb://frames/bad_frame?format=csv")
        # Everything else keeps rendering, however many reads of the stuck ones were made.
        for uri in ("nb://vars", "nb://vars/fine", "nb://vars/helper", "nb://vars/frame", "custom://ok", "nb://kernel"):
            reply = read(uri)
            assert "result" in reply, (uri, reply)
        frames = read("nb://frames/frame")
        assert "result" in frames, frames
        tools = mcp.result("tools/call", {"name": "read_resource", "arguments": {"uri": "nb://vars/fine"}})
        assert not tools.get("isError")
        # The slow one recovers once its __repr__ returns.
        k.run("gate.set()")
        deadline = time.monotonic() + 10
        while "error" in (reply := read("nb://vars/slow")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "Slow(done)" in reply["result"]["contents"][0]["text"]
        # The kernel itself is unaffected.
        assert k.run("print(fine)").stdout.strip() == "{'a': 1}"
    finally:
        if mcp is not None:
            mcp.close()
        k.shutdown()


def test_config_magic_knows_mcphub(tmp_path: Path) -> None:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.load_hub()
        out = k.run("%config MCPHub", check=False)
        assert out.error is None, out.error
        assert "MCPHub.port" in out.stdout and "repr_timeout" in out.stdout
        k.run("%config MCPHub.repr_timeout = 1.5")
        assert k.run("import mcp_notebook; print(mcp_notebook.hub().config.repr_timeout)").stdout.strip() == "1.5"
        k.run("%reload_ext mcp_notebook")
        out = k.run("%config MCPHub", check=False)
        assert out.error is None and "MCPHub.port" in out.stdout
        k.run("%unload_ext mcp_notebook")
        assert "MCPHub" not in k.run("%config").stdout
    finally:
        k.shutdown()


def test_warnings_are_plain_messages(tmp_path: Path) -> None:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.run("%config MCPHub.require_token = False")
        out = k.run("%load_ext mcp_notebook")
        assert "mcp-notebook: warning: MCPHub.require_token is False" in out.stderr
        assert "warnings.warn" not in out.stderr and ".py:" not in out.stderr
        assert out.stderr.count("\n") == 1
    finally:
        k.shutdown()


def runtime_files(path: Path) -> list[Path]:
    return sorted(path.glob("mcp-notebook-*.json"))


def test_sigterm_removes_the_runtime_file_and_stale_files_are_swept(tmp_path: Path) -> None:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.load_hub()
        assert len(runtime_files(tmp_path)) == 1
        pid = k.pid()
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while runtime_files(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert runtime_files(tmp_path) == []
    finally:
        k.km.shutdown_kernel(now=True)
    # A SIGKILLed kernel cannot clean up: the next hub that starts sweeps its file (and log).
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.load_hub()
        pid = k.pid()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        stale = runtime_files(tmp_path)
        assert len(stale) == 1
    finally:
        k.km.shutdown_kernel(now=True)
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.load_hub()
        files = runtime_files(tmp_path)
        assert stale[0] not in files and len(files) == 1
    finally:
        k.shutdown()
    assert runtime_files(tmp_path) == []


def test_demo_leaves_no_runtime_file_on_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_notebook.commands.cli", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 90
        assert proc.stdout is not None
        for line in proc.stdout:  # wait until it serves
            if "Press Ctrl-C" in line or time.monotonic() > deadline:
                break
        assert runtime_files(tmp_path)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert runtime_files(tmp_path) == []


def test_bridge_kernel_prefix_matching_two_kernels_is_ambiguous(tmp_path: Path) -> None:
    now = time.time()
    for kid in ("abc111", "abc222"):
        (tmp_path / f"mcp-notebook-{kid}.json").write_text(
            json.dumps(
                {"url": "http://127.0.0.1:9/mcp", "token": "t", "pid": os.getpid(), "kernel_id": kid, "started_at": now}
            )
        )
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_notebook.commands.cli", "bridge", "--kernel", "abc"],
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    reply = json.loads(proc.stdout.strip().splitlines()[0])
    message = reply["error"]["message"]
    assert "ambiguous" in message and "abc111" in message and "abc222" in message
    assert "ambiguous" in proc.stderr


@pytest.mark.parametrize("prefix", ["abc1", "abc222"])
def test_bridge_kernel_prefix_unique_still_selects(tmp_path: Path, prefix: str) -> None:
    from mcp_notebook.runtime import HubRecord, select

    records = [
        HubRecord(tmp_path / "a.json", {"kernel_id": "abc111", "pid": os.getpid()}, True),
        HubRecord(tmp_path / "b.json", {"kernel_id": "abc222", "pid": os.getpid()}, True),
    ]
    found = select(records, kernel=prefix)
    assert found is not None and found.kernel_id.startswith(prefix)
