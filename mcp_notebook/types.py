"""The types every layer shares, at the bottom of the import graph.

Resource descriptors and contents (rendered per negotiated revision) and the errors providers
raise. Providers build these, the hub passes them on, the protocol encodes them; nothing here
imports from providers/, the hub or the protocol's request handling.

Plain slotted dataclasses: they are built on the request path, so they stay cheap. Each
``to_json(version)`` emits only the fields that revision defines.

``to_json`` is also where text leaves the hub, so it is where secrets are masked (``redact.REDACTOR``:
credential shapes, the exact values the hub hides, its own token, literals assigned to secret
names), once for every provider. Descriptors remember the redactor's version they were built
under, so a listing cached before the hidden set grew compares unequal and is encoded again.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from .redact import REDACTOR
from .revisions import knows


def _version() -> int:
    return REDACTOR.version


@dataclass(slots=True)
class Annotations:
    audience: tuple[str, ...] | None = None
    priority: float | None = None
    last_modified: str | None = None  # ISO 8601

    def to_json(self, version: str) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.audience:
            out["audience"] = list(self.audience)
        if self.priority is not None:
            out["priority"] = self.priority
        if self.last_modified and knows(version, "last_modified"):
            out["lastModified"] = self.last_modified
        return out or None


@dataclass(slots=True)
class Icon:
    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"src": self.src}
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.sizes:
            out["sizes"] = list(self.sizes)
        return out


def _common(obj: Any, out: dict[str, Any], version: str) -> dict[str, Any]:
    mask = REDACTOR.mask
    if obj.title and knows(version, "title"):
        out["title"] = mask(obj.title)
    if obj.description:
        out["description"] = mask(obj.description)
    if obj.mime_type:
        out["mimeType"] = obj.mime_type
    if obj.annotations is not None:
        ann = obj.annotations.to_json(version)
        if ann:
            out["annotations"] = ann
    if obj.icons and knows(version, "icons"):
        out["icons"] = [icon.to_json() for icon in obj.icons]
    if obj.meta and knows(version, "meta"):
        out["_meta"] = REDACTOR.mask_obj(obj.meta)
    return out


@dataclass(slots=True)
class Resource:
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Annotations | None = None
    icons: tuple[Icon, ...] = ()
    meta: dict[str, Any] | None = None
    redaction: int = field(default_factory=_version, repr=False)

    def to_json(self, version: str) -> dict[str, Any]:
        mask = REDACTOR.mask
        out = _common(self, {"uri": mask(self.uri), "name": mask(self.name)}, version)
        if self.size is not None and knows(version, "size"):
            out["size"] = self.size
        return out


@dataclass(slots=True)
class ResourceTemplate:
    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    icons: tuple[Icon, ...] = ()
    meta: dict[str, Any] | None = None
    redaction: int = field(default_factory=_version, repr=False)

    def to_json(self, version: str) -> dict[str, Any]:
        mask = REDACTOR.mask
        return _common(self, {"uriTemplate": mask(self.uri_template), "name": mask(self.name)}, version)


MAX_MASKED_BLOB = 1_000_000


def masked_blob(blob: bytes) -> bytes:
    """A blob that is really UTF-8 text (a custom resource's bytes) is masked like text; images and
    other binary data fail the decode at once and pass unchanged."""
    if len(blob) > MAX_MASKED_BLOB:
        return blob
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        return blob
    masked = REDACTOR.mask(text)
    return blob if masked == text else masked.encode("utf-8")


@dataclass(slots=True)
class Contents:
    """One item of a resources/read result: text or binary."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: bytes | None = None
    meta: dict[str, Any] | None = field(default=None)
    # The package's own static text (a view's HTML), not kernel data: it leaves the hub unmasked.
    verbatim: bool = False

    def masked_text(self) -> str:
        """The text as it may leave the hub (secrets masked)."""
        if self.verbatim:
            return self.text or ""
        return REDACTOR.mask(self.text) if self.text else ""

    def to_json(self, version: str) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri}
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.blob is not None:
            out["blob"] = base64.b64encode(masked_blob(self.blob)).decode("ascii")
        else:
            out["text"] = self.masked_text()
        if self.meta and knows(version, "meta"):
            out["_meta"] = self.meta if self.verbatim else REDACTOR.mask_obj(self.meta)
        return out


# == errors providers raise (the protocol maps them to each era's error codes) ==
class ResourceNotFound(LookupError):
    """No resource has this URI (the protocol maps it to the era's not-found error)."""

    def __init__(self, uri: str, reason: str | None = None):
        super().__init__(reason or f"Resource not found: {uri}")
        self.uri = uri


class InvalidResourceParams(ValueError):
    """The URI names a resource, but its parameters are wrong (-32602)."""


class ResourceReadError(RuntimeError):
    """Reading failed for a reason the client should see (a raising or hanging __repr__)."""
