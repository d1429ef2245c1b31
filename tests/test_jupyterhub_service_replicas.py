"""Two replicas of the JupyterHub service on one PostgreSQL behind haproxy (round-robin), on a real
JupyterHub with configurable-http-proxy: a sign-in that starts at one replica finishes at the
other; a token issued by one works at the other in both protocol eras (the official SDK client);
a revocation or a refresh-token reuse at one is refused at the other within a second; a
handshake-era session made at one is used and ended at the other (haproxy has no stickiness);
killing one replica loses no grant and the client continues at the other, an open stream included
(the GET stream of a session, a 2026-07-28 listen): a cell's change is notified through the other."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
import pytest
from jhub import CHP, LocalJupyterHub
from jserver import free_port, run
from replicas import Haproxy, Postgres, Replica, missing, service_env
from sdk import connect as sdk_connect
from service_oauth import Browser, authorize_url, code_of, pkce, refresh, register, sign_in

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not CHP.exists(), reason="tests/node: npm ci installs configurable-http-proxy"),
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
]
pytest.importorskip("jupyterhub")
pytest.importorskip("psycopg")

API_TOKEN = "svc-" + os.urandom(16).hex()
EXTERNAL = """
# -- the service runs as two replicas behind haproxy (not managed by JupyterHub) ------------------
for key in ("command", "cwd", "environment"):
    service.pop(key, None)
service["api_token"] = {token!r}
service["url"] = "http://127.0.0.1:{port}"
"""


class Deployment:
    def __init__(self, base: Path, pg: Postgres):
        self.pg = pg
        self.ports = [free_port(), free_port()]
        self.lb = Haproxy(base, self.ports)
        self.replicas: list[Replica] = []
        self.base = base
        self.env: dict[str, str] = {}
        self.args: list[str] = []
        self.alice: Any = None  # alice's kernel client (cells run in her notebook)
        self.starts = 0

    def start_replicas(self, hub: LocalJupyterHub) -> None:
        self.env = service_env(hub.public, hub.api_url, API_TOKEN)
        self.args = [
            f"--JupyterHubService.db_url={self.pg.url}",
            "--JupyterHubService.check_seconds=2",
            f"--JupyterHubService.upstream_url={hub.public.rstrip('/')}",
        ]
        self.replicas = [self._start(port) for port in self.ports]
        for replica in self.replicas:
            replica.wait()

    def _start(self, port: int) -> Replica:
        self.starts += 1
        return Replica(self.base, f"replica{self.starts}", port, self.env, self.args)

    def revive(self) -> None:
        """Replicas a test killed start again (a new process on the same port), and haproxy sees them."""
        for i, replica in enumerate(self.replicas):
            if replica.proc.poll() is not None:
                replica.stop()
                self.replicas[i] = self._start(self.ports[i])
                self.replicas[i].wait()
                time.sleep(1.0)  # haproxy's health check (every 0.3 s) marks it up

    def at(self, i: int, url: str) -> str:
        """``url`` (public) sent straight to replica ``i``, past the proxy and haproxy."""
        parts = urlsplit(url)
        return urlunsplit(parts._replace(netloc=f"127.0.0.1:{self.ports[i]}"))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalJupyterHub, Deployment]]:
    pg_dir = Path(tempfile.mkdtemp(prefix="mcpnb-pg-"))  # outside pytest's 0700 tree: postgres reads it
    pg = Postgres(pg_dir)
    base = tmp_path_factory.mktemp("replicas")
    dep = Deployment(base, pg)
    hub = None
    try:
        extra = EXTERNAL.format(token=API_TOKEN, port=dep.lb.port)
        hub = LocalJupyterHub(base / "jhub", (), extra, dep.start_replicas)
        dep.alice = hub.kernel("alice", "alice_nb.ipynb", "mine = 'alice-41'; ticks = 0")[1]
        yield hub, dep
    except BaseException:
        for replica in dep.replicas:
            print(replica.name, replica.log_text()[-3000:])
        if hub is not None:
            print(hub.log_text()[-3000:])
        raise
    finally:
        if hub is not None:
            hub.stop()
        for replica in dep.replicas:
            replica.stop()
        dep.lb.stop()
        pg.stop()
        shutil.rmtree(pg_dir, ignore_errors=True)


def stateless_read(url: str, token: str, uri: str = "nb://kernels/alice_nb/vars/mine") -> httpx.Response:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
        "Accept": "application/json, text/event-stream",
    }
    return httpx.post(url, json=body, headers=headers, timeout=60)


def reads_ok(url: str, token: str) -> bool:
    r = stateless_read(url, token)
    return r.status_code == 200 and "alice-41" in r.text


def refused_within(url: str, token: str, seconds: float) -> float:
    """How long until ``token`` is refused at ``url`` (AssertionError past ``seconds``)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if stateless_read(url, token).status_code == 401:
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"still accepted after {seconds} s")


