"""Property-based fuzzing of the request side (Hypothesis).

Three passes: mutated JSON-RPC messages of both eras into the sans-IO ``McpServer.handle`` (fast,
most cases), mutated HTTP framing over real sockets into ``HttpTransport``, and a smaller pass of
both against the hub inside a real kernel, whose iopub must carry no stream output from the server.
Properties: every request gets a reply below 500 with a well-formed body, no internal error is
logged, and the hub answers afterwards.

Profiles: ``HYPOTHESIS_PROFILE=ci`` (default; derandomized, bounded to seconds) and ``long`` (tens
of thousands of cases; ``python bench/fuzz.py``). With ``MCP_FUZZ_REPORT=<file>`` the number of
cases per pass is written there as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from fuzz_shapes import SESSION, TOKEN, Case, message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_notebook.protocol.server import HttpRequest, McpServer, ServerSettings
from mcp_notebook.providers.custom import CustomProvider, make_registration
from mcp_notebook.resources import Resources
from mcp_notebook.transport.server import HttpTransport

_COMMON = {"deadline": None, "suppress_health_check": list(HealthCheck), "database": None}
settings.register_profile("ci", max_examples=400, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=20_000, **_COMMON)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
LONG = PROFILE == "long"
CASES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    path = os.environ.get("MCP_FUZZ_REPORT")
    if path:
        old = json.loads(open(path).read()) if os.path.exists(path) else {}
        for key, n in CASES.items():
            old[key] = old.get(key, 0) + n
        with open(path, "w") as f:
            json.dump(old, f)


class _Errors(logging.Handler):
    """Collects error records of the package's loggers (an internal failure, not an input error)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def errors() -> Iterator[_Errors]:
    handler = _Errors()
    for name in ("mcp_notebook", "asyncio"):
        logging.getLogger(name).addHandler(handler)
    try:
        yield handler
    finally:
        for name in ("mcp_notebook", "asyncio"):
            logging.getLogger(name).removeHandler(handler)


# A mutated body may turn changes_since's wait_seconds into a valid long poll (up to 30 s): a correct
# answer, but one that would hold each such case for its whole wait. With no waiter slot free, the
# hub answers those at once with "busy" (its documented behaviour when two polls already wait).
_NO_LONG_POLLS = "import threading as _th, mcp_notebook as _m; _m.hub().server.tools._waiters = _th.Semaphore(0)"


def _registrations(custom: CustomProvider) -> None:
    for uri, fn, complete in (
        ("test://static", lambda: "hello", None),
        ("test://item/{id}", lambda id: f"item {id}", {"id": ["apple", "banana"]}),
    ):
        custom.register(
            make_registration(
                uri, fn, name="r", title=None, description=None, mime_type=None, annotations=None, complete=complete
            )
        )


@pytest.fixture(scope="module")
def sans_io() -> Iterator[tuple[McpServer, str]]:
    custom = CustomProvider()
    _registrations(custom)
    hub = Resources([custom])
    server = McpServer(hub, ServerSettings(token=TOKEN, max_sessions=8))
    server.tools._waiters = threading.Semaphore(0)  # see _NO_LONG_POLLS
    sid = _initialize(server)
    yield server, sid
    server.close()
    hub.close()


def _initialize(server: McpServer) -> str:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}
    headers = {"host": "127.0.0.1", "authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    return server.handle(HttpRequest("POST", headers, json.dumps(init).encode())).headers["Mcp-Session-Id"]


def check_reply(status: int, body: bytes | None, ctype: str) -> None:
    assert status < 500, (status, body)
    if body and "json" in ctype:
        doc = json.loads(body.decode("utf-8"))  # strict UTF-8, valid JSON
        for item in doc if isinstance(doc, list) else [doc]:
            assert item.get("jsonrpc") == "2.0" and ("result" in item) != ("error" in item), item
            if "error" in item:
                assert isinstance(item["error"]["code"], int) and isinstance(item["error"]["message"], str)


# == pass 1: sans-IO ================================================================================
@settings(max_examples=20_000 if LONG else 400)
@given(data=st.data())
def test_fuzz_messages_in_process(sans_io, errors, data):
    server, _ = sans_io
    case: Case = data.draw(message())
    live = server.sessions()
    sid = live[0].id if live else SESSION
    req = HttpRequest(case.http_method, {k: v.replace(SESSION, sid) for k, v in case.headers.items()}, case.body)
    inline = not server.may_run_user_code(req)  # what a transport asks first: must never raise
    reply = server.handle(req)
    CASES["in_process"] += 1
    try:
        check_reply(reply.status, reply.body, reply.headers.get("Content-Type", ""))
        if not case.authed:
            assert reply.status in (401, 403) and inline
        if reply.stream is not None:
            for event in reply.stream.drain():
                json.loads(event.split(b"data: ", 1)[1].decode("utf-8"))
        assert not errors.records, [r.getMessage() for r in errors.records]
    finally:
        if reply.stream is not None:
            server.stream_closed(reply.stream)
        errors.records.clear()


def test_fuzz_left_no_watch_or_stream_behind(sans_io):
    server, _ = sans_io
    assert not server.listens()
    assert all(not s.streams for s in server.sessions())


# == pass 2: HTTP framing over real sockets ==========================================================
@pytest.fixture(scope="module")
def transport() -> Iterator[HttpTransport]:
    custom = CustomProvider()
    _registrations(custom)
    hub = Resources([custom])
    t = HttpTransport(McpServer(hub, ServerSettings(token=TOKEN, max_sessions=8)), "127.0.0.1", 0, 200_000)
    t.mcp.tools._waiters = threading.Semaphore(0)  # see _NO_LONG_POLLS
    t.start()
    yield t
    t.stop()
    hub.close()


@st.composite
def framed(draw: st.DrawFn) -> tuple[bytes, bool]:
    """(raw request bytes, complete): one request with its framing varied or broken."""
    case: Case = draw(message())
    body = case.body
    version = draw(st.sampled_from(["HTTP/1.1"] * 6 + ["HTTP/1.0", "HTTP/2.0", "http/1.1"]))
    lines = [f"{case.http_method} {draw(st.sampled_from(['/mcp'] * 8 + ['/', '/mcp?x=1', '/MCP']))} {version}"]
    for name, value in case.headers.items():
        shown = name.title() if draw(st.booleans()) else name
        lines.append(f"{shown}: {value}")
    complete = version in ("HTTP/1.1", "HTTP/1.0")
    framing = draw(
        st.sampled_from(["length", "length", "chunked", "chunked-1", "none", "short", "long", "both", "bad"])
    )
    if framing in ("chunked", "chunked-1") and version == "HTTP/1.1":
        lines.append("Transfer-Encoding: chunked")
        size = 1 if framing == "chunked-1" else draw(st.integers(1, 64))
        payload = b"".join(
            b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)
        )
        payload += b"0\r\n\r\n"
    elif framing == "none":
        payload = b""
    elif framing == "short":
        lines.append(f"Content-Length: {max(0, len(body) - 3)}")
        payload = body  # the rest is read as the start of another request
    elif framing == "long":
        lines.append(f"Content-Length: {len(body) + 10}")
        payload = body
        complete = False  # the server waits for bytes that never come, until the client half-closes
    elif framing == "both":
        lines.append(f"Content-Length: {len(body)}")
        lines.append("Transfer-Encoding: chunked")
        payload = body
    elif framing == "bad":
        lines.append(
            draw(st.sampled_from(["Content-Length: -1", "Content-Length: 1e3", "Transfer-Encoding: gzip", " folded"]))
        )
        payload = body
    else:
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    if draw(st.integers(0, 9)) == 0:
        lines.append("Expect: 100-continue")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + payload
    return raw, complete


