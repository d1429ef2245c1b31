"""ipywidgets views of the hub: the panel, the resource browser and a single watched resource.

Each view is a VBox built from the hub's own state. Hub notifications and server activity reach
it through :class:`~mcp_notebook.inkernel.activity.MainThread`, so widgets only change on the
kernel's main thread. ``close()`` releases what the view holds (hub watches, listeners, hooks).
Every view also has a plain-text summary for frontends without widgets.
"""

from __future__ import annotations

import contextlib
import html
import io
from typing import Any

import ipywidgets as W

from ..inkernel import lifecycle
from ..inkernel.activity import MainThread, listen_rows, recent_notifications, session_rows
from ..resources import LIST_CHANGED, UPDATED
from ..revisions import ALL_VERSIONS
from ..types import Contents
from . import content

_NOTICES_SHOWN = 10


def _esc(value: Any) -> str:
    return html.escape(str(value))


class _View(W.VBox):
    """Shared behaviour: hub listener, main-thread updates, text fallback, release on close."""

    def __init__(self, shell: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self._shell = shell
        self._main = MainThread(shell)
        self._hub: Any = None  # the Resources listened to
        self._released = False

    # -- hub listener -------------------------------------------------------------------
    def _listen(self, hub: Any) -> None:
        self._unlisten()
        self._hub = hub
        hub.add_listener(self._on_hub_event)

    def _unlisten(self) -> None:
        if self._hub is not None:
            self._hub.remove_listener(self._on_hub_event)
            self._hub = None

    def _on_hub_event(self, kind: str, uris: tuple[str, ...]) -> None:
        """Any thread: decide cheaply, then hand the work to the main thread."""

    # -- text fallback ------------------------------------------------------------------
    def summary(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.summary())

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.comm is not None:
            data = dict(super()._repr_mimebundle_(**kwargs) or {})
        data["text/plain"] = self.summary()
        return data

    # -- closing ------------------------------------------------------------------------
    def _release(self) -> None:
        self._unlisten()

    def close(self) -> None:
        """Release watches and listeners, then close this view and the widgets inside it."""
        if not self._released:
            self._released = True
            self._release()
        for child in _descendants(self):
            child.close()
        super().close()

    @property
    def closed(self) -> bool:
        return self._released


def _descendants(box: W.Box) -> list[W.Widget]:
    out: list[W.Widget] = []
    for child in box.children:
        if isinstance(child, W.Box):
            out.extend(_descendants(child))
        out.append(child)
    return out


def _contents_widgets(items: list[Contents]) -> list[W.Widget]:
    out: list[W.Widget] = []
    for item in items:
        out.append(W.HTML(f"<b>{_esc(content.header(item))}</b>"))
        if content.is_image(item):
            assert item.blob is not None
            fmt = (item.mime_type or "image/png").split("/", 1)[1].split("+", 1)[0]
            out.append(W.Image(value=item.blob, format=fmt))
        else:
            out.append(W.HTML(content.to_html(item)))
    return out


class _ContentsBox:
    """Reads one URI through the hub and shows the result in a VBox (plus its plain text)."""

    def __init__(self) -> None:
        self.box = W.VBox()
        self.text = ""

    def show(self, hub: Any, uri: str | None) -> None:
        old = list(self.box.children)
        if uri is None:
            self.text = "(nothing selected)"
            self.box.children = [W.HTML("<i>select a resource</i>")]
        else:
            try:
                items = hub.read(uri)
            except Exception as exc:  # not found, bad params, a failing __repr__: show it like a client would
                self.text = f"{uri}\n{content.error_text(exc)}"
                self.box.children = [W.HTML(f"<pre>{_esc(self.text)}</pre>")]
            else:
                self.text = content.describe(items)
                self.box.children = _contents_widgets(items)
        for widget in old:
            widget.close()


class WatchView(_View):
    """``mcp_notebook.watch(uri)``: one resource, re-rendered whenever the hub reports it changed."""

    def __init__(self, kernel_hub: Any, uri: str):
        kernel_hub.resources.provider_for(uri)  # ResourceNotFound for a URI nothing serves
        self.uri = uri
        self.updates = 0
        self._kh = kernel_hub
        self._contents = _ContentsBox()
        self.title = W.HTML()
        self.stop_button = W.Button(description="Stop watching", icon="eye-slash")
        self.stop_button.on_click(lambda _button: self.close())
        super().__init__(kernel_hub.shell, children=[W.HBox([self.title, self.stop_button]), self._contents.box])
        self._listen(kernel_hub.resources)
        kernel_hub.resources.watch(uri)
        self.refresh()

    def _on_hub_event(self, kind: str, uris: tuple[str, ...]) -> None:
        if kind == UPDATED and self.uri in uris and not self._released:
            self._main.call((id(self), "updated"), self._updated)

    def _updated(self) -> None:
        if not self._released:
            self.updates += 1
            self.refresh()

    def refresh(self) -> None:
        """Read the resource again and re-render it."""
        self._contents.show(self._kh.resources, self.uri)
        plural = "" if self.updates == 1 else "s"
        self.title.value = f"<b>watching</b> <code>{_esc(self.uri)}</code> · {self.updates} update{plural}"

    @property
    def text(self) -> str:
        """Plain text of what the view shows now."""
        return self._contents.text

    def _release(self) -> None:
        super()._release()
        self._kh.resources.unwatch(self.uri)

    def summary(self) -> str:
        if self._released:
            return f"closed watch of {self.uri}"
        plural = "" if self.updates == 1 else "s"
        return f"watching {self.uri} · {self.updates} update{plural}\n{self.text}"


class BrowserView(_View):
    """List, filter and preview resources; subscribe in-process to watch the previewed one change."""

    def __init__(self, kernel_hub: Any, kind: str = "all", text: str = ""):
        self._kh = kernel_hub
        self._resources: list[Any] = []
        self.current: str | None = None
        self.watching: str | None = None
        self.updates = 0
        self._quiet = False
        self.kind = W.Dropdown(options=["all"], value="all", description="Kind")
        self.filter = W.Text(value=text, placeholder="text in URI or title", description="Filter")
        self.listing = W.Select(options=[], rows=10, layout=W.Layout(width="100%"))
        self.uri = W.Text(placeholder="any URI, e.g. a template expanded by hand", description="URI")
        self.read_button = W.Button(description="Read", icon="book")
        self.subscribe = W.ToggleButton(value=False, description="Subscribe", icon="bell")
        self.refresh_button = W.Button(description="Reload list", icon="refresh")
        self.status = W.HTML()
        self._contents = _ContentsBox()
        super().__init__(
            kernel_hub.shell,
            children=[
                W.HBox([self.kind, self.filter, self.refresh_button]),
                self.listing,
                W.HBox([self.uri, self.read_button, self.subscribe]),
                self.status,
                self._contents.box,
            ],
        )
        self._listen(kernel_hub.resources)
        self.reload()
        if kind in self.kind.options:
            self.kind.value = kind
        self._apply_filter()
        self.kind.observe(lambda _c: self._apply_filter(), names="value")
        self.filter.observe(lambda _c: self._apply_filter(), names="value")
        self.listing.observe(self._selected, names="value")
        self.read_button.on_click(lambda _b: self.show(self.uri.value.strip() or None))
        self.refresh_button.on_click(lambda _b: self.reload())
        self.subscribe.observe(lambda _c: self._sync_watch(), names="value")
        self._contents.show(kernel_hub.resources, None)
        self._status()

    # -- listing ------------------------------------------------------------------------
    def reload(self) -> None:
        """Fetch the resource list again (kinds and filtered options follow)."""
        try:
            self._resources = self._kh.resources.list_resources()
        except Exception as exc:  # a failing provider: keep the last list, say why
            self.status.value = f"<i>could not list resources: {_esc(content.error_text(exc))}</i>"
            return
        kinds = ["all", *sorted({content.kind_of(r.uri) for r in self._resources})]
        if list(self.kind.options) != kinds:
            keep = self.kind.value if self.kind.value in kinds else "all"
            self.kind.options = kinds
            self.kind.value = keep
        self._apply_filter()

    def visible(self) -> list[str]:
        """URIs that pass the kind and text filters, in list order."""
        kind, needle = self.kind.value, self.filter.value.strip().lower()
        out = []
        for r in self._resources:
            if kind != "all" and content.kind_of(r.uri) != kind:
                continue
            if needle and needle not in f"{r.uri} {r.title or ''} {r.name}".lower():
                continue
            out.append(r.uri)
        return out

    def _apply_filter(self) -> None:
        shown = set(self.visible())
        options = [(f"{r.uri} — {r.title or r.name}", r.uri) for r in self._resources if r.uri in shown]
        keep = self.listing.value if self.listing.value in shown else None
        self._quiet = True  # new options would select the first one: keep the selection as it was
        try:
            self.listing.index = None
            self.listing.options = options
            if keep is not None:
                self.listing.value = keep
        finally:
            self._quiet = False

    def _selected(self, change: dict[str, Any]) -> None:
        if not self._quiet and change["new"] is not None:
            self.show(change["new"])

    # -- preview and subscription -------------------------------------------------------
    def select(self, uri: str) -> None:
        """Select ``uri`` in the list (clearing filters that hide it) and preview it."""
        if uri not in self.visible():
            self.kind.value, self.filter.value = "all", ""
        if uri in self.visible():
            self.listing.value = uri
        else:
            self.show(uri)

    def show(self, uri: str | None) -> None:
        """Preview ``uri`` as a client would receive it; a subscription follows the preview."""
        if uri != self.current:
            self.updates = 0
        self.current = uri
        self.uri.value = uri or ""
        self._sync_watch()
        self._contents.show(self._kh.resources, uri)
        self._status()

    def _sync_watch(self) -> None:
        want = self.current if self.subscribe.value and not self._released else None
        if want == self.watching:
            self._status()
            return
        if self.watching is not None:
            self._kh.resources.unwatch(self.watching)
            self.watching = None
        if want is not None:
            try:
                self._kh.resources.provider_for(want)
            except Exception as exc:
                self.status.value = f"<i>cannot subscribe: {_esc(content.error_text(exc))}</i>"
                self.subscribe.value = False
                return
            self._kh.resources.watch(want)
            self.watching = want
        self._status()

    def _status(self) -> None:
        if self.watching:
            self.status.value = f"subscribed to <code>{_esc(self.watching)}</code> · {self.updates} update(s)"
        else:
            self.status.value = f"{len(self.visible())} of {len(self._resources)} resources"

    def _on_hub_event(self, kind: str, uris: tuple[str, ...]) -> None:
        if self._released:
            return
        if kind == LIST_CHANGED:
            self._main.call((id(self), "list"), self.reload)
        elif kind == UPDATED and self.watching is not None and self.watching in uris:
            self._main.call((id(self), "updated"), self._updated)

    def _updated(self) -> None:
        if self._released or self.watching is None:
            return
        self.updates += 1
        self._contents.show(self._kh.resources, self.watching)
        self._status()

    @property
    def text(self) -> str:
        """Plain text of the preview."""
        return self._contents.text

    def _release(self) -> None:
        super()._release()
        if self.watching is not None:
            self._kh.resources.unwatch(self.watching)
            self.watching = None

    def summary(self) -> str:
        if self._released:
            return "closed resource browser"
        lines = [f"resource browser: {len(self.visible())} of {len(self._resources)} resources"]
        if self.kind.value != "all" or self.filter.value:
            lines[0] += f" (kind={self.kind.value}, filter={self.filter.value!r})"
        visible = self.visible()
        lines += [f"  {uri}" for uri in visible[:20]]
        if len(visible) > 20:
            lines.append(f"  … showing 20 of {len(visible)}; narrow with mcp_notebook.browser(kind, text)")
        if self.current:
            sub = f" (subscribed, {self.updates} update(s))" if self.watching else ""
            lines += [f"preview{sub}:", self.text]
        return "\n".join(lines)


class PanelView(_View):
    """The hub at a glance: endpoint, revisions, clients and their subscriptions, recent notifications."""

    def __init__(self, shell: Any):
        self._kh: Any = None
        self._server: Any = None
        self.title = W.HTML()
        self.toggle = W.Button(description="Stop")
        self.refresh_button = W.Button(description="Refresh", icon="refresh")
        self.message = W.HTML()
        self.endpoint = W.HTML()
        self.clients = W.HTML()
        self.listens = W.HTML()
        self.recent = W.HTML()
        super().__init__(
            shell,
            children=[
                W.HBox([self.title, self.toggle, self.refresh_button]),
                self.message,
                self.endpoint,
                self.clients,
                self.listens,
                self.recent,
            ],
        )
        self.toggle.on_click(lambda _b: self.stop() if self.running else self.start())
        self.refresh_button.on_click(lambda _b: self.refresh())
        shell.events.register("post_run_cell", self._after_cell)
        self._bind()
        self.refresh()

    # -- binding to the running hub (it changes on stop/start and %reload_ext) ----------
    @staticmethod
    def _current() -> Any:
        return lifecycle.current()

    def _bind(self) -> None:
        kh = self._current()
        if kh is self._kh:
            return
        self._unbind()
        self._kh = kh
        if kh is not None:
            recent_notifications(kh.resources)
            self._listen(kh.resources)
            self._server = kh.server
            self._server.activity_listeners.append(self._on_activity)

    def _unbind(self) -> None:
        self._unlisten()
        if self._server is not None:
            with contextlib.suppress(ValueError):
                self._server.activity_listeners.remove(self._on_activity)
            self._server = None
        self._kh = None

    def _after_cell(self, result: Any = None) -> None:
        """Main thread, O(1): notice a hub started or stopped by a cell (%load_ext, %reload_ext)."""
        if self._current() is not self._kh or (self._kh is not None and not self._kh.running):
            self._main.call((id(self), "refresh"), self.refresh)

    def _on_hub_event(self, kind: str, uris: tuple[str, ...]) -> None:
        if not self._released:
            self._main.call((id(self), "refresh"), self.refresh)

    def _on_activity(self) -> None:
        if not self._released:
            self._main.call((id(self), "refresh"), self.refresh)

    # -- controls -----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._kh is not None and self._kh.running

    def start(self) -> None:
        """Start the hub (as %mcp start would)."""
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                lifecycle.start(self._shell)
        except Exception as exc:
            self.message.value = f"<b>could not start:</b> {_esc(content.error_text(exc))}"
        else:
            self.message.value = _esc(out.getvalue().strip())
        self.refresh()

    def stop(self) -> None:
        """Stop the hub (as %mcp stop would): clients are disconnected, %mcp stays."""
        lifecycle.stop()
        self.message.value = "stopped"
        self.refresh()

    # -- state --------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What the panel shows, as plain data (tests and the text fallback use it)."""
        self._bind()
        kh = self._kh
        state: dict[str, Any] = {
            "running": self.running,
            "url": kh.transport.url if self.running else None,
            "revisions": list(ALL_VERSIONS),
            "clients": [],
            "listens": [],
            "watched": [],
            "recent": [],
        }
        if kh is None:
            return state
        state["clients"] = session_rows(kh.server)
        state["listens"] = listen_rows(kh.server)
        state["watched"] = sorted(kh.resources.watched())
        recent = recent_notifications(kh.resources)
        state["recent"] = [n.line() for n in recent.items()[-_NOTICES_SHOWN:]]
        state["notifications_total"] = recent.total
        return state

    def refresh(self) -> None:
        """Rebuild every section from the hub's state."""
        if self._released:
            return
        st = self.state()
        if st["running"]:
            self.title.value = "<b>mcp-notebook hub</b> · <span style='color:green'>running</span>"
            self.toggle.description, self.toggle.icon, self.toggle.button_style = "Stop", "stop", "danger"
            self.endpoint.value = (
                f"endpoint <code>{_esc(st['url'])}</code><br>revisions {_esc(', '.join(st['revisions']))}"
            )
        else:
            self.title.value = "<b>mcp-notebook hub</b> · <span style='color:gray'>stopped</span>"
            self.toggle.description, self.toggle.icon, self.toggle.button_style = "Start", "play", "success"
            self.endpoint.value = f"revisions {_esc(', '.join(st['revisions']))}"
        rows = "".join(
            f"<tr><td>{_esc(c['client'])}</td><td>{_esc(c['version'])}</td><td><code>{_esc(c['session'])}</code></td>"
            f"<td>{c['streams']}</td><td>{_esc(', '.join(c['subscriptions']) or '—')}</td></tr>"
            for c in st["clients"]
        )
        self.clients.value = (
            f"<b>clients</b> ({len(st['clients'])})<table><tr><th>client</th><th>revision</th><th>session</th>"
            f"<th>streams</th><th>subscriptions</th></tr>{rows}</table>"
            if st["clients"]
            else "<b>clients</b> (0)"
        )
        items = "".join(
            f"<li><code>{_esc(x['id'])}</code>: {_esc(', '.join(x['uris']) or '—')}"
            f"{' + list_changed' if x['list_changed'] else ''}</li>"
            for x in st["listens"]
        )
        self.listens.value = f"<b>listen streams</b> ({len(st['listens'])})<ul>{items}</ul>"
        notes = "".join(f"<li><code>{_esc(line)}</code></li>" for line in reversed(st["recent"]))
        self.recent.value = f"<b>recent notifications</b> ({st.get('notifications_total', 0)})<ul>{notes}</ul>"

    def summary(self) -> str:
        if self._released:
            return "closed mcp-notebook panel"
        st = self.state()
        lines = [
            f"mcp-notebook hub: running at {st['url']}" if st["running"] else "mcp-notebook hub: stopped",
            f"protocol revisions: {', '.join(st['revisions'])}",
            f"clients: {len(st['clients'])}",
        ]
        for c in st["clients"]:
            subs = ", ".join(c["subscriptions"]) or "no subscriptions"
            lines.append(
                f"  {c['client']} · {c['version']} · session {c['session']} · {c['streams']} stream(s) · {subs}"
            )
        lines.append(f"listen streams: {len(st['listens'])}")
        lines += [f"  {x['id']}: {', '.join(x['uris']) or '—'}" for x in st["listens"]]
        lines.append(f"watched URIs: {', '.join(st['watched']) or 'none'}")
        lines.append(f"recent notifications: {st.get('notifications_total', 0)}")
        lines += [f"  {line}" for line in st["recent"]]
        return "\n".join(lines)

    def _release(self) -> None:
        with contextlib.suppress(ValueError):
            self._shell.events.unregister("post_run_cell", self._after_cell)
        self._unbind()
