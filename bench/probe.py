"""The acceptance probe for issue #10, against a real kernel: mutated requests, abuse beside a reader,
dropped streams, a read soak, unload/reload and restart cycles, comm garbage; every iopub stream
message is recorded, so a server write into cell output is counted.

    .venv/bin/python bench/probe.py [--cases 20000] [--soak 100000] [--drops 300] [--cycles 10] [--json]

tests/test_probe.py runs ``run_probe`` with small numbers (seconds).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))
from abuse import Reader, chunked_upload, trickle  # noqa: E402
from kernel_harness import Kernel  # noqa: E402

STATELESS = "2026-07-28"
sys.setrecursionlimit(20000)  # deeply nested bodies are built and encoded here
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}

SETUP = """
import dataclasses, mcp_notebook, pandas as pd
small = {'a': 1, 'b': [1, 2, 3]}
df = pd.DataFrame({'x': range(100), 'y': ['v%d' % i for i in range(100)]})
@dataclasses.dataclass
class Cfg:
    host: str
    port: int
cfg = Cfg('db', 5432)
@mcp_notebook.resource("typed://year/{year}")
def by_year(year: int) -> dict:
    return {"year": year}
try:
    import duckdb
    ddb = duckdb.connect()
    ddb.execute("CREATE TABLE t1 AS SELECT range AS id, 'n' || range AS s FROM range(50)")
    rel = ddb.sql("SELECT * FROM t1")
except ImportError:
    pass