def with_head(raw: bytes, old: str, new: str) -> bytes:
    """``raw`` with ``old`` replaced by ``new`` in the request head only (the body keeps its length)."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    return head.replace(old.encode(), new.encode()) + sep + body


def exchange(port: int, raw: bytes, timeout: float = 20.0) -> bytes:
    """Send ``raw``, half-close, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # refused before everything was sent: what came back is still checked
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (ConnectionResetError, TimeoutError):
            pass
        return out


def check_http(out: bytes, complete: bool) -> None:
    if complete:
        assert out.startswith(b"HTTP/1.1 "), out[:200]
    if out:
        assert out.startswith(b"HTTP/1.1 "), out[:200]
        status = int(out[9:12])
        if status == 100:
            rest = out.split(b"\r\n\r\n", 1)[1]
            if not rest:
                return
            status = int(rest[9:12])
        assert status < 500, out[:300]


@settings(max_examples=10_000 if LONG else 150)
@given(data=st.data())
def test_fuzz_http_framing_over_sockets(transport, errors, data):
    live = transport.mcp.sessions()
    raw, complete = data.draw(framed())
    out = exchange(transport.port, with_head(raw, SESSION, live[0].id if live else SESSION))
    CASES["sockets"] += 1
    try:
        check_http(out, complete)
        assert not errors.records, [r.getMessage() for r in errors.records]
    finally:
        errors.records.clear()


def test_transport_still_answers_and_holds_nothing(transport):
    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}'
    raw = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(init)}\r\n\r\n"
    ).encode() + init
    assert exchange(transport.port, raw).startswith(b"HTTP/1.1 200")
    deadline = time.monotonic() + 10
    while (transport.connections or transport.streams) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not transport.connections and not transport.streams


# == pass 3: the hub in a real kernel ================================================================
@pytest.fixture(scope="module")
def kernel_hub(kernel) -> dict[str, Any]:
    from conftest import Mcp

    info = kernel.load_hub()
    client = Mcp(info)
    info["sid"] = client.initialize() and client.session
    client.close()
    kernel.run(_NO_LONG_POLLS)
    kernel.run("import pandas as pd\ndf = pd.DataFrame({'a': range(5)})\ns = 'text \\udc80'\nx = [1, 2]")
    _drain_iopub(kernel)
    return info


def _drain_iopub(kernel) -> list[dict[str, Any]]:
    out = []
    while True:
        try:
            out.append(kernel.kc.get_iopub_msg(timeout=0.2))
        except queue.Empty:
            return out


@settings(max_examples=5_000 if LONG else 60)
@given(data=st.data())
def test_fuzz_real_kernel(kernel, kernel_hub, data):
    port = int(kernel_hub["url"].rsplit(":", 1)[1].split("/")[0])
    token = kernel_hub["token"]
    raw, complete = data.draw(framed())
    raw = with_head(with_head(raw, TOKEN, token), SESSION, kernel_hub["sid"])  # the real hub's token and session
    out = exchange(port, raw)
    CASES["real_kernel"] += 1
    check_http(out, complete)


def test_real_kernel_got_no_output_from_the_server_and_still_answers(kernel, kernel_hub):
    from conftest import Mcp

    time.sleep(0.5)
    streams = [m for m in _drain_iopub(kernel) if m["msg_type"] == "stream"]
    assert not streams, [m["content"]["text"][:300] for m in streams]
    client = Mcp(kernel_hub)
    try:
        client.initialize()
        assert client.result("ping") == {}
        assert client.result("resources/read", {"uri": "nb://vars/x"})["contents"]
    finally:
        client.close()
    assert kernel.run("print(1 + 1)").stdout.strip() == "2"
