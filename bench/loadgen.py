"""HTTP load generation with ``wrk`` (a Lua script per request shape), or a Python fallback.

Each run posts one fixed JSON-RPC body over keep-alive connections and reports throughput,
latency percentiles and error counts: HTTP status >= 400 and JSON-RPC error bodies are both
counted and excluded from the throughput figure.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

STATELESS = "2026-07-28"
HANDSHAKE = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
BASE_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

_LUA = r"""
wrk.method = "POST"
%(headers)s
local head, tail = [==[%(head)s]==], [==[%(tail)s]==]
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0; n = 0 end
function request()
  n = n + 1  -- a fresh JSON-RPC id per request: a session must not see duplicate ids in flight
  return wrk.format(nil, nil, nil, head .. n .. tail)
end
function response(status, headers, body)
  if status < 300 and not string.find(body, '"result"', 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local rpc = 0
  for _, t in ipairs(threads) do rpc = rpc + t:get("bad") end
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%%d,"duration_us":%%d,"bytes":%%d,"non2xx":%%d,' ..
    '"connect_errors":%%d,"read_errors":%%d,"write_errors":%%d,"timeouts":%%d,"rpc_errors":%%d,' ..
    '"p50_us":%%d,"p90_us":%%d,"p99_us":%%d,"mean_us":%%.1f,"max_us":%%d}\n',
    summary.requests, summary.duration, summary.bytes, e.status, e.connect, e.read, e.write, e.timeout, rpc,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end
"""


_LUA_ROTATING = r"""
wrk.method = "POST"
%(headers)s
local prefix, count, meta, named = [==[%(prefix)s]==], %(count)d, [==[%(meta)s]==], %(named)s
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0; n = 0 end
function request()
  n = n + 1  -- a fresh id and the next URI: no two requests in a row alike (head or body)
  local uri = prefix .. (n %% count)
  if named then wrk.headers["Mcp-Name"] = uri end
  local extra = ""
  if meta ~= "" then extra = ',"_meta":' .. meta end
  local body = '{"jsonrpc":"2.0","id":' .. n .. ',"method":"resources/read","params":{"uri":"' .. uri ..
    '"' .. extra .. '}}'
  return wrk.format(nil, nil, nil, body)
end
function response(status, headers, body)
  if status < 300 and not string.find(body, '"result"', 1, true) then bad = bad + 1 end
end
""" + _LUA[_LUA.index("function done") :]


def run_wrk_rotating(
    url: str,
    headers: dict[str, str],
    prefix: str,
    count: int,
    connections: int,
    seconds: float,
    era: str = "stateless",
) -> dict[str, Any]:
    """wrk reading ``prefix0`` .. ``prefix{count-1}`` in turn, a new id each time: in the stateless era
    with ``_meta`` and ``Mcp-Name``; in the handshake era neither (``headers`` name the session)."""
    lines = "\n".join(f'wrk.headers["{k}"] = [==[{v}]==]' for k, v in headers.items())
    stateless = era == "stateless"
    script = _LUA_ROTATING % {
        "headers": lines,
        "prefix": prefix,
        "count": count,
        "meta": json.dumps(META) if stateless else "",
        "named": "true" if stateless else "false",
    }
    return _wrk(script, url, connections, seconds)


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def wrk_version() -> str | None:
    if not have_wrk():
        return None
    out = subprocess.run(["wrk", "--version"], capture_output=True, text=True, timeout=10)
    m = re.search(r"wrk (\S+)", out.stdout + out.stderr)
    return m.group(1) if m else "unknown"


def stateless_request(method: str, params: dict[str, Any] | None = None) -> tuple[dict[str, str], bytes]:
    """Headers and body of a stateless 2026-07-28 request."""
    p = dict(params or {})
    p["_meta"] = META
    headers = {**BASE_HEADERS, "MCP-Protocol-Version": STATELESS, "Mcp-Method": method}
    if method == "resources/read":
        headers["Mcp-Name"] = p["uri"]
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": p}).encode()
    return headers, body


def handshake_session(url: str, auth: dict[str, str]) -> dict[str, str]:
    """initialize + notifications/initialized; the headers later requests of the session need."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    }
    with httpx.Client(timeout=30) as http:
        r = http.post(url, json=init, headers={**BASE_HEADERS, **auth})
        r.raise_for_status()
        sid = r.headers["mcp-session-id"]
        h = {**BASE_HEADERS, **auth, "Mcp-Session-Id": sid, "MCP-Protocol-Version": HANDSHAKE}
        r = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h)
        if r.status_code != 202:
            raise RuntimeError(f"notifications/initialized answered {r.status_code}")
    return h


