"""An MCP client that knows only the service URL: the official Python SDK's OAuth support, with a
"browser" (httpx and a cookie jar) that signs in on JupyterHub's login form and answers the consent
page the way a person would."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import secrets
from collections.abc import AsyncIterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import anyio
import httpx
import httpx2
from jhub import PASSWORD, LocalJupyterHub
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the browser stops at the redirect
# What a browser says of a page it opens itself (a link followed, a redirect) and of a form the
# person submits with a click: the service accepts its sign-in pages only so (browser.py)
NAVIGATE = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
CLICK = NAVIGATE | {"Sec-Fetch-User": "?1"}
SECRETS: set[str] = set()  # every code, token and client secret the tests were given (none may be logged)


def _inputs(html: str) -> dict[str, str]:
    out = {}
    for tag in re.findall(r"<input[^>]*>", html):
        name = re.search(r"name=['\"]([^'\"]+)['\"]", tag)
        value = re.search(r"value=['\"]([^'\"]*)['\"]", tag)
        if name:
            out[name.group(1)] = unescape(value.group(1)) if value else ""
    return out


def _action(html: str, base: str) -> str:
    found = re.search(r"<form[^>]*action=['\"]([^'\"]*)['\"]", html)
    return urljoin(base, unescape(found.group(1))) if found else base


class Browser:
    """A person at a browser, signed in (or not yet) to JupyterHub as ``user``."""

    def __init__(self, public: str, user: str, password: str = PASSWORD):
        self.public, self.user, self.password = public, user, password
        self.http = httpx.Client(timeout=60)
        self.pages: list[str] = []  # the consent pages seen

    def authorize(self, url: str, decision: str = "allow", answer: bool = True) -> httpx.Response:
        """From the authorization URL to the response that leaves JupyterHub (the redirect back to the
        client), or the first page that is neither the login form nor the consent page."""
        r = self.http.get(url, headers=NAVIGATE | {"Sec-Fetch-Site": "cross-site"})
        for _ in range(25):
            if r.is_redirect:
                target = urljoin(str(r.url), r.headers["location"])
                if not target.startswith(self.public):
                    return r
                r = self.http.get(target, headers=NAVIGATE)
            elif r.status_code == 200 and 'name="password"' in r.text.replace("'", '"'):
                form = _inputs(r.text) | {"username": self.user, "password": self.password}
                r = self.http.post(_action(r.text, str(r.url)), data=form, headers=CLICK)
            elif r.status_code == 200 and "name='csrf'" in r.text and answer:
                self.pages.append(r.text)
                form = _inputs(r.text) | {"decision": decision}
                r = self.http.post(str(r.url), data=form, headers=CLICK)
            else:
                return r
        raise AssertionError("the sign-in did not end")


def code_of(resp: httpx.Response) -> dict[str, str]:
    """The query of the redirect back to the client."""
    assert resp.is_redirect, (resp.status_code, resp.text[:500])
    query = {k: v[0] for k, v in parse_qs(urlsplit(resp.headers["location"]).query).items()}
    if "code" in query:
        SECRETS.add(query["code"])
    return query


def remember(resp: httpx.Response) -> httpx.Response:
    """Note the secrets of a token or registration response."""
    try:
        body = resp.json()
    except ValueError:
        return resp
    if isinstance(body, dict):
        SECRETS.update(str(body[k]) for k in ("access_token", "refresh_token", "client_secret") if body.get(k))
    return resp


class Storage:
    """The SDK's token storage, in memory (a test reads it)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.history: list[OAuthToken] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)
        SECRETS.update(t for t in (tokens.access_token, tokens.refresh_token) if t)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def provider(
    url: str, browser: Browser, storage: Storage, client_metadata_url: str | None = None, name: str = "Test assistant"
) -> OAuthClientProvider:
    box: dict[str, AuthorizationCodeResult] = {}

    async def redirect_handler(authorization_url: str) -> None:
        resp = await anyio.to_thread.run_sync(browser.authorize, authorization_url)
        q = code_of(resp)
        box["result"] = AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))

    async def callback_handler() -> AuthorizationCodeResult:
        return box.pop("result")

    metadata = OAuthClientMetadata(
        client_name=name,
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(
        url, metadata, storage, redirect_handler, callback_handler, client_metadata_url=client_metadata_url
    )


@contextlib.asynccontextmanager
async def connect(url: str, auth: Any, mode: str = "auto") -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(60, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            yield client


class MetadataHost:
    """A client's metadata document on https://localhost (a self-signed certificate the service is
    told to trust, and ``localhost`` allowed although it is loopback: the test configuration)."""

    def __init__(self, base: Path):
        import datetime
        import http.server
        import ssl
        import threading

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        self.ca_file = base / "cimd-ca.pem"
        self.ca_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file = base / "cimd-key.pem"
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        self.docs: dict[str, bytes] = {}
        docs = self.docs

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = docs.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body or b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.ca_file, key_file)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, path: str, doc: dict[str, Any] | None = None, host: str = "localhost") -> str:
        """Serve a client metadata document at ``path``; its URL (the client_id)."""
        url = f"https://{host}:{self.port}{path}"
        body = doc or {
            "client_id": url,
            "client_name": "Metadata document assistant",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        self.docs[path] = json.dumps(body).encode()
        return url

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the raw flow (for the attacks and the bench) ------------------------------------------------
def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def register(jupyterhub: LocalJupyterHub, name: str = "Raw client", redirect: str = REDIRECT) -> str:
    body = {"client_name": name, "redirect_uris": [redirect], "token_endpoint_auth_method": "none"}
    r = httpx.post(jupyterhub.service_url + "oauth/register", json=body, timeout=30)
    assert r.status_code == 201, r.text
    assert "client_secret" not in r.json()  # a public client gets no secret
    return r.json()["client_id"]


def authorize_url(jupyterhub: LocalJupyterHub, client_id: str, challenge: str | None, **extra: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "st-1",
        "resource": jupyterhub.mcp_url,
        "scope": "kernels:read",
    }
    if challenge is not None:
        params |= {"code_challenge": challenge, "code_challenge_method": "S256"}
    params |= extra
    return jupyterhub.service_url + "oauth/authorize?" + urlencode({k: v for k, v in params.items() if v is not None})


def exchange(
    jupyterhub: LocalJupyterHub, client_id: str, code: str, verifier: str | None, **extra: str
) -> httpx.Response:
    form = {"grant_type": "authorization_code", "code": code, "client_id": client_id, "redirect_uri": REDIRECT}
    if verifier is not None:
        form["code_verifier"] = verifier
    return remember(httpx.post(jupyterhub.service_url + "oauth/token", data=form | extra, timeout=30))


def refresh(jupyterhub: LocalJupyterHub, client_id: str, token: str) -> httpx.Response:
    form = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id}
    return remember(httpx.post(jupyterhub.service_url + "oauth/token", data=form, timeout=30))


def sign_in(jupyterhub: LocalJupyterHub, user: str) -> tuple[str, dict[str, Any]]:
    """A registered client's tokens for ``user`` (through JupyterHub's login and the consent page)."""
    client_id = register(jupyterhub)
    verifier, challenge = pkce()
    q = code_of(Browser(jupyterhub.public, user).authorize(authorize_url(jupyterhub, client_id, challenge)))
    assert q["state"] == "st-1" and q["iss"] == jupyterhub.service_url.rstrip("/")
    r = exchange(jupyterhub, client_id, q["code"], verifier)
    assert r.status_code == 200, r.text
    return client_id, r.json()
