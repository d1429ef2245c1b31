"""Client ID Metadata Documents: a client whose ``client_id`` is an https URL publishes its metadata
there; the service fetches it, safely and within bounds.

Safely means: https only, no user info, no fragment, a path; the host's addresses resolved once and
every one of them public in every form (an IPv4 address embedded in IPv6 — mapped, compatible,
NAT64, 6to4, Teredo — is unwrapped and checked; private, loopback, link-local, reserved refused
unless the host is in ``cimd_allow_hosts``), the connection made to the address checked (no second
lookup for a rebinding DNS to answer differently), the certificate checked against the host name;
no redirect followed; the document's own ``client_id`` must be the URL.

Within bounds means: fetches run on a small executor of their own (never the threads that serve
users' reads), one overall deadline covers connect, TLS, headers and body together (a watchdog
shuts the socket down when it passes), one fetch per URL at a time (callers of the same URL share
it), a full queue is refused at once, and a failure is remembered for ``failure_seconds``. The
caller is told only that the document could not be used; the reason goes to the log.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import ipaddress
import json
import logging
import socket
import ssl
import threading
import time
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)
GENERIC = "the client's metadata document could not be used"


class MetadataError(Exception):
    """The document could not be used (the message says why: for the log, not the caller)."""


LOOPBACK = ("localhost", "127.0.0.1", "::1")
UNSAFE_SCHEMES = ("javascript", "data", "file", "vbscript", "blob", "about")
NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
COMPATIBLE = ipaddress.ip_network("::/96")


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


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4, Teredo's client)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in net for net in NAT64) or (ip in COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(address: str) -> bool:
    """A global unicast address, and so is any IPv4 address it embeds."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if not ip.is_global or ip.is_multicast:
        return False
    inner = embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    return inner is None or (inner.is_global and not inner.is_multicast)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to one already-checked address, with SNI and the certificate for the host name; every
    step within ``deadline`` (``abort`` from another thread ends whatever step is blocked)."""

    def __init__(self, host: str, port: int, addresses: list[str], context: ssl.SSLContext, deadline: float):
        super().__init__(host, port, context=context, timeout=max(0.01, deadline - time.monotonic()))
        self._addresses, self._deadline = addresses, deadline
        self._raw: socket.socket | None = None
        self._aborted = False

    def connect(self) -> None:
        error: OSError = OSError("no address")
        for address in self._addresses:
            left = self._deadline - time.monotonic()
            if left <= 0 or self._aborted:
                raise TimeoutError("the deadline passed")
            try:
                self._raw = socket.create_connection((address, self.port), left)
                break
            except OSError as exc:
                error = exc
        else:
            raise error
        if self._aborted:
            raise TimeoutError("the deadline passed")
        self.sock = self._context.wrap_socket(self._raw, server_hostname=self.host)

    def abort(self) -> None:
        """The deadline passed: wake the blocked step (a shutdown, unlike a close, wakes a recv)."""
        self._aborted = True
        for sock in (self.sock, self._raw):  # the TLS socket once wrapped (wrapping detaches the raw one)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class MetadataFetcher:
    """Fetches and caches client metadata documents (``fetch`` from the event loop; the work runs
    on the fetcher's own threads)."""

    def __init__(
        self,
        allow_hosts: list[str],
        ca_file: str = "",
        max_bytes: int = 5120,
        timeout: float = 5.0,
        cache_seconds: float = 600.0,
        workers: int = 4,
        queue: int = 16,
        failure_seconds: float = 60.0,
    ):
        self.allow_hosts = set(allow_hosts)
        self.context = ssl.create_default_context(cafile=ca_file or None)
        self.max_bytes, self.timeout, self.cache_seconds = max_bytes, timeout, cache_seconds
        self.queue, self.failure_seconds = queue, failure_seconds
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._failed: dict[str, tuple[float, str]] = {}
        self._running: dict[str, concurrent.futures.Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="mcp-notebook-cimd")

    def cached(self, url: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._cache.get(url)
        return found[1] if found is not None and found[0] > time.monotonic() else None

    def _start(self, url: str) -> concurrent.futures.Future[dict[str, Any]]:
        """The fetch of ``url`` under way (shared), or a new one; :class:`MetadataError` when the
        URL failed lately or the queue is full."""
        now = time.monotonic()
        with self._lock:
            failed = self._failed.get(url)
            if failed is not None and failed[0] > now:
                raise MetadataError(f"failed {self.failure_seconds:.0f} s ago or less: {failed[1]}")
            running = self._running.get(url)
            if running is not None:
                return running
            if len(self._running) >= self.queue:
                raise MetadataError("too many metadata documents being fetched: try again later")
            future = self._running[url] = self._pool.submit(self._fetch_now, url, now + self.timeout)
        return future

    async def fetch(self, url: str) -> dict[str, Any]:
        """The client's metadata (cached), or :class:`MetadataError` (its text is for the log)."""
        found = self.cached(url)
        if found is not None:
            return found
        future = self._start(url)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.timeout + 1.0)
        except TimeoutError:  # the thread is stuck beyond its own deadline (DNS): answer anyway
            raise MetadataError("no answer within the deadline") from None

    def _fetch_now(self, url: str, deadline: float) -> dict[str, Any]:
        """Fetch within ``deadline`` (set when the fetch was asked for: time queued counts)."""
        try:
            doc = self._validate(url, self._get(url, deadline))
        except MetadataError as exc:
            with self._lock:
                if len(self._failed) > 4096:
                    self._failed.clear()
                self._failed[url] = (time.monotonic() + self.failure_seconds, str(exc))
                self._running.pop(url, None)
            raise
        except BaseException:
            with self._lock:
                self._running.pop(url, None)
            raise
        with self._lock:
            if len(self._cache) > 1024:
                self._cache.clear()
            self._cache[url] = (time.monotonic() + self.cache_seconds, doc)
            self._running.pop(url, None)
        return doc

    def _addresses(self, host: str, port: int) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise MetadataError(f"the client_id host {host} does not resolve") from exc
        addresses = [info[4][0] for info in infos]
        if not addresses:
            raise MetadataError(f"the client_id host {host} does not resolve")
        if host not in self.allow_hosts and not all(is_public(a) for a in addresses):
            raise MetadataError(f"the client_id host {host} is not a public address: refused")
        return addresses

    def _get(self, url: str, deadline: float) -> bytes:
        host, port, path = _check_url(url)
        if time.monotonic() >= deadline:
            raise MetadataError("waited for a fetcher thread past the deadline")
        addresses = self._addresses(host, port)
        conn = _PinnedHTTPS(host, port, addresses, self.context, deadline)
        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), conn.abort)
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request("GET", path, headers={"Accept": "application/json", "User-Agent": "mcp-notebook"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise MetadataError(f"the client_id URL answered {resp.status}")
            body = b""
            while len(body) <= self.max_bytes and time.monotonic() < deadline:
                piece = resp.read1(4096)
                if not piece:
                    break
                body += piece
            if len(body) > self.max_bytes:
                raise MetadataError(f"the client metadata document is larger than {self.max_bytes} bytes")
            if time.monotonic() >= deadline or conn._aborted:
                raise MetadataError("the client_id URL took too long")
            return body
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            late = " (the deadline passed)" if conn._aborted else ""
            raise MetadataError(f"the client_id URL could not be fetched{late}: {exc}") from None
        finally:
            watchdog.cancel()
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
