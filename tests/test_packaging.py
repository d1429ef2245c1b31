"""The release artifacts as a maintainer (and conda-forge) takes them: `python -m build --sdist` of a
fresh clone's files makes a lean sdist (sources, LICENSE and the prebuilt JupyterLab extension; no
build caches, no node_modules), a wheel built FROM THAT SDIST with Node hidden (every `node`, `npm`,
`jlpm` on PATH fails loudly) and no build isolation (conda-forge's `pip install . --no-build-isolation`),
`twine check --strict` and `check-wheel-contents` clean, and the wheel installed into a fresh venv
(tests/wheels.py's cached profile venv) imports and carries the extension. One version: pyproject
reads mcp_notebook/version.py, and labextension/package.json says the same.

The fresh-clone copy gets the prebuilt extension from this tree (scripts/test.sh builds it; the
sdist build of a release builds it with Node, which tests/wheels.py's wheel build exercises).
About 30 s warm, a minute or two when the venv is first built. MCP_NB_INSTALL_TESTS=0 skips it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from wheels import profile_venv, source_files

ROOT = Path(__file__).resolve().parent.parent
LAB_BUILD = ROOT / "mcp_notebook" / "labextension"
NODE_TOOLS = ("node", "npm", "npx", "jlpm", "yarn")
# Nothing of these may be in the sdist: build caches, installed Node packages, compiled TypeScript.
FORBIDDEN = re.compile(r"(^|/)(node_modules|\.yarn|__pycache__|\.ci-work|\.venv[^/]*|lib)/|tsbuildinfo$|\.pyc$")
SDIST_MAX = 5_000_000
WHEEL_MAX = 3_000_000

pytestmark = [
    pytest.mark.skipif(os.environ.get("MCP_NB_INSTALL_TESTS") == "0", reason="MCP_NB_INSTALL_TESTS=0"),
    pytest.mark.skipif(os.name == "nt" or shutil.which("git") is None, reason="needs git and a POSIX venv"),
    pytest.mark.timeout(900),
]


def _run(cmd: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _version() -> str:
    return re.search(r'__version__ = "([^"]+)"', (ROOT / "mcp_notebook" / "version.py").read_text()).group(1)


def _no_node_path(tmp: Path) -> str:
    """PATH with this interpreter's bin and the system's, where every Node tool fails loudly."""
    shims = tmp / "no-node"
    shims.mkdir()
    for tool in NODE_TOOLS:
        (shims / tool).write_text(f'#!/bin/sh\necho "Node is hidden in this test: {tool} $*" >&2\nexit 127\n')
        (shims / tool).chmod(0o755)
    return os.pathsep.join([str(shims), str(Path(sys.executable).parent), "/usr/bin", "/bin"])


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """sdist of a fresh clone's files, then a wheel from that sdist without Node."""
    pytest.importorskip("build")
    pytest.importorskip("hatchling")
    pytest.importorskip("hatch_jupyter_builder")
    if not (LAB_BUILD / "static" / "style.js").is_file():
        pytest.skip("the JupyterLab extension is not built here (bash scripts/test.sh --setup-only builds it)")
    tmp = tmp_path_factory.mktemp("packaging")
    src = tmp / "clone"
    for name in source_files():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(LAB_BUILD, src / "mcp_notebook" / "labextension", symlinks=False)
    # What a build leaves in a checkout must stay out of the sdist: plant some of it.
    for junk in ("labextension/.yarn/cache/big.zip", "labextension/node_modules/x/index.js", "labextension/lib/a.js"):
        (src / junk).parent.mkdir(parents=True, exist_ok=True)
        (src / junk).write_bytes(b"x" * 1000)
    (src / "labextension" / "tsconfig.tsbuildinfo").write_text("{}")
    env = {**os.environ, "PATH": _no_node_path(tmp)}
    env.pop("PYTHONPATH", None)
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(tmp / "dist"), str(src)], env=env)
    (sdist,) = (tmp / "dist").glob("mcp_notebook-*.tar.gz")
    unpacked = tmp / "unpacked"
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data") if sys.version_info >= (3, 12) else tar.extractall(unpacked)
    (tree,) = unpacked.iterdir()
    pip_wheel = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--disable-pip-version-check",
    ]
    built = _run([*pip_wheel, "-v", "-w", str(tmp / "dist"), str(tree)], env=env)
    assert "Node is hidden" not in built.stdout + built.stderr  # no Node tool was even tried
    (wheel,) = (tmp / "dist").glob("mcp_notebook-*.whl")
    return {"sdist": sdist, "wheel": wheel}


