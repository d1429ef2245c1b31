"""User-registered resources: ``@mcp_notebook.resource("scheme://path/{var}")``.

A function returning ``str`` gives text, ``bytes`` gives a base64 blob, a dict or list gives
JSON, a pydantic model, dataclass or attrs instance (or a list of them) gives JSON with its
schema at ``nb://schemas/{name}``, and :class:`Contents` objects pass through. Template
variables arrive as keyword arguments, validated by pydantic when the function is typed
(``providers/typed.py``). User functions run guarded (bounded in time) like any user code.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..guard import RenderTimeout, call_guarded, safe_str
from ..types import Annotations, Contents, Icon, Resource, ResourceTemplate
from ..uri import UriTemplate, compile_template, is_template
from .base import InvalidResourceParams, Provider, ResourceNotFound, ResourceReadError

if TYPE_CHECKING:
    from . import typed

Completer = Callable[[str], Iterable[str]] | Iterable[str]
SCHEMA_PREFIX = "nb://schemas/"
SCHEMA_TEMPLATE = "nb://schemas/{name}"
_SCHEMA = compile_template(SCHEMA_TEMPLATE)
META_SCHEMA = "mcp-notebook/schema"


def schema_uri(name: str) -> str:
    """Where the JSON Schema of what resource function ``name`` returns is read."""
    return SCHEMA_PREFIX + quote(name, safe="")


class Registration:
    """One registered resource or resource template."""

    __slots__ = (
        "annotations",
        "completers",
        "description",
        "fn",
        "icons",
        "meta",
        "mime_type",
        "name",
        "returned",
        "template",
        "timeout",
        "title",
        "typed",
        "uri",
    )

    def __init__(
        self,
        uri: str,
        fn: Callable[..., Any],
        name: str,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Annotations | None = None,
        icons: tuple[Icon, ...] = (),
        meta: dict[str, Any] | None = None,
        template: UriTemplate | None = None,
        completers: dict[str, Completer] | None = None,
        timeout: float = 10.0,
        typed: typed.TypedSignature | None = None,  # set when the function's hints are used
    ) -> None:
        self.uri = uri
        self.fn = fn
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.annotations = annotations
        self.icons = icons
        self.meta = meta
        self.template = template
        self.completers = {} if completers is None else completers
        self.timeout = timeout
        self.typed = typed
        self.returned: tuple[type, bool] | None = None  # structured class last returned, and whether a list

    def __repr__(self) -> str:
        return f"Registration({self.uri!r}, {getattr(self.fn, '__name__', self.fn)!r})"

    def described(self) -> dict[str, Any]:
        """The descriptor fields a listed resource or template of this registration carries."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mime_type": self.mime_type,
            "annotations": self.annotations,
            "icons": self.icons,
            "meta": self.meta,
        }


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
            required = [v for v in reg.template.optional if v in params and params[v].default is params[v].empty]
            if required:
                raise TypeError(
                    f"{reg.fn.__name__}() needs a default for {required}: a URI of {reg.uri!r} may leave "
                    f"{'it' if len(required) == 1 else 'them'} out (query parameters and {{/segments}} are optional)"
                )
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

    def canonical(self, uri: str) -> str:
        """A user's URIs are watched as they are: a query may name another resource."""
        return uri

    def owns(self, uri: str) -> bool:
        return self._find(uri) is not None or (uri.startswith(SCHEMA_PREFIX) and _SCHEMA.match(uri) is not None)

    def list_resources(self) -> list[Resource]:
        return [Resource(uri=r.uri, **r.described()) for r in self.registrations() if r.template is None] + [
            Resource(
                uri=schema_uri(r.name),
                name=f"{r.name} schema",
                title=f"JSON Schema of what {r.name} returns",
                mime_type="application/schema+json",
            )
            for r in self.registrations()
            if r.typed is not None and r.typed.returns is not None
        ]

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(uri_template=r.uri, **r.described())
            for r in self.registrations()
            if r.template is not None
        ] + (
            [
                ResourceTemplate(
                    uri_template=SCHEMA_TEMPLATE,
                    name="resource schema",
                    title="JSON Schema of a resource function's result",
                    description="JSON Schema of the model/dataclass (or list of them) a registered resource returns.",
                    mime_type="application/schema+json",
                )
            ]
            if self._by_uri
            else []
        )

    def read(self, uri: str) -> list[Contents]:
        found = self._find(uri)
        if found is None:
            schema_args = _SCHEMA.match(uri) if uri.startswith(SCHEMA_PREFIX) else None
            if schema_args is not None:
                return [self._read_schema(uri, schema_args["name"])]
            raise ResourceNotFound(uri)
        reg, args = found
        if reg.template is not None:
            unknown = set(args) - set(reg.template.variables)
            if unknown:
                raise InvalidResourceParams(f"unknown parameter(s) {sorted(unknown)} for {reg.uri}")

        def call() -> list[Contents]:
            kwargs = reg.typed.validate(args, reg.fn.__name__) if reg.typed is not None else args
            return to_contents(uri, reg.fn(**kwargs), reg.mime_type, reg)

        try:  # validators and converting the result may run user code too (str(), JSON default=str)
            key = (reg.fn, tuple(sorted(args.items())))  # a hanging call blocks only these arguments
            return call_guarded(call, reg.timeout, key=key)
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
        if reg is None and template == SCHEMA_TEMPLATE:
            if argument != "name":
                return []
            names = [r.name for r in self.registrations() if r.returned or (r.typed and r.typed.returns is not None)]
            return [n for n in names if n.startswith(value)]
        if reg is None or reg.template is None:
            return None
        completer = reg.completers.get(argument)
        if completer is None:
            choices = reg.typed.completions(argument) if reg.typed is not None else None
            return [c for c in choices if c.startswith(value)] if choices else []

        def run() -> list[str]:  # user code: guarded like a read
            candidates = completer(value) if callable(completer) else completer
            return [c for c in map(str, candidates) if c.startswith(value)]

        try:
            return call_guarded(run, reg.timeout, key=(completer, argument))
        except Exception:
            return []

    def _read_schema(self, uri: str, name: str) -> Contents:
        from . import structured

        reg = next((r for r in self.registrations() if r.name == name), None)
        if reg is None:
            raise ResourceNotFound(uri, f"no registered resource named {name!r}")
        try:
            doc = call_guarded(lambda: structured.mask_schema(_read_schema_doc(reg), lambda _: False), reg.timeout)
        except ResourceNotFound:
            raise
        except Exception as exc:
            raise ResourceReadError(f"no JSON Schema for {name}: {type(exc).__name__}: {safe_str(exc, 1.0)}") from None
        return Contents(uri=uri, mime_type="application/schema+json", text=json.dumps(doc, ensure_ascii=False))

    def digest(self, uri: str) -> bytes | None:
        try:
            contents = self.read(uri)
        except Exception:
            return b"missing"
        h = hashlib.blake2b(digest_size=16)
        for c in contents:
            h.update(c.blob if c.blob is not None else (c.text or "").encode())
        return h.digest()


