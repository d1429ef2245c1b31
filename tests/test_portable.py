"""The portable path (MCP_NOTEBOOK_PORTABLE=1, mcp_notebook/portable.py): every Linux-only fast path
off, as macOS and Windows run. A real kernel started with the switch reports asyncio's loop, no table
reads and no busy polling in `nb://kernel` (read with the official SDK client), and still finds what
each cell changed; a kernel started with it off (on Linux) reports the fast paths. In-process, each
fast path consults the switch where it decides (the table reader, /proc, TCP_QUICKACK, the loop,
busy polling).

Then the Windows specifics a Linux test can reach (docs/DESIGN.md, "The portable path and other
systems"): runtime files under a path with spaces, written when the filesystem refuses chmod, and
never with a stale temporary file's mode; a platform without SIGTERM; `pid_alive` that never calls
`os.kill(pid, 0)` on Windows (TerminateProcess there); Windows notebook paths in kernel labels.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from kernel_harness import Kernel
from sdk import connect

from mcp_notebook import portable, runtime
from mcp_notebook.allkernels.naming import notebook_stem
from mcp_notebook.postcell import dict_table
from mcp_notebook.transport import latency, libc_socket, loop

LINUX_CPYTHON = sys.platform.startswith("linux") and sys.implementation.name == "cpython"


def _kernel(tmp_path: Path, switch: str) -> tuple[Kernel, dict]:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path / f"rt-{switch}"), portable.ENV: switch})
    return k, k.load_hub()


async def _read_kernel(info: dict) -> dict:
    async with connect(info) as (client, _inbox):
        for _ in range(50):  # replies the busy poller would poll after
            await client.read_resource("nb://vars")
        return json.loads((await client.read_resource("nb://kernel")).contents[0].text)


def test_the_switch_turns_every_fast_path_off_in_a_real_kernel(tmp_path):
    k, info = _kernel(tmp_path, "1")
    try:
        k.run("a = 1\nb = [1, 2]")
        doc = anyio.run(_read_kernel, info)
        assert doc["fast_paths"] == {"portable": True, "loop": "asyncio", "namespace_table_reads": False,
                                     "busy_poll": False, "held_sockets": False, "precise_timers": False}, doc  # fmt: skip
        spins = k.run("import mcp_notebook as m; print(m.hub().transport.busy_poll.spins)").stdout.strip()
        assert spins == "0"
        # The listing way still finds what a cell changed: a rebinding and a new name.
        k.run("a = 2\nc = 'new'")

        async def names() -> set[str]:
            async with connect(info) as (client, _inbox):
                listed = json.loads((await client.read_resource("nb://vars")).contents[0].text)
                a = json.loads((await client.read_resource("nb://vars/a")).contents[0].text)
                assert a["repr"] == "2", a
                return {v["name"] for v in listed["variables"]}

        assert {"a", "b", "c"} <= anyio.run(names)
    finally:
        k.shutdown()


@pytest.mark.skipif(not LINUX_CPYTHON, reason="the fast paths exist on CPython on Linux")
def test_without_the_switch_linux_takes_the_fast_paths(tmp_path):
    k, info = _kernel(tmp_path, "0")
    try:
        doc = anyio.run(_read_kernel, info)
        paths = doc["fast_paths"]
        assert paths["portable"] is False and paths["busy_poll"] is True, paths
        assert paths["namespace_table_reads"] is True and paths["held_sockets"] is True, paths
        assert paths["precise_timers"] is True, paths
        has_uvloop = k.run("import importlib.util as u; print(u.find_spec('uvloop') is not None)").stdout.strip()
        assert paths["loop"] == ("uvloop" if has_uvloop == "True" else "asyncio"), paths
    finally:
        k.shutdown()


def test_each_fast_path_consults_the_switch_where_it_decides(monkeypatch):
    monkeypatch.setattr(portable, "ON", True)
    assert dict_table.new_reader() is None
    assert libc_socket.load() is None
    made = loop.new_loop("uvloop", latency.BusyPoll(1.0))
    try:
        assert type(made).__module__.startswith("asyncio"), type(made)
        assert not isinstance(getattr(made, "_selector", None), latency.PollingSelector)
    finally:
        made.close()
    poll = latency.BusyPoll(1.0)

    async def reply() -> None:
        poll.touch()
        await asyncio.sleep(0.01)

    asyncio.run(reply())
    assert poll.spins == 0 and not poll.active


def test_the_switch_reads_like_an_environment_flag():
    assert [portable._read(v) for v in ("1", "yes", "true", "on", " 1 ")] == [True] * 5
    assert [portable._read(v) for v in (None, "", "0", "false", "No", "off")] == [False] * 6


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_proc_is_read_only_off_the_portable_path(monkeypatch):
    monkeypatch.setattr(portable, "ON", False)  # (the portable pass runs this file with the switch on)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not runtime._zombie(child.pid):  # exited, not reaped yet
            time.sleep(0.02)
        assert runtime._zombie(child.pid) and not runtime.pid_alive(child.pid)
        monkeypatch.setattr(portable, "ON", True)
        assert not runtime._zombie(child.pid) and runtime.pid_alive(child.pid)  # as macOS sees a zombie
    finally:
        child.wait(30)


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's")
def test_quickack_is_set_only_off_the_portable_path(monkeypatch):
    from mcp_notebook.serverext import wires

    calls: list[tuple] = []

    class Sock:  # records the option the websocket's socket would get (a real socket would too)
        def setsockopt(self, *args: object) -> None:
            calls.append(args)

    class Stream:
        socket = Sock()

    ws = type("W", (), {"stream": Stream()})()  # a websocket's IOStream, where tornado keeps it
    monkeypatch.setattr(portable, "ON", False)
    wires.quick_ack(ws)
    assert calls == [(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)]
    monkeypatch.setattr(portable, "ON", True)
    wires.quick_ack(ws)
    assert len(calls) == 1


# -- Windows specifics a test here can reach -------------------------------------------------


def test_runtime_file_under_a_path_with_spaces_is_found(tmp_path, monkeypatch):
    where = tmp_path / "Program Files" / "Jupyter runtime"
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(where))
    info = {"url": "http://127.0.0.1:1/mcp", "token": "t", "pid": os.getpid(), "notebook_path": "C:\\a b\\x.ipynb"}
    path = runtime.write_runtime_file(info, "k1")
    assert path.parent == where and stat.S_IMODE(path.stat().st_mode) == 0o600
    (found,) = [r for r in runtime.discover(clean=False) if r.path == path]
    assert found.alive and found.info["notebook_path"] == "C:\\a b\\x.ipynb"


def test_runtime_file_survives_a_filesystem_without_modes(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))

    def refuse(*_args: object, **_kw: object) -> None:
        raise PermissionError("Operation not permitted (this filesystem has no modes)")

    monkeypatch.setattr(runtime.os, "chmod", refuse)
    path = runtime.write_runtime_file({"pid": os.getpid()}, "k2")
    assert json.loads(path.read_text()) == {"pid": os.getpid()}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # from the creation itself


def test_a_stale_temporary_file_never_lends_its_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    stale = tmp_path / f"{runtime.PREFIX}k3.json.tmp"
    stale.write_text("left by a crash")
    stale.chmod(0o644)
    monkeypatch.setattr(runtime.os, "chmod", lambda *a, **k: None)  # a filesystem that ignores chmod
    path = runtime.write_runtime_file({"token": "secret"}, "k3")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and not stale.exists()


def test_pid_alive_never_calls_os_kill_on_windows(monkeypatch):
    asked: list[int] = []

    def kill(*_args: object) -> None:
        raise AssertionError("os.kill(pid, 0) terminates the process on Windows")

    monkeypatch.setattr(runtime, "WINDOWS", True)
    monkeypatch.setattr(runtime.os, "kill", kill)
    monkeypatch.setattr(runtime, "_windows_pid_alive", lambda pid: asked.append(pid) or True)
    assert runtime.pid_alive(4242) and asked == [4242]
    assert not runtime.pid_alive(0) and not runtime.pid_alive(None) and asked == [4242]


def test_the_hub_loads_and_unloads_where_there_is_no_sigterm(kernel):
    out = kernel.run(
        "import signal as _sig\n_saved = _sig.SIGTERM\ndel _sig.SIGTERM\n"
        "try:\n    get_ipython().run_line_magic('load_ext', 'mcp_notebook')\n"
        "    import mcp_notebook as _m\n    print('running', _m.hub().running)\n"
        "    get_ipython().run_line_magic('unload_ext', 'mcp_notebook')\n"
        "finally:\n    _sig.SIGTERM = _saved",
        check=False,
    )
    assert "running True" in out.stdout and "Error" not in out.stdout + out.stderr, out.stdout + out.stderr


def test_windows_notebook_paths_make_labels_and_match():
    assert notebook_stem("C:\\Users\\me\\My Notebooks\\sales report.ipynb") == "sales report"
    assert notebook_stem("D:/work/x.ipynb") == "x"
    assert runtime._same_path("C:\\Users\\me\\My Notebooks\\sales report.ipynb", "My Notebooks\\sales report.ipynb")


def test_the_package_never_forks_or_calls_posix_only_process_apis():
    src = Path(__file__).resolve().parent.parent / "mcp_notebook"
    offenders = [
        f"{p.relative_to(src)}: {word}"
        for p in src.rglob("*.py")
        for word in ("os.fork(", "os.setsid(", "os.killpg(", "os.getpgid(", "multiprocessing", "signal.SIGKILL")
        if word in p.read_text()
    ]
    assert offenders == [], offenders
