"""Hypothesis strategies for the request side, built from the protocol's own shapes.

A valid message per method (both eras, every tool), then every field kept, replaced by junk of
another type, deleted, or joined by an unknown field; unicode edge cases (lone surrogates, NUL,
BOM, separators), big and deeply nested values; headers with and without the token; bodies
encoded as escaped JSON, raw CESU-8 surrogates, batches, or with a few bytes mutated. Used by
tests/test_fuzz.py and by bench/fuzz.py (the long run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from mcp_notebook.revisions import HANDSHAKE_VERSIONS

TOKEN = "fuzz-token"
SESSION = "fuzz-session-id"  # replaced by a live session id when a case is sent
STATELESS = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
DEEP = "\x00deep\x00"  # replaced by a deeply nested array in the encoded body

EDGE_TEXT = [
    "",
    "\ud800",
    "\udc80",
    "x\udfffy",
    "\ud83d\ude00",
    "\x00",
    "\u2028",
    "\ufeff",
    "nb://vars/\ud800",
    "nb://vars/",
    "nb://vars/x",
    "nb://frames/x?limit=-1",
    "nb://cells/99999999999999999999",
    "test://static",
    "test://item/{id}",
    "a" * 9000,
    "../../etc/passwd",
    "%00%ff",
    "ref/resource",
    "ref/prompt",
    STATELESS,
    "2025-11-25",
    "debug",
    "list_resources",
    "read_resource",
    "changes_since",
    "0.0",
    "eyJvIjogLTF9",
    DEEP,
    "nb://kernels",
    "nb://kernels/fuzzed/vars/x",
    "nb://kernels/no-such-kernel/vars/x",
    "nb://vars/a\r\nX-Injected: 1",
]

VALID: dict[str, dict[str, Any]] = {
    "initialize": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}},
    "ping": {},
    "logging/setLevel": {"level": "info"},
    "resources/list": {"cursor": "eyJvIjogMH0"},
    "resources/templates/list": {},
    "resources/read": {"uri": "test://static"},
    "resources/subscribe": {"uri": "test://static"},
    "resources/unsubscribe": {"uri": "test://static"},
    "completion/complete": {
        "ref": {"type": "ref/resource", "uri": "test://item/{id}"},
        "argument": {"name": "id", "value": "a"},
        "context": {"arguments": {"id": "x"}},
    },
    "server/discover": {},
    "subscriptions/listen": {
        "notifications": {"resourcesListChanged": True, "resourceSubscriptions": ["test://static"]}
    },
    "tools/list": {},
    "tools/call:list_resources": {"name": "list_resources", "arguments": {"cursor": "eyJvIjogMH0"}},
    "tools/call:read_resource": {"name": "read_resource", "arguments": {"uri": "test://static"}},
    "tools/call:changes_since": {"name": "changes_since", "arguments": {"cursor": "x.0", "wait_seconds": 0}},
    "notifications/initialized": {},
    "no/such/method": {},
}

edge_text = st.sampled_from(EDGE_TEXT)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    edge_text,
)
junk = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.one_of(st.text(max_size=6), edge_text), kids, max_size=4)
    ),
    max_leaves=10,
)


@st.composite
def mutated(draw: st.DrawFn, value: Any, depth: int = 0) -> Any:
    """``value`` with each field kept, mutated in depth, replaced by junk, or deleted; maybe extra fields."""
    roll = draw(st.integers(0, 9))
    if roll == 0 or depth > 4:
        return draw(junk)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            action = draw(st.integers(0, 9))
            if action == 0:
                continue  # deleted
            out[key] = draw(mutated(item, depth + 1)) if action <= 3 else item
        if draw(st.integers(0, 7)) == 0:
            out[draw(st.one_of(st.text(max_size=6), edge_text))] = draw(junk)
        return out
    if isinstance(value, list):
        return [draw(mutated(item, depth + 1)) for item in value] + draw(st.lists(junk, max_size=2))
    return value if roll > 3 else draw(junk)


def _no_long_poll(msg: Any) -> None:
    """changes_since with a positive wait_seconds would hold the run for up to 30 s: make it 0."""
    p = msg.get("params") if isinstance(msg, dict) else None
    args = p.get("arguments") if isinstance(p, dict) else None
    wait = args.get("wait_seconds") if isinstance(args, dict) else None
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0:
        args["wait_seconds"] = 0


@dataclass
class Case:
    http_method: str
    headers: dict[str, str]
    body: bytes
    era: str
    method: str
    authed: bool
    notes: list[str] = field(default_factory=list)


def latin1_text(max_size: int = 40) -> st.SearchStrategy[str]:
    return st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=max_size)


@st.composite
def header_value(draw: st.DrawFn, good: str | None) -> str | None:
    """The right value most of the time, else missing, junk, or a near miss."""
    roll = draw(st.integers(0, 9))
    if roll <= 5:
        return good
    if roll == 6:
        return None
    if roll == 7 and good:
        return good.upper() if draw(st.booleans()) else good + " "
    return draw(latin1_text())


@st.composite
def message(draw: st.DrawFn) -> Case:
    """One HTTP request carrying a mutated JSON-RPC message of either era.

    The session header holds :data:`SESSION`, which a test swaps for a live session id when it sends:
    the strategy itself must not depend on state outside it.
    """
    name = draw(st.sampled_from(sorted(VALID)))
    method = name.split(":")[0]
    params = json.loads(json.dumps(VALID[name]))
    era = draw(st.sampled_from(["handshake", "stateless"])) if method != "initialize" else "handshake"
    if era == "stateless":
        params["_meta"] = {META_VERSION: STATELESS, META_CAPS: {}}
        if draw(st.booleans()):
            params["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"
    msg: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": draw(st.one_of(st.integers(0, 10**6), st.text(max_size=8))),
        "method": method,
        "params": params,
    }
    if method.startswith("notifications/"):
        del msg["id"]
    if draw(st.integers(0, 2)) > 0:
        msg = draw(mutated(msg))
    if draw(st.integers(0, 9)) == 0:
        msg = [msg, draw(mutated(msg))]
    for item in msg if isinstance(msg, list) else [msg]:
        _no_long_poll(item)
    try:
        if draw(st.integers(0, 5)) == 0:  # raw surrogates (CESU-8) instead of \u escapes
            raw = json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogatepass")
        else:
            raw = json.dumps(msg).encode()
    except (TypeError, ValueError, RecursionError):
        raw = b"{}"
    deep = json.dumps(DEEP).encode()
    if deep in raw:
        n = draw(st.sampled_from([10, 500, 5000, 50_000]))
        raw = raw.replace(deep, b"[" * n + b"]" * n, 1)
    if draw(st.integers(0, 7)) == 0 and raw:  # a few bytes flipped, cut or inserted
        data = bytearray(raw)
        for _ in range(draw(st.integers(1, 4))):
            pos = draw(st.integers(0, len(data)))
            op = draw(st.integers(0, 2))
            if op == 0 and pos < len(data):
                data[pos] = draw(st.integers(0, 255))
            elif op == 1:
                del data[pos : pos + draw(st.integers(1, 8))]
            else:
                data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        raw = bytes(data)
    authed = draw(st.integers(0, 4)) > 0
    h: dict[str, str | None] = {
        "host": draw(header_value("127.0.0.1:9")),
        "authorization": f"Bearer {TOKEN}"
        if authed
        else draw(st.sampled_from([None, "Bearer nope", "Basic x", "Bearer"])),
        "content-type": draw(header_value("application/json")),
        "accept": draw(header_value("application/json, text/event-stream")),
        "origin": draw(st.sampled_from([None, None, None, "http://localhost:1", "http://evil.example", "null"])),
    }
    if era == "stateless":
        h["mcp-protocol-version"] = draw(header_value(STATELESS))
        h["mcp-method"] = draw(header_value(method))
        named = params.get("uri") or params.get("name")
        h["mcp-name"] = draw(header_value(named if isinstance(named, str) else None))
    else:
        h["mcp-session-id"] = draw(header_value(SESSION))
        h["mcp-protocol-version"] = draw(header_value(draw(st.sampled_from(HANDSHAKE_VERSIONS))))
    verb = draw(st.sampled_from(["POST"] * 12 + ["GET", "DELETE", "PUT"]))
    headers = {k: v for k, v in h.items() if v is not None}
    if verb == "GET":
        headers["accept"] = "text/event-stream"
    return Case(verb, headers, raw if verb == "POST" else b"", era, method, authed)
