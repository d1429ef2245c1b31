"""The all-kernels front as a newcomer meets it (issue #32): nb://kernels says what each kernel is
(state, last execution, an id and a label for a kernel started by plain jupyter_client), an
unknown label is named as such, a URI with CR LF is a clear -32602 that leaves every connection
usable, dropped client streams leave each hub one listen with the current set, the bridge's log
line tells the truth, ``modified`` moves after an in-place change, and the help texts explain.

Real kernels (jupyter_client) with hubs in an isolated runtime dir, the front on loopback HTTP,
raw JSON-RPC over httpx; the bridge and the CLI as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Mcp
from kernel_harness import Kernel

from mcp_notebook.allkernels.directory import LocalDirectory
from mcp_notebook.allkernels.front import KernelsFront

pytestmark = pytest.mark.timeout(300)
STATELESS = "2026-07-28"


def _kernel(runtime: Path, cwd: Path, notebook: str | None) -> Kernel:
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)}, cwd=str(cwd))
    if notebook:
        kernel.run(f"%config MCPHub.notebook_path = {str(cwd / notebook)!r}")
    kernel.load_hub()
    return kernel


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """alpha: a notebook's kernel; the other: plain jupyter_client in a directory named 'scratch'."""
    tmp = tmp_path_factory.mktemp("newcomer")
    runtime, scratch = tmp / "runtime", tmp / "scratch"
    runtime.mkdir()
    scratch.mkdir()
    kernels = {"alpha": _kernel(runtime, tmp, "alpha.ipynb"), "scratch": _kernel(runtime, scratch, None)}
    front = KernelsFront(LocalDirectory(runtime))
    url = front.serve_http()
    try:
        yield {
            "runtime": runtime,
            "kernels": kernels,
            "front": front,
            "info": {"url": url, "token": front.settings.token},
        }
    finally:
        front.close()
        for kernel in kernels.values():
            kernel.shutdown()


@pytest.fixture
def mcp(world) -> Iterator[Mcp]:
    client = Mcp(world["info"])
    client.initialize()
    try:
        yield client
    finally:
        client.close()


