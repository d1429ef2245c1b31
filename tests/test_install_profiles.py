"""Every install works: a fresh venv per profile, built from the wheel as the README says (the package
and what such a user already has: pandas; polars; numpy without uvloop; one engine at a time; the
oldest and the newest stacks), a real kernel in it, and the official MCP SDK client: loading and listing
import no frame library; then every frame kind the venv can hold is made and read (page, schema,
row count, statistics of lazy frames, nb://db for DuckDB), with `nb://vars`, a typed custom resource,
and the clear error of a read that needs what the profile lacks (statistics without pyarrow).

The wheel and the venvs are cached under .ci-work/ (tests/wheels.py). On 2 cores with pip's download
cache filled: cold (every venv built) about 3 minutes, plus about 40 s when the wheel is built too;
warm about 35 s; after a source change about 75 s (the wheel rebuilt, then reinstalled with --no-deps
into each venv). The newest profile is re-resolved weekly. MCP_NB_INSTALL_TESTS=0 skips the module; MCP_NB_PROFILES=readme,polars runs some
profiles only.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from kernel_harness import Kernel
from sdk import connect
from wheels import built_wheel, profile_venv

pytestmark = [
    pytest.mark.skipif(os.environ.get("MCP_NB_INSTALL_TESTS") == "0", reason="MCP_NB_INSTALL_TESTS=0"),
    pytest.mark.skipif(os.name == "nt" or shutil.which("git") is None, reason="needs git and a POSIX venv"),
    pytest.mark.timeout(2400),
]


def _python(version: str) -> str | None:
    """An interpreter of ``version`` that runs (pyenv's, or on PATH), or None."""
    candidates = [shutil.which(f"python{version}")]
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        root = ""
    if root:
        candidates = [str(p) for p in sorted(Path(root).glob(f"versions/{version}*/bin/python3"))] + candidates
    for candidate in filter(None, candidates):
        try:
            ok = subprocess.run([candidate, "-c", "import venv"], capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return candidate
    return None


# Every frame kind whose library the venv holds (names starting with _ are not exposed).
SETUP = """
import importlib.util as _u
_made = []
def _has(module):
    return _u.find_spec(module) is not None
if _has("pandas"):
    import pandas as pd
    pdf = pd.DataFrame({"region": ["n", "s", "e"], "sales": [1.5, 2.5, None], "day": pd.date_range("2024-01-01", periods=3)})
    ps = pdf["sales"]
    _made += ["pdf", "ps"]
if _has("numpy"):
    import numpy as np
    arr = np.arange(12).reshape(4, 3)
    cube = np.zeros((2, 2, 3))
    _made += ["arr", "cube"]
if _has("polars"):
    import polars as pl
    pl_df = pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None]})
    pl_s = pl_df["a"]
    lazy = pl_df.lazy().with_columns(twice=pl.col("a") * 2)
    _made += ["pl_df", "pl_s", "lazy"]
if _has("pyarrow"):
    import pyarrow as pa
    pa_t = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    pa_b = pa_t.to_batches()[0]
    pa_c = pa_t["a"]
    _made += ["pa_t", "pa_b", "pa_c"]
if _has("duckdb"):
    import duckdb
    rel = duckdb.sql("SELECT range AS i, range * 2 AS j FROM range(100)")
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS k, 'v' || range AS label FROM range(5)")
    _made += ["rel"]
if _has("dask"):
    import dask.dataframe as dd
    ddf = dd.from_pandas(pd.DataFrame({"i": range(100), "j": range(100)}), npartitions=3)
    _made += ["ddf"]
if _has("pyspark"):
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    sdf = spark.range(100).selectExpr("id", "id * 2 AS twice")
    _made += ["sdf"]
if _has("ibis"):
    import ibis
    it = ibis.memtable({"i": [1, 2, 3], "s": ["a", "b", "c"]})
    _made += ["it"]
print(",".join(_made))
"""
ROWS = {"pdf": 3, "ps": 3, "arr": 4, "cube": 4, "pl_df": 3, "pl_s": 3, "lazy": 3, "pa_t": 3, "pa_b": 3, "pa_c": 3}
ROWS |= {"rel": 100, "ddf": 100, "sdf": 100, "it": 3}
LAZY = {"lazy", "rel", "ddf", "sdf", "it"}

# A custom typed resource, as in the README: validated arguments, a list of models, their schema.
TYPED = """
import mcp_notebook
from typing import Annotated, Literal
from pydantic import BaseModel, Field

class Sale(BaseModel):
    region: str
    year: int
    amount: float

@mcp_notebook.resource("app://sales/{region}/{year}")
def sales(region: Literal["north", "south"], year: Annotated[int, Field(ge=2000)]) -> list[Sale]:
    return [Sale(region=region, year=year, amount=1.5)]
"""
HEAVY = (
    "pandas", "numpy", "polars", "pyarrow", "narwhals", "duckdb", "dask", "pyspark", "ibis",
    "matplotlib", "PIL", "ipywidgets", "nbformat",
)  # fmt: skip


@dataclass
class Profile:
    packages: list[str]
    frames: set[str]  # the frame kinds the profile must have (SETUP makes every kind it can)
    absent: list[str] = field(default_factory=list)  # modules that must not be importable in the venv
    python: str = "3.11"
    after: list[list[str]] = field(default_factory=list)
    refresh: bool = False  # re-resolved weekly (newest releases)
    errors: dict[str, str] = field(default_factory=dict)  # read -> the package its clear error names


PROFILES: dict[str, Profile] = {
    "readme": Profile(["ipykernel", "pandas"], {"pdf", "ps", "arr", "cube"}, absent=["polars", "pyarrow"]),
    "polars": Profile(["polars"], {"pl_df", "pl_s", "lazy"}, absent=["pandas", "pyarrow", "numpy"]),
    # numpy alone, and without uvloop (asyncio's loop, as on Windows): one venv for both.
    "numpy": Profile(
        ["numpy"],
        {"arr", "cube"},
        absent=["pandas", "polars", "pyarrow", "uvloop"],
        after=[["uninstall", "-y", "uvloop"]],
    ),
    "duckdb": Profile(
        ["duckdb"],
        {"rel"},
        absent=["pandas", "polars", "pyarrow", "numpy"],
        errors={"nb://frames/rel/schema?stats=true": "pyarrow"},
    ),
    "dask": Profile(["dask[dataframe]"], {"ddf", "pdf", "arr", "pa_t"}, absent=["polars"]),
    "pyspark": Profile(
        ["pyspark"],
        {"sdf"},
        absent=["pandas", "polars", "pyarrow"],
        errors={"nb://frames/sdf/schema?stats=true": "pyarrow"},
    ),
    "ibis": Profile(["ibis-framework[duckdb]"], {"it", "rel", "pdf", "pa_t"}, absent=["polars"]),
    "oldest": Profile(
        ["ipykernel==6.29.5", "ipython==8.0.1", "pandas", "polars"], {"pdf", "pl_df", "lazy", "arr"}, python="3.10"
    ),
    "newest": Profile(
        ["ipykernel", "ipython", "pandas", "polars", "narwhals"],
        {"pdf", "pl_df", "lazy", "arr"},
        python="3.13",
        after=[["install", "--quiet", "-U", "ipykernel", "ipython", "pandas", "polars", "narwhals"]],
        refresh=True,
    ),
}
_CHOSEN = [p for p in os.environ.get("MCP_NB_PROFILES", "").split(",") if p] or list(PROFILES)


@pytest.fixture(scope="module")
def venvs() -> dict[str, Path | str]:
    """Every chosen profile's venv (built two at a time: pip downloads overlap well)."""
    wheel = built_wheel()
    out: dict[str, Path | str] = {}
    year, week, _ = datetime.date.today().isocalendar()
    this_week = f"{year}-W{week:02d}"

    def build(name: str) -> tuple[str, Path | str]:
        profile = PROFILES[name]
        python = _python(profile.python)
        if python is None:
            return name, f"no Python {profile.python} on this machine"
        refresh = this_week if profile.refresh else ""
        return name, profile_venv(name, python, profile.packages, wheel, profile.after, refresh)

    with ThreadPoolExecutor(2) as pool:
        for name, path in pool.map(build, _CHOSEN):
            out[name] = path
    return out


@pytest.fixture
def kernel_in(venvs, tmp_path) -> Iterator:
    started: list[Kernel] = []

    def start(name: str) -> Kernel:
        venv = venvs[name]
        if isinstance(venv, str):
            pytest.skip(venv)
        env = {"JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "PYTHONPATH": "", "IPYTHONDIR": str(tmp_path / "ipy")}
        kernel = Kernel(env=env, cwd=str(tmp_path), python=str(venv / "bin" / "python"))
        started.append(kernel)
        return kernel

    yield start
    for kernel in started:
        kernel.shutdown()


def _hub_from_runtime_files(runtime: Path) -> dict[str, str]:
    """The hub's URL and token as a client finds them: its runtime file in JUPYTER_RUNTIME_DIR."""
    (found,) = runtime.glob("mcp-notebook-*.json")
    return json.loads(found.read_text())


def _check_the_install(kernel: Kernel, name: str, profile: Profile) -> None:
    where = kernel.run("import mcp_notebook, sys; print(mcp_notebook.__file__, sys.prefix)").stdout
    assert ".ci-work/profiles" in where and "site-packages" in where, where  # the wheel, not the source tree
    for module in profile.absent:
        probe = kernel.run(f"import importlib.util as u; print(u.find_spec({module!r}) is None)").stdout
        assert probe.strip() == "True", f"{module} is installed in the {name} profile"
    probe = "import mcp_notebook as m; m.hub().transport.wait_ready(); print(type(m.hub().transport._loop).__module__)"
    loop = kernel.run(probe).stdout.strip()  # the loop is made on the server thread (DESIGN, "Loading, sixth cut")
    assert loop.startswith("asyncio" if "uvloop" in profile.absent else "uvloop"), loop


async def _read_frames(client, made: list[str], profile: Profile) -> None:
    listed = json.loads((await client.read_resource("nb://vars")).contents[0].text)
    rows = {v["name"]: v for v in listed["variables"]}
    for frame in made:  # nb://vars lists each with its type and where to page it
        assert rows[frame]["type"] and rows[frame]["frame"] == f"nb://frames/{frame}", rows[frame]
        page = await client.read_resource(f"nb://frames/{frame}?limit=2")
        text, info = page.contents[0].text, json.loads(page.contents[1].text)
        assert info["rows"] == 2 and len(text.strip().splitlines()) == 3 and info["truncated"], (frame, info)
        schema = json.loads((await client.read_resource(f"nb://frames/{frame}/schema")).contents[0].text)
        assert schema["columns"] and all("error" not in c for c in schema["columns"]), schema
        counted = f"nb://frames/{frame}?count=true&limit=1" if frame in LAZY else f"nb://frames/{frame}"
        info = json.loads((await client.read_resource(counted)).contents[1].text)
        assert info["total_rows"] == ROWS[frame], (frame, info)
        stats = f"nb://frames/{frame}/schema?stats=true"
        if frame in LAZY and stats not in profile.errors:
            doc = json.loads((await client.read_resource(stats)).contents[0].text)
            assert doc["stats_rows"] == ROWS[frame] and all("error" not in c for c in doc["columns"]), doc
    if "rel" in made:
        db = json.loads((await client.read_resource("nb://db/con")).contents[0].text)
        assert [t["name"] for t in db["tables"]] == ["t"], db
        page = await client.read_resource("nb://db/con/tables/t?limit=2")
        assert page.contents[0].text == "k,label\n0,v0\n1,v1\n", page.contents[0].text


async def _read_the_rest(client, profile: Profile) -> None:
    typed = await client.read_resource("app://sales/south/2024")
    assert json.loads(typed.contents[0].text) == [{"region": "south", "year": 2024, "amount": 1.5}]
    schema = json.loads((await client.read_resource("nb://schemas/sales")).contents[0].text)
    assert "Sale" in json.dumps(schema), schema
    bad = await client.call_tool("read_resource", {"uri": "app://sales/east/2024"})
    assert bad.is_error and "north" in bad.content[0].text, bad.content
    early = await client.call_tool("read_resource", {"uri": "app://sales/north/1999"})
    assert early.is_error and "greater than or equal to 2000" in early.content[0].text, early.content
    for uri, package in profile.errors.items():  # needs what the profile lacks: a clear error naming it
        result = await client.call_tool("read_resource", {"uri": uri})
        text = result.content[0].text
        assert result.is_error and f"needs {package}, which is not installed" in text, text
        assert f"-m pip install '{package}'" in text, text


@pytest.mark.parametrize("name", _CHOSEN)
def test_profile_serves_every_frame_kind_it_has(name, venvs, kernel_in, tmp_path):
    profile = PROFILES[name]
    kernel = kernel_in(name)
    loaded = kernel.run("%load_ext mcp_notebook")
    assert "Error" not in loaded.stdout + loaded.stderr, loaded.stderr
    _check_the_install(kernel, name, profile)
    info = _hub_from_runtime_files(tmp_path / "runtime")

    async def light() -> None:
        async with connect(info) as (client, _):
            await client.list_resources()
            await client.read_resource("nb://vars")

    anyio.run(light)
    imported = kernel.run(f"import sys; print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))")
    assert imported.stdout.strip() == "[]", imported.stdout  # loading and listing imported no frame library

    made = [m for m in kernel.run(SETUP, timeout=180).stdout.strip().splitlines()[-1].split(",") if m]
    assert profile.frames <= set(made), made
    kernel.run(TYPED)

    async def go() -> None:
        async with connect(info) as (client, _):
            await _read_frames(client, made, profile)
            await _read_the_rest(client, profile)

    anyio.run(go)


@pytest.mark.parametrize("name", _CHOSEN)
def test_doctor_says_what_the_profile_serves(name, venvs, tmp_path):
    venv = venvs[name]
    if isinstance(venv, str):
        pytest.skip(venv)
    env = {"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": str(tmp_path), "JUPYTER_RUNTIME_DIR": str(tmp_path)}
    out = subprocess.run(
        [f"{venv}/bin/mcp-notebook", "doctor", "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    kinds = {k["kind"]: k for k in doc["kinds"]}
    pandas = kinds["pandas DataFrame / Series"]
    assert pandas["ready"] == (doc["packages"]["pandas"] is not None)
    if not pandas["ready"]:
        assert pandas["install"].endswith("pip install pandas") and "nb://vars" in pandas["note"]
    assert doc["packages"]["narwhals"] and doc["jupyter"]["jupyterlab"] is None  # a kernel-only environment
    text = subprocess.run([f"{venv}/bin/mcp-notebook", "doctor"], capture_output=True, text=True, env=env, timeout=60)
    assert "what the hub serves here" in text.stdout and "no Jupyter server" in text.stdout
