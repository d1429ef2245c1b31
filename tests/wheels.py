"""The wheel a user installs, built once per source state, and venvs built from it, cached.

The wheel is `pip wheel --no-deps` of a copy of the git-tracked (and untracked, not ignored) files,
without any build output, as a fresh clone holds them: hatch-jupyter-builder builds the JupyterLab
extension inside. It is kept under `.ci-work/wheels/<hash of those files>/`, so the install tests of
one run (and of later runs on an unchanged tree) share it.

A profile venv is created from the wheel WITH its dependencies (what a user gets) plus the
profile's packages, and kept under `.ci-work/profiles/<name>-<key>/`; the key covers the profile's
spec, the interpreter and pyproject.toml. A kept venv gets a newer wheel with `--no-deps
--force-reinstall` only. `MCP_NB_FRESH_PROFILES=1` rebuilds every venv.

Lean on disk: pip installs with `--no-compile` (Python writes the bytecode of the modules a test
imports, on first import; the rest never gets any: about 30 % less per venv, e.g. 316 -> 227 MB for
the wheel and pandas), one spec of a profile is kept at a time, and every venv downloads through
pip's one cache (pip's default, ~/.cache/pip, or $PIP_CACHE_DIR: never switched off here).
`bash scripts/test.sh --clean` removes `.ci-work/` altogether.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".ci-work"


def _run(cmd: list[str], timeout: float = 900, **kw) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def source_files() -> list[str]:
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout
    return sorted(n for n in filter(None, listed.split("\0")) if (ROOT / n).is_file())


def source_hash(files: list[str]) -> str:
    h = hashlib.sha256()
    for name in files:
        h.update(name.encode() + b"\0" + (ROOT / name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def built_wheel() -> Path:
    """The wheel of the current source tree (built once per source state; safe across processes)."""
    files = source_files()
    target = CACHE / "wheels" / source_hash(files)
    found = sorted(target.glob("mcp_notebook-*.whl"))
    if found:
        return found[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / "src"
        for name in files:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
        assert not (src / "mcp_notebook" / "labextension").exists()  # the build must make it
        out = Path(tmp) / "out"
        _run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", str(src), "-w", str(out)]
        )
        try:
            out.rename(target)
        except OSError:  # another process built it meanwhile
            pass
    for old in (CACHE / "wheels").iterdir():  # keep the cache to the newest few source states
        if old != target and old.is_dir() and len(list((CACHE / "wheels").iterdir())) > 3:
            shutil.rmtree(old, ignore_errors=True)
    return sorted(target.glob("mcp_notebook-*.whl"))[0]


def profile_venv(
    name: str, python: str, packages: list[str], wheel: Path, after: list[list[str]] = (), refresh: str = ""
) -> Path:
    """A venv for profile ``name``: the wheel with its dependencies plus ``packages`` (pip
    requirement strings); ``after`` are pip argument lists run once the venv is built (e.g. an
    uninstall). Reused while its spec is unchanged; a new ``refresh`` (e.g. the week, for a
    profile of newest releases) rebuilds it."""
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    version = _run([python, "-c", "import sys; print(sys.version)"]).stdout.strip()
    spec = (name, version, packages, after) + ((refresh,) if refresh else ())
    key = hashlib.sha256(repr(spec).encode() + pyproject).hexdigest()[:12]
    path = CACHE / "profiles" / f"{name}-{key}"
    stamp = path / ".mcp-notebook-wheel"
    fresh = os.environ.get("MCP_NB_FRESH_PROFILES") == "1"
    if path.exists() and (fresh or not stamp.exists()):
        shutil.rmtree(path)
    vpy = str(path / "bin" / "python")
    pip = [vpy, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    if not path.exists():
        for old in (CACHE / "profiles").glob(f"{name}-*"):  # an older spec of this profile
            shutil.rmtree(old, ignore_errors=True)
        _run([python, "-m", "venv", str(path)], timeout=120)
        _run([*pip, str(wheel), *packages], timeout=1800)
        for args in after:
            _run([vpy, "-m", "pip", *args, *(["--no-compile"] if args[:1] == ["install"] else [])], timeout=600)
    elif stamp.read_text() != wheel.name + str(wheel.stat().st_size) + wheel.parent.name:
        _run([*pip, "--no-deps", "--force-reinstall", str(wheel)], timeout=600)
    stamp.write_text(wheel.name + str(wheel.stat().st_size) + wheel.parent.name)
    return path
