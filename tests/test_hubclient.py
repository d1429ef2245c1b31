"""The one client of a hub (mcp_notebook/hubclient/, issue #33) against real hubs on 127.0.0.1 (an
McpServer behind the loopback HTTP carrier, restarted on its port or another, with its token or a
new one): its retries, keep-alive, timeouts, HTTPS and errors, through each face and each caller."""

from __future__ import annotations

import asyncio
import io
import json
import os
import queue
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from slow_relay import SlowRelay
from tls_relay import AsyncTlsRelay, certificate

from mcp_notebook.allkernels.upstream import HubGone, Listens, call, message
from mcp_notebook.bridge.hub_selection import Selector
from mcp_notebook.bridge.stdio import NO_HUB, Bridge, Upstream
from mcp_notebook.hubclient import blocking
from mcp_notebook.hubclient.address import HubAddress
from mcp_notebook.hubclient.aio import ConnectionPool, request
from mcp_notebook.hubclient.rules import Endpoint, UpstreamError
from mcp_notebook.protocol.server import McpServer, ServerSettings
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.resources import Resources
from mcp_notebook.runtime import HubRecord
from mcp_notebook.transport.server import HttpTransport

SLOW_SECONDS = 3.0


def _provider() -> CustomProvider:
    custom = CustomProvider()
    for uri, fn in (("test://hello", lambda: "hello"), ("test://slow", lambda: time.sleep(SLOW_SECONDS) or "late")):
        custom.register(
            make_registration(uri, fn, name=uri[7:], title=None, description=None, mime_type=None, annotations=None)
        )
    return custom


class Hub:
    """A real hub on 127.0.0.1 that can be restarted (same port or another, same token or not)."""

    def __init__(self, token: str, port: int = 0):
        self.resources = Resources([_provider()])
        self.token = token
        self.transport = HttpTransport(
            McpServer(self.resources, ServerSettings(token=token)), "127.0.0.1", port, 100_000
        )
        self.transport.start()

    @property
    def url(self) -> str:
        return self.transport.url

    @property
    def port(self) -> int:
        return self.transport.port

    def stop(self) -> None:
        self.transport.stop()
        self.resources.close()

    def restart(self, token: str | None = None, same_port: bool = True) -> Hub:
        self.stop()
        return Hub(token or self.token, self.port if same_port else 0)


@pytest.fixture
def hubs():
    """Every hub a test starts, stopped at its end; the client's idle connections closed."""
    started: list[Hub] = []

    def start(token: str = "t1") -> Hub:
        started.append(Hub(token))
        return started[-1]

    yield start, started
    for hub in started:
        hub.stop()
    blocking.close_connections()


def _text(result: dict[str, Any]) -> str:
    return result["contents"][0]["text"]


def _idle(hub: Hub) -> list[Any]:
    return [conn for conn, _ in blocking._POOL._idle.get(Endpoint.of(hub.url).key, [])]


# -- the blocking face: the front's call ---------------------------------------------------------
def test_a_connection_the_hub_closed_is_replaced_once_and_a_gone_hub_is_a_clear_error(hubs):
    start, started = hubs
    hub = start()
    address = HubAddress(hub.url, hub.token)
    assert _text(call(address, "resources/read", {"uri": "test://hello"})) == "hello"
    first = _idle(hub)
    assert len(first) == 1  # kept alive
    assert _text(call(address, "resources/read", {"uri": "test://hello"})) == "hello"
    assert _idle(hub) == first  # and reused
    started.append(hub.restart())  # the kept connection dies with the old hub
    assert _text(call(address, "resources/read", {"uri": "test://hello"})) == "hello"
    assert _idle(hub) != first
    started[-1].stop()
    with pytest.raises(HubGone, match="cannot connect to the hub") as gone:
        call(address, "resources/read", {"uri": "test://hello"})
    assert str(hub.port) not in str(gone.value)  # a front's client never learns where a hub listens


def test_the_second_try_goes_on_a_new_connection_never_another_kept_one(hubs):
    start, started = hubs
    hub = start()
    address = HubAddress(hub.url, hub.token)
    end = Endpoint.of(hub.url)
    for _ in range(2):  # two kept connections (a proxy in front of many users keeps several)
        conn = blocking._POOL.new(end, 5.0)
        conn.connect()
        blocking._POOL.give(end, conn)
    assert len(_idle(hub)) == 2
    started.append(hub.restart())  # both die with the old hub (a proxy closing idle connections)
    assert _text(call(address, "resources/read", {"uri": "test://hello"})) == "hello"  # one dead one tried


