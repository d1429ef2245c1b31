"""The JupyterLab extension's comm target, driven without a browser: a real kernel through
jupyter_client plays the frontend (comm_open / comm_msg / comm_close, on a subshell too)."""

from __future__ import annotations

import json
import queue
import time
import uuid
import warnings
from typing import Any

import anyio
import pytest
from conftest import Mcp
from kernel_harness import Kernel
from sdk import connect

TARGET = "mcp_notebook.document"


class Frontend:
    """A comm peer speaking the extension's messages over a jupyter_client connection."""

    def __init__(self, kernel: Kernel):
        self.kc = kernel.kc
        self.comm_id = uuid.uuid4().hex
        self.inbox: list[dict[str, Any]] = []  # comm_msg data for this comm, in order
        self.subshell_id: str | None = None
        self.closed = False
        self.requests = 0  # state requests sent, to match each answer

    def _shell(self, msg_type: str, content: dict[str, Any]) -> None:
        msg = self.kc.session.msg(msg_type, content)
        if self.subshell_id is not None:  # as JupyterLab 4.4+ does with comms over subshells
            msg["header"]["subshell_id"] = self.subshell_id
        self.kc.shell_channel.send(msg)

    def open(self, path: str = "analysis.ipynb", subshell_id: str | None = None) -> None:
        self.subshell_id = subshell_id
        self._shell("comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": {"version": 1, "path": path}})

    def send(self, data: dict[str, Any]) -> None:
        self._shell("comm_msg", {"comm_id": self.comm_id, "data": data})

    def close(self) -> None:
        self._shell("comm_close", {"comm_id": self.comm_id, "data": {}})

    def pump(self, timeout: float) -> None:
        """Read iopub for up to ``timeout`` seconds, keeping this comm's messages."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(0.01, min(0.2, deadline - time.monotonic())))
            except queue.Empty:
                return
            content = msg["content"]
            if content.get("comm_id") != self.comm_id:
                continue
            if msg["msg_type"] == "comm_msg":
                self.inbox.append(content["data"])
            elif msg["msg_type"] == "comm_close":
                self.closed = True

    def wait(self, predicate: Any, timeout: float = 30) -> dict[str, Any]:
        """The first new message matching ``predicate`` (bounded)."""
        seen = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for data in self.inbox[seen:]:
                if predicate(data):
                    return data
            seen = len(self.inbox)
            self.pump(0.5)
        raise TimeoutError(f"no matching comm message within {timeout}s; got {self.inbox[-3:]}")

    def wait_closed(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            self.pump(0.5)
        assert self.closed, "the kernel did not close the comm"

    def state(self) -> dict[str, Any]:
        """The hub's state now: the answer to this request, not a push queued before it."""
        self.inbox.clear()
        self.requests += 1
        self.send({"type": "command", "command": "state", "request": f"r{self.requests}"})
        return self.wait(lambda d: d.get("type") == "state" and d.get("request") == f"r{self.requests}")["state"]


