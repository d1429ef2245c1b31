"""Sphinx directive ``traitlets-config``: the configuration reference of a traitlets class, read
from the class itself at build time (never retyped).

    ```{traitlets-config} mcp_notebook.inkernel.config.MCPHub
    ```

emits, for every trait tagged ``config=True``, its ``c.Class.name`` line with an anchor
(``#MCPHub.port``), type, default and help text. A class that does not import, or a configurable
trait without help, is a build warning (an error under ``-W``).
"""

from __future__ import annotations

import importlib
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

LOG = logging.getLogger(__name__)


def trait_type(trait: Any) -> str:
    """A short type name: ``Int``, ``List of Unicode``, ``Enum: auto | uvloop | asyncio``."""
    name = type(trait).__name__
    values = getattr(trait, "values", None)
    if values is not None:
        return f"{name}: " + " | ".join(str(v) for v in values)
    inner = getattr(trait, "_trait", None)
    if inner is not None:
        return f"{name} of {type(inner).__name__}"
    return name


def config_traits(cls: type) -> list[tuple[str, str, str, str]]:
    """(name, type, default, help) of every ``config=True`` trait ``cls`` defines, by name (not those
    it inherits: a jupyter_server ``ExtensionApp``'s own knobs, not every application's)."""
    rows = []
    for name, trait in sorted(cls.class_own_traits(config=True).items()):
        rows.append((name, trait_type(trait), trait.default_value_repr(), " ".join((trait.help or "").split())))
    return rows


def _import(path: str) -> type:
    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)


class TraitletsConfig(SphinxDirective):
    """``{traitlets-config} package.module.Class``: a definition list of the class's settings."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        path = self.arguments[0]
        try:
            cls = _import(path)
        except (ImportError, AttributeError) as exc:
            LOG.warning("traitlets-config: cannot import %s: %s", path, exc, location=self.get_location())
            return []
        dl = nodes.definition_list(classes=["traitlets-config"])
        for name, kind, default, help_text in config_traits(cls):
            if not help_text:
                LOG.warning("traitlets-config: %s.%s has no help", cls.__name__, name, location=self.get_location())
            anchor = f"{cls.__name__}.{name}"
            term = nodes.term("", "", ids=[nodes.make_id(anchor)], names=[nodes.fully_normalize_name(anchor)])
            term += nodes.literal("", f"c.{cls.__name__}.{name}")
            self.state.document.note_explicit_target(term)
            meta = nodes.paragraph()
            meta += nodes.emphasis("", kind)
            meta += nodes.Text(", default ")
            meta += nodes.literal("", default)
            body = nodes.definition()
            body += meta
            if help_text:
                body += nodes.paragraph("", help_text)
            dl += nodes.definition_list_item("", term, body)
        return [dl]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("traitlets-config", TraitletsConfig)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
