"""HTTP-level admission checks: Host and Origin (DNS rebinding), bearer token."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from ..lazy_re import LazyPatterns

# The JupyterHub custom scope that admits a token to the server extension's MCP routes and to
# nothing else of a single-user server (serverext/jupyterhub_scope.py; the JupyterHub service asks
# JupyterHub for it, filtered to the signed-in user: docs/security.md).
JUPYTERHUB_SCOPE = "custom:mcp-notebook:kernels"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})
_CACHE_SIZE = 256
_host_decisions: dict[tuple[str, tuple[str, ...]], bool] = {}
_origin_decisions: dict[tuple[str, tuple[str, ...]], bool] = {}


def _remember(cache: dict[tuple[str, tuple[str, ...]], bool], key: tuple[str, tuple[str, ...]], value: bool) -> bool:
    """Decisions are pure functions of (header value, allow-list): keep a few (clients reuse theirs)."""
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = value
    return value


def is_loopback_host(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1 (no port, brackets stripped)."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_host_header(value: str) -> str:
    """Host header without its port."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end > 0 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def host_allowed(headers: Mapping[str, str], extra_hosts: Iterable[str] = ()) -> bool:
    host = headers.get("host")
    if not host:
        return False
    key = (host, tuple(extra_hosts))
    known = _host_decisions.get(key)
    if known is not None:
        return known
    return _remember(_host_decisions, key, _host_allowed(host, key[1]))


def _host_allowed(host: str, extra_hosts: tuple[str, ...]) -> bool:
    name = split_host_header(host)
    return is_loopback_host(name) or _bare(name) in {_bare(h) for h in extra_hosts}


def origin_allowed(
    headers: Mapping[str, str], extra_origins: Iterable[str] = (), extra_hosts: Iterable[str] = ()
) -> bool:
    """No Origin (non-browser clients) is fine; a present one must be loopback, listed, or on an allowed host."""
    origin = headers.get("origin")
    if origin is None:
        return True
    hosts = tuple(extra_hosts)
    key = (origin, (*extra_origins, "\0", *hosts))  # one cache key for both lists
    known = _origin_decisions.get(key)
    if known is not None:
        return known
    return _remember(_origin_decisions, key, _origin_allowed(origin, tuple(extra_origins), hosts))


def _origin_allowed(origin: str, extra_origins: tuple[str, ...], extra_hosts: tuple[str, ...] = ()) -> bool:
    if origin in set(extra_origins):
        return True
    try:
        parts = urlsplit(origin)
        hostname = parts.hostname
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or hostname is None:
        return False
    return is_loopback_host(hostname) or hostname.lower() in {_bare(h) for h in extra_hosts}


def _bare(host: str) -> str:
    """An allowed-hosts entry as urlsplit reports a hostname: lower case, IPv6 without brackets."""
    host = host.strip().lower()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def token_valid(headers: Mapping[str, str], token: str) -> bool:
    """Constant-time check of ``Authorization: Bearer <token>``."""
    auth = headers.get("authorization", "")
    scheme, _, given = auth.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


# CORS, for hosts that run in a browser page (an MCP Apps host, the Inspector): only Origins that
# pass origin_allowed get here, and every request but the preflight still needs the token.
_CORS_REQUEST_HEADERS = (
    "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID"
)
_CORS_EXPOSED = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"
_cors: dict[str, dict[str, str]] = {}
_RE = LazyPatterns(header_name=r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")  # at the first preflight, or after loading


def cors_headers(origin: str) -> dict[str, str]:
    """The CORS fields of a reply to a request from an allowed ``origin`` (kept per origin)."""
    known = _cors.get(origin)
    if known is None:
        if len(_cors) >= _CACHE_SIZE:
            _cors.clear()
        known = _cors[origin] = {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Expose-Headers": _CORS_EXPOSED,
            "Vary": "Origin",
        }
    return known


def preflight_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The reply fields of a CORS preflight (OPTIONS) from an allowed Origin. The fields it asks
    for are allowed when they are plain header names (a revision may add ``Mcp-*`` fields): the
    token, not the field list, is what guards the hub."""
    out = {"Allow": "GET, POST, DELETE, OPTIONS"}
    origin = headers.get("origin")
    if origin is not None:
        asked = headers.get("access-control-request-headers", "")
        names = [n.strip() for n in asked.split(",") if n.strip()]
        plain = len(asked) <= 1000 and all(_RE.header_name.fullmatch(n) for n in names)
        out.update(cors_headers(origin))
        out["Access-Control-Allow-Methods"] = "GET, POST, DELETE"
        out["Access-Control-Allow-Headers"] = ", ".join(names) if names and plain else _CORS_REQUEST_HEADERS
        out["Access-Control-Max-Age"] = "600"
    return out
