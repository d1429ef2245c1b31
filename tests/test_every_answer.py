"""Every request answered (issue #45): on stdin whatever the load, batches where the
negotiated revision has them, a clear error for each request where it does not; notifications
answered nothing. A real kernel's hub behind a real ``mcp-notebook bridge`` subprocess."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_harness import Kernel
from raw_bridge import RawBridge, stateless

from mcp_notebook.bridge.stdio_input import MAX_LINE_BYTES, Ledger, RequestPool, owed_ids

pytestmark = pytest.mark.timeout(240)
SLOW_SECONDS = 0.2  # each read of test://slow: the hub's 4 workers answer 20 a second


def _init(version: str) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}
    return {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wires")


@pytest.fixture(scope="module")
def hub_kernel(runtime: Path) -> Iterator[Kernel]:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
    try:
        k.load_hub()
        k.run(
            "import time, mcp_notebook\n"
            "hx = [1, 2, 3]\n"
            f"@mcp_notebook.resource('test://slow')\ndef _slow():\n    time.sleep({SLOW_SECONDS})\n    return 'slow'\n"
        )
        yield k
    finally:
        k.shutdown()


class Flood:
    """Mixed stdin lines and the ids each one is owed an answer for."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.lines: list[bytes] = []
        self.owed: Counter[str] = Counter()  # json of an id -> answers owed
        self.n = 0

    def _id(self) -> Any:
        self.n += 1
        return f"s{self.n}" if self.n % 2 else self.n

    def owe(self, msg_id: Any) -> None:
        self.owed[json.dumps(msg_id)] += 1

    def request(self) -> dict[str, Any]:
        """A request the hub answers (a read, a ping, a list), handshake or stateless; owed."""
        msg_id = self._id()
        self.owe(msg_id)
        kind = self.rng.randrange(4)
        if kind == 0:
            return {"jsonrpc": "2.0", "id": msg_id, "method": "ping"}
        if kind == 1:
            return {"jsonrpc": "2.0", "id": msg_id, "method": "resources/read", "params": {"uri": "nb://vars/hx"}}
        if kind == 2:
            return {"jsonrpc": "2.0", "id": msg_id, "method": "resources/list"}
        return stateless(msg_id, "resources/read", {"uri": "nb://vars/hx"})

    def invalid(self) -> dict[str, Any]:
        """Not a JSON-RPC 2.0 request, with an id it is answered by; owed."""
        msg_id = self._id()
        self.owe(msg_id)
        return self.rng.choice(
            [
                {"jsonrpc": "1.0", "id": msg_id, "method": "ping"},
                {"jsonrpc": "2.0", "id": msg_id, "method": "resources/list", "params": [1]},
                {"jsonrpc": "2.0", "id": msg_id, "method": ""},
            ]
        )

    def silent(self) -> dict[str, Any]:
        """A notification or a response: owed nothing."""
        return self.rng.choice(
            [
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "nobody"}},
                {"jsonrpc": "2.0", "id": f"r{self.rng.randrange(10**9)}", "result": {}},
            ]
        )

    def batch(self) -> list[Any]:
        items: list[Any] = []
        for _ in range(self.rng.randint(1, 5)):
            pick = self.rng.randrange(3)
            items.append(self.request() if pick == 0 else self.invalid() if pick == 1 else self.silent())
        return items

    def add(self, value: Any) -> None:
        self.lines.append(json.dumps(value).encode())

    def build(self, count: int) -> None:
        for _ in range(count):
            pick = self.rng.randrange(10)
            if pick < 3:
                self.add(self.request())
            elif pick < 6:
                self.add(self.batch())
            elif pick == 6:
                self.add(self.invalid())
            elif pick == 7:
                self.add(self.silent())
            else:  # unreadable: answered with id null, which no owed id is
                self.lines.append(self.rng.choice([b"{not json", b"[1, 2", b"\xff\xfe", b"[]", b"42"]))


def _answers(bridge: RawBridge) -> Counter[str]:
    """Answers by id in everything the bridge wrote (arrays included), once it has exited."""
    while bridge._pump(2.0):
        pass
    seen: Counter[str] = Counter()
    for line in bridge.raw_out:
        doc = json.loads(line)
        for item in doc if isinstance(doc, list) else [doc]:
            if isinstance(item, dict) and ("result" in item or "error" in item):
                seen[json.dumps(item.get("id"))] += 1
    return seen


