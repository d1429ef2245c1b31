"""Refusals and robustness against a hub in a real kernel: the kernel and server keep working."""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from conftest import Mcp


@pytest.fixture(scope="module")
def hub(kernel):
    return kernel.load_hub("%config MCPHub.repr_timeout = 0.5\n%config MCPHub.max_body_bytes = 100000")


def still_alive(kernel, mcp: Mcp) -> None:
    assert kernel.run("print(6 * 7)").stdout.strip() == "42"
    assert mcp.result("ping") == {}


def test_requests_without_valid_token_are_refused(hub, kernel, mcp):
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    r = httpx.post(hub["url"], json=body, headers={"Mcp-Session-Id": mcp.session or ""})
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    r = httpx.post(hub["url"], json=body, headers={"Authorization": "Bearer " + "x" * 43})
    assert r.status_code == 401
    still_alive(kernel, mcp)


def test_foreign_origin_and_host_are_refused(hub, kernel, mcp):
    assert mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, Origin="http://evil.example.com").status_code == 403
    r = mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, Host="evil.example.com")
    assert r.status_code == 403
    r = mcp.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, Origin="http://localhost:8888")
    assert r.status_code == 200
    still_alive(kernel, mcp)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"\xff\xfe garbage", 400, -32700),
        (b"", 400, -32700),
        (b"[" * 50_000 + b"]" * 50_000, 400, -32700),
        (b'{"jsonrpc": "2.0", "id": {}, "method": "ping"}', 400, -32600),
        (b'"just a string"', 400, -32600),
        (b"x" * 200_000, 413, -32600),
    ],
)
def test_malformed_bodies_get_errors(hub, kernel, mcp, body, status, code):
    r = mcp.http.post(mcp.url, content=body, headers=mcp.headers())
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code
    still_alive(kernel, mcp)


def test_reads_answer_while_a_cell_is_busy(kernel, hub, mcp):
    kernel.run("busy_var = {'answer': 42}")
    msg_id = kernel.execute_nowait("import time; time.sleep(4); busy_done = True")
    try:
        contents = mcp.result("resources/read", {"uri": "nb://vars/busy_var"})["contents"]
        assert json.loads(contents[0]["text"])["repr"] == "{'answer': 42}"
        # The cell is still running: the variable it sets at the end does not exist yet.
        missing = mcp.call("resources/read", {"uri": "nb://vars/busy_done"})
        assert missing["error"]["code"] == -32002
    finally:
        kernel.wait_idle(msg_id, timeout=30)


def test_reads_survive_concurrent_mutation(kernel, hub, mcp):
    kernel.run("churn = {}")
    msg_id = kernel.execute_nowait(
        "import time\nt0 = time.time()\ni = 0\n"
        "while time.time() - t0 < 3:\n    churn[i % 500] = list(range(i % 50)); i += 1\n    churn.pop((i * 7) % 500, None)\n"
    )
    errors: list[str] = []
    try:
        for _ in range(40):
            reply = mcp.call("resources/read", {"uri": "nb://vars/churn"})
            if "error" in reply:
                errors.append(reply["error"]["message"])
    finally:
        kernel.wait_idle(msg_id, timeout=30)
    assert len(errors) < 40, errors[:3]  # errors, if any, are clear JSON-RPC errors
    still_alive(kernel, mcp)


def test_misbehaving_objects(kernel, hub, mcp):
    kernel.run(
        "class Boom:\n    def __repr__(self): raise ValueError('no repr for you')\n"
        "class Slow:\n    def __repr__(self):\n        import time; time.sleep(30); return 'slow'\n"
        "class Huge:\n    def __repr__(self): return 'x' * 10_000_000\n"
        "boom, slow, huge = Boom(), Slow(), Huge()\nloop = []; loop.append(loop)\nsmall = 1"
    )
    err = mcp.call("resources/read", {"uri": "nb://vars/boom"})["error"]
    assert err["code"] == -32603 and "no repr for you" in err["message"]

    results: dict[str, dict] = {}
    client = Mcp(hub)
    client.session, client.version = mcp.session, mcp.version
    t = threading.Thread(
        target=lambda: results.__setitem__("slow", client.call("resources/read", {"uri": "nb://vars/slow"}))
    )
    t.start()
    # While the hanging __repr__ is pending, other reads are answered.
    assert json.loads(mcp.result("resources/read", {"uri": "nb://vars/small"})["contents"][0]["text"])["repr"] == "1"
    t.join(30)
    assert not t.is_alive()
    assert results["slow"]["error"]["code"] == -32603 and "did not" in results["slow"]["error"]["message"]
    doc = json.loads(mcp.result("resources/read", {"uri": "nb://vars/huge"})["contents"][0]["text"])
    assert doc["truncated"] is True and len(doc["repr"]) < 100_000
    doc = json.loads(mcp.result("resources/read", {"uri": "nb://vars/loop"})["contents"][0]["text"])
    assert "[...]" in doc["repr"] or "..." in doc["repr"]
    still_alive(kernel, mcp)


def test_secrets_are_not_exposed(kernel, hub, mcp):
    kernel.run(
        "OPENAI_API_KEY = 'sk-proj-abcdefghijklmnopqrstuvwxyz0123456789'\n"
        "pem = '-----BEGIN RSA PRIVATE KEY-----\\nMIIEow\\n-----END RSA PRIVATE KEY-----'\n"
        "short_conf = 'endpoint=x key=sk-abcdefghijklmnopqrstuvwxyz0123'\n"
        "config_text = 'y' * 10_000 + ' key=sk-abcdefghijklmnopqrstuvwxyz0123 '\n"
    )
    uris = {r["uri"] for r in mcp.result("resources/list")["resources"]}
    assert "nb://vars/OPENAI_API_KEY" not in uris and "nb://vars/pem" not in uris
    for name in ("OPENAI_API_KEY", "pem", "short_conf"):
        assert mcp.call("resources/read", {"uri": f"nb://vars/{name}"})["error"]["code"] == -32002
    text = mcp.result("resources/read", {"uri": "nb://vars/config_text"})["contents"][0]["text"]
    assert "sk-abcdefghijklmnopqrstuvwxyz0123" not in text and "[REDACTED]" in text
    index = mcp.result("resources/read", {"uri": "nb://vars"})["contents"][0]["text"]
    assert "OPENAI_API_KEY" not in index and "sk-proj" not in index
