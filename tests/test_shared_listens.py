"""Listen streams shared by the fronts of one user (allkernels/shared_listens.py) against a real hub
on 127.0.0.1 (an McpServer behind the loopback HTTP carrier): fronts with equal wishes share one
stream, another user never does, each front hears only its own sets, a muted front hears nothing
more (not even an event whose routing was in progress when it was muted), and a stream whose
opener left is reopened with a remaining front's token; events are routed on the streams' own
thread (or on a loop given them: the JupyterHub service's), the fronts ticked by one timer on a
few shared threads."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcp_notebook.allkernels.shared_listens import FRONT_THREADS, SharedListens, Tap
from mcp_notebook.hubclient.address import HubAddress
from mcp_notebook.protocol.server import McpServer, ServerSettings
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.resources import Resources
from mcp_notebook.transport.server import HttpTransport

COMMON = frozenset({"test://common"})
URIS = ("test://common", "test://mine", "test://theirs")


class Hub:
    """A real hub: three resources, one token."""

    def __init__(self, token: str):
        custom = CustomProvider()
        for uri in URIS:
            custom.register(
                make_registration(
                    uri, lambda: "v", name=uri[7:], title=None, description=None, mime_type=None, annotations=None
                )
            )
        self.resources = Resources([custom])
        self.server = McpServer(self.resources, ServerSettings(token=token))
        self.transport = HttpTransport(self.server, "127.0.0.1", 0, 100_000)
        self.transport.start()
        self.url = self.transport.url

    def listens(self) -> list[frozenset[str]]:
        return sorted((frozenset(listen.uris) for listen in self.server.listens()), key=sorted)

    def stop(self) -> None:
        self.transport.stop()
        self.resources.close()


@pytest.fixture
def world() -> Iterator[tuple[Hub, SharedListens, Callable[..., tuple[Tap, queue.Queue[Any]]]]]:
    hub = Hub("good")
    shared = SharedListens()
    taps: list[Tap] = []

    def tap(scope: str, uris: set[str], token: str = "good") -> tuple[Tap, queue.Queue[Any]]:
        heard: queue.Queue[Any] = queue.Queue()
        wish = {"k": (HubAddress(hub.url, token), frozenset(uris))}
        t = shared.tap(scope, COMMON, lambda key, kind, uri: heard.put((key, kind, uri)), lambda: wish)
        taps.append(t)
        t.poke()
        return t, heard

    try:
        yield hub, shared, tap
    finally:
        for t in taps:
            t.close()
        shared.close()
        hub.stop()


def until(done: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def drained(heard: queue.Queue[Any], seconds: float = 1.0) -> set[str]:
    """The URIs heard within ``seconds`` more (updates only)."""
    out: set[str] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            _, kind, uri = heard.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if kind == "updated":
            out.add(uri)
    return out


def test_equal_wishes_share_a_stream_and_each_front_hears_only_its_own(world):
    hub, shared, tap = world
    a1, heard_a1 = tap("alice", {"test://common"})
    a2, heard_a2 = tap("alice", {"test://common", "test://mine"})
    b, heard_b = tap("bob", {"test://common", "test://theirs"})  # another user, the same hub URL
    for t, uris in ((a1, {"test://common"}), (a2, {"test://common", "test://mine"}), (b, {"test://theirs"})):
        for uri in uris:
            assert t.wait_covering("k", uri, 30)
    # alice's two fronts share the common stream; bob has his own; each own set is a stream
    until(
        lambda: hub.listens() == sorted(map(frozenset, (URIS[:1], URIS[:1], URIS[1:2], URIS[2:])), key=sorted),
        f"streams: {hub.listens()}",
    )
    assert shared.counts() == (4, 5)
    hub.resources.changed(["test://mine"])
    assert heard_a2.get(timeout=30) == ("k", "updated", "test://mine")
    hub.resources.changed(["test://theirs"])
    assert heard_b.get(timeout=30) == ("k", "updated", "test://theirs")
    hub.resources.changed(["test://common"])
    assert drained(heard_a1) == {"test://common"}  # never mine, never bob's
    assert drained(heard_a2) == {"test://common"}
    assert drained(heard_b) == {"test://common"}


def test_a_muted_front_hears_nothing_more_and_its_stream_reopens_with_another_token(world):
    hub, shared, tap = world
    opener, heard_opener = tap("alice", {"test://common"}, token="revoked")  # refused by the hub: retried
    time.sleep(0.2)
    other, heard_other = tap("alice", {"test://common"})
    assert not other.wait_covering("k", "test://common", 1.5)  # still opened with the first front's token
    opener.mute()
    assert other.wait_covering("k", "test://common", 30)  # reopened with the remaining front's
    assert hub.listens() == [frozenset(COMMON)]
    hub.resources.changed(["test://common"])
    assert heard_other.get(timeout=30) == ("k", "updated", "test://common")
    assert drained(heard_opener, 0.5) == set()
    other.mute()
    until(lambda: hub.listens() == [], "the last front gone, the stream closes")
    assert shared.counts() == (0, 0)


def test_events_are_routed_on_the_reading_thread_and_a_mute_waits_for_a_routing_in_flight(world):
    hub, _shared, tap = world
    many = [tap("alice", {"test://common"}) for _ in range(30)]  # thirty fronts of one user
    loops = [t for t in threading.enumerate() if t.name == "mcp-notebook-kernels"]
    fronts = [t for t in threading.enumerate() if t.name.startswith("mcp-notebook-fronts")]
    assert len(loops) == 1 and len(fronts) <= FRONT_THREADS  # the shared streams' loop; no thread per front
    for t, _ in many:
        assert t.wait_covering("k", "test://common", 30)
    gate, inside, where = threading.Event(), threading.Event(), []

    def slow(key: str, kind: str, uri: str | None) -> None:
        where.append(threading.current_thread().name)
        if kind == "updated":
            inside.set()
            gate.wait(10)  # a routing in progress while the grant is revoked
            heard.put(uri)

    heard: queue.Queue[Any] = queue.Queue()
    first = many[0][0]
    first.notify = slow
    hub.resources.changed(["test://common"])
    assert inside.wait(30)
    muted = threading.Thread(target=first.mute)
    muted.start()
    muted.join(0.3)
    assert muted.is_alive()  # the mute waits for the routing it found in progress...
    gate.set()
    muted.join(10)
    assert not muted.is_alive() and heard.get_nowait() == "test://common"
    hub.resources.changed(["test://common"])  # ...and after it, nothing reaches the muted front
    until(lambda: all(q.qsize() >= 2 for _, q in many[1:]), "the other fronts hear both changes")
    assert heard.empty() and set(where) == {"mcp-notebook-kernels"}  # the shared streams' own thread


def test_one_timer_ticks_every_front_on_shared_threads_and_stops_at_a_mute(world):
    _hub, shared, tap = world
    ticks: dict[int, list[str]] = {0: [], 1: []}
    taps = [tap("alice", {"test://common"})[0] for _ in range(2)]
    for i, t in enumerate(taps):
        t.every(1.0, lambda i=i: ticks[i].append(threading.current_thread().name))
    until(lambda: len(ticks[0]) >= 2 and len(ticks[1]) >= 2, f"ticks: {ticks}")
    assert {n.rsplit("_", 1)[0] for n in ticks[0] + ticks[1]} == {"mcp-notebook-fronts"}
    taps[0].mute()
    time.sleep(0.2)  # a tick already handed over may still finish
    seen = len(ticks[0])
    until(lambda: len(ticks[1]) >= seen + 2, "the other front keeps ticking")
    assert len(ticks[0]) == seen
    assert shared.schemes("alice") is shared.schemes("alice") is not shared.schemes("bob")


def test_on_a_given_loop_events_are_routed_on_its_thread_and_closing_leaves_it_running():
    """The JupyterHub service's mode (issue #42, sixth pass): the streams are read and routed on the
    service's own loop (no thread of their own, no hop to the loop that writes the clients'
    streams); a front still waits for its stream off that loop; closing ends the listens only."""
    import asyncio

    hub = Hub("good")
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, name="service-loop", daemon=True)
    runner.start()

    def listen_threads() -> int:
        return sum(t.name == "mcp-notebook-kernels" for t in threading.enumerate())

    before = listen_threads()
    shared = asyncio.run_coroutine_threadsafe(_make_shared(), loop).result(10)
    heard: queue.Queue[Any] = queue.Queue()
    wish = {"k": (HubAddress(hub.url, "good"), frozenset({"test://common", "test://mine"}))}
    tap = shared.tap(
        "alice", COMMON, lambda k, kind, uri: heard.put((threading.current_thread().name, uri)), lambda: wish
    )
    try:
        assert listen_threads() == before  # no thread of their own
        tap.poke()
        assert tap.wait_covering("k", "test://mine", 30)  # waited here, off the loop
        hub.resources.changed(["test://mine"])
        assert heard.get(timeout=30) == ("service-loop", "test://mine")
        tap.close()
        shared.close()
        until(lambda: hub.listens() == [], f"streams left open: {hub.listens()}")
        assert asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "alive"), loop).result(10) == "alive"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        hub.stop()


async def _make_shared() -> SharedListens:
    import asyncio

    return SharedListens(loop=asyncio.get_running_loop())
