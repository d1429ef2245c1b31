"""Kernel variables as resources: ``nb://vars`` (index) and ``nb://vars/{name}`` (one value).

Change detection after each cell is O(number of names) with C-speed steps: the namespace's entry table (or
its names and value addresses), as raw bytes, against the previous cell's (nswatch.py); only names whose binding
changed are looked at in Python. In-place mutation of a watched variable: a cheap fingerprint, or the hub's digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, MutableMapping
from functools import lru_cache, partial
from importlib import import_module
from time import time as _time
from typing import Any, Generic, TypeVar

from ..guard import RenderTimeout, bounded_repr, call_guarded, callable_info, cheap_shape, safe_str, type_name
from ..postcell.nswatch import NamespaceWatch
from ..redact import REDACTOR, ExposureRules, NameFilter, mask_secrets
from ..types import Annotations, Contents, Resource, ResourceTemplate
from ..uri import compile_template
from . import base
from .base import (
    ChangeSet,
    Facts,
    InvalidResourceParams,
    Provider,
    ResourceNotFound,
    ResourceReadError,
    index_page,
    rank_completions,
)
from .optional import missing_package

PREFIX = "nb://vars"
INDEX_URI = "nb://vars"
VAR_TEMPLATE = "nb://vars/{name}"
_INDEX = compile_template("nb://vars{?offset,limit}")
_VAR = compile_template(VAR_TEMPLATE)
VAR_SCHEMA_TEMPLATE = "nb://vars/{name}/schema"
_VAR_SCHEMA = compile_template(VAR_SCHEMA_TEMPLATE)
# Values whose nb://vars/{name} read runs no user code (exact types: a subclass may override __repr__).
_INLINE_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray})
# Hashable, immutable scalars whose encoded read is cached while the value stays the same.
_CACHED_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})


class _Held:
    """A watched immutable scalar kept as the baseline of the next cell's check (by identity)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


_MISSING = object()


@lru_cache(maxsize=4096)
def _var_name(uri: str) -> str | None:
    """The name in ``nb://vars/{name}``, or None (cached: the inline-read check runs on every read)."""
    rest = uri[len(PREFIX) + 1 :] if uri.startswith(PREFIX + "/") else ""
    if rest.isidentifier() and rest.isascii():  # a plain Python name needs no template (no escapes)
        return rest
    params = _VAR.match(uri)
    return None if params is None else params["name"]


@lru_cache(maxsize=256)
def _is_index(uri: str) -> bool:
    if uri == INDEX_URI or uri.startswith(PREFIX + "/"):
        return uri == INDEX_URI
    return _INDEX.match(uri) is not None


_MASK_MARGIN = 512  # characters rendered past the cut, so secrets are masked before it
_JSON = "application/json"
_TYPES_KEPT = 1024  # types whose extensions are remembered (cleared when full: classes redefined per cell)
E = TypeVar("E")


class Serves:
    """The types an extension serves, told from the type alone (no call into the extension): exact types,
    libraries (the root module of the type or a base), a class attribute a base defines, or ``every``."""

    __slots__ = ("every", "libraries", "markers", "types")

    def __init__(
        self,
        types: frozenset[type] = frozenset(),
        libraries: frozenset[str] = frozenset(),
        markers: tuple[str, ...] = (),
        every: bool = False,
    ) -> None:
        self.types = types
        self.libraries = libraries
        self.markers = markers
        self.every = every

    def match(self, cls: type) -> bool:
        if self.every or cls in self.types:
            return True
        for base_cls in cls.__mro__ if self.libraries or self.markers else ():
            if (getattr(base_cls, "__module__", None) or "").partition(".")[0] in self.libraries:
                return True
            if any(m in base_cls.__dict__ for m in self.markers):  # the class's own dict: no user code
                return True
        return False


