"""``mcp-notebook bridge --channel``: push what a cell changed into a Claude Code session.

Claude Code does not act on ``resources/updated``, but its channels (research preview) take pushed
events: a server that declares the experimental ``claude/channel`` capability may send
``notifications/claude/channel`` with ``content`` (text for the model) and ``meta`` (string
attributes). The bridge declares it, remembers every URI the session read (resources/read, the
``read_resource`` tool) or subscribed to, watches them upstream through one listen stream, and
sends one coalesced event per executed cell that changed any of them: which URIs, in which
notebook, at most one event every ``MIN_INTERVAL`` seconds, secrets masked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..allkernels.naming import KERNELS_URI, split
from ..allkernels.upstream import Listens
from ..hubclient.address import HubAddress
from ..redact import mask_secrets

CAPABILITY = "claude/channel"
METHOD = "notifications/claude/channel"
COALESCE_SECONDS = 0.4  # updates of one cell arrive within this of each other
MIN_INTERVAL = 2.0  # at most one event this often
MAX_URIS = 200  # URIs watched for the session (least recent dropped)
INSTRUCTIONS = (
    "Events from the notebook channel say which resources a cell just changed (URIs you read or "
    "subscribed to); re-read those you still need before relying on them."
)


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else None


def _canonical(uri: str) -> str:
    return uri.split("?", 1)[0].split("#", 1)[0]


class ClaudePush:
    """The channel side of a bridge: sees its traffic both ways and writes events through it."""

    def __init__(self, write: Callable[[dict[str, Any]], None], hub: Callable[[], HubAddress | None]):
        self._write = write
        self._hub = hub
        self._lock = threading.Lock()
        self._handshakes: set[Any] = set()  # ids of initialize / server/discover requests
        self._uris: dict[str, None] = {}
        self._pending: dict[str, None] = {}
        self._timer: threading.Timer | None = None
        self._last_sent = 0.0
        self._listens = Listens(self._changed)

    # -- the session's traffic ---------------------------------------------------------------
    def incoming(self, msg: Any) -> None:
        """A message from the client: what it reads or subscribes to is watched from now on."""
        if not isinstance(msg, dict):
            return
        method, params = msg.get("method"), msg.get("params") or {}
        if method in ("initialize", "server/discover") and isinstance(msg.get("id"), (str, int)):
            with self._lock:
                self._handshakes.add(msg["id"])
            return
        if not isinstance(params, dict):
            return
        uris: list[Any] = []
        if method in ("resources/read", "resources/subscribe"):
            uris = [params.get("uri")]
        elif method == "tools/call" and params.get("name") == "read_resource":
            uris = [_field(params.get("arguments"), "uri")]
        elif method == "subscriptions/listen":
            subs = _field(params.get("notifications"), "resourceSubscriptions")
            uris = subs if isinstance(subs, list) else []
        added = False
        with self._lock:
            for uri in uris:
                if isinstance(uri, str) and uri and _canonical(uri) != KERNELS_URI:  # (changes every cell)
                    key = _canonical(uri)
                    added |= key not in self._uris
                    self._uris.pop(key, None)
                    self._uris[key] = None
            while len(self._uris) > MAX_URIS:
                self._uris.pop(next(iter(self._uris)))
            watched = frozenset(self._uris)
        if added:
            hub = self._hub()
            if hub is not None:
                self._listens.want("channel", hub, watched)

    def outgoing(self, msg: Any) -> Any:
        """A message to the client: the handshake's result declares the channel."""
        if not isinstance(msg, dict) or "result" not in msg:
            return msg
        with self._lock:
            if msg.get("id") not in self._handshakes:
                return msg
            self._handshakes.discard(msg.get("id"))
        result = dict(msg["result"])
        caps = dict(result.get("capabilities") or {})
        caps["experimental"] = {**(caps.get("experimental") or {}), CAPABILITY: {}}
        result["capabilities"] = caps
        result["instructions"] = f"{result.get('instructions') or ''}\n\n{INSTRUCTIONS}".strip()
        return {**msg, "result": result}

    # -- changes -----------------------------------------------------------------------------
    def _changed(self, _key: str, kind: str, uri: str | None) -> None:
        if kind != "updated" or uri is None:
            return
        with self._lock:
            if uri not in self._uris:
                return
            self._pending[uri] = None
            if self._timer is None:
                wait = max(COALESCE_SECONDS, self._last_sent + MIN_INTERVAL - time.monotonic())
                self._timer = threading.Timer(wait, self._flush)
                self._timer.daemon = True
                self._timer.start()

    def _flush(self) -> None:
        with self._lock:
            uris, self._pending, self._timer = list(self._pending), {}, None
            self._last_sent = time.monotonic()
        if uris:
            self._write(event(uris))

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
        self._listens.close()


def event(uris: list[str]) -> dict[str, Any]:
    """One channel event for the URIs a cell changed, grouped by notebook."""
    by_notebook: dict[str, list[str]] = {}
    for uri in uris:
        parts = split(uri)
        by_notebook.setdefault(parts[0] if parts else "the current notebook", []).append(uri)
    lines = [f"A cell ran in {where} and changed: {', '.join(found)}" for where, found in by_notebook.items()]
    content = mask_secrets("\n".join(lines))
    meta = {"notebooks": mask_secrets(",".join(by_notebook)), "count": str(len(uris))}
    return {"jsonrpc": "2.0", "method": METHOD, "params": {"content": content, "meta": meta}}
