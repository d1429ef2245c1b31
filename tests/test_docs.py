"""The documentation site (docs/): it builds with warnings as errors, its configuration reference is
generated from the traitlets classes, and a broken internal link fails the build.

Runs Sphinx as scripts/docs.sh does (html with -W and nitpicky, then linkcheck with every http(s)
link ignored: no network), into temporary directories. Needs the docs extra (scripts/test.sh
installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_notebook.inkernel.config import MCPHub
from mcp_notebook.serverext.extension import MCPNotebookExtension

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(600)


def _require_sphinx() -> None:
    try:
        import myst_parser  # noqa: F401
        import pydata_sphinx_theme  # noqa: F401
        import sphinx  # noqa: F401
        import sphinx_copybutton  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"the docs extra is missing ({exc}): pip install -e '.[docs]' (scripts/test.sh does)")


def _sphinx(builder: str, src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder, str(src), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=540,
    )


def test_the_site_builds_with_warnings_as_errors_and_its_links_check(tmp_path):
    _require_sphinx()
    html = _sphinx("html", ROOT / "docs", tmp_path / "html")
    assert html.returncode == 0, html.stderr[-4000:]
    for page in ("index", "start/laptop", "start/server", "start/jupyterhub", "start/gateways", "clients", "views"):
        assert (tmp_path / "html" / f"{page}.html").is_file(), page
    assert (tmp_path / "html" / "DESIGN.html").is_file()  # docs/DESIGN.md is a page of the site
    # The configuration reference lists every configurable trait of both classes, read from the code.
    config = (tmp_path / "html" / "configuration.html").read_text()
    for cls in (MCPHub, MCPNotebookExtension):
        for name in cls.class_own_traits(config=True):
            assert f"c.{cls.__name__}.{name}<" in config, f"{cls.__name__}.{name} missing from the reference"
    # A section moved from the README keeps its links pointing inside the site.
    laptop = (tmp_path / "html" / "start" / "laptop.html").read_text()
    assert "Load it in every kernel of that environment" in laptop
    assert 'href="#notebooks/' not in laptop
    links = _sphinx("linkcheck", ROOT / "docs", tmp_path / "linkcheck")
    assert links.returncode == 0, links.stderr[-4000:] + (tmp_path / "linkcheck" / "output.txt").read_text()[-2000:]


def test_a_broken_internal_link_fails_the_build(tmp_path):
    _require_sphinx()
    src = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", src / "docs", ignore=shutil.ignore_patterns("_build"))
    shutil.copy(ROOT / "README.md", src / "README.md")
    page = src / "docs" / "security.md"
    page.write_text(
        page.read_text() + "\n[a page](no-such-page.md), [a heading](clients.md#no-such-heading), [here](#nope)\n"
    )
    html = _sphinx("html", src / "docs", tmp_path / "html")
    assert html.returncode != 0
    assert "no-such-page.md" in html.stderr and "no-such-heading" in html.stderr and "'nope'" in html.stderr


def test_the_readme_is_a_front_page_whose_links_lead_to_the_pages():
    """The pages hold their own text (none includes the README); every local link of the README
    names a file that exists, so a newcomer on the code host lands on a page."""
    import re

    assert not any("README.md" in p.read_text() and "{include}" in p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    readme = (ROOT / "README.md").read_text()
    local = [t for t in re.findall(r"\]\(([^)#\s]+)", readme) if "://" not in t]
    assert len(local) >= 10
    assert [t for t in local if not (ROOT / t).exists()] == []
    assert len(readme.splitlines()) < 80
