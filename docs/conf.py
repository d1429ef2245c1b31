"""Sphinx configuration of the mcp-notebook documentation (MyST Markdown, PyData theme).

Built by scripts/docs.sh (and tests/test_docs.py) with warnings as errors; nothing here reaches
the network: intersphinx is not used and external links are not fetched.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # the package from this checkout, for the configuration reference

from mcp_notebook.version import __version__  # noqa: E402

project = "mcp-notebook"
author = "mcp-notebook contributors"
copyright = "mcp-notebook contributors"
version = release = __version__

extensions = ["myst_parser", "sphinx_copybutton", "traitlets_config"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_fragments", "Thumbs.db", ".DS_Store"]

# Headings up to ### get anchors, so [text](page.md#a-heading) and DESIGN.md's own links resolve.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

nitpicky = True  # a reference that does not resolve is a warning, and -W makes it an error
suppress_warnings: list[str] = []

html_theme = "pydata_sphinx_theme"
html_title = "mcp-notebook"
html_static_path = ["_static"]
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars: dict[str, list[str]] = {}

# Offline link check: `-b linkcheck` checks only links inside this site; every http(s) link is
# ignored (the build machine has no network and external sites are not ours to test).
linkcheck_ignore = [r"https?://.*"]
linkcheck_anchors = True
