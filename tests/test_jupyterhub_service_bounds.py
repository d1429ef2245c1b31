"""The JupyterHub service under one hostile caller, on a real JupyterHub (configurable-http-proxy,
the service, alice's server and kernel): a tarpit host (accepts, never answers) named as a
metadata-document client by 100 concurrent unauthenticated authorization, token and registration
requests while a signed-in user reads; oversized and repeated registrations; revocations raced
against refreshes through HTTP. The figures (p50/p99 of the user's reads, quiet and under the
tarpit, and under the same 100 requests sent to a trivial responder off the read path: what the
attacker's own work on the machine's cores costs the reads) are printed, not asserted: bench/ keeps
figures."""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from jhub import CHP, LocalJupyterHub
from service_oauth import NAVIGATE, authorize_url, pkce, refresh, sign_in

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not CHP.exists(), reason="tests/node: npm ci installs configurable-http-proxy"),
]
pytest.importorskip("jupyterhub")
pytest.importorskip("authlib")

HOSTILE = 100
QUIET_SECONDS = 4.0  # about as long as the attack lasts (its deadline 3 s, then the answers)


class Tarpit:
    """A host on 127.0.0.1 that accepts every connection and never sends a byte."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.sock.settimeout(0.5)
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.held.append(conn)

    def stop(self) -> None:
        self.running = False
        self.thread.join(5)
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.fixture(scope="module")
def jupyterhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalJupyterHub]:
    args = ("--JupyterHubService.cimd_allow_hosts=localhost", "--JupyterHubService.cimd_timeout_seconds=3")
    with LocalJupyterHub(tmp_path_factory.mktemp("jhub"), args) as h:
        h.kernel("alice", "alice_nb.ipynb", "mine = 'alice-41'")
        yield h


@pytest.fixture
def tarpit() -> Iterator[Tarpit]:
    pit = Tarpit()
    yield pit
    pit.stop()


def read_body(uri: str) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    return {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": meta}}


class Reader:
    """A signed-in user reading one variable again and again; each read's status and time."""

    def __init__(self, jupyterhub: LocalJupyterHub, token: str):
        self.url = jupyterhub.mcp_url
        self.http = httpx.Client(timeout=60)
        self.headers = {
            "Authorization": f"Bearer {token}",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "resources/read",
            "Mcp-Name": "nb://kernels/alice_nb/vars/mine",
            "Accept": "application/json, text/event-stream",
        }
        self.timeline: list[tuple[float, float]] = []  # every read: when it started (monotonic), its seconds
        self.went = 0.0  # when the last burst was sent (monotonic)

    def slowest(self, since: float, n: int = 4) -> str:
        """The ``n`` slowest reads started after ``since`` (monotonic): their ms, and when they started."""
        reads = sorted(((s, t - since) for t, s in self.timeline if t >= since), reverse=True)[:n]
        return ", ".join(f"{1000 * s:.0f} ms at {at:+.2f} s" for s, at in reads)

    def once(self) -> tuple[bool, float]:
        start = time.perf_counter()
        r = self.http.post(self.url, json=read_body("nb://kernels/alice_nb/vars/mine"), headers=self.headers)
        ok = r.status_code == 200 and "alice-41" in r.text
        took = time.perf_counter() - start
        self.timeline.append((time.monotonic() - took, took))
        return ok, took

    def until(self, done: threading.Event, at_least: int) -> list[tuple[bool, float]]:
        out: list[tuple[bool, float]] = []
        for _ in range(10_000):  # bounded
            if done.is_set() and len(out) >= at_least:
                break
            out.append(self.once())
            time.sleep(0.02)
        return out


def hostile(jupyterhub: LocalJupyterHub, port: int, i: int) -> dict[str, Any]:
    """One unauthenticated request naming the tarpit, as a spec for the attacking process."""
    client_id = f"https://localhost:{port}/client-{i % 34}"
    if i % 3 == 0:
        _, challenge = pkce()
        return {
            "kind": "authorize",
            "method": "GET",
            "url": authorize_url(jupyterhub, client_id, challenge),
            "headers": NAVIGATE,
        }
    if i % 3 == 1:
        form = {"grant_type": "authorization_code", "code": "x" * 43, "client_id": client_id, "code_verifier": "y" * 50}
        return {"kind": "token", "method": "POST", "url": jupyterhub.service_url + "oauth/token", "data": form}
    body = {"client_name": "n" * 100_000, "redirect_uris": [f"https://localhost:{port}/cb{k}" for k in range(2000)]}
    headers = {"X-Forwarded-For": f"203.0.113.{i}"}  # a caller's own entry: not the address counted
    return {
        "kind": "register",
        "method": "POST",
        "url": jupyterhub.service_url + "oauth/register",
        "json": body,
        "headers": headers,
    }