@pytest.mark.parametrize("args", [["--latest"], []], ids=["hub", "front"])
def test_a_stdin_flood_gets_every_request_answered_once(runtime, hub_kernel, args):
    """Requests, batches (2025-03-26 has them), invalid lines, notifications, oversized lines, then
    slow reads still in flight when stdin ends: each request id is answered exactly once, nothing
    else is answered, and the bridge exits cleanly. (front: no selector, every kernel's front in the
    bridge's process, the stdio carrier.)"""
    flood = Flood(seed=45)
    flood.build(600)
    huge_id = "huge"
    flood.owe(huge_id)
    huge = b'{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"x":"' + b"x" * (MAX_LINE_BYTES + 10) + b'"}}'
    flood.lines.insert(300, huge)
    for _ in range(120):  # more than the hub's workers finish before the bridge stops waiting
        slow_id = flood._id()
        flood.owe(slow_id)
        flood.add({"jsonrpc": "2.0", "id": slow_id, "method": "resources/read", "params": {"uri": "test://slow"}})
    bridge = RawBridge(runtime, *args)
    try:
        init = bridge.ask(_init("2025-03-26"))
        assert init["result"]["protocolVersion"] == "2025-03-26"
        bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for line in flood.lines:
            bridge.send_raw(line)
    finally:
        assert bridge.close(timeout=120) == 0
    seen = _answers(bridge)
    seen.pop(json.dumps("init"))
    seen.pop("null", None)  # the unreadable lines' answers
    assert sum(flood.owed.values()) > 700
    missing = {k: n - seen[k] for k, n in flood.owed.items() if seen[k] < n}
    extra = {k: n - flood.owed[k] for k, n in seen.items() if n > flood.owed[k]}
    assert not missing, f"{len(missing)} ids unanswered: {list(missing)[:10]}"
    assert not extra, f"answers never owed (or twice): {list(extra)[:10]}"


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_batch_is_refused_per_request_where_the_revision_forbids_it(runtime, hub_kernel, version):
    bridge = RawBridge(runtime, "--latest")
    try:
        assert bridge.ask(_init(version))["result"]["protocolVersion"] == version
        bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ping = {"jsonrpc": "2.0", "id": "b1", "method": "ping"}
        read = {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "nb://vars/hx"}}
        bridge.send([ping, {"jsonrpc": "2.0", "method": "notifications/progress"}, read])
        for msg_id in ("b1", 2):
            err = bridge.reply(msg_id)["error"]
            assert err["code"] == -32600 and f"not part of MCP {version}" in err["message"], err
        bridge.send([stateless("b3", "resources/read", {"uri": "nb://vars/hx"})])  # the stateless era has none
        assert "not part of MCP 2026-07-28" in bridge.reply("b3")["error"]["message"]
        assert "[1, 2, 3]" in bridge.ask(read)["result"]["contents"][0]["text"]  # one at a time: answered
    finally:
        assert bridge.close() == 0
    assert not bridge.unread(), bridge.unread()


def test_the_ledger_counts_each_id_as_often_as_it_is_owed_and_settles_once():
    ledger = Ledger()
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"}]
    ledger.owe(
        owed_ids(batch) + owed_ids({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + owed_ids({"id": "1", "method": "p"})
    )
    assert owed_ids({"jsonrpc": "2.0", "id": 9, "result": {}}) == []  # a response is owed nothing
    assert owed_ids({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen"}) == []  # a cancel may end it
    assert ledger.paid([{"jsonrpc": "2.0", "id": 1, "result": {}}, {"jsonrpc": "2.0", "method": "n", "id": "1"}])
    assert sorted(map(str, ledger.settle())) == ["1", "1"]  # id 1 once more, and "1" (not the int)
    assert ledger.settle() == [] and not ledger.paid({"jsonrpc": "2.0", "id": 1, "result": {}})


def test_the_request_pool_reuses_an_idle_thread_and_still_answers_busy_beyond_its_bounds():
    """Requests one after another run on one thread (no thread started per request); the bounds
    hold (``threads`` at once, ``waiting`` queued, the rest answered busy at once); ``stop`` ends
    the idle workers."""
    ran: list[tuple[Any, str]] = []
    busy: list[Any] = []
    release = threading.Event()
    pool = RequestPool(busy.append, lambda msg, exc: None, threads=2, waiting=1, idle=30.0)

    def job(msg: Any) -> None:
        if msg == "hold":
            release.wait(10)
        ran.append((msg, threading.current_thread().name + str(threading.get_ident())))

    for n in range(3):
        pool.submit(job, n)
        pool.drain(5)
    assert [m for m, _ in ran] == [0, 1, 2] and len({t for _, t in ran}) == 1  # one thread, reused
    assert pool.workers == 1 and pool.idle == 1
    for msg in ("hold", "hold", "queued", "over"):  # two run (one was idle), one waits, one is refused
        pool.submit(job, msg)
    assert busy == ["over"]
    release.set()
    pool.drain(5)
    assert sorted(m for m, _ in ran[3:]) == ["hold", "hold", "queued"]
    pool.stop()
    for _ in range(500):  # bounded: the idle workers end at once
        if pool.workers == 0:
            break
        time.sleep(0.01)
    assert pool.workers == 0
