"""JupyterHub's answer about a grant's user is asked again just before it goes stale, off the reads'
path (``Fronts.renew_checks`` calls ``JupyterHubLink.model(ahead)``): a read then finds it fresh,
and never waits behind that renewal while the answer it has is fresh. A server's kernel listing is
renewed the same way, in the background (``Listings``). A real HTTP server on 127.0.0.1 stands for
JupyterHub's ``/user``. Answers that come due together are asked several at a time. And the service's start-up heap is frozen before it serves (``settle_heap``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("jupyterhub")

from mcp_notebook.jupyterhub_service.users import JupyterHubLink, JupyterHubRefused


def until(done: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait (bounded) until ``done()``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.01)


@pytest.fixture
def jupyterhub() -> Iterator[tuple[str, list[str], threading.Event]]:
    asked: list[str] = []
    gate = threading.Event()
    gate.set()

    class User(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.headers.get("Authorization", ""))
            gate.wait(30)  # a test closes the gate: JupyterHub is slow to answer
            refused = self.headers.get("Authorization") == "token revoked"
            body = json.dumps({"name": "alice", "servers": {}, "scopes": []}).encode()
            self.send_response(403 if refused else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), User)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hub/api", asked, gate
    finally:
        gate.set()
        server.shutdown()


def test_the_answer_is_renewed_ahead_of_going_stale_and_a_refusal_still_counts(jupyterhub):
    url, asked, _ = jupyterhub
    link = JupyterHubLink(url, "alice", "token good", check_seconds=1.5)
    link.model()
    assert len(asked) == 1 and link.fresh()
    link.model(ahead=1.0)  # 0.5 s left of 1.5: not yet
    assert len(asked) == 1
    time.sleep(0.7)
    assert link.fresh()  # a read would not ask
    link.model(ahead=1.0)  # within a second of going stale: asked again now, off the reads' path
    assert len(asked) == 2 and link.fresh()
    link.jupyterhub_token = "revoked"
    time.sleep(0.6)
    with pytest.raises(JupyterHubRefused):
        link.model(ahead=1.0)
    assert link.refused is not None and not link.fresh()


def test_a_read_does_not_wait_for_a_renewal_while_its_answer_is_fresh(jupyterhub):
    url, asked, gate = jupyterhub
    link = JupyterHubLink(url, "alice", "token good", check_seconds=30)
    first = link.model()
    gate.clear()  # JupyterHub stops answering
    renewal = threading.Thread(target=link.model, kwargs={"ahead": 30.0})  # always due: asks, and waits
    renewal.start()
    until(lambda: len(asked) >= 2)  # the renewal is waiting for JupyterHub now
    got: list[dict] = []
    read = threading.Thread(target=lambda: got.append(link.model()))
    read.start()
    read.join(5)  # (well under the renewal's own 10 s limit, after which the read would get the lock)
    done = not read.is_alive()
    gate.set()
    renewal.join(10)
    assert done and got == [first]  # the read had its (fresh) answer while the renewal still waited
    assert len(asked) == 2  # and it did not ask JupyterHub itself


def test_a_listing_near_its_end_is_renewed_in_the_background():
    from mcp_notebook.jupyterhub_service.users import LIST_AHEAD_SECONDS, LIST_SECONDS, Listings

    listings = Listings()
    key = ("alice", "/user/alice/")
    release = threading.Event()
    fetched: list[str] = []

    def slow() -> list[dict]:
        fetched.append(threading.current_thread().name)
        release.wait(30)
        return [{"kernel_id": "new"}]

    assert listings.listed(key, False, lambda: [{"kernel_id": "old"}]) == [{"kernel_id": "old"}]
    assert listings.listed(key, False, slow) == [{"kernel_id": "old"}] and not fetched  # recent: kept
    aged = time.monotonic() - (LIST_SECONDS - LIST_AHEAD_SECONDS / 2)
    listings._lists[key] = (aged, [{"kernel_id": "old"}])
    for _ in range(5):  # callers go on with the kept one; one renewal runs, on a thread of its own
        assert listings.listed(key, False, slow) == [{"kernel_id": "old"}]
    until(lambda: bool(fetched))
    assert len(fetched) == 1 and fetched[0] != threading.current_thread().name
    release.set()
    until(lambda: listings.listed(key, False, slow) == [{"kernel_id": "new"}])
    assert len(fetched) == 1
    assert listings.listed(key, True, lambda: [{"kernel_id": "now"}]) == [{"kernel_id": "now"}]  # fresh: asked now
    listings._lists[key] = (time.monotonic() - LIST_SECONDS, [{"kernel_id": "old"}])
    assert listings.listed(key, False, lambda: [{"kernel_id": "late"}]) == [{"kernel_id": "late"}]  # stale: now


def test_one_server_is_listed_by_one_caller_at_a_time():
    from mcp_notebook.jupyterhub_service.users import Listings

    listings = Listings()
    release = threading.Event()
    fetched: list[int] = []

    def slow() -> list[dict]:
        fetched.append(1)
        release.wait(30)
        return [{"kernel_id": "k"}]

    got: list[list[dict]] = []
    callers = [
        threading.Thread(target=lambda: got.append(listings.listed(("bob", "/"), False, slow))) for _ in range(8)
    ]
    for caller in callers:
        caller.start()
    until(lambda: bool(fetched))
    release.set()
    for caller in callers:
        caller.join(30)
    assert fetched == [1] and got == [[{"kernel_id": "k"}]] * 8  # eight callers, one listing


def test_a_failed_renewal_ahead_leaves_the_kept_listing():
    from mcp_notebook.jupyterhub_service.users import LIST_AHEAD_SECONDS, LIST_SECONDS, Listings

    listings = Listings()
    key = ("carol", "/user/carol/")
    assert listings.listed(key, False, lambda: None) == []  # failed with nothing kept: [] (kept as an answer)
    assert listings.listed(key, True, lambda: [{"kernel_id": "k"}]) == [{"kernel_id": "k"}]
    aged = time.monotonic() - (LIST_SECONDS - LIST_AHEAD_SECONDS / 2)
    listings._lists[key] = (aged, [{"kernel_id": "k"}])
    failed: list[int] = []
    assert listings.listed(key, False, lambda: failed.append(1)) == [{"kernel_id": "k"}]  # renewal fails, ahead
    until(lambda: bool(failed) and not listings._asking)
    assert listings._lists[key] == (aged, [{"kernel_id": "k"}])  # the kept listing, as it was


def test_the_start_up_heap_is_frozen_and_later_cycles_are_still_collected():
    """The service freezes its start-up heap before serving (heap.settle_heap): a full collection then
    walks only what came since, and a cycle made after is still collected."""
    import gc
    import weakref

    from mcp_notebook.heap import settle_heap

    class Node:
        me: object = None

    try:
        frozen = settle_heap()
        assert frozen > 10_000 and gc.get_freeze_count() == frozen  # this interpreter's start-up heap
        assert len(gc.get_objects()) < frozen // 10  # what a full collection walks now
        node = Node()
        node.me = node
        ref = weakref.ref(node)
        del node
        gc.collect()
        assert ref() is None
    finally:
        gc.unfreeze()


def test_answers_due_together_are_renewed_several_at_a_time(jupyterhub):
    """Thirty grants opened together come due together: asked one after another, the round took
    longer than the second asked ahead, and reads waited for JupyterHub (issue #42, fifth pass)."""
    from concurrent.futures import ThreadPoolExecutor

    from mcp_notebook.jupyterhub_service.endpoint import RENEW_THREADS, renew

    url, asked, gate = jupyterhub
    links = [JupyterHubLink(url, "alice", f"token-{i}", check_seconds=30.0) for i in range(2 * RENEW_THREADS)]
    pool = ThreadPoolExecutor(RENEW_THREADS)
    try:
        gate.clear()  # JupyterHub slow: each question waits until the gate opens
        round_ = threading.Thread(target=renew, args=(links, pool))
        round_.start()
        until(lambda: len(asked) >= RENEW_THREADS)  # that many asked at once (one at a time: just one)
        time.sleep(0.2)
        assert len(asked) == RENEW_THREADS
        gate.set()
        round_.join(10)
        assert not round_.is_alive() and len(asked) == 2 * RENEW_THREADS
        assert all(link.fresh() for link in links)
        renew(links, pool)  # all fresh now: nobody is asked again
        assert len(asked) == 2 * RENEW_THREADS
    finally:
        gate.set()
        pool.shutdown()
