"""Every kernel's resources behind one provider: listed, read, completed and watched through the
kernels' hubs (naming.py has the URI scheme; upstream.py the requests and listen streams).

The current kernel (the one bare URIs address) is the one of the latest event among a frontend
focusing a notebook and a kernel running a cell (each hub's ``nb://kernel`` is watched: it changes
with every cell), else the newest.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .. import budget
from ..hubclient.address import HubAddress
from ..protocol.jsonrpc import MAX_LIST, RpcError
from ..providers.base import Facts, InvalidResourceParams, Provider, ResourceNotFound, ResourceReadError
from ..types import Annotations, Contents, Resource, ResourceTemplate
from .directory import Directory, KernelEntry
from .links import Linker, schemes_of, unqualify, unqualify_inside
from .naming import KERNEL_VAR, KERNELS_URI, labels, notebook_stem, qualify, qualify_template, split
from .shared_listens import Schemes, SharedListens, Tap
from .upstream import HubError, HubGone, Listens, call

log = logging.getLogger(__name__)
EXECUTION_URI = "nb://kernel"  # changes with every executed cell
MAX_PAGES = 50
SUMMARY_SECONDS = 2.0  # how long nb://kernels waits for one hub's own summary
TICK_SECONDS = 1.0
COVER_SECONDS = 3.0  # how long a newly watched URI waits for its hub's listen to cover it
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _on_event_loop() -> bool:
    """True on a thread running an event loop (an inline answer): it must not wait."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass(frozen=True)
class Route:
    """Where a URI of the front goes: the kernel, its own URI there, its label, and whether the
    client wrote the URI qualified."""

    entry: KernelEntry
    inner: str
    label: str
    qualified: bool


class UnknownKernel(ResourceNotFound):
    """A qualified URI whose label names no running kernel (the era's not-found error, saying so)."""

    def __init__(self, uri: str, label: str, known: list[str], ids: list[str]):
        near = sorted({n for n in [*known, *ids] if n.startswith(label) or label.startswith(n)} - {label})
        label, uri = label[:100], uri[:300]  # (echoed: bounded)
        if not known:
            reason = f"unknown kernel {label!r} in {uri}: no kernel with an mcp-notebook hub is running"
        else:
            reason = f"unknown kernel {label!r} in {uri}: the running kernels are {', '.join(known)}"
            if near:
                reason += f" (did you mean {' or '.join(near[:8])}?)"
            reason += "; nb://kernels lists them with their ids"
        super().__init__(uri, reason)
        self.label = label