EVERY_TYPE = Serves(every=True)
STRUCTURED = Serves(  # what providers/structured.py reads: models, dataclasses, attrs, lists of them, TypedDicts
    frozenset({list, tuple, dict}), frozenset({"pydantic"}), ("__dataclass_fields__", "__attrs_attrs__")
)
_structured = partial(import_module, f"{__package__}.structured")  # imported at first use (Loading, seventh cut)


class ByType(Generic[E]):
    """Extensions of one kind, each registered with the types it serves; a value's type gets those
    that serve it (remembered per type), so reading an int calls no frame, engine or database code."""

    def __init__(self) -> None:
        self._registered: list[tuple[Serves, E]] = []
        self._of: dict[type, tuple[E, ...]] = {}

    def register(self, serves: Serves, extension: E) -> None:
        self._registered.append((serves, extension))
        self._of = {}

    def of(self, cls: type) -> tuple[E, ...]:
        try:
            found = self._of.get(cls)
        except Exception:  # a metaclass's own __hash__ or __eq__ failed: decide without remembering
            return tuple(ext for serves, ext in self._registered if serves.match(cls))
        if found is None:
            found = tuple(ext for serves, ext in self._registered if serves.match(cls))
            if len(self._of) >= _TYPES_KEPT:
                self._of = {}
            self._of[cls] = found
        return found


def var_uri(name: str) -> str:
    return f"{PREFIX}/{name}"


_now, _STAMP = base.now_stamp, base._STAMP  # _STAMP: [second, its stamp], now_stamp's cache