def to_contents(uri: str, value: Any, mime_type: str | None, reg: Registration | None = None) -> list[Contents]:
    """Turn what a resource function returned into read contents."""
    if isinstance(value, Contents):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, Contents) for v in value):
        return value
    kind_class = _structured_class(value)
    if kind_class is not None:  # a model, dataclass or attrs instance, or a list of one of them
        from . import structured  # (imported at the first structured value: "Loading, seventh cut")

        text = json.dumps(structured.to_jsonable(value), ensure_ascii=False)
        meta = None
        if reg is not None:
            reg.returned = kind_class
            meta = {META_SCHEMA: schema_uri(reg.name)}
        return [Contents(uri=uri, mime_type=mime_type or "application/json", text=text, meta=meta)]
    if isinstance(value, str):
        return [Contents(uri=uri, mime_type=mime_type or "text/plain", text=value)]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return [Contents(uri=uri, mime_type=mime_type or "application/octet-stream", blob=bytes(value))]
    if isinstance(value, (dict, list, tuple, int, float, bool)) or value is None:
        text = json.dumps(value, ensure_ascii=False, default=_json_default)
        return [Contents(uri=uri, mime_type=mime_type or "application/json", text=text)]
    return [Contents(uri=uri, mime_type=mime_type or "text/plain", text=str(value))]


def _json_default(obj: Any) -> Any:
    """Models, dataclasses and attrs instances nested in a returned dict/list as JSON; others as str()."""
    from . import structured

    if structured.value_kind(obj) is not None:
        return structured.to_jsonable(obj)
    return str(obj)


def _structured_class(value: Any) -> tuple[type, bool] | None:
    from . import structured

    if structured.value_kind(value) is not None:
        return type(value), False
    item = structured.list_item_class(value)
    return (item, True) if item is not None else None


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
    template = compile_template(uri) if is_template(uri) else None
    variables = template.variables if template is not None else ()
    from . import typed  # with the first registration: not paid by %load_ext

    signature = typed.build(fn, variables) if typed.wants_typing(fn, variables) else None
    summary = description or (doc.splitlines()[0] if doc else None)
    reg_name = name or getattr(fn, "__name__", uri)
    if signature is not None:
        summary = typed.describe(summary, signature)
        if signature.returns is not None:
            meta = {**(meta or {}), META_SCHEMA: schema_uri(reg_name)}
            summary = (summary + "\n\n" if summary else "") + f"Returns JSON; its JSON Schema: {schema_uri(reg_name)}"
    return Registration(
        uri=uri,
        fn=fn,
        name=reg_name,
        title=title,
        description=summary,
        mime_type=mime_type if mime_type or signature is None or signature.returns is None else "application/json",
        annotations=annotations,
        icons=icon_objs,
        meta=meta,
        template=template,
        completers=dict(complete or {}),
        timeout=timeout,
        typed=signature,
    )


def _read_schema_doc(reg: Registration) -> dict[str, Any]:
    from . import structured

    if reg.typed is not None and reg.typed.returns is not None:
        return structured.schema_for_annotation(reg.typed.returns)
    if reg.returned is not None:
        cls, many = reg.returned
        return structured.schema_for_class(cls, many=many)
    raise ResourceNotFound(
        schema_uri(reg.name), f"{reg.name} has no return annotation and has not returned a model yet"
    )


# The user's registrations: one set per process, outliving hubs (a decorator may run before
# %load_ext, or across %reload_ext); every hub serves it.
CUSTOM = CustomProvider()
