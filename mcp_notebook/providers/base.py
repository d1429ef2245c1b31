"""What every resource provider offers the hub (the errors a read can raise live in ``mcp_notebook.types``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from ..types import Contents, InvalidResourceParams, Resource, ResourceNotFound, ResourceReadError, ResourceTemplate
from ..uri import UriTemplate

__all__ = [
    "ChangeSet",
    "Delta",
    "Facts",
    "IndexPage",
    "InvalidResourceParams",
    "LazyProvider",
    "Provider",
    "ResourceNotFound",
    "ResourceReadError",
    "index_page",
    "int_param",
]

T = TypeVar("T")


def int_param(params: dict[str, str], key: str, default: int) -> int:
    """A non-negative whole-number query parameter, or InvalidResourceParams saying what is wrong."""
    raw = params.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidResourceParams(f"{key} must be a whole number, got {raw!r}") from None
    if value < 0:
        raise InvalidResourceParams(f"{key} must not be negative, got {value}")
    return value


class IndexPage:
    """One page of a JSON index (nb://vars, nb://cells)."""

    __slots__ = ("cut_by_size", "next", "offset", "rows")

    def __init__(self, rows: list[dict[str, Any]], offset: int, next: str | None, cut_by_size: bool) -> None:
        self.rows = rows
        self.offset = offset
        self.next = next  # URI of the following page, when there is one
        self.cut_by_size = cut_by_size  # fewer rows than asked for, to stay under the read budget


def index_page(
    items: Sequence[T],
    params: dict[str, str],
    index: UriTemplate,
    row: Callable[[T], dict[str, Any]],
    budget: int,
    default_limit: int = 1000,
) -> IndexPage:
    """Rows ``offset`` to ``offset+limit`` of ``items``, stopping before the JSON exceeds ``budget``."""
    unknown = set(params) - {"offset", "limit"}
    if unknown:
        base = index.template.split("{")[0]
        raise InvalidResourceParams(f"unknown parameter(s) {sorted(unknown)} for {base}; use offset, limit")
    offset = int_param(params, "offset", 0)
    limit = int_param(params, "limit", default_limit)
    if limit < 1:
        raise InvalidResourceParams("limit must be at least 1")
    rows: list[dict[str, Any]] = []
    used = 0
    for item in items[offset : offset + limit]:
        rendered = row(item)
        used += len(json.dumps(rendered, ensure_ascii=False, default=str)) + 2  # and the ", " joining rows
        if used > budget and rows:
            break
        rows.append(rendered)
    end = offset + len(rows)
    more = end < len(items)
    return IndexPage(
        rows=rows,
        offset=offset,
        next=index.expand({"offset": end, "limit": limit}) if more else None,
        cut_by_size=end < min(len(items), offset + limit),
    )


class Facts:
    """What can be told of a value without running user code: its type, len/shape, and identity
    (a value: equal and hashed by the three)."""

    __slots__ = ("ident", "shape", "type")

    def __init__(self, type: str, shape: tuple | int | None, ident: int) -> None:
        self.type = type
        self.shape = shape
        self.ident = ident

    def __eq__(self, other: object) -> bool:
        if type(other) is not Facts:
            return NotImplemented
        return self.ident == other.ident and self.type == other.type and self.shape == other.shape

    def __hash__(self) -> int:
        return hash((self.type, self.shape, self.ident))

    def __repr__(self) -> str:
        return f"Facts({self.type!r}, {self.shape!r}, {self.ident!r})"

    def text(self) -> str:
        return f"{self.type} {shape_text(self.shape)}".strip()


def shape_text(shape: tuple | int | None) -> str:
    if shape is None:
        return ""
    if isinstance(shape, int):
        return f"len {shape}"
    return f"shape {tuple(shape)}"


_STAMP: list = [None, ""]  # (whole second, its ISO 8601 text): formatted once a second at most


def now_stamp() -> str:
    """Now, to the second, as ISO 8601 UTC (``...Z``): the modification stamp of a variable."""
    second = int(time.time())
    if _STAMP[0] != second:
        text = datetime.fromtimestamp(second, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        _STAMP[:] = [second, text]
    return _STAMP[1]


class ModifiedStamps:
    """Mixed into a provider that keeps when each variable last changed (``_modified``: name -> ISO
    8601, shown in its reads and as lastModified) beside a listing version that moves with it."""

    _modified: dict[str, str]
    _exposed: dict[str, type]
    _list_version: int

    def changed_in_place(self, name: str) -> bool:
        """An in-place change the exact check found: ``modified`` moves as for a rebinding."""
        if name not in self._exposed:
            return False
        self._modified[name] = now_stamp()
        self._list_version += 1
        return True


class ChangeSet:
    """What one provider saw change during a cell execution (computed in O(names)).

    A plain slotted class, not a dataclass: several are made after every cell, and a dataclass
    costs ``%load_ext`` its generated methods' compilation (docs/DESIGN.md, "Loading, fourth cut")."""

    __slots__ = ("list_changed", "maybe", "updated")

    def __init__(self, list_changed: bool = False, updated: set[str] | None = None, maybe: set[str] | None = None):
        self.list_changed = list_changed
        self.updated: set[str] = set() if updated is None else updated  # URIs known to have changed
        self.maybe: set[str] = set() if maybe is None else maybe  # watched URIs that need an exact check

    def __repr__(self) -> str:
        return f"ChangeSet(list_changed={self.list_changed!r}, updated={self.updated!r}, maybe={self.maybe!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChangeSet):
            return NotImplemented
        return (self.list_changed, self.updated, self.maybe) == (other.list_changed, other.updated, other.maybe)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was


class _Unchanged(ChangeSet):
    """What a provider that saw nothing change answers: one shared object that refuses changes, so
    the post-cell hook makes and merges no set for it (docs/DESIGN.md, "The post-cell hook, fourth cut")."""

    __slots__ = ()

    def __init__(self, list_changed: bool = False) -> None:
        object.__setattr__(self, "list_changed", list_changed)
        object.__setattr__(self, "updated", frozenset())
        object.__setattr__(self, "maybe", frozenset())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("NO_CHANGE is shared: return a new ChangeSet to report a change")

    def __repr__(self) -> str:
        return "LIST_CHANGED_ONLY" if self.list_changed else "NO_CHANGE"


NO_CHANGE: ChangeSet = _Unchanged()
LIST_CHANGED_ONLY: ChangeSet = _Unchanged(True)  # the listing changed, nothing else: shared as NO_CHANGE (issue #48)


class Delta:
    """What one post-cell snapshot saw among exposed names (read by the lineage provider); a plain
    slotted class for the same reason as ChangeSet."""

    __slots__ = ("added", "in_place", "rebound", "removed")

    def __init__(self) -> None:
        self.added: list[str] = []
        self.rebound: list[str] = []
        self.removed: list[str] = []  # deleted, or no longer exposed
        self.in_place: list[str] = []  # a watched value whose len/shape moved, same binding

    def __repr__(self) -> str:
        return f"Delta(added={self.added!r}, rebound={self.rebound!r}, removed={self.removed!r}, in_place={self.in_place!r})"


class Provider:
    """A family of resources. Subclasses override what they support."""

    # True when listing reads names and types only: no user code, no live value (answered on the loop).
    list_is_pure = False
    # True for the MCP Apps views: listed only to clients that offer the Apps extension.
    apps_only = False
    # What every URI it may own begins with ("": any URI, ``owns`` decides): a URI that begins with
    # none of them never calls into the provider (resources.Resources.owner).
    uri_prefixes: tuple[str, ...] = ("",)

    def owns(self, uri: str) -> bool:
        raise NotImplementedError

    def list_token(self) -> Hashable | None:
        """A cheap token that changes whenever ``list_resources()`` may answer differently (read it
        before listing), or None (the default): the listing is compared item by item instead."""
        return None

    def list_resources(self) -> list[Resource]:
        return []

    def list_templates(self) -> list[ResourceTemplate]:
        return []

    def read(self, uri: str) -> list[Contents]:
        """Contents of ``uri``; raise ResourceNotFound when it does not exist."""
        raise ResourceNotFound(uri)

    def read_token(self, uri: str) -> Hashable | None:
        """A cheap token that changes whenever ``read(uri)`` would answer differently, or None
        (the default): the read is not cached. Must not run user code."""
        return None

    def may_run_user_code(self, uri: str) -> bool:
        """Whether reading ``uri`` may call into user code (a repr, a resource function, an engine).

        Must be cheap and must not itself run user code (decide from types, not values). A False
        answer lets the transport read on its own loop instead of the worker pool; when unsure, True.
        """
        return True

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        """Completion values for one template argument; None when the template is not ours."""
        return None

    # False: ``snapshot`` reports nothing (and keeps no state) while nothing is watched, so the hub
    # does not call it then (issue #48: one call a cell less for each such provider).
    snapshot_unwatched = True

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        """Called on the kernel's main thread after every cell; must cost O(names). ``NO_CHANGE``
        (shared, never modified) when nothing changed."""
        return NO_CHANGE

    def digest(self, uri: str) -> bytes | None:
        """An exact fingerprint of a watched resource (runs off the main thread)."""
        return None

    def watching(self, uri: str, watched: bool) -> None:
        """Told when ``uri`` gains its first watcher (True) or loses its last (False). A provider
        whose changes arrive from elsewhere (another process) subscribes there; others ignore it."""

    def watched_now(self, uris: list[str]) -> None:
        """After ``watching(uri, True)`` for each of ``uris`` (one read, or a listen's whole set),
        before the request is answered: a provider whose watches take effect elsewhere waits here,
        bounded, until they do (so a change made right after the answer is not missed)."""

    # -- what tool-only clients are told of the values behind URIs (no user code) ------------
    def canonical(self, uri: str) -> str:
        """The URI one watch of ``uri`` is kept under: pages and formats of a resource share one
        (its query and fragment dropped)."""
        return uri.split("?", 1)[0].split("#", 1)[0]

    def variable_name(self, uri: str) -> str | None:
        """The namespace name ``uri`` is about (whether or not it still exists), or None."""
        return None

    def facts(self, uri: str) -> Facts | None:
        """Cheap facts of the value behind ``uri``, or None (not a value, gone, or hidden)."""
        return None

    def variable_names(self) -> frozenset[str] | None:
        """The exposed namespace names, from the one provider that holds the namespace; else None."""
        return None

    def changed_in_place(self, name: str) -> bool:
        """The exact check found namespace name ``name``'s value changed in place (no rebinding,
        ``d['k'] += 1``): move what says when it changed. True when that alters a rendering."""
        return False


class LazyProvider(Provider):
    """A provider whose room is imported and built at its first use, not when the hub loads.

    ``build`` makes the real provider; until a URI under ``uri_prefixes`` is routed to it (or a
    listing, a template list or a completion asks every provider), nothing of it is imported and
    the post-cell hook skips it: a provider not built yet has nothing watched and nothing to
    compare. The first use pays the import (docs/DESIGN.md, "Loading, fourth cut")."""

    def __init__(
        self,
        uri_prefixes: tuple[str, ...],
        build: Callable[[], Provider],
        list_is_pure: bool = False,
        lists_nothing: Callable[[], bool] | None = None,
    ):
        self.uri_prefixes = uri_prefixes
        self.list_is_pure = list_is_pure
        self._build = build
        # True when the provider, built, would list no resource (no value of its kinds): a listing
        # before it is built then answers [] without importing it
        self._lists_nothing = lists_nothing
        self._real: Provider | None = None
        self._lock = threading.Lock()
        # Told the real provider once it is built (the hub then calls its snapshot after each cell;
        # before, the post-cell hook does not call this one at all): see when_built
        self._on_built: list[Callable[[Provider], None]] = []

    @property
    def built(self) -> bool:
        return self._real is not None

    def real(self) -> Provider:
        """The provider itself, built now if it was not (once, whichever thread asks first)."""
        real = self._real
        if real is None:
            with self._lock:
                if self._real is None:
                    self._real = self._build()
                    for callback in self._on_built:
                        callback(self._real)
                real = self._real
        return real

    def when_built(self, callback: Callable[[Provider], None]) -> None:
        """``callback(real provider)`` once it is built (whichever thread builds it), or now if it
        is: exactly once either way (the build and this check hold the same lock)."""
        with self._lock:
            if self._real is None:
                self._on_built.append(callback)
                return
            real = self._real
        callback(real)

    def owns(self, uri: str) -> bool:
        return self.real().owns(uri)

    def _unbuilt_and_empty(self) -> bool:
        return self._real is None and self._lists_nothing is not None and self._lists_nothing()

    def list_token(self) -> Hashable | None:
        return None if self._unbuilt_and_empty() else self.real().list_token()

    def list_resources(self) -> list[Resource]:
        return [] if self._unbuilt_and_empty() else self.real().list_resources()

    def list_templates(self) -> list[ResourceTemplate]:
        return self.real().list_templates()

    def read(self, uri: str) -> list[Contents]:
        return self.real().read(uri)

    def read_token(self, uri: str) -> Hashable | None:
        return self.real().read_token(uri)

    def may_run_user_code(self, uri: str) -> bool:
        return self.real().may_run_user_code(uri)

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        return self.real().complete(template, argument, value, context)

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        real = self._real
        return NO_CHANGE if real is None else real.snapshot(watched)

    def digest(self, uri: str) -> bytes | None:
        return self.real().digest(uri)

    def watching(self, uri: str, watched: bool) -> None:
        self.real().watching(uri, watched)

    def watched_now(self, uris: list[str]) -> None:
        self.real().watched_now(uris)

    def canonical(self, uri: str) -> str:
        return self.real().canonical(uri)

    def variable_name(self, uri: str) -> str | None:
        return self.real().variable_name(uri)

    def facts(self, uri: str) -> Facts | None:
        return self.real().facts(uri)

    def variable_names(self) -> frozenset[str] | None:
        real = self._real
        return None if real is None else real.variable_names()

    def changed_in_place(self, name: str) -> bool:
        real = self._real
        return False if real is None else real.changed_in_place(name)


def rank_completions(candidates: list[str], prefix: str) -> list[str]:
    """Prefix matches first (case-sensitive, then -insensitive), then substring matches."""
    low = prefix.lower()
    first = [c for c in candidates if c.startswith(prefix)]
    seen = set(first)
    second = [c for c in candidates if c not in seen and c.lower().startswith(low)]
    seen.update(second)
    third = [c for c in candidates if c not in seen and low in c.lower()]
    return first + second + third
