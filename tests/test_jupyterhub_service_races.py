"""Revocation without races, in process against the real store and authlib's server: a revocation
raced against a refresh, a code exchanged twice at once, a refresh token used twice at once, and
a revocation raced against the first check of an access token; then the caller's address forms
and the registration limits. (The same through HTTP: test_jupyterhub_service_bounds.py.)"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("authlib")
pytest.importorskip("jupyterhub")

from mcp_notebook.jupyterhub_service.cimd import is_public
from mcp_notebook.jupyterhub_service.endpoint import Fronts
from mcp_notebook.jupyterhub_service.limits import PendingSignIns, RateLimit, registration_problem
from mcp_notebook.jupyterhub_service.oauth import AuthorizationServer, FormRequest
from mcp_notebook.jupyterhub_service.store import Store, check_secret, hash_secret

pytestmark = pytest.mark.timeout(300)
ROUNDS = 1000
PUBLIC = "https://hub.example.org/services/mcp-notebook/"
REDIRECT = "http://127.0.0.1:9/callback"
CLIENT = "race-client"


@pytest.fixture
def world(tmp_path: Path) -> tuple[AuthorizationServer, Fronts]:
    store = Store(str(tmp_path / "oauth.sqlite"))
    store.save_client(CLIENT, "dcr", {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}, None)
    server = AuthorizationServer(store, None, PUBLIC.rstrip("/"), PUBLIC + "mcp", 3600, 3600, 60)
    fronts = Fronts(server, "http://127.0.0.1:9/hub/api", "http://127.0.0.1:9", "http://127.0.0.1:9/hub/home", 5)
    yield server, fronts
    fronts.close()
    store.close()


def token_request(server: AuthorizationServer, form: dict[str, str]) -> dict[str, Any]:
    body = "&".join(f"{k}={v}" for k, v in form.items()).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    resp = server.create_token_response(FormRequest("POST", PUBLIC + "oauth/token", headers, "", body))
    return resp.body if resp.status == 200 else {"error": resp.body.get("error"), "status": resp.status}


def new_code(server: AuthorizationServer) -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    code = secrets.token_urlsafe(32)
    fields = {
        "client_id": CLIENT,
        "user": "alice",
        "scope": "kernels:read",
        "redirect_uri": REDIRECT,
        "resource": PUBLIC + "mcp",
        "challenge": challenge,
        "method": "S256",
    }
    server.store.save_code(code, fields, "jupyterhub-token-of-alice", time.time() + 60)
    return code, verifier


def exchange(server: AuthorizationServer, code: str, verifier: str) -> dict[str, Any]:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "client_id": CLIENT,
        "redirect_uri": REDIRECT,
    }
    return token_request(server, form)


def refresh(server: AuthorizationServer, token: str) -> dict[str, Any]:
    return token_request(server, {"grant_type": "refresh_token", "refresh_token": token, "client_id": CLIENT})


def race(*calls: Any) -> list[Any]:
    """Run the calls at the same moment, each on a thread of its own; their results."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int, call: Any) -> None:
        barrier.wait()
        results[i] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def accepted(fronts: Fronts, access: str) -> bool:
    return fronts.remembered(access) is not None or not isinstance(fronts.authenticate(access), str)


