"""A signed-in user's servers as the kernels front's directory.

Each grant holds the user's own JupyterHub token (from the JupyterHub sign-in, scoped by JupyterHub to
``access:servers!user`` and ``read:servers!user``: that user's servers and nothing else). With it
the service asks JupyterHub who the user is and which of their servers are ready (at most every
``check_seconds``), lists each ready server's kernels through its ``mcp-notebook`` extension, and
reaches each kernel at ``/user/{name}[/{server}]/mcp-notebook/kernels/{id}/mcp``. A JupyterHub that
no longer accepts the token (revoked, expired, user deleted) ends the grant.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

from ..allkernels.directory import KernelEntry
from ..allkernels.naming import KERNELS_URI
from ..allkernels.provider import KernelsProvider
from ..hubclient.address import HubAddress
from ..hubclient.blocking import server_kernels
from ..hubclient.rules import UpstreamError
from ..types import Contents, ResourceNotFound, ResourceReadError

log = logging.getLogger(__name__)
LIST_SECONDS = 2.0  # a server's kernel listing this recent is reused (by every grant of its user)
LIST_AHEAD_SECONDS = 0.5  # and one this close to its end is listed again in the background
TIMEOUT = 10.0
Fetch = Callable[[], list[dict[str, Any]] | None]  # a server's kernel listing, asked now (None: it failed)
RENEW_AHEAD_SECONDS = 1.0  # JupyterHub's answer is asked again this long before it goes stale (off the reads' path)


class JupyterHubRefused(Exception):
    """JupyterHub no longer accepts the user's token (revoked, expired, or the user is gone)."""


class JupyterHubLink:
    """What JupyterHub says about one grant's user, through that user's own token (cached)."""

    def __init__(self, api_url: str, user: str, jupyterhub_token: str, check_seconds: float):
        self.api_url = api_url.rstrip("/")
        self.user = user
        self.jupyterhub_token = jupyterhub_token
        self.check_seconds = check_seconds
        self.refused: str | None = None
        self._answer: tuple[dict[str, Any] | None, float] = (None, 0.0)  # JupyterHub's answer and when
        self._lock = threading.Lock()

    def model(self, ahead: float = 0.0) -> dict[str, Any]:
        """The user's model (``servers`` included); :class:`JupyterHubRefused` when JupyterHub says no.
        ``ahead``: ask again if the answer goes stale within that many seconds. A fresh answer is
        returned without waiting: only a caller that needs a new one waits for JupyterHub (one asks at
        a time), so a read never waits behind the renewal asking ahead (``Fronts.renew_checks``)."""
        found = self._fresh(ahead)
        if found is not None:
            return found
        with self._lock:
            found = self._fresh(ahead)  # asked meanwhile by whoever held the lock
            if found is not None:
                return found
            req = urllib.request.Request(
                f"{self.api_url}/user",
                headers={"Authorization": f"token {self.jupyterhub_token}", "Accept": "application/json"},
            )
            try:
                with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                    model = json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                if exc.code in (401, 403, 404):
                    self.refused = f"JupyterHub no longer accepts {self.user}'s sign-in ({exc.code})"
                    raise JupyterHubRefused(self.refused) from None
                raise
            if not isinstance(model, dict) or model.get("name") != self.user:
                self.refused = "the JupyterHub token belongs to someone else"
                raise JupyterHubRefused(self.refused)
            if any(str(s).split("!", 1)[0] == "access:servers" for s in model.get("scopes") or ()):
                self.refused = (  # a grant from before the mcp-notebook scope: it reaches too much
                    "this sign-in's JupyterHub token opens all of the user's servers (an earlier configuration): "
                    "sign in again"
                )
                raise JupyterHubRefused(self.refused)
            self._answer = (model, time.monotonic())  # one assignment: readers see both or neither
            return model

    def _fresh(self, ahead: float) -> dict[str, Any] | None:
        """The answer if it stays fresh for ``ahead`` more seconds (no lock: read as one tuple)."""
        if self.refused is not None:
            raise JupyterHubRefused(self.refused)
        model, checked = self._answer
        if model is not None and time.monotonic() - checked < self.check_seconds - ahead:
            return model
        return None

    def fresh(self) -> bool:
        """JupyterHub's answer is recent enough to trust without asking (and was a yes)."""
        model, checked = self._answer
        return self.refused is None and model is not None and time.monotonic() - checked < self.check_seconds

    def ready_servers(self) -> dict[str, str]:
        """Server name ("" for the default one) -> its URL path, for the servers that are ready."""
        servers = self.model().get("servers") or {}
        return {
            name: s["url"] for name, s in servers.items() if isinstance(s, dict) and s.get("ready") and s.get("url")
        }