class KernelsProvider(Provider):
    """All resources of all kernels (see the module docstring)."""

    def __init__(self, directory: Directory, shared: SharedListens | None = None, scope: str = ""):
        """``shared``: listen through streams shared with the other fronts of ``scope`` in this
        process (the JupyterHub service's grants of one user), else through streams of our own."""
        self.directory = directory
        self._muted = False
        self.changed: Callable[[list[str], bool], None] = lambda uris, list_changed: None
        self._lock = threading.Lock()
        self._watched: set[str] = set()
        self._last_exec: dict[str, float] = {}
        self._kernels: tuple[str, ...] = ()
        self._hubs: tuple[HubAddress, ...] = ()
        self._current: str | None = None
        self._facts_cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._seen: tuple[list[KernelEntry], dict[str, str]] = ([], {})  # what the last look found
        self._listens: Listens | Tap
        if shared is not None:
            self._schemes = shared.schemes(scope)  # the user's kernels serve the same schemes to every grant
            self._listens = shared.tap(scope, frozenset([EXECUTION_URI]), self._upstream, self._wanted)
        else:
            self._schemes = Schemes()
            self._listens = Listens(self._upstream, self._wanted)
        self._listens.every(TICK_SECONDS, self.refresh)

    # -- kernels ----------------------------------------------------------------------------
    def kernels(self, fresh: bool = False) -> tuple[list[KernelEntry], dict[str, str]]:
        entries = self.directory.entries(fresh)
        found = entries, labels(((e.id, e.notebook) for e in entries), {e.id: e.where for e in entries})
        self._seen = found
        return found

    def current(self, entries: list[KernelEntry]) -> KernelEntry | None:
        """The kernel of the latest of: a frontend focusing it, it running a cell; else the newest.
        (A focus reported by a browser since closed gives way to a cell run anywhere after it.)"""
        if not entries:
            return None
        by_id = {e.id: e for e in entries}
        events = [(at, kid) for kid, at in self._last_exec.items() if kid in by_id]
        focus = self.directory.focused()
        if focus is not None and focus[0] in by_id:
            events.append((focus[1], focus[0]))
        if events:
            return by_id[max(events)[1]]
        return max(entries, key=lambda e: e.started_at)

    def _route(self, uri: str, fresh: bool = False) -> Route:
        """Which kernel answers ``uri`` and its own URI for it; a label not found is looked up once
        more in a fresh listing (a kernel that started a moment ago)."""
        bad = _CONTROL.search(uri)
        if bad is not None:  # never sent upstream: it would go into a header
            raise InvalidResourceParams(
                f"the URI holds a control character ({bad.group()!r} at {bad.start()}); a URI cannot: {uri[:200]!r}"
            )
        entries, names = self.kernels(fresh)
        parts = split(uri)
        if parts is None:
            entry = self.current(entries)
            if entry is None and not fresh:
                return self._route(uri, fresh=True)
            if entry is None:
                raise ResourceReadError("no kernel with an mcp-notebook hub is running (run %load_ext mcp_notebook)")
            return Route(entry, unqualify_inside(uri, (entry.id, names[entry.id])), names[entry.id], False)
        label, inner = parts
        for entry in entries:
            if label in (entry.id, names[entry.id]):
                own = unqualify_inside(inner, (entry.id, names[entry.id]))
                return Route(entry, own, names[entry.id], True)
        if not fresh:
            return self._route(uri, fresh=True)
        raise UnknownKernel(uri, label, sorted(names.values()), [e.id for e in entries])

    def refresh(self) -> None:
        """Called every tick: a kernel appeared or went, its hub moved, or the current one changed."""
        self._follow(self.kernels()[0])

    def _follow(self, entries: list[KernelEntry]) -> None:
        """The listens follow ``entries`` (and the current kernel among them) if they changed."""
        ids = tuple(e.id for e in entries)
        current = self.current(entries)
        cur = current.id if current else None
        hubs = tuple(e.hub for e in entries)
        if ids != self._kernels or cur != self._current or hubs != self._hubs:
            appeared = ids != self._kernels
            self._kernels, self._current, self._hubs = ids, cur, hubs
            self._reconcile()
            if appeared:
                self.changed([KERNELS_URI], True)

    def _reconcile(self) -> None:
        """What is watched changed: the listens follow (computed on their loop thread)."""
        self._listens.poke()

    def _wanted(self) -> dict[str, tuple[HubAddress, frozenset[str]]]:
        """Each hub's listen: what is watched on it, and its nb://kernel (at most MAX_LIST URIs, as
        a hub accepts; a URI no hub could hold, with a control character, is left out)."""
        entries, names = self.kernels()
        current = self.current(entries)
        with self._lock:
            watched = set(self._watched)
        wanted: dict[str, set[str]] = {e.id: set() for e in entries}
        by_label = {names[e.id]: e.id for e in entries} | {e.id: e.id for e in entries}
        for uri in watched:
            if _CONTROL.search(uri):
                continue
            parts = split(uri)
            if parts is not None and parts[0] in by_label:
                kid = by_label[parts[0]]
                wanted[kid].add(unqualify_inside(parts[1], (kid, names[kid])))
            elif parts is None and uri != KERNELS_URI and current is not None:
                wanted[current.id].add(uri)
        return {
            e.id: (e.hub, frozenset([EXECUTION_URI, *sorted(wanted[e.id] - {EXECUTION_URI})[: MAX_LIST - 1]]))
            for e in entries
        }

    def _upstream(self, kernel_id: str, kind: str, uri: str | None) -> None:
        """A hub's notification, as changes of the URIs watched here. Never waits (the shared
        listens route events on their reading thread): the kernels are those of the last look."""
        if self._muted:
            return
        if kind == "list_changed":
            self._schemes.fresh.discard(kernel_id)  # a custom template may have come: look again on use
            self.changed([], True)
            return
        assert uri is not None
        entries, names = self._seen
        entry = next((e for e in entries if e.id == kernel_id), None)
        if entry is None:
            return
        if uri == EXECUTION_URI:
            self._last_exec[kernel_id] = time.time()
        current = self.current(entries)
        # a client may name the kernel by its label or by its id: both are watched URIs of this change
        mine = [qualify(alias, uri) for alias in dict.fromkeys((names[kernel_id], kernel_id))]
        mine += [uri] if current is not None and current.id == kernel_id else []
        with self._lock:
            hit = [u for u in mine if u in self._watched]
        if hit or uri == EXECUTION_URI:
            self.changed(hit + [KERNELS_URI] * (uri == EXECUTION_URI and KERNELS_URI in self._watched), False)
        if uri == EXECUTION_URI and current is not None and current.id != self._current:
            self._follow(entries)

    # -- Provider --------------------------------------------------------------------------
    def owns(self, uri: str) -> bool:
        return True  # qualified URIs, nb://kernels, and every bare URI (the current kernel's)

    def watching(self, uri: str, watched: bool) -> None:
        """A URI watched here (a subscription, a listen, a tool-only client's read) or no longer."""
        with self._lock:
            if watched:
                self._watched.add(uri)
            else:
                self._watched.discard(uri)
        self._reconcile()

    def watched_now(self, uris: list[str]) -> None:
        """New watches wait (bounded, off any event loop) until their hubs' listens cover them: a
        change the very next cell makes must not fall between the read and the listen."""
        if _on_event_loop():
            return
        deadline = time.monotonic() + COVER_SECONDS
        for uri in uris:
            target = self._listen_target(uri)
            if target is not None:
                self._listens.wait_covering(*target, max(0.0, deadline - time.monotonic()))

    def _listen_target(self, uri: str) -> tuple[str, str] | None:
        """The kernel whose listen carries ``uri``, and the URI as that hub knows it."""
        if _CONTROL.search(uri) or uri == KERNELS_URI:
            return None
        entries, names = self.kernels()
        parts = split(uri)
        if parts is None:
            current = self.current(entries)
            return (current.id, uri) if current is not None else None
        for e in entries:
            if parts[0] in (e.id, names[e.id]):
                return e.id, unqualify_inside(parts[1], (e.id, names[e.id]))
        return None

    def list_resources(self) -> list[Resource]:
        entries, names = self.kernels()
        out = [
            Resource(
                uri=KERNELS_URI,
                name="kernels",
                title="Running kernels",
                description="The kernels served here: id, label (for nb://kernels/{kernel}/…), notebook, "
                "state, last execution, and which one bare URIs (nb://vars/…) address.",
                mime_type="application/json",
                annotations=Annotations(audience=("assistant",), priority=0.9),
            )
        ]
        for entry in entries:
            try:
                items = self._pages(entry, "resources/list", "resources")
            except (HubGone, HubError) as exc:
                log.info("listing %s failed: %s", entry.id, exc)
                continue
            where = entry.notebook or f"kernel {entry.id}"
            self._learn(entry.id, [str(item.get("uri", "")) for item in items])
            for item in items:
                name = str(item.get("name", ""))
                out.append(
                    Resource(
                        uri=qualify(names[entry.id], str(item.get("uri", ""))),
                        name=f"{names[entry.id]}/{name}",
                        title=f"{where} — {item.get('title') or name}",
                        description=item.get("description"),
                        mime_type=item.get("mimeType"),
                        size=item.get("size"),
                    )
                )
        return out

    def list_templates(self) -> list[ResourceTemplate]:
        entries, _ = self.kernels()
        seen: dict[str, dict[str, Any]] = {}
        current = self.current(entries)
        bare: list[dict[str, Any]] = []
        for entry in entries:
            try:
                items = self._pages(entry, "resources/templates/list", "resourceTemplates")
            except (HubGone, HubError):
                continue
            self._learn(entry.id, [str(item.get("uriTemplate", "")) for item in items])
            for item in items:
                seen.setdefault(str(item.get("uriTemplate", "")), item)
            if current is not None and entry.id == current.id:
                bare = items
        # Each template once in full, qualified; the current kernel's bare twins give only their URI and name
        # (the instructions say bare URIs address the current kernel): what a host puts before the
        # model stays small (tests/test_plugin.py holds the whole context under 12,000 characters).
        out = [
            ResourceTemplate(
                uri_template=qualify_template(t),
                name=f"kernels/{item.get('name', '')}",
                title=item.get("title") or item.get("name"),
                description=item.get("description"),
                mime_type=item.get("mimeType"),
            )
            for t, item in seen.items()
        ]
        out += [
            ResourceTemplate(uri_template=str(item.get("uriTemplate", "")), name=str(item.get("name", "")))
            for item in bare
        ]
        return out

    def _pages(self, entry: KernelEntry, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_PAGES):
            result = call(entry.hub, method, {"cursor": cursor} if cursor else {})
            items += [i for i in result.get(key) or [] if isinstance(i, dict)]
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return items

    def read(self, uri: str) -> list[Contents]:
        if uri == KERNELS_URI:
            return [Contents(uri=uri, mime_type="application/json", text=json.dumps(self._listing()))]
        route = self._route(uri)
        params: dict[str, Any] = {"uri": route.inner}
        if budget.scale() < 1:  # our reply was over budget: the hub reads a smaller page (budget.py)
            params["_meta"] = {budget.META_SCALE: budget.scale()}
        try:
            result = call(route.entry.hub, "resources/read", params)
        except HubGone as exc:
            raise ResourceReadError(f"the kernel {route.label} did not answer: {exc}") from None
        except HubError as exc:
            data = exc.data
            if isinstance(data, dict) and data.get("uri") == route.inner:
                data = {**data, "uri": uri}  # the URI the client asked for, not the kernel's own
            message = str(exc).replace(route.inner, uri) if route.inner != uri else str(exc)
            if (
                isinstance(data, dict)
                and "uri" in data
                and exc.code in (-32002, -32602)
                and "not found" in message.lower()
            ):
                raise ResourceNotFound(uri, message) from None
            raise RpcError(exc.code, message, data) from None
        linker = self.linker(route.entry, route.label)
        items = [item for item in result.get("contents") or [] if isinstance(item, dict)]
        return [_contents(item, route, linker) for item in items]

    def linker(self, entry: KernelEntry, label: str) -> Linker:
        """What qualifies the links in ``entry``'s replies: its label and the URI schemes it serves
        (learnt from its templates once per list change, and from every listing the front makes;
        a scheme once seen is kept)."""
        schemes = self._schemes
        if entry.id not in schemes.fresh:
            try:
                found = self._pages(entry, "resources/templates/list", "resourceTemplates")
            except (HubGone, HubError):
                found = []
            self._learn(entry.id, [str(t.get("uriTemplate", "")) for t in found])
            schemes.fresh.add(entry.id)
        return Linker(label, schemes.known.get(entry.id, frozenset()))

    def _learn(self, kernel_id: str, uris: list[str]) -> frozenset[str]:
        known = self._schemes.known
        found = frozenset(schemes_of(uris) | known.get(kernel_id, frozenset()))
        if len(known) > 1024:
            known.clear()
            self._schemes.fresh.clear()
        known[kernel_id] = found
        return found

    def _listing(self) -> dict[str, Any]:
        entries, names = self.kernels(fresh=True)
        current = self.current(entries)
        rows = []
        for e in entries:
            summary = self._summary(e)
            seen = [
                t for t in (self._last_exec.get(e.id), summary.get("last_execution")) if isinstance(t, (int, float))
            ]
            state = e.state or summary.get("state")
            rows.append(
                {
                    "id": e.id,
                    "label": names[e.id],
                    "uri": qualify(names[e.id], "nb://"),
                    "kernel": qualify(names[e.id], EXECUTION_URI),
                    "notebook": e.notebook,
                    "language": e.language or summary.get("language"),
                    "display_name": e.display_name or summary.get("display_name"),
                    "served_by": summary.get("served_by") or e.served_by,
                    "name": notebook_stem(e.notebook),
                    "cwd": e.where,
                    "pid": summary.get("pid") if isinstance(summary.get("pid"), int) else e.pid,
                    "state": state if isinstance(state, str) else ("unreachable" if not summary else None),
                    "last_execution": max(seen) if seen else None,
                    "started_at": e.started_at,
                    "current": current is not None and e.id == current.id,
                }
            )
        return {"kernels": rows}

    def _summary(self, entry: KernelEntry) -> dict[str, Any]:
        """The hub's own ``nb://kernel`` (its state, last execution, pid), or {} when it does not answer."""
        try:
            result = call(entry.hub, "resources/read", {"uri": EXECUTION_URI}, timeout=SUMMARY_SECONDS)
            doc = json.loads(result["contents"][0]["text"])
        except Exception:
            return {}
        return doc if isinstance(doc, dict) else {}

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        entries, names = self.kernels()
        parts = split(template)
        if parts is not None and parts[0] == KERNEL_VAR:
            if argument == "kernel":
                return [n for n in names.values() if n.startswith(value)] or [
                    e.id for e in entries if e.id.startswith(value)
                ]
            label = context.get("kernel")
            entry = next((e for e in entries if label in (e.id, names[e.id])), None) if label else self.current(entries)
            inner = parts[1]
        else:
            entry, inner = self.current(entries), template
        if entry is None:
            return []
        own = (entry.id, names[entry.id])
        params = {
            "ref": {"type": "ref/resource", "uri": inner},
            "argument": {"name": argument, "value": unqualify(value, own)},
            "context": {
                "arguments": {
                    k: unqualify(v, own) if isinstance(v, str) else v for k, v in context.items() if k != "kernel"
                }
            },
        }
        try:
            result = call(entry.hub, "completion/complete", params)
        except (HubGone, HubError):
            return []
        linker = self.linker(entry, names[entry.id])
        return [linker.value(str(v)) for v in (result.get("completion") or {}).get("values") or []]

    # -- what tool-only clients are told (the hub's own facts, asked of it) ----------------------
    def facts(self, uri: str) -> Facts | None:
        doc = self._facts_doc(uri)
        found = doc.get("facts") if doc else None
        if not isinstance(found, dict):
            return None
        shape = found.get("shape")
        return Facts(
            str(found.get("type")), tuple(shape) if isinstance(shape, list) else shape, int(found.get("ident") or 0)
        )

    def variable_name(self, uri: str) -> str | None:
        doc = self._facts_doc(uri)
        name = doc.get("variable") if doc else None
        return name if isinstance(name, str) else None

    def _facts_doc(self, uri: str) -> dict[str, Any] | None:
        """``nb://kernel/facts`` of the hub behind ``uri`` (remembered for a moment: facts and the
        variable name are asked together)."""
        cached = self._facts_cache.get(uri)
        if cached is not None and time.monotonic() - cached[0] < 0.5:
            return cached[1]
        try:
            route = self._route(uri)
            about = quote(route.inner, safe="")
            result = call(route.entry.hub, "resources/read", {"uri": f"nb://kernel/facts?uri={about}"})
            doc = json.loads(result["contents"][0]["text"])
        except Exception:
            return None
        if len(self._facts_cache) > 256:
            self._facts_cache.clear()
        self._facts_cache[uri] = (time.monotonic(), doc)
        return doc

    def mute(self) -> None:
        """No upstream event reaches this provider from now on (any thread, at once: a grant
        revoked); :meth:`close` ends the rest."""
        self._muted = True
        if isinstance(self._listens, Tap):
            self._listens.mute()

    def close(self) -> None:
        self.mute()
        self._listens.close()


def _contents(item: dict[str, Any], route: Route, linker: Linker) -> Contents:
    """A kernel's contents item: its URI as the client wrote it, the links inside it qualified."""
    uri = str(item.get("uri", ""))
    blob = item.get("blob")
    mime = item.get("mimeType")
    text = item.get("text")
    meta = item.get("_meta")
    return Contents(
        uri=qualify(route.label, uri) if route.qualified else uri,
        mime_type=mime,
        text=linker.text(text, mime) if isinstance(text, str) else text,
        blob=base64.b64decode(blob) if isinstance(blob, str) else None,
        meta=linker.value(meta) if isinstance(meta, dict) else meta,
    )
