"""``{prefix}mcp``: the one MCP endpoint, a tornado carrier in front of one kernels front per grant.

A request is admitted by its bearer token (an MCP access token this service issued for this
endpoint, never a JupyterHub token), then by JupyterHub (the grant's user still signed in, at most
``check_seconds`` old), then answered by the grant's front (``kernels.front.KernelsFront`` over
the user's servers), both eras, sessions and streams included. Fronts are per grant: a session or
stream of one client is never reachable with another's token, and revoking a grant closes its front.
A handshake-era session made at another replica is adopted from the store (sessions.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tornado import web

from ..allkernels.front import KernelsFront
from ..allkernels.shared_listens import SharedListens
from ..allkernels.sse_replies import SseReplies
from ..instructions import SERVICE
from ..protocol.exchange import HttpRequest
from ..protocol.security import cors_headers, preflight_headers
from .config import SCOPE
from .oauth import AuthorizationServer
from .sessions import SharedSessions
from .store import digest, unseal
from .users import RENEW_AHEAD_SECONDS, JupyterHubLink, JupyterHubRefused, Listings, UserKernels, UserServers

log = logging.getLogger(__name__)
IDLE_SECONDS = 1800.0  # a front nobody used for this long (and with no stream open) is closed
RENEW_THREADS = 8  # JupyterHub asked about this many grants at once when their answers come due together


@dataclass
class GrantAccess:
    family: str
    user: str
    jupyterhub_token: str = field(repr=False)
    expires: float


@dataclass
class GrantFront:
    front: KernelsFront
    link: JupyterHubLink
    used: float
    streams: int = 0
    touched: float = 0.0  # when "last used" was last written to the store

    def count_stream(self, delta: int) -> None:
        """A stream of this front opened (+1) or ended (-1): a front with one open is not idle."""
        self.streams += delta


class Fronts:
    """The grants' fronts, and the access tokens they were reached with (verified once, remembered
    until they expire or their grant ends)."""

    def __init__(
        self, server: AuthorizationServer, api_url: str, upstream: str, jupyterhub_home: str, check_seconds: float
    ):
        self.server = server
        self.api_url, self.upstream, self.jupyterhub_home, self.check_seconds = (
            api_url,
            upstream,
            jupyterhub_home,
            check_seconds,
        )
        self._fronts: dict[str, GrantFront] = {}
        self._access: dict[str, GrantAccess] = {}
        self._ended: set[str] = set()  # grants ended: never remembered again
        self._revoked_since = time.time() - 60.0
        self._lock = threading.Lock()
        self._renewing = threading.Lock()
        self._renew_pool = ThreadPoolExecutor(RENEW_THREADS, thread_name_prefix="mcp-notebook-renew")
        self.listings = Listings()
        # one listen per kernel and URI set, shared by a user's grants; read and routed on the
        # service's own loop when it is built on it (an event goes out to its clients without a
        # thread hop: issue #42, sixth pass)
        self.listens = SharedListens(loop=_running_loop())
        self.sessions = SharedSessions(server.store)
        server.on_revoke.append(self.close_family)

    def remembered(self, token: str) -> GrantAccess | None:
        """The grant of an access token verified before and not expired (memory only)."""
        with self._lock:
            found = self._access.get(digest(token))
            if found is not None and found.family in self._ended:
                return None
        return found if found is not None and found.expires > time.time() else None

    def authenticate(self, token: str) -> GrantAccess | str:
        """The grant behind an access token, or why it is refused (from a thread)."""
        key = digest(token)
        row = self.server.store.token(token)
        if row is None or row.kind != "access":
            return "unknown token (a JupyterHub token is not an MCP token)"
        grant = self.server.store.grant(row.family)
        if grant is None or grant.revoked:
            return "this sign-in was revoked"
        if row.expires <= time.time():
            return "the access token expired"
        if grant.resource.rstrip("/") != self.server.resource.rstrip("/"):
            return "the token is for another resource"
        access = GrantAccess(row.family, grant.user, unseal(token, row.sealed), row.expires)
        with self._lock:
            if row.family in self._ended:  # revoked after the store was read: this request loses
                return "this sign-in was revoked"
            if len(self._access) > 10_000:
                self._access.clear()
            self._access[key] = access
        return access

    def get(self, access: GrantAccess) -> GrantFront:
        with self._lock:
            found = self._fronts.get(access.family)
            if found is None:
                link = JupyterHubLink(self.api_url, access.user, access.jupyterhub_token, self.check_seconds)
                directory = UserServers(link, self.upstream, self.jupyterhub_home, self.listings)
                front = KernelsFront(
                    directory, provider=UserKernels(directory, self.listens, access.user), instructions=SERVICE
                )
                self.sessions.attach(front, access.family)
                found = self._fronts[access.family] = GrantFront(front, link, time.monotonic())
            found.used = time.monotonic()
            return found

    def check(self, family: str, gf: GrantFront) -> None:
        """JupyterHub still accepts the grant's user (cached ``check_seconds``); "last used" is
        written at most once a minute (a write per read would cost more than the read)."""
        gf.link.model()
        now = time.monotonic()
        if now - gf.touched > 60.0:
            gf.touched = now
            self.server.store.touch(family)

    def close_family(self, family: str) -> None:
        with self._lock:
            if len(self._ended) > 100_000:  # the store refuses them anyway: this set only closes the race
                self._ended.clear()
            self._ended.add(family)
            found = self._fronts.pop(family, None)
            for key in [k for k, a in self._access.items() if a.family == family]:
                del self._access[key]
        if found is not None:
            found.front.provider.mute()  # its client hears nothing more, from now on
            found.link.jupyterhub_token = ""  # the grant's JupyterHub token is never used again
            threading.Thread(target=found.front.close, daemon=True).start()  # streams get their end

    def follow_revocations(self) -> None:
        """Grants another replica (or this one) revoked since the last look end here too: their
        remembered tokens and fronts go; sessions changed or ended at another replica follow
        (sessions.py). Called every second, off the event loop."""
        families, self._revoked_since = self.server.store.revoked_since(self._revoked_since)
        for family in families:
            if family not in self._ended:
                self.close_family(family)
        self.sessions.follow(self.front_of)

    def front_of(self, family: str) -> KernelsFront | None:
        with self._lock:
            found = self._fronts.get(family)
        return found.front if found is not None else None

    def renew_checks(self) -> None:
        """JupyterHub's answers about the fronts' users, asked again just before they go stale (every
        half second, off the event loop), so a read almost never waits for JupyterHub; a refusal ends
        the grant at the next sweep, as before. Grants whose answers come due together (fronts
        opened together) are asked ``RENEW_THREADS`` at a time: one after another, thirty took
        longer than the second asked ahead, and reads then waited for JupyterHub."""
        if not self._renewing.acquire(blocking=False):
            return  # the last round is still waiting for JupyterHub
        try:
            with self._lock:
                links = [gf.link for gf in self._fronts.values()]
            renew(links, self._renew_pool)
        finally:
            self._renewing.release()

    def sweep(self) -> None:
        """End grants JupyterHub no longer accepts (checked by their fronts' directories every second),
        and close fronts idle for long."""
        now = time.monotonic()
        with self._lock:
            items = list(self._fronts.items())
        for family, gf in items:
            if gf.link.refused is not None:
                self.server.revoke(family)
            elif gf.streams == 0 and now - gf.used > IDLE_SECONDS:
                with self._lock:
                    self._fronts.pop(family, None)
                threading.Thread(target=gf.front.close, daemon=True).start()

    def families(self) -> list[str]:
        with self._lock:
            return list(self._fronts)

    def close(self) -> None:
        with self._lock:
            fronts = list(self._fronts.values())
            self._fronts.clear()
        for gf in fronts:
            gf.front.close()
        self.listens.close()
        self._renew_pool.shutdown(wait=False, cancel_futures=True)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def renew(links: list[JupyterHubLink], pool: ThreadPoolExecutor) -> None:
    """Each grant's answer asked again if it goes stale soon (a fresh one costs nothing), as many at
    once as ``pool`` has threads; returns when all are done."""

    def one(link: JupyterHubLink) -> None:
        try:
            link.model(min(RENEW_AHEAD_SECONDS, link.check_seconds / 3))
        except Exception:  # refused: the sweep ends the grant; unreachable: a read asks and says so
            pass

    try:
        list(pool.map(one, links))
    except RuntimeError:  # closing: the pool is shut down
        pass


class McpHandler(SseReplies, web.RequestHandler):
    """POST/GET/DELETE of MCP for the signed-in user's kernels."""

    def initialize(self, fronts: Fronts, prm_url: str, origins: set[str]) -> None:
        self.fronts, self.prm_url, self.origins = fronts, prm_url, origins

    def check_xsrf_cookie(self) -> None:
        """Bearer tokens only: no cookie is ever accepted here, so no cross-site request can use one."""

    def _cors(self) -> bool:
        """False for a foreign Origin; for an allowed one the CORS headers a browser client needs
        (``protocol.security``'s, the same for every endpoint of the package)."""
        origin = self.request.headers.get("Origin")
        if not origin:
            return True
        if origin not in self.origins:
            return False
        for name, value in cors_headers(origin).items():
            self.set_header(name, value)
        return True

    def options(self) -> None:
        """A browser's preflight (allowed origins only; no credentials are involved)."""
        if not self._cors():
            raise web.HTTPError(403, "Origin not allowed")
        headers = {name.lower(): value for name, value in self.request.headers.get_all()}
        for name, value in preflight_headers(headers).items():
            self.set_header(name, value)
        self.set_status(204)
        self.finish()

    async def post(self) -> None:
        await self._serve()

    async def get(self) -> None:
        await self._serve()

    async def delete(self) -> None:
        await self._serve()

    def _refuse(self, status: int, error: str | None = None, description: str = "") -> None:
        challenge = f'Bearer resource_metadata="{self.prm_url}", scope="{SCOPE}"'
        if error:
            safe = description.replace("\\", "").replace('"', "'")
            challenge += f', error="{error}", error_description="{safe}"'
        self.set_status(status)
        self.set_header("WWW-Authenticate", challenge)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": error or "unauthorized", "error_description": description or "sign in"}))

    async def _serve(self) -> None:
        if not self._cors():
            raise web.HTTPError(403, "Origin not allowed (JupyterHubService.allowed_origins)")
        scheme, _, token = (self.request.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return self._refuse(401)
        loop = asyncio.get_running_loop()
        access = self.fronts.remembered(token.strip())  # no I/O: most requests end their checks here
        if access is None:
            access = await loop.run_in_executor(None, self.fronts.authenticate, token.strip())
        if isinstance(access, str):
            return self._refuse(401, "invalid_token", access)
        gf = self.fronts.get(access)
        try:
            if not gf.link.fresh():
                await loop.run_in_executor(None, self.fronts.check, access.family, gf)
        except JupyterHubRefused as exc:
            await loop.run_in_executor(None, self.fronts.server.revoke, access.family)  # the store: off the loop
            return self._refuse(401, "invalid_token", str(exc))
        except OSError as exc:
            raise web.HTTPError(503, f"JupyterHub did not answer: {exc}") from None
        headers = {name.lower(): value for name, value in self.request.headers.get_all()}
        sid = headers.get("mcp-session-id", "")
        if sid and len(sid) <= 200 and not gf.front.server.handshake.knows(sid):  # made at another replica?
            await loop.run_in_executor(None, self.fronts.sessions.adopt, gf.front, access.family, sid)
        for name in ("authorization", "cookie"):
            headers.pop(name, None)
        method = self.request.method or "GET"
        req = HttpRequest(method, headers, self.request.body if method == "POST" else b"", admitted=True)
        await self._exchange(gf.front.server, req, gf.count_stream)

    def on_connection_close(self) -> None:
        self._wake_stream()