def notebook(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": list(cells)}


def markdown(cell_id: str, source: str) -> dict[str, Any]:
    return {"id": cell_id, "cell_type": "markdown", "metadata": {}, "source": source}


def code(cell_id: str, source: str, outputs: list[Any] | None = None, count: int | None = None) -> dict[str, Any]:
    return {
        "id": cell_id,
        "cell_type": "code",
        "metadata": {},
        "source": source,
        "execution_count": count,
        "outputs": outputs or [],
    }


def read_json(mcp: Mcp, uri: str) -> dict[str, Any]:
    return json.loads(mcp.result("resources/read", {"uri": uri})["contents"][0]["text"])


@pytest.fixture(scope="module")
def frontend(kernel: Kernel, hub: dict[str, Any]) -> Frontend:
    fe = Frontend(kernel)
    fe.open()
    fe.wait(lambda d: d.get("type") == "state")
    return fe


def test_without_the_hub_the_kernel_refuses_the_comm(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        fe = Frontend(k)
        fe.open()
        fe.wait_closed()  # no target: ipykernel closes the comm, the panel offers to load the hub
    finally:
        k.shutdown()


def test_state_on_open_has_the_endpoint_but_never_the_token(frontend, hub):
    state = frontend.state()
    assert state["running"] is True and state["url"] == hub["url"]
    assert "2025-11-25" in state["revisions"]
    assert hub["token"] not in json.dumps(frontend.inbox)


def test_state_lists_sdk_clients_of_both_eras(hub, frontend):
    async def go(mode: str) -> list[dict[str, Any]]:
        async with connect(hub, mode) as (client, _inbox):
            await client.read_resource("nb://kernel")
            return await anyio.to_thread.run_sync(frontend.state)

    legacy = anyio.run(go, "legacy")
    assert any(c["session"] != "stateless" and c["version"] != "2026-07-28" for c in legacy["clients"])
    auto = anyio.run(go, "auto")  # the SDK's default: stateless 2026-07-28, known by its clientInfo
    stateless = [c for c in auto["clients"] if c["session"] == "stateless"]
    assert stateless and stateless[0]["version"] == "2026-07-28" and stateless[0]["client"] not in ("", "?"), auto


def test_pushed_document_reaches_subscribers_and_readers(kernel, hub, frontend):
    doc = notebook(markdown("intro", "# Unsaved title\nnot on disk"), code("c1", "x = 1", count=1))

    async def go():
        async with connect(hub, "legacy") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://notebook")
            frontend.send({"type": "document", "nb": doc, "path": "analysis.ipynb", "dirty": True})
            await inbox.wait_for(lambda i: "nb://notebook" in i.updated, timeout=30)
            read = await client.read_resource("nb://notebook")
            return json.loads(read.contents[0].text)

    got = anyio.run(go)
    assert got["source"] == "jupyterlab"
    assert [c["id"] for c in got["cells"]] == ["intro", "c1"]
    assert got["cells"][0]["source"].startswith("# Unsaved title")


def test_active_cell_and_selection(kernel, hub, frontend, mcp):
    kernel.run("y_sel = 2")  # a real execution to link (capture keeps the request's cellId when sent)
    doc = notebook(
        markdown("intro", "# Title"),
        code("c1", "x = 1", [{"output_type": "stream", "name": "stdout", "text": "hello\n"}], 1),
        code("c2", "1/0", [{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero"}], 2),
    )
    frontend.send({"type": "document", "nb": doc})
    before = read_json(mcp, "nb://notebook/active")
    assert "nb://notebook/active" in {r["uri"] for r in mcp.result("resources/list")["resources"]}

    async def go():
        async with connect(hub, "legacy") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://notebook/active")
            frontend.send({"type": "active", "active": "c2", "selected": ["c1", "c2"]})
            await inbox.wait_for(lambda i: "nb://notebook/active" in i.updated, timeout=30)
            read = await client.read_resource("nb://notebook/active")
            return json.loads(read.contents[0].text)

    active = anyio.run(go)
    assert before.get("available") is False or before.get("active") is None or before["active"]["id"] != "c2"
    assert active["available"] is True and active["source"] == "jupyterlab"
    assert active["active"]["id"] == "c2" and active["active"]["source"] == "1/0"
    assert active["active"]["outputs"][0]["ename"] == "ZeroDivisionError"
    assert [c["id"] for c in active["selected"]] == ["c1", "c2"]
    assert active["selected"][0]["outputs"][0]["text"] == "hello\n"
    assert active["active"]["uri"] == "nb://notebook/cells/c2"


def test_hide_and_show_a_variable_from_the_panel(kernel, frontend, mcp):
    kernel.run("panel_value = 41")
    assert "panel_value" in {v["name"] for v in read_json(mcp, "nb://vars")["variables"]}
    frontend.inbox.clear()
    frontend.send({"type": "command", "command": "hide", "name": "panel_value"})
    result = frontend.wait(lambda d: d.get("type") == "result")
    assert result["ok"] is True, result
    assert "panel_value" not in {v["name"] for v in read_json(mcp, "nb://vars")["variables"]}
    rows = {v["name"]: v for v in frontend.state()["variables"]}
    assert rows["panel_value"]["hidden"] is True
    assert "panel_value" in kernel.run("%mcp").stdout  # the same state as %mcp hide
    frontend.inbox.clear()
    frontend.send({"type": "command", "command": "show", "name": "panel_value"})
    assert frontend.wait(lambda d: d.get("type") == "result")["ok"] is True
    assert "panel_value" in {v["name"] for v in read_json(mcp, "nb://vars")["variables"]}


def test_two_views_on_one_kernel_the_one_the_user_moves_in_wins(kernel, frontend, mcp):
    other = Frontend(kernel)
    other.open("second-view.ipynb")
    other.wait(lambda d: d.get("type") == "state")
    try:
        frontend.send({"type": "document", "nb": notebook(markdown("a1", "view A"))})
        other.send({"type": "document", "nb": notebook(markdown("b1", "view B"))})
        other.state()
        assert read_json(mcp, "nb://notebook")["cells"][0]["id"] == "b1"  # the latest push
        frontend.send({"type": "active", "active": "a1", "selected": ["a1"]})
        frontend.state()
        assert read_json(mcp, "nb://notebook")["cells"][0]["id"] == "a1"  # the user moved in view A
        assert read_json(mcp, "nb://notebook/active")["active"]["source"] == "view A"
    finally:
        other.close()
        other.pump(0.5)


def test_bad_messages_get_an_answer_and_the_kernel_keeps_going(kernel, frontend):
    frontend.inbox.clear()
    frontend.send({"type": "document", "nb": "not a notebook"})
    bad = frontend.wait(lambda d: d.get("type") == "result")
    assert bad["ok"] is False and "cells" in bad["message"]
    frontend.inbox.clear()
    frontend.send({"type": "command", "command": "hide", "name": ""})
    assert frontend.wait(lambda d: d.get("type") == "result")["ok"] is False
    assert kernel.run("print(1 + 1)").stdout.strip() == "2"


def test_messages_on_a_subshell_are_handled_while_a_cell_runs(kernel, hub, mcp):
    """ipykernel 7 + JupyterLab 4.4+: a comm opened on a subshell is served while the main shell is busy."""
    kernel.kc.kernel_info()
    features = kernel.kc.get_shell_msg(timeout=30)["content"].get("supported_features") or []
    if "kernel subshells" not in features:
        pytest.skip("this ipykernel has no subshells (comms are served between cells)")
    subshell = _control(kernel, "create_subshell_request", {})["subshell_id"]
    fe = Frontend(kernel)
    fe.open("busy.ipynb", subshell_id=subshell)
    fe.wait(lambda d: d.get("type") == "state")
    fe.send({"type": "command", "command": "hide", "name": "y_sel"})  # a main-thread command in between
    assert fe.wait(lambda d: d.get("type") == "result")["ok"] is True
    msg_id = kernel.execute_nowait("import time as _t\nfor _ in range(600):\n    _t.sleep(0.1)")
    try:
        time.sleep(0.5)  # let the cell start
        fe.send({"type": "document", "nb": notebook(markdown("mid", "typed while the kernel is busy"))})
        deadline = time.monotonic() + 30
        cells: list[Any] = []
        while time.monotonic() < deadline:
            cells = read_json(mcp, "nb://notebook").get("cells", [])
            if cells and cells[0]["id"] == "mid":
                break
            time.sleep(0.2)
        assert cells and cells[0]["source"] == "typed while the kernel is busy"
        state = fe.state()  # answered on the subshell, mid-cell
        assert state["running"] is True
    finally:
        kernel.km.interrupt_kernel()
        kernel.wait_idle(msg_id, timeout=60)
    fe.send({"type": "command", "command": "show", "name": "y_sel"})
    assert fe.wait(lambda d: d.get("type") == "result")["ok"] is True
    fe.close()
    fe.pump(1)


def test_stop_and_start_from_the_panel_replays_the_document(kernel, frontend, mcp):
    doc = notebook(markdown("keep", "kept across stop/start"))
    frontend.send({"type": "document", "nb": doc})
    frontend.state()
    frontend.inbox.clear()
    frontend.send({"type": "command", "command": "stop"})
    assert frontend.wait(lambda d: d.get("type") == "result")["ok"] is True
    assert frontend.state()["running"] is False
    frontend.inbox.clear()
    frontend.send({"type": "command", "command": "start"})
    started = frontend.wait(lambda d: d.get("type") == "result")
    assert started["ok"] is True and "token" not in started["message"].split("(")[0]
    info = kernel.info()
    assert frontend.state()["url"] == info["url"]
    fresh = Mcp(info)
    try:
        fresh.initialize()
        got = json.loads(fresh.result("resources/read", {"uri": "nb://notebook"})["contents"][0]["text"])
        assert got["source"] == "jupyterlab" and got["cells"][0]["id"] == "keep"
    finally:
        fresh.close()


def test_closing_the_comm_forgets_its_document_and_unload_closes_the_rest(kernel):
    info = kernel.info()
    fe = Frontend(kernel)
    fe.open("other.ipynb")
    fe.wait(lambda d: d.get("type") == "state")
    fe.send({"type": "document", "nb": notebook(markdown("gone", "closing soon"))})
    fe.state()
    client = Mcp(info)
    try:
        client.initialize()
        read = lambda: json.loads(client.result("resources/read", {"uri": "nb://notebook"})["contents"][0]["text"])  # noqa: E731
        assert read()["cells"][0]["id"] == "gone"
        fe.close()
        time.sleep(0.5)
        kernel.run("pass")  # the close is handled before this cell
        doc = read()
        assert not doc.get("cells") or doc["cells"][0]["id"] != "gone"
    finally:
        client.close()
    survivor = Frontend(kernel)
    survivor.open()
    survivor.wait(lambda d: d.get("type") == "state")
    kernel.execute_nowait("%unload_ext mcp_notebook")
    survivor.wait_closed()  # the panel falls back to "not loaded"
    kernel.kc.get_shell_msg(timeout=60)  # the unload's execute_reply
    assert "Error" not in kernel.run("print('still fine')").stdout


def _control(kernel: Kernel, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    msg = kernel.kc.session.msg(msg_type, content)
    kernel.kc.control_channel.send(msg)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            reply = kernel.kc.control_channel.get_msg(timeout=1)
        except queue.Empty:
            continue
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply["content"]
    raise TimeoutError(msg_type)
