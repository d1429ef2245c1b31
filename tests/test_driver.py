"""The exchange driver (transport/driver.py) against a real McpServer: exactly one final call per
exchange, the carrier's slot back on every path (a handler that raises, a pool shut down), the
stream closed on cancel and when the client goes."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_http_transport import hello_provider

from mcp_notebook.protocol.exchange import HttpReply, HttpRequest, ServerSettings
from mcp_notebook.protocol.server import McpServer
from mcp_notebook.protocol.streams import Stream
from mcp_notebook.providers.custom import CustomProvider
from mcp_notebook.resources import Resources
from mcp_notebook.transport.driver import ExchangeDriver, Port

TOKEN = "tok"
VERSION = "2025-11-25"


class SlotPort(Port):
    """A carrier's port that holds one slot per exchange and records every call (a carrier, not a peer)."""

    keepalive = None

    def __init__(self, slots: set[SlotPort]):
        self.slots = slots
        slots.add(self)
        self.calls: list[tuple[str, Any]] = []
        self.finals = 0
        self.after_final = 0

    def _call(self, name: str, value: Any, final: bool) -> None:
        if self.finals:
            self.after_final += 1
        self.calls.append((name, value))
        if final:
            self.finals += 1
            self.slots.discard(self)

    def send_reply(self, reply: HttpReply) -> None:
        self._call("reply", reply, True)

    def open_stream(self, status: int, headers: dict[str, str], events: bytes, end: bool) -> None:
        self._call("open", (status, events), end)

    def send_events(self, events: bytes, end: bool) -> None:
        self._call("events", events, end)

    @property
    def status(self) -> int:
        kind, value = self.calls[0]
        return value.status if kind == "reply" else value[0]


class Boom(Exception):
    pass


class BadListing(CustomProvider):
    """A provider with a bug: asking whether its listing is pure raises."""

    @property
    def list_is_pure(self) -> bool:  # type: ignore[override]
        raise Boom("a provider bug")


class RaisingServer(McpServer):
    """A server whose handler has a bug on reads (McpServer.handle itself never raises)."""

    def handle(self, req: HttpRequest) -> HttpReply:
        if b"resources/read" in req.body:
            raise Boom("a handler bug")
        return super().handle(req)


def headers(**extra: str) -> dict[str, str]:
    h = {
        "host": "127.0.0.1",
        "authorization": f"Bearer {TOKEN}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    h.update(extra)
    return h


def post(body: dict[str, Any], **extra: str) -> HttpRequest:
    return HttpRequest("POST", headers(**extra), json.dumps(body).encode())


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


class Rig:
    """A real server, a driver on a private loop, a pool; run() drives coroutines to the end."""

    def __init__(self, server: McpServer, pool: ThreadPoolExecutor):
        self.server = server
        self.pool = pool
        self.loop = asyncio.new_event_loop()
        self.driver = ExchangeDriver(server, pool)
        self.slots: set[SlotPort] = set()

    def start(self, port: SlotPort, req: HttpRequest) -> Any:
        """driver.start on the loop, as a carrier calls it."""

        async def go() -> Any:
            return self.driver.start(port, req)

        return self.loop.run_until_complete(go())

    def port(self) -> SlotPort:
        return SlotPort(self.slots)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 10))

    async def until(self, cond: Any) -> None:
        for _ in range(500):  # bounded: 5 s at most
            if cond():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("condition never held")

    def session(self) -> str:
        port = self.port()
        assert self.start(port, post(INIT)) is None  # initialize is answered inline
        reply = port.calls[0][1]
        return reply.headers["Mcp-Session-Id"]


@pytest.fixture
def rig() -> Iterator[Rig]:
    resources = Resources([hello_provider()])
    pool = ThreadPoolExecutor(2)
    r = Rig(McpServer(resources, ServerSettings(token=TOKEN)), pool)
    try:
        yield r
    finally:
        r.server.close()
        r.loop.run_until_complete(asyncio.sleep(0))
        r.loop.close()
        pool.shutdown()
        resources.close()


def _read(rid: int, session: str) -> HttpRequest:
    body = {"jsonrpc": "2.0", "id": rid, "method": "resources/read", "params": {"uri": "test://hello"}}
    return post(body, **{"mcp-session-id": session, "mcp-protocol-version": VERSION})


