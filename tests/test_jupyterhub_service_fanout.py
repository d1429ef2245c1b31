"""One upstream listen per kernel and URI set, shared by the grants of one user in the service
(allkernels/shared_listens.py), seen from outside: the kernel's hub counts the listens it serves,
official SDK clients (2026-07-28 listens and a handshake-era subscription) are the grants, and
each grant is also the attacker: it must never hear of a URI it did not watch, another grant's or
another user's; a revoked grant hears nothing more, and the grants left keep hearing.

A real JupyterHub with configurable-http-proxy, two users' servers, kernels with the hub loaded."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from jhub import CHP, LocalJupyterHub
from jserver import run
from sdk import connect
from service_oauth import sign_in

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not CHP.exists(), reason="tests/node: npm ci installs configurable-http-proxy"),
]
pytest.importorskip("jupyterhub")
pytest.importorskip("authlib")

END_LISTENS = "import mcp_notebook as _m\nwith _m.hub().server.core.lock:\n    _m.hub().server.stateless.end()"  # the hub ends every listen stream it serves (as at its shutdown)
QUIET_SECONDS = 1.5  # after the last expected event: time for any event that should not come


@pytest.fixture(scope="module")
def jupyterhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalJupyterHub]:
    with LocalJupyterHub(tmp_path_factory.mktemp("jhub"), ("--JupyterHubService.registration_burst=1000",)) as h:
        made = {
            "alice": h.kernel("alice", "alice_nb.ipynb", "a = b = c = d = 0"),
            "bob": h.kernel("bob", "bob_nb.ipynb", "a = b = 0"),
        }
        h.kcs = {name: kc for name, (_, kc) in made.items()}
        yield h


def hub_listens(jupyterhub: LocalJupyterHub, user: str) -> list[list[str]]:
    """The URI sets of the listens the user's kernel's hub serves (the service's, here)."""
    code = (
        "import json, mcp_notebook as _m; print(json.dumps(sorted(sorted(l.uris) for l in _m.hub().server.listens())))"
    )
    return json.loads(run(jupyterhub.kcs[user], code).strip().splitlines()[-1])


def until(done: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def until_listens(
    jupyterhub: LocalJupyterHub, user: str, expected: list[list[str]], what: str, exact: bool = True
) -> None:
    """Until the kernel's hub serves exactly the listens ``expected`` (what it served last, on failure).
    Not ``exact``: each of ``expected`` served once, beside listens of other sets (a handshake-era
    session of an earlier test, never ended, keeps its subscription and so its listen)."""
    seen: list[Any] = []

    def check() -> bool:
        seen[:] = [hub_listens(jupyterhub, user)]
        if exact:
            return seen[0] == expected
        return all(seen[0].count(listen) == 1 for listen in expected)

    try:
        until(check, what)
    except AssertionError:
        raise AssertionError(f"{what}: the hub served {seen}") from None


def read(jupyterhub: LocalJupyterHub, token: str, uri: str) -> httpx.Response:
    """One stateless resources/read through the service."""
    version = "2026-07-28"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/read",
        "params": {
            "uri": uri,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
    }
    return httpx.post(jupyterhub.mcp_url, json=body, headers=headers, timeout=60)


class Heard:
    """What one grant's client heard: each URI updated, with when."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str]] = []

    def uris(self, since: float = 0.0) -> set[str]:
        return {uri for at, uri in self.events if at >= since}


async def listening(jupyterhub: LocalJupyterHub, token: str, uris: list[str], heard: Heard, ready: Any) -> None:
    """A 2026-07-28 SDK client listening to ``uris`` until cancelled (or its grant ends)."""
    async with connect({"url": jupyterhub.mcp_url}, "2026-07-28", token=token) as (client, _):
        async with client.listen(resource_subscriptions=uris) as sub:
            ready.set()
            try:
                async for event in sub:
                    if getattr(event, "uri", None) is not None:
                        heard.events.append((time.monotonic(), str(event.uri)))
            except Exception:  # the grant ended: its stream did too
                return


async def subscribed(jupyterhub: LocalJupyterHub, token: str, uri: str, heard: Heard, ready: Any) -> None:
    """A handshake-era SDK client subscribed to ``uri`` until cancelled."""
    async with connect({"url": jupyterhub.mcp_url}, "legacy", token=token) as (client, inbox):
        await client.subscribe_resource(uri)
        await anyio.sleep(0.5)  # the SDK opens its GET stream after initialize
        ready.set()
        seen = 0
        while True:
            await inbox.event.wait()
            for uri_ in inbox.updated[seen:]:
                heard.events.append((time.monotonic(), uri_))
            seen = len(inbox.updated)


async def cell(jupyterhub: LocalJupyterHub, user: str, code: str) -> None:
    await anyio.to_thread.run_sync(run, jupyterhub.kcs[user], code)


async def heard_of(heard: Heard, uri: str, seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        while uri not in heard.uris():
            await anyio.sleep(0.05)


def test_a_users_grants_share_each_kernels_listen_and_hear_only_what_they_watch(jupyterhub):
    """Three grants of alice and one of bob: alice's kernel serves ONE listen of nb://kernel for
    the three (it used to serve one per grant) and one per distinct subscribed set; a cell that
    changes what one grant watches reaches that grant only, never alice's other grants, never bob."""
    grants = [sign_in(jupyterhub, "alice")[1]["access_token"] for _ in range(3)]
    bob = sign_in(jupyterhub, "bob")[1]["access_token"]
    for token in [*grants, bob]:
        assert read(jupyterhub, token, "nb://kernels").status_code == 200  # each grant's front opens
    until_listens(jupyterhub, "alice", [["nb://kernel"]], "alice's kernel: one shared listen")
    until_listens(jupyterhub, "bob", [["nb://kernel"]], "bob's kernel: its own listen")
    a, b = "nb://kernels/alice_nb/vars/a", "nb://kernels/alice_nb/vars/b"
    heard = {name: Heard() for name in ("g0", "g1", "g2", "bob")}

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            ready = {name: anyio.Event() for name in heard}
            tg.start_soon(listening, jupyterhub, grants[0], [a], heard["g0"], ready["g0"])
            tg.start_soon(subscribed, jupyterhub, grants[1], b, heard["g1"], ready["g1"])
            tg.start_soon(listening, jupyterhub, grants[2], [], heard["g2"], ready["g2"])  # watches nothing
            # bob names the same variables bare: his own current kernel's
            tg.start_soon(listening, jupyterhub, bob, ["nb://vars/a", "nb://vars/b"], heard["bob"], ready["bob"])
            for event in ready.values():
                await event.wait()
            await anyio.sleep(1)
            await anyio.to_thread.run_sync(
                until_listens,
                jupyterhub,
                "alice",
                [["nb://kernel"], ["nb://vars/a"], ["nb://vars/b"]],
                "alice's kernel: the shared listen and one per subscribed set",
            )
            await cell(jupyterhub, "alice", "a = 1")
            await heard_of(heard["g0"], a)
            await cell(jupyterhub, "alice", "b = 2")
            await heard_of(heard["g1"], b)
            await cell(jupyterhub, "bob", "a = 3")
            await heard_of(heard["bob"], "nb://vars/a")
            await anyio.sleep(QUIET_SECONDS)
            tg.cancel_scope.cancel()

    anyio.run(go)
    assert heard["g0"].uris() == {a}
    assert heard["g1"].uris() == {b}
    assert heard["g2"].uris() == set()
    assert heard["bob"].uris() == {"nb://vars/a"}  # his own kernel's a, never alice's a or b


def test_a_revoked_grant_hears_nothing_more_and_the_others_keep_hearing(jupyterhub):
    """Two grants of alice watching the same URI share its listen (and the first opened the kernel's
    shared listen with its JupyterHub token); the first is revoked: it hears nothing more, the
    second still hears every change, and a third grant's new subscription is served."""
    c, d = "nb://kernels/alice_nb/vars/c", "nb://kernels/alice_nb/vars/d"
    first_client, first = sign_in(jupyterhub, "alice")
    second = sign_in(jupyterhub, "alice")[1]["access_token"]
    third = sign_in(jupyterhub, "alice")[1]["access_token"]
    heard = {name: Heard() for name in ("first", "second", "third")}

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            ready = {name: anyio.Event() for name in heard}
            tg.start_soon(listening, jupyterhub, first["access_token"], [c], heard["first"], ready["first"])
            tg.start_soon(listening, jupyterhub, second, [c], heard["second"], ready["second"])
            await ready["first"].wait()
            await ready["second"].wait()
            await cell(jupyterhub, "alice", "c = 1")
            await heard_of(heard["first"], c)
            await heard_of(heard["second"], c)
            form = {"token": first["refresh_token"], "token_type_hint": "refresh_token", "client_id": first_client}
            r = await anyio.to_thread.run_sync(
                lambda: httpx.post(jupyterhub.service_url + "oauth/revoke", data=form, timeout=30)
            )
            assert r.status_code == 200
            revoked = time.monotonic()
            heard["second"].events.clear()
            await cell(jupyterhub, "alice", "c = 2")
            await heard_of(heard["second"], c)
            # the hub ends every listen: the service reopens the shared ones with a token of a grant
            # still alive (the revoked one's JupyterHub token is gone), and the second still hears
            await cell(jupyterhub, "alice", END_LISTENS)
            await anyio.to_thread.run_sync(
                until_listens, jupyterhub, "alice", [["nb://kernel"], ["nb://vars/c"]], "the listens reopened", False
            )
            heard["second"].events.clear()
            await cell(jupyterhub, "alice", "c = 3")
            await heard_of(heard["second"], c)
            tg.start_soon(listening, jupyterhub, third, [d], heard["third"], ready["third"])
            await ready["third"].wait()
            await cell(jupyterhub, "alice", "d = 1")
            await heard_of(heard["third"], d)
            await anyio.sleep(QUIET_SECONDS)
            assert heard["first"].uris(since=revoked) == set()
            tg.cancel_scope.cancel()

    anyio.run(go)
    assert heard["second"].uris() == {c}
    assert heard["third"].uris() == {d}


def test_a_kernel_started_later_is_listened_to_once_for_all_grants_and_heard(jupyterhub):
    """A kernel alice starts after her grants' fronts are open is picked up (each front's tick) and
    served one shared listen of nb://kernel for all of them; a subscription to it is heard."""
    grants = [sign_in(jupyterhub, "alice")[1]["access_token"] for _ in range(2)]
    for token in grants:
        assert read(jupyterhub, token, "nb://kernels").status_code == 200
    _, kc = jupyterhub.kernel("alice", "later.ipynb", "z = 0")
    jupyterhub.kcs["later"] = kc
    until_listens(jupyterhub, "later", [["nb://kernel"]], "the new kernel: one shared listen")
    z = "nb://kernels/later/vars/z"
    heard = Heard()

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            ready = anyio.Event()
            tg.start_soon(listening, jupyterhub, grants[1], [z], heard, ready)
            await ready.wait()
            await cell(jupyterhub, "later", "z = 1")
            await heard_of(heard, z)
            tg.cancel_scope.cancel()

    anyio.run(go)
    until_listens(jupyterhub, "later", [["nb://kernel"]], "the subscription's listen goes with it")
