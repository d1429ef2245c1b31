"""The one set of rules of every client of a hub (both faces, every caller): where a hub is
(:class:`Endpoint`), how it is told who we are (:func:`authorization`), how long we wait and why,
what is retried and how often, and the one error (:class:`UpstreamError`).

Retries, all of them (nothing else is ever sent twice):

1. **A kept-alive connection the hub closed while idle** (nothing came back): the request goes
   once more on a fresh connection; the hub never saw it (both faces, :data:`KEEPALIVE_RETRIES`).
2. **A refused token** (:data:`LOOK_AGAIN_STATUS`): a hub that answers 401 acted on nothing; its
   kernel restarted or it was reloaded with a new token. The caller looks the hub up again and
   sends once more (:data:`LOOKUPS` attempts in all): the bridge, the server extension's pipe.
3. **A hub that could not be reached** (``UpstreamError.sent`` false: refused, no route, a stale
   runtime file): the caller looks again, as for 2. The bridge goes further for its own client's
   requests: any failure (status 0) looks the hub up again once, since a kernel that restarted
   mid-request lost it anyway (``bridge/stdio.py``).
"""

from __future__ import annotations

import os
import ssl
from typing import NamedTuple
from urllib.parse import urlsplit

# -- timeouts (seconds), each with its reason -----------------------------------------------------
CONNECT_SECONDS = 10.0  # a hub is on this host or the server's: one that takes longer is not there
REPLY_SECONDS = 300.0  # the head of a reply: a tool call or a read may wait on a busy cell this long
CALL_SECONDS = 60.0  # a front's request: it answers its own client "the hub did not answer" sooner
LISTEN_OPEN_SECONDS = 10.0  # a listen is acknowledged at once; else the front retries it later
STREAM_IDLE_SECONDS = 60.0  # a stream silent this long is dead: a hub sends a keepalive every 15 s
LIST_SECONDS = 15.0  # a Jupyter server's kernel list (a file read and a session lookup)

# -- keep-alive ---------------------------------------------------------------------------------
POOL_IDLE_SECONDS = 30.0  # an idle connection is reused this long: well under a hub's idle timeout
POOL_MAX_IDLE = 8  # idle connections kept per hub (as many as a carrier's workers, and some)
POOL_MAX_HUBS = 1024  # hubs with idle connections; beyond, a connection is closed, not kept
KEEPALIVE_RETRIES = 1  # rule 1 above

# -- looking the hub up again -------------------------------------------------------------------
LOOK_AGAIN_STATUS = 401  # rule 2 above
LOOKUPS = 2  # the first lookup and one more

# -- the Jupyter server extension's answers (not its hubs'): the header that marks them
KERNELS_ROUTE = "mcp-notebook/kernels"  # under the server's base URL: its kernels with a hub
REASON_HEADER = "X-MCP-Notebook-Reason"  # unknown_kernel, no_hub, hub_unreachable, ...

# -- who we are ---------------------------------------------------------------------------------
HUB_SCHEME = "Bearer"  # a hub's token
SERVER_SCHEME = "token"  # a Jupyter server's token: every version takes "token", only recent ones "Bearer"


def authorization(token: str | None, scheme: str = HUB_SCHEME) -> dict[str, str]:
    """The ``Authorization`` header for ``token`` (none without a token)."""
    return {"Authorization": f"{scheme} {token}"} if token else {}


class Endpoint(NamedTuple):
    """Where a hub (or a Jupyter server) answers: HTTP or HTTPS, host, port, path."""

    https: bool
    host: str
    port: int
    path: str

    @classmethod
    def of(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        https = parts.scheme == "https"
        return cls(https, parts.hostname or "127.0.0.1", parts.port or (443 if https else 80), parts.path or "/mcp")

    @property
    def key(self) -> tuple[bool, str, int]:
        """What a kept-alive connection is kept under."""
        return self.https, self.host, self.port


class UpstreamError(Exception):
    """The hub could not be reached or answered something that is not HTTP/1.x.

    ``sent`` tells whether the request may have reached the hub (then it must not be repeated).
    """

    def __init__(self, message: str, sent: bool = True):
        super().__init__(message)
        self.sent = sent


_TLS: dict[tuple[str | None, str | None], ssl.SSLContext] = {}  # loading the CAs costs milliseconds


def tls_context() -> ssl.SSLContext:
    """The client context of HTTPS connections: the default one (the system's CAs, the host name
    checked), made once per ``SSL_CERT_FILE``/``SSL_CERT_DIR``, which it reads as http.client's does."""
    where = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _TLS.get(where)
    if context is None:
        context = _TLS[where] = ssl.create_default_context()
    return context


class ClosedWhileIdle(Exception):
    """The connection ended before a byte of the reply came back (the hub closed it while idle: it never
    saw the request, which may be sent again on a new connection)."""