"""

URIS = [
    "nb://vars", "nb://vars/small", "nb://vars/df", "nb://vars/cfg", "nb://vars/cfg/schema", "nb://schemas/by_year",
    "nb://frames/df?format=json&limit=5", "nb://frames/df/schema", "nb://frames/rel", "nb://frames/rel/schema",
    "nb://db/ddb", "nb://db/ddb/tables/t1?limit=3", "nb://db/ddb/tables/t1/schema", "nb://notebook/active",
    "nb://notebook", "nb://cells", "nb://kernel", "typed://year/2020", "typed://year/abc",
]  # fmt: skip
TOOLS = [
    ("read_resource", {"uri": "nb://vars/small"}),
    ("list_resources", {}),
    ("changes_since", {"wait_seconds": 0}),
]


def base_messages() -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"method": "ping", "params": {}},
        {"method": "resources/list", "params": {}},
        {"method": "resources/templates/list", "params": {}},
        {"method": "tools/list", "params": {}},
        {"method": "server/discover", "params": {}},
        {
            "method": "completion/complete",
            "params": {
                "ref": {
                    "type": "ref/resource",
                    "uri": "nb://frames/{name}{?offset,limit,columns,format,count,sort,where}",
                },
                "argument": {"name": "columns", "value": "x"},
                "context": {"arguments": {"name": "df"}},
            },
        },
        {"method": "resources/subscribe", "params": {"uri": "nb://vars/small"}},
    ]
    msgs += [{"method": "resources/read", "params": {"uri": u}} for u in URIS]
    msgs += [{"method": "tools/call", "params": {"name": n, "arguments": a}} for n, a in TOOLS]
    return msgs


POOL: list[Any] = [
    None, True, 0, -1, 2**63, 1.5e308, "", "\ud800", "\udc80x", "x" * 70_000, [], {}, "\u0000", "💥",
    "../../etc/passwd", "nb://vars/" + "a" * 9000, {"$ref": "#"}, [1, "a", None], -0.0, "nb://vars/\ud800",
]  # fmt: skip


# What a kernel client can send at all (its JSON packer refuses lone surrogates).
COMM_POOL = [v for v in POOL if not (isinstance(v, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in v))]


def deep(n: int) -> Any:
    v: Any = []
    for _ in range(n):
        v = [v]
    return v


def walk(v: Any, holders: list[tuple[Any, Any]]) -> None:
    """Every (container, key) pair under ``v``."""
    if isinstance(v, dict):
        for k in list(v):
            holders.append((v, k))
            walk(v[k], holders)
    elif isinstance(v, list):
        for i in range(len(v)):
            holders.append((v, i))
            walk(v[i], holders)


def mutate(rng: random.Random, msg: dict[str, Any]) -> dict[str, Any]:
    """One to three mutations at random paths of a copy of ``msg``."""
    msg = json.loads(json.dumps(msg))
    for _ in range(rng.randint(1, 3)):
        holders: list[tuple[Any, Any]] = []

        walk(msg, holders)
        if not holders:
            break
        holder, key = rng.choice(holders)
        roll = rng.random()
        if roll < 0.6:
            holder[key] = copy.deepcopy(rng.choice(POOL)) if rng.random() < 0.9 else deep(rng.choice((50, 2000)))
        elif roll < 0.75 and isinstance(holder, dict):
            del holder[key]
        elif isinstance(holder, dict):
            holder[rng.choice(["extra", "_meta", "\ud800", "cursor"])] = copy.deepcopy(rng.choice(POOL))
    return msg


def encode_body(rng: random.Random, obj: Any) -> bytes:
    raw = json.dumps(obj).encode()
    roll = rng.random()
    if roll < 0.05 and raw:
        i = rng.randrange(len(raw))
        return raw[:i] + bytes([rng.randrange(256)]) + raw[i + 1 :]
    if roll < 0.08:
        return raw[: rng.randrange(len(raw) + 1)]
    if roll < 0.1:
        return b"\xed\xa0\x80" + raw  # CESU-8 surrogate bytes
    return raw


class Conn:
    """One keep-alive client socket; reconnects when the hub closes."""

    def __init__(self, port: int):
        self.port = port
        self.sock: socket.socket | None = None
        self.buf = bytearray()

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.buf = bytearray()
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None

    def _recv(self) -> bytes:
        assert self.sock is not None
        data = self.sock.recv(262144)
        if not data:
            raise ConnectionError("closed without a complete response")
        return data

    def exchange(self, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        s = self._connect()
        s.sendall(raw)
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        end = self.buf.index(b"\r\n\r\n")
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[: end + 4]
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        if "content-length" in headers:
            n = int(headers["content-length"])
            while len(self.buf) < n:
                self.buf += self._recv()
            body = bytes(self.buf[:n])
            del self.buf[:n]
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self.buf += self._recv()
                i = self.buf.index(b"\r\n")
                size = int(bytes(self.buf[:i]).split(b";")[0], 16)
                while len(self.buf) < i + 2 + size + 2:
                    self.buf += self._recv()
                body += bytes(self.buf[i + 2 : i + 2 + size])
                del self.buf[: i + 2 + size + 2]
                if size == 0:
                    break
        else:
            body = bytes(self.buf)
            try:
                while True:
                    body += self._recv()
            except ConnectionError:
                pass
            self.close()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, body


def request_bytes(body: bytes, token: str | None, headers: dict[str, str], chunked: bool = False) -> bytes:
    h = {"Host": "127.0.0.1", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    h.update(headers)
    if chunked:
        h["Transfer-Encoding"] = "chunked"
        parts, i = [], 0
        while i < len(body):
            n = random.randint(1, 4096)
            parts.append(b"%x\r\n%s\r\n" % (len(body[i : i + n]), body[i : i + n]))
            i += n
        payload = b"".join(parts) + b"0\r\n\r\n"
    else:
        h["Content-Length"] = str(len(body))
        payload = body
    head = "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode("utf-8", "surrogateescape") + payload


OWN = ("PROBE", "mcp-notebook: MCP server at")  # the probe's prints; the loading cell's one line


class Probe:
    """One kernel with a hub, and a record of every iopub stream message while it runs."""

    def __init__(self) -> None:
        self.kernel = Kernel()
        self.streams: list[str] = []
        kc = self.kernel.kc
        original = kc.get_iopub_msg

        def recording(*a: Any, **kw: Any) -> dict[str, Any]:
            msg = original(*a, **kw)
            if msg["msg_type"] == "stream":
                self.streams.append(msg["content"]["text"])
            return msg

        kc.get_iopub_msg = recording  # type: ignore[method-assign]
        self.kernel.run("%load_ext mcp_notebook")
        self.kernel.run(SETUP)
        self.refresh()
        self.proc = psutil.Process(int(self.say("import os; print('PROBE', os.getpid())")[1]))

    def say(self, code: str) -> list[str]:
        return self.kernel.run(code).stdout.split()

    def refresh(self) -> None:
        out = self.kernel.run(
            "import json as _j, mcp_notebook as _m; print('PROBE' + _j.dumps(dict(_m.connection_info())))"
        ).stdout
        info = json.loads(out.strip().splitlines()[-1][5:])
        self.token, self.url = info["token"], info["url"]
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def session(self) -> str:
        c = Conn(self.port)
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
        _, headers, _ = c.exchange(request_bytes(json.dumps(init).encode(), self.token, {}))
        sid = headers["mcp-session-id"]
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        c.exchange(request_bytes(note, self.token, {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}))
        c.close()
        return sid

    def usage(self) -> dict[str, Any]:
        return {
            "threads": self.proc.num_threads(),
            "fds": self.proc.num_fds(),
            "rss_mb": round(self.proc.memory_info().rss / 1e6, 1),
        }

    # -- phases ----------------------------------------------------------------------------
    def fuzz(self, cases: int, seed: int = 10) -> dict[str, Any]:
        rng = random.Random(seed)
        random.seed(seed)
        bases = base_messages()
        sid = self.session()
        conn = Conn(self.port)
        out: dict[str, Any] = {"cases": 0, "crashes": 0, "status": {}, "examples": []}
        for n in range(cases):
            base = rng.choice(bases)
            msg = {"jsonrpc": "2.0", "id": n, **base}
            stateless = rng.random() < 0.5
            if stateless:
                msg["params"] = {**msg["params"], "_meta": META}
            msg = mutate(rng, msg) if rng.random() < 0.9 else msg
            params = msg.get("params")
            if isinstance(params, dict) and isinstance(params.get("arguments"), dict):
                params["arguments"]["wait_seconds"] = 0  # no long poll in the loop
            if isinstance(msg.get("method"), str) and msg["method"] == "subscriptions/listen":
                msg["method"] = "ping"
            if rng.random() < 0.05:
                msg = [msg, mutate(rng, msg)]  # a batch
            token = self.token if rng.random() < 0.8 else rng.choice([None, "wrong", self.token[:-1]])
            headers: dict[str, str] = {}
            method = msg.get("method") if isinstance(msg, dict) else None
            if stateless:
                headers["MCP-Protocol-Version"] = STATELESS
                if isinstance(method, str) and method.isascii():
                    headers["Mcp-Method"] = method
                uri = params.get("uri") if isinstance(params, dict) else None
                if method == "resources/read" and isinstance(uri, str) and uri.isascii() and len(uri) < 4000:
                    headers["Mcp-Name"] = uri
            else:
                headers.update({"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
            if rng.random() < 0.05:
                headers[rng.choice(["MCP-Protocol-Version", "Mcp-Method", "Origin", "Host"])] = rng.choice(
                    ["", "1999-01-01", "http://evil.example", "\x7f", "x" * 9000]
                )
            raw = request_bytes(encode_body(rng, msg), token, headers, chunked=rng.random() < 0.1)
            out["cases"] += 1
            try:
                status, _, body = conn.exchange(raw)
            except (OSError, ValueError) as exc:
                status, body = 0, str(exc).encode()
                conn.close()
            out["status"][status] = out["status"].get(status, 0) + 1
            if status == 0 or status >= 500:
                out["crashes"] += 1
                if len(out["examples"]) < 5:
                    out["examples"].append(
                        {"request": raw[:300].decode("latin-1"), "reply": body[:300].decode("latin-1")}
                    )
        conn.close()
        out["status"] = {str(k): v for k, v in sorted(out["status"].items())}
        return out

    def comm_garbage(self, messages: int, seed: int = 11) -> dict[str, Any]:
        """A kernel client opening the panel's comm target and sending garbage."""
        rng = random.Random(seed)
        kc = self.kernel.kc
        comm_id = uuid.uuid4().hex

        def shell(kind: str, content: dict[str, Any]) -> None:
            kc.shell_channel.send(kc.session.msg(kind, content))

        shell("comm_open", {"comm_id": comm_id, "target_name": "mcp_notebook.document", "data": {"version": 1}})
        kinds = ["document", "active", "command", None, 5, "x" * 1000]
        for _ in range(messages):
            data: Any = {"type": rng.choice(kinds)}
            for key in ("nb", "active", "selected", "command", "name", "path"):
                if rng.random() < 0.5:
                    data[key] = rng.choice(
                        [
                            *COMM_POOL[:6],
                            {"cells": [rng.choice(COMM_POOL[:10])] * rng.randint(0, 3)},
                            ["a", 1],
                            "state",
                            "hide",
                        ]
                    )
            if rng.random() < 0.1:
                data = rng.choice(COMM_POOL[:12])
            shell("comm_msg", {"comm_id": comm_id, "data": data})
        shell("comm_close", {"comm_id": comm_id, "data": {}})
        alive = self.say("print('PROBE', 1 + 1)") == ["PROBE", "2"]
        return {"messages": messages, "kernel_answers": alive, "hub_answers": self.read_ok()}

    def read_ok(self) -> bool:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/read",
            "params": {"uri": "nb://vars/small", "_meta": META},
        }
        hdr = {"MCP-Protocol-Version": STATELESS, "Mcp-Method": "resources/read", "Mcp-Name": "nb://vars/small"}
        c = Conn(self.port)
        try:
            status, _, reply = c.exchange(request_bytes(json.dumps(body).encode(), self.token, hdr))
            return status == 200 and b'"result"' in reply
        finally:
            c.close()

    def abuse(self, seconds: float, tricklers: int) -> dict[str, Any]:
        """Two chunked uploads (with and without the token) and slowloris, all beside one reader."""
        reader = Reader(self.port, self.token)
        reader.start()
        stop = threading.Event()
        trick = {"bytes": 0, "dropped": 0, "connect_failed": 0}
        uploads: list[dict[str, Any]] = [{}, {}]
        threads = [threading.Thread(target=trickle, args=(self.port, tricklers, stop, trick), daemon=True)]
        threads += [
            threading.Thread(target=chunked_upload, args=(self.port, t, o), daemon=True)
            for t, o in zip((None, self.token), uploads, strict=True)
        ]
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join(120)
        reader.finish()
        return {"reader": reader.figures(), "uploads": uploads, "tricklers": {"connections": tricklers, **trick}}

    def dropped(self, count: int) -> dict[str, Any]:
        sid = self.session()
        get = (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n"
            f"Accept: text/event-stream\r\nMcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
        ).encode()
        listen_body = {
            "jsonrpc": "2.0",
            "id": "L",
            "method": "subscriptions/listen",
            "params": {"notifications": {"resourceSubscriptions": ["nb://vars/small"]}, "_meta": META},
        }
        listen = request_bytes(
            json.dumps(listen_body).encode(),
            self.token,
            {"MCP-Protocol-Version": STATELESS, "Mcp-Method": "subscriptions/listen"},
        )
        read = request_bytes(
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "nb://frames/df"}}
            ).encode(),
            self.token,
            {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"},
        )
        time.sleep(1)
        before = self.usage()
        for i in range(count):
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            kind = i % 4
            s.sendall([get, listen, listen[:-7], read][kind])
            if kind in (0, 1):
                s.recv(100)
            if i % 2 == 0:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        time.sleep(3)
        state = self.kernel.run(
            "import json as _j, mcp_notebook as _m\n_t, _s = _m.hub().transport, _m.hub().server\n"
            "print('PROBE' + _j.dumps({'connections': len(_t.connections), 'streams': len(_t.streams),"
            " 'listens': len(_s.listens()), 'session_streams': sum(len(x.streams) for x in _s.sessions())}))"
        ).stdout.strip()
        return {"dropped": count, "before": before, "after": self.usage(), "hub": json.loads(state[5:])}

    def soak(self, reads: int) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/read",
            "params": {"uri": "nb://vars/small", "_meta": META},
        }
        hdr = {"MCP-Protocol-Version": STATELESS, "Mcp-Method": "resources/read", "Mcp-Name": "nb://vars/small"}
        raw = request_bytes(json.dumps(body).encode(), self.token, hdr)
        c = Conn(self.port)
        for _ in range(min(2000, reads // 10)):  # warm up (caches, allocator)
            c.exchange(raw)
        before = self.usage()
        bad = 0
        t0 = time.perf_counter()
        for _ in range(reads):
            status, _, _ = c.exchange(raw)
            bad += status != 200
        seconds = time.perf_counter() - t0
        c.close()
        return {"reads": reads, "non_200": bad, "seconds": round(seconds, 1), "before": before, "after": self.usage()}

    def cycles(self, count: int) -> dict[str, Any]:
        """unload/load and reload cycles, then kernel restarts: nothing left behind."""
        census = (
            "import json as _j, logging as _l, threading as _th, os as _o, gc as _gc\n"
            "_ip = get_ipython()\n"
            "_cm = getattr(_ip.kernel, 'comm_manager', None)\n"
            "print('PROBE' + _j.dumps({'threads': sorted(t.name for t in _th.enumerate() if 'mcp' in t.name),"
            " 'hooks': sum(len(v) for v in _ip.events.callbacks.values()),"
            " 'targets': sorted(k for k in (getattr(_cm, 'targets', {}) or {}) if 'mcp' in k),"
            " 'log_handlers': len(_l.getLogger('mcp_notebook').handlers),"
            " 'fds': len(_o.listdir('/proc/self/fd')),"
            " 'runtime_files': sorted(f for f in _o.listdir(__import__('jupyter_core.paths').paths.jupyter_runtime_dir())"
            " if f.startswith('mcp-notebook-') and f.endswith('.json'))}))"
        )

        def take() -> dict[str, Any]:
            return json.loads(self.kernel.run(census).stdout.strip().splitlines()[-1][5:])

        first = take()
        ports = set()
        for i in range(count):
            ports.add(self.port)
            if i % 2:
                self.kernel.run("%reload_ext mcp_notebook")
            else:
                self.kernel.run("%unload_ext mcp_notebook")
                self.kernel.run("%load_ext mcp_notebook")
            self.refresh()
        last = take()
        open_old = 0
        for p in ports - {self.port}:
            try:
                socket.create_connection(("127.0.0.1", p), timeout=2).close()
                open_old += 1
            except OSError:
                pass
        return {
            "cycles": count,
            "before": first,
            "after": last,
            "old_ports_still_open": open_old,
            "hub_answers": self.read_ok(),
        }

    def restarts(self, count: int) -> dict[str, Any]:
        files = []
        for _ in range(count):
            old_port = self.port
            self.kernel.restart()
            self.kernel.run("%load_ext mcp_notebook")
            self.kernel.run(SETUP)
            self.refresh()
            out = self.kernel.run(
                "import os as _o, jupyter_core.paths as _p\n"
                "print('PROBE', len([f for f in _o.listdir(_p.jupyter_runtime_dir()) if f.startswith('mcp-notebook-')"
                " and f.endswith('.json')]))"
            ).stdout.split()
            files.append(int(out[1]))
            try:
                socket.create_connection(("127.0.0.1", old_port), timeout=2).close()
                files.append(-1)  # the old port still answers
            except OSError:
                pass
        return {"restarts": count, "runtime_files_after_each": files, "hub_answers": self.read_ok()}

    def server_writes(self) -> list[str]:
        """Stream text that none of the probe's own cells printed.

        ``No such comm`` is the ``comm`` package's own warning (logging's last resort, on stderr) when
        a client writes to a comm that is closed (the panel's comm after a ``stop`` command): a reply
        of the kernel to that client's message, not the hub; counted apart in ``comm_warnings``.
        """
        lines = [ln for t in self.streams for ln in t.splitlines() if ln.strip() and not ln.startswith(OWN)]
        return [ln for ln in lines if not ln.startswith("No such comm: ")]

    def comm_warnings(self) -> int:
        return sum(ln.startswith("No such comm: ") for t in self.streams for ln in t.splitlines())

    def close(self) -> None:
        self.kernel.shutdown()


def run_probe(
    cases: int, soak: int, drops: int, cycles: int, abuse_seconds: float, tricklers: int, restarts: int
) -> dict[str, Any]:
    p = Probe()
    out: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        out["fuzz"] = p.fuzz(cases)
        out["fuzz"]["seconds"] = round(time.perf_counter() - t0, 1)
        out["comm"] = p.comm_garbage(max(20, cases // 50))
        out["abuse"] = p.abuse(abuse_seconds, tricklers)
        out["dropped"] = p.dropped(drops)
        out["soak"] = p.soak(soak)
        out["cycles"] = p.cycles(cycles)
        out["restarts"] = p.restarts(restarts)
        out["hub_answers"] = p.read_ok()
        out["server_writes"] = p.server_writes()
        out["comm_warnings"] = p.comm_warnings()
    finally:
        p.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--soak", type=int, default=100000)
    ap.add_argument("--drops", type=int, default=300)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--tricklers", type=int, default=500)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = run_probe(a.cases, a.soak, a.drops, a.cycles, a.seconds, a.tricklers, a.restarts)
    print(json.dumps(out, indent=None if a.json else 2, default=str))


if __name__ == "__main__":
    main()
