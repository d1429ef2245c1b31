"""Client ID Metadata Documents: a client whose ``client_id`` is an https URL publishes its metadata
there; the service fetches it, safely.

Safely means: https only, no user info, no fragment, a path; the host's addresses resolved once and
every one of them public (private, loopback, link-local, reserved addresses refused unless the host
is in ``cimd_allow_hosts``), the connection made to the address checked (no second lookup for a
rebinding DNS to answer differently), the certificate checked against the host name; no redirect
followed; at most ``cimd_max_bytes`` read within ``cimd_timeout_seconds``; the document's own
``client_id`` must be the URL; a fetched document is reused for ``cimd_cache_seconds``.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
from typing import Any
from urllib.parse import urlsplit


class MetadataError(Exception):
    """The document could not be used (the message says why; it goes to the client)."""


LOOPBACK = ("localhost", "127.0.0.1", "::1")
UNSAFE_SCHEMES = ("javascript", "data", "file", "vbscript", "blob", "about")


def redirect_uri_problem(uri: str) -> str | None:
    """Why a client may not register ``uri`` as a redirect URI (None: it may): https, http on a
    loopback address (native apps, RFC 8252), or a private-use scheme; never a fragment."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return f"{uri!r} is not a URI"
    scheme = parts.scheme.lower()
    if not scheme or parts.fragment:
        return f"{uri!r}: a redirect URI is absolute and has no fragment"
    if scheme in UNSAFE_SCHEMES:
        return f"{uri!r}: the {scheme} scheme is not allowed"
    if scheme == "http" and parts.hostname not in LOOPBACK:
        return f"{uri!r}: http only on a loopback address (else https)"
    if scheme in ("http", "https") and not parts.hostname:
        return f"{uri!r} has no host"
    return None


def is_metadata_url(client_id: str | None) -> bool:
    return bool(client_id) and str(client_id).startswith("https://")


def _check_url(url: str) -> tuple[str, int, str]:
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise MetadataError("a client_id URL must be https")
    if parts.username or parts.password or parts.fragment:
        raise MetadataError("a client_id URL must not carry user info or a fragment")
    if parts.path in ("", "/") or "/./" in parts.path or "/../" in parts.path:
        raise MetadataError("a client_id URL must have a path without dot segments")
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, parts.port or 443, path


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to one already-checked address, with SNI and the certificate for the host name."""

    def __init__(self, host: str, port: int, addresses: list[str], context: ssl.SSLContext, timeout: float):
        super().__init__(host, port, context=context, timeout=timeout)
        self._addresses = addresses

    def connect(self) -> None:
        error: OSError = OSError("no address")
        for address in self._addresses:
            try:
                sock = socket.create_connection((address, self.port), self.timeout)
                break
            except OSError as exc:
                error = exc
        else:
            raise error
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


class MetadataFetcher:
    """Fetches and caches client metadata documents (thread-safe; call it off the event loop)."""

    def __init__(
        self,
        allow_hosts: list[str],
        ca_file: str = "",
        max_bytes: int = 5120,
        timeout: float = 5.0,
        cache_seconds: float = 600.0,
    ):
        self.allow_hosts = set(allow_hosts)
        self.context = ssl.create_default_context(cafile=ca_file or None)
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def cached(self, url: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._cache.get(url)
        return found[1] if found is not None and found[0] > time.monotonic() else None

    def fetch(self, url: str) -> dict[str, Any]:
        """The client's metadata (cached), or :class:`MetadataError`."""
        found = self.cached(url)
        if found is not None:
            return found
        doc = self._validate(url, self._get(url))
        with self._lock:
            if len(self._cache) > 1024:
                self._cache.clear()
            self._cache[url] = (time.monotonic() + self.cache_seconds, doc)
        return doc

    def _addresses(self, host: str, port: int) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise MetadataError(f"the client_id host {host} does not resolve") from exc
        addresses = [info[4][0] for info in infos]
        if not addresses:
            raise MetadataError(f"the client_id host {host} does not resolve")
        if host not in self.allow_hosts and not all(_public(a) for a in addresses):
            raise MetadataError(f"the client_id host {host} is not a public address: refused")
        return addresses

    def _get(self, url: str) -> bytes:
        host, port, path = _check_url(url)
        addresses = self._addresses(host, port)
        deadline = time.monotonic() + self.timeout
        conn = _PinnedHTTPS(host, port, addresses, self.context, self.timeout)
        try:
            conn.request("GET", path, headers={"Accept": "application/json", "User-Agent": "mcp-notebook"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise MetadataError(f"the client_id URL answered {resp.status}")
            body = b""
            while len(body) <= self.max_bytes:
                if time.monotonic() > deadline:
                    raise MetadataError("the client_id URL took too long")
                piece = resp.read1(4096)
                if not piece:
                    break
                body += piece
            if len(body) > self.max_bytes:
                raise MetadataError(f"the client metadata document is larger than {self.max_bytes} bytes")
            return body
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            raise MetadataError(f"the client_id URL could not be fetched: {exc}") from None
        finally:
            conn.close()

    @staticmethod
    def _validate(url: str, body: bytes) -> dict[str, Any]:
        try:
            doc = json.loads(body)
        except ValueError:
            raise MetadataError("the client metadata document is not JSON") from None
        if not isinstance(doc, dict):
            raise MetadataError("the client metadata document is not a JSON object")
        if doc.get("client_id") != url:
            raise MetadataError("the client metadata document's client_id is not its URL")
        uris = doc.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
            raise MetadataError("the client metadata document has no redirect_uris")
        for uri in uris:
            problem = redirect_uri_problem(uri)
            if problem:
                raise MetadataError(problem)
        method = doc.get("token_endpoint_auth_method", "none")
        if method != "none" or "client_secret" in doc:
            raise MetadataError("a metadata document client is public: token_endpoint_auth_method must be none")
        return doc
