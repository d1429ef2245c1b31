"""User-registered resources: ``@mcp_notebook.resource("scheme://path/{var}")``.

A function returning ``str`` gives text, ``bytes`` gives a base64 blob, a dict or list gives
JSON, and :class:`Contents` objects pass through. Template variables arrive as keyword
arguments. User functions run guarded (bounded in time) like any user code.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.models import Annotations, Contents, Icon, Resource, ResourceTemplate
from ..render import RenderTimeout, call_guarded, safe_str
from ..uri import UriTemplate, compile_template, is_template
from .base import InvalidResourceParams, Provider, ResourceNotFound, ResourceReadError

Completer = Callable[[str], Iterable[str]] | Iterable[str]


@dataclass(slots=True)
class Registration:
    """One registered resource or resource template."""

    uri: str
    fn: Callable[..., Any]
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    annotations: Annotations | None = None
    icons: tuple[Icon, ...] = ()
    meta: dict[str, Any] | None = None
    template: UriTemplate | None = None
    completers: dict[str, Completer] = field(default_factory=dict)
    timeout: float = 10.0


class CustomProvider(Provider):
    """Holds registrations; shared by every hub of the process (registrations outlive reloads)."""

    def __init__(self) -> None:
        self._by_uri: dict[str, Registration] = {}
        self._lock = threading.Lock()
        self.on_change: Callable[[], None] | None = None

    def register(self, reg: Registration) -> None:
        if reg.template is not None:
            params = inspect.signature(reg.fn).parameters
            takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
            missing = [v for v in reg.template.variables if v not in params and not takes_kwargs]
            if missing:
                raise TypeError(f"{reg.fn.__name__}() must accept the template variable(s) {missing} of {reg.uri!r}")
        with self._lock:
            self._by_uri[reg.uri] = reg
        if self.on_change is not None:
            self.on_change()

    def unregister(self, uri: str) -> bool:
        with self._lock:
            removed = self._by_uri.pop(uri, None) is not None
        if removed and self.on_change is not None:
            self.on_change()
        return removed

    def registrations(self) -> list[Registration]:
        with self._lock:
            return list(self._by_uri.values())

    def _find(self, uri: str) -> tuple[Registration, dict[str, str]] | None:
        with self._lock:
            exact = self._by_uri.get(uri)
            regs = list(self._by_uri.values())
        if exact is not None and exact.template is None:
            return exact, {}
        for reg in regs:
            if reg.template is not None:
                args = reg.template.match(uri)
                if args is not None:
                    return reg, args
        return None

    def owns(self, uri: str) -> bool:
        return self._find(uri) is not None

    def list_resources(self) -> list[Resource]:
        return [
            Resource(
                uri=r.uri,
                name=r.name,
                title=r.title,
                description=r.description,
                mime_type=r.mime_type,
                annotations=r.annotations,
                icons=r.icons,
                meta=r.meta,
            )
            for r in self.registrations()
            if r.template is None
        ]

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=r.uri,
                name=r.name,
                title=r.title,
                description=r.description,
                mime_type=r.mime_type,
                annotations=r.annotations,
                icons=r.icons,
                meta=r.meta,
            )
            for r in self.registrations()
            if r.template is not None
        ]

    def read(self, uri: str) -> list[Contents]:
        found = self._find(uri)
        if found is None:
            raise ResourceNotFound(uri)
        reg, args = found
        if reg.template is not None:
            unknown = set(args) - set(reg.template.variables)
            if unknown:
                raise InvalidResourceParams(f"unknown parameter(s) {sorted(unknown)} for {reg.uri}")
        try:  # converting the result may run user code too (str(), JSON default=str)
            key = (reg.fn, tuple(sorted(args.items())))  # a hanging call blocks only these arguments
            return call_guarded(lambda: to_contents(uri, reg.fn(**args), reg.mime_type), reg.timeout, key=key)
        except RenderTimeout as exc:
            raise ResourceReadError(f"resource function {reg.fn.__name__} did not finish: {exc}") from None
        except (ResourceNotFound, InvalidResourceParams):
            raise
        except LookupError as exc:
            raise ResourceNotFound(uri, f"{reg.fn.__name__}: {safe_str(exc, reg.timeout)}") from None
        except Exception as exc:
            message = safe_str(exc, reg.timeout)
            raise ResourceReadError(
                f"resource function {reg.fn.__name__} raised {type(exc).__name__}: {message}"
            ) from None

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        with self._lock:
            reg = self._by_uri.get(template)
        if reg is None or reg.template is None:
            return None
        completer = reg.completers.get(argument)
        if completer is None:
            return []

        def run() -> list[str]:  # user code: guarded like a read
            candidates = completer(value) if callable(completer) else completer
            return [c for c in map(str, candidates) if c.startswith(value)]

        try:
            return call_guarded(run, reg.timeout, key=(completer, argument))
        except Exception:
            return []

    def digest(self, uri: str) -> bytes | None:
        try:
            contents = self.read(uri)
        except Exception:
            return b"missing"
        h = hashlib.blake2b(digest_size=16)
        for c in contents:
            h.update(c.blob if c.blob is not None else (c.text or "").encode())
        return h.digest()


def to_contents(uri: str, value: Any, mime_type: str | None) -> list[Contents]:
    """Turn what a resource function returned into read contents."""
    if isinstance(value, Contents):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, Contents) for v in value):
        return value
    if isinstance(value, str):
        return [Contents(uri=uri, mime_type=mime_type or "text/plain", text=value)]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return [Contents(uri=uri, mime_type=mime_type or "application/octet-stream", blob=bytes(value))]
    if isinstance(value, (dict, list, tuple, int, float, bool)) or value is None:
        text = json.dumps(value, ensure_ascii=False, default=str)
        return [Contents(uri=uri, mime_type=mime_type or "application/json", text=text)]
    return [Contents(uri=uri, mime_type=mime_type or "text/plain", text=str(value))]


def make_registration(
    uri: str,
    fn: Callable[..., Any],
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    mime_type: str | None,
    annotations: Annotations | dict[str, Any] | None,
    icons: Iterable[Icon | dict[str, Any]] = (),
    meta: dict[str, Any] | None = None,
    complete: dict[str, Completer] | None = None,
    timeout: float = 10.0,
) -> Registration:
    """Validate decorator arguments into a Registration (clear errors for bad input)."""
    if not isinstance(uri, str) or ("://" not in uri and ":" not in uri):
        raise ValueError(f"resource URI must be absolute (scheme:...), got {uri!r}")
    if isinstance(annotations, dict):
        annotations = Annotations(
            audience=tuple(annotations.get("audience") or ()) or None,
            priority=annotations.get("priority"),
            last_modified=annotations.get("lastModified") or annotations.get("last_modified"),
        )
    icon_objs = tuple(
        i
        if isinstance(i, Icon)
        else Icon(src=i["src"], mime_type=i.get("mimeType"), sizes=tuple(i.get("sizes") or ()) or None)
        for i in icons
    )
    doc = inspect.getdoc(fn)
    return Registration(
        uri=uri,
        fn=fn,
        name=name or getattr(fn, "__name__", uri),
        title=title,
        description=description or (doc.splitlines()[0] if doc else None),
        mime_type=mime_type,
        annotations=annotations,
        icons=icon_objs,
        meta=meta,
        template=compile_template(uri) if is_template(uri) else None,
        completers=dict(complete or {}),
        timeout=timeout,
    )
