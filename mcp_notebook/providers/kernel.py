"""``nb://kernel``: a short JSON summary of the kernel and the hub."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..types import Annotations, Contents, Resource
from .base import ChangeSet, Provider, ResourceNotFound

KERNEL_URI = "nb://kernel"


class KernelProvider(Provider):
    def __init__(self, summary: Callable[[], dict[str, Any]]):
        self._summary = summary
        self._last: int | None = None

    def owns(self, uri: str) -> bool:
        return uri == KERNEL_URI

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
            raise ResourceNotFound(uri)
        return [Contents(uri=uri, mime_type="application/json", text=json.dumps(self._summary(), default=str))]

    def may_run_user_code(self, uri: str) -> bool:
        return False  # counts and versions only

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        # The summary counts executed cells, so it changes after every cell.
        return ChangeSet(updated={KERNEL_URI}) if KERNEL_URI in watched else ChangeSet()