class VariablesProvider(base.ModifiedStamps, Provider):
    """Exposes the user's namespace, minus IPython internals, modules, hidden names and secrets."""

    uri_prefixes = (PREFIX,)

    list_is_pure = True  # listing reads names and types only: no user code, no live values
    index_uri = INDEX_URI

    def __init__(
        self,
        user_ns: MutableMapping[str, Any],
        hidden_ns: MutableMapping[str, Any],
        name_filter: Callable[[], NameFilter],
        limits: Any,
    ):
        self._ns = user_ns
        self._filter = name_filter
        self._limits = limits
        self.rules = ExposureRules(hidden_ns, name_filter)
        self.user_hidden = self.rules.user_hidden  # %mcp hide / show
        self.name_visible = self.rules.visible
        table = getattr(limits, "namespace_table_reads", True)  # below 1,000 names the listing is cheaper
        self._watch = NamespaceWatch(user_ns, table, table_from=1000)
        self.reads_table = lambda: self._watch.reads_table  # the post-cell hook copies the dict's table
        self._exposed: dict[str, type] = {}
        self._modified: dict[str, str] = {}
        self._fingerprints: dict[str, Any] = {}
        # Extensions, each registered with the types it serves (``rows.register(serves, fn)``):
        # fields(name, value) of an nb://vars index row (a model's kind and schema, a frame's page and schema URIs);
        self.rows: ByType[Callable[[str, Any], dict[str, Any]]] = ByType()
        self.rows.register(STRUCTURED, self._structured_row)
        # override(value) for values whose repr would run a query (a DuckDB relation's repr computes
        # its rows): a function giving the text shown instead (None: not theirs);
        self.reprs: ByType[Callable[[Any], Callable[[], str] | None]] = ByType()
        # fields(name) of one variable's read (lineage: the cell that set it, its history).
        self.reads: ByType[Callable[[str], dict[str, Any]]] = ByType()
        # Bumped (main thread) after every change to what list_resources() shows; readers take it first.
        self._list_version = 0
        self._listed: tuple[int, list[Resource]] | None = None
        self._names_cache: tuple[int, list[str]] | None = None
        # Told after every snapshot what the cell added, rebound, removed, changed in place (lineage).
        self.deltas: list[Callable[[base.Delta], None]] = []
        self.rebuild()

    # -- exposure -----------------------------------------------------------------------
    def rebuild(self) -> None:
        """Recompute everything from scratch (on load)."""
        stamp = _now()
        exposed = {}
        for name in self._watch.reset():
            value = self._ns.get(name)
            if self.rules.exposable(name, value):
                exposed[name] = type(value)
                self._modified.setdefault(name, stamp)
            else:
                self.rules.remember_hidden(name, value)
        self._exposed = exposed
        self._list_version += 1

    def is_exposed(self, name: str) -> bool:
        return name in self._exposed

    def exposed_names(self) -> list[str]:
        return list(self._exposed)

    def serves_none(self, serves: Serves) -> bool:
        """No exposed variable's type is one ``serves`` names (from types alone: no user code)."""
        return not any(map(serves.match, set(self._exposed.values())))

    def exposed_items(self) -> list[tuple[str, type]]:
        """(name, type) of every exposed variable, as of the last snapshot."""
        return list(self._exposed.items())

    def value(self, name: str) -> Any:
        """The live value of an exposed variable, or ResourceNotFound."""
        if name not in self._exposed:
            raise ResourceNotFound(var_uri(name))
        missing = object()
        value = self._ns.get(name, missing)
        if value is missing or not self.rules.exposable(name, value):
            raise ResourceNotFound(var_uri(name))
        return value

    # -- hot path -----------------------------------------------------------------------
    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        rebound, removed = self._watch.diff()
        changes = ChangeSet()
        delta = base.Delta()
        if rebound or removed:
            self._apply(rebound, removed, changes, delta)
        if watched:
            self._check_watched(watched, changes, delta)
        if changes.updated:  # exposure, types or modification stamps may differ: listings are stale
            self._list_version += 1
        for listener in self.deltas:
            try:
                listener(delta)  # lineage: O(changed names)
            except Exception:  # lineage must never cost the cell its notifications
                pass
        return changes

    def _structured_row(self, name: str, value: Any) -> dict[str, Any]:
        return _structured().index_fields(name, value, self._ns, f"{var_uri(name)}/schema")

    def _apply(self, rebound: list[str], removed: list[str], changes: ChangeSet, delta: base.Delta) -> None:
        # In-place updates are safe: readers on other threads copy with one C-level list()/dict().
        exposed = self._exposed
        second = int(_time())
        stamp = _STAMP[1] if _STAMP[0] == second else _now()  # now_stamp's cache, read here: no call a cell
        touched = False
        for name in removed:
            if exposed.pop(name, None) is not None:
                changes.list_changed = True
                changes.updated.add(var_uri(name))
                self._modified.pop(name, None)
                self._fingerprints.pop(name, None)
                delta.removed.append(name)
        rules = self.rules
        for name in rebound:
            if name[:1] == "_":  # IPython's _i, _iN, _ii... every cell: never exposable, never remembered as secret
                continue
            value = self._ns.get(name)
            if rules.exposable(name, value):
                if exposed.get(name) is not type(value):
                    changes.list_changed = True
                (delta.rebound if name in exposed else delta.added).append(name)
                exposed[name] = type(value)
                self._modified[name] = stamp
                changes.updated.add(f"{PREFIX}/{name}")  # var_uri, inlined
                touched = True
            else:
                rules.remember_hidden(name, value)
                if exposed.pop(name, None) is not None:
                    changes.list_changed = True
                    changes.updated.add(var_uri(name))
                    delta.removed.append(name)
        if touched or changes.list_changed:
            changes.updated.add(INDEX_URI)

    def _check_watched(self, watched: frozenset[str], changes: ChangeSet, delta: base.Delta) -> None:
        prefix = PREFIX + "/"
        if len(self._fingerprints) > len(watched):  # names no longer watched: let their baselines go
            for name in [n for n in self._fingerprints if prefix + n not in watched]:
                del self._fingerprints[name]
        for uri in watched:
            if uri == INDEX_URI:
                changes.maybe.add(uri)
                continue
            if not uri.startswith(prefix):
                continue
            name = uri[len(prefix) :]
            if name not in self._exposed:
                continue
            value = self._ns.get(name)
            if type(value) in _CACHED_SCALARS:
                # Immutable: unchanged while it is the very object seen last. The baseline holds it,
                # so its address cannot be reused by a new value the snapshot would then mistake for
                # it (``f = f * 2`` twice in a loop puts a new float at the old float's address).
                held = self._fingerprints.get(name)
                if uri not in changes.updated and not (type(held) is _Held and held.value is value):
                    changes.maybe.add(uri)  # another object: the exact digest decides
                self._fingerprints[name] = _Held(value)
                continue
            fingerprint = cheap_shape(value)
            if uri in changes.updated:  # rebound in this cell: its new shape is the baseline for the next one
                self._fingerprints[name] = fingerprint
                continue
            if self._fingerprints.get(name, fingerprint) != fingerprint:
                changes.updated.add(uri)
                changes.updated.add(INDEX_URI)
                self._modified[name] = _now()
                delta.in_place.append(name)
            else:
                changes.maybe.add(uri)
            self._fingerprints[name] = fingerprint

    def digest(self, uri: str) -> bytes | None:
        name = _var_name(uri)
        value = self._ns.get(name, _MISSING) if name is not None else _MISSING
        if type(value) in _CACHED_SCALARS and name in self._exposed:  # exposure as of the last snapshot
            # An immutable builtin scalar: its content is its value (and the masking in force), so
            # no rendering is needed (a cell rebinding 1,000 watched numbers costs microseconds).
            seed = f"{type(value).__name__}:{REDACTOR.version}:{len(value) if type(value) in (str, bytes) else 0}:"
            h = hashlib.blake2b(seed.encode(), digest_size=16)
            h.update(value if type(value) is bytes else str(value).encode("utf-8", "surrogatepass"))
            return h.digest()
        try:  # a variable's own content, without the lineage fields (they move when the digest moves)
            contents = [self._read_var(uri, name, False)] if _VAR.match(uri) else self.read(uri)
        except (ResourceNotFound, ResourceReadError, InvalidResourceParams):
            return b"missing"
        h = hashlib.blake2b(digest_size=16)
        for item in contents:
            h.update((item.text or "").encode("utf-8", "surrogatepass"))
        return h.digest()

    # -- listing ------------------------------------------------------------------------
    def owns(self, uri: str) -> bool:
        return uri == INDEX_URI or uri.startswith(PREFIX + "/") or uri.startswith(PREFIX + "?")

    def list_token(self) -> int:
        """Changes whenever list_resources() may answer differently (read it before listing)."""
        return self._list_version

    @staticmethod
    def uri_of(name: str) -> str:
        """The URI of variable ``name``."""
        return var_uri(name)

    # -- what tool-only clients are told (no user code) ---------------------------------
    def variable_name(self, uri: str) -> str | None:
        if not uri.startswith(PREFIX + "/"):
            return None
        return self.canonical(uri)[len(PREFIX) + 1 :].removesuffix("/schema") or None

    def facts(self, uri: str) -> Facts | None:
        name = self.variable_name(uri)
        return None if name is None else self.facts_of(name)

    def facts_of(self, name: str) -> Facts | None:
        """Type, cheap shape and identity of an exposed variable, or None (gone or hidden)."""
        try:
            value = self.value(name)
        except Exception:
            return None
        try:
            shape = cheap_shape(value)
        except Exception:
            shape = None
        return Facts(type(value).__name__, shape, id(value))

    def variable_names(self) -> frozenset[str]:
        return frozenset(self._exposed)

    def list_resources(self) -> list[Resource]:
        version = self._list_version
        listed = self._listed
        if listed is None or listed[0] != version:
            listed = (version, self._build_list())
            self._listed = listed
        return list(listed[1])

    def _build_list(self) -> list[Resource]:
        out = [
            Resource(
                uri=INDEX_URI,
                name="vars",
                title="Variables",
                description="Index of the kernel's variables: name, type, shape or length. Start here.",
                mime_type=_JSON,
                annotations=Annotations(audience=("assistant",), priority=0.9),
            )
        ]
        for name, cls in list(self._exposed.items()):
            tname = (
                cls.__qualname__
                if cls.__module__ == "builtins"
                else f"{cls.__module__.split('.')[0]}.{cls.__qualname__}"
            )
            out.append(
                Resource(
                    uri=var_uri(name),
                    name=name,
                    title=f"{name} ({tname})",
                    description=f"Variable {name} of type {tname}",
                    mime_type=_JSON,
                    annotations=Annotations(last_modified=self._modified.get(name), priority=0.5),
                )
            )
        return out

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=VAR_TEMPLATE,
                name="variable",
                title="Variable by name",
                description="One variable: type, shape or length and a bounded repr (a few thousand characters at "
                "most). For a table read nb://frames/{name}/schema instead.",
                mime_type=_JSON,
            ),
            ResourceTemplate(
                uri_template=VAR_SCHEMA_TEMPLATE,
                name="variable schema",
                title="JSON Schema of a structured variable",
                description="JSON Schema of a structured variable (pydantic model, dataclass, attrs, TypedDict-shaped, "
                "or a list of them): its fields before its values.",
                mime_type="application/schema+json",
            ),
        ]

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        if template not in (VAR_TEMPLATE, VAR_SCHEMA_TEMPLATE):
            return None
        if argument != "name":
            return []
        names = list(self._exposed)
        if template == VAR_SCHEMA_TEMPLATE:
            names = _structured().structured_names(names, self._ns)
        return rank_completions(names, value)

    # -- reading ------------------------------------------------------------------------
    def read(self, uri: str) -> list[Contents]:
        name = _var_name(uri)
        if name is not None:
            return [self._read_var(uri, name)]
        params = _INDEX.match(uri)
        if params is not None:
            return [self._read_index(uri, params)]
        params = _VAR_SCHEMA.match(uri)
        if params is not None:
            return [self._read_var_schema(uri, params["name"])]
        params = _VAR.match(uri)
        if params is None:
            raise ResourceNotFound(uri)
        return [self._read_var(uri, params["name"])]

    def read_token(self, uri: str) -> Hashable | None:
        """For a builtin immutable scalar: its value, exposure state and modification time."""
        name = _var_name(uri)
        if name is None:
            return None
        value = self._ns.get(name)
        if type(value) not in _CACHED_SCALARS:
            return None
        return (type(value), value, self._list_version, self._modified.get(name), name in self._exposed)

    def may_run_user_code(self, uri: str) -> bool:
        """The index (names, types, cheap shapes) and builtin scalars render without user code."""
        if _is_index(uri):
            return False
        name = _var_name(uri)
        if name is None:
            return _VAR_SCHEMA.match(uri) is not None
        return type(self._ns.get(name)) not in _INLINE_SCALARS

    def _read_index(self, uri: str, params: dict[str, str]) -> Contents:
        names = self._names_now()
        page = index_page(names, params, _INDEX, self._index_row, self._limits.max_read_chars - 400)
        doc: dict[str, Any] = {"count": len(names), "offset": page.offset, "variables": page.rows}
        if page.next:
            doc["truncated"] = True
            doc["next"] = page.next
        return Contents(uri=uri, mime_type=_JSON, text=json.dumps(doc, ensure_ascii=False))

    def _names_now(self) -> list[str]:
        """The exposed names as a list, copied once per listing version (not per index page)."""
        version = self._list_version
        cached = self._names_cache
        if cached is None or cached[0] != version:
            cached = (version, list(self._exposed))
            self._names_cache = cached
        return cached[1]

    def _index_row(self, name: str) -> dict[str, Any]:
        value = self._ns.get(name)
        row: dict[str, Any] = {"name": name, "type": type_name(value), "uri": var_uri(name)}
        shape = cheap_shape(value)
        if isinstance(shape, tuple):
            row["shape"] = list(shape)
        elif shape is not None:
            row["len"] = shape
        dtype = getattr(value, "dtype", None) if isinstance(shape, tuple) else None
        if dtype is not None:
            row["dtype"] = str(dtype)
        for extra in self.rows.of(type(value)):
            try:
                row.update(extra(name, value))
            except Exception:
                pass
        return row

    def _read_var(self, uri: str, name: str, extras: bool = True) -> Contents:
        value = self.value(name)
        limits = self._limits
        doc: dict[str, Any] = self._index_row(name)
        cap = max(200, limits.max_read_chars - 1000)
        shape = _structured().shape_of(value, name, self._ns) if STRUCTURED.match(type(value)) else None
        if shape is not None:
            return self._read_structured(uri, name, value, shape, doc, cap, extras)
        try:
            text, truncated = self._repr(value, cap + _MASK_MARGIN, limits.repr_timeout)
        except RenderTimeout as exc:
            raise ResourceReadError(f"repr({name}) did not finish: {exc}") from None
        except Exception as exc:  # a raising __repr__ is the object's problem, not the server's
            missing = missing_package(exc, f"reading {uri}")  # a lazy frame's schema needs narwhals
            if missing is not None:
                raise missing from None
            message = safe_str(exc, limits.repr_timeout)
            raise ResourceReadError(f"repr({name}) raised {type(exc).__name__}: {message}") from None
        text = mask_secrets(text)  # before the cut: a token at the cut must not leak its first characters
        if len(text) > cap:
            text, truncated = text[:cap], True
        doc["repr"] = text
        if truncated:
            doc["truncated"] = True
        if callable(value) and not isinstance(value, type):
            doc.update(callable_info(value, limits.repr_timeout))
        doc["modified"] = self._modified.get(name)
        self._add_extras(name, type(value), doc, extras)
        return Contents(uri=uri, mime_type=_JSON, text=json.dumps(doc, ensure_ascii=False, default=str))

    def _read_structured(
        self, uri: str, name: str, value: Any, shape: Any, doc: dict[str, Any], cap: int, extras: bool
    ) -> Contents:
        """A model/dataclass/attrs/TypedDict-shaped value as bounded, masked JSON (providers/structured.py)."""
        looks_secret = self._filter().looks_secret
        doc.update(_structured().read_document(name, value, shape, cap, self._limits.repr_timeout, looks_secret))
        doc["schema"] = f"{var_uri(name)}/schema"
        doc["modified"] = self._modified.get(name)
        self._add_extras(name, type(value), doc, extras)
        return Contents(uri=uri, mime_type=_JSON, text=json.dumps(doc, ensure_ascii=False, default=str))

    def _add_extras(self, name: str, cls: type, doc: dict[str, Any], extras: bool) -> None:
        for extra in self.reads.of(cls) if extras else ():
            try:
                doc.update(extra(name))
            except Exception:
                pass

    def _read_var_schema(self, uri: str, name: str) -> Contents:
        looks_secret = self._filter().looks_secret
        return _structured().read_schema(uri, name, self.value(name), self._ns, self._limits.repr_timeout, looks_secret)

    def _repr(self, value: Any, max_chars: int, timeout: float) -> tuple[str, bool]:
        for override in self.reprs.of(type(value)):
            render = override(value)
            if render is not None:
                text = call_guarded(render, timeout)
                return text[:max_chars], len(text) > max_chars
        return bounded_repr(value, max_chars, timeout)

    # -- hide/show ----------------------------------------------------------------------
    def set_hidden(self, name: str, hidden: bool) -> None:
        if hidden:
            self.user_hidden.add(name)
        else:
            self.user_hidden.discard(name)
        # Only this name, and no new baseline: %mcp hide runs inside a cell, and re-reading the namespace
        # here would hide that cell's other changes from the snapshot after it.
        missing = object()
        value = self._ns.get(name, missing)
        if hidden or value is missing or not self.rules.exposable(name, value):
            self._exposed.pop(name, None)
            if value is not missing:
                self.rules.remember_hidden(name, value)
        elif self._watch.seen(name):  # a name new in this cell is exposed (and announced) by the next snapshot
            self._exposed[name] = type(value)
            self._modified.setdefault(name, _now())
        self._list_version += 1
