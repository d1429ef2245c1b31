"""One MCP URL for every user of a real JupyterHub (configurable-http-proxy, DummyAuthenticator,
local single-user servers with the extension, kernels with the hub loaded): the official Python
SDK client signs in through JupyterHub's login form and the consent page, reads its own user's
kernels in both eras and across a token refresh; every attack in the issue is refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from jhub import CHP, PASSWORD, LocalJupyterHub, service_db
from jserver import run
from jupyter_client import BlockingKernelClient
from sdk import connect as sdk_connect
from service_oauth import (
    CLICK,
    NAVIGATE,
    REDIRECT,
    SECRETS,
    Browser,
    MetadataHost,
    Storage,
    _inputs,
    authorize_url,
    code_of,
    connect,
    exchange,
    pkce,
    provider,
    refresh,
    register,
    sign_in,
)

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not CHP.exists(), reason="tests/node: npm ci installs configurable-http-proxy"),
]
pytest.importorskip("jupyterhub")
pytest.importorskip("authlib")


PRECONF = {
    "client_id": "configured-assistant",
    "client_name": "Configured assistant",
    "redirect_uris": [REDIRECT],
    "token_endpoint_auth_method": "none",
}


@pytest.fixture(scope="module")
def cimd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetadataHost]:
    host = MetadataHost(tmp_path_factory.mktemp("cimd"))
    yield host
    host.stop()


@pytest.fixture(scope="module")
def jupyterhub(tmp_path_factory: pytest.TempPathFactory, cimd: MetadataHost) -> Iterator[LocalJupyterHub]:
    args = (
        "--JupyterHubService.access_token_seconds=8",
        "--JupyterHubService.check_seconds=2",
        "--JupyterHubService.cimd_allow_hosts=localhost",  # tests only: the default refuses loopback
        "--JupyterHubService.registration_burst=1000",  # tests only: every test registers from 127.0.0.1
        f"--JupyterHubService.cimd_ca_file={cimd.ca_file}",
        "--JupyterHubService.clients=" + json.dumps([PRECONF]),
        "--JupyterHubServiceApp.log_level=DEBUG",  # every library's DEBUG lines: none may hold a secret
    )
    with LocalJupyterHub(tmp_path_factory.mktemp("jhub"), args) as h:
        made = {
            "alice": h.kernel("alice", "alice_nb.ipynb", "mine = 'alice-41'"),
            "extra": h.kernel("alice", "extra.ipynb", "other = 'alice-second'", server="second"),
            "bob": h.kernel("bob", "bob_nb.ipynb", "mine = 'bob-42'"),
        }
        h.kids = {name: kid for name, (kid, _) in made.items()}
        h.kcs = {name: kc for name, (_, kc) in made.items()}
        yield h


def test_the_documented_config_block_is_what_the_tests_run():
    """The docs' jupyterhub_config.py block (docs/start/jupyterhub.md) is pasted as it stands into
    this file's JupyterHub config (tests/jhub.py), and asks for least privilege: the service's
    JupyterHub tokens carry the mcp-notebook scope and read:servers, never access:servers."""
    from jhub import CONFIG, docs_config_block
    from traitlets.config import Config

    from mcp_notebook.protocol.security import JUPYTERHUB_SCOPE

    block = docs_config_block()
    config = Config()
    exec(compile(block, "jupyterhub_config.py", "exec"), {"get_config": lambda: config})
    (service,) = config.JupyterHub.services
    assert service["command"][1:3] == ["-m", "mcp_notebook.jupyterhub_service"]
    assert service["command"][3].startswith("--JupyterHubService.upstream_url=http://")
    assert service["oauth_client_allowed_scopes"] == [f"{JUPYTERHUB_SCOPE}!user", "read:servers!user"]
    assert service["oauth_no_confirm"] is True
    assert list(config.JupyterHub.custom_scopes) == [JUPYTERHUB_SCOPE]
    assert config.JupyterHub.load_roles == [
        {"name": "user", "scopes": ["self", "access:services!service=mcp-notebook", f"{JUPYTERHUB_SCOPE}!user"]}
    ]
    assert "{docs_block}" in CONFIG  # the running JupyterHub reads this very block


def listing(text: str) -> list[dict[str, Any]]:
    return json.loads(text)["kernels"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sign_in_through_the_hub_and_read_own_kernels(jupyterhub, mode):
    """Discovery, registration (DCR), JupyterHub's login form, consent, token; then only alice's
    kernels, of both her servers; after the access token expires, a refresh and more reads."""
    storage = Storage()
    browser = Browser(jupyterhub.public, "alice")

    async def go() -> None:
        async with connect(jupyterhub.mcp_url, provider(jupyterhub.mcp_url, browser, storage), mode) as client:
            kernels = listing((await client.read_resource("nb://kernels")).contents[0].text)
            assert sorted(k["label"] for k in kernels) == ["alice_nb", "extra"]
            text = (await client.read_resource("nb://kernels/alice_nb/vars/mine")).contents[0].text
            assert "alice-41" in text
            text = (await client.read_resource("nb://kernels/extra/vars/other")).contents[0].text
            assert "alice-second" in text
            uris = [str(r.uri) for r in (await client.list_resources()).resources]
            assert "nb://kernels/alice_nb/vars/mine" in uris
            assert not any("bob" in u for u in uris)
            await anyio.sleep(9)  # the access token (8 s here) expires: the SDK refreshes
            text = (await client.read_resource("nb://kernels/alice_nb/vars/mine")).contents[0].text
            assert "alice-41" in text

    anyio.run(go)
    assert storage.client is not None and storage.client.client_id  # registered by DCR
    assert len(storage.history) >= 2  # the first tokens, then the refreshed ones
    first, last = storage.history[0], storage.history[-1]
    assert first.refresh_token != last.refresh_token  # rotated
    assert first.expires_in is not None and first.expires_in <= 3600
    page = browser.pages[0]
    assert "Test assistant" in page and "alice" in page  # the consent page names the client and the user


def test_unauthenticated_request_points_at_the_metadata(jupyterhub):
    r = httpx.post(jupyterhub.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
    prm_url = challenge.split('resource_metadata="')[1].split('"')[0]
    prm = httpx.get(prm_url, timeout=30).json()
    assert prm["resource"] == jupyterhub.mcp_url
    issuer = prm["authorization_servers"][0]
    meta = httpx.get(issuer + "/.well-known/openid-configuration", timeout=30).json()
    assert meta["issuer"] == issuer
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["client_id_metadata_document_supported"] is True
    assert "refresh_token" in meta["grant_types_supported"]
    assert httpx.get(meta["jwks_uri"], timeout=30).json() == {"keys": []}
    foreign = httpx.post(jupyterhub.mcp_url, json={}, headers={"Origin": "http://evil.example"}, timeout=30)
    assert foreign.status_code == 403  # a foreign browser origin, before any token is looked at
    same = httpx.options(jupyterhub.mcp_url, headers={"Origin": jupyterhub.public.rstrip("/")}, timeout=30)
    assert same.status_code == 204 and same.headers["access-control-allow-origin"] == jupyterhub.public.rstrip("/")


def read(jupyterhub: LocalJupyterHub, token: str, uri: str) -> httpx.Response:
    """One stateless-era resources/read."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/read",
        "params": {
            "uri": uri,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
        "Accept": "application/json, text/event-stream",
    }
    return httpx.post(jupyterhub.mcp_url, json=body, headers=headers, timeout=60)


