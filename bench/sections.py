"""The measurements. Each section returns a JSON-able dict; errors are recorded, never raised."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

import loadgen  # noqa: E402
from kernel_harness import Kernel  # noqa: E402

N_LIST = 1000


class BenchKernel(Kernel):
    """A harness kernel with the kernel-side helpers (bench/kside.py) imported."""

    def __init__(self, runtime_dir: str):
        # A private IPYTHONDIR: no user config, and IPython's sqlite history stays out of ~/.ipython.
        ipdir = tempfile.mkdtemp(prefix="ipython-", dir=runtime_dir)
        super().__init__(env={"JUPYTER_RUNTIME_DIR": runtime_dir, "IPYTHONDIR": ipdir})
        self.run(f"import sys as _s; _s.path.insert(0, {str(HERE)!r}); import kside")

    def json(self, code: str, timeout: float = 300) -> Any:
        out = self.run(code, timeout=timeout).stdout
        for line in reversed(out.splitlines()):
            if line.startswith("BENCHJSON "):
                return json.loads(line[len("BENCHJSON ") :])
        raise RuntimeError(f"no BENCHJSON line in: {out[-300:]!r}")


def guarded(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


# -- loading ---------------------------------------------------------------------------------


def compile_package() -> None:
    """Write the package's bytecode, as pip does on install (a checkout run with
    PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module on every load)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "mcp_notebook")], check=False, timeout=300)


def load_cost(k: BenchKernel) -> dict[str, Any]:
    """%load_ext in a fresh kernel: wall time and RSS added (then unload/reload, warm)."""
    t0 = time.perf_counter()
    res = k.json("kside.measure_load()")
    res["cell_roundtrip_s"] = time.perf_counter() - t0
    return res


# -- request path ----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"reference server exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError("reference server did not listen")


def _load_matrix(
    url: str, auth: dict[str, str], read_uri: str, eras: list[str], conns: list[int], seconds: float, warmup: float
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for era in eras:
        session = loadgen.handshake_session(url, auth) if era == "handshake" else None
        for op, params in (("read", {"uri": read_uri}), ("list", None)):
            method = "resources/read" if op == "read" else "resources/list"
            if session is None:
                headers, body = loadgen.stateless_request(method, params)
                headers.update(auth)
            else:
                headers, body = loadgen.handshake_request(session, method, params)
            try:
                size = loadgen.check_once(url, headers, body)
            except Exception as exc:
                for c in conns:
                    out[f"{era}/{op}/c{c}"] = {"error": str(exc)[:300]}
                continue
            if warmup > 0:
                loadgen.run_load(url, headers, body, 4, warmup)
            for c in conns:
                res = guarded(loadgen.run_load, url, headers, body, c, seconds)
                if "error" not in res:
                    res["response_bytes"] = size
                out[f"{era}/{op}/c{c}"] = res
    return out


def hub_request_path(k: BenchKernel, info: dict[str, Any], prof: dict[str, Any]) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {info['token']}"}
    res = _load_matrix(
        info["url"], auth, "nb://vars/x", ["stateless", "handshake"], [1, 16], prof["wrk_s"], prof["warmup_s"]
    )
    res["listed_resources"] = k.json("import mcp_notebook as _m; kside.emit(len(_m.hub().resources.list_resources()))")
    res["inprocess_handle"] = {
        "read": guarded(k.json, f"kside.time_handle('resources/read', 'nb://vars/x', {prof['handle_calls']}, 3)"),
        "read, flat path": guarded(
            k.json, f"kside.time_handle('resources/read', 'nb://vars/x', {prof['handle_calls']}, 3, flat=True)"
        ),
        "list": guarded(k.json, f"kside.time_handle('resources/list', '', {prof['handle_calls'] // 10}, 3)"),
    }
    return res


def sdk_request_path(kind: str, prof: dict[str, Any]) -> dict[str, Any]:
    from refservers import SMALL_URI

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "refservers.py"), kind, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_port(port, proc)
        eras = ["stateless", "handshake"] if prof["sdk_handshake"] else ["stateless"]
        return _load_matrix(
            f"http://127.0.0.1:{port}/mcp", {}, SMALL_URI, eras, [1, 16], prof["wrk_s"], prof["warmup_s"]
        )
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# -- post-cell hook --------------------------------------------------------------------------