# The attacker is a process of its own (its 100 requests at once, asyncio): in the test's process
# they would take the reader's share of the interpreter and be counted as the service's cost. It
# starts, imports, reads its requests and builds them (their bodies encoded: 5 MB of JSON) first,
# then waits for "go": its own start-up and encoding are not the service's cost, and an attacker
# elsewhere would not spend this machine's cores on them.
ATTACKER = """
import asyncio, json, sys
import httpx

async def main():
    specs = json.loads(sys.stdin.readline())
    async with httpx.AsyncClient(timeout=60) as http:
        built = [
            http.build_request(s["method"], s["url"], **{k: s[k] for k in ("headers", "data", "json") if k in s})
            for s in specs
        ]
        print("ready", flush=True)
        sys.stdin.readline()
        async def one(spec, request):
            try:
                return [spec["kind"], (await http.send(request)).status_code]
            except httpx.HTTPError as exc:
                return [spec["kind"], repr(exc)]
        print(json.dumps(await asyncio.gather(*(one(s, r) for s, r in zip(specs, built)))), flush=True)

asyncio.run(main())
"""


class Attacker:
    """The attacking process, started and ready (its requests read) before the reads are timed."""

    def __init__(self, specs: list[dict[str, Any]]):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ATTACKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(specs) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ready", self.proc.stderr.read()[-2000:]

    def attack(self) -> list[tuple[str, Any]]:
        """Send every request at once; their kinds and statuses once all are answered."""
        out, err = self.proc.communicate("go\n", timeout=300)
        assert self.proc.returncode == 0, err[-2000:]
        return [tuple(x) for x in json.loads(out)]

    def close(self) -> None:
        """Ended if it still runs (a test that failed before the attack)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


# The control arm's peer: answers every request at once (its body read, a 400 with a small JSON
# body, the connection kept), in a process of its own on 127.0.0.1: on no read's path (neither the
# proxy nor the service), so the reads it slows are slowed by the attacker's and its own work on the
# machine's cores alone. Ends when its stdin closes.
RESPONDER = """
import asyncio, sys

BODY = b'{"error":"invalid_client"}'
ANSWER = b"HTTP/1.1 400 Bad Request\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n%s" % (len(BODY), BODY)

