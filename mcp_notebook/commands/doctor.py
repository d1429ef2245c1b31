"""``mcp-notebook doctor``: what this Python can serve, and what is running, in one report.

Nothing heavy is imported: versions come from package metadata, extensions from Jupyter's config
and data paths, hubs from the runtime files. Each problem line says what to do about it.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ..runtime import discover, runtime_dir
from ..version import __version__
from . import autoload

CORE = ("ipykernel", "ipython", "traitlets", "pydantic", "jupyter_core", "narwhals", "uvloop")
OPTIONAL = (
    "pandas", "numpy", "pyarrow", "polars", "matplotlib", "ipywidgets",
    "duckdb", "dask", "pyspark", "ibis-framework", "jupyter_server", "jupyterlab",
)  # fmt: skip


@dataclass
class Kind:
    """What values of one kind need, and what the hub does with them."""

    name: str
    needs: tuple[str, ...]
    serves: str
    java: bool = False


KINDS = (
    Kind("pandas DataFrame / Series", ("pandas",), "pages and schemas (nb://frames)"),
    Kind("numpy arrays", ("numpy",), "pages and schemas (nb://frames)"),
    Kind("polars DataFrame / Series / LazyFrame", ("polars", "narwhals"), "pages and schemas; LazyFrame pushed down"),
    Kind("pyarrow Table / RecordBatch", ("pyarrow", "narwhals"), "pages and schemas (nb://frames)"),
    Kind("DuckDB relations and connections", ("duckdb", "narwhals"), "pages pushed down to DuckDB; nb://db tables"),
    Kind("Dask DataFrames", ("dask", "narwhals"), "pages read partition by partition from the first"),
    Kind("Spark DataFrames", ("pyspark", "narwhals"), "pages pushed down to Spark (CollectLimit)", java=True),
    Kind("Ibis tables", ("ibis-framework", "narwhals"), "pages pushed down to the backend"),
    Kind("matplotlib figures in outputs", ("matplotlib",), "plots as PNG in cell outputs"),
    Kind("%mcp panel and browser widgets", ("ipywidgets",), "ipywidgets views (text otherwise)"),
)


@dataclass
class Report:
    python: str
    executable: str
    mcp_notebook: str
    packages: dict[str, str | None]
    kinds: list[dict[str, Any]] = field(default_factory=list)
    autoload: dict[str, Any] = field(default_factory=dict)
    hubs: list[dict[str, Any]] = field(default_factory=list)
    jupyter: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _kinds(packages: dict[str, str | None], problems: list[str]) -> list[dict[str, Any]]:
    out = []
    for kind in KINDS:
        missing = [p for p in kind.needs if packages.get(p) is None]
        entry: dict[str, Any] = {"kind": kind.name, "needs": list(kind.needs), "ready": not missing}
        if missing:
            entry["note"] = f"not installed ({', '.join(missing)}): such values are listed in nb://vars, not served"
            entry["install"] = f"{sys.executable} -m pip install {' '.join(missing)}"
        else:
            entry["note"] = kind.serves
            if kind.java and shutil.which("java") is None:
                entry["ready"] = False
                entry["note"] = "pyspark is installed but no `java` is on PATH: Spark cannot start"
                problems.append("Spark needs Java 17+ on PATH (or JAVA_HOME) for the kernel")
        out.append(entry)
    return out


def _autoload() -> dict[str, Any]:
    try:
        env = autoload.status(autoload.env_config_path())
        user = autoload.status(autoload.user_config_path())
    except Exception as exc:  # an unreadable config file
        return {"error": str(exc)}
    return {
        "environment": env.enabled,
        "environment_config": str(env.path),
        "user": user.enabled,
        "user_config": str(user.path),
    }


def _hubs() -> list[dict[str, Any]]:
    out = []
    for record in discover(clean=False):
        out.append(
            {
                "alive": record.alive,
                "url": record.url,
                "notebook": record.notebook_path,
                "kernel_id": record.kernel_id,
                "pid": record.pid,
                "runtime_file": str(record.path),
            }
        )
    return out


def _jupyter(packages: dict[str, str | None], problems: list[str]) -> dict[str, Any]:
    """The JupyterLab and server extensions as the Jupyter of this environment would find them."""
    from jupyter_core.paths import jupyter_config_path, jupyter_path

    lab = [
        str(Path(d) / "mcp-notebook")
        for d in jupyter_path("labextensions")
        if (Path(d) / "mcp-notebook" / "package.json").exists()
    ]
    server_enabled: bool | None = None
    for d in jupyter_config_path():
        for path in [
            *sorted((Path(d) / "jupyter_server_config.d").glob("*.json")),
            Path(d) / "jupyter_server_config.json",
        ]:
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            value = doc.get("ServerApp", {}).get("jpserver_extensions", {}).get("mcp_notebook")
            if isinstance(value, bool) and server_enabled is not False:
                server_enabled = value if server_enabled is None else server_enabled and value
    disabled = False
    for d in jupyter_config_path():
        try:
            page = json.loads((Path(d) / "labconfig" / "page_config.json").read_text())
        except (OSError, ValueError):
            continue
        disabled = disabled or bool(page.get("disabledExtensions", {}).get("mcp-notebook"))
    out: dict[str, Any] = {
        "jupyterlab": packages.get("jupyterlab"),
        "jupyter_server": packages.get("jupyter_server"),
        "labextension": lab[0] if lab else None,
        "labextension_enabled": bool(lab) and not disabled,
        "server_extension_enabled": bool(server_enabled),
    }
    if packages.get("jupyter_server") is None:
        out["note"] = "no Jupyter server in this environment (a kernel-only environment needs none)"
    elif not server_enabled:
        problems.append(
            f"the server extension is not enabled: {sys.executable} -m jupyter server extension enable mcp_notebook"
        )
    if packages.get("jupyterlab") is not None and not out["labextension_enabled"]:
        problems.append(
            f"the JupyterLab extension is missing or disabled: reinstall mcp-notebook with {sys.executable} -m pip"
        )
    return out


def report() -> Report:
    packages = {name: _version_of(name) for name in (*CORE, *OPTIONAL)}
    problems: list[str] = []
    for name in CORE:
        if packages[name] is None and name != "uvloop":
            problems.append(f"{name} is missing (a dependency of mcp-notebook): {sys.executable} -m pip install {name}")
    rep = Report(sys.version.split()[0], sys.executable, __version__, packages, problems=problems)
    rep.kinds = _kinds(packages, problems)
    rep.autoload = _autoload()
    rep.hubs = _hubs()
    rep.jupyter = _jupyter(packages, problems)
    if any(not hub["alive"] for hub in rep.hubs):
        problems.append(f"stale runtime files in {runtime_dir()}: `mcp-notebook list` removes them")
    return rep


def render(rep: Report) -> str:
    lines = [f"mcp-notebook {rep.mcp_notebook} on Python {rep.python} ({rep.executable})", "", "packages:"]
    lines += [f"  {name:<16} {version or '-- not installed'}" for name, version in rep.packages.items()]
    lines += ["", "what the hub serves here:"]
    for kind in rep.kinds:
        mark = "ok " if kind["ready"] else "-- "
        lines.append(f"  {mark}{kind['kind']}: {kind['note']}")
        if "install" in kind:
            lines.append(f"       install: {kind['install']}")
    auto = rep.autoload
    if "error" in auto:
        lines += ["", f"autoload: cannot tell ({auto['error']})"]
    else:
        state = "on" if auto["environment"] or auto["user"] else "off (run `mcp-notebook autoload on`)"
        lines += ["", f"autoload: {state} (environment {auto['environment']}, user {auto['user']})"]
    lines += ["", f"hubs ({runtime_dir()}):"]
    lines += [
        f"  {'running' if h['alive'] else 'stale  '} {h['notebook'] or h['kernel_id'] or 'pid ' + str(h['pid'])} {h['url']}"
        for h in rep.hubs
    ] or ["  none running (`%load_ext mcp_notebook` in a notebook starts one)"]
    jup = rep.jupyter
    lines += [
        "",
        "jupyter:",
        f"  jupyterlab {jup['jupyterlab'] or '-- not installed'}, jupyter_server {jup['jupyter_server'] or '-- not installed'}",
    ]
    lines.append(f"  lab extension: {'enabled' if jup['labextension_enabled'] else 'not found or disabled'}")
    lines.append(f"  server extension: {'enabled' if jup['server_extension_enabled'] else 'not enabled'}")
    if "note" in jup:
        lines.append(f"  {jup['note']}")
    lines += ["", "problems:" if rep.problems else "no problems found"]
    lines += [f"  - {p}" for p in rep.problems]
    return "\n".join(lines)


def main(as_json: bool = False) -> int:
    rep = report()
    print(json.dumps(asdict(rep), indent=2) if as_json else render(rep))
    return 0