def handshake_request(
    session_headers: dict[str, str], method: str, params: dict[str, Any] | None = None
) -> tuple[dict[str, str], bytes]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params:
        body["params"] = params
    return dict(session_headers), json.dumps(body).encode()


def check_once(url: str, headers: dict[str, str], body: bytes) -> int:
    """One request; raises unless it is a 2xx JSON-RPC result. Returns the response size."""
    with httpx.Client(timeout=30) as http:
        r = http.post(url, content=body, headers=headers)
    text = r.text
    if r.status_code >= 300 or '"result"' not in text:
        raise RuntimeError(f"{r.status_code}: {text[:300]}")
    return len(r.content)


def run_wrk(url: str, headers: dict[str, str], body: bytes, connections: int, seconds: float) -> dict[str, Any]:
    """One bounded wrk run; returns its summary (latencies in microseconds)."""
    lines = "\n".join(f'wrk.headers["{k}"] = [==[{v}]==]' for k, v in headers.items())
    text = body.decode()
    marker = '"id": 1,' if '"id": 1,' in text else '"id":1,'
    head, _, tail = text.partition(marker)
    if not tail:
        raise ValueError("the request body needs an id of 1 to vary")
    script = _LUA % {"head": head + marker[:-2], "tail": "," + tail, "headers": lines}
    return _wrk(script, url, connections, seconds)


def _wrk(script: str, url: str, connections: int, seconds: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        cmd = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", path, url]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    finally:
        Path(path).unlink(missing_ok=True)
    m = re.search(r"^WRKJSON (.*)$", out.stdout, re.M)
    if m is None:
        raise RuntimeError(f"wrk gave no summary: {out.stdout[-500:]} {out.stderr[-500:]}")
    res = json.loads(m.group(1))
    errors = res["non2xx"] + res["rpc_errors"] + res["connect_errors"] + res["read_errors"] + res["timeouts"]
    good = max(0, res["requests"] - res["non2xx"] - res["rpc_errors"])
    res["errors"] = errors
    res["rps"] = good / (res["duration_us"] / 1e6)
    res["tool"] = "wrk"
    return res


async def _py_load(url: str, headers: dict[str, str], body: bytes, connections: int, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(http: httpx.AsyncClient) -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            r = await http.post(url, content=body, headers=headers)
            dt = time.perf_counter() - t0
            if r.status_code >= 300 or b'"result"' not in r.content:
                errors += 1
            else:
                lat.append(dt)

    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=30, limits=limits) as http:
        await asyncio.gather(*(worker(http) for _ in range(connections)))
    elapsed = time.perf_counter() - start
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [0.0] * 99
    return {
        "tool": "python-httpx (fallback: wrk not found)",
        "requests": len(lat) + errors,
        "errors": errors,
        "rps": len(lat) / elapsed,
        "p50_us": q[49] * 1e6,
        "p90_us": q[89] * 1e6,
        "p99_us": q[98] * 1e6,
    }


def run_load(url: str, headers: dict[str, str], body: bytes, connections: int, seconds: float) -> dict[str, Any]:
    if have_wrk():
        return run_wrk(url, headers, body, connections, seconds)
    return asyncio.run(_py_load(url, headers, body, connections, seconds))