async def serve(reader, writer):
    try:
        for _ in range(100_000):  # bounded
            head = await reader.readuntil(b"\\r\\n\\r\\n")
            length = 0
            for line in head.split(b"\\r\\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            writer.write(ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.close()

asyncio.run(main())
"""


class Responder:
    """The control arm's trivial HTTP responder (a process of its own), on 127.0.0.1 at ``port``."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RESPONDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def elsewhere(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``spec`` (the same method, path, query, headers and body) sent to this responder instead."""
        url = urlsplit(spec["url"])
        return spec | {"url": url._replace(scheme="http", netloc=f"127.0.0.1:{self.port}").geturl()}

    def close(self) -> None:
        self.proc.communicate(timeout=30)  # its stdin closed: it ends


def under(reader: Reader, attacker: Attacker, reads: int) -> tuple[list[tuple[bool, float]], list[Any], float]:
    """The user's reads (``reads`` at least, paced as the quiet ones) while ``attacker`` sends its
    burst; the burst's answers and the seconds they took (the slowest reads after "go": the
    reader's ``went``)."""
    done = threading.Event()
    loaded: list[tuple[bool, float]] = []
    reading = threading.Thread(target=lambda: loaded.extend(reader.until(done, reads)))
    reading.start()
    start = reader.went = time.monotonic()
    try:
        answers = attacker.attack()
    finally:
        spent = time.monotonic() - start
        done.set()
        reading.join(300)
    return loaded, answers, spent


def p99(samples: list[tuple[bool, float]]) -> float:
    ms = sorted(1000 * s for _, s in samples)
    return ms[min(len(ms) - 1, int(0.99 * len(ms)))]


def figures(samples: list[tuple[bool, float]]) -> str:
    ms = [1000 * s for _, s in samples]
    return f"n={len(ms)} p50={statistics.median(ms):.1f} ms p99={p99(samples):.1f} ms"


def test_a_tarpit_named_by_100_callers_leaves_a_users_reads_alone(jupyterhub, tarpit):
    _, tokens = sign_in(jupyterhub, "alice")
    reader = Reader(jupyterhub, tokens["access_token"])
    assert all(ok for ok, _ in (reader.once() for _ in range(20)))  # warm: the grant's front is open
    specs = [hostile(jupyterhub, tarpit.port, i) for i in range(HOSTILE)]
    attacker = Attacker(specs)
    responder = Responder()
    control = Attacker([responder.elsewhere(spec) for spec in specs])
    try:
        # the quiet figure is paced and timed as the loaded one (reads every 20 ms for the seconds
        # the attack lasts): the user's own server pauses now and then (a full garbage collection of
        # its Jupyter server, 150-350 ms, every few seconds of reads), so a shorter quiet window
        # than the loaded one would count those pauses against the attack
        quiet_done = threading.Event()
        threading.Timer(QUIET_SECONDS, quiet_done.set).start()
        quiet = reader.until(quiet_done, 100)
        assert all(ok for ok, _ in quiet)
        loaded, answers, spent = under(reader, attacker, len(quiet))
        slowest = reader.slowest(reader.went)
        # the control arm: the same requests (same client, same bodies) at once to the responder
        controlled, control_answers, _ = under(reader, control, len(quiet))
        slowest_control = reader.slowest(reader.went)
    finally:
        attacker.close()
        control.close()
        responder.close()
    print(
        f"\nquiet: {figures(quiet)}; under the tarpit: {figures(loaded)}; 100 hostile requests answered in {spent:.1f} s"
        f"\ncontrol (the same 100 requests to a responder off the read path): {figures(controlled)}"
        f"\np99 added: by the tarpit's burst {p99(loaded) - p99(quiet):+.1f} ms, "
        f"by the attacker's own work (control) {p99(controlled) - p99(quiet):+.1f} ms"
        f"\nslowest reads after go: under the tarpit {slowest}; control {slowest_control}"
    )
    assert all(ok for ok, _ in loaded), "a read of the signed-in user failed while the tarpit was named"
    assert all(ok for ok, _ in controlled), "a read of the signed-in user failed in the control arm"
    assert {status for _, status in control_answers} == {400}, control_answers[:5]  # all sent and answered
    kinds = {
        kind: sorted({status for k, status in answers if k == kind}) for kind in ("authorize", "token", "register")
    }
    assert set(kinds["authorize"]) <= {400, 503}, kinds
    assert set(kinds["token"]) <= {400, 401}, kinds
    assert set(kinds["register"]) <= {400, 413, 429}, kinds
    assert tarpit.held, "the service never connected to the tarpit"
    log = jupyterhub.log_text()
    assert "client metadata document https://localhost" in log  # the reason is in the log ...


def test_the_caller_gets_a_generic_error_and_a_failure_is_remembered(jupyterhub, tarpit):
    client_id = f"https://localhost:{tarpit.port}/remembered"
    _, challenge = pkce()
    first = time.monotonic()
    r = httpx.get(authorize_url(jupyterhub, client_id, challenge), headers=NAVIGATE, timeout=60)
    assert r.status_code == 400 and "could not be used" in r.text and "tarpit" not in r.text
    assert (
        "deadline" not in r.text and "localhost" not in r.text.split("could not be used")[1]
    )  # ... not for the caller
    took = time.monotonic() - first
    held = len(tarpit.held)
    r = httpx.get(authorize_url(jupyterhub, client_id, challenge), headers=NAVIGATE, timeout=60)
    assert r.status_code == 400 and len(tarpit.held) == held  # remembered: no second connection
    print(f"\nfirst refusal after {took:.1f} s (deadline 3 s)")


def together(*calls: Any) -> list[Any]:
    """The calls started at the same moment, each on a thread of its own; their results."""
    barrier = threading.Barrier(len(calls))

    def run(call: Any) -> Any:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def test_revocation_raced_against_refresh_through_http(jupyterhub):
    user_token = {"Authorization": f"token {jupyterhub.user_token('alice')}"}
    grants_url = jupyterhub.service_url + "api/grants"
    for _ in range(5):
        client_id, tokens = sign_in(jupyterhub, "alice")
        grants = httpx.get(grants_url, headers=user_token, timeout=30).json()["grants"]
        family = next(g["id"] for g in grants if g["client_id"] == client_id)
        got, revoked = together(
            lambda c=client_id, t=tokens: refresh(jupyterhub, c, t["refresh_token"]),
            lambda f=family: httpx.delete(f"{grants_url}/{f}", headers=user_token, timeout=30),
        )
        assert revoked.status_code == 204
        for token in (tokens["access_token"], got.json().get("access_token")):
            assert token is None or not Reader(jupyterhub, token).once()[0]


def test_oversized_and_repeated_registrations_are_refused(jupyterhub):
    url = jupyterhub.service_url + "oauth/register"
    ok = {"client_name": "fine", "redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}
    big_name = httpx.post(url, json=ok | {"client_name": "n" * 100_000}, timeout=30)
    many_uris = httpx.post(
        url, json=ok | {"redirect_uris": [f"http://127.0.0.1:9/{k}" for k in range(2000)]}, timeout=30
    )
    assert big_name.status_code == 400 and many_uris.status_code == 400
    # 300 in a row, each naming another address of its own: the address counted is the proxy's entry
    spoofed = [{"X-Forwarded-For": f"198.51.100.{k % 250}"} for k in range(300)]
    began = time.monotonic()
    statuses = [httpx.post(url, json=ok, headers=h, timeout=30).status_code for h in spoofed]
    # a burst of 20, then 10 a minute: what the bucket refilled while the 300 were sent (a loaded
    # machine takes seconds) is allowed too
    allowed = 20 + int((time.monotonic() - began) * 10 / 60) + 1
    assert statuses.count(201) <= allowed and statuses[-1] == 429, (allowed, statuses[:30])
