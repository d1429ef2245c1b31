"""The JupyterHub service under its old names (deprecated for a release) and its CORS fields.

The service runs as a process, without a JupyterHub (its metadata and the MCP endpoint's preflight
need none): ``python -m mcp_notebook.hubservice`` with ``--MCPNotebookService.*`` settings still
serves, says the new spelling of each, and its preflight and exposed headers are the endpoints'
one list (``protocol/security.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from jserver import free_port

from mcp_notebook.protocol.security import cors_headers, preflight_headers

pytest.importorskip("jupyterhub")
pytest.importorskip("authlib")
ROOT = Path(__file__).resolve().parents[1]


def _service(module: str, prefix: str, port: int, log: Path, public: str = "") -> subprocess.Popen[bytes]:
    public = public or f"http://127.0.0.1:{port}/services/mcp-notebook/"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        "JUPYTERHUB_API_URL": "http://127.0.0.1:9/hub/api",  # never asked: no one signs in here
        "JUPYTERHUB_API_TOKEN": os.urandom(8).hex(),
        "JUPYTERHUB_CLIENT_ID": "service-mcp-notebook",
        "JUPYTERHUB_SERVICE_PREFIX": "/services/mcp-notebook/",
        "JUPYTERHUB_BASE_URL": "/",
    }
    args = [f"--{prefix}.public_url={public}", f"--{prefix}.port={port}", f"--{prefix}.db_path=:memory:"]
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", module, *args], env=env, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(
    params=[
        ("mcp_notebook.hubservice", "MCPNotebookService"),
        ("mcp_notebook.jupyterhub_service", "JupyterHubService"),
    ],
    ids=["old", "new"],
)
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    module, prefix = request.param
    port = free_port()
    log = tmp_path / "service.log"
    proc = _service(module, prefix, port, log)
    url = f"http://127.0.0.1:{port}/services/mcp-notebook/"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(url + ".well-known/oauth-protected-resource", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise TimeoutError(log.read_text())
        yield url, log, prefix
    finally:
        proc.terminate()
        proc.wait(20)


def test_old_and_new_names_run_the_service(service):
    """Both spellings set the public URL (the metadata names it); the old ones warn with the new."""
    url, log, prefix = service
    assert httpx.get(url + ".well-known/oauth-protected-resource").json()["resource"] == url + "mcp"
    text = log.read_text()
    if prefix == "MCPNotebookService":
        assert "python -m mcp_notebook.hubservice is deprecated" in text
        assert "run python -m mcp_notebook.jupyterhub_service" in text
        assert "--MCPNotebookService.* is deprecated" in text
        names = "(--JupyterHubService.db_path, --JupyterHubService.port, --JupyterHubService.public_url)"
        assert names in text  # each setting given, in its new spelling (never its value)
    else:
        assert "deprecated" not in text


def test_the_service_sends_the_endpoints_cors_fields(service):
    """The preflight and the exposed headers of the service's MCP endpoint are protocol/security.py's,
    which every other endpoint sends (MCP-Protocol-Version exposed included)."""
    url = service[0]
    origin = url.split("/services/")[0]
    r = httpx.options(url + "mcp", headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
    assert r.status_code == 204
    want = preflight_headers({"origin": origin})
    for name, value in want.items():
        assert r.headers.get(name) == value, name
    assert "MCP-Protocol-Version" in r.headers["Access-Control-Expose-Headers"]
    refused = httpx.post(url + "mcp", json={}, headers={"Origin": origin})  # no token: 401, with the CORS fields
    assert refused.status_code == 401
    assert refused.headers["Access-Control-Expose-Headers"] == cors_headers(origin)["Access-Control-Expose-Headers"]
    assert httpx.options(url + "mcp", headers={"Origin": "http://evil.example"}).status_code == 403


def test_a_plain_http_public_url_is_said_at_start(tmp_path):
    """Over plain http (not loopback) browsers send no fetch metadata: the service says what is lost."""
    port = free_port()
    log = tmp_path / "service.log"
    public = "http://hub.example.test/services/mcp-notebook/"
    proc = _service("mcp_notebook.jupyterhub_service", "JupyterHubService", port, log, public)
    try:
        deadline = time.monotonic() + 60
        while "plain http" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        text = log.read_text()
        assert "is plain http: browsers send no Sec-Fetch headers" in text and "subdomain_host" in text
    finally:
        proc.terminate()
        proc.wait(20)


def test_cookies_over_https_are_host_prefixed_and_secure():
    """Over https the consent cookie is __Host- and Secure (its path /, so its value is a nonce, never
    the pending id); over plain http it stays on the service's path."""
    from mcp_notebook.jupyterhub_service.browser import consent_cookie

    name, attributes = consent_cookie(True)
    assert name.startswith("__Host-") and attributes["secure"] is True and attributes["path"] == "/"
    assert attributes["httponly"] is True and attributes["samesite"] == "Lax"
    name, attributes = consent_cookie(False)
    assert not name.startswith("__Host-") and "path" not in attributes  # the caller's: the service's prefix


def test_a_sign_in_whose_token_reaches_more_than_the_mcp_routes_is_refused():
    """The scopes a sign-in's JupyterHub token carries, checked with JupyterHub's own check_scopes:
    the mcp-notebook scope for the user is needed, access:servers in any form is refused."""
    from jupyterhub.services.auth import check_scopes

    from mcp_notebook.jupyterhub_service.web import scopes_problem

    class Scopes:
        """What scopes_problem asks of HubOAuth: its check_scopes over a user model."""

        def check_scopes(self, required: set[str], model: dict) -> set[str]:
            return check_scopes(required, set(model["scopes"]))

    def problem(*scopes: str) -> str | None:
        return scopes_problem(Scopes(), {"name": "alice", "scopes": list(scopes)})

    assert problem("custom:mcp-notebook:kernels!user=alice", "read:servers!user=alice") is None
    assert problem("custom:mcp-notebook:kernels") is None
    for old in ("access:servers!user=alice", "access:servers!server=alice/", "access:servers"):
        assert "full access" in problem("custom:mcp-notebook:kernels!user=alice", old)
    assert "did not give" in problem("read:servers!user=alice")
    assert "did not give" in problem("custom:mcp-notebook:kernels!user=bob")
