"""README.md sections included into pages: their links, made for the site.

Pages include sections of README.md (one text for both) with MyST's ``include``. The README's
links are written for the code host: to its own headings (``#security``), to the docs
(``docs/DESIGN.md#secrets``) and to files of the repository (``notebooks/``). On the Sphinx
``include-read`` event, a heading link goes to the page holding that section (``README_ANCHORS``;
a heading missing there stays as it is and fails the build), a docs link becomes a path from the
docs' root, and a link to another repository file becomes the path in code (the site does not
serve the repository). ``scripts/docs_inline_readme.py`` uses the same rewriting when the
sections move out of the README.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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
    "one-url-for-every-user-of-a-jupyterhub": "/start/jupyterhub.md",
    "in-the-notebook": "/notebook.md#in-the-notebook",
    "jupyterlab": "/notebook.md#jupyterlab",
    "protocol": "/how-it-works.md#protocol",
    "security": "/security.md",
    "how-it-works": "/how-it-works.md",
    "benchmarks": "/benchmarks.md",
}
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def site_link(match: re.Match[str]) -> str:
    """One README link ``[text](target)`` as the site needs it."""
    text, target = match.group(1), match.group(2)
    if target.startswith("#"):
        page = README_ANCHORS.get(target[1:])
        return f"[{text}]({page})" if page else match.group(0)
    if re.match(r"[a-z]+:", target):
        return match.group(0)  # another site
    if target.startswith("docs/"):
        return f"[{text}](/{target.removeprefix('docs/')})"
    return f"`{target}`" if text.strip("`") == target else f"{text} (`{target}` in the repository)"


def site_text(readme_text: str) -> str:
    """README text with every link made for the site."""
    return LINK.sub(site_link, readme_text)


def include_read(app: Any, relative_path: Path, parent_docname: str, content: list[str]) -> None:
    """Sphinx ``include-read``: rewrite README.md's links when a page includes it."""
    if Path(relative_path).name == "README.md":
        content[0] = site_text(content[0])


def setup(app: Any) -> dict[str, Any]:
    app.connect("include-read", include_read)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
