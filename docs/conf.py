"""Sphinx configuration of the mcp-notebook documentation (MyST Markdown, PyData theme).

Built by scripts/docs.sh (and tests/test_docs.py) with warnings as errors; nothing here reaches
the network: intersphinx is not used and external links are not fetched.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

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


# -- README.md sections included into pages ------------------------------------------------------
# Pages include sections of README.md (one text for both). Its links are written for GitHub: to its
# own headings (#security) and to files of the repository (notebooks/). When it is included, a
# heading link goes to the page holding that section, and a link to a repository file becomes the
# path in code (the site does not serve the repository). An anchor missing here is a build error.
README_ANCHORS = {
    "two-commands": "/start/laptop.md",
    "install-into-your-own-jupyter": "/start/laptop.md#install-into-your-own-jupyter",
    "use-it-in-a-notebook": "/start/laptop.md#use-it-in-a-notebook",
    "your-own-resources": "/custom-resources.md",
    "typed-resources": "/custom-resources.md#typed-resources",
    "resources": "/resources.md",
    "connect-an-mcp-client": "/clients.md",
    "hosts-that-only-call-tools": "/clients.md#hosts-that-only-call-tools",
    "views-in-the-assistant-mcp-apps": "/views.md",
    "kernels-on-a-remote-jupyter-server": "/start/server.md",
    "kernels-behind-a-gateway-in-containers-on-other-hosts": "/start/gateways.md",
    "in-the-notebook": "/notebook.md#in-the-notebook",
    "jupyterlab": "/notebook.md#jupyterlab",
    "protocol": "/how-it-works.md#protocol",
    "security": "/security.md",
    "how-it-works": "/how-it-works.md",
    "benchmarks": "/benchmarks.md",
}
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _readme_link(match: re.Match[str]) -> str:
    text, target = match.group(1), match.group(2)
    if target.startswith("#"):
        page = README_ANCHORS.get(target[1:])
        return f"[{text}]({page})" if page else match.group(0)
    if re.match(r"[a-z]+:", target) or target.startswith("docs/"):
        return match.group(0)  # another site, or a docs page (the include's relative-docs)
    return f"`{target}`" if text.strip("`") == target else f"{text} (`{target}` in the repository)"


def readme_links(app: Any, relative_path: Path, parent_docname: str, content: list[str]) -> None:
    """Sphinx ``include-read``: rewrite README.md's GitHub links for the site."""
    if Path(relative_path).name == "README.md":
        content[0] = _LINK.sub(_readme_link, content[0])


def setup(app: Any) -> None:
    app.connect("include-read", readme_links)