def text_of(r: httpx.Response) -> str:
    assert r.status_code == 200, (r.status_code, r.text[:500])
    doc = r.json()
    assert "result" in doc, doc
    return doc["result"]["contents"][0]["text"]


def until(predicate: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError("not within the bound")


# -- isolation -----------------------------------------------------------------------------------
def test_a_token_reaches_only_its_own_users_kernels(jupyterhub):
    _, alice = sign_in(jupyterhub, "alice")
    token = alice["access_token"]
    assert "alice-41" in text_of(read(jupyterhub, token, "nb://kernels/alice_nb/vars/mine"))
    kernels = {k["id"] for k in listing(text_of(read(jupyterhub, token, "nb://kernels")))}
    assert kernels == {jupyterhub.kids["alice"], jupyterhub.kids["extra"]}
    for uri in (
        "nb://kernels/bob_nb/vars/mine",
        f"nb://kernels/{jupyterhub.kids['bob']}/vars/mine",
        f"nb://kernels/{jupyterhub.kids['bob']}/kernel",
    ):
        r = read(jupyterhub, token, uri)
        assert "bob-42" not in r.text
        assert r.json()["error"]["code"] == -32602, r.text  # not found: it does not exist for alice
    assert "bob-42" not in read(jupyterhub, token, "nb://vars/mine").text  # bare: alice's current kernel


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_changes_reach_the_client_through_the_service(jupyterhub, mode):
    """A subscription (handshake era) or a listen (2026-07-28) through the service hears a cell
    that changes the watched variable; another user's session is unknown to this grant."""
    _, bob = sign_in(jupyterhub, "bob")
    uri = "nb://kernels/bob_nb/vars/mine"

    async def go() -> None:
        async with sdk_connect({"url": jupyterhub.mcp_url}, mode, token=bob["access_token"]) as (client, inbox):
            if mode == "legacy":
                await client.subscribe_resource(uri)
                await anyio.sleep(1)
                await anyio.to_thread.run_sync(run, jupyterhub.kcs["bob"], f"mine = 'bob-42 {mode}'")
                await inbox.wait_for(lambda i: uri in i.updated, timeout=30)
                return
            async with client.listen(resource_subscriptions=[uri]) as sub:
                await anyio.sleep(1)
                await anyio.to_thread.run_sync(run, jupyterhub.kcs["bob"], f"mine = 'bob-42 {mode}'")
                with anyio.fail_after(30):
                    async for event in sub:
                        if getattr(event, "uri", None) == uri:
                            break

    anyio.run(go)


def test_a_session_belongs_to_its_grant(jupyterhub):
    _, alice = sign_in(jupyterhub, "alice")
    _, other = sign_in(jupyterhub, "alice")  # the same user, another client
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    r = httpx.post(jupyterhub.mcp_url, json=init, headers=accept | {"Authorization": f"Bearer {alice['access_token']}"})
    assert r.status_code == 200, r.text
    session = r.headers["mcp-session-id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    headers = accept | {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    mine = httpx.post(
        jupyterhub.mcp_url, json=ping, headers=headers | {"Authorization": f"Bearer {alice['access_token']}"}
    )
    assert mine.status_code == 200
    theirs = httpx.post(
        jupyterhub.mcp_url, json=ping, headers=headers | {"Authorization": f"Bearer {other['access_token']}"}
    )
    assert theirs.status_code == 404  # unknown to the other grant's front


def test_tokens_are_not_interchangeable(jupyterhub):
    _, alice = sign_in(jupyterhub, "alice")
    hub_token = jupyterhub.user_token("alice")
    r = read(jupyterhub, hub_token, "nb://kernels")  # a JupyterHub API token is not an MCP token
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
    api = httpx.get(jupyterhub.public + "hub/api/user", headers={"Authorization": f"token {alice['access_token']}"})
    assert api.status_code in (401, 403)  # an MCP token is not a JupyterHub token
    server = httpx.get(
        jupyterhub.public + "user/alice/api/status", headers={"Authorization": f"token {alice['access_token']}"}
    )
    assert server.status_code in (302, 401, 403)  # nor a key to the user's server


# -- the authorization request ---------------------------------------------------------------------
def test_pkce_is_required_and_s256_only(jupyterhub):
    client_id = register(jupyterhub)
    browser = Browser(jupyterhub.public, "alice")
    # a configured client gets the error at its redirect URI, with the issuer (RFC 9207)
    r = browser.authorize(authorize_url(jupyterhub, PRECONF["client_id"], None))  # no challenge
    assert code_of(r)["error"] == "invalid_request" and "code" not in code_of(r)
    assert code_of(r)["iss"] == jupyterhub.service_url.rstrip("/")
    # a registered one, before its user has seen consent, gets a page here: no open redirect
    for challenge, method in ((None, None), (pkce()[1], "plain")):
        r = browser.authorize(authorize_url(jupyterhub, client_id, challenge, code_challenge_method=method))
        assert r.status_code == 400 and "location" not in r.headers and "invalid_request" in r.text
    _, challenge = pkce()
    _, challenge = pkce()
    code = code_of(browser.authorize(authorize_url(jupyterhub, client_id, challenge)))["code"]
    missing = exchange(jupyterhub, client_id, code, None)
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"
    wrong = exchange(jupyterhub, client_id, code, pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"


def test_redirect_uri_must_be_registered_and_nothing_redirects_elsewhere(jupyterhub):
    client_id = register(jupyterhub)
    _, challenge = pkce()
    evil = "https://evil.example/cb"
    r = Browser(jupyterhub.public, "alice").authorize(
        authorize_url(jupyterhub, client_id, challenge, redirect_uri=evil)
    )
    assert r.status_code == 400 and "location" not in r.headers
    r = httpx.get(authorize_url(jupyterhub, "no-such-client", challenge, redirect_uri=evil), timeout=30)
    assert r.status_code == 400 and "location" not in r.headers
    # JupyterHub's own callback only ever goes on to this service's consent page
    r = httpx.get(jupyterhub.service_url + "oauth_callback?code=x&state=y", timeout=30, follow_redirects=False)
    assert r.status_code in (400, 403) and "evil" not in r.headers.get("location", "")


def test_registration_refuses_unsafe_redirect_uris(jupyterhub):
    for uri in ("javascript:alert(1)", "http://evil.example/cb", "https://ok.example/cb#frag", "data:text/html,x"):
        body = {"client_name": "x", "redirect_uris": [uri], "token_endpoint_auth_method": "none"}
        r = httpx.post(jupyterhub.service_url + "oauth/register", json=body, timeout=30)
        assert r.status_code == 400 and r.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata"), r.text
    r = httpx.post(jupyterhub.service_url + "oauth/register", content=b"not json", timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "invalid_client_metadata"
    assert register(jupyterhub, redirect="http://127.0.0.1:33333/callback")  # loopback http: native apps
    assert register(jupyterhub, redirect="cursor://anysphere.cursor-retrieval/oauth/callback")  # a private-use scheme


def test_token_for_another_resource_is_refused(jupyterhub):
    client_id = register(jupyterhub)
    verifier, challenge = pkce()
    browser = Browser(jupyterhub.public, "alice")
    r = browser.authorize(authorize_url(jupyterhub, client_id, challenge, resource="https://other.example/mcp"))
    assert r.status_code == 400 and "invalid_target" in r.text and "location" not in r.headers
    code = code_of(browser.authorize(authorize_url(jupyterhub, client_id, challenge)))["code"]
    r = exchange(jupyterhub, client_id, code, verifier, resource="https://other.example/mcp")
    assert r.status_code == 400 and r.json()["error"] == "invalid_target"
    shouting = jupyterhub.mcp_url.replace("http://", "HTTP://")  # scheme and host compare case-insensitively
    code = code_of(browser.authorize(authorize_url(jupyterhub, client_id, challenge, resource=shouting)))["code"]
    assert exchange(jupyterhub, client_id, code, verifier, resource=jupyterhub.mcp_url + "/").status_code == 200


def test_a_replayed_code_is_refused_and_revokes_what_it_gave(jupyterhub):
    client_id = register(jupyterhub)
    verifier, challenge = pkce()
    code = code_of(Browser(jupyterhub.public, "alice").authorize(authorize_url(jupyterhub, client_id, challenge)))[
        "code"
    ]
    first = exchange(jupyterhub, client_id, code, verifier)
    assert first.status_code == 200
    token = first.json()["access_token"]
    assert "alice-41" in text_of(read(jupyterhub, token, "nb://kernels/alice_nb/vars/mine"))
    again = exchange(jupyterhub, client_id, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert read(jupyterhub, token, "nb://kernels").status_code == 401


def test_refresh_tokens_rotate_and_reuse_revokes_the_family(jupyterhub):
    client_id, tokens = sign_in(jupyterhub, "alice")
    new = refresh(jupyterhub, client_id, tokens["refresh_token"])
    assert new.status_code == 200, new.text
    fresh = new.json()
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert "alice-41" in text_of(read(jupyterhub, fresh["access_token"], "nb://kernels/alice_nb/vars/mine"))
    reused = refresh(jupyterhub, client_id, tokens["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert read(jupyterhub, fresh["access_token"], "nb://kernels").status_code == 401  # the family is revoked
    assert refresh(jupyterhub, client_id, fresh["refresh_token"]).status_code == 400


def test_a_client_revokes_its_own_grant(jupyterhub):
    client_id, tokens = sign_in(jupyterhub, "alice")
    other_client, other = sign_in(jupyterhub, "alice")
    form = {"token": tokens["refresh_token"], "token_type_hint": "refresh_token", "client_id": other_client}
    r = httpx.post(jupyterhub.service_url + "oauth/revoke", data=form, timeout=30)  # not its token
    assert r.status_code == 400 and read(jupyterhub, tokens["access_token"], "nb://kernels").status_code == 200
    form["client_id"] = client_id
    assert httpx.post(jupyterhub.service_url + "oauth/revoke", data=form, timeout=30).status_code == 200
    assert read(jupyterhub, tokens["access_token"], "nb://kernels").status_code == 401
    assert read(jupyterhub, other["access_token"], "nb://kernels").status_code == 200  # the other grant lives


def test_an_expired_access_token_is_refused(jupyterhub):
    _, tokens = sign_in(jupyterhub, "alice")
    assert tokens["expires_in"] == 8  # this test JupyterHub's setting (the default is 3600, the most allowed)
    time.sleep(9)
    r = read(jupyterhub, tokens["access_token"], "nb://kernels")
    assert r.status_code == 401 and "expired" in r.headers["www-authenticate"]


def test_consent_is_csrf_protected(jupyterhub):
    client_id = register(jupyterhub)
    _, challenge = pkce()
    alice = Browser(jupyterhub.public, "alice")
    page = alice.authorize(authorize_url(jupyterhub, client_id, challenge), answer=False)
    assert page.status_code == 200 and "name='csrf'" in page.text
    form = _inputs(page.text)
    forged = alice.http.post(str(page.url), data=form | {"csrf": "0" * 64, "decision": "allow"})
    assert forged.status_code == 403 and "location" not in forged.headers
    missing = alice.http.post(str(page.url), data={"pending": form["pending"], "decision": "allow"})
    assert missing.status_code == 403
    mallory = Browser(jupyterhub.public, "bob")  # another browser cannot answer alice's pending request
    mallory.authorize(authorize_url(jupyterhub, client_id, challenge), answer=False)
    stolen = mallory.http.post(str(page.url), data=form | {"decision": "allow"})
    assert stolen.status_code in (400, 403) and "location" not in stolen.headers
    # fetch metadata sent: only the person's own click on the page itself counts
    for scripted in (
        NAVIGATE,  # a script's submit(): no user activation
        CLICK | {"Sec-Fetch-Dest": "iframe"},  # in a frame
        CLICK | {"Sec-Fetch-Mode": "cors"},  # fetch()
        CLICK | {"Sec-Fetch-Site": "cross-site"},  # another site's form
    ):
        r = alice.http.post(str(page.url), data=form | {"decision": "allow"}, headers=scripted)
        assert r.status_code == 403 and "location" not in r.headers, scripted
    ok = alice.http.post(str(page.url), data=form | {"decision": "allow"}, headers=CLICK)
    assert ok.is_redirect and "code" in code_of(ok)


def test_denied_consent_gives_no_code(jupyterhub):
    client_id = register(jupyterhub)
    _, challenge = pkce()
    q = code_of(
        Browser(jupyterhub.public, "alice").authorize(authorize_url(jupyterhub, client_id, challenge), decision="deny")
    )
    assert q["error"] == "access_denied" and "code" not in q


# -- clients: metadata documents and configured ones -----------------------------------------------
def test_client_id_metadata_document_with_the_sdk(jupyterhub, cimd):
    url = cimd.publish("/assistant/client.json")
    storage = Storage()
    browser = Browser(jupyterhub.public, "bob")

    async def go() -> None:
        auth = provider(jupyterhub.mcp_url, browser, storage, client_metadata_url=url)
        async with connect(jupyterhub.mcp_url, auth) as client:
            assert "bob-42" in (await client.read_resource("nb://kernels/bob_nb/vars/mine")).contents[0].text

    anyio.run(go)
    assert storage.client is not None and storage.client.client_id == url  # no registration
    assert "Metadata document assistant" in browser.pages[0]


def refused_for(jupyterhub: LocalJupyterHub, r: httpx.Response, reason: str) -> bool:
    """The caller was told only that the document could not be used; the log says why (#42)."""
    generic = r.status_code == 400 and "could not be used" in r.text and reason not in r.text
    return generic and "location" not in r.headers and reason in jupyterhub.log_text()


def test_metadata_document_at_a_private_address_is_refused(jupyterhub, cimd):
    _, challenge = pkce()
    for host in ("127.0.0.1", "10.0.0.1", "169.254.169.254"):
        url = f"https://{host}:{cimd.port}/assistant/client.json"
        r = httpx.get(authorize_url(jupyterhub, url, challenge), timeout=30)
        assert refused_for(jupyterhub, r, f"{host} is not a public address")
    http_url = f"http://localhost:{cimd.port}/assistant/client.json"  # not https: a plain client id, unknown
    assert httpx.get(authorize_url(jupyterhub, http_url, challenge), timeout=30).status_code == 400
    lying = cimd.publish("/liar.json", {"client_id": "https://elsewhere.example/c.json", "redirect_uris": [REDIRECT]})
    r = httpx.get(authorize_url(jupyterhub, lying, challenge), timeout=30)
    assert refused_for(jupyterhub, r, "client_id is not its URL")
    big_url = f"https://localhost:{cimd.port}/big.json"
    cimd.publish("/big.json", {"client_id": big_url, "redirect_uris": [REDIRECT], "pad": "x" * 6000})
    r = httpx.get(authorize_url(jupyterhub, big_url, challenge), timeout=30)
    assert refused_for(jupyterhub, r, "larger than 5120 bytes")


def test_a_configured_client(jupyterhub):
    verifier, challenge = pkce()
    cid = PRECONF["client_id"]
    browser = Browser(jupyterhub.public, "bob")
    code = code_of(browser.authorize(authorize_url(jupyterhub, cid, challenge)))["code"]
    assert "Configured assistant" in browser.pages[0]
    r = exchange(jupyterhub, cid, code, verifier)
    assert r.status_code == 200
    assert "bob-42" in text_of(read(jupyterhub, r.json()["access_token"], "nb://kernels/bob_nb/vars/mine"))


# -- revocation --------------------------------------------------------------------------------
def test_users_and_admins_list_and_revoke_grants(jupyterhub):
    _, alice = sign_in(jupyterhub, "alice")
    alice_api = {"Authorization": f"token {jupyterhub.user_token('alice')}"}
    bob_api = {"Authorization": f"token {jupyterhub.user_token('bob')}"}
    root_api = {"Authorization": f"token {jupyterhub.user_token('root')}"}
    grants = httpx.get(jupyterhub.service_url + "api/grants", headers=alice_api, timeout=30).json()["grants"]
    assert grants and {g["user"] for g in grants} == {"alice"}
    everyone = httpx.get(jupyterhub.service_url + "api/grants", headers=root_api, timeout=30).json()["grants"]
    assert {"alice", "bob"} <= {g["user"] for g in everyone}
    assert {g["user"] for g in httpx.get(jupyterhub.service_url + "api/grants", headers=bob_api).json()["grants"]} <= {
        "bob"
    }
    newest = max(grants, key=lambda g: g["created"])
    assert httpx.delete(jupyterhub.service_url + f"api/grants/{newest['id']}", headers=bob_api).status_code == 404
    assert read(jupyterhub, alice["access_token"], "nb://kernels").status_code == 200
    assert httpx.delete(jupyterhub.service_url + f"api/grants/{newest['id']}", headers=root_api).status_code == 204
    assert read(jupyterhub, alice["access_token"], "nb://kernels").status_code == 401


def test_revoking_the_hub_sign_in_cuts_the_client_off(jupyterhub):
    _, alice = sign_in(jupyterhub, "alice")
    token = alice["access_token"]
    assert read(jupyterhub, token, "nb://kernels").status_code == 200
    listed = jupyterhub.api.get("users/alice/tokens").json()["api_tokens"]
    ours = [t for t in listed if "mcp-notebook" in str(t.get("oauth_client"))]
    assert ours  # the sign-in tokens the service holds, seen by JupyterHub like any other
    # revoking one revokes every token of that client for alice (JupyterHub's rule)
    assert jupyterhub.api.delete(f"users/alice/tokens/{ours[0]['id']}").status_code == 204
    until(lambda: read(jupyterhub, token, "nb://kernels").status_code == 401)


def test_a_stopped_server_disappears_and_a_user_without_server_is_told_where_to_start(jupyterhub):
    _, alice = sign_in(jupyterhub, "alice")
    token = alice["access_token"]
    assert "alice-second" in text_of(read(jupyterhub, token, "nb://kernels/extra/vars/other"))
    jupyterhub.stop_server("alice", "second")
    until(lambda: jupyterhub.kids["extra"] not in read(jupyterhub, token, "nb://kernels").text)
    assert read(jupyterhub, token, "nb://kernels/extra/vars/other").json()["error"]["code"] == -32602
    jupyterhub.api.post("users/carol")  # no server
    jupyterhub.api.post("users/carol/tokens")  # (the user exists for JupyterHub)
    _, carol = sign_in(jupyterhub, "carol")
    r = read(jupyterhub, carol["access_token"], "nb://vars/x")
    message = r.json()["error"]["message"]
    assert "no running server" in message and "/hub/home" in message
    assert jupyterhub.api.delete("users/carol").status_code == 204  # the user deleted: cut off
    until(lambda: read(jupyterhub, carol["access_token"], "nb://kernels").status_code == 401)


def test_typescript_sdk_client_signs_in_reads_and_refreshes(jupyterhub):
    """The official TypeScript SDK client (handshake era: SDK 1.x) through the same flow."""
    script = CHP.parents[2] / "hub_client.mjs"
    args = ["node", str(script), jupyterhub.mcp_url, REDIRECT, "9000", "nb://kernels/bob_nb/vars/mine", "nb://kernels"]
    proc = subprocess.Popen(
        args, cwd=script.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watchdog = threading.Timer(180, proc.kill)
    watchdog.start()
    try:
        first = json.loads(proc.stdout.readline() or "{}")
        assert "authorize" in first, proc.stderr.read()[-2000:]
        q = code_of(Browser(jupyterhub.public, "bob").authorize(first["authorize"]))
        proc.stdin.write(q["code"] + "\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=170)
    finally:
        watchdog.cancel()
    assert proc.returncode == 0, err[-2000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert "bob-42" in result["reads"]["nb://kernels/bob_nb/vars/mine"] and "bob-42" in result["after"]
    assert {k["label"] for k in listing(result["reads"]["nb://kernels"])} == {"bob_nb"}
    assert result["client_id"] and result["tokens"] >= 2 and result["rotated"]


# -- issue #41: least privilege, the shared origin, logs -------------------------------------------
def stored_credential(jupyterhub: LocalJupyterHub, access_token: str) -> str:
    """The exact JupyterHub token the service keeps for a grant (opened as the service opens it)."""
    from mcp_notebook.jupyterhub_service.store import Store, unseal

    store = Store(str(service_db(jupyterhub)))
    try:
        row = store.token(access_token)
        assert row is not None and row.sealed
        return unseal(access_token, row.sealed)
    finally:
        store.close()


WS_HEADERS = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}


def test_the_stored_credential_reaches_only_the_mcp_routes(jupyterhub):
    """With the very JupyterHub token the service stores for alice: every route of her server but
    the MCP ones answers 403 (kernels, the kernel websocket, contents, terminals, sessions, the
    pages, the focus); the MCP routes serve; bob's server refuses it; a URL or cookie copy of it
    admits nothing."""
    _, alice = sign_in(jupyterhub, "alice")
    credential = stored_credential(jupyterhub, alice["access_token"])
    auth = {"Authorization": f"token {credential}"}
    model = httpx.get(jupyterhub.public + "hub/api/user", headers=auth, timeout=30).json()
    assert not [s for s in model["scopes"] if s.split("!")[0] == "access:servers"], model["scopes"]
    base = jupyterhub.public + "user/alice/"
    kid = jupyterhub.kids["alice"]
    refused = [
        ("GET", "api/kernels", None),
        ("POST", "api/kernels", {"name": "python3"}),
        ("GET", f"api/kernels/{kid}", None),
        ("POST", f"api/kernels/{kid}/interrupt", {}),
        ("GET", "api/sessions", None),
        ("POST", "api/sessions", {"path": "x.ipynb", "type": "notebook", "kernel": {"name": "python3"}}),
        ("GET", "api/contents", None),
        ("GET", "api/contents/alice_nb.ipynb", None),
        ("PUT", "api/contents/planted.txt", {"type": "file", "format": "text", "content": "x"}),
        ("GET", "api/terminals", None),
        ("POST", "api/terminals", {}),
        ("GET", "api/kernelspecs", None),
        ("GET", "api/status", None),
        ("GET", "api/me", None),
        ("GET", "api/config/notebook", None),
        ("GET", "lab/api/settings", None),
        ("GET", "lab/api/workspaces", None),
        ("GET", "files/alice_nb.ipynb", None),
        ("GET", "lab", None),
        ("GET", "api/nbconvert", None),
        ("POST", "mcp-notebook/focus", {"kernel_id": kid}),
    ]
    for method, path, body in refused:
        r = httpx.request(method, base + path, headers=auth, json=body, timeout=30, follow_redirects=False)
        assert r.status_code == 403, (method, path, r.status_code, r.text[:200])
    ws = httpx.get(base + f"api/kernels/{kid}/channels", headers=auth | WS_HEADERS, timeout=30)
    assert ws.status_code == 403, ws.status_code
    assert not (jupyterhub.base / "home" / "alice" / "planted.txt").exists()
    # the MCP routes serve it: the kernel list, one kernel, every kernel
    kernels = httpx.get(base + "mcp-notebook/kernels", headers=auth, timeout=30)
    assert kernels.status_code == 200 and kid in kernels.text
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    mcp = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    for path in (f"mcp-notebook/kernels/{kid}/mcp", "mcp-notebook/mcp"):
        r = httpx.post(base + path, headers=auth | mcp, json=ping, timeout=30)
        assert r.status_code in (200, 400), (path, r.status_code, r.text[:200])  # 400: no session yet
        assert r.status_code != 403
    # not on bob's server, not from a URL, not from a cookie
    assert httpx.get(jupyterhub.public + "user/bob/mcp-notebook/kernels", headers=auth).status_code == 403
    assert httpx.get(base + f"mcp-notebook/kernels?token={credential}", timeout=30).status_code in (302, 403)
    cookies = {"jupyterhub-user-alice": credential}
    assert httpx.get(base + "mcp-notebook/kernels", cookies=cookies, timeout=30).status_code in (302, 403)


def test_a_grant_ending_destroys_its_jupyterhub_token(jupyterhub):
    """Revoked by its client (or refresh-token reuse, an admin, the user deleted): no sealed copy
    of the JupyterHub token stays in the service's file; the service never sends it again."""
    import sqlite3

    client_id, alice = sign_in(jupyterhub, "alice")
    assert read(jupyterhub, alice["access_token"], "nb://kernels").status_code == 200
    db = sqlite3.connect(service_db(jupyterhub))
    try:
        (family,) = db.execute("SELECT family FROM grants WHERE client_id = ? AND revoked = 0", (client_id,)).fetchone()
        r = refresh(jupyterhub, client_id, alice["refresh_token"])
        assert r.status_code == 200
        (live,) = db.execute("SELECT count(*) FROM tokens WHERE family = ? AND sealed != ''", (family,)).fetchone()
        assert live >= 2  # the new pair (the used refresh token kept only as a hash, to recognise reuse)
        again = refresh(jupyterhub, client_id, alice["refresh_token"])  # reuse: someone has a copy
        assert again.status_code == 400
        assert db.execute("SELECT count(*) FROM tokens WHERE family = ?", (family,)).fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM codes WHERE family = ? AND sealed != ''", (family,)).fetchone() == (0,)
        assert db.execute("SELECT revoked FROM grants WHERE family = ?", (family,)).fetchone() == (1,)
    finally:
        db.close()
    assert read(jupyterhub, r.json()["access_token"], "nb://kernels").status_code == 401


def test_the_grants_api_takes_a_header_token_and_decides_admin_by_its_scopes(jupyterhub):
    """No cookie (a junk header with the service's sign-in cookie is refused), a token that may
    not use the service is refused, and an admin's token without admin:users is not an admin's."""
    sign_in(jupyterhub, "alice")
    url = jupyterhub.service_url + "api/grants"
    browser = Browser(jupyterhub.public, "alice")
    browser.authorize(authorize_url(jupyterhub, register(jupyterhub), pkce()[1]), answer=False)  # cookies set
    assert browser.http.get(url, headers={"Authorization": "token junk"}).status_code == 403
    assert browser.http.get(url).status_code == 403
    jupyterhub.api.post("users/root")
    narrow = jupyterhub.api.post(
        "users/root/tokens", json={"scopes": ["access:services!service=mcp-notebook"], "expires_in": 600}
    ).json()["token"]
    mine = httpx.get(url, headers={"Authorization": f"token {narrow}"}, timeout=30)  # root's, without admin:users
    assert mine.status_code == 200 and "alice" not in {g["user"] for g in mine.json()["grants"]}
    unrelated = jupyterhub.api.post("users/alice/tokens", json={"scopes": ["read:users:name!user=alice"]}).json()[
        "token"
    ]
    assert httpx.get(url, headers={"Authorization": f"token {unrelated}"}, timeout=30).status_code == 403
    full = {"Authorization": f"token {jupyterhub.user_token('root')}"}
    assert {"alice"} <= {g["user"] for g in httpx.get(url, headers=full, timeout=30).json()["grants"]}


def test_a_user_whose_servers_are_stopped_is_told_where_to_start_one(jupyterhub):
    """Every read says it in one sentence with JupyterHub's URL: nb://kernels (a note beside the
    empty list) as much as a kernel's URI and a bare one."""
    jupyterhub.api.post("users/dave")
    jupyterhub.api.post("users/dave/tokens")
    _, dave = sign_in(jupyterhub, "dave")
    home = jupyterhub.public + "hub/home"
    listing_doc = json.loads(text_of(read(jupyterhub, dave["access_token"], "nb://kernels")))
    assert listing_doc["kernels"] == [] and home in listing_doc["note"] and "no running server" in listing_doc["note"]
    for uri in ("nb://kernels/some_nb/vars", "nb://vars"):
        message = read(jupyterhub, dave["access_token"], uri).json()["error"]["message"]
        assert home in message and "no running server" in message, message


ATTACK_PAGE = """<!doctype html><html><body><h1>Nice plots</h1><script>
const AUTH = %(auth)s, SVC = %(svc)s, FAMILY = %(family)s;
const results = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const field = (text, name) => (text.match(new RegExp("name='" + name + "' value='([^']*)'")) || [])[1] || "";
async function viaFetch() {
  try {
    const r = await fetch(AUTH, {credentials: "include"});
    const text = await r.text();
    const pending = (r.url.match(/pending=([^&]+)/) || [])[1];
    results.fetch = {status: r.status, url: r.url, consent: text.includes("name='csrf'")};
    if (pending) {
      const body = new URLSearchParams({pending, csrf: field(text, "csrf"), _xsrf: field(text, "_xsrf"), decision: "allow"});
      const p = await fetch(SVC + "oauth/consent?pending=" + pending, {method: "POST", body, credentials: "include", redirect: "manual"});
      results.fetchAnswer = {status: p.status, type: p.type};
    }
  } catch (e) { results.fetch = {error: String(e)}; }
}
async function viaFrame() {
  const f = document.createElement("iframe");
  f.src = AUTH;
  document.body.appendChild(f);
  await sleep(4000);
  try {
    const d = f.contentDocument;
    results.frame = {form: !!(d && d.querySelector("input[name=csrf]"))};
    if (results.frame.form) { d.querySelector("button[value=allow]").click(); results.frame.clicked = true; }
  } catch (e) { results.frame = {error: String(e)}; }
}
async function viaPopup() {
  const w = window.open(AUTH, "consent", "width=600,height=600");
  results.popup = {opened: !!w};
  for (let i = 0; i < 50 && w; i++) {
    await sleep(200);
    try {
      if (w.closed) { results.popup.lost = true; break; }
      const d = w.document;
      if (d && d.querySelector && d.querySelector("input[name=csrf]")) {
        results.popup.form = true;
        d.querySelector("button[value=allow]").click();
        results.popup.clicked = true;
        break;
      }
    } catch (e) { results.popup.error = String(e); break; }
  }
}
async function viaGrants() {
  results.list = (await fetch(SVC + "api/grants", {credentials: "include"})).status;
  results.revoke = (await fetch(SVC + "api/grants/" + FAMILY, {method: "DELETE", credentials: "include"})).status;
}
(async () => {
  await viaFetch(); await viaFrame(); await viaPopup(); await viaGrants(); await sleep(3000);
  window.results = results; window.done = true;
})();
</script></body></html>"""


def _chromium() -> str | None:
    import shutil

    path = shutil.which("chromium") or "/usr/bin/chromium"
    return path if Path(path).exists() else None


def test_no_page_on_the_shared_origin_obtains_consent_lists_or_revokes(jupyterhub):
    """Another user's (bob's) own server serves a page on JupyterHub's origin; alice, signed in to
    JupyterHub in a real Chromium, opens it. It tries fetch, an iframe and a popup it scripts: no
    code is issued, its redirect URI is never reached, nothing is listed or revoked. The same
    consent, opened by alice in a normal navigation and clicked, works."""
    import sqlite3

    playwright_api = pytest.importorskip("playwright.sync_api")
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no chromium (scripts/test.sh installs it)")
    alice_client, alice = sign_in(jupyterhub, "alice")
    db = sqlite3.connect(service_db(jupyterhub))
    family = db.execute("SELECT family FROM grants WHERE user = 'alice' AND revoked = 0").fetchall()[-1][0]
    attacker = register(jupyterhub, name="Plot helper")
    verifier, challenge = pkce()
    auth = authorize_url(jupyterhub, attacker, challenge)
    page_text = ATTACK_PAGE % {
        "auth": json.dumps(auth),
        "svc": json.dumps(jupyterhub.service_url),
        "family": json.dumps(family),
    }
    (jupyterhub.base / "static" / "plots.html").write_text(page_text)
    reached: list[str] = []
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context()

            def redirect_target(route: Any) -> None:
                reached.append(route.request.url)
                route.fulfill(status=200, body="ok")

            context.route("http://127.0.0.1:9/**", redirect_target)
            page = context.new_page()
            page.goto(jupyterhub.public + "hub/login")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORD)
            page.press("input[name=password]", "Enter")
            page.wait_for_url(lambda url: "/hub/login" not in url, timeout=30_000)
            bob_page = jupyterhub.public + "user/bob/static/plots.html"
            page.goto(bob_page)
            assert "Nice plots" in page.content(), page.content()[:500]
            page.wait_for_function("window.done === true", timeout=90_000)
            results = page.evaluate("window.results")
            print("the page's attempts:", json.dumps(results))
            # the page got nothing: no code, no grant, its redirect URI never reached
            assert reached == [], (reached, results)
            assert db.execute("SELECT count(*) FROM codes WHERE client_id = ?", (attacker,)).fetchone() == (0,)
            assert results["list"] == 403 and results["revoke"] == 403, results
            assert results["fetch"].get("status") == 403 and not results["fetch"].get("consent"), results
            assert not results.get("frame", {}).get("form"), results
            assert results["popup"]["opened"] and not results["popup"].get("form"), results  # opened, not scripted
            assert db.execute("SELECT revoked FROM grants WHERE family = ?", (family,)).fetchone() == (0,)
            renewed = refresh(jupyterhub, alice_client, alice["refresh_token"])  # (access tokens live 8 s here)
            assert renewed.status_code == 200
            assert read(jupyterhub, renewed.json()["access_token"], "nb://kernels").status_code == 200
            # alice herself, in a normal navigation, clicks Allow: that works
            own = context.new_page()
            own.goto(auth)
            own.click("button[value=allow]")
            deadline = time.monotonic() + 30
            while not reached and time.monotonic() < deadline:
                own.wait_for_timeout(200)
        finally:
            browser.close()
            db.close()
    assert len(reached) == 1, reached
    code = parse_qs(urlsplit(reached[0]).query)["code"][0]
    SECRETS.add(code)
    assert exchange(jupyterhub, attacker, code, verifier).status_code == 200


def test_a_grant_from_an_earlier_configuration_ends_at_its_next_use(jupyterhub):
    """A grant whose JupyterHub token carries access:servers (made before the mcp-notebook scope)
    is refused and ended the first time it is used: the assistant signs in again."""
    import secrets

    from mcp_notebook.jupyterhub_service.store import Store

    wide = jupyterhub.api.post(
        "users/alice/tokens", json={"scopes": ["access:servers!user=alice", "read:servers!user=alice"]}
    ).json()["token"]
    SECRETS.add(wide)
    token = "mcpnb_at_" + secrets.token_urlsafe(32)
    SECRETS.add(token)
    store = Store(str(service_db(jupyterhub)))
    try:
        family = store.new_grant("alice", "old-client", "Old assistant", "kernels:read", jupyterhub.mcp_url)
        store.save_token(token, family, "access", wide, time.time() + 600)
        r = read(jupyterhub, token, "nb://kernels")
        assert r.status_code == 401 and "opens all of the user's servers" in r.headers["WWW-Authenticate"]
        assert store.grant(family).revoked
    finally:
        store.close()


@pytest.mark.skipif(
    shutil.which("R") is None or not Path("/usr/share/jupyter/kernels/ir/kernel.json").exists(),
    reason="R and IRkernel are not installed (scripts/test.sh installs them where apt-get exists)",
)
def test_an_r_kernel_without_a_hub_through_the_service(jupyterhub):
    """Issue #43: a kernel without the hub (IRkernel) on a user's server, served from that server's
    side, reaches the user through the service like any other (listed with its language; its cells)."""
    _, alice = sign_in(jupyterhub, "alice")
    token = alice["access_token"]
    url = jupyterhub.public.rstrip("/") + jupyterhub.start_server("alice")
    r = jupyterhub.api.post(
        url + "api/sessions", json={"path": "alice_r.ipynb", "type": "notebook", "kernel": {"name": "ir"}}
    )
    assert r.status_code == 201, r.text
    kid = r.json()["kernel"]["id"]
    try:
        conn = jupyterhub.base / "run" / "alice-default" / f"kernel-{kid}.json"
        until(conn.exists)
        kc = BlockingKernelClient(connection_file=str(conn))
        kc.load_connection_file()
        kc.start_channels(hb=False)
        kc.wait_for_ready(timeout=90)
        jupyterhub.clients.append(kc)

        def listed() -> bool:
            rows = json.loads(text_of(read(jupyterhub, token, "nb://kernels")))["kernels"]
            return any(k["label"] == "alice_r" and k["language"] == "R" for k in rows)

        until(listed)
        kc.execute_interactive('cat("from R for alice\\n")', timeout=60)
        until(lambda: "from R for alice" in text_of(read(jupyterhub, token, "nb://kernels/alice_r/cells")))
    finally:
        jupyterhub.api.delete(url + f"api/kernels/{kid}")


def test_nothing_secret_in_any_log(jupyterhub):
    """After every test above (sign-ins, refreshes, revocations, refusals, the browser attacks) with
    the service at DEBUG, authlib's and tornado's loggers included: no code, token, JupyterHub token
    or client secret the tests saw is in the log, and none of the service's tokens at all."""
    client_id, alice = sign_in(jupyterhub, "alice")
    SECRETS.add(stored_credential(jupyterhub, alice["access_token"]))
    r = refresh(jupyterhub, client_id, alice["refresh_token"])
    assert r.status_code == 200
    revoke = httpx.post(
        jupyterhub.service_url + "oauth/revoke", data={"token": r.json()["refresh_token"], "client_id": client_id}
    )
    assert revoke.status_code == 200
    bad = httpx.get(jupyterhub.service_url + "oauth_callback?code=leaky-code-123456789&state=leaky-state-987654321")
    assert bad.status_code >= 400
    SECRETS.update({"leaky-code-123456789", "leaky-state-987654321"})
    time.sleep(1)
    log = jupyterhub.log_text()
    assert "DEBUG" in log or "[D " in log  # the service did log at DEBUG
    leaked = sorted(s for s in SECRETS if s and s in log)
    assert leaked == [], f"{len(leaked)} secrets in the log"
    assert "mcpnb_at_" not in log and "mcpnb_rt_" not in log
