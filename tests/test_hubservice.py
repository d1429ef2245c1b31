"""One MCP URL for every user of a real JupyterHub (configurable-http-proxy, DummyAuthenticator,
local single-user servers with the extension, kernels with the hub loaded): the official Python
SDK client signs in through the Hub's login form and the consent page, reads its own user's
kernels in both eras and across a token refresh; every attack in the issue is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from hub_oauth import REDIRECT, Browser, Storage, code_of, connect, provider
from jhub import CHP, Hub

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not CHP.exists(), reason="tests/node: npm ci installs configurable-http-proxy"),
]
jupyterhub = pytest.importorskip("jupyterhub")
pytest.importorskip("authlib")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    h = Hub(tmp_path_factory.mktemp("jhub"), ("--MCPNotebookService.access_token_seconds=8",))
    try:
        h.kernel("alice", "alice_nb.ipynb", "mine = 'alice-41'")
        h.kernel("alice", "extra.ipynb", "other = 'alice-second'", server="second")
        h.kernel("bob", "bob_nb.ipynb", "mine = 'bob-42'")
        yield h
    except BaseException:
        print(h.log_text()[-5000:])
        raise
    finally:
        h.stop()


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
