"""The service's settings (``--JupyterHubService.name=value`` on its command line in
``c.JupyterHub.services``), and the URLs it derives from JupyterHub's environment."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from traitlets import Bool, Dict, Float, Int, List, Unicode
from traitlets.config import Configurable

SCOPE = "kernels:read"  # the one scope: read the kernels of the user's running servers


class JupyterHubService(Configurable):
    """Settings of the mcp-notebook JupyterHub service."""

    public_url = Unicode(
        "",
        help="The service's public URL (…/services/mcp-notebook/). Default: $JUPYTERHUB_PUBLIC_URL, which JupyterHub "
        "sets when c.JupyterHub.public_url is set (required: tokens are bound to the public endpoint URL).",
    ).tag(config=True)
    upstream_url = Unicode(
        "",
        help="Where the service reaches the users' servers (the proxy, http://…). Default: the origin of "
        "public_url. On Kubernetes: http://proxy-public.",
    ).tag(config=True)
    ip = Unicode("127.0.0.1", help="Address to listen on (0.0.0.0 when the proxy runs elsewhere: Kubernetes).").tag(
        config=True
    )
    port = Int(0, help="Port to listen on. Default: the port of $JUPYTERHUB_SERVICE_URL.").tag(config=True)
    db_path = Unicode(
        "mcp-notebook-oauth.sqlite",
        help="The sqlite file of clients, grants and token hashes (relative: the service's working dir). "
        "':memory:' keeps nothing across restarts.",
    ).tag(config=True)
    db_url = Unicode(
        "",
        help="The store's database, as JupyterHub's db_url: sqlite:///file or postgresql://user@host/db (one "
        "database for every replica). Default: the sqlite file db_path.",
    ).tag(config=True)
    access_token_seconds = Int(3600, help="Life of an access token (at most 3600).").tag(config=True)
    refresh_token_seconds = Int(
        14 * 24 * 3600, help="Life of a refresh token (a grant also ends when its JupyterHub token does)."
    ).tag(config=True)
    code_seconds = Int(60, help="Life of an authorization code.").tag(config=True)
    check_seconds = Int(
        5, help="How long JupyterHub's answer about a user (token valid, servers running) is trusted."
    ).tag(config=True)
    clients = List(
        Dict(),
        help="Pre-registered clients: dicts with client_id, redirect_uris, optional client_name, client_secret "
        "(then the client authenticates with it), token_endpoint_auth_method.",
    ).tag(config=True)
    switch_interval = Float(
        0.001,
        help="Seconds a thread may hold the GIL while another waits (sys.setswitchinterval; Python's default "
        "0.005). The event loop, the listens' thread and the reads' threads share one GIL: a notification's two "
        "wake-ups each waited for a read's thread to give it up. 0: Python's default.",
    ).tag(config=True)
    dynamic_registration = Bool(True, help="Accept Dynamic Client Registration (RFC 7591).").tag(config=True)
    cimd = Bool(True, help="Accept Client ID Metadata Documents (an https URL as client_id).").tag(config=True)
    cimd_allow_hosts = List(
        Unicode(),
        help="Hosts (names or IP addresses) a metadata document may be fetched from although they resolve to a "
        "private, loopback or link-local address. Empty (the default): none.",
    ).tag(config=True)
    cimd_ca_file = Unicode("", help="A CA bundle for fetching metadata documents (default: the system's).").tag(
        config=True
    )
    cimd_max_bytes = Int(5120, help="Largest metadata document accepted.").tag(config=True)
    cimd_timeout_seconds = Int(5, help="Time limit for fetching a metadata document.").tag(config=True)
    cimd_cache_seconds = Int(600, help="How long a fetched metadata document is reused.").tag(config=True)
    cimd_failure_seconds = Int(
        60, help="How long a metadata document that could not be used is not fetched again."
    ).tag(config=True)
    registrations_per_minute = Int(10, help="Dynamic registrations accepted per calling address and minute.").tag(
        config=True
    )
    registration_burst = Int(20, help="Dynamic registrations accepted from one address at once.").tag(config=True)
    max_clients = Int(10_000, help="Dynamically registered clients kept in all (unused ones are purged).").tag(
        config=True
    )
    unused_client_seconds = Int(24 * 3600, help="A registered client that got no grant is forgotten after this.").tag(
        config=True
    )
    pending_sign_ins = Int(1000, help="Sign-ins (authorization requests awaiting consent) pending at once.").tag(
        config=True
    )
    pending_per_address = Int(20, help="Sign-ins pending at once from one calling address.").tag(config=True)
    allowed_origins = List(
        Unicode(), help="Origins (besides JupyterHub's own) whose browsers may call the MCP endpoint."
    ).tag(config=True)
    admin_scope = Unicode(
        "admin:users",
        help="A JupyterHub scope whose holders may list and revoke every user's MCP clients (admins have it).",
    ).tag(config=True)

    def resolved_public_url(self) -> str:
        url = self.public_url or os.environ.get("JUPYTERHUB_PUBLIC_URL", "")
        if not url:
            raise SystemExit(
                "mcp-notebook service: set c.JupyterHub.public_url (or --JupyterHubService.public_url): "
                "tokens are bound to the endpoint's public URL"
            )
        return url if url.endswith("/") else url + "/"

    def resolved_upstream(self) -> str:
        url = self.upstream_url or "{0.scheme}://{0.netloc}".format(urlsplit(self.resolved_public_url()))
        if urlsplit(url).scheme != "http":
            raise SystemExit(
                f"mcp-notebook service: the users' servers are reached over plain http inside the deployment, "
                f"not {url}: set --JupyterHubService.upstream_url to where the proxy listens "
                "(http://127.0.0.1:8000 behind a TLS-terminating web server; http://proxy-public on Kubernetes)"
            )
        return url.rstrip("/")

    def resolved_port(self) -> int:
        if self.port:
            return self.port
        return urlsplit(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101")).port or 80
