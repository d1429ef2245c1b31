"""One MCP URL for every user of a real JupyterHub (configurable-http-proxy, DummyAuthenticator,
local single-user servers with the extension, kernels with the hub loaded): the official Python
SDK client signs in through the Hub's login form and the consent page, reads its own user's
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

import anyio
import httpx
import pytest
from hub_oauth import (
    REDIRECT,
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
from jhub import CHP, Hub
from jserver import run
from jupyter_client import BlockingKernelClient
from sdk import connect as sdk_connect

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not CHP.exists(), reason="tests/node: npm ci installs configurable-http-proxy"),
]
jupyterhub = pytest.importorskip("jupyterhub")
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
def hub(tmp_path_factory: pytest.TempPathFactory, cimd: MetadataHost) -> Iterator[Hub]:
    args = (
        "--MCPNotebookService.access_token_seconds=8",
        "--MCPNotebookService.check_seconds=2",
        "--MCPNotebookService.cimd_allow_hosts=localhost",  # tests only: the default refuses loopback
        f"--MCPNotebookService.cimd_ca_file={cimd.ca_file}",
        "--MCPNotebookService.clients=" + json.dumps([PRECONF]),
    )
    h = Hub(tmp_path_factory.mktemp("jhub"), args)
    try:
        made = {
            "alice": h.kernel("alice", "alice_nb.ipynb", "mine = 'alice-41'"),
            "extra": h.kernel("alice", "extra.ipynb", "other = 'alice-second'", server="second"),
            "bob": h.kernel("bob", "bob_nb.ipynb", "mine = 'bob-42'"),
        }
        h.kids = {name: kid for name, (kid, _) in made.items()}
        h.kcs = {name: kc for name, (_, kc) in made.items()}
        yield h
    except BaseException:
        print(h.log_text()[-5000:])
        raise
    finally:
        h.stop()


def test_the_documented_config_block_is_what_the_tests_run():
    """The docs' jupyterhub_config.py block (docs/start/jupyterhub.md) loads as it stands and sets
    what this file's Hub uses."""
    from pathlib import Path

    from traitlets.config import Config

    page = (Path(__file__).resolve().parents[1] / "docs" / "start" / "jupyterhub.md").read_text()
    section = page.split("## One URL for every user of a JupyterHub", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    config = Config()
    exec(compile(block, "jupyterhub_config.py", "exec"), {"get_config": lambda: config})
    (service,) = config.JupyterHub.services
    assert service["command"][1:3] == ["-m", "mcp_notebook.hubservice"]
    assert service["command"][3].startswith("--MCPNotebookService.upstream_url=http://")
    assert service["oauth_client_allowed_scopes"] == ["access:servers!user", "read:servers!user"]
    assert service["oauth_no_confirm"] is True
    assert config.JupyterHub.load_roles == [
        {"name": "user", "scopes": ["self", "access:services!service=mcp-notebook"]}
    ]
    jhub_text = (Path(__file__).resolve().parent / "jhub.py").read_text()
    assert '"oauth_client_allowed_scopes": ["access:servers!user", "read:servers!user"]' in jhub_text


def listing(text: str) -> list[dict[str, Any]]:
    return json.loads(text)["kernels"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sign_in_through_the_hub_and_read_own_kernels(hub, mode):
    """Discovery, registration (DCR), the Hub's login form, consent, token; then only alice's
    kernels, of both her servers; after the access token expires, a refresh and more reads."""
    storage = Storage()
    browser = Browser(hub.public, "alice")

    async def go() -> None:
        async with connect(hub.mcp_url, provider(hub.mcp_url, browser, storage), mode) as client:
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


def test_unauthenticated_request_points_at_the_metadata(hub):
    r = httpx.post(hub.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
    prm_url = challenge.split('resource_metadata="')[1].split('"')[0]
    prm = httpx.get(prm_url, timeout=30).json()
    assert prm["resource"] == hub.mcp_url
    issuer = prm["authorization_servers"][0]
    meta = httpx.get(issuer + "/.well-known/openid-configuration", timeout=30).json()
    assert meta["issuer"] == issuer
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["client_id_metadata_document_supported"] is True
    assert "refresh_token" in meta["grant_types_supported"]
    assert httpx.get(meta["jwks_uri"], timeout=30).json() == {"keys": []}
    foreign = httpx.post(hub.mcp_url, json={}, headers={"Origin": "http://evil.example"}, timeout=30)
    assert foreign.status_code == 403  # a foreign browser origin, before any token is looked at
    same = httpx.options(hub.mcp_url, headers={"Origin": hub.public.rstrip("/")}, timeout=30)
    assert same.status_code == 204 and same.headers["access-control-allow-origin"] == hub.public.rstrip("/")


def read(hub: Hub, token: str, uri: str) -> httpx.Response:
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
    return httpx.post(hub.mcp_url, json=body, headers=headers, timeout=60)


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
def test_a_token_reaches_only_its_own_users_kernels(hub):
    _, alice = sign_in(hub, "alice")
    token = alice["access_token"]
    assert "alice-41" in text_of(read(hub, token, "nb://kernels/alice_nb/vars/mine"))
    kernels = {k["id"] for k in listing(text_of(read(hub, token, "nb://kernels")))}
    assert kernels == {hub.kids["alice"], hub.kids["extra"]}
    for uri in (
        "nb://kernels/bob_nb/vars/mine",
        f"nb://kernels/{hub.kids['bob']}/vars/mine",
        f"nb://kernels/{hub.kids['bob']}/kernel",
    ):
        r = read(hub, token, uri)
        assert "bob-42" not in r.text
        assert r.json()["error"]["code"] == -32602, r.text  # not found: it does not exist for alice
    assert "bob-42" not in read(hub, token, "nb://vars/mine").text  # bare: alice's current kernel


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_changes_reach_the_client_through_the_service(hub, mode):
    """A subscription (handshake era) or a listen (2026-07-28) through the service hears a cell
    that changes the watched variable; another user's session is unknown to this grant."""
    _, bob = sign_in(hub, "bob")
    uri = "nb://kernels/bob_nb/vars/mine"

    async def go() -> None:
        async with sdk_connect({"url": hub.mcp_url}, mode, token=bob["access_token"]) as (client, inbox):
            if mode == "legacy":
                await client.subscribe_resource(uri)
                await anyio.sleep(1)
                await anyio.to_thread.run_sync(run, hub.kcs["bob"], f"mine = 'bob-42 {mode}'")
                await inbox.wait_for(lambda i: uri in i.updated, timeout=30)
                return
            async with client.listen(resource_subscriptions=[uri]) as sub:
                await anyio.sleep(1)
                await anyio.to_thread.run_sync(run, hub.kcs["bob"], f"mine = 'bob-42 {mode}'")
                with anyio.fail_after(30):
                    async for event in sub:
                        if getattr(event, "uri", None) == uri:
                            break

    anyio.run(go)


def test_a_session_belongs_to_its_grant(hub):
    _, alice = sign_in(hub, "alice")
    _, other = sign_in(hub, "alice")  # the same user, another client
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    r = httpx.post(hub.mcp_url, json=init, headers=accept | {"Authorization": f"Bearer {alice['access_token']}"})
    assert r.status_code == 200, r.text
    session = r.headers["mcp-session-id"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    headers = accept | {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    mine = httpx.post(hub.mcp_url, json=ping, headers=headers | {"Authorization": f"Bearer {alice['access_token']}"})
    assert mine.status_code == 200
    theirs = httpx.post(hub.mcp_url, json=ping, headers=headers | {"Authorization": f"Bearer {other['access_token']}"})
    assert theirs.status_code == 404  # unknown to the other grant's front


def test_tokens_are_not_interchangeable(hub):
    _, alice = sign_in(hub, "alice")
    hub_token = hub.user_token("alice")
    r = read(hub, hub_token, "nb://kernels")  # a Hub API token is not an MCP token
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
    api = httpx.get(hub.public + "hub/api/user", headers={"Authorization": f"token {alice['access_token']}"})
    assert api.status_code in (401, 403)  # an MCP token is not a Hub token
    server = httpx.get(
        hub.public + "user/alice/api/status", headers={"Authorization": f"token {alice['access_token']}"}
    )
    assert server.status_code in (302, 401, 403)  # nor a key to the user's server


# -- the authorization request ---------------------------------------------------------------------
def test_pkce_is_required_and_s256_only(hub):
    client_id = register(hub)
    browser = Browser(hub.public, "alice")
    r = browser.authorize(authorize_url(hub, client_id, None))  # no challenge
    assert code_of(r)["error"] == "invalid_request" and "code" not in code_of(r)
    assert code_of(r)["iss"] == hub.service_url.rstrip("/")  # RFC 9207, on errors too
    _, challenge = pkce()
    r = browser.authorize(authorize_url(hub, client_id, challenge, code_challenge_method="plain"))
    assert code_of(r)["error"] == "invalid_request"
    _, challenge = pkce()
    code = code_of(browser.authorize(authorize_url(hub, client_id, challenge)))["code"]
    missing = exchange(hub, client_id, code, None)
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"
    wrong = exchange(hub, client_id, code, pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"


def test_redirect_uri_must_be_registered_and_nothing_redirects_elsewhere(hub):
    client_id = register(hub)
    _, challenge = pkce()
    evil = "https://evil.example/cb"
    r = Browser(hub.public, "alice").authorize(authorize_url(hub, client_id, challenge, redirect_uri=evil))
    assert r.status_code == 400 and "location" not in r.headers
    r = httpx.get(authorize_url(hub, "no-such-client", challenge, redirect_uri=evil), timeout=30)
    assert r.status_code == 400 and "location" not in r.headers
    # the Hub's own callback only ever goes on to this service's consent page
    r = httpx.get(hub.service_url + "oauth_callback?code=x&state=y", timeout=30, follow_redirects=False)
    assert r.status_code in (400, 403) and "evil" not in r.headers.get("location", "")


def test_registration_refuses_unsafe_redirect_uris(hub):
    for uri in ("javascript:alert(1)", "http://evil.example/cb", "https://ok.example/cb#frag", "data:text/html,x"):
        body = {"client_name": "x", "redirect_uris": [uri], "token_endpoint_auth_method": "none"}
        r = httpx.post(hub.service_url + "oauth/register", json=body, timeout=30)
        assert r.status_code == 400 and r.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata"), r.text
    r = httpx.post(hub.service_url + "oauth/register", content=b"not json", timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "invalid_client_metadata"
    assert register(hub, redirect="http://127.0.0.1:33333/callback")  # loopback http: native apps
    assert register(hub, redirect="cursor://anysphere.cursor-retrieval/oauth/callback")  # a private-use scheme


def test_token_for_another_resource_is_refused(hub):
    client_id = register(hub)
    verifier, challenge = pkce()
    browser = Browser(hub.public, "alice")
    r = browser.authorize(authorize_url(hub, client_id, challenge, resource="https://other.example/mcp"))
    assert r.status_code == 400 and "invalid_target" in r.text and "location" not in r.headers
    code = code_of(browser.authorize(authorize_url(hub, client_id, challenge)))["code"]
    r = exchange(hub, client_id, code, verifier, resource="https://other.example/mcp")
    assert r.status_code == 400 and r.json()["error"] == "invalid_target"
    shouting = hub.mcp_url.replace("http://", "HTTP://")  # scheme and host compare case-insensitively
    code = code_of(browser.authorize(authorize_url(hub, client_id, challenge, resource=shouting)))["code"]
    assert exchange(hub, client_id, code, verifier, resource=hub.mcp_url + "/").status_code == 200


def test_a_replayed_code_is_refused_and_revokes_what_it_gave(hub):
    client_id = register(hub)
    verifier, challenge = pkce()
    code = code_of(Browser(hub.public, "alice").authorize(authorize_url(hub, client_id, challenge)))["code"]
    first = exchange(hub, client_id, code, verifier)
    assert first.status_code == 200
    token = first.json()["access_token"]
    assert "alice-41" in text_of(read(hub, token, "nb://kernels/alice_nb/vars/mine"))
    again = exchange(hub, client_id, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert read(hub, token, "nb://kernels").status_code == 401


def test_refresh_tokens_rotate_and_reuse_revokes_the_family(hub):
    client_id, tokens = sign_in(hub, "alice")
    new = refresh(hub, client_id, tokens["refresh_token"])
    assert new.status_code == 200, new.text
    fresh = new.json()
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert "alice-41" in text_of(read(hub, fresh["access_token"], "nb://kernels/alice_nb/vars/mine"))
    reused = refresh(hub, client_id, tokens["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert read(hub, fresh["access_token"], "nb://kernels").status_code == 401  # the family is revoked
    assert refresh(hub, client_id, fresh["refresh_token"]).status_code == 400


def test_a_client_revokes_its_own_grant(hub):
    client_id, tokens = sign_in(hub, "alice")
    other_client, other = sign_in(hub, "alice")
    form = {"token": tokens["refresh_token"], "token_type_hint": "refresh_token", "client_id": other_client}
    r = httpx.post(hub.service_url + "oauth/revoke", data=form, timeout=30)  # not its token
    assert r.status_code == 400 and read(hub, tokens["access_token"], "nb://kernels").status_code == 200
    form["client_id"] = client_id
    assert httpx.post(hub.service_url + "oauth/revoke", data=form, timeout=30).status_code == 200
    assert read(hub, tokens["access_token"], "nb://kernels").status_code == 401
    assert read(hub, other["access_token"], "nb://kernels").status_code == 200  # the other grant lives


def test_an_expired_access_token_is_refused(hub):
    _, tokens = sign_in(hub, "alice")
    assert tokens["expires_in"] == 8  # this test hub's setting (the default is 3600, the most allowed)
    time.sleep(9)
    r = read(hub, tokens["access_token"], "nb://kernels")
    assert r.status_code == 401 and "expired" in r.headers["www-authenticate"]


def test_consent_is_csrf_protected(hub):
    client_id = register(hub)
    _, challenge = pkce()
    alice = Browser(hub.public, "alice")
    page = alice.authorize(authorize_url(hub, client_id, challenge), answer=False)
    assert page.status_code == 200 and "name='csrf'" in page.text
    form = _inputs(page.text)
    forged = alice.http.post(str(page.url), data=form | {"csrf": "0" * 64, "decision": "allow"})
    assert forged.status_code == 403 and "location" not in forged.headers
    missing = alice.http.post(str(page.url), data={"pending": form["pending"], "decision": "allow"})
    assert missing.status_code == 403
    mallory = Browser(hub.public, "bob")  # another browser cannot answer alice's pending request
    mallory.authorize(authorize_url(hub, client_id, challenge), answer=False)
    stolen = mallory.http.post(str(page.url), data=form | {"decision": "allow"})
    assert stolen.status_code in (400, 403) and "location" not in stolen.headers
    ok = alice.http.post(str(page.url), data=form | {"decision": "allow"})
    assert ok.is_redirect and "code" in code_of(ok)


def test_denied_consent_gives_no_code(hub):
    client_id = register(hub)
    _, challenge = pkce()
    q = code_of(Browser(hub.public, "alice").authorize(authorize_url(hub, client_id, challenge), decision="deny"))
    assert q["error"] == "access_denied" and "code" not in q


# -- clients: metadata documents and configured ones -----------------------------------------------
def test_client_id_metadata_document_with_the_sdk(hub, cimd):
    url = cimd.publish("/assistant/client.json")
    storage = Storage()
    browser = Browser(hub.public, "bob")

    async def go() -> None:
        auth = provider(hub.mcp_url, browser, storage, client_metadata_url=url)
        async with connect(hub.mcp_url, auth) as client:
            assert "bob-42" in (await client.read_resource("nb://kernels/bob_nb/vars/mine")).contents[0].text

    anyio.run(go)
    assert storage.client is not None and storage.client.client_id == url  # no registration
    assert "Metadata document assistant" in browser.pages[0]


def test_metadata_document_at_a_private_address_is_refused(hub, cimd):
    _, challenge = pkce()
    for host in ("127.0.0.1", "10.0.0.1", "169.254.169.254"):
        url = f"https://{host}:{cimd.port}/assistant/client.json"
        r = httpx.get(authorize_url(hub, url, challenge), timeout=30)
        assert r.status_code == 400 and "not a public address" in r.text and "location" not in r.headers
    http_url = f"http://localhost:{cimd.port}/assistant/client.json"  # not https: a plain client id, unknown
    assert httpx.get(authorize_url(hub, http_url, challenge), timeout=30).status_code == 400
    lying = cimd.publish("/liar.json", {"client_id": "https://elsewhere.example/c.json", "redirect_uris": [REDIRECT]})
    r = httpx.get(authorize_url(hub, lying, challenge), timeout=30)
    assert r.status_code == 400 and "client_id is not its URL" in r.text
    big_url = f"https://localhost:{cimd.port}/big.json"
    cimd.publish("/big.json", {"client_id": big_url, "redirect_uris": [REDIRECT], "pad": "x" * 6000})
    r = httpx.get(authorize_url(hub, big_url, challenge), timeout=30)
    assert r.status_code == 400 and "larger than 5120 bytes" in r.text


def test_a_configured_client(hub):
    verifier, challenge = pkce()
    cid = PRECONF["client_id"]
    browser = Browser(hub.public, "bob")
    code = code_of(browser.authorize(authorize_url(hub, cid, challenge)))["code"]
    assert "Configured assistant" in browser.pages[0]
    r = exchange(hub, cid, code, verifier)
    assert r.status_code == 200
    assert "bob-42" in text_of(read(hub, r.json()["access_token"], "nb://kernels/bob_nb/vars/mine"))


# -- revocation --------------------------------------------------------------------------------
def test_users_and_admins_list_and_revoke_grants(hub):
    _, alice = sign_in(hub, "alice")
    alice_api = {"Authorization": f"token {hub.user_token('alice')}"}
    bob_api = {"Authorization": f"token {hub.user_token('bob')}"}
    root_api = {"Authorization": f"token {hub.user_token('root')}"}
    grants = httpx.get(hub.service_url + "api/grants", headers=alice_api, timeout=30).json()["grants"]
    assert grants and {g["user"] for g in grants} == {"alice"}
    everyone = httpx.get(hub.service_url + "api/grants", headers=root_api, timeout=30).json()["grants"]
    assert {"alice", "bob"} <= {g["user"] for g in everyone}
    assert {g["user"] for g in httpx.get(hub.service_url + "api/grants", headers=bob_api).json()["grants"]} <= {"bob"}
    newest = max(grants, key=lambda g: g["created"])
    assert httpx.delete(hub.service_url + f"api/grants/{newest['id']}", headers=bob_api).status_code == 404
    assert read(hub, alice["access_token"], "nb://kernels").status_code == 200
    assert httpx.delete(hub.service_url + f"api/grants/{newest['id']}", headers=root_api).status_code == 204
    assert read(hub, alice["access_token"], "nb://kernels").status_code == 401


def test_revoking_the_hub_sign_in_cuts_the_client_off(hub):
    _, alice = sign_in(hub, "alice")
    token = alice["access_token"]
    assert read(hub, token, "nb://kernels").status_code == 200
    listed = hub.api.get("users/alice/tokens").json()["api_tokens"]
    ours = [t for t in listed if "mcp-notebook" in str(t.get("oauth_client"))]
    assert ours  # the sign-in tokens the service holds, seen by the Hub like any other
    # revoking one revokes every token of that client for alice (the Hub's rule)
    assert hub.api.delete(f"users/alice/tokens/{ours[0]['id']}").status_code == 204
    until(lambda: read(hub, token, "nb://kernels").status_code == 401)


def test_a_stopped_server_disappears_and_a_user_without_server_is_told_where_to_start(hub):
    _, alice = sign_in(hub, "alice")
    token = alice["access_token"]
    assert "alice-second" in text_of(read(hub, token, "nb://kernels/extra/vars/other"))
    hub.stop_server("alice", "second")
    until(lambda: hub.kids["extra"] not in read(hub, token, "nb://kernels").text)
    assert read(hub, token, "nb://kernels/extra/vars/other").json()["error"]["code"] == -32602
    hub.api.post("users/carol")  # no server
    hub.api.post("users/carol/tokens")  # (the user exists for the Hub)
    _, carol = sign_in(hub, "carol")
    r = read(hub, carol["access_token"], "nb://vars/x")
    message = r.json()["error"]["message"]
    assert "no running server" in message and "/hub/home" in message
    assert hub.api.delete("users/carol").status_code == 204  # the user deleted: cut off
    until(lambda: read(hub, carol["access_token"], "nb://kernels").status_code == 401)


def test_typescript_sdk_client_signs_in_reads_and_refreshes(hub):
    """The official TypeScript SDK client (handshake era: SDK 1.x) through the same flow."""
    script = CHP.parents[2] / "hub_client.mjs"
    args = ["node", str(script), hub.mcp_url, REDIRECT, "9000", "nb://kernels/bob_nb/vars/mine", "nb://kernels"]
    proc = subprocess.Popen(
        args, cwd=script.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watchdog = threading.Timer(180, proc.kill)
    watchdog.start()
    try:
        first = json.loads(proc.stdout.readline() or "{}")
        assert "authorize" in first, proc.stderr.read()[-2000:]
        q = code_of(Browser(hub.public, "bob").authorize(first["authorize"]))
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


@pytest.mark.skipif(
    shutil.which("R") is None or not Path("/usr/share/jupyter/kernels/ir/kernel.json").exists(),
    reason="R and IRkernel are not installed (scripts/test.sh installs them where apt-get exists)",
)
def test_an_r_kernel_without_a_hub_through_the_service(hub):
    """Issue #43: a kernel without the hub (IRkernel) on a user's server, served from that server's
    side, reaches the user through the service like any other (listed with its language; its cells)."""
    _, alice = sign_in(hub, "alice")
    token = alice["access_token"]
    url = hub.public.rstrip("/") + hub.start_server("alice")
    r = hub.api.post(url + "api/sessions", json={"path": "alice_r.ipynb", "type": "notebook", "kernel": {"name": "ir"}})
    assert r.status_code == 201, r.text
    kid = r.json()["kernel"]["id"]
    try:
        conn = hub.base / "run" / "alice-default" / f"kernel-{kid}.json"
        until(conn.exists)
        kc = BlockingKernelClient(connection_file=str(conn))
        kc.load_connection_file()
        kc.start_channels(hb=False)
        kc.wait_for_ready(timeout=90)
        hub.clients.append(kc)

        def listed() -> bool:
            rows = json.loads(text_of(read(hub, token, "nb://kernels")))["kernels"]
            return any(k["label"] == "alice_r" and k["language"] == "R" for k in rows)

        until(listed)
        kc.execute_interactive('cat("from R for alice\\n")', timeout=60)
        until(lambda: "from R for alice" in text_of(read(hub, token, "nb://kernels/alice_r/cells")))
    finally:
        hub.api.delete(url + f"api/kernels/{kid}")
