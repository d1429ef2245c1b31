"""The service process: settings, the authorization server, the fronts, the routes; ``main()``."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any as AnyType
from urllib.parse import urlsplit

from jupyterhub.services.auth import HubOAuth
from tornado import web
from tornado.ioloop import PeriodicCallback
from traitlets import Any, Instance
from traitlets.config import Application, Config

from ..heap import settle_heap
from ..version import __version__
from . import log_redaction
from .browser import plain_http_warning
from .cimd import MetadataFetcher
from .config import JupyterHubService
from .endpoint import Fronts, McpHandler
from .limits import PendingSignIns, RateLimit
from .oauth import AuthorizationServer
from .store import Store
from .web import (
    AuthorizeHandler,
    ConsentHandler,
    GrantsHandler,
    KeysHandler,
    OAuthCallbackHandler,
    ProtectedResourceHandler,
    RegisterHandler,
    RevokeHandler,
    ServerMetadataHandler,
    Site,
    TokenHandler,
    log_request,
)

MAX_BODY_BYTES = 4 * 1024 * 1024
READ_THREADS = 64  # MCP requests handled at once (each on a thread: it waits on a user's server)


class SharedStateHubOAuth(HubOAuth):
    """JupyterHub's OAuth client for the service, its sign-in states in the store: HubOAuth keeps
    them in the process, so a sign-in sent to one replica and called back at another would fail."""

    store = Any(None, allow_none=True)

    def generate_state(self, next_url: str | None = None, **extra_state: AnyType) -> str:
        if self.store is None:
            return super().generate_state(next_url, **extra_state)
        state_id = secrets.token_urlsafe(16)
        self.store.save_hub_state(state_id, {"next_url": next_url, **extra_state})
        return state_id

    def _decode_state(self, state_id: str, /) -> dict[str, AnyType]:
        if self.store is None:
            return super()._decode_state(state_id)
        return self.store.hub_state(state_id) or {}

    def clear_oauth_state(self, state_id: str) -> None:
        if self.store is None:
            return super().clear_oauth_state(state_id)
        self.store.drop_hub_state(state_id)


class Chores:
    """The service's periodic work (idle fronts swept, revocations and sessions followed, JupyterHub
    asked ahead, unused clients purged), on threads of its own: never on the event loop (a store
    query there holds every read back) nor in the reads' pool. A chore still running when its time
    comes again is skipped, not queued behind itself."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(4, thread_name_prefix="mcp-notebook-chores")
        self._timers: list[PeriodicCallback] = []

    def every(self, seconds: float, chore: Callable[[], object]) -> None:
        last: list[Future[object]] = []

        def tick() -> None:
            if last and not last[0].done():
                return
            last[:] = [self.pool.submit(chore)]
            last[0].add_done_callback(_log_failure)

        timer = PeriodicCallback(tick, seconds * 1000)
        timer.start()
        self._timers.append(timer)

    def stop(self) -> None:
        for timer in self._timers:
            timer.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)


def _log_failure(future: Future[object]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logging.getLogger(__name__).error("a periodic task failed", exc_info=future.exception())


def _server(settings: JupyterHubService, resource: str, issuer: str) -> AuthorizationServer:
    """The authorization server for ``resource``, its store and its clients."""
    fetcher = None
    if settings.cimd:
        fetcher = MetadataFetcher(
            list(settings.cimd_allow_hosts),
            settings.cimd_ca_file,
            settings.cimd_max_bytes,
            settings.cimd_timeout_seconds,
            settings.cimd_cache_seconds,
            failure_seconds=settings.cimd_failure_seconds,
        )
    store = Store(settings.db_path, settings.db_url)
    for client in settings.clients:
        metadata = {k: v for k, v in client.items() if k not in ("client_id", "client_secret")}
        store.save_client(client["client_id"], "config", metadata, client.get("client_secret"))
    return AuthorizationServer(
        store,
        fetcher,
        issuer,
        resource,
        settings.access_token_seconds,
        settings.refresh_token_seconds,
        settings.code_seconds,
    )


def build(settings: JupyterHubService, hub_auth: HubOAuth) -> tuple[web.Application, Fronts]:
    """The tornado application of the service."""
    public = settings.resolved_public_url()
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or "/services/mcp-notebook/"
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(public))
    server = _server(settings, public + "mcp", public.rstrip("/"))
    hub_base = os.environ.get("JUPYTERHUB_BASE_URL", "/")
    jupyterhub_home = origin + hub_base.rstrip("/") + "/hub/home"
    if isinstance(hub_auth, SharedStateHubOAuth):
        hub_auth.store = server.store
    fronts = Fronts(server, hub_auth.api_url, settings.resolved_upstream(), jupyterhub_home, settings.check_seconds)
    site = Site(
        server,
        fronts,
        prefix,
        public,
        jupyterhub_home,
        server.store.key("consent-csrf"),  # shared: any replica checks the consent form another served
        settings.admin_scope,
        pending=PendingSignIns(server.store, total=settings.pending_sign_ins, per_address=settings.pending_per_address),
        registrations=RateLimit(server.store, settings.registrations_per_minute, settings.registration_burst),
        max_clients=settings.max_clients,
    )
    origins = {origin, *settings.allowed_origins}
    prm_url = public + ".well-known/oauth-protected-resource"
    kw = {"site": site}
    routes = [
        (prefix + "mcp/?", McpHandler, {"fronts": fronts, "prm_url": prm_url, "origins": origins}),
        (prefix + r"\.well-known/oauth-protected-resource(?:/mcp)?", ProtectedResourceHandler, kw),
        (prefix + r"\.well-known/(?:openid-configuration|oauth-authorization-server)", ServerMetadataHandler, kw),
        (prefix + r"\.well-known/jwks\.json", KeysHandler, kw),
        (prefix + "oauth/authorize", AuthorizeHandler, kw),
        (prefix + "oauth/consent", ConsentHandler, kw),
        (prefix + "oauth/token", TokenHandler, kw),
        (prefix + "oauth/register", RegisterHandler, kw),
        (prefix + "oauth/revoke", RevokeHandler, kw),
        (prefix + "oauth_callback", OAuthCallbackHandler),
        (prefix + r"api/grants/?", GrantsHandler, kw),
        (prefix + r"api/grants/(?P<family>[\w-]+)", GrantsHandler, kw),
    ]
    if not settings.dynamic_registration:
        routes = [r for r in routes if r[1] is not RegisterHandler]
    app = web.Application(
        routes,
        cookie_secret=server.store.key("cookie"),  # shared by the replicas
        hub_auth=hub_auth,
        login_url=hub_auth.login_url,
        xsrf_cookies=False,
        log_function=log_request,
        mcp_notebook_public=public,
    )
    return app, fronts


