"""The authorization server, on authlib: authorization code with PKCE (S256 only), rotating refresh
tokens, resource indicators, Dynamic Client Registration, RFC 9207's ``iss``, and the clients
(registered, from the config, or Client ID Metadata Documents).

authlib does the protocol; this module supplies its storage (store.py), a tornado adapter, and
the rules it leaves to the server: ``resource`` must name this endpoint, a refresh token works once
(presented again, its whole family is revoked), a code works once (replayed, the tokens it gave
are revoked).
"""

from __future__ import annotations

import secrets
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from authlib.oauth2 import AuthorizationServer as _AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, JsonPayload, JsonRequest, OAuth2Payload, OAuth2Request, grants
from authlib.oauth2.rfc6749.errors import InvalidGrantError, InvalidRequestError, OAuth2Error
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientMetadataClaims, ClientRegistrationEndpoint, InvalidRedirectURIError
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9207 import IssuerParameter

from .cimd import GENERIC, MetadataError, MetadataFetcher, is_metadata_url, redirect_uri_problem
from .config import SCOPE
from .store import Store, check_secret, unseal

AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]


def _canonical(uri: str) -> str:
    """A resource URI compared as MCP asks: scheme and host case-insensitive, no trailing slash."""
    parts = urlsplit(uri)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}" + (
        f"?{parts.query}" if parts.query else ""
    )


class InvalidTargetError(OAuth2Error):
    """RFC 8707: the ``resource`` is not this endpoint."""

    error = "invalid_target"


# -- requests and responses between tornado and authlib ----------------------------------------
class _Payload(OAuth2Payload):
    def __init__(self, values: dict[str, list[str]]):
        self._datalist = defaultdict(list, values)
        self._data = {k: v[0] for k, v in values.items() if v}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._datalist


class FormRequest(OAuth2Request):
    """An authorization or token request: query arguments and (for POST) the form body."""

    def __init__(self, method: str, uri: str, headers: dict[str, str], query: str, body: bytes = b""):
        super().__init__(method, uri, headers=headers)
        self._args = {k: v[0] for k, v in parse_qs(query).items()}
        form = parse_qs(body.decode("utf-8", "replace")) if body else {}
        self._form = {k: v[0] for k, v in form.items()}
        merged = parse_qs(query)
        for key, values in form.items():
            merged.setdefault(key, []).extend(values)
        self.payload = _Payload(merged)

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _Json(JsonPayload):
    def __init__(self, data: Any):
        self._data = data

    @property
    def data(self) -> Any:
        return self._data


class JsonBodyRequest(JsonRequest):
    def __init__(self, method: str, uri: str, headers: dict[str, str], data: Any):
        super().__init__(method, uri, headers)
        self.payload = _Json(data)


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def location(self) -> str | None:
        return self.headers.get("Location")

    @location.setter
    def location(self, value: str) -> None:
        self.headers["Location"] = value


