"""Resource descriptors and contents: they live in :mod:`mcp_notebook.types`; re-exported here."""

from __future__ import annotations

from ..types import Annotations, Contents, Icon, Resource, ResourceTemplate, masked_blob

__all__ = ["Annotations", "Contents", "Icon", "Resource", "ResourceTemplate", "masked_blob"]
