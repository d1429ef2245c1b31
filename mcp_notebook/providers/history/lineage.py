"""Where every value came from: what each executed cell added, rebound, changed in place and removed,
and each variable's recent history (``nb://lineage``, ``nb://lineage/vars/{name}``; fields in
``nb://cells/{seq}`` and ``nb://vars/{name}``).

Recorded from what the post-cell hook already computes (the variables provider's ``Delta``), plus
cheap facts (type, len/shape, identity) of the changed names only: O(changed names), nothing run
in the kernel, no value kept. In-place edits are seen for watched values (len/shape moved, or the
exact digest on the hub's worker) and, when their len/shape or type moves, for names the cell's
source mentions; an edit that keeps len/shape of an unwatched value is not seen. Memory is bounded
whatever the session length: the last ``max_cells`` cells, ``MAX_CELL_CHANGES`` detailed changes
per cell, ``MAX_VARS`` variables with their last ``MAX_EVENTS`` changes each.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, MutableMapping
from functools import partial
from operator import itemgetter
from typing import Any

from ...capture import CellCapture, CellRecord
from ...guard import cheap_shape
from ...lazy_re import LazyPatterns
from ...types import Annotations, Contents, Resource, ResourceTemplate
from ...uri import compile_template
from ..base import Delta, Provider, ResourceNotFound, index_page, rank_completions
from ..cells import cell_uri
from ..variables import VariablesProvider, var_uri

INDEX_URI = "nb://lineage"
VAR_TEMPLATE = "nb://lineage/vars/{name}"
_INDEX = compile_template("nb://lineage{?offset,limit}")
_VAR = compile_template(VAR_TEMPLATE)


def history_uri(name: str) -> str:
    """``nb://lineage/vars/{name}``; a plain Python name needs no escape (nor the template)."""
    if name.isidentifier() and name.isascii():
        return VAR_TEMPLATE.replace("{name}", name)
    return _VAR.expand({"name": name})


_JSON = "application/json"
ADDED, REBOUND, IN_PLACE, REMOVED = "added", "rebound", "changed in place", "removed"
KINDS = (ADDED, REBOUND, IN_PLACE, REMOVED)
MAX_VARS = 5_000  # variables with a history (least recently changed go first)
MAX_EVENTS = 8  # changes kept per variable
RECENT = 3  # of them, shown in nb://vars/{name}
MAX_CELL_CHANGES = 200  # changes kept in detail per cell (the rest are counted)
MAX_MENTIONED = 50  # names a cell's source mentions, kept per cell
MAX_PENDING = 64  # cells recorded and not settled yet (settled on the next read, or at this many)
MAX_ROW_NAMES = 20  # names per kind in a nb://lineage row
MAX_CELL_DOC = 30  # changes per kind in nb://cells/{seq} (a cell read stays within its budget)
SCAN_CHARS = 100_000  # of a cell's source, looked at for the names it mentions
_MISSING = object()
_NO_SHAPE = frozenset({int, float, complex, bool, type(None)})  # cheap_shape says None for these
_IDENT = LazyPatterns(ident=r"[^\W\d]\w*")  # at the first cell's end, not at import
_IMMUTABLE = frozenset({"int", "float", "complex", "str", "bytes", "bool", "NoneType", "tuple", "frozenset"})
NOTE = (
    "In-place edits are seen for watched values (subscribed, or read with read_resource) and, when the "
    "len/shape or type moves, for names the cell's source mentions (a change made elsewhere since the last "
    "record goes to the first cell that mentions the name); other in-place edits are not seen."
)


def _key(kind: str) -> str:
    """The JSON field of a kind of change ("changed in place" -> "changed_in_place")."""
    return kind.replace(" ", "_")


class Seen(tuple):
    """Cheap facts of a value: type name, len/shape, identity (a tuple: the hook makes many). A tuple
    with named fields, not a ``NamedTuple`` (~0.15 ms each to create: DESIGN, "Loading, eighth cut")."""

    __slots__ = ()
    type = property(itemgetter(0))
    shape = property(itemgetter(1))
    ident = property(itemgetter(2))


