"""Optional libraries, for real in a kernel: loading imports none of them, and a read that needs one
that is absent answers a clear error naming the package and its install line (resources/read and the
read_resource tool alike) while nb://vars still lists the value with its type.

A library is made absent with ``sys.modules[name] = None`` (Python then refuses to import it); the
install-profile venvs of tests/test_install_profiles.py cover the same with libraries truly absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Mcp
from kernel_harness import Kernel

pytest.importorskip("polars")
pytest.importorskip("duckdb")

HEAVY = (
    "pandas", "numpy", "polars", "pyarrow", "narwhals", "duckdb", "dask", "pyspark", "ibis",
    "matplotlib", "PIL", "ipywidgets", "nbformat",
)  # fmt: skip


def _imported(kernel: Kernel) -> list[str]:
    out = kernel.run(f"import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    return json.loads(out.stdout.strip().replace("'", '"'))


def _error(mcp: Mcp, uri: str) -> str:
    reply = mcp.call("resources/read", {"uri": uri})
    assert "error" in reply, reply
    return reply["error"]["message"]


def _tool_error(mcp: Mcp, uri: str) -> str:
    result = mcp.result("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
    assert result.get("isError") is True, result
    return result["content"][0]["text"]


@pytest.fixture
def started(tmp_path: Path):
    kernels: list[Kernel] = []

    def start() -> Kernel:
        kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}, cwd=str(tmp_path))
        kernels.append(kernel)
        return kernel

    yield start
    for kernel in kernels:
        kernel.shutdown()


def test_loading_and_listing_import_no_frame_library(started):
    kernel = started()
    assert _imported(kernel) == []
    mcp = Mcp(kernel.load_hub())
    try:
        mcp.initialize()
        for uri in ("nb://vars", "nb://kernel", "nb://cells"):
            mcp.result("resources/read", {"uri": uri})
        mcp.result("resources/list")
        mcp.result("resources/templates/list")
        mcp.result("tools/call", {"name": "list_resources", "arguments": {}})
        assert _imported(kernel) == []
    finally:
        mcp.close()


def _needs(uri: str, package: str, python: str) -> str:
    return (
        f"reading {uri} needs {package}, which is not installed in the kernel's environment. "
        f"Install it there: {python} -m pip install '{package}'"
    )


def test_without_narwhals_every_read_that_needs_it_says_so(started):
    kernel = started()
    kernel.run(
        "import sys; sys.modules['narwhals'] = None\n"
        "import polars as pl, duckdb\n"
        "pl_df = pl.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\nlazy = pl_df.lazy()\npl_s = pl_df['a']\n"
        "con = duckdb.connect()\ncon.execute('CREATE TABLE t AS SELECT 1 AS x')\nrel = con.sql('SELECT * FROM t')"
    )
    python = kernel.run("import sys; print(sys.executable)").stdout.strip()
    mcp = Mcp(kernel.load_hub())
    try:
        mcp.initialize()
        uris = ["nb://frames/pl_df", "nb://frames/pl_s/schema", "nb://frames/lazy?limit=1", "nb://frames/lazy/schema"]
        uris += ["nb://frames/rel", "nb://vars/lazy", "nb://db/con/tables/t", "nb://db/con/tables/t/schema"]
        for uri in uris:
            assert _error(mcp, uri) == _needs(uri, "narwhals", python)
            assert _tool_error(mcp, uri) == "Could not read the resource: " + _needs(uri, "narwhals", python)
        listed = json.loads(mcp.result("resources/read", {"uri": "nb://vars"})["contents"][0]["text"])
        types = {row["name"]: row["type"] for row in listed["variables"]}
        assert types["pl_df"] == "polars.DataFrame" and types["lazy"] == "polars.LazyFrame", types
        assert types["pl_s"] == "polars.Series" and types["rel"] == "duckdb.DuckDBPyRelation", types
        assert "shape" in json.loads(mcp.result("resources/read", {"uri": "nb://vars/pl_df"})["contents"][0]["text"])
        assert json.loads(mcp.result("resources/read", {"uri": "nb://db/con"})["contents"][0]["text"])["count"] == 1
    finally:
        mcp.close()


def _read(mcp: Mcp, uri: str) -> list[dict[str, Any]]:
    return mcp.result("resources/read", {"uri": uri})["contents"]


def test_duckdb_without_any_eager_library_pages_and_counts(started):
    """DuckDB alone: rows come straight from DuckDB; only statistics need an eager library (pyarrow)."""
    kernel = started()
    kernel.run(
        "import sys\nfor _m in ('pyarrow', 'polars', 'pandas', 'numpy'): sys.modules[_m] = None\n"
        "import duckdb\nrel = duckdb.sql(\"SELECT range AS i, 'r' || range AS s FROM range(10)\")"
    )
    python = kernel.run("import sys; print(sys.executable)").stdout.strip()
    mcp = Mcp(kernel.load_hub())
    try:
        mcp.initialize()
        rows, info = _read(mcp, "nb://frames/rel?offset=8&limit=5&count=true")
        assert rows["text"] == "i,s\n8,r8\n9,r9\n" and json.loads(info["text"])["total_rows"] == 10
        schema = json.loads(_read(mcp, "nb://frames/rel/schema")[0]["text"])
        assert [c["name"] for c in schema["columns"]] == ["i", "s"], schema
        assert _error(mcp, "nb://frames/rel/schema?stats=true") == (
            "statistics of a duckdb.DuckDBPyRelation needs pyarrow, which is not installed in the kernel's "
            f"environment. Install it there: {python} -m pip install 'pyarrow'"
        )
    finally:
        mcp.close()


def test_an_old_notebook_without_nbformat_says_what_converting_it_needs(started, tmp_path: Path):
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": []}]}
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps(v3))
    kernel = started()
    kernel.run("import sys; sys.modules['nbformat'] = None")
    python = kernel.run("import sys; print(sys.executable)").stdout.strip()
    mcp = Mcp(kernel.load_hub(f"%config MCPHub.notebook_path = {str(path)!r}"))
    try:
        mcp.initialize()
        assert _error(mcp, "nb://notebook") == (
            "converting a notebook in nbformat 3 to version 4 needs nbformat, which is not installed in the "
            f"kernel's environment. Install it there: {python} -m pip install 'nbformat'"
        )
    finally:
        mcp.close()


def test_the_missing_package_is_told_from_the_exception_without_running_its_code():
    from mcp_notebook.providers.optional import MissingPackage, missing_package

    class Loud(Exception):
        def __str__(self) -> str:  # a user's exception: its __str__ may hang or raise
            raise AssertionError("__str__ ran")

    assert missing_package(Loud("Required module 'pandas' failed to import"), "w").package == "pandas"
    assert missing_package(Loud(), "w") is None
    gone = ModuleNotFoundError("No module named 'pyarrow.lib'", name="pyarrow.lib")
    err = missing_package(gone, "reading nb://frames/t")
    assert isinstance(err, MissingPackage) and err.package == "pyarrow"
    assert str(err).startswith("reading nb://frames/t needs pyarrow, which is not installed")

    class InvalidInputException(Exception):  # DuckDB wraps the ImportError in an exception of its own
        pass

    assert missing_package(InvalidInputException("Required module 'pandas' failed to import"), "w").package == "pandas"
    assert missing_package(ModuleNotFoundError("No module named 'left_pad'", name="left_pad"), "w") is None
    assert missing_package(ValueError("module 'pandas' has no attribute 'x'"), "w") is None