OLD_SETTINGS = "MCPNotebookService"  # the settings' name before the rename (deprecated, one release)


def adopt_old_settings(config: Config, log: logging.Logger) -> None:
    """``--MCPNotebookService.NAME`` still sets ``JupyterHubService.NAME`` (the new spelling wins
    where both are given), with a warning naming the new spelling (names only: never a value)."""
    if OLD_SETTINGS not in config:
        return
    old = config[OLD_SETTINGS]
    names = sorted(old)
    log.warning(
        "mcp-notebook: --%s.* is deprecated and will be removed in the next release: spell it --%s.* (%s)",
        OLD_SETTINGS,
        JupyterHubService.__name__,
        ", ".join(f"--{JupyterHubService.__name__}.{n}" for n in names),
    )
    merged = Config({JupyterHubService.__name__: old})
    merged.merge(Config({JupyterHubService.__name__: config[JupyterHubService.__name__]}))
    config.merge(merged)


class JupyterHubServiceApp(Application):
    """``python -m mcp_notebook.jupyterhub_service``."""

    name = "mcp-notebook-jupyterhub-service"
    version = __version__
    description = "One MCP endpoint for every user of a JupyterHub (run by JupyterHub as a service)."
    classes = [JupyterHubService]
    service = Instance(JupyterHubService)

    def start(self) -> None:
        logging.getLogger().setLevel(self.log_level)  # --JupyterHubServiceApp.log_level=DEBUG: every library's
        log_redaction.install(self.log)
        adopt_old_settings(self.config, self.log)
        self.service = JupyterHubService(parent=self)
        public = self.service.resolved_public_url()
        warning = plain_http_warning(public)
        if warning:
            self.log.warning(warning)
        hub_auth = SharedStateHubOAuth.instance(
            api_token=os.environ.get("JUPYTERHUB_API_TOKEN", ""),
            cache_max_age=5,
            # Secure over https; scoped to the service's path (a __Host- cookie would reach every path of
            # the origin, other users' servers included, and this one holds a JupyterHub token):
            # __Host- only when JupyterHub enables it (per-user subdomains), which HubOAuth reads itself
            cookie_options={"secure": True, "samesite": "Lax"}
            if public.startswith("https://")
            else {"samesite": "Lax"},
        )
        port = self.service.resolved_port()

        async def serve() -> None:
            app, fronts = build(self.service, hub_auth)  # on the loop: the fronts' listens run on it
            # the reads' threads: each waits on a user's server (a busy cell: up to a minute), so
            # every read gets one at once rather than queueing behind others (the loop's default
            # pool has min(32, cores + 4) threads: 6 on two cores, the tail of 50 users' reads)
            reads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="mcp-notebook-read")
            asyncio.get_running_loop().set_default_executor(reads)
            app.listen(port, self.service.ip, max_body_size=MAX_BODY_BYTES)
            unused = self.service.unused_client_seconds
            chores = Chores()
            chores.every(1.0, fronts.sweep)
            chores.every(1.0, fronts.follow_revocations)
            chores.every(0.5, fronts.renew_checks)
            chores.every(600.0, lambda: fronts.server.store.purge(unused))
            if self.service.switch_interval > 0:  # a notification's wake-ups wait less for a read's thread
                sys.setswitchinterval(self.service.switch_interval)
            settle_heap()  # last thing before serving: everything made so far lives as long as we do
            self.log.info("mcp-notebook: one MCP endpoint for every user at %smcp", self.service.resolved_public_url())
            try:
                await asyncio.Event().wait()
            finally:
                chores.stop()
                fronts.close()

        asyncio.run(serve())


def main(renamed_from: str = "") -> None:
    logging.basicConfig(level=logging.INFO)
    log_redaction.install()
    if renamed_from:
        logging.getLogger(__name__).warning(
            "mcp-notebook: python -m %s is deprecated and will be removed in the next release: "
            "run python -m mcp_notebook.jupyterhub_service",
            renamed_from,
        )
    JupyterHubServiceApp.launch_instance()