# Made from a tuple in C (a class's own __new__ would be a Python function: one call more per fact,
# several per cell).
_new_seen: Callable[[tuple], Seen] = partial(tuple.__new__, Seen)


def facts_of(value: Any) -> Seen:
    """Type, len/shape and identity: no user code (cheap_shape reads builtins' len and arrays' .shape)."""
    try:
        shape = cheap_shape(value)
    except Exception:
        shape = None
    return _new_seen((type(value).__name__, shape, id(value)))


def facts_json(facts: Seen | None) -> dict[str, Any] | None:
    if facts is None:
        return None
    out: dict[str, Any] = {"type": facts.type}
    if isinstance(facts.shape, tuple):
        out["shape"] = list(facts.shape)
    elif facts.shape is not None:
        out["len"] = facts.shape
    return out


class Change(tuple):
    """One name's change in one cell, with cheap facts before (as last recorded) and after: (name,
    kind, cell, before, after, how), ``how`` in place: "shape" (len/shape/type moved) or "digest"
    (watched, exact check), else None."""

    __slots__ = ()
    name = property(itemgetter(0))
    kind = property(itemgetter(1))
    cell = property(itemgetter(2))
    before = property(itemgetter(3))
    after = property(itemgetter(4))
    how = property(itemgetter(5))

    def to_json(self, name: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if name:  # the value (gone when removed) and where its history is
            out.update(name=self.name, uri=var_uri(self.name), lineage=history_uri(self.name))
        out["kind"] = self.kind
        if self.cell is not None:
            out["cell"] = cell_uri(self.cell)
        if self.kind != ADDED:
            out["before"] = facts_json(self.before)
        if self.kind != REMOVED:
            out["after"] = facts_json(self.after)
        if self.how:
            out["detected_by"] = self.how
        return out


_new_change: Callable[[tuple], Change] = partial(tuple.__new__, Change)


class CellLineage:
    """What one cell changed (its changes, counted by kind) and which names its source mentions."""

    __slots__ = ("cell_id", "changes", "counts", "mentioned", "origin", "scanned", "seq")

    def __init__(self, seq: int, cell_id: str | None, origin: dict[str, str] | None) -> None:
        self.seq = seq
        self.cell_id = cell_id
        self.origin = origin
        self.changes: list[Change] = []
        self.counts: dict[str, int] = {}  # kind -> changes (a plain dict: made once per cell)
        self.mentioned: list[str] = []
        self.scanned = False


class VarLineage:
    __slots__ = ("events", "facts")

    def __init__(self) -> None:
        self.facts: Seen | None = None  # as of its last recorded change or mention
        self.events: deque[Change] = deque(maxlen=MAX_EVENTS)


class Lineage(Provider):
    """Records lineage after each cell (main thread) and serves it (any thread)."""

    uri_prefixes = (INDEX_URI,)

    list_is_pure = True

    def __init__(
        self,
        capture: CellCapture,
        variables: VariablesProvider,
        user_ns: MutableMapping[str, Any],
        limits: Any,
        variable_name: Callable[[str], str | None] = lambda uri: None,
    ):
        self.capture = capture
        self.variables = variables
        self._ns = user_ns
        self._limits = limits
        self._variable_name = variable_name
        self._lock = threading.Lock()
        # OrderedDict: popping the oldest is O(1) (a dict walks past the holes its deletions left)
        self.cells: OrderedDict[int, CellLineage] = OrderedDict()  # oldest first
        self.vars: OrderedDict[str, VarLineage] = OrderedDict()  # least recently changed first
        self._pending: list[tuple[CellRecord | None, list[Any], list[Any] | None]] = []  # record's, not settled yet
        self._scanned: int | None = None  # the last cell whose source was scanned
        self._scan: tuple[str | None, tuple[str, ...]] = (None, ())  # a source and the names it mentions

    # -- recording (main thread, after each cell) ---------------------------------------------
    def record(self, delta: Delta) -> None:
        """What the post-cell snapshot saw, attributed to the cell that just finished.

        Only what cannot be had later is taken now (the facts of the changed and mentioned names);
        the bookkeeping is a flat tuple appended to ``_pending``, replayed in order (``_settle``) on
        the next read or once ``MAX_PENDING`` cells wait: the same records, fewer calls a cell."""
        cell = self.capture.last
        get = self._ns.get
        notes: list[tuple[str, str, Seen | None, str | None]] = [(name, REMOVED, None, None) for name in delta.removed]
        for kind, names in ((ADDED, delta.added), (REBOUND, delta.rebound)):
            for name in names:
                value = get(name, _MISSING)
                if value is _MISSING:
                    notes.append((name, kind, None, None))
                    continue
                cls = type(value)
                try:  # facts_of, inlined (every cell); a number has no shape: no call
                    shape = None if cls in _NO_SHAPE else cheap_shape(value)
                except Exception:
                    shape = None
                notes.append((name, kind, _new_seen((cls.__name__, shape, id(value))), None))
        done = {note[0] for note in notes}
        for name in delta.in_place:
            if name not in done:
                notes.append((name, IN_PLACE, self._facts(name), "shape"))
                done.add(name)
        mentions: list[tuple[str, Seen | None]] | None = None
        if cell is not None and cell.seq != self._scanned:
            self._scanned = cell.seq  # a cell recorded again is not scanned again (as before)
            source, exposed = cell.source, self.variables.is_exposed
            if source != self._scan[0]:  # scanned once per source text: one pointer compare for a cell run again
                self._scan = (source, tuple(dict.fromkeys(_IDENT.ident.findall(source[:SCAN_CHARS]))))
            mentions = [(n, self._facts(n)) for n in self._scan[1] if n not in done and exposed(n)]
        with self._lock:
            self._pending.append((cell, notes, mentions))
            if len(self._pending) >= MAX_PENDING:
                self._settle()

    def _settle(self) -> None:
        """Replay the pending records in order (under ``_lock``): what ``record`` did at once before.
        Every reader of the records calls it first; with nothing pending it does nothing."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        for cell, notes, mentions in pending:
            rec = self._cell(cell)
            seq = rec.seq if rec is not None else None
            for name, kind, after, how in notes:
                self._note(rec, name, kind, seq, after, how)
            if rec is not None and mentions is not None and not rec.scanned:
                rec.scanned = True
                self._mentions(rec, mentions)

    def in_place(self, uris: tuple[str, ...], seq: int | None) -> None:
        """Watched URIs whose exact digest moved after cell ``seq`` (the hub's worker thread)."""
        names = {n for n in map(self._variable_name, uris) if n is not None and self.variables.is_exposed(n)}
        with self._lock:
            self._settle()
            rec = self.cells.get(seq) if seq is not None else None
            seen = {c.name for c in rec.changes} if rec is not None else set()
            for name in sorted(names - seen):
                facts = self._facts(name)
                kind = REBOUND if facts is not None and facts.type in _IMMUTABLE else IN_PLACE
                self._note(rec, name, kind, seq, facts, "digest")

    def _cell(self, cell: CellRecord | None) -> CellLineage | None:
        if cell is None:
            return None
        rec = self.cells.get(cell.seq)
        if rec is None:
            rec = self.cells[cell.seq] = CellLineage(cell.seq, cell.cell_id, cell.origin)
            while len(self.cells) > max(1, self._limits.max_cells):
                self.cells.popitem(last=False)
        return rec

    def _facts(self, name: str) -> Seen | None:
        value = self._ns.get(name, _MISSING)
        return None if value is _MISSING else facts_of(value)

    def _note(
        self,
        rec: CellLineage | None,
        name: str,
        kind: str,
        seq: int | None,
        after: Seen | None,
        how: str | None = None,
    ) -> None:
        var = self._touch(name)
        change = _new_change((name, kind, seq, None if kind == ADDED else var.facts, after, how))
        var.events.append(change)
        var.facts = after
        if rec is not None:
            rec.counts[kind] = rec.counts.get(kind, 0) + 1
            if len(rec.changes) < MAX_CELL_CHANGES:
                rec.changes.append(change)

    def _touch(self, name: str) -> VarLineage:
        """The variable's record, now the most recently changed (the least recent goes past MAX_VARS)."""
        vars_ = self.vars
        var = vars_.get(name)
        if var is None:
            var = vars_[name] = VarLineage()
            if len(vars_) > MAX_VARS:
                vars_.popitem(last=False)
        else:
            vars_.move_to_end(name)
        return var

    def _mentions(self, rec: CellLineage, mentions: list[tuple[str, Seen | None]]) -> None:
        """Names the source mentioned (facts as taken after the cell): an in-place change when type or
        len/shape moved on the same object since the last record; else only "mentioned"."""
        for name, now in mentions:
            var = self.vars.get(name)
            before = var.facts if var is not None else None
            if now is not None and before is not None and before.ident == now.ident and before != now:
                self._note(rec, name, IN_PLACE, rec.seq, now, "shape")
            else:
                self._touch(name).facts = now
                if len(rec.mentioned) < MAX_MENTIONED:
                    rec.mentioned.append(name)

    # -- what other resources show -------------------------------------------------------------
    def cell_fields(self, cell: CellRecord) -> dict[str, Any]:
        """For nb://cells/{seq}: the names this cell changed, with facts and links."""
        with self._lock:
            self._settle()
            rec = self.cells.get(cell.seq)
            changes = list(rec.changes) if rec is not None else []
            counts = dict(rec.counts) if rec is not None else {}
            mentioned = list(rec.mentioned) if rec is not None else []
        if rec is None:
            return {}
        visible = self.variables.name_visible
        budget = self._limits.max_read_chars // 6  # beside the cell's source and outputs, which take the rest
        out: dict[str, Any] = {_key(kind): [] for kind in KINDS}
        for change in changes:
            row = out[_key(change.kind)]
            if len(row) < MAX_CELL_DOC and visible(change.name):
                item = change.to_json()
                budget -= len(json.dumps(item, ensure_ascii=False)) + 2
                if budget < 0:
                    break
                row.append(item)
        out["mentioned"] = [n for n in mentioned if visible(n)]
        if sum(counts.values()) > sum(len(out[_key(k)]) for k in KINDS):
            out["counts"] = counts
            out["truncated"] = True  # the names: nb://lineage (paged), one variable: nb://lineage/vars/{name}
        out["note"] = NOTE
        out["index"] = INDEX_URI
        return {"lineage": out}

    def var_fields(self, name: str) -> dict[str, Any]:
        """For nb://vars/{name}: the cell that last set or changed it, and where its history is."""
        with self._lock:
            self._settle()
            var = self.vars.get(name)
            events = list(var.events) if var is not None else []
        if not events:
            return {"lineage": {"history": history_uri(name), "note": "no change recorded since the hub loaded"}}
        setter = next((e for e in reversed(events) if e.kind in (ADDED, REBOUND)), None)
        doc: dict[str, Any] = {}
        if setter is not None:
            doc["set_by"] = cell_uri(setter.cell) if setter.cell is not None else None
        doc["recent"] = [e.to_json(name=False) for e in reversed(events[-RECENT:])]  # newest first
        doc["history"] = history_uri(name)
        return {"lineage": doc}

    def recorded(self) -> list[tuple[int, list[Change], int]]:
        """(seq, detailed changes, count of all changes) of every recorded cell, oldest first."""
        with self._lock:
            self._settle()
            return [(r.seq, list(r.changes), sum(r.counts.values())) for r in self.cells.values()]

    # -- Provider -------------------------------------------------------------------------------
    def owns(self, uri: str) -> bool:
        return uri == INDEX_URI or uri.startswith((INDEX_URI + "/", INDEX_URI + "?"))

    def may_run_user_code(self, uri: str) -> bool:
        return False  # recorded facts only

    def list_resources(self) -> list[Resource]:
        return [
            Resource(
                uri=INDEX_URI,
                name="lineage",
                title="Lineage: what each cell changed",
                description="Executed cells, newest first, with the variables each added, rebound, changed in "
                "place and removed (links to nb://cells/{seq} and nb://lineage/vars/{name}).",
                mime_type=_JSON,
                annotations=Annotations(audience=("assistant",), priority=0.7),
            )
        ]

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=VAR_TEMPLATE,
                name="variable lineage",
                title="Where a variable came from",
                description="The cells that set, changed in place or removed a variable (also a deleted one), "
                "newest first, with type and len/shape before and after.",
                mime_type=_JSON,
            )
        ]

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        if template != VAR_TEMPLATE:
            return None
        if argument != "name":
            return []
        with self._lock:
            self._settle()
            names = list(reversed(self.vars))
        visible = self.variables.name_visible
        return [n for n in rank_completions(names, value) if visible(n)][:100]

    def read(self, uri: str) -> list[Contents]:
        params = _INDEX.match(uri)
        if params is not None:
            return [Contents(uri=uri, mime_type=_JSON, text=json.dumps(self._index(params), ensure_ascii=False))]
        params = _VAR.match(uri)
        if params is None or set(params) - {"name"}:
            raise ResourceNotFound(uri)
        return [Contents(uri=uri, mime_type=_JSON, text=json.dumps(self._var(uri, params["name"]), ensure_ascii=False))]

    def _index(self, params: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            self._settle()
            rows = [
                (r.seq, r.cell_id, r.origin, list(r.changes), dict(r.counts), list(r.mentioned))
                for r in reversed(self.cells.values())
            ]
        page = index_page(rows, params, _INDEX, self._row, self._limits.max_read_chars - 600, default_limit=50)
        doc: dict[str, Any] = {
            "count": len(rows),
            "oldest_seq": rows[-1][0] if rows else None,
            "offset": page.offset,
            "cells": page.rows,
            "note": NOTE,
        }
        if page.cut_by_size:
            doc["truncated"] = True
        if page.next:
            doc["next"] = page.next
        return doc

    def _row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        seq, cell_id, origin, changes, counts, mentioned = row
        visible = self.variables.name_visible
        out: dict[str, Any] = {"seq": seq, "uri": cell_uri(seq), "cell_id": cell_id}
        if origin:
            out["origin"] = {k: origin[k] for k in ("session", "username") if k in origin}
            kind = self.capture.origins.frontends.get(origin.get("session", ""))
            if kind is not None:
                out["origin"]["frontend"] = kind
        for kind in KINDS:
            names = [c.name for c in changes if c.kind == kind and visible(c.name)]
            if names:
                out[_key(kind)] = names[:MAX_ROW_NAMES]
            if counts.get(kind, 0) > min(len(names), MAX_ROW_NAMES):
                out[f"{_key(kind)}_count"] = counts[kind]
        names = [n for n in mentioned if visible(n)][:MAX_ROW_NAMES]
        if names:
            out["mentioned"] = names
        return out

    def _var(self, uri: str, name: str) -> dict[str, Any]:
        if not self.variables.name_visible(name):
            raise ResourceNotFound(uri)
        with self._lock:
            self._settle()
            var = self.vars.get(name)
            events = list(var.events) if var is not None else []
        exists = self.variables.is_exposed(name)
        if not events and not exists:
            raise ResourceNotFound(uri, f"Resource not found: {uri} (no variable {name} recorded; see nb://lineage)")
        doc: dict[str, Any] = {"name": name, "exists": exists}
        if exists:
            doc["uri"] = var_uri(name)
        setter = next((e for e in reversed(events) if e.kind in (ADDED, REBOUND)), None)
        doc["set_by"] = cell_uri(setter.cell) if setter is not None and setter.cell is not None else None
        doc["last_changed_by"] = cell_uri(events[-1].cell) if events and events[-1].cell is not None else None
        doc["history"] = [e.to_json(name=False) for e in reversed(events)]
        if len(events) == MAX_EVENTS:
            doc["earlier"] = f"older changes are not kept (the last {MAX_EVENTS} are)"
        elif not events or events[0].kind != ADDED:
            doc["earlier"] = "it was set before the hub loaded"
        doc["max_history"] = MAX_EVENTS
        doc["note"] = NOTE
        return doc