def test_sdist_is_lean_and_carries_license_and_prebuilt_extension(artifacts):
    sdist = artifacts["sdist"]
    with tarfile.open(sdist) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    assert not [n for n in names if FORBIDDEN.search(n)], [n for n in names if FORBIDDEN.search(n)][:10]
    for needed in ("LICENSE", "PKG-INFO", "pyproject.toml", "README.md", "mcp_notebook/__init__.py"):
        assert needed in names, needed
    assert "mcp_notebook/labextension/static/style.js" in names  # a Node-less wheel build needs it
    assert "mcp_notebook/labextension/package.json" in names and "labextension/src/index.ts" in names
    assert sdist.stat().st_size < SDIST_MAX, sdist.stat().st_size


def test_wheel_from_sdist_carries_license_extension_and_config(artifacts):
    wheel = artifacts["wheel"]
    version = _version()
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = zf.read(f"mcp_notebook-{version}.dist-info/METADATA").decode()
    assert f"mcp_notebook-{version}.dist-info/licenses/LICENSE" in names
    data = f"mcp_notebook-{version}.data/data/"
    assert f"{data}share/jupyter/labextensions/mcp-notebook/static/style.js" in names
    assert f"{data}etc/jupyter/jupyter_server_config.d/mcp_notebook.json" in names
    assert not [n for n in names if n.startswith("mcp_notebook/labextension/")]  # shipped once, as data
    assert f"\nVersion: {version}\n" in meta and "License-Expression: BSD-3-Clause" in meta
    assert "Classifier: Framework :: Jupyter :: JupyterLab :: Extensions :: Prebuilt" in meta
    assert "Project-URL: Source, https://github.com/mcp-notebook/mcp-notebook" in meta
    assert wheel.stat().st_size < WHEEL_MAX, wheel.stat().st_size


def test_twine_and_check_wheel_contents_are_clean(artifacts):
    pytest.importorskip("twine")
    pytest.importorskip("check_wheel_contents")
    out = _run([sys.executable, "-m", "twine", "check", "--strict", str(artifacts["sdist"]), str(artifacts["wheel"])])
    assert out.stdout.count("PASSED") == 2, out.stdout
    out = _run([sys.executable, "-m", "check_wheel_contents", str(artifacts["wheel"])])
    assert out.stdout.strip().endswith("OK"), out.stdout


def test_wheel_from_sdist_installs_and_imports_in_a_fresh_venv(artifacts, tmp_path):
    venv = profile_venv("from-sdist", sys.executable, [], artifacts["wheel"])
    env = {"PATH": _no_node_path(tmp_path), "HOME": str(tmp_path)}
    code = "import mcp_notebook, sys; print(mcp_notebook.__version__); print(mcp_notebook.__file__)"
    out = _run([str(venv / "bin" / "python"), "-c", code], env=env, cwd=str(tmp_path))
    version, where = out.stdout.split()
    assert version == _version() and ".ci-work/profiles/from-sdist" in where, out.stdout
    lab = venv / "share" / "jupyter" / "labextensions" / "mcp-notebook"
    assert json.loads((lab / "package.json").read_text())["version"] == version
    assert (lab / "static" / "style.js").is_file()


def test_one_version_everywhere():
    version = _version()
    assert json.loads((ROOT / "labextension" / "package.json").read_text())["version"] == version
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'path = "mcp_notebook/version.py"' in pyproject
    assert not re.search(r"(?m)^version\s*=", pyproject)  # no second copy in [project]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{version}]" in changelog or "## [Unreleased]" in changelog