def test_a_reply_slower_than_the_timeout_is_cut_and_its_connection_never_reused(hubs):
    start, _ = hubs
    hub = start()
    address = HubAddress(hub.url, hub.token)
    t0 = time.monotonic()
    with pytest.raises(HubGone, match="timed out") as slow:
        call(address, "resources/read", {"uri": "test://slow"}, timeout=0.5)
    assert str(slow.value).count("did not answer") == 1, slow.value  # said once, not once per layer
    assert time.monotonic() - t0 < SLOW_SECONDS
    assert _idle(hub) == []
    assert _text(call(address, "resources/read", {"uri": "test://hello"})) == "hello"


def test_close_connections_closes_every_kept_connection(hubs):
    start, _ = hubs
    hub = start()
    call(HubAddress(hub.url, hub.token), "resources/read", {"uri": "test://hello"})
    assert blocking.close_connections() == 1
    assert _idle(hub) == [] and blocking.close_connections() == 0


# -- the blocking face: the bridge ----------------------------------------------------------------
def _record(hub: Hub, **extra: Any) -> HubRecord:
    return HubRecord(Path("test"), {"url": hub.url, "token": hub.token, "pid": os.getpid(), **extra}, True)


@dataclass
class Following(Selector):
    """A selector that finds whichever hub the test says is current (as the runtime files would)."""

    current: list[HubRecord] = field(default_factory=list)

    def find(self, prefer: Any = None, wait: float = 0.0, stop: Any = None) -> HubRecord:
        return self.current[-1]


def _bridge(hub: Hub) -> tuple[Bridge, Following]:
    selector = Following(current=[_record(hub)])
    return Bridge(selector, out=io.BytesIO(), log=io.StringIO(), reconnect_timeout=0.5), selector


READ = message("resources/read", {"uri": "test://hello"})


def test_the_bridge_keeps_its_connection_alive(hubs):
    start, _ = hubs
    hub = start()
    up = Upstream(_record(hub))
    for _ in range(3):
        status, _, replies = up.call(READ)
        assert status == 200 and _text(replies[0]["result"]) == "hello"
        assert len(_idle(hub)) == 1  # one connection, reused (a connection per request before)


def test_the_bridge_looks_the_hub_up_again_after_a_refused_token_once(hubs):
    start, started = hubs
    hub = start("t1")
    bridge, selector = _bridge(hub)
    assert _text(bridge._stateless(READ)[0]["result"]) == "hello"
    started.append(hub.restart("t2"))  # same port, new token: the old one gets a 401
    stale = selector.current[-1]
    selector.current.append(_record(started[-1]))
    assert _text(bridge._stateless(READ)[0]["result"]) == "hello"
    assert bridge.up is not None and bridge.up.record.token == "t2"
    selector.current.append(stale)  # the lookup keeps finding the refused token: one more try, then an error
    bridge.up = Upstream(stale)
    (reply,) = bridge._stateless(READ)
    assert reply["error"]["code"] == NO_HUB and "No running mcp-notebook hub" in reply["error"]["message"]


def test_the_bridge_follows_a_hub_to_another_port(hubs):
    start, started = hubs
    hub = start("t1")
    bridge, selector = _bridge(hub)
    assert _text(bridge._stateless(READ)[0]["result"]) == "hello"
    started.append(hub.restart("t3", same_port=False))
    selector.current.append(_record(started[-1]))
    assert _text(bridge._stateless(READ)[0]["result"]) == "hello"
    assert bridge.up is not None and bridge.up.record.url == started[-1].url


OPENSSL = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
OPENSSL += ["-addext", "subjectAltName=IP:127.0.0.1"]


