"""Every install works: a fresh venv per profile, built from the wheel as the README says (the package
and what such a user already has: pandas; polars; numpy; one engine at a time; no uvloop; the oldest
and the newest stacks), a real kernel in it, and the official MCP SDK client reading a page and the
schema of every frame kind present, `nb://vars`, and one custom typed resource.

The wheel and the venvs are cached under .ci-work/ (tests/wheels.py): a cold run installs every
profile (a few minutes, pyspark the largest), a warm one only reinstalls the wheel.
MCP_NB_INSTALL_TESTS=0 skips the module; MCP_NB_PROFILES=readme,polars runs some profiles only.
"""

from __future__ import annotations

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


TYPED = """
import mcp_notebook
from typing import Literal
@mcp_notebook.resource("app://orders/{region}{?limit}")
def orders(region: Literal["north", "south"], limit: int = 2) -> dict:
    return {"region": region, "limit": limit}
"""


@dataclass
class Profile:
    packages: list[str]
    setup: str  # run in the kernel before the hub loads
    frames: list[str]  # names whose page and schema are read
    absent: list[str] = field(default_factory=list)  # modules that must not be importable in the venv
    python: str = "3.11"
    after: list[list[str]] = field(default_factory=list)


PROFILES: dict[str, Profile] = {
    "readme": Profile(
        ["ipykernel", "pandas"],
        "import pandas as pd\npdf = pd.DataFrame({'region': ['n', 's'], 'sales': [1.5, 2.5]})\nps = pdf['sales']",
        ["pdf", "ps"],
        absent=["polars"],
    ),
    "polars": Profile(
        ["polars"],
        "import polars as pl\npl_df = pl.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})\n"
        "lazy = pl_df.lazy().filter(pl.col('a') > 1)\npl_s = pl_df['a']",
        ["pl_df", "lazy", "pl_s"],
        absent=["pandas", "pyarrow", "numpy"],
    ),
    "numpy": Profile(
        ["numpy"],
        "import numpy as np\narr = np.arange(12).reshape(4, 3)\nvec = np.linspace(0, 1, 5)",
        ["arr", "vec"],
        absent=["pandas", "polars", "pyarrow"],
    ),
    "duckdb": Profile(
        ["duckdb"],
        "import duckdb\nrel = duckdb.sql('select range as i, range * 2 as j from range(100)')",
        ["rel"],
        absent=["pandas", "polars", "pyarrow"],
    ),
    "dask": Profile(
        ["dask[dataframe]"],
        "import pandas as pd, dask.dataframe as dd\n"
        "ddf = dd.from_pandas(pd.DataFrame({'i': range(100), 'j': range(100)}), npartitions=3)",
        ["ddf"],
        absent=["polars"],
    ),
    "pyspark": Profile(
        ["pyspark"],
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "sdf = spark.range(100).selectExpr('id', 'id * 2 as twice')",
        ["sdf"],
        absent=["polars"],
    ),
    "ibis": Profile(
        ["ibis-framework[duckdb]"],
        "import ibis\nt = ibis.memtable({'i': [1, 2, 3], 's': ['a', 'b', 'c']})",
        ["t"],
    ),
    "no-uvloop": Profile(
        ["pandas"],
        "import pandas as pd\npdf = pd.DataFrame({'a': [1, 2]})",
        ["pdf"],
        absent=["uvloop"],
        after=[["uninstall", "-y", "uvloop"]],
    ),
    "oldest": Profile(
        ["ipykernel==6.29.5", "ipython==8.0.1", "pandas", "polars"],
        "import pandas as pd, polars as pl\npdf = pd.DataFrame({'a': [1, 2]})\npl_df = pl.DataFrame({'a': [1, 2]})",
        ["pdf", "pl_df"],
        python="3.10",
    ),
    "newest": Profile(
        ["ipykernel", "ipython", "pandas", "polars", "narwhals"],
        "import pandas as pd, polars as pl\npdf = pd.DataFrame({'a': [1, 2]})\npl_df = pl.DataFrame({'a': [1, 2]})",
        ["pdf", "pl_df"],
        python="3.13",
        after=[["install", "--quiet", "-U", "ipykernel", "ipython", "pandas", "polars", "narwhals"]],
    ),
}
_CHOSEN = [p for p in os.environ.get("MCP_NB_PROFILES", "").split(",") if p] or list(PROFILES)


@pytest.fixture(scope="module")
def venvs() -> dict[str, Path | str]:
    """Every chosen profile's venv (built two at a time: pip downloads overlap well)."""
    wheel = built_wheel()
    out: dict[str, Path | str] = {}

    def build(name: str) -> tuple[str, Path | str]:
        profile = PROFILES[name]
        python = _python(profile.python)
        if python is None:
            return name, f"no Python {profile.python} on this machine"
        return name, profile_venv(name, python, profile.packages, wheel, profile.after)

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


@pytest.mark.parametrize("name", _CHOSEN)
def test_profile_serves_every_frame_kind_it_has(name, venvs, kernel_in):
    profile = PROFILES[name]
    kernel = kernel_in(name)
    where = kernel.run("import mcp_notebook, sys; print(mcp_notebook.__file__, sys.prefix)").stdout
    assert ".ci-work/profiles" in where and "site-packages" in where, where  # the wheel, not the source tree
    for module in profile.absent:
        probe = kernel.run(f"import importlib.util as u; print(u.find_spec({module!r}) is None)").stdout
        assert probe.strip() == "True", f"{module} is installed in the {name} profile"
    kernel.run(profile.setup, timeout=180)
    kernel.run(TYPED)
    loaded = kernel.run("%load_ext mcp_notebook")
    assert "Error" not in loaded.stdout + loaded.stderr, loaded.stderr
    imported = kernel.run("import sys; print(sorted({'narwhals', 'pyarrow'} & set(sys.modules)))").stdout
    if name in ("readme", "numpy", "no-uvloop"):
        assert imported.strip() == "[]", imported  # %load_ext imported no frame library
    info = kernel.info()

    async def go() -> None:
        async with connect(info) as (client, _):
            listed = json.loads((await client.read_resource("nb://vars")).contents[0].text)
            names = {v["name"] for v in listed["variables"]}
            assert set(profile.frames) <= names, listed
            for frame in profile.frames:
                page = await client.read_resource(f"nb://frames/{frame}?limit=2")
                rows, page_info = page.contents
                assert rows.text and json.loads(page_info.text)["columns"], (frame, page_info.text)
                schema = json.loads((await client.read_resource(f"nb://frames/{frame}/schema")).contents[0].text)
                assert schema["columns"] and all("error" not in c for c in schema["columns"]), schema
            typed = await client.read_resource("app://orders/south?limit=3")
            assert json.loads(typed.contents[0].text) == {"region": "south", "limit": 3}
            bad = await client.call_tool("read_resource", {"uri": "app://orders/east"})
            assert bad.is_error and "north" in bad.content[0].text
            if name == "duckdb":  # statistics need an eager library: a clear error naming it
                stats = await client.call_tool("read_resource", {"uri": "nb://frames/rel/schema?stats=true"})
                assert stats.is_error and "pip install 'pyarrow'" in stats.content[0].text, stats.content

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