def test_every_path_makes_exactly_one_final_call(rig):
    session = rig.session()
    refused = rig.port()
    rig.start(refused, HttpRequest("POST", {"host": "127.0.0.1"}, b"{}"))  # no token
    inline = rig.port()
    rig.start(inline, post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, **{"mcp-session-id": session}))
    pooled = [rig.port() for _ in range(8)]
    exchanges = [rig.start(p, _read(10 + i, session)) for i, p in enumerate(pooled)]
    assert all(ex is not None for ex in exchanges)  # a custom resource may run user code: the pool

    rig.run(rig.until(lambda: all(p.finals for p in pooled)))
    rig.run(asyncio.sleep(0.05))  # nothing more arrives late
    assert refused.status == 401 and inline.status == 200
    for port in [refused, inline, *pooled]:
        assert port.finals == 1 and port.after_final == 0
    assert all(json.loads(p.calls[0][1].body)["result"]["contents"][0]["text"] == "hello" for p in pooled)
    assert rig.slots == set()


def test_a_handler_that_raises_gets_a_500_and_its_slot_back():
    resources = Resources([hello_provider()])
    pool = ThreadPoolExecutor(1)
    r = Rig(RaisingServer(resources, ServerSettings(token=TOKEN)), pool)
    try:
        session = r.session()
        port = r.port()
        assert r.start(port, _read(5, session)) is not None
        r.run(r.until(lambda: port.finals))
        assert port.status == 500 and port.finals == 1 and r.slots == set()
    finally:
        r.server.close()
        r.loop.close()
        pool.shutdown()
        resources.close()


def test_a_bug_before_the_pool_and_a_shut_pool_still_answer_once():
    resources = Resources([hello_provider(BadListing)])
    pool = ThreadPoolExecutor(1)
    r = Rig(McpServer(resources, ServerSettings(token=TOKEN)), pool)
    try:
        session = r.session()
        buggy = r.port()
        listing = {"jsonrpc": "2.0", "id": 3, "method": "resources/list"}
        ex = r.start(buggy, post(listing, **{"mcp-session-id": session, "mcp-protocol-version": VERSION}))
        assert ex is None and buggy.status == 500 and buggy.finals == 1  # answer_inline raised
        pool.shutdown()
        stopping = r.port()
        assert r.start(stopping, _read(4, session)) is None
        assert stopping.status == 503 and stopping.finals == 1
        assert r.slots == set()
    finally:
        r.server.close()
        r.loop.close()
        resources.close()


class HeldServer(McpServer):
    """A server whose reads wait until the test lets them go (a busy worker)."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.go = threading.Event()

    def handle(self, req: HttpRequest) -> HttpReply:
        if b"resources/read" in req.body:
            self.go.wait(10)
        return super().handle(req)


def test_a_request_still_queued_when_the_pool_stops_is_told_the_server_is_stopping():
    resources = Resources([hello_provider()])
    pool = ThreadPoolExecutor(1)
    r = Rig(HeldServer(resources, ServerSettings(token=TOKEN)), pool)
    try:
        session = r.session()
        running, queued = r.port(), r.port()
        assert r.start(running, _read(6, session)) is not None  # the one worker is busy with it
        assert r.start(queued, _read(7, session)) is not None  # waits in the pool's queue
        pool.shutdown(wait=False, cancel_futures=True)
        r.server.go.set()
        r.run(r.until(lambda: running.finals and queued.finals))
        assert running.status == 200 and queued.status == 503, (running.calls, queued.calls)
        assert b"stopping" in queued.calls[0][1].body and r.slots == set()
    finally:
        r.server.go.set()
        r.server.close()
        r.loop.close()
        pool.shutdown()
        resources.close()


def _open_get_stream(rig: Rig) -> tuple[SlotPort, Any, Stream]:
    session = rig.session()
    port = rig.port()
    req = HttpRequest("GET", headers(**{"mcp-session-id": session, "mcp-protocol-version": VERSION}))
    ex = rig.start(port, req)
    assert ex is not None
    rig.run(rig.until(lambda: ex.stream is not None))
    assert port.calls[0][0] == "open" and not port.finals
    stream = ex.stream
    assert stream is not None
    return port, ex, stream


def test_cancel_closes_the_stream_and_ends_the_exchange_once(rig):
    port, ex, stream = _open_get_stream(rig)
    assert len(rig.driver.tasks) == 1 and rig.server.sessions()[0].streams == [stream]
    stream.push({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    rig.run(rig.until(lambda: any(kind == "events" for kind, _ in port.calls)))
    ex.cancel()
    assert stream.closed and port.finals == 1 and rig.slots == set()
    assert port.calls[-1] == ("events", b"")
    assert rig.server.sessions()[0].streams == []  # stream_closed: the session let it go
    ex.cancel()  # twice: nothing more
    rig.run(rig.until(lambda: not rig.driver.tasks))  # the pump ended
    assert port.finals == 1 and port.after_final == 0


def test_a_client_gone_ends_the_stream_and_the_server_forgets_it(rig):
    port, ex, stream = _open_get_stream(rig)
    port.gone = True
    assert ex.wake is not None
    ex.wake.set()
    rig.run(rig.until(lambda: port.finals))
    assert stream.closed and rig.slots == set() and not rig.driver.tasks
    assert rig.server.sessions()[0].streams == []


def test_a_server_that_closes_sends_the_streams_final_events(rig):
    session = rig.session()
    port = rig.port()
    listen = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "subscriptions/listen",
        "params": {"resourceUris": ["test://hello"]},
    }
    ex = rig.start(port, post(listen, **{"mcp-session-id": session}))
    assert ex is not None
    rig.run(asyncio.sleep(0.05))
    rig.server.close()
    rig.run(rig.until(lambda: port.finals))
    assert port.finals == 1 and rig.slots == set()


class BrokenOpenPort(SlotPort):
    """A port with a bug in opening a stream."""

    def open_stream(self, status: int, headers: dict[str, str], events: bytes, end: bool) -> None:
        super().open_stream(status, headers, events, end)
        if not end:
            raise Boom("a port bug")


def test_a_port_that_fails_to_open_a_stream_still_lets_the_server_go_of_it(rig):
    session = rig.session()
    port = BrokenOpenPort(rig.slots)
    req = HttpRequest("GET", headers(**{"mcp-session-id": session, "mcp-protocol-version": VERSION}))
    ex = rig.start(port, req)
    assert ex is not None
    rig.run(rig.until(lambda: port.finals))
    assert port.calls[-1] == ("events", b"") and port.finals == 1 and rig.slots == set()
    assert ex.stream is not None and ex.stream.closed and rig.server.sessions()[0].streams == []
    assert not rig.driver.tasks


def test_the_smallest_carrier_in_design_answers(rig):
    """docs/DESIGN.md's PipePort, run as written: a new carrier really is that small."""
    import io
    import re
    from pathlib import Path

    design = (Path(__file__).resolve().parent.parent / "docs" / "DESIGN.md").read_text()
    code = re.search(r"```python\n(class PipePort\(Port\):.*?)```", design, re.S)
    assert code is not None
    out = io.BytesIO()
    names = {"Port": Port, "ExchangeDriver": ExchangeDriver, "HttpRequest": HttpRequest, "server": rig.server}
    names.update(pool=rig.pool, out=out, headers=headers(), body=json.dumps(INIT).encode())

    async def go() -> None:
        exec(compile(code.group(1), "DESIGN.md", "exec"), names)

    rig.run(go())
    assert json.loads(out.getvalue())["result"]["serverInfo"]["name"] == "mcp-notebook"


