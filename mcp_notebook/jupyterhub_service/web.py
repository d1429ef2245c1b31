"""The service's web side: metadata documents, the authorization endpoint (through JupyterHub's
sign-in), the consent page, the token and registration endpoints, and the grants API.

The sign-in is JupyterHub's: ``/oauth/authorize`` validates the client's request (authlib), keeps it
server-side under a random id bound to the browser by a signed cookie, and sends the browser
through JupyterHub's OAuth (``HubOAuth``) so the service gets a fresh token of the signed-in user;
the consent page names the client and what it will read, and only a form carrying that page's
CSRF token (an HMAC of the pending id and the user) issues a code. No page on JupyterHub's shared
origin can act for the person signed in (browser.py: navigation only, a click for the answer,
JupyterHub's own cookie rules); the grants API takes a token from the ``Authorization`` header only.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749.errors import OAuth2Error
from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web
from tornado.escape import xhtml_escape
from tornado.httputil import url_concat

from ..protocol.security import JUPYTERHUB_SCOPE
from .browser import PAGE_HEADERS, answer_problem, consent_cookie, page_problem
from .config import SCOPE
from .endpoint import Fronts
from .limits import MAX_BODY, PendingSignIns, RateLimit, Turns, caller_address, registration_problem
from .oauth import AuthorizationServer, Client, FormRequest, JsonBodyRequest, JupyterHubUser, Response

TOKEN_HEADER = re.compile(r"(?:token|bearer)\s+(\S+)\s*$", re.IGNORECASE)
access_log = logging.getLogger("tornado.access")


@dataclass
class Site:
    """What every handler needs."""

    server: AuthorizationServer
    fronts: Fronts
    prefix: str  # /services/mcp-notebook/
    public: str  # https://hub.example.org/services/mcp-notebook/
    jupyterhub_home: str
    secret: bytes
    admin_scope: str
    pending: PendingSignIns
    registrations: RateLimit
    max_clients: int = 10_000
    # token, revocation and registration work (client secrets, the store) off the event loop, on
    # threads of its own: a flood of token requests never takes the threads users' reads use
    oauth_pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="mcp-notebook-oauth")
    )
    # the unauthenticated endpoints' handlers take turns on the loop (a burst never runs ahead of reads)
    turns: Turns = field(default_factory=Turns)

    @property
    def secure(self) -> bool:
        """The public URL is https: __Host-/Secure cookies, and browsers send fetch metadata."""
        return self.public.startswith("https://")

    def csrf(self, pending: str, user: str) -> str:
        return hmac.new(self.secret, f"consent\0{pending}\0{user}".encode(), hashlib.sha256).hexdigest()

    async def off_loop(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.oauth_pool, fn, *args)


def _send(handler: web.RequestHandler, resp: Response, cors: bool = False) -> None:
    handler.set_status(resp.status)
    for name, value in resp.headers.items():
        handler.set_header(name, value)
    handler.set_header("Cache-Control", "no-store")
    if cors:
        handler.set_header("Access-Control-Allow-Origin", "*")
    if resp.status in (301, 302, 303, 307):
        handler.finish()
        return
    body = resp.body
    if isinstance(body, dict | list):
        handler.set_header("Content-Type", "application/json")
        body = json.dumps(body)
    handler.finish(body or b"")


def log_request(handler: web.RequestHandler) -> None:
    """Refusals and failures only, one line each with the handler's reason if it gave one (a line
    per read would cost the service more than the read); none for a handler that logged its line
    before answering (``logged``)."""
    status = handler.get_status()
    if status >= 400 and not getattr(handler, "logged", False):
        level = logging.WARNING if status < 500 else logging.ERROR
        ms = 1000.0 * handler.request.request_time()
        detail = getattr(handler, "log_detail", "")
        request = handler.request
        access_log.log(
            level, "%d %s %s %.1fms%s", status, request.method, request.path, ms, f": {detail}" * bool(detail)
        )


class QuietSummary:
    """Tornado names a request in its logs by its path only: never its query (codes, states)."""

    request: Any

    def _request_summary(self) -> str:
        return f"{self.request.method} {self.request.path} ({self.request.remote_ip})"


class _ServiceHandler(QuietSummary, web.RequestHandler):
    site: Site
    log_detail = ""  # why a request was refused, for its one log line (never for the caller)
    logged = False  # that line was written before the answer went

    def log_before_answer(self, status: int, detail: str) -> None:
        """The refusal's one line now, before the answer: whoever reads the log once answered finds it."""
        self.set_status(status)
        self.log_detail = detail
        log_request(self)
        self.logged = True

    def initialize(self, site: Site) -> None:
        self.site = site

    def page(self, status: int, title: str, body: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        # no form-action: browsers apply it to the redirect after the consent form too, and that
        # redirect goes to the client's own URI
        for name, value in PAGE_HEADERS.items():
            self.set_header(name, value)
        self.finish(
            f"<!doctype html><html><head><meta charset='utf-8'><title>{xhtml_escape(title)}</title>"
            "<style>body{font-family:sans-serif;max-width:40em;margin:3em auto;line-height:1.5}</style></head>"
            f"<body><h1>{xhtml_escape(title)}</h1>{body}</body></html>"
        )

    def refuse_page(self, status: int, message: str) -> None:
        self.page(status, "Cannot sign in", f"<p>{xhtml_escape(message)}</p>")


class ProtectedResourceHandler(_ServiceHandler):
    """RFC 9728 metadata of the MCP endpoint."""

    def get(self) -> None:
        self.set_header("Access-Control-Allow-Origin", "*")
        self.finish(
            {
                "resource": self.site.server.resource,
                "authorization_servers": [self.site.server.issuer],
                "scopes_supported": [SCOPE],
                "bearer_methods_supported": ["header"],
                "resource_name": "Jupyter kernels on this JupyterHub (mcp-notebook)",
                "resource_documentation": self.site.jupyterhub_home,
            }
        )


class ServerMetadataHandler(_ServiceHandler):
    """RFC 8414 metadata, also at the OpenID discovery path clients try for an issuer with a path."""

    def get(self) -> None:
        self.set_header("Access-Control-Allow-Origin", "*")
        self.finish(self.site.server.metadata(self.site.public))


class KeysHandler(_ServiceHandler):
    """The (empty) key set the discovery document names: this server signs nothing."""

    def get(self) -> None:
        self.set_header("Access-Control-Allow-Origin", "*")
        self.finish({"keys": []})


class AuthorizeHandler(HubOAuthenticated, _ServiceHandler):
    """The authorization endpoint: validate, remember, and send the browser through JupyterHub."""

    async def prepare(self) -> None:  # type: ignore[override]
        if not await self.site.turns.take():
            self.refuse_page(503, "Too many sign-ins are being started: try again in a minute.")

    async def get(self) -> None:
        site = self.site
        problem = page_problem(self.request.headers, site.secure)
        if problem:
            return self.refuse_page(403, problem)
        req = FormRequest("GET", site.public + "oauth/authorize", dict(self.request.headers), self.request.query)
        refused = await site.server.fetch_client_metadata(req.payload.client_id)
        # the answer takes a turn too: the fetches of a burst fail together at their deadline (a full
        # queue: answer anyway)
        await site.turns.take()
        if refused:
            self.log_before_answer(400, refused[1])
            return self.refuse_page(400, f"This client cannot sign in here: {refused[0]}.")
        try:
            site.server.get_consent_grant(req)
        except OAuth2Error as error:
            return self.oauth_error(req, error)
        address = caller_address(self.request.headers, self.request.remote_ip)
        added = await site.off_loop(site.pending.add, self.request.query, address)
        if added is None:
            return self.refuse_page(503, "Too many sign-ins are in progress: try again in a few minutes.")
        pending, nonce = added
        name, attributes = consent_cookie(site.secure)
        self.set_secure_cookie(name, nonce, expires_days=None, **({"path": site.prefix} | attributes))
        hub_auth: HubOAuth = self.hub_auth
        params: dict[str, str] = {}
        verifier = None
        if getattr(hub_auth, "pkce_enabled", False):
            verifier, params["code_challenge"], params["code_challenge_method"] = (
                hub_auth.generate_pkce_code_challenge()
            )
        next_url = url_concat(site.prefix + "oauth/consent", {"pending": pending})
        kwargs = {"code_verifier": verifier} if verifier else {}
        params["state"] = hub_auth.set_state_cookie(self, next_url=next_url, **kwargs)
        self.redirect(url_concat(hub_auth.login_url, params))

    def oauth_error(self, req: FormRequest, error: OAuth2Error) -> None:
        """To the client's redirect URI only for a client from the service's config, once authlib
        validated the URI; else a page here: before the user has seen consent, a registered or
        metadata-document client's redirect URI is no place to send a browser (RFC 9700 §4.11.2)."""
        found = self.site.server.store.client(req.payload.client_id or "")
        if getattr(error, "redirect_uri", None) and found is not None and found[0] == "config":
            error.state = req.payload.state
            resp = self.site.server.handle_error_response(req, error)
            if resp.location:  # RFC 9207: error responses name the issuer too
                resp.location = url_concat(resp.location, {"iss": self.site.server.issuer})
            return _send(self, resp)
        return self.refuse_page(400, f"{error.error}: {error.description or 'invalid request'}")


def scopes_problem(hub_auth: HubOAuth, model: dict[str, Any]) -> str | None:
    """Why the JupyterHub token of a sign-in is refused (None: it has what the service needs and
    nothing that reaches more of the user's servers than their mcp-notebook routes)."""
    fix = "the administrator must set the service's oauth_client_allowed_scopes as docs/security.md shows"
    if any(str(scope).split("!", 1)[0] == "access:servers" for scope in model.get("scopes") or ()):
        return f"JupyterHub gave this service full access to your servers, more than it needs: {fix}."
    if not hub_auth.check_scopes({f"{JUPYTERHUB_SCOPE}!user={model.get('name')}"}, model):
        return f"JupyterHub did not give this service the {JUPYTERHUB_SCOPE} scope: {fix}."
    return None


class OAuthCallbackHandler(QuietSummary, HubOAuthCallbackHandler):
    """JupyterHub's OAuth callback, opened only as a page of its own (never fetched or framed)."""

    async def get(self) -> None:
        secure = str(self.settings.get("mcp_notebook_public", "")).startswith("https://")
        problem = page_problem(self.request.headers, secure)
        if problem:
            raise web.HTTPError(403, problem)
        await super().get()


class ConsentHandler(HubOAuthenticated, _ServiceHandler):
    """The consent page (GET) and its answer (POST)."""

    async def _context(self) -> tuple[str, str, str, str] | None:
        pending = self.get_argument("pending", "")
        cookie = self.get_secure_cookie(consent_cookie(self.site.secure)[0], max_age_days=1)
        found = await self.site.off_loop(self.site.pending.get, pending) if pending else None
        if found is None or cookie is None or not hmac.compare_digest(cookie, found[1].encode()):
            self.refuse_page(400, "This sign-in request is unknown or expired: start again from your assistant.")
            return None
        # JupyterHub's cookie, read as JupyterHub reads it for its own pages (its XSRF rules included)
        model = await self.hub_auth._get_user_cookie(self)
        token = self.hub_auth._get_token_cookie(self) if model else None
        if not model or not token or model.get("kind", "user") != "user":
            self.refuse_page(403, "Sign in to JupyterHub first: start again from your assistant.")
            return None
        problem = scopes_problem(self.hub_auth, model)
        if problem:
            self.hub_auth.clear_cookie(self)  # the browser keeps no token the service refused to use
            self.refuse_page(403, problem)
            return None
        return pending, model["name"], token, found[0]

    def _grant(self, query: str) -> tuple[FormRequest, Any]:
        req = FormRequest("GET", self.site.public + "oauth/authorize", dict(self.request.headers), query)
        return req, self.site.server.get_consent_grant(req)

    async def get(self) -> None:
        problem = page_problem(self.request.headers, self.site.secure)
        if problem:
            return self.refuse_page(403, problem)
        ctx = await self._context()
        if ctx is None:
            return
        pending, user, _, query = ctx
        try:
            req, _ = self._grant(query)
        except OAuth2Error as error:
            return self.refuse_page(400, f"{error.error}: {error.description}")
        client: Client = req.client
        redirect = urlsplit(req.payload.redirect_uri or client.get_default_redirect_uri() or "")
        self.page(200, "Allow access to your notebooks?", self._form(pending, user, client, redirect.netloc))

    def _form(self, pending: str, user: str, client: Client, back_to: str) -> str:
        e = xhtml_escape
        ident = f" ({e(client.client_id)})" if client.name != client.client_id else ""
        return (
            f"<p><b>{e(client.name)}</b>{ident} asks to read, as <b>{e(user)}</b>, the kernels of your running "
            "servers on this JupyterHub: their variables, data frames, executed cells and their outputs, and "
            "the notebook documents, and to be told when they change.</p>"
            "<p>For this, the mcp-notebook service keeps a JupyterHub token of yours that reaches only the "
            "mcp-notebook routes of your servers and the list of your servers. Neither the assistant nor the "
            "service can run code, read or write files, open terminals, start or stop servers, or reach other "
            "users' servers. The access lasts until you or an administrator revoke it, or your JupyterHub "
            "sign-in ends.</p>"
            f"<p>After you answer, you go back to <b>{e(back_to)}</b>.</p>"
            "<form method='post'>"
            f"<input type='hidden' name='pending' value='{e(pending)}'>"
            f"<input type='hidden' name='csrf' value='{self.site.csrf(pending, user)}'>"
            f"<input type='hidden' name='_xsrf' value='{e(self.xsrf_token.decode())}'>"
            "<button name='decision' value='allow'>Allow</button> "
            "<button name='decision' value='deny'>Deny</button></form>"
        )

    async def post(self) -> None:
        problem = answer_problem(self.request.headers, self.site.secure)
        if problem:
            return self.refuse_page(403, problem)
        ctx = await self._context()
        if ctx is None:
            return
        pending, user, jupyterhub_token, query = ctx
        if not hmac.compare_digest(self.get_body_argument("csrf", ""), self.site.csrf(pending, user)):
            return self.refuse_page(403, "The form's CSRF token is missing or wrong: nothing was granted.")
        await self.site.off_loop(self.site.pending.pop, pending)
        name, attributes = consent_cookie(self.site.secure)
        self.clear_cookie(name, path=attributes.get("path", self.site.prefix), secure=self.site.secure)
        self.hub_auth.clear_cookie(self)  # the grant keeps the JupyterHub token (sealed); the browser needs it no more
        try:
            req, grant = self._grant(query)
        except OAuth2Error as error:
            return self.refuse_page(400, f"{error.error}: {error.description}")
        allowed = self.get_body_argument("decision", "") == "allow"
        grant_user = JupyterHubUser(user, jupyterhub_token) if allowed else None
        issue = functools.partial(
            self.site.server.create_authorization_response, req, grant_user=grant_user, grant=grant
        )
        _send(self, await self.site.off_loop(issue))  # the code is written to the store


class TokenHandler(_ServiceHandler):
    """The token endpoint (authorization code, refresh token)."""

    def check_xsrf_cookie(self) -> None:
        """Client credentials or PKCE, never cookies."""

    async def prepare(self) -> None:  # type: ignore[override]
        if self.request.method == "POST" and not await self.site.turns.take():
            self._cors()
            self.set_header("Retry-After", "5")
            error = {"error": "temporarily_unavailable", "error_description": "too many requests: try again"}
            _send(self, Response(503, error, {}))

    def options(self) -> None:
        self._cors()
        self.set_status(204)
        self.finish()

    def _cors(self) -> None:
        self.set_header("Access-Control-Allow-Origin", "*")
        self.set_header("Access-Control-Allow-Methods", "POST, OPTIONS")
        self.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")

    async def post(self) -> None:
        site = self.site
        req = FormRequest("POST", site.public + "oauth/token", dict(self.request.headers), "", self.request.body)
        if req.payload.grant_type == "refresh_token" and not await self._hub_still_agrees(req):
            resp = Response(400, {"error": "invalid_grant", "error_description": "the JupyterHub sign-in ended"}, {})
        else:
            resp = await site.off_loop(site.server.create_token_response, req)
        self._cors()
        _send(self, resp)

    async def _hub_still_agrees(self, req: FormRequest) -> bool:
        """A refresh is refused when JupyterHub no longer accepts the grant's user."""
        cred = await self.site.off_loop(self.site.server.refresh_credential, req.form.get("refresh_token", ""), None)
        if cred is None:
            return True  # authlib refuses it with the right error (and revokes a reused one)
        model = await HubOAuth.instance().user_for_token(cred.user.jupyterhub_token, use_cache=False, sync=False)
        if model is None or model.get("name") != cred.user.name:
            self.site.server.revoke(cred.family)
            return False
        return True


class RevokeHandler(TokenHandler):
    """RFC 7009 token revocation (the client's own grant ends)."""

    async def post(self) -> None:
        req = FormRequest("POST", self.site.public + "oauth/revoke", dict(self.request.headers), "", self.request.body)
        self._cors()
        _send(self, await self.site.off_loop(self.site.server.create_endpoint_response, "revocation", req))


@web.stream_request_body
class RegisterHandler(TokenHandler):
    """Dynamic Client Registration (RFC 7591). The body is streamed: its first ``MAX_BODY`` + 1
    bytes are kept and the rest dropped as it arrives (a body over the limit is refused whole), so an
    oversized one is never gathered and joined in memory. The turn is taken once the body is in, as
    a token request's (a request past the turns' queue is refused then: answering before the body
    is read would close a connection the proxy is still writing to)."""

    _body: bytearray

    async def prepare(self) -> None:  # type: ignore[override]
        self._body = bytearray()

    def data_received(self, chunk: bytes) -> None:
        room = MAX_BODY + 1 - len(self._body)
        if room > 0:
            self._body += chunk[:room]

    async def post(self) -> None:
        self._cors()
        if not await self.site.turns.take():
            self.set_header("Retry-After", "5")
            return self._refuse(503, "too many requests: try again")
        site = self.site
        try:
            data = json.loads(self._body or b"{}") if len(self._body) <= MAX_BODY else None
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return self._refuse(400, f"the metadata must be a JSON object of at most {MAX_BODY} bytes")
        problem = registration_problem(data)
        if problem:
            return self._refuse(400, problem)
        address = caller_address(self.request.headers, self.request.remote_ip)
        if not await site.off_loop(site.registrations.allow, address):
            return self._refuse(429, "too many registrations from this address: try again later")
        if await site.off_loop(site.server.store.count_clients, "dcr") >= site.max_clients:
            return self._refuse(503, "this server has as many registered clients as it keeps: try again later")
        req = JsonBodyRequest("POST", site.public + "oauth/register", dict(self.request.headers), data)
        _send(self, await site.off_loop(site.server.create_endpoint_response, "client_registration", req))

    def _refuse(self, status: int, description: str) -> None:
        _send(self, Response(status, {"error": "invalid_client_metadata", "error_description": description}, {}))


class GrantsHandler(_ServiceHandler):
    """``GET {prefix}api/grants``: the signed-in MCP clients (yours; every user's for an admin);
    ``DELETE {prefix}api/grants/{id}``: revoke one. A JupyterHub API token in the ``Authorization``
    header and nothing else (no cookie, no URL: no page can use a browser's sign-in here), with
    the scope to use this service; "admin" is the token's scopes (``admin_scope``), not the user's."""

    current_user: dict[str, Any]

    def check_xsrf_cookie(self) -> None:
        """Token-authenticated only (see prepare): no cookie is ever read here."""

    async def prepare(self) -> None:  # type: ignore[override]
        found = TOKEN_HEADER.match(self.request.headers.get("Authorization") or "")
        if found is None:
            raise web.HTTPError(403, "use a JupyterHub API token: Authorization: token …")
        hub_auth: HubOAuth = self.settings["hub_auth"]
        model = await hub_auth.user_for_token(found.group(1), sync=False)
        if not model or not hub_auth.check_scopes(hub_auth.access_scopes, model):
            raise web.HTTPError(403, "this token may not use the mcp-notebook service")
        self.current_user = model

    def _admin(self, model: dict[str, Any]) -> bool:
        return bool(self.settings["hub_auth"].check_scopes({self.site.admin_scope}, model))

    async def get(self, family: str = "") -> None:
        model = self.current_user
        store = self.site.server.store
        user = self.get_argument("user", None) if self._admin(model) else model["name"]
        grants = await self.site.off_loop(store.grants, user)
        self.finish(
            {
                "grants": [
                    {
                        "id": g.family,
                        "user": g.user,
                        "client_id": g.client_id,
                        "client_name": g.client_name,
                        "scope": g.scope,
                        "created": g.created,
                        "last_used": g.last_used,
                    }
                    for g in grants
                ]
            }
        )

    async def delete(self, family: str = "") -> None:
        model = self.current_user
        grant = await self.site.off_loop(self.site.server.store.grant, family) if family else None
        if grant is None or grant.revoked or (grant.user != model["name"] and not self._admin(model)):
            raise web.HTTPError(404, "no such grant")
        await self.site.off_loop(self.site.server.revoke, family)
        self.set_status(204)
        self.finish()