SCENARIOS = {
    "10 vars": "kside.define_vars(10)",
    "1,000 vars": "kside.define_vars(1000)",
    "10,000 vars": "kside.define_vars(10000)",
    "100,000 vars": "kside.define_vars(100000)",
    "10 vars + 1 GB ndarray": "kside.define_vars(10)\nimport numpy as np\nbig = np.ones(125_000_000)",
    "10 vars + 10M-row DataFrame": (
        "kside.define_vars(10)\nimport numpy as np, pandas as pd\n_r = np.random.default_rng(0)\n"
        "big = pd.DataFrame({'a': np.arange(10_000_000), 'b': _r.random(10_000_000),"
        " 'c': _r.integers(0, 100, 10_000_000)})\ndel _r"
    ),
}


def _pct(samples: list[float]) -> dict[str, Any]:
    s = sorted(samples)
    if not s:
        return {"n": 0}
    return {"n": len(s), "median_us": s[len(s) // 2], "p99_us": s[min(len(s) - 1, int(len(s) * 0.99))]}


def hook_scenario(runtime_dir: str, setup: str, big: bool, prof: dict[str, Any]) -> dict[str, Any]:
    """after_cell() timed directly, and whole-cell time with/without the extension in alternating
    blocks (unload/load between them, so drift such as a growing history hits both sides)."""
    k = BenchKernel(runtime_dir)
    try:
        k.run(setup, timeout=300)
        uris = ["nb://vars/v0", "nb://vars/v1", "nb://vars/v2"] + (["nb://vars/big"] if big else [])
        cells, budget = prof["e2e_cells"], prof["hook_budget_s"]
        e2e: dict[str, list[float]] = {"without": [], "nosubs": [], "subs": []}
        for _ in range(prof["e2e_blocks"]):
            e2e["without"] += k.json(f"kside.time_cells({cells}, {budget})")
            k.run("%load_ext mcp_notebook")
            e2e["nosubs"] += k.json(f"kside.time_cells({cells}, {budget})")
            k.run(f"kside.watch({uris!r})", timeout=120)
            e2e["subs"] += k.json(f"kside.time_cells({cells}, {budget})")
            k.run("%unload_ext mcp_notebook")
        out: dict[str, Any] = {f"e2e_{key}": _pct(v) for key, v in e2e.items()}
        base = out["e2e_without"].get("median_us") or 0.0
        out["e2e_added_us"] = {key: out[f"e2e_{key}"].get("median_us", 0.0) - base for key in ("nosubs", "subs")}
        k.run("%load_ext mcp_notebook")
        for subs in (False, True):
            if subs:
                k.run(f"kside.watch({uris!r})", timeout=120)
            key = "subs" if subs else "nosubs"
            for mode in ("steady", "rebind", "newname"):
                out[f"{key}/{mode}"] = guarded(
                    k.json,
                    f"kside.time_after_cell({mode!r}, {prof['hook_calls']}, {budget})",
                    timeout=budget * 20 + 120,
                )
        return out
    finally:
        k.shutdown()


# -- reads during a busy cell, big reads -----------------------------------------------------


def _read_loop(http: httpx.Client, url: str, headers: dict[str, str], body: bytes, seconds: float) -> dict[str, Any]:
    lat = []
    errors = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline and len(lat) < 100_000:
        t0 = time.perf_counter()
        r = http.post(url, content=body, headers=headers)
        dt = time.perf_counter() - t0
        if r.status_code != 200 or b'"result"' not in r.content:
            errors += 1
        lat.append(dt * 1e3)
    lat.sort()
    if not lat:
        return {"n": 0, "errors": errors}
    return {
        "n": len(lat),
        "errors": errors,
        "median_ms": lat[len(lat) // 2],
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "max_ms": lat[-1],
    }


def busy_reads(k: BenchKernel, info: dict[str, Any], busy_s: float) -> dict[str, Any]:
    """Latency of sequential reads while the kernel's main thread spins in pure Python."""
    auth = {"Authorization": f"Bearer {info['token']}"}
    out: dict[str, Any] = {"busy_s": busy_s}
    spin = f"import time as _t\n_d = _t.time() + {busy_s}\nwhile _t.time() < _d:\n    pass"
    with httpx.Client(timeout=30) as http:
        for op, method, params in (
            ("read", "resources/read", {"uri": "nb://vars/x"}),
            ("list", "resources/list", None),
        ):
            headers, body = loadgen.stateless_request(method, params)
            headers.update(auth)
            out[f"{op}/idle"] = _read_loop(http, info["url"], headers, body, min(2.0, busy_s / 2))
            msg_id = k.execute_nowait(spin)
            time.sleep(0.3)
            out[f"{op}/busy"] = _read_loop(http, info["url"], headers, body, busy_s - 0.8)
            k.wait_idle(msg_id, timeout=busy_s + 60)
            if op == "read":  # diagnostic: the same with a 0.5 ms GIL switch interval (default 5 ms)
                msg_id = k.execute_nowait("import sys as _y\n_y.setswitchinterval(0.0005)\n" + spin)
                time.sleep(0.3)
                out["read/busy, switchinterval 0.5 ms"] = _read_loop(http, info["url"], headers, body, busy_s - 0.8)
                k.wait_idle(msg_id, timeout=busy_s + 60)
                k.run("_y.setswitchinterval(0.005)")
    return out


def _read_series(http: httpx.Client, url: str, auth: dict[str, str], uri: str, n: int) -> dict[str, Any]:
    headers, body = loadgen.stateless_request("resources/read", {"uri": uri})
    headers.update(auth)
    lat = []
    size = 0
    for _ in range(n):
        t0 = time.perf_counter()
        r = http.post(url, content=body, headers=headers)
        lat.append((time.perf_counter() - t0) * 1e3)
        if r.status_code != 200 or b'"result"' not in r.content:
            err = r.json().get("error", {}) if r.headers.get("content-type", "").startswith("application/json") else {}
            return {"status": "n/a", "http": r.status_code, "error": str(err.get("message", r.text[:200]))[:300]}
        size = len(r.content)
    lat.sort()
    return {
        "status": "ok",
        "n": n,
        "median_ms": lat[len(lat) // 2],
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "response_bytes": size,
    }


def _find_png_output(http: httpx.Client, url: str, auth: dict[str, str]) -> str | None:
    """The URI of a PNG cell output: from resources/list (mimeType image/png), else the cell index."""
    headers, body = loadgen.stateless_request("resources/list")
    headers.update(auth)
    r = http.post(url, content=body, headers=headers)
    if r.status_code == 200 and "result" in r.json():
        pngs = [
            res["uri"]
            for res in r.json()["result"]["resources"]
            if re.fullmatch(r"nb://cells/\d+/outputs/\d+", res["uri"]) and res.get("mimeType") == "image/png"
        ]
        if pngs:
            return pngs[0]
    headers, body = loadgen.stateless_request("resources/read", {"uri": "nb://cells"})
    headers.update(auth)
    r = http.post(url, content=body, headers=headers)
    m = re.findall(r"nb://cells/\d+/outputs/\d+", r.text) if r.status_code == 200 else []
    return m[-1] if m else None


def big_reads(k: BenchKernel, info: dict[str, Any], n: int) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {info['token']}"}
    url = info["url"]
    k.run(
        "import numpy as np, pandas as pd\n_r = np.random.default_rng(0)\n"
        "frame10m = pd.DataFrame({'a': np.arange(10_000_000), 'b': _r.random(10_000_000),"
        " 'c': _r.integers(0, 100, 10_000_000), 'd': pd.Categorical(_r.choice(['x', 'y', 'z'], 10_000_000))})\n"
        "del _r",
        timeout=300,
    )
    k.run(
        "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2, 4])\nplt.show()",
        timeout=120,
    )
    out: dict[str, Any] = {}
    with httpx.Client(timeout=120) as http:
        out["frame page 1,000 rows (offset 0)"] = _read_series(
            http, url, auth, "nb://frames/frame10m?offset=0&limit=1000", n
        )
        out["frame page 1,000 rows (offset 9,999,000)"] = _read_series(
            http, url, auth, "nb://frames/frame10m?offset=9999000&limit=1000", n
        )
        out["frame schema (10M rows)"] = _read_series(http, url, auth, "nb://frames/frame10m/schema", n)
        png = _find_png_output(http, url, auth)
        if png is None:
            out["PNG output"] = {"status": "n/a", "error": "no PNG output resource found"}
        else:
            out["PNG output"] = {**_read_series(http, url, auth, png, n), "uri": png}
    return out


def machine_facts() -> dict[str, Any]:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import psutil

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for pkg in (
        "mcp-notebook",
        "mcp",
        "mcp-types",
        "tornado",
        "uvicorn",
        "starlette",
        "ipykernel",
        "ipython",
        "jupyter_client",
        "numpy",
        "pandas",
        "httpx",
        "httpx2",
    ):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    git: dict[str, Any] = {}
    try:
        git["commit"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True, timeout=10
        ).stdout
        git["dirty_files"] = len(status.splitlines())
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "wrk": loadgen.wrk_version(),
        "git": git,
    }