# -- clients, users, codes, refresh credentials --------------------------------------------------
@dataclass
class Client(ClientMixin):
    client_id: str
    metadata: dict[str, Any]
    secret_hash: str | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return str(self.metadata.get("client_name") or self.client_id)

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        uris = self.metadata.get("redirect_uris") or []
        return uris[0] if len(uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str:
        return SCOPE

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in (self.metadata.get("redirect_uris") or [])

    def check_client_secret(self, client_secret: str) -> bool:
        return self.secret_hash is not None and check_secret(client_secret, self.secret_hash)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if endpoint != "token":
            return True
        want = self.metadata.get("token_endpoint_auth_method") or (
            "client_secret_basic" if self.secret_hash else "none"
        )
        return method == want

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class JupyterHubUser:
    """The signed-in user, the JupyterHub token the grant uses, and (once issued) the grant's family."""

    name: str
    jupyterhub_token: str = field(repr=False)  # never in a log, whoever prints this
    family: str | None = None


@dataclass
class Code:
    code: str = field(repr=False)
    row: dict[str, Any] = field(repr=False)
    user: JupyterHubUser = field(init=False)

    def __post_init__(self) -> None:
        self.user = JupyterHubUser(self.row["user"], self.row["jupyterhub_token"])

    def get_redirect_uri(self) -> str:
        return self.row["redirect_uri"]

    def get_scope(self) -> str:
        return self.row["scope"]

    @property
    def code_challenge(self) -> str:
        return self.row["challenge"]

    @property
    def code_challenge_method(self) -> str:
        return self.row["method"]


@dataclass
class RefreshCredential:
    token: str = field(repr=False)
    family: str
    client_id: str
    user: JupyterHubUser
    scope: str

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope


# -- grants ------------------------------------------------------------------------------------
class S256Only(CodeChallenge):
    """PKCE is required of every client, with S256 (``plain`` and a missing method are refused)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]
    DEFAULT_CODE_CHALLENGE_METHOD = "S256"

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: send code_challenge with code_challenge_method=S256")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("code_challenge_method must be S256")
        super().validate_code_challenge(grant, redirect_uri)


class CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS
    server: AuthorizationServer

    def validate_authorization_request(self) -> str:
        self.server.check_resource(self.request.payload.data.get("resource"))
        return super().validate_authorization_request()

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        fields = {
            "client_id": request.client.client_id,
            "user": request.user.name,
            "scope": SCOPE,
            "redirect_uri": data.get("redirect_uri") or request.client.get_default_redirect_uri(),
            "resource": self.server.resource,
            "challenge": data["code_challenge"],
            "method": data["code_challenge_method"],
        }
        self.server.store.save_code(code, fields, request.user.jupyterhub_token, time.time() + self.server.code_seconds)

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        row = self.server.store.code(code) if code else None
        if row is None or row["client_id"] != client.client_id:
            return None
        if row["used"]:  # replayed: what it gave is revoked too (RFC 6749 §4.1.2), even in flight
            family = self.server.store.replayed_code(code)
            if family:
                self.server.revoke(family)
            return None
        if row["expires"] < time.time():
            return None
        self.server.check_resource(self.request.payload.data.get("resource"))
        return Code(code, row)

    def delete_authorization_code(self, authorization_code: Code) -> None:
        """Nothing: the code was claimed before its tokens were made (authenticate_user)."""

    def authenticate_user(self, authorization_code: Code) -> JupyterHubUser:
        """The code's user, once the code is claimed for this exchange (PKCE checked already): of two
        exchanges in flight one gets it, the other is a replay."""
        if not self.server.store.use_code(authorization_code.code):
            family = self.server.store.replayed_code(authorization_code.code)
            if family:
                self.server.revoke(family)
            raise InvalidGrantError("the code was used already")
        return authorization_code.user


class RefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True
    server: AuthorizationServer

    def authenticate_refresh_token(self, refresh_token: str) -> RefreshCredential | None:
        return self.server.refresh_credential(refresh_token, self.request.payload.data.get("resource"))

    def authenticate_user(self, credential: RefreshCredential) -> JupyterHubUser:
        """The grant's user, once the refresh token is claimed for this refresh: a second refresh
        with it, even one in flight, is a reuse and ends the grant."""
        if not self.server.store.use_refresh(credential.token):
            self.server.revoke(credential.family)
            raise InvalidGrantError("the refresh token was used already")
        return credential.user

    def revoke_old_credential(self, credential: RefreshCredential) -> None:
        """Nothing: claimed in authenticate_user."""


class ClientRegistration(ClientRegistrationEndpoint):
    """RFC 7591, open (as MCP clients expect): public clients get no secret."""

    def authenticate_token(self, request: Any) -> bool:
        return True

    def get_server_metadata(self) -> dict[str, Any]:
        return {
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "response_types_supported": ["code"],
            "token_endpoint_auth_methods_supported": AUTH_METHODS,
            "scopes_supported": [SCOPE],
        }

    def extract_client_metadata(self, request: Any) -> dict[str, Any]:
        metadata = super().extract_client_metadata(request)
        uris = metadata.get("redirect_uris")
        if not isinstance(uris, list) or not uris:
            raise InvalidRedirectURIError("redirect_uris is required")
        for uri in uris:
            problem = redirect_uri_problem(str(uri))
            if problem:
                raise InvalidRedirectURIError(problem)
        return metadata

    def generate_client_info(self, request: Any) -> dict[str, Any]:
        info = super().generate_client_info(request)
        if (request.payload.data or {}).get("token_endpoint_auth_method", "client_secret_basic") == "none":
            info.pop("client_secret", None)
            info.pop("client_secret_expires_at", None)
        return info

    def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any) -> Client:
        metadata = {**client_metadata, "scope": SCOPE}
        self.server.store.save_client(client_info["client_id"], "dcr", metadata, client_info.get("client_secret"))
        return Client(client_info["client_id"], metadata)


@dataclass
class IssuedToken:
    """An access or refresh token presented for revocation: revoking it ends its grant."""

    family: str
    client_id: str

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id


class Revocation(RevocationEndpoint):
    """RFC 7009: a client ends its own grant (an unknown token is a success, as the RFC says)."""

    CLIENT_AUTH_METHODS = AUTH_METHODS
    server: AuthorizationServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> IssuedToken | None:
        row = self.server.store.token(token_string)
        grant = self.server.store.grant(row.family) if row is not None else None
        return IssuedToken(grant.family, grant.client_id) if grant is not None else None

    def revoke_token(self, token: IssuedToken, request: Any) -> None:
        self.server.revoke(token.family)


class _Issuer(IssuerParameter):
    def __init__(self, issuer: str):
        self.issuer = issuer

    def get_issuer(self) -> str:
        return self.issuer


class AuthorizationServer(_AuthorizationServer):
    """The authorization server for one resource (the MCP endpoint)."""

    def __init__(
        self,
        store: Store,
        fetcher: MetadataFetcher | None,
        issuer: str,
        resource: str,
        access_seconds: int,
        refresh_seconds: int,
        code_seconds: int,
    ):
        super().__init__(scopes_supported=[SCOPE])
        self.store, self.fetcher, self.issuer, self.resource = store, fetcher, issuer, resource
        self.refresh_seconds, self.code_seconds = refresh_seconds, code_seconds
        self.on_revoke: list[Any] = []  # callbacks(family) when a grant ends
        access_seconds = min(access_seconds, 3600)
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                lambda **_: "mcpnb_at_" + secrets.token_urlsafe(32),
                lambda **_: "mcpnb_rt_" + secrets.token_urlsafe(32),
                lambda client, grant_type: access_seconds,
            ),
        )
        self.access_seconds = access_seconds
        self.register_grant(CodeGrant, [S256Only(required=True)])
        self.register_grant(RefreshGrant)
        self.register_endpoint(ClientRegistration(claims_classes=[ClientMetadataClaims]))
        self.register_endpoint(Revocation)
        self.register_extension(_Issuer(issuer))

    # -- what authlib asks -----------------------------------------------------------------
    def query_client(self, client_id: str) -> Client | None:
        if is_metadata_url(client_id):
            if self.fetcher is None:
                return None
            doc = self.fetcher.cached(client_id)  # fetched at the authorization endpoint only
            if doc is None:
                stored = self.store.client(client_id)
                doc = stored[1] if stored is not None and stored[0] == "cimd" else None
            return Client(client_id, doc) if doc is not None else None
        found = self.store.client(client_id)
        return Client(client_id, found[1], found[2]) if found is not None else None

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        user: JupyterHubUser = request.user
        client: Client = request.client
        if user.family is None:
            user.family = self.store.new_grant(user.name, client.client_id, client.name, SCOPE, self.resource)
            code: Code | None = getattr(request, "authorization_code", None)
            if code is not None and not self.store.link_code(code.code, user.family):
                self.revoke(user.family)  # the code was replayed while this exchange was in flight
                raise InvalidGrantError("the code was used already")
        now = time.time()
        for kind, seconds in (("access", self.access_seconds), ("refresh", self.refresh_seconds)):
            if not self.store.save_token(
                token[f"{kind}_token"], user.family, kind, user.jupyterhub_token, now + seconds
            ):
                raise InvalidGrantError("this sign-in was revoked")  # while the request was in flight
        self.store.touch(user.family)

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        return request

    def create_json_request(self, request: Any) -> JsonRequest:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> Response:
        return Response(status, body, dict(headers or []))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    # -- the rules authlib leaves to us ---------------------------------------------------------
    def check_resource(self, resource: str | None) -> None:
        if resource is not None and _canonical(resource) != _canonical(self.resource):
            raise InvalidTargetError(f"this server issues tokens for {self.resource} only")

    def refresh_credential(self, token: str, resource: str | None) -> RefreshCredential | None:
        row = self.store.token(token) if token else None
        if row is None or row.kind != "refresh":
            return None
        grant = self.store.grant(row.family)
        if grant is None or grant.revoked:
            return None
        if row.used:  # a refresh token presented twice: someone has a copy; end the family
            self.revoke(row.family)
            return None
        if row.expires < time.time():
            return None
        self.check_resource(resource)
        user = JupyterHubUser(grant.user, unseal(token, row.sealed), row.family)
        return RefreshCredential(token, row.family, grant.client_id, user, grant.scope)

    def revoke(self, family: str) -> None:
        self.store.revoke(family)
        for callback in self.on_revoke:
            callback(family)

    async def fetch_client_metadata(self, client_id: str | None) -> tuple[str, str] | None:
        """Fetch a metadata document client (the authorization endpoint only; the work runs on the
        fetcher's own threads) and keep it in the store for the token endpoint. None when the
        client may go on; else what the caller is told (generic) and what the log says (why)."""
        if not is_metadata_url(client_id):
            return None
        if self.fetcher is None:
            reason = "this server does not accept Client ID Metadata Documents"
            return reason, reason
        try:
            doc = await self.fetcher.fetch(str(client_id))
        except MetadataError as exc:
            return GENERIC, f"client metadata document {client_id} refused: {exc}"
        self.store.save_client(str(client_id), "cimd", doc, None)
        return None

    def metadata(self, base: str) -> dict[str, Any]:
        """RFC 8414 authorization server metadata (also served as OIDC discovery)."""
        return {
            "issuer": self.issuer,
            "authorization_endpoint": base + "oauth/authorize",
            "token_endpoint": base + "oauth/token",
            "registration_endpoint": base + "oauth/register",
            "revocation_endpoint": base + "oauth/revoke",
            "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
            "scopes_supported": [SCOPE],
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": AUTH_METHODS,
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": self.fetcher is not None,
            "authorization_response_iss_parameter_supported": True,
            # served at the OpenID discovery path, so the fields OIDC discovery requires (the
            # TypeScript SDK checks them); no ID token is ever issued ("openid" is not a scope here)
            "jwks_uri": base + ".well-known/jwks.json",
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["none"],
            "service_documentation": "https://github.com/mcp-notebook/mcp-notebook#jupyterhub",
        }