class SlowPort(SlotPort):
    """A port whose stream writes each return a future the test resolves (a client slow to read)."""

    def __init__(self, slots: set[SlotPort], loop: asyncio.AbstractEventLoop):
        super().__init__(slots)
        self.loop = loop
        self.pending: list[asyncio.Future[None]] = []

    def send_events(self, events: bytes, end: bool) -> Any:
        super().send_events(events, end)
        if end:
            return None
        self.pending.append(self.loop.create_future())
        return self.pending[-1]


def test_an_event_pushed_while_the_pump_waits_is_written_by_the_waker_and_back_pressure_holds(rig):
    """The waker writes an event itself (in the loop pass it runs in, not a pass later in the pump),
    and never while a write is still pending: the next event waits until the client took the last."""
    session = rig.session()
    port = SlowPort(rig.slots, rig.loop)
    ex = rig.start(port, HttpRequest("GET", headers(**{"mcp-session-id": session, "mcp-protocol-version": VERSION})))
    assert ex is not None
    rig.run(rig.until(lambda: ex.parked))
    stream = ex.stream
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "one"}}
    written_in_callback: list[bool] = []

    def check() -> None:  # queued right after the waker's callback: the write must be there already
        written_in_callback.append(any(kind == "events" and b"one" in value for kind, value in port.calls))

    threading.Thread(target=lambda: (stream.push(note), rig.loop.call_soon_threadsafe(check))).start()
    rig.run(rig.until(lambda: written_in_callback))
    assert written_in_callback == [True]
    stream.push({**note, "params": {"level": "info", "data": "two"}})  # the first write still pending
    rig.run(asyncio.sleep(0.05))
    assert [v for k, v in port.calls if k == "events" and b"two" in v] == []
    port.pending[0].set_result(None)  # the client took the first
    rig.run(rig.until(lambda: any(kind == "events" and b"two" in value for kind, value in port.calls)))
    for future in port.pending:
        if not future.done():
            future.set_result(None)
    ex.cancel()
    rig.run(rig.until(lambda: not rig.driver.tasks))
    assert port.finals == 1 and port.after_final == 0