def test_a_sign_in_started_at_one_replica_finishes_at_the_other(deployment):
    hub, dep = deployment
    client_id = register(hub)
    verifier, challenge = pkce()
    browser = Browser(hub.public, "alice")

    def route(request: httpx.Request) -> None:  # the authorization at replica 0, the consent at replica 1
        if request.url.path.endswith("/oauth/authorize"):
            request.url = httpx.URL(dep.at(0, str(request.url)))
        elif request.url.path.endswith("/oauth/consent"):
            request.url = httpx.URL(dep.at(1, str(request.url)))

    browser.http.event_hooks["request"] = [route]
    q = code_of(browser.authorize(authorize_url(hub, client_id, challenge)))
    token_url_1 = dep.at(1, hub.service_url + "oauth/token")
    form = {"grant_type": "authorization_code", "code": q["code"], "client_id": client_id, "code_verifier": verifier}
    r = httpx.post(token_url_1, data=form | {"redirect_uri": "http://127.0.0.1:9/callback"}, timeout=30)
    assert r.status_code == 200, r.text
    assert reads_ok(dep.at(0, hub.mcp_url), r.json()["access_token"])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_token_issued_by_one_works_at_the_other_in_both_eras(deployment, mode):
    hub, dep = deployment
    client_id = register(hub)
    verifier, challenge = pkce()
    q = code_of(Browser(hub.public, "alice").authorize(authorize_url(hub, client_id, challenge)))
    form = {"grant_type": "authorization_code", "code": q["code"], "client_id": client_id, "code_verifier": verifier}
    r = httpx.post(
        dep.at(0, hub.service_url + "oauth/token"),
        data=form | {"redirect_uri": "http://127.0.0.1:9/callback"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    token = r.json()["access_token"]

    async def go() -> str:
        async with sdk_connect({"url": dep.at(1, hub.mcp_url), "token": token}, mode=mode) as (client, _):
            return (await client.read_resource("nb://kernels/alice_nb/vars/mine")).contents[0].text

    assert "alice-41" in anyio.run(go)


def test_a_revocation_or_a_reused_refresh_token_at_one_is_refused_at_the_other(deployment):
    hub, dep = deployment
    client_id, tokens = sign_in(hub, "alice")
    at1 = dep.at(1, hub.mcp_url)
    assert reads_ok(at1, tokens["access_token"])  # remembered by replica 1
    form = {"token": tokens["refresh_token"], "token_type_hint": "refresh_token", "client_id": client_id}
    assert httpx.post(dep.at(0, hub.service_url + "oauth/revoke"), data=form, timeout=30).status_code == 200
    took = refused_within(at1, tokens["access_token"], 5.0)
    client_id, tokens = sign_in(hub, "alice")
    assert reads_ok(at1, tokens["access_token"])
    rotated = httpx.post(
        dep.at(0, hub.service_url + "oauth/token"),
        data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": client_id},
        timeout=30,
    ).json()
    assert reads_ok(at1, rotated["access_token"])
    reuse = httpx.post(
        dep.at(1, hub.service_url + "oauth/token"),
        data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": client_id},
        timeout=30,
    )
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    took_reuse = refused_within(dep.at(0, hub.mcp_url), rotated["access_token"], 5.0)
    print(
        f"\nrevoked at replica 0, refused at replica 1 after {took:.2f} s; reuse at 1, refused at 0 after {took_reuse:.2f} s"
    )


def test_killing_a_replica_loses_no_grant_and_the_client_continues(deployment):
    hub, dep = deployment
    dep.revive()
    client_id, tokens = sign_in(hub, "alice")  # through the proxy and haproxy: both replicas took part
    assert all(reads_ok(hub.mcp_url, tokens["access_token"]) for _ in range(6))
    dep.replicas[0].kill()
    results: list[bool] = []
    for _ in range(30):  # bounded
        results.append(reads_ok(hub.mcp_url, tokens["access_token"]))
        time.sleep(0.1)
    first_ok = results.index(True)
    assert first_ok <= 3 and all(results[first_ok:]), results  # haproxy sends everything to replica 1
    fresh = refresh(hub, client_id, tokens["refresh_token"])
    assert fresh.status_code == 200, fresh.text
    assert reads_ok(hub.mcp_url, fresh.json()["access_token"])
    user = {"Authorization": f"token {hub.user_token('alice')}"}
    grants = httpx.get(hub.service_url + "api/grants", headers=user, timeout=30).json()["grants"]
    assert any(g["client_id"] == client_id for g in grants)
    print(f"\nreads refused right after the kill: {first_ok}")


HANDSHAKE = "2025-11-25"
READ = {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "nb://kernels/alice_nb/vars/mine"}}


def session_post(url: str, token: str, body: dict[str, Any], sid: str = "") -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    if sid:
        headers |= {"Mcp-Session-Id": sid, "MCP-Protocol-Version": HANDSHAKE}
    return httpx.post(url, json=body, headers=headers, timeout=60)


def test_a_session_made_at_one_replica_is_used_and_ended_at_the_other(deployment):
    hub, dep = deployment
    dep.revive()
    token = sign_in(hub, "alice")[1]["access_token"]
    other = sign_in(hub, "alice")[1]["access_token"]  # another grant of the same user
    at0, at1 = dep.at(0, hub.mcp_url), dep.at(1, hub.mcp_url)
    params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    made = session_post(at0, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert made.status_code == 200, made.text
    sid = made.headers["mcp-session-id"]
    assert session_post(at1, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid).status_code == 202
    read = session_post(at1, token, READ, sid)
    assert read.status_code == 200 and "alice-41" in read.text, read.text
    assert session_post(at1, other, READ, sid).status_code == 404  # a session of another grant is unknown
    assert session_post(at0, token, READ, sid).status_code == 200
    headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": sid, "MCP-Protocol-Version": HANDSHAKE}
    assert httpx.delete(at1, headers=headers, timeout=30).status_code == 200
    start = time.monotonic()
    while session_post(at0, token, READ, sid).status_code != 404:  # replica 0's copy ends too
        assert time.monotonic() - start < 5.0, "a session ended at replica 1 is still answered at replica 0"
        time.sleep(0.05)
    took = time.monotonic() - start

    async def go() -> list[str]:  # the official SDK through the proxy and haproxy: round-robin, no stickiness
        async with sdk_connect({"url": hub.mcp_url, "token": token}, mode="legacy") as (client, _):
            texts = [(await client.read_resource(READ["params"]["uri"])).contents[0].text for _ in range(6)]
            await client.subscribe_resource(READ["params"]["uri"])
            texts += [(await client.read_resource(READ["params"]["uri"])).contents[0].text for _ in range(2)]
            return texts

    assert all("alice-41" in text for text in anyio.run(go))
    print(f"\na session deleted at replica 1 was refused at replica 0 after {took:.2f} s")


WATCHED = "nb://kernels/alice_nb/vars/ticks"
# configurable-http-proxy does not end a reply whose upstream died (http-proxy-3 pipes the upstream
# reply and ignores its error), so a client learns its stream is dead from silence: the service
# sends a keepalive comment every 15 s, so a read timeout above that tells a dead stream from a quiet one.
SILENCE = 20.0


class StreamWatch:
    """Which replica answered each stream request (a GET, a listen), and cells that change WATCHED."""

    def __init__(self, dep: Deployment):
        self.dep = dep
        self.holders: list[str] = []

    async def seen(self, response: Any) -> None:
        request = response.request
        if request.method == "GET" or request.headers.get("mcp-method") == "subscriptions/listen":
            self.holders.append(response.headers.get("x-replica", "?"))

    async def until(self, done: Any, seconds: float = 30.0) -> bool:
        """A cell changes WATCHED every 2 s until ``done()`` (bounded)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await anyio.to_thread.run_sync(run, self.dep.alice, "ticks += 1")
            for _ in range(20):
                if done():
                    return True
                await anyio.sleep(0.1)
        return False

    def kill_holder(self) -> str:
        """The replica holding the newest stream dies (SIGKILL); its name."""
        victim = self.holders[-1]
        self.dep.replicas[int(victim.removeprefix("r"))].kill()
        return victim


def _legacy_stream(watch: StreamWatch, url: str, token: str) -> tuple[str, list[str]]:
    async def go() -> tuple[str, list[str]]:
        hooks = {"response": [watch.seen]}
        info = {"url": url, "token": token}
        async with sdk_connect(info, mode="legacy", event_hooks=hooks, read_timeout=SILENCE) as (client, inbox):
            await client.subscribe_resource(WATCHED)
            assert await watch.until(lambda: WATCHED in inbox.updated and watch.holders), watch.holders
            victim, before, opened = watch.kill_holder(), inbox.updated.count(WATCHED), len(watch.holders)
            assert await watch.until(lambda: inbox.updated.count(WATCHED) > before, SILENCE + 40), watch.holders
            assert "ticks" in (await client.read_resource(WATCHED)).contents[0].text
            return victim, watch.holders[opened:]

    return anyio.run(go)


def _modern_stream(watch: StreamWatch, url: str, token: str) -> tuple[str, list[str]]:
    async def go() -> tuple[str, list[str]]:
        got: list[int] = []
        hooks = {"response": [watch.seen]}
        info = {"url": url, "token": token}
        async with sdk_connect(info, mode="auto", event_hooks=hooks, read_timeout=SILENCE) as (client, _):

            async def reader(sub: Any, ended: anyio.Event) -> None:
                try:
                    async for event in sub:
                        if str(getattr(event, "uri", "")) == WATCHED:
                            got.append(1)
                except Exception:  # the stream ended without its graceful close: re-listen
                    pass
                finally:
                    ended.set()

            async def listen(then: Any) -> None:
                ended, count = anyio.Event(), len(got)
                async with client.listen(resource_subscriptions=[WATCHED]) as sub, anyio.create_task_group() as tg:
                    tg.start_soon(reader, sub, ended)
                    notified.append(await watch.until(lambda: len(got) > count))
                    await then(ended)
                    tg.cancel_scope.cancel()

            async def kill(ended: anyio.Event) -> None:
                state["victim"] = watch.kill_holder()
                with anyio.fail_after(SILENCE + 20):
                    await ended.wait()

            async def nothing(ended: anyio.Event) -> None:
                pass

            state: dict[str, Any] = {}
            notified: list[bool] = []
            try:
                await listen(kill)
            except Exception as exc:  # leaving a listen whose stream broke may raise: the client listens again
                state["left"] = repr(exc)
            assert notified == [True] and "victim" in state, (notified, state, watch.holders)
            opened = len(watch.holders)
            await listen(nothing)
            assert notified == [True, True], watch.holders
            assert "ticks" in (await client.read_resource(WATCHED)).contents[0].text
            return state["victim"], watch.holders[opened:]

    return anyio.run(go)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_killing_the_replica_holding_a_stream_the_client_goes_on_at_the_other(deployment, mode):
    hub, dep = deployment
    dep.revive()
    client_id, tokens = sign_in(hub, "alice")
    watch = StreamWatch(dep)
    streamed = _legacy_stream if mode == "legacy" else _modern_stream
    victim, after = streamed(watch, hub.mcp_url, tokens["access_token"])
    assert after and victim not in after, (victim, watch.holders)  # reopened at the other replica
    fresh = refresh(hub, client_id, tokens["refresh_token"])
    assert fresh.status_code == 200, fresh.text
    assert reads_ok(hub.mcp_url, fresh.json()["access_token"])
    print(f"\n{mode}: stream held by {victim}, killed; reopened at {after}")
