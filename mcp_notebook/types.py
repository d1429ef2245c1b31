"""The types every layer shares, at the bottom of the import graph.

Resource descriptors and contents (rendered per negotiated revision) and the errors providers
raise. Providers build these, the hub passes them on, the protocol encodes them; nothing here
imports from providers/, the hub or the protocol's request handling.

Plain slotted classes with a written ``__init__`` (a dataclass costs ~0.4 ms to create at import on
Python 3.13, issue #48); equal when of one class with equal fields, as a listing cache compares
them. They are built on the request path, so they stay cheap. Each
``to_json(version)`` emits only the fields that revision defines.

``to_json`` is also where text leaves the hub, so it is where secrets are masked (``redact.REDACTOR``:
credential shapes, the exact values the hub hides, its own token, literals assigned to secret
names), once for every provider. Descriptors remember the redactor's version they were built
under, so a listing cached before the hidden set grew compares unequal and is encoded again.
"""

from __future__ import annotations

import base64
from typing import Any

from .redact import REDACTOR
from .revisions import knows


def _fields_repr(obj: Any) -> str:
    """``Name(field=value, ...)`` over an object's slots, for logs and test failures."""
    return f"{type(obj).__name__}({', '.join(f'{n}={getattr(obj, n)!r}' for n in obj.__slots__)})"


class Annotations:
    __slots__ = ("audience", "last_modified", "priority")
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        audience: tuple[str, ...] | None = None,
        priority: float | None = None,
        last_modified: str | None = None,  # ISO 8601
    ) -> None:
        self.audience = audience
        self.priority = priority
        self.last_modified = last_modified

    def __eq__(self, other: object) -> bool:
        if type(other) is not Annotations:
            return NotImplemented
        return (self.audience, self.priority, self.last_modified) == (
            other.audience,
            other.priority,
            other.last_modified,
        )

    __repr__ = _fields_repr

    def to_json(self, version: str) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.audience:
            out["audience"] = list(self.audience)
        if self.priority is not None:
            out["priority"] = self.priority
        if self.last_modified and knows(version, "last_modified"):
            out["lastModified"] = self.last_modified
        return out or None


class Icon:
    __slots__ = ("mime_type", "sizes", "src")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, src: str, mime_type: str | None = None, sizes: tuple[str, ...] | None = None) -> None:
        self.src = src
        self.mime_type = mime_type
        self.sizes = sizes

    def __eq__(self, other: object) -> bool:
        if type(other) is not Icon:
            return NotImplemented
        return (self.src, self.mime_type, self.sizes) == (other.src, other.mime_type, other.sizes)

    __repr__ = _fields_repr

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"src": self.src}
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.sizes:
            out["sizes"] = list(self.sizes)
        return out


def _common_equal(a: Any, b: Any) -> bool:
    """The descriptive fields a resource and a template share, equal."""
    return (a.title, a.description, a.mime_type, a.annotations, a.icons, a.meta) == (
        b.title,
        b.description,
        b.mime_type,
        b.annotations,
        b.icons,
        b.meta,
    )


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


class Resource:
    __slots__ = (
        "annotations",
        "description",
        "icons",
        "meta",
        "mime_type",
        "name",
        "redaction",
        "size",
        "title",
        "uri",
    )
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        uri: str,
        name: str,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: Annotations | None = None,
        icons: tuple[Icon, ...] = (),
        meta: dict[str, Any] | None = None,
        redaction: int | None = None,  # the redactor's version it was built under (default: now)
    ) -> None:
        self.uri = uri
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.size = size
        self.annotations = annotations
        self.icons = icons
        self.meta = meta
        self.redaction = REDACTOR.version if redaction is None else redaction

    def __eq__(self, other: object) -> bool:
        if type(other) is not Resource:
            return NotImplemented
        return (
            self.uri == other.uri
            and self.name == other.name
            and self.redaction == other.redaction
            and self.size == other.size
            and _common_equal(self, other)
        )

    __repr__ = _fields_repr

    def to_json(self, version: str) -> dict[str, Any]:
        mask = REDACTOR.mask
        out = _common(self, {"uri": mask(self.uri), "name": mask(self.name)}, version)
        if self.size is not None and knows(version, "size"):
            out["size"] = self.size
        return out


class ResourceTemplate:
    __slots__ = (
        "annotations",
        "description",
        "icons",
        "meta",
        "mime_type",
        "name",
        "redaction",
        "title",
        "uri_template",
    )
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        uri_template: str,
        name: str,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Annotations | None = None,
        icons: tuple[Icon, ...] = (),
        meta: dict[str, Any] | None = None,
        redaction: int | None = None,  # the redactor's version it was built under (default: now)
    ) -> None:
        self.uri_template = uri_template
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.annotations = annotations
        self.icons = icons
        self.meta = meta
        self.redaction = REDACTOR.version if redaction is None else redaction

    def __eq__(self, other: object) -> bool:
        if type(other) is not ResourceTemplate:
            return NotImplemented
        return (
            self.uri_template == other.uri_template
            and self.name == other.name
            and self.redaction == other.redaction
            and _common_equal(self, other)
        )

    __repr__ = _fields_repr

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


class Contents:
    """One item of a resources/read result: text or binary."""

    __slots__ = ("blob", "meta", "mime_type", "text", "uri", "verbatim")
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        uri: str,
        mime_type: str | None = None,
        text: str | None = None,
        blob: bytes | None = None,
        meta: dict[str, Any] | None = None,
        # The package's own static text (a view's HTML), not kernel data: it leaves the hub unmasked.
        verbatim: bool = False,
    ) -> None:
        self.uri = uri
        self.mime_type = mime_type
        self.text = text
        self.blob = blob
        self.meta = meta
        self.verbatim = verbatim

    def __eq__(self, other: object) -> bool:
        if type(other) is not Contents:
            return NotImplemented
        return (self.uri, self.mime_type, self.text, self.blob, self.meta, self.verbatim) == (
            other.uri,
            other.mime_type,
            other.text,
            other.blob,
            other.meta,
            other.verbatim,
        )

    __repr__ = _fields_repr

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
