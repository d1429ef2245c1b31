"""A hostile client on every surface (issue #32), property-based with Hypothesis: the hub on loopback
HTTP, the bare bridge's front over HTTP, the server extension's all-kernels and per-kernel endpoints
(over the kernel's control channel), its focus and kernels routes, the control channel itself
(signed messages on a real kernel's control socket) and the bridge's stdin.

Every case counts unanswered requests, process exits, 5xx, -32603 and token leaks (no hub, front or
Jupyter token in any answer); the last tests count what is left open (listens, control exchanges,
threads, a bridge that does not exit). All must be zero. ``MCP_HOSTILE_CASES`` sets the total
(default 2,000: the test command); ``python bench/hostile.py`` runs 100,000 and prints the
counts (``MCP_HOSTILE_COUNT_ONLY=1``: count, do not stop at the first problem).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from control_peer import ControlPeer
from fuzz_shapes import SESSION, TOKEN, Case, junk, message
from hostile_tally import Tally, exchange, http_problems, rpc_problems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_bridge import RawBridge
from test_fuzz import _NO_LONG_POLLS, framed, with_head

from mcp_notebook.bridge.stdio_input import MAX_LINE_BYTES

pytestmark = pytest.mark.timeout(0 if os.environ.get("MCP_HOSTILE_CASES") else 600)
TOTAL = int(os.environ.get("MCP_HOSTILE_CASES", "2000"))
SHARE = {"hub": 0.2, "front": 0.18, "server": 0.14, "routes": 0.1, "control": 0.2, "stdin": 0.18}
JTOKEN = "hostile-fuzz-jupyter-token"
TALLY = Tally()
_COMMON = {"deadline": None, "suppress_health_check": list(HealthCheck), "database": None, "derandomize": TOTAL <= 5000}


def examples(surface: str) -> int:
    return max(20, int(TOTAL * SHARE[surface]))


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    TALLY.report(os.environ.get("MCP_HOSTILE_REPORT"))


# == the setting: one kernel with a hub, a front over it, a Jupyter server with its own kernel =========
@pytest.fixture(scope="module")
def target(kernel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from jserver import JupyterServer, load_hub, run

    from mcp_notebook.allkernels.directory import LocalDirectory
    from mcp_notebook.allkernels.front import KernelsFront

    info = kernel.load_hub()
    kernel.run(_NO_LONG_POLLS)
    kernel.run("import pandas as pd\ndf = pd.DataFrame({'a': range(5)})\nx = [1, 2]\ns = 'text \\udc80'")
    runtime = Path(info["runtime_file"]).parent
    front = KernelsFront(LocalDirectory(runtime), token=TOKEN)
    front.server.tools._waiters = __import__("threading").Semaphore(0)  # no long polls (see test_fuzz)
    front.serve_http()
    state: dict[str, Any] = {}
    server = JupyterServer(
        tmp_path_factory.mktemp("hostile-fuzz"), token=JTOKEN, extra_args=("--MCPNotebookExtension.route=control",)
    )
    try:
        kid = server.start_session("fuzzed.ipynb")
        kc = server.client(kid)
        server_hub = load_hub(kc)
        run(kc, _NO_LONG_POLLS + "\nx = [1, 2]")
        state = {
            "kernel": kernel,
            "info": info,
            "front": front,
            "server": server,
            "server_kernel": kid,
            "runtime": runtime,
            "secrets": [
                info["token"],
                front.settings.token if front.settings.token != TOKEN else "",
                JTOKEN,
                server_hub["token"],
            ],
        }
        yield state
    finally:
        server.stop()
        if not state.get("front_closed"):
            front.close()


def _secrets(target: dict[str, Any], sent: bytes) -> list[str]:
    """The tokens an answer must not hold: the hubs' and fronts' always, Jupyter's unless the client
    sent it (Jupyter's own pages may echo a client's token back to it, in a redirect)."""
    return [t for t in target["secrets"] if t != JTOKEN or JTOKEN.encode() not in sent]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _baseline(target: dict[str, Any]) -> dict[str, int]:
    if "baseline" not in target:
        target["baseline"] = _hub_state(target["kernel"])
    return target["baseline"]


def _hub_state(kernel: Any) -> dict[str, int]:
    # bounded, started on first use: the request pool (4) and the exact-check worker (1 per hub)
    code = (
        "_LAZY = {'mcp-notebook-hub'}\n"
        "import json as _j, threading as _t, mcp_notebook as _m; _h = _m.hub(); _c = _h.control\n"
        "_n = [t.name for t in _t.enumerate() if t.name not in _LAZY and not t.name.startswith('mcp-notebook-req')]\n"
        "print(_j.dumps({'listening': sorted(f'{l.sub_id}:{sorted(l.uris)[:3]}:{l.list_changed}' for l in _h.server.listens()),"
        " 'listens': len(_h.server.listens()), 'threads': len(_n), 'names': sorted(_n),"
        " 'exchanges': sum(len(s.exchanges) for s in _c.senders.values()) if _c else 0}))"
    )
    return json.loads(kernel.run(code).stdout.strip().splitlines()[-1])


# == 1. the hub on loopback HTTP ======================================================================
@settings(max_examples=examples("hub"), **_COMMON)
@given(data=st.data())
def test_hub_over_http(target, data):
    _baseline(target)
    raw, complete = data.draw(framed())
    raw = with_head(with_head(raw, TOKEN, target["info"]["token"]), SESSION, "no-such-session")
    out = exchange(_port(target["info"]["url"]), raw)
    TALLY.case("hub", http_problems(out, complete, target["secrets"]), raw[:300])


# == 2. the bare bridge's front over HTTP =============================================================
@settings(max_examples=examples("front"), **_COMMON)
@given(data=st.data())
def test_front_over_http(target, data):
    raw, complete = data.draw(framed())
    out = exchange(target["front"].transport.port, raw)
    TALLY.case("front", http_problems(out, complete, target["secrets"]), raw[:300])


# == 3. the server extension's MCP endpoints ==========================================================
_ROUTES = ["mcp-notebook/mcp", "mcp-notebook/kernels/{kid}/mcp", "mcp-notebook/kernels/{bad}/mcp"]


@settings(max_examples=examples("server"), **_COMMON)
@given(data=st.data())
def test_server_mcp_endpoints(target, data):
    raw, complete = data.draw(framed())
    route = data.draw(st.sampled_from(_ROUTES)).format(
        kid=target["server_kernel"], bad="0" * 8 + "-0000-0000-0000-" + "0" * 12
    )
    head, sep, body = raw.partition(b"\r\n\r\n")
    line, _, rest = head.partition(b"\r\n")
    parts = line.split(b" ")
    if len(parts) == 3 and parts[1].startswith(b"/mcp"):
        parts[1] = b"/" + route.encode() + parts[1][4:]
    head = b" ".join(parts) + b"\r\n" + rest.replace(f"Bearer {TOKEN}".encode(), f"token {JTOKEN}".encode())
    head += b"\r\nConnection: close"
    # a complete request is answered and closed (Connection: close); an incomplete one waits for
    # bytes that never come until our FIN
    out = exchange(target["server"].port, head + sep + body, half_close=not complete, timeout=20)
    TALLY.case("server", http_problems(out, complete and parts[1:2] != [b"/"], _secrets(target, head)), head[:300])


# == 4. the server extension's focus and kernels routes ===============================================
_ORIGINS = [None, None, "http://evil.example", "null", "http://127.0.0.1:{port}", "http://127.0.0.1.evil.example"]
_JUNK = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"[" * 50_000 + b"]" * 50_000, b"null", b"{}", b'{"kernel_id": null}', b'{"kernel_id": 5}']),
    st.recursive(
        st.none() | st.integers() | st.text(max_size=10),
        lambda k: st.lists(k, max_size=3) | st.dictionaries(st.text(max_size=5), k, max_size=3),
        max_leaves=8,
    ).map(lambda v: json.dumps({"kernel_id": v}).encode()),
)


@settings(max_examples=examples("routes"), **_COMMON)
@given(data=st.data())
def test_server_routes(target, data):
    server = target["server"]
    verb = data.draw(st.sampled_from(["POST", "POST", "GET", "OPTIONS", "PUT", "DELETE"]))
    route = data.draw(st.sampled_from(["mcp-notebook/focus", "mcp-notebook/kernels", "mcp-notebook/kernels/"]))
    origin = data.draw(st.sampled_from(_ORIGINS))
    authed = data.draw(st.integers(0, 5)) > 0
    body = json.dumps({"kernel_id": target["server_kernel"]}).encode() if data.draw(st.booleans()) else data.draw(_JUNK)
    lines = [
        f"{verb} /{route} HTTP/1.1",
        f"Host: 127.0.0.1:{server.port}",
        "Connection: close",
        f"Content-Length: {len(body)}",
        "Content-Type: application/json",
    ]
    if authed:
        lines.append(f"Authorization: token {JTOKEN}")
    if origin is not None:
        lines.append(f"Origin: {origin.format(port=server.port)}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    out = exchange(server.port, raw, half_close=False)
    problems = http_problems(out, True, _secrets(target, raw))
    foreign = (origin is not None and "evil" in origin) or origin == "null"
    status = out[9:12]
    if foreign and authed and verb in ("POST", "GET") and status not in (b"403", b"404", b"405"):
        problems.append("5xx" if status.startswith(b"5") else "foreign_origin_served")
    TALLY.case("routes", problems, raw[:300])


# == 5. the control channel ===========================================================================
@pytest.fixture(scope="module")
def peer(target) -> Iterator[ControlPeer]:
    p = ControlPeer(target["kernel"].km)
    yield p
    p.close()


_CONTROL_IDS = ["reused-a", "reused-b"]


@settings(max_examples=examples("control"), **_COMMON)
@given(data=st.data())
def test_control_channel(target, peer, data):
    case: Case = data.draw(message())
    headers: Any = {k: v.replace(f"Bearer {TOKEN}", f"Bearer {peer.token}") for k, v in case.headers.items()}
    headers["host"] = peer.host if data.draw(st.integers(0, 5)) else headers.get("host", "")
    mutate = data.draw(st.integers(0, 9))
    if mutate == 0:
        headers = data.draw(st.one_of(st.none(), st.lists(st.text(max_size=3), max_size=2), st.text(max_size=5)))
    elif mutate == 1:
        headers = {**headers, data.draw(st.text(max_size=8)): data.draw(st.text(max_size=12))}
    body: Any = case.body.decode("utf-8", "surrogateescape")
    if data.draw(st.integers(0, 9)) == 0:
        body = data.draw(st.one_of(st.none(), st.integers(), st.lists(st.integers(), max_size=2)))
    method: Any = (
        case.http_method
        if data.draw(st.integers(0, 9))
        else data.draw(st.one_of(st.integers(), st.lists(st.text(max_size=4), max_size=2), st.text(max_size=6)))
    )
    msg_id = data.draw(st.sampled_from([None, None, None, *_CONTROL_IDS]))
    content = {"method": method, "headers": headers, "body": body}
    sent = peer.send("mcp_request", content, msg_id=msg_id)
    problems: list[str] = []
    try:
        replies = peer.replies(sent, timeout=20, final=False)
    except TimeoutError:
        replies = []
        problems.append("unanswered")
    if replies and not replies[0]["content"].get("final"):  # a stream opened: a second use of its id is refused
        again = peer.ask("mcp_request", content, msg_id=sent, timeout=20)
        finals = [m for m in again if m["content"].get("final")]
        if not finals or finals[-1]["content"].get("status") != 409:
            problems.append("reused_id_accepted")
        peer.send("mcp_cancel", {"request": sent})
    elif replies:
        text = "".join(m["content"].get("body") or "" for m in replies)
        status = int(replies[0]["content"].get("status") or 0)
        problems += (["5xx"] if status >= 500 else []) + rpc_problems(text, target["secrets"])
    if data.draw(st.integers(0, 19)) == 0:
        peer.send(
            "mcp_cancel",
            data.draw(
                st.one_of(st.just({"request": sent}), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
            ),
        )
    if data.draw(st.integers(0, 29)) == 0:
        peer.send("mcp_keepalive", {})
    TALLY.case("control", problems, content)


# == 6. the bridge's stdin ============================================================================
_BRIDGES: list[RawBridge] = []  # the last one is in use (a bridge that died is counted and replaced)


class _Current:
    """The bridge in use, whichever process it is now."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_BRIDGES[-1], name)