class Listings:
    """Servers' kernel listings, shared by the grants of their user (keyed by user and server). A
    listing is used for ``LIST_SECONDS``; one within ``LIST_AHEAD_SECONDS`` of that is listed again
    on a thread of its own while callers go on with it, so a read almost never waits for a listing;
    one server is listed by one caller at a time (the others wait for that answer: fifty grants
    of a user starting together ask the user's server once, not fifty times). A renewal ahead that
    failed (one grant's token refused, the server busy) leaves the kept listing as it is; a failure
    when nothing recent is kept is kept as [] for ``LIST_SECONDS``, as any answer."""

    def __init__(self) -> None:
        self._lists: dict[tuple[str, str], tuple[float, list[dict[str, Any]]]] = {}
        self._asking: dict[tuple[str, str], Future[list[dict[str, Any]] | None]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="mcp-notebook-listings")

    def listed(self, key: tuple[str, str], fresh: bool, fetch: Fetch) -> list[dict[str, Any]]:
        """The listing of ``key``: the one kept while recent (renewed ahead in the background), else
        the answer of the one ``fetch()`` asking now (``fresh``: a new one whatever is kept)."""
        if fresh:
            listed = fetch() or []
            self.put(key, listed)
            return listed
        with self._lock:
            found = self._lists.get(key)
            age = time.monotonic() - found[0] if found is not None else LIST_SECONDS
            asking = self._asking.get(key)
            mine = asking is None and (found is None or age >= LIST_SECONDS - LIST_AHEAD_SECONDS)
            if mine:
                asking = self._asking[key] = Future()
        if found is not None and age < LIST_SECONDS:
            if mine:
                self._pool.submit(self._ask, key, fetch, asking, True)  # ahead: the callers go on with this one
            return found[1]
        if mine:
            self._ask(key, fetch, asking)
        assert asking is not None
        return asking.result() or []  # (bounded: a listing has its own time limit)

    def _ask(
        self, key: tuple[str, str], fetch: Fetch, asking: Future[list[dict[str, Any]] | None], ahead: bool = False
    ) -> None:
        try:
            listed = fetch()
        except BaseException as exc:  # fetch says why in an empty listing; anything else reaches the waiters
            asking.set_exception(exc)
            raise
        else:
            if listed is not None or not ahead:
                self.put(key, listed or [])
            asking.set_result(listed)
        finally:
            with self._lock:
                if self._asking.get(key) is asking:
                    del self._asking[key]

    def put(self, key: tuple[str, str], listed: list[dict[str, Any]]) -> None:
        with self._lock:
            if len(self._lists) > 4096:
                self._lists.clear()
            self._lists[key] = (time.monotonic(), listed)


class UserServers:
    """The kernels of the user's ready servers (a ``kernels.directory.Directory``)."""

    def __init__(self, link: JupyterHubLink, upstream: str, jupyterhub_home: str, listings: Listings | None = None):
        self.link = link
        self.upstream = upstream.rstrip("/")
        self.jupyterhub_home = jupyterhub_home
        self.servers: dict[str, str] = {}
        self.error: str | None = None
        self.listings = listings or Listings()

    def entries(self, fresh: bool = False) -> list[KernelEntry]:
        try:
            servers = self.link.ready_servers()
        except Exception as exc:  # refused or unreachable: no kernels (why_empty says why)
            log.info("hub check for %s: %s", self.link.user, exc)
            self.servers, self.error = {}, f"JupyterHub did not answer about {self.link.user}: {exc}"
            return []
        self.servers, self.error = servers, None
        out: list[KernelEntry] = []
        for name, path in sorted(servers.items()):
            out += self._kernels(name, path, fresh)
        return sorted(out, key=lambda e: e.started_at)

    def _kernels(self, name: str, path: str, fresh: bool) -> list[KernelEntry]:
        base = f"{self.upstream}{path}"
        listed = self.listings.listed((self.link.user, path), fresh, functools.partial(self._list, base))
        return [
            KernelEntry(
                str(k["kernel_id"]),
                k.get("notebook_path"),
                HubAddress(
                    f"{base}mcp-notebook/kernels/{quote(str(k['kernel_id']))}/mcp", self.link.jupyterhub_token, "token"
                ),
                float(k.get("started_at") or 0),
            )
            for k in listed
            if isinstance(k, dict) and k.get("kernel_id")
        ]

    def _list(self, base: str) -> list[dict[str, Any]] | None:
        """The kernels of the server at ``base``, as its mcp-notebook extension lists them (None: it did not say)."""
        try:
            status, _, raw = server_kernels(base, self.link.jupyterhub_token, TIMEOUT)
            if status != 200:
                raise OSError(f"HTTP {status}")
            listed = json.loads(raw)
        except (OSError, ValueError, UpstreamError) as exc:
            log.info("listing the kernels of %s failed: %s", base, exc)
            return None
        return listed if isinstance(listed, list) else None

    def focused(self) -> tuple[str, float] | None:
        return None

    def why_empty(self) -> str:
        user = self.link.user
        if self.link.refused:
            return self.link.refused
        if self.error:
            return self.error
        if not self.servers:
            return (
                f"{user} has no running server on this JupyterHub: start one at {self.jupyterhub_home} "
                "(reading through MCP never starts a server)."
            )
        names = ", ".join(repr(n or "default") for n in sorted(self.servers))
        return (
            f"no kernel with an mcp-notebook hub runs on {user}'s servers ({names}): "
            "open a notebook and run %load_ext mcp_notebook"
        )


class UserKernels(KernelsProvider):
    """The kernels front's provider: a user whose servers are all stopped is told, on every read
    (``nb://kernels`` as much as a kernel's URI), where on JupyterHub to start one."""

    directory: UserServers

    def _route(self, uri: str, fresh: bool = False) -> tuple[KernelEntry, str, str | None]:
        try:
            return super()._route(uri, fresh)
        except ResourceReadError:
            raise ResourceReadError(self.directory.why_empty()) from None
        except ResourceNotFound:
            if self.directory.servers:  # a kernel not found among running servers: the usual answer
                raise
            raise ResourceReadError(self.directory.why_empty()) from None

    def read(self, uri: str) -> list[Contents]:
        found = super().read(uri)
        if uri != KERNELS_URI or self.directory.servers or len(found) != 1:
            return found
        listing = json.loads(found[0].text or "{}")
        if listing.get("kernels"):
            return found
        listing["note"] = self.directory.why_empty()  # the sentence a person reads: where to start one
        return [Contents(uri=uri, mime_type="application/json", text=json.dumps(listing))]
