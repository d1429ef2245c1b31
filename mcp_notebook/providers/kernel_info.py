"""``nb://kernel``: a short JSON summary of the kernel and the hub."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..types import Annotations, Contents, InvalidResourceParams, Resource, ResourceTemplate
from ..uri import compile_template
from .base import NO_CHANGE, ChangeSet, Facts, Provider, ResourceNotFound

KERNEL_URI = "nb://kernel"
FACTS_TEMPLATE = "nb://kernel/facts{?uri}"
_FACTS = compile_template(FACTS_TEMPLATE)


class KernelProvider(Provider):
    """``nb://kernel``, and ``nb://kernel/facts?uri=…``: what the hub can tell of the value behind
    any of its URIs without running user code (type, cheap shape, identity; the namespace name) —
    what a front serving many kernels compares for ``changes_since``."""

    uri_prefixes = (KERNEL_URI,)
    snapshot_unwatched = False  # reports only watched URIs of its own

    def __init__(
        self,
        summary: Callable[[], dict[str, Any]],
        facts: Callable[[str], Facts | None] | None = None,
        variable_name: Callable[[str], str | None] | None = None,
    ):
        self._summary = summary
        self._facts = facts
        self._variable_name = variable_name

    def owns(self, uri: str) -> bool:
        return uri == KERNEL_URI or uri.startswith("nb://kernel/facts")

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=FACTS_TEMPLATE,
                name="kernel/facts",
                title="Facts of the value behind a URI",
                description="Type, cheap shape and identity of the value behind ?uri=, running no user code.",
                mime_type="application/json",
            )
        ]

    def list_resources(self) -> list[Resource]:
        return [
            Resource(
                uri=KERNEL_URI,
                name="kernel",
                title="Kernel summary",
                description="Language, versions, notebook path, counts of variables and executed cells.",
                mime_type="application/json",
                annotations=Annotations(audience=("assistant",), priority=0.8),
            )
        ]

    def read(self, uri: str) -> list[Contents]:
        if uri != KERNEL_URI:
            return [self._read_facts(uri)]
        return [Contents(uri=uri, mime_type="application/json", text=json.dumps(self._summary(), default=str))]

    def _read_facts(self, uri: str) -> Contents:
        params = _FACTS.match(uri)
        if params is None or self._facts is None or self._variable_name is None:
            raise ResourceNotFound(uri)
        about = params.get("uri")
        if not about or set(params) - {"uri"}:
            raise InvalidResourceParams(f"{FACTS_TEMPLATE} takes one parameter, uri")
        facts = self._facts(about)
        doc = {
            "uri": about,
            "variable": self._variable_name(about),
            "facts": None if facts is None else {"type": facts.type, "shape": facts.shape, "ident": facts.ident},
        }
        return Contents(uri=uri, mime_type="application/json", text=json.dumps(doc))

    def may_run_user_code(self, uri: str) -> bool:
        return False  # counts and versions only

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        # The summary counts executed cells, so it changes after every cell.
        return ChangeSet(updated={KERNEL_URI}) if KERNEL_URI in watched else NO_CHANGE
