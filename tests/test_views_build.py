"""The MCP Apps views are committed as built HTML (so a wheel built without Node ships them): the
committed file must be exactly what views/ builds, self-contained under a CSP that names no
external domain, and each ui:// view is it with its own view name filled in."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILT = ROOT / "mcp_notebook" / "views"
VIEWS = ("views.html",)


@pytest.mark.skipif(
    not (ROOT / "views" / "node_modules").is_dir(), reason="views/node_modules missing: scripts/test.sh installs it"
)
def test_committed_views_are_what_the_sources_build(tmp_path):
    node = shutil.which("node")
    assert node, "node is needed to build the views"
    subprocess.run(
        [node, str(ROOT / "views" / "build.mjs"), "--out", str(tmp_path)], check=True, capture_output=True, timeout=120
    )
    for name in VIEWS:
        assert (tmp_path / name).read_bytes() == (BUILT / name).read_bytes(), (
            f"{name} is stale: run `node views/build.mjs`"
        )


def test_views_are_self_contained_under_a_strict_csp():
    for name in VIEWS:
        html = (BUILT / name).read_text("utf-8")
        csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
        rules = dict(part.strip().split(" ", 1) for part in csp.split(";"))
        assert rules["default-src"] == "'none'" and rules["connect-src"] == "'none'" and rules["img-src"] == "data:"
        assert re.fullmatch(r"'sha256-[A-Za-z0-9+/=]+'", rules["script-src"])
        assert "http" not in csp and "*" not in csp
        assert not re.search(
            r'<script[^>]+src=|<link[^>]+href=|@import|https?://[a-z0-9.-]+\.[a-z]{2,}/[^"\s]*\.(js|css)', html
        )
        assert html.count("<script>") == 1


def test_each_view_is_the_built_page_with_its_name():
    from mcp_notebook.providers.views import CHANGES, FRAME_EXPLORER, OUTPUT_VIEWER, ViewsProvider

    built = (BUILT / "views.html").read_text("utf-8")
    provider = ViewsProvider()
    for uri, view in ((FRAME_EXPLORER, "frame"), (OUTPUT_VIEWER, "outputs"), (CHANGES, "changes")):
        html = provider.read(uri)[0].text
        assert f'<html lang="en" data-view="{view}">' in html and "__VIEW__" not in html and "__TITLE__" not in html
        assert (
            html.replace(f'data-view="{view}"', 'data-view="__VIEW__"').split("<title>")[1].split("</title>")[1]
            == (built.split("<title>")[1].split("</title>")[1])
        )