@pytest.fixture(scope="module")
def bridge(target) -> Iterator[Any]:
    _BRIDGES.append(RawBridge(target["runtime"]))
    yield _Current()
    for b in _BRIDGES:
        if b.proc.poll() is None:
            b.close(timeout=60)


def _expects_answer(line: bytes) -> Any:
    """The id a line must be answered with (None: no answer is owed or none can be told)."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(msg, dict) or "method" not in msg or msg.get("method") == "subscriptions/listen":
        return None
    msg_id = msg.get("id")
    if (
        isinstance(msg_id, bool)
        or not isinstance(msg_id, (str, int))
        or "\\ud" in line.decode("utf-8", "replace").lower()
    ):
        return None
    return msg_id


def _dump(value: Any) -> bytes:
    return json.dumps(value).encode()  # lone surrogates as \u escapes, as a client may send them


@st.composite
def stdin_line(draw: st.DrawFn) -> bytes:
    """A mutated message (fuzz_shapes), or one of the shapes that killed or starved the bridge:
    deep nesting, junk ids and params, cancels of junk, garbage bytes, an oversized line."""
    case: Case = draw(message())
    kind = draw(st.integers(0, 15))
    doc: Any = None
    try:
        doc = json.loads(case.body)
    except (ValueError, RecursionError):
        pass
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind == 1:
        n = draw(st.sampled_from([500, 5_000, 100_000]))
        return draw(
            st.sampled_from([b"[" * n + b"]" * n, b'{"jsonrpc":"2.0","id":1,"params":' + b"[" * n + b"]" * n + b"}"])
        )
    if kind == 2:
        return _dump({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": draw(junk)})
    if kind == 3:
        params = {"requestId": draw(junk), "reason": draw(junk)}
        return _dump({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
    if kind in (4, 5) and isinstance(doc, dict):
        doc["id" if kind == 4 else "params"] = draw(st.one_of(junk, st.sampled_from(["\ud800", "x\udfff", 1.5, True])))
        return _dump(doc)
    if kind == 6 and draw(st.integers(0, 9)) == 0:
        return b'{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"x":"' + b"x" * (MAX_LINE_BYTES + 10) + b'"}}'
    return case.body


@settings(max_examples=examples("stdin"), **_COMMON)
@given(data=st.data())
def test_bridge_stdin(target, bridge, data):
    line = data.draw(stdin_line()).replace(b"\n", b" ").replace(b"\r", b" ")
    want = _expects_answer(line)
    if want is not None:  # fresh ids: an answer to this line is told from one to an earlier line
        tag = f"h{random.getrandbits(48)}" if isinstance(want, str) else random.getrandbits(40)
        doc = json.loads(line)
        doc["id"] = tag
        line, want = json.dumps(doc).encode(), tag
    problems: list[str] = []
    try:
        bridge.send_raw(line)
    except (BrokenPipeError, OSError):
        problems.append("exit")
    if want is not None and not problems:
        try:
            reply = bridge.reply(want, timeout=30)
            problems += rpc_problems(json.dumps(reply), target["secrets"])
        except TimeoutError:
            problems.append("unanswered")
        except AssertionError:
            problems.append("exit")
    if bridge.proc.poll() is not None and "exit" not in problems:
        problems.append("exit")
    if not problems:
        for note in bridge.notifications(0.0):
            problems += rpc_problems(json.dumps(note), target["secrets"])
    if "exit" in problems:  # counted; the next case gets a new bridge
        _BRIDGES.append(RawBridge(target["runtime"]))
    TALLY.case("stdin", sorted(set(problems)), line[:300])


# == what is left afterwards ==========================================================================
def test_zz_nothing_left_open(target, peer, bridge):
    """The bridge still answers and exits cleanly when stdin ends; once the fronts' clients are gone
    (the bridge exited, the in-process front closed its sessions), listens at the hub, control
    exchanges and kernel threads are back to where they were."""
    # an id no fuzzed line can hold (ids are drawn as text of at most 8 characters, and Hypothesis
    # draws the string constants of this module: "last" was one, and its listens' errors answered this)
    probe_id = "after-the-fuzzed-lines"
    probe = {"jsonrpc": "2.0", "id": probe_id, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    try:
        ok = "result" in bridge.ask(probe, timeout=30)
    except (TimeoutError, AssertionError):
        ok = False
    TALLY.case("stdin", [] if ok else ["unanswered"], "a clean initialize after the run")
    code = bridge.close(timeout=60)
    TALLY.case("stdin", [] if code == 0 else ["exit"], f"exit status {code}")
    target["front"].close()  # gone: so must be every listen it held upstream
    target["front_closed"] = True
    base = _baseline(target)
    deadline = time.monotonic() + 30
    while True:
        now = _hub_state(target["kernel"])
        settled = now["exchanges"] == 0 and now["listens"] <= base["listens"] and now["threads"] <= base["threads"]
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    TALLY.leaked("control", "control exchanges", now["exchanges"])
    TALLY.leaked(
        "hub", f"listens at the hub ({base['listening']} -> {now['listening']})", now["listens"] - base["listens"]
    )
    new_threads = sorted(set(now["names"]) - set(base["names"]))
    TALLY.leaked("hub", f"kernel threads ({new_threads})", now["threads"] - base["threads"])
    if os.environ.get("MCP_HOSTILE_COUNT_ONLY") != "1":
        assert not TALLY.problems(), (TALLY.problems(), TALLY.examples)