def _certificate(tmp: Path) -> tuple[Path, Path]:
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(
        [*OPENSSL, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return key, cert


class TlsRelay(SlowRelay):
    """HTTPS in front of a hub (a Jupyter server behind TLS, as ``bridge --server https://…`` sees)."""

    def __init__(self, target: tuple[str, int], key: Path, cert: Path):
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        super().__init__(target, 0.0)

    def _relay(self, client: Any) -> None:
        try:
            client = self.context.wrap_socket(client, server_side=True)
        except (OSError, ssl.SSLError):
            client.close()
            return
        super()._relay(client)


def test_https_is_verified_and_kept_alive(hubs, tmp_path, monkeypatch):
    start, _ = hubs
    hub = start()
    key, cert = _certificate(tmp_path)
    relay = TlsRelay(("127.0.0.1", hub.port), key, cert)
    try:
        url = f"https://127.0.0.1:{relay.port}/mcp"
        up = Upstream(HubRecord(Path("test"), {"url": url, "token": hub.token}, True))
        with pytest.raises(UpstreamError, match="CERTIFICATE_VERIFY_FAILED"):  # not trusted yet
            up.call(READ)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        for _ in range(2):
            status, _, replies = up.call(READ)
            assert status == 200 and _text(replies[0]["result"]) == "hello"
        assert len(blocking._POOL._idle[Endpoint.of(url).key]) == 1
        assert up.address() == up.hub  # --channel watches it over HTTPS too
    finally:
        relay.close()


def test_the_asyncio_face_and_the_channels_listen_go_over_https(hubs, tmp_path, monkeypatch):
    """A hub behind TLS (a certificate made here): the asyncio face verifies it, keeps connections
    alive per scheme, and a listen (what ``bridge --channel`` and the front open) tells a change."""
    start, _ = hubs
    hub = start()
    key, cert = certificate(tmp_path)
    relay = AsyncTlsRelay(("127.0.0.1", hub.port), key, cert)
    headers, body = _post(hub, hub.token)

    async def read(pool: ConnectionPool | None) -> tuple[int, bytes]:
        reply = await request("127.0.0.1", relay.port, "POST", "/mcp", headers, body, 30.0, pool, https=True)
        try:
            return reply.status, b"".join([piece async for piece in reply.chunks()])
        finally:
            reply.close()

    async def untrusted() -> None:
        with pytest.raises(UpstreamError, match="CERTIFICATE_VERIFY_FAILED") as refused:
            await read(None)
        assert not refused.value.sent  # the hub saw nothing

    async def trusted() -> None:
        pool = ConnectionPool()
        for _ in range(2):
            status, data = await read(pool)
            assert status == 200 and b"hello" in data
        assert len(pool._idle[(True, "127.0.0.1", relay.port)]) == 1  # kept alive, and reused
        await pool.aclose()

    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "none.pem"))
        asyncio.run(untrusted())
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        asyncio.run(trusted())
        url = f"https://127.0.0.1:{relay.port}/mcp"
        address = Upstream(HubRecord(Path("test"), {"url": url, "token": hub.token}, True)).address()
        assert address is not None and address.endpoint.https
        seen: queue.Queue[tuple[str, Any]] = queue.Queue()
        listens = Listens(lambda key, kind, uri: seen.put((kind, uri)))
        try:
            listens.want("k", address, frozenset({"test://hello"}))
            assert listens.wait_covering("k", "test://hello", 30)
            hub.resources.changed(["test://hello"])
            assert seen.get(timeout=30) == ("updated", "test://hello")
        finally:
            listens.close()
    finally:
        relay.close()


# -- the asyncio face: the server extension's pipe, the front's listens ---------------------------
def _post(hub: Hub, token: str, uri: str = "test://hello") -> tuple[dict[str, str], bytes]:
    params = {"uri": uri}
    return HubAddress(hub.url, token).headers("resources/read", params), json.dumps(
        message("resources/read", params)
    ).encode()


def test_the_pool_replaces_a_connection_the_hub_closed_once_and_tells_what_was_never_sent(hubs):
    start, started = hubs
    hub = start()

    async def read(pool: ConnectionPool, target: Hub, token: str = "t1", timeout: float = 30.0) -> tuple[int, bytes]:
        headers, body = _post(target, token)
        reply = await request("127.0.0.1", target.port, "POST", "/mcp", headers, body, timeout, pool)
        try:
            return reply.status, b"".join([piece async for piece in reply.chunks()])
        finally:
            reply.close()

    async def go() -> None:
        pool = ConnectionPool()
        status, body = await read(pool, hub)
        assert status == 200 and b"hello" in body and len(pool._idle[(False, "127.0.0.1", hub.port)]) == 1
        started.append(hub.restart("t2"))
        status, _ = await read(pool, started[-1])  # the kept one died with the old hub: replaced once
        assert status == 401  # the old token: the caller looks the hub up again (rules 2)
        status, body = await read(pool, started[-1], "t2")
        assert status == 200 and b"hello" in body
        with pytest.raises(UpstreamError, match="did not answer: timed out") as slow:
            headers, slow_read = _post(started[-1], "t2", "test://slow")
            await request("127.0.0.1", started[-1].port, "POST", "/mcp", headers, slow_read, 0.5, pool)
        assert slow.value.sent
        started[-1].stop()
        with pytest.raises(UpstreamError, match="cannot connect to the hub") as gone:
            await read(pool, started[-1], "t2")
        assert not gone.value.sent  # never sent: safe to look the hub up again (rules 3)
        await pool.aclose()

    asyncio.run(go())
