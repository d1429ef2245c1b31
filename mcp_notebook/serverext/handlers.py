"""Tornado handlers: the authenticated MCP pipe to a kernel's hub, and the list of kernels with hubs.

Every handler authenticates with the Jupyter server's own identity provider (token header,
``Bearer``, or the browser's cookie plus XSRF) before it reads a body; none is reachable
without it, OPTIONS included. The pipe copies bytes and never parses MCP content.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web
from tornado.iostream import StreamClosedError

from .. import hop_trace
from ..allkernels.sse_replies import no_delay
from ..hubclient.aio import UpstreamResponse, request
from ..hubclient.rules import HUB_SCHEME, LOOK_AGAIN_STATUS, LOOKUPS, REASON_HEADER, UpstreamError, authorization
from ..protocol.exchange import HttpRequest
from .control_client import ChannelResponse, KernelChannel
from .hubs import HubFinder, HubUnavailable, LoopbackHub
from .jupyterhub_scope import SCOPE_AUTHORIZER, ScopeAuthorizer, scope_user

AUTH_RESOURCE = "kernels"
# Request headers handed to the hub (everything else stays: cookies, Jupyter's Authorization, Origin).
FORWARD_REQUEST = frozenset({"accept", "content-type", "last-event-id", "mcp-session-id", "mcp-protocol-version"})
# Reply headers handed back (never WWW-Authenticate: a hub 401 is the server's problem, not the client's).
FORWARD_REPLY = frozenset({"content-type", "mcp-session-id", "mcp-protocol-version", "allow", "retry-after"})
FLUSH_BYTES = 64 * 1024


async def _settle(value: Any) -> Any:
    """Await what Jupyter returns when it is awaitable (``prepare`` became async in jupyter_server 2.x)."""
    return await value if inspect.isawaitable(value) else value


def _forwarded(name: str, allowed: frozenset[str]) -> bool:
    low = name.lower()
    return low in allowed or low.startswith("mcp-")


class _ExtensionHandler(ExtensionHandlerMixin, APIHandler):
    """What every route shares: Jupyter's auth on every verb; the extension's state and settings
    (``extensionapp``: serverext.extension.MCPNotebookExtension), its hub finder."""

    auth_resource = AUTH_RESOURCE
    _refusal: web.HTTPError | None = None  # set by a handler that refuses only after reading the body
    extensionapp: Any  # (ExtensionHandlerMixin's property, typed ExtensionApp there)
    accepts_jupyterhub_scope = True  # an MCP route: JupyterHub's mcp-notebook scope admits a token here
    _scope_authorizer: ScopeAuthorizer | None = None  # set when that scope admitted the request

    @property
    def authorizer(self) -> Any:  # type: ignore[override]
        """The scope's authorizer for a request the mcp-notebook scope admitted, else the server's."""
        return self._scope_authorizer or super().authorizer

    @property
    def finder(self) -> HubFinder:
        return self.extensionapp.finder

    async def prepare(self) -> None:  # type: ignore[override]
        await self._admit()

    async def _admit(self) -> None:
        """Jupyter's checks (identity, Host, XSRF for cookie users), then ours: refuse anyone unknown,
        and a present foreign Origin (403), token or not: the rule of every route of the extension.
        Under JupyterHub, a token carrying the mcp-notebook scope is admitted here (and only here,
        on the MCP routes: ``jupyterhub_scope.py``); the identity provider then returns its user."""
        if self.accepts_jupyterhub_scope:
            user = await scope_user(self)
            if user is not None:
                self._jupyterhub_user = user  # what JupyterHub's identity provider returns as is
                self._token_authenticated = True
                self._scope_authorizer = SCOPE_AUTHORIZER
        await _settle(JupyterHandler.prepare(self))
        if self.current_user is None:
            raise web.HTTPError(403, "authentication required")
        self.finder.loop = asyncio.get_running_loop()
        if not self.check_origin():
            raise web.HTTPError(403, "Origin not allowed (ServerApp.allow_origin)")

    def skip_check_origin(self) -> bool:
        """Unlike Jupyter's other APIs, a token does not waive the Origin check here: MCP wants a
        present, foreign Origin refused (403), and a browser on another origin needs
        ``ServerApp.allow_origin`` for CORS anyway. The focus and the listing follow the same rule
        (a foreign page holding a token must not move the focus of every bridge)."""
        return self.request.method == "OPTIONS"

    @web.authenticated
    @authorized(action="read")
    def options(self, *args: Any, **kwargs: Any) -> None:
        """No unauthenticated preflight: the extension answers nothing to an unknown caller."""
        if self._refusal is not None:
            raise self._refusal
        self.set_header("Allow", "GET, POST, DELETE, OPTIONS")
        self.set_status(204)
        self.finish()

    @web.authenticated
    def _unsupported(self, *args: Any, **kwargs: Any) -> None:
        if self._refusal is not None:
            raise self._refusal
        raise web.HTTPError(405)

    head = put = patch = post = delete = _unsupported  # every verb authenticated, as the template asks


class KernelsHandler(_ExtensionHandler):
    """``GET {base_url}mcp-notebook/kernels``: the kernels of this server that have a hub."""

    _track_activity = False  # a panel polling the list must not keep an idle server from being culled

    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        paths: dict[str, str] = {}
        sessions = self.settings.get("session_manager")
        if sessions is not None:
            try:
                for s in await sessions.list_sessions():
                    kid = (s.get("kernel") or {}).get("id")
                    if kid and s.get("path"):
                        paths[kid] = s["path"]
            except Exception:  # the listing must not fail because the session database did
                self.log.debug("mcp-notebook: could not list sessions", exc_info=True)
        base = self.base_url.rstrip("/")
        self.finder.loop = asyncio.get_running_loop()
        hubs = self.finder.hubs(paths, await self.finder.channel_hubs(self.finder.kernel_ids()))
        from ..serverside.watch import served_rows  # the kernels without a hub, served from this side

        hubs += served_rows(self.extensionapp.kernel_watch, self.finder, paths, {e["kernel_id"] for e in hubs})
        for entry in hubs:
            entry["mcp_path"] = f"{base}/mcp-notebook/kernels/{entry['kernel_id']}/mcp"
        self.finish(json.dumps(hubs))


@web.stream_request_body
class McpProxyHandler(_ExtensionHandler):
    """``{base_url}mcp-notebook/kernels/{kernel_id}/mcp``: POST/GET/DELETE piped to the kernel's hub."""

    _body: bytearray
    _task: asyncio.Task[None] | None = None
    _client_gone = False
    _overflow = False

    def request_for_here(self) -> HttpRequest:
        """This request for a server answered inside this process (the all-kernels front, a kernel
        served from the server's side): a refusal or an overflow raised, Jupyter's credential left out."""
        if self._refusal is not None:
            raise self._refusal
        if self._overflow:
            raise web.HTTPError(413, f"request body larger than {self.extensionapp.max_body_bytes} bytes")
        headers = {name.lower(): value for name, value in self.request.headers.get_all()}
        headers.pop("authorization", None)  # Jupyter's credential: what answers here never sees it
        method = self.request.method or "GET"
        return HttpRequest(method, headers, bytes(self._body) if method == "POST" else b"", admitted=True)

    async def prepare(self) -> None:  # type: ignore[override]
        """Authenticate before the body is read; refuse only after it was read (bounded).

        Answering while the client still sends makes the server close a socket with unread data:
        the client then gets a reset instead of the 403 or 413.
        """
        try:
            await self._admit()
        except web.HTTPError as exc:
            self._refusal = exc
        self._limit = 0 if self._refusal else int(self.extensionapp.max_body_bytes)
        self._body = bytearray()
        # beyond this, tornado answers 400 and drops the connection (no read of unbounded junk)
        self.request.connection.set_max_body_size(max(16 * self._limit, 1 << 20))

    def data_received(self, chunk: bytes) -> None:
        if self._overflow or len(self._body) + len(chunk) > self._limit:
            self._overflow = True
            self._body.clear()
            return
        self._body += chunk

    def on_connection_close(self) -> None:
        """The client went away: end the request to the hub (it closes a stream at once)."""
        self._client_gone = True
        if self._task is not None:
            self._task.cancel()

    @web.authenticated
    @authorized(action="execute")
    async def post(self, kernel_id: str) -> None:
        await self._proxy(kernel_id)

    @web.authenticated
    @authorized(action="execute")
    async def get(self, kernel_id: str) -> None:
        await self._proxy(kernel_id)

    @web.authenticated
    @authorized(action="execute")
    async def delete(self, kernel_id: str) -> None:
        await self._proxy(kernel_id)

    # -- the pipe --------------------------------------------------------------------------------
    def _hub_headers(self, hub: LoopbackHub) -> dict[str, str]:
        out = {name: value for name, value in self.request.headers.get_all() if _forwarded(name, FORWARD_REQUEST)}
        out["Host"] = hub.host_header  # the hub accepts only its loopback name (DNS-rebinding guard)
        return {**out, **authorization(hub.token, HUB_SCHEME)}

    async def _open(self, kernel_id: str, method: str, body: bytes | None) -> UpstreamResponse | ChannelResponse:
        """Send the request to the kernel's hub; one fresh lookup if the first address was stale or
        its token refused (the hub client's rules 2 and 3)."""
        last: Exception | None = None
        for _ in range(LOOKUPS):
            hub = await self.finder.reach(kernel_id)
            if isinstance(hub, KernelChannel):
                return await self._over_channel(hub, method, body)
            try:
                pool = self.extensionapp.pool
                reply = await request(hub.host, hub.port, method, hub.path, self._hub_headers(hub), body, pool=pool)
            except UpstreamError as exc:
                last = exc
                if exc.sent:  # the hub may have acted on it: never send a request twice
                    break
                await asyncio.sleep(0.05)  # a stale runtime file: look again once
                continue
            if reply.status == LOOK_AGAIN_STATUS:  # the hub was reloaded with a new token since the lookup
                reply.close()
                last = UpstreamError("the hub refused the server's token")
                continue
            return reply
        self.log.warning("mcp-notebook: the hub of kernel %s did not answer: %s", kernel_id, last)
        raise HubUnavailable(  # the detail (loopback address) stays in the server's log
            502, "hub_unreachable", f"The mcp-notebook hub of kernel {kernel_id} did not answer.", kernel_id
        )

    async def _over_channel(self, channel: KernelChannel, method: str, body: bytes | None) -> ChannelResponse:
        """The request over the kernel's control channel; once more if the hub had a new token."""
        headers = {name: value for name, value in self.request.headers.get_all() if _forwarded(name, FORWARD_REQUEST)}
        try:
            for attempt in range(1, LOOKUPS + 1):
                reply = await channel.request(method, headers, body)
                if reply.status != LOOK_AGAIN_STATUS or attempt == LOOKUPS:
                    return reply
                reply.close()  # a hub refusing the token acted on nothing: safe to send again
                channel.forget_info()
        except UpstreamError as exc:
            self.log.warning("mcp-notebook: the control channel of kernel %s: %s", channel.kernel_id, exc)
            raise HubUnavailable(502, "hub_unreachable", str(exc), channel.kernel_id) from None
        raise AssertionError("unreachable")

    async def _proxy(self, kernel_id: str) -> None:
        if self._refusal is not None:
            raise self._refusal
        if self._overflow:
            raise web.HTTPError(413, f"request body larger than {self.extensionapp.max_body_bytes} bytes")
        method = self.request.method or "GET"
        body = bytes(self._body) if method == "POST" else None
        self._task = asyncio.ensure_future(self._pipe(kernel_id, method, body))
        pipes: set[McpProxyHandler] = self.extensionapp.pipes
        pipes.add(self)  # the extension's stop ends it (and so the hub's side of it)
        try:
            await self._task
        except asyncio.CancelledError:
            if not self._client_gone:
                raise
        finally:
            pipes.discard(self)
            self._task = None

    async def end(self) -> None:
        """The server stops: drop the client's connection, which ends the pipe and closes the hub's side."""
        task = self._task
        self.on_connection_close()  # as if the client left (closing the connection does not call it)
        self.request.connection.close()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    def _unavailable(self, exc: HubUnavailable) -> None:
        """The proxy's own answer (not the hub's): marked by a header so clients can tell them apart."""
        self.set_status(exc.status)
        self.set_header(REASON_HEADER, exc.reason)
        self.finish(json.dumps(exc.body()))

    async def _pipe(self, kernel_id: str, method: str, body: bytes | None) -> None:
        try:
            reply = await self._open(kernel_id, method, body)
        except HubUnavailable as exc:
            self._unavailable(exc)
            return
        try:
            self.set_status(reply.status, reply.reason or None)
            self.clear_header("Content-Type")
            for name, value in reply.headers:
                if _forwarded(name, FORWARD_REPLY):
                    self.set_header(name, value)
            content_type = reply.header("content-type") or "application/json"
            streaming = "text/event-stream" in content_type
            if isinstance(reply, ChannelResponse) and reply.status == 401:  # the hub's, not the client's
                raise UpstreamError("the hub refused the server's token twice")
            if streaming:
                self.set_header("Cache-Control", "no-store")
                self.set_header("X-Accel-Buffering", "no")  # nginx in front of JupyterHub must not buffer
            elif reply.length is not None and reply.status not in (204, 304):
                self.set_header("Content-Length", str(reply.length))
            if streaming:
                no_delay(self)  # each event at once (and the flush below writes it)
                await self.flush()  # the client sees the stream open before the first event
            pending = 0
            async for piece in reply.chunks():
                if hop_trace.ON and streaming:  # whose stream: the service's listens send no User-Agent
                    agent = self.request.headers.get("User-Agent", "-").split("/")[0]
                    hop_trace.stamp("pipe.read", f"{hop_trace.uri_in(piece)} {agent}")
                self.write(piece)
                pending += len(piece)
                if streaming or pending >= FLUSH_BYTES:  # each event at once; a long JSON body by 64 KiB
                    pending = 0
                    await self.flush()  # waits while the client is slow: back-pressure on the hub
            if reply.complete:
                self.finish(set_content_type=content_type)
            else:
                self.request.connection.close()  # tell the client the reply broke, not that it ended
        except UpstreamError:
            if self._headers_written:
                self.request.connection.close()
            else:
                self.clear()
                self._unavailable(
                    HubUnavailable(502, "hub_unreachable", f"The hub of kernel {kernel_id} broke off.", kernel_id)
                )
        except StreamClosedError:
            self._client_gone = True
        finally:
            reply.close()
