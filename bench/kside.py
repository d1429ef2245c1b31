"""Kernel-side helpers: imported inside the benchmark kernel, each prints one JSON line."""

from __future__ import annotations

import json
import os
import time
from typing import Any

STAMPS: list[tuple[str, float]] = []  # (cell source, time.time() at post_run_cell) for notification latency


def _ip() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _stats_ns(samples: list[int]) -> dict[str, Any]:
    s = sorted(samples)
    if not s:
        return {"n": 0}
    return {
        "n": len(s),
        "median_us": s[len(s) // 2] / 1e3,
        "p99_us": s[min(len(s) - 1, int(len(s) * 0.99))] / 1e3,
        "mean_us": sum(s) / len(s) / 1e3,
        "max_us": s[-1] / 1e3,
    }


def emit(value: Any) -> None:
    print("BENCHJSON " + json.dumps(value))


def install_stamp_hook() -> None:
    """Register a post_run_cell hook (before the hub's) that stamps the end of each cell."""

    def stamp(result: Any = None) -> None:
        raw = getattr(getattr(result, "info", None), "raw_cell", "") or ""
        STAMPS.append((raw, time.time()))
        LISTEN_EVENTS["cells"] += 1
        del STAMPS[:-500]

    _ip().events.register("post_run_cell", stamp)


def stamps_for(marker: str) -> None:
    emit({raw.split(marker, 1)[1].split()[0]: t for raw, t in STAMPS if marker in raw})


LISTEN_EVENTS = {"cells": 0, "changes": 0, "events": 0, "most_listens": 0}


def listen_events() -> None:
    """Emit what the kernel's hub wrote to listen streams since the last call (and start counting at
    the first): ``events``, one per listen and changed URI it watches (a list change: one per listen
    that asked for them), over the ``cells`` run and the ``changes`` the hub told its listens, and
    the most listens it served at a change (bench/jupyterhub_paced.py: upstream events per change)."""
    import mcp_notebook

    era = mcp_notebook.hub().server.stateless
    if not getattr(era, "bench_counted", False):
        told = era.notify

        def notify(kind: str, uris: tuple[str, ...]) -> None:
            listens = era.listens()
            changed = frozenset(uris)
            LISTEN_EVENTS["changes"] += 1
            LISTEN_EVENTS["most_listens"] = max(LISTEN_EVENTS["most_listens"], len(listens))
            for listen in listens:
                LISTEN_EVENTS["events"] += len(listen.uris & changed) if kind == "updated" else int(listen.list_changed)
            told(kind, uris)

        era.notify = notify
        era.bench_counted = True
    emit(dict(LISTEN_EVENTS))
    LISTEN_EVENTS.update(cells=0, changes=0, events=0, most_listens=0)


def rss() -> int:
    import psutil

    return psutil.Process(os.getpid()).memory_info().rss


def measure_load() -> None:
    """Time %load_ext mcp_notebook and the RSS it adds (first load in this process)."""
    ip = _ip()
    r0 = rss()
    t0 = time.perf_counter()
    ip.run_line_magic("load_ext", "mcp_notebook")
    t1 = time.perf_counter()
    r1 = rss()
    ip.run_line_magic("unload_ext", "mcp_notebook")
    t2 = time.perf_counter()
    ip.run_line_magic("load_ext", "mcp_notebook")
    t3 = time.perf_counter()
    emit({"load_s": t1 - t0, "rss_added_bytes": r1 - r0, "unload_s": t2 - t1, "reload_s": t3 - t2})


def define_vars(n: int, prefix: str = "v") -> None:
    ns = _ip().user_ns
    for i in range(n):
        ns[f"{prefix}{i}"] = i * 7 + 1000  # distinct small ints (not the interned -5..256)


def time_after_cell(mode: str, calls: int, budget_s: float, drain: bool = True) -> None:
    """Time hub.after_cell() directly. mode: steady (nothing changed), rebind (one exposed name
    rebound, as a cell that assigns), newname (a new hidden name, as IPython's _iN history adds
    on every cell with store_history=True). Queued exact checks are drained between calls and
    their wall time reported separately (they run on the hub's worker thread)."""
    import mcp_notebook

    hub = mcp_notebook.hub().resources
    ns = _ip().user_ns
    ns["bench_tick"] = object()
    hub.after_cell()
    hub.drain()
    samples: list[int] = []
    drains: list[int] = []
    added: list[str] = []
    deadline = time.perf_counter() + budget_s
    for k in range(calls):
        if mode == "rebind":
            ns["bench_tick"] = object()
        elif mode == "newname":
            name = f"_i_bench{k}"
            ns[name] = ""
            added.append(name)
        t0 = time.perf_counter_ns()
        hub.after_cell()
        samples.append(time.perf_counter_ns() - t0)
        if drain:
            t1 = time.perf_counter_ns()
            hub.drain()
            drains.append(time.perf_counter_ns() - t1)
        if time.perf_counter() > deadline:
            break
    for name in added:
        ns.pop(name, None)
    hub.after_cell()
    hub.drain()
    emit({"after_cell": _stats_ns(samples), "drain": _stats_ns(drains)})


def time_cells(cells: int, budget_s: float) -> None:
    """Wall times (µs) of ``run_cell`` for a cell that rebinds one variable, history stored (as in
    Jupyter): IPython's whole execution path including every post_run_cell hook, without ZMQ noise."""
    ip = _ip()
    if not isinstance(ip.user_ns.get("bench_tick"), int):
        ip.user_ns["bench_tick"] = 0
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    for _ in range(cells):
        t0 = time.perf_counter_ns()
        ip.run_cell("bench_tick = bench_tick + 1", store_history=True)
        samples.append((time.perf_counter_ns() - t0) / 1e3)
        if time.perf_counter() > deadline:
            break
    emit(samples)


def after_load(timeout: float = 60) -> None:
    """Wait until the hub's after-load work (patterns, history sidecar, the rooms left for later)
    is done, so that it does not run inside a timed block; prints whether it finished."""
    import mcp_notebook

    later = getattr(mcp_notebook.hub(), "_later", None)
    if later is not None and later.ident is not None:
        later.join(timeout)
    emit({"done": later is None or not later.is_alive()})


def hook_calls(cells: int, top: int = 0) -> None:
    """Function calls (Python and C) made on the main thread inside mcp_notebook's code per cell of
    ``bench_tick = bench_tick + 1`` (everything our cell hooks call, however deep); a figure that
    does not move with the machine's load. ``top``: also the Python functions called most, per cell."""
    import sys
    import threading
    from collections import Counter

    ip = _ip()
    if not isinstance(ip.user_ns.get("bench_tick"), int):
        ip.user_ns["bench_tick"] = 0
    main, depth, counts, where = threading.get_ident(), [0], {"py": 0, "c": 0}, Counter()

    def count(frame: Any, event: str, arg: Any) -> None:
        if threading.get_ident() != main:
            return
        if event == "call" and (depth[0] or "mcp_notebook" in frame.f_code.co_filename):
            depth[0] += 1
            counts["py"] += 1
            if top:
                code = frame.f_code
                where[f"{code.co_filename.rsplit('/', 2)[-2:][-1]}:{code.co_qualname}"] += 1
        elif event == "return" and depth[0]:
            depth[0] -= 1
        elif event == "c_call" and depth[0]:
            counts["c"] += 1

    for _ in range(5):
        ip.run_cell("bench_tick = bench_tick + 1", store_history=True)
    sys.setprofile(count)
    try:
        for _ in range(cells):
            ip.run_cell("bench_tick = bench_tick + 1", store_history=True)
    finally:
        sys.setprofile(None)
    got: dict[str, Any] = {"calls": (counts["py"] + counts["c"]) / cells, "python": counts["py"] / cells}
    if top:
        got["top"] = [(name, n / cells) for name, n in where.most_common(top)]
    emit(got)


def profile_after_cell(calls: int, top: int = 15) -> None:
    """cProfile of hub.after_cell() with a new hidden name per call (the IPython history path)."""
    import cProfile
    import io
    import pstats

    import mcp_notebook

    hub = mcp_notebook.hub().resources
    ns = _ip().user_ns
    prof = cProfile.Profile()
    for k in range(calls):
        ns[f"_i_prof{k}"] = ""
        prof.enable()
        hub.after_cell()
        prof.disable()
    for k in range(calls):
        ns.pop(f"_i_prof{k}", None)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    emit({"profile": buf.getvalue()})


def watch(uris: list[str]) -> None:
    import mcp_notebook

    hub = mcp_notebook.hub().resources
    for uri in uris:
        hub.watch(uri)
    hub.drain(30)


def unwatch(uris: list[str]) -> None:
    import mcp_notebook

    hub = mcp_notebook.hub().resources
    for uri in uris:
        hub.unwatch(uri)


def _stateless_request(token: str, kind: str, uri: str) -> Any:
    """One stateless 2026-07-28 request for McpServer.handle(), as the HTTP layer would pass it."""
    from mcp_notebook.protocol.server import HttpRequest

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    params: dict[str, Any] = {"_meta": meta}
    headers = {
        "host": "127.0.0.1",
        "content-type": "application/json",
        "authorization": f"Bearer {token}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": kind,
    }
    if kind == "resources/read":
        params["uri"] = uri
        headers["mcp-name"] = uri
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": kind, "params": params}).encode()
    return HttpRequest("POST", headers, body)


def time_handle(kind: str, uri: str, calls: int, budget_s: float, flat: bool = False) -> None:
    """Time McpServer.handle() in-process (no HTTP): the protocol + hub + provider cost of one request.

    ``flat``: as the transport answers an admitted request, the flat path for cached reads first
    (``fast_read``), ``handle`` when it declines.
    """
    import mcp_notebook
    from mcp_notebook.protocol.server import HttpRequest

    kh = mcp_notebook.hub()
    server = kh.server
    req = _stateless_request(kh.token, kind, uri)
    reply = server.handle(req)
    assert reply.status == 200 and b'"result"' in (reply.body or b""), reply.body[:300]
    samples: list[int] = []
    deadline = time.perf_counter() + budget_s
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        if flat:
            fresh = HttpRequest("POST", req.headers, req.body, admitted=True)
            server.flat.answer(fresh) or server.handle(fresh)
        else:
            server.handle(req)
        samples.append(time.perf_counter_ns() - t0)
        if time.perf_counter() > deadline:
            break
    emit({**_stats_ns(samples), "bytes": len(reply.body or b"")})


def profile_handle(kind: str, uri: str, calls: int, top: int = 12) -> None:
    """cProfile of McpServer.handle() for the hot-spot report (cumulative, top entries)."""
    import cProfile
    import io
    import pstats

    import mcp_notebook

    kh = mcp_notebook.hub()
    req = _stateless_request(kh.token, kind, uri)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        kh.server.handle(req)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    emit({"profile": buf.getvalue()})


_PART_STAMPS: dict[str, int] = {}
_PART_TIMES: dict[str, list[int]] = {}


def stamp_callbacks(where: str) -> None:
    """Register a pre_run_cell and a post_run_cell callback that stamp the main thread's CPU time
    (``time.thread_time_ns``: time preempted by other processes is not counted); ``where``: "before"
    (register them before the hub's own callbacks) or "after" (after them)."""
    ip = _ip()
    for event in ("pre_run_cell", "post_run_cell"):
        tag = f"{event}:{where}"

        def stamp(*_: Any, _tag: str = tag) -> None:
            _PART_STAMPS[_tag] = time.thread_time_ns()

        ip.events.register(event, stamp)


def time_part(path: str, tag: str) -> None:
    """Wrap the callable at ``path`` (dotted, from the hub: ``variables._watch.diff``) so that each call's
    main-thread CPU time is kept under ``tag``."""
    import mcp_notebook

    obj: Any = mcp_notebook.hub()
    *parents, attr = path.split(".")
    for name in parents:
        obj = getattr(obj, name)
    inner = getattr(obj, attr)

    def timed(*args: Any, **kw: Any) -> Any:
        t0 = time.thread_time_ns()
        try:
            return inner(*args, **kw)
        finally:
            _PART_TIMES.setdefault(tag, []).append(time.thread_time_ns() - t0)

    setattr(obj, attr, timed)


def time_parts(cells: int) -> None:
    """Medians (µs of main-thread CPU time) of the hub's pre- and post-cell callbacks (between the stamps
    of stamp_callbacks) and of every part wrapped by time_part, over ``cells`` cells that rebind one name."""
    import statistics

    ip = _ip()
    if not isinstance(ip.user_ns.get("bench_tick"), int):
        ip.user_ns["bench_tick"] = 0
    _PART_TIMES.clear()
    got: dict[str, list[int]] = {"pre": [], "post": []}
    for _ in range(cells):
        ip.run_cell("bench_tick = bench_tick + 1", store_history=True)
        s = _PART_STAMPS
        got["pre"].append(s["pre_run_cell:after"] - s["pre_run_cell:before"])
        got["post"].append(s["post_run_cell:after"] - s["post_run_cell:before"])
    got.update(_PART_TIMES)
    emit({tag: statistics.median(v) / 1e3 for tag, v in got.items() if v})


def time_phases(cells: int, blocks: int) -> None:
    """Where a cell's main-thread CPU time lands (µs, medians), in three arms alternated ``blocks`` times
    in this kernel: the hub's two callbacks swapped for no-ops in place ("off"), on ("on"), and on with
    the namespace diff answering ``(["bench_tick"], [])`` without reading the table ("on, no table").
    Phases, between stamps registered first and last on each event: ``start`` (run_cell's entry to the
    first pre_run_cell callback: IPython's transform and tee), ``pre``, ``run`` (compile, execute,
    displayhook), ``post``, ``end``. A phase of IPython's own that grows with the hub on is what our
    callbacks cost it (caches and TLB entries displaced), not work of ours (issue #48, ninth cut)."""
    import statistics

    import mcp_notebook

    ip, hub = _ip(), mcp_notebook.hub()
    if not isinstance(ip.user_ns.get("bench_tick"), int):
        ip.user_ns["bench_tick"] = 0
    events, stamps, tt = ip.events.callbacks, {}, time.thread_time_ns

    def stamp(tag: str) -> Any:
        def cb(*_: Any) -> None:
            stamps[tag] = tt()

        return cb

    marks = {"pre_run_cell": (stamp("pre0"), stamp("pre1")), "post_run_cell": (stamp("post0"), stamp("post1"))}
    real = {"pre_run_cell": hub._pre_run_cell, "post_run_cell": hub._post_run_cell}
    noop = {event: (lambda *_: None) for event in real}
    watch = hub.variables._watch
    diff = watch.diff
    for event, (first, last) in marks.items():
        events[event].insert(0, first)
        events[event].append(last)

    def arm(on: bool, table: bool) -> None:
        for event in real:
            calls = events[event]
            for i, cb in enumerate(calls):
                if cb in (real[event], noop[event]):
                    calls[i] = real[event] if on else noop[event]
        watch.diff = diff if table else (lambda: (["bench_tick"], []))

    names = ("start", "pre", "run", "post", "end", "total")
    arms = {"off": (False, True), "on": (True, True), "on, no table": (True, False)}
    got: dict[str, dict[str, list[float]]] = {a: {n: [] for n in names} for a in arms}
    try:
        for _ in range(blocks):
            for name, (on, table) in arms.items():
                arm(on, table)
                rows = []
                for _ in range(cells):
                    t0 = tt()
                    ip.run_cell("bench_tick = bench_tick + 1", store_history=True)
                    t1, s = tt(), stamps
                    rows.append(
                        (
                            s["pre0"] - t0,
                            s["pre1"] - s["pre0"],
                            s["post0"] - s["pre1"],
                            s["post1"] - s["post0"],
                            t1 - s["post1"],
                            t1 - t0,
                        )
                    )
                for i, phase in enumerate(names):
                    got[name][phase].append(statistics.median(r[i] for r in rows) / 1e3)
    finally:
        arm(True, True)
        watch.__dict__.pop("diff", None)
        for event, pair in marks.items():
            for cb in pair:
                events[event].remove(cb)
    emit({a: {p: round(statistics.median(v), 1) for p, v in phases.items()} for a, phases in got.items()})