def _stateless(info: dict[str, Any], method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    params = {
        **params,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    headers = {
        "Authorization": f"Bearer {info['token']}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": STATELESS,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    r = httpx.post(info["url"], json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=headers)
    return r.json()


def _listing(mcp: Mcp) -> dict[str, dict[str, Any]]:
    doc = json.loads(mcp.result("resources/read", {"uri": "nb://kernels"})["contents"][0]["text"])
    return {k["label"]: k for k in doc["kernels"]}


def test_the_kernels_listing_says_what_each_kernel_is(world, mcp):
    for kernel in world["kernels"].values():
        kernel.run("listed = 1")
    listed = _listing(mcp)
    assert set(listed) == {"alpha", "scratch"}, listed  # no notebook: named after its working directory
    connection = world["kernels"]["scratch"].run("from ipykernel.connect import get_connection_file as g; print(g())")
    plain = listed["scratch"]
    assert plain["id"] == Path(connection.stdout.strip()).stem  # what `jupyter console --existing` takes
    assert plain["notebook"] is None and plain["cwd"].endswith("scratch")
    for row in listed.values():
        assert row["state"] == "idle", row
        assert isinstance(row["last_execution"], float) and row["last_execution"] >= row["started_at"], row
        assert isinstance(row["pid"], int)
    # the plain kernel is reachable by that label and by its id
    for label in ("scratch", plain["id"]):
        text = mcp.result("resources/read", {"uri": f"nb://kernels/{label}/vars/listed"})["contents"][0]["text"]
        assert json.loads(text)["repr"] == "1"
    # a busy kernel says so
    running = world["kernels"]["alpha"].execute_nowait("import time; time.sleep(3)")
    try:
        deadline = time.monotonic() + 10
        while _listing(mcp)["alpha"]["state"] != "busy":
            assert time.monotonic() < deadline, "nb://kernels never said the kernel running a cell is busy"
            time.sleep(0.1)
    finally:
        world["kernels"]["alpha"].wait_idle(running)


def test_an_unknown_kernel_label_is_named_with_the_kernels_that_exist(world, mcp):
    reply = mcp.call("resources/read", {"uri": "nb://kernels/gamma/vars/x"})
    error = reply["error"]
    assert error["code"] == -32002 and error["data"] == {"uri": "nb://kernels/gamma/vars/x"}
    assert "unknown kernel 'gamma'" in error["message"]
    assert "alpha" in error["message"] and "scratch" in error["message"]
    stateless = _stateless(world["info"], "resources/read", {"uri": "nb://kernels/al/vars/x"}, "nb://kernels/al/vars/x")
    error = stateless["error"]
    assert error["code"] == -32602 and error["data"] == {"uri": "nb://kernels/al/vars/x"}
    assert "unknown kernel 'al'" in error["message"] and "did you mean alpha" in error["message"]
    # a variable that is missing in a kernel that exists is still plain not-found
    missing = mcp.call("resources/read", {"uri": "nb://kernels/alpha/vars/nope"})["error"]
    assert missing["code"] == -32002 and "unknown kernel" not in missing["message"]


def test_a_uri_with_cr_lf_is_refused_and_every_connection_stays_usable(world, mcp):
    world["kernels"]["alpha"].run("innocent = 42")
    for bad in ("nb://kernels/alpha/vars/x\r\nX-Injected: 1", "nb://vars/x\r\n", "nb://kernels/alpha/vars/a\x00b"):
        error = mcp.call("resources/read", {"uri": bad})["error"]
        assert error["code"] == -32602 and "control character" in error["message"], error
        tool = mcp.result("tools/call", {"name": "read_resource", "arguments": {"uri": bad}})
        assert tool["isError"] and "control character" in tool["content"][0]["text"]
    # every worker thread's connection to the hub still works (more reads than there are workers)
    results = []

    def read() -> None:
        client = Mcp(world["info"])
        client.initialize()
        try:
            for _ in range(8):
                results.append(client.call("resources/read", {"uri": "nb://kernels/alpha/vars/innocent"}))
        finally:
            client.close()

    threads = [threading.Thread(target=read) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 48
    assert all("result" in r and json.loads(r["result"]["contents"][0]["text"])["repr"] == "42" for r in results), [
        r for r in results if "result" not in r
    ][:3]


def _hub_listens(kernel: Kernel) -> list[list[str]]:
    out = kernel.run(
        "import json, mcp_notebook as _m; print(json.dumps([sorted(l.uris) for l in _m.hub().server.listens()]))"
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _drop_listens(url: str, auth: str, labels: tuple[str, ...], count: int = 200) -> None:
    """``count`` client listen streams with subscriptions, each dropped right after its acknowledgement."""
    headers = {
        "Authorization": auth,
        "Accept": "text/event-stream",
        "MCP-Protocol-Version": STATELESS,
        "Mcp-Method": "subscriptions/listen",
    }
    acknowledged = []

    def listen(i: int) -> None:
        uris = [
            f"nb://kernels/{labels[i % len(labels)]}/vars/v{i}",
            f"nb://kernels/{labels[0]}/vars/w{i % 5}",
            "nb://vars/x",
        ]
        body = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "subscriptions/listen",
            "params": {
                "notifications": {"resourcesListChanged": True, "resourceSubscriptions": uris},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": STATELESS,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        with httpx.Client(timeout=20) as client, client.stream("POST", url, json=body, headers=headers) as r:
            for chunk in r.iter_bytes():
                acknowledged.append(b"acknowledged" in chunk)
                break  # dropped at once: the stream goes away with its subscriptions

    for start in range(0, count, 20):
        batch = [threading.Thread(target=listen, args=(i,)) for i in range(start, min(count, start + 20))]
        for t in batch:
            t.start()
        for t in batch:
            t.join(60)
    assert len(acknowledged) == count and all(acknowledged)


def _wait_one_listen_each(listens: dict[str, Any], seconds: float = 30) -> None:
    """Every hub back to one listen from the front, watching only what is wanted now (nb://kernel)."""
    deadline = time.monotonic() + seconds
    while True:
        hubs = {name: read() for name, read in listens.items()}
        if all(v == [["nb://kernel"]] for v in hubs.values()):
            return
        kept = {name: [len(uris) for uris in v] for name, v in hubs.items()}
        assert time.monotonic() < deadline, f"the hubs kept these listens (URIs in each): {kept}"
        time.sleep(0.5)


def test_dropped_client_streams_leave_each_hub_one_listen_with_the_current_set(world):
    _drop_listens(world["info"]["url"], f"Bearer {world['info']['token']}", ("alpha", "scratch"))
    _wait_one_listen_each({name: (lambda k=k: _hub_listens(k)) for name, k in world["kernels"].items()})
    front = world["front"]
    assert set(front.provider._listens.listening().values()) == {frozenset({"nb://kernel"})}
    assert len(front.provider._listens._tasks) == 2  # one task per hub


def test_dropped_client_streams_through_a_server_over_the_control_channel(tmp_path):
    """The same through a Jupyter server's front reaching its hub over the kernel's control channel
    (a kernel on another host): 300 dropped streams once left ~30 listens with stale sets for good."""
    from jserver import JupyterServer, load_hub, run

    server = JupyterServer(tmp_path, token="tk", extra_args=("--MCPNotebookExtension.route=control",))
    try:
        kc = server.client(server.start_session("alpha.ipynb"))
        load_hub(kc)
        count = (
            "import json, mcp_notebook as _m; print(json.dumps([sorted(l.uris) for l in _m.hub().server.listens()]))"
        )
        _drop_listens(f"{server.url}mcp-notebook/mcp", "token tk", ("alpha",))
        _wait_one_listen_each({"alpha": lambda: json.loads(run(kc, count).strip().splitlines()[-1])})
    finally:
        server.stop()


def test_the_bridge_log_line_says_what_it_serves(world, tmp_path):
    def first_lines(runtime: Path) -> str:
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        proc = subprocess.run(
            [sys.executable, "-m", "mcp_notebook", "bridge"],
            input=json.dumps(init) + "\n",
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return proc.stderr

    log = first_lines(world["runtime"])
    line = next(line for line in log.splitlines() if "connected to" in line)
    assert "every kernel on this machine" in line and "2 kernels with a hub found now" in line, log
    assert "(pid " not in line
    empty = tmp_path / "empty-runtime"
    empty.mkdir()
    line = next(line for line in first_lines(empty).splitlines() if "connected to" in line)
    assert "0 kernels with a hub found now" in line


def test_modified_moves_after_an_in_place_change_that_was_notified(world, mcp):
    kernel = world["kernels"]["alpha"]
    kernel.run("settings = {'epochs': 1, 'lr': 0.1}")
    uri = "nb://kernels/alpha/vars/settings"
    assert mcp.result("resources/subscribe", {"uri": uri}) == {}
    before = json.loads(mcp.result("resources/read", {"uri": uri})["contents"][0]["text"])["modified"]
    hub = Mcp(kernel.info())
    hub.initialize()
    try:
        hub.result("resources/subscribe", {"uri": "nb://vars/settings"})
        listed = {r["uri"]: r for r in hub.result("resources/list")["resources"]}
        assert listed["nb://vars/settings"]["annotations"]["lastModified"] == before
        time.sleep(1.1)  # modified has a resolution of one second
        kernel.run("settings['epochs'] += 1")
        seq = "import mcp_notebook as _m; _m.hub().resources.drain(); print(_m.hub().resources.journal.seq)"
        journal = kernel.run(
            "import mcp_notebook as _m; _r = _m.hub().resources; _r.drain()\n"
            "print([list(e[3]) for e in _r.journal.since(0)[0] if 'nb://vars/settings' in e[3]][-1:])"
        ).stdout
        assert "nb://vars/settings" in journal  # detected and notified
        after = json.loads(mcp.result("resources/read", {"uri": uri})["contents"][0]["text"])["modified"]
        assert after != before and after > before
        listed = {r["uri"]: r for r in hub.result("resources/list")["resources"]}
        assert listed["nb://vars/settings"]["annotations"]["lastModified"] == after
        # a cell that changes nothing announces nothing (the digest was taken again with the new time)
        start = int(kernel.run(seq).stdout.strip().splitlines()[-1])
        kernel.run("unrelated = 1")
        again = kernel.run(
            "import mcp_notebook as _m; _r = _m.hub().resources; _r.drain()\n"
            f"print(sum('nb://vars/settings' in e[3] for e in _r.journal.since({start})[0]))"
        ).stdout
        assert again.strip().splitlines()[-1] == "0"
    finally:
        hub.close()


def _help(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "mcp_notebook", *args, "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_help_texts_read_as_a_newcomer_needs_them():
    top = _help()
    commands = ["demo", "list", "bridge", "config", "autoload", "doctor"]
    for name in commands:
        assert f"    {name} " in top
        text = _help(name)
        _usage, _, rest = text.partition("\n\n")
        description = rest.split("\n\n", 1)[0].strip()
        assert description and not description.startswith(("options:", "positional arguments:")), (name, text)
    bridge = _help("bridge")
    assert "EVERY kernel" in bridge and "nb://kernels" in bridge
    assert "--kernel ID" in bridge and "--notebook PATH" in bridge and "--latest" in bridge
    assert "(default: 30.0)" in bridge
    config = _help("config")
    for host, where in (("claude-code", ".mcp.json"), ("vscode", ".vscode/mcp.json"), ("cursor", ".cursor/mcp.json")):
        assert host in config and where in config
    assert "claude_desktop_config.json" in config and "(default: notebook)" in config
    assert "(default: default)" in _help("autoload")