def test_revocation_wins_every_race(world):
    """1,000 rounds of each race; after every round nothing of a revoked grant is accepted."""
    server, fronts = world
    outcomes: dict[str, int] = {}
    for _ in range(ROUNDS):
        tokens = exchange(server, *new_code(server))
        family = fronts.authenticate(tokens["access_token"]).family
        # a revocation raced against a refresh and against the first check of the access token
        got, _, _ = race(
            lambda t=tokens: refresh(server, t["refresh_token"]),
            lambda f=family: server.revoke(f),
            lambda t=tokens: fronts.authenticate(t["access_token"]),
        )
        outcome = "refresh first" if "access_token" in got else "revocation first"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        for token in (tokens["access_token"], got.get("access_token")):
            assert token is None or not accepted(fronts, token)
        assert "error" in refresh(server, got.get("refresh_token") or tokens["refresh_token"])
    for _ in range(ROUNDS):  # a code exchanged twice at once: what either got is revoked
        code, verifier = new_code(server)
        results = race(
            lambda c=code, v=verifier: exchange(server, c, v), lambda c=code, v=verifier: exchange(server, c, v)
        )
        assert sum("access_token" in r for r in results) <= 1
        for r in results:
            assert "access_token" not in r or not accepted(fronts, r["access_token"])
    for _ in range(ROUNDS // 4):  # a refresh token used twice at once: the grant ends
        tokens = exchange(server, *new_code(server))
        results = race(
            lambda t=tokens: refresh(server, t["refresh_token"]), lambda t=tokens: refresh(server, t["refresh_token"])
        )
        assert sum("access_token" in r for r in results) <= 1
        for token in [tokens["access_token"]] + [r["access_token"] for r in results if "access_token" in r]:
            assert not accepted(fronts, token)
    print("outcomes of the revocation/refresh race:", outcomes)


def test_a_code_exchanged_once_then_replayed_revokes_its_grant(world):
    server, fronts = world
    code, verifier = new_code(server)
    first = exchange(server, code, verifier)
    assert accepted(fronts, first["access_token"])
    assert exchange(server, code, verifier)["error"] == "invalid_grant"
    assert not accepted(fronts, first["access_token"])


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "127.0.0.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:10.0.0.1",  # IPv4-mapped
        "::ffff:169.254.169.254",
        "::10.0.0.1",  # IPv4-compatible (deprecated)
        "::127.0.0.1",
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::a00:1",  # local-use NAT64
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    ],
)
def test_private_addresses_in_every_form_are_refused(address):
    assert not is_public(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "64:ff9b::5db8:d70e"])
def test_public_addresses_pass(address):
    assert is_public(address)


def test_registration_limits_and_rate(world):
    assert registration_problem({"client_name": "x" * 201}) is not None
    assert registration_problem({"redirect_uris": [REDIRECT] * 11}) is not None
    assert registration_problem({"redirect_uris": ["https://a.example/" + "x" * 2000]}) is not None
    assert registration_problem({"contacts": [{"nested": 1}]}) is not None
    assert registration_problem({"client_name": "ok", "redirect_uris": [REDIRECT]}) is None
    server, _ = world
    limit = RateLimit(server.store, per_minute=10, burst=20)
    assert sum(limit.allow("198.51.100.7") for _ in range(300)) == 20  # 300 in a row: 20 pass
    assert limit.allow("198.51.100.8")  # another address is not affected


def test_pending_sign_ins_are_capped_and_expire(world):
    server, _ = world
    pending = PendingSignIns(server.store, seconds=0.2, total=30, per_address=5)
    assert [pending.add("q", "a") is not None for _ in range(6)] == [True] * 5 + [False]
    for i in range(25):
        assert pending.add("q", f"b{i}") is not None
    assert pending.add("q", "c") is None  # 30 in all
    time.sleep(0.3)
    added = pending.add("q", "a")  # the rest expired
    assert added is not None and pending.get(added[0]) == ("q", added[1])
    pending.pop(added[0])
    assert pending.get(added[0]) is None


def test_client_secrets_hash_with_sha256_and_old_scrypt_hashes_still_verify():
    stored = hash_secret("s3cret")
    assert stored.startswith("sha256$") and check_secret("s3cret", stored) and not check_secret("other", stored)
    salt = secrets.token_bytes(16)
    old = salt.hex() + ":" + hashlib.scrypt(b"s3cret", salt=salt, n=2**14, r=8, p=1).hex()  # main's format
    assert check_secret("s3cret", old) and not check_secret("other", old)
