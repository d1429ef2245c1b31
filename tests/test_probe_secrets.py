"""Secrets through the channels the first matrix (test_secrets_matrix.py) does not read: JSON-RPC error
messages (a typed resource's validation error echoes its input), tool errors and ``changes_since``,
log notifications, the comm state the JupyterLab panel receives, DuckDB listings and engine frames,
``nb://notebook/active``, ``nb://vars/{name}/schema`` and ``nb://schemas/{name}``.

Each probe plants a random secret, reads it back the way a client would, and asserts the full value
is not in what came back.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Mcp
from kernel_harness import Kernel
from test_frontend_comm import Frontend, code, notebook

ALNUM = string.ascii_letters + string.digits
OPENAI = "sk-proj-" + "".join(secrets.choice(ALNUM) for _ in range(48))
GITHUB = "ghp_" + "".join(secrets.choice(ALNUM) for _ in range(36))
PASSWORD = "hunter2-" + "".join(secrets.choice(ALNUM) for _ in range(12))

PLANT = f"""
import mcp_notebook, dataclasses
db_password = {PASSWORD!r}

@mcp_notebook.resource("typed://year/{{year}}")
def by_year(year: int) -> dict:
    return {{"year": year}}

@mcp_notebook.resource("plain://echo/{{x}}")
def echo(x):
    raise ValueError("bad x " + x)

@dataclasses.dataclass
class Conn:
    host: str
    note: str

conn_cfg = Conn(host="db", note="uses " + {OPENAI!r})
"""


def leaks(text: str, token: str) -> list[str]:
    found = []
    for label, value in (("openai", OPENAI), ("github", GITHUB), ("password", PASSWORD), ("token", token)):
        if value in text or json.dumps(value)[1:-1] in text:
            found.append(label)
    return found


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, dict[str, Any]]]:
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path_factory.mktemp("runtime"))})
    try:
        info = k.load_hub()
        k.run(PLANT)
        yield k, info
    finally:
        k.shutdown()


@pytest.fixture
def mcp(probed: tuple[Kernel, dict[str, Any]]) -> Iterator[Mcp]:
    client = Mcp(probed[1])
    client.initialize()
    try:
        yield client
    finally:
        client.close()


@pytest.mark.parametrize("secret", [OPENAI, GITHUB, PASSWORD])
def test_typed_validation_errors_do_not_echo_a_secret_argument(probed, mcp, secret):
    reply = mcp.call("resources/read", {"uri": f"typed://year/{secret}"})
    assert reply["error"]["code"] == -32602, reply
    assert "year" in reply["error"]["message"]  # still names the parameter
    assert leaks(json.dumps(reply), probed[1]["token"]) == []


def test_not_found_and_read_errors_do_not_echo_secrets(probed, mcp):
    token = probed[1]["token"]
    for uri in (f"nb://vars/{OPENAI}", f"nb://frames/{GITHUB}", f"plain://echo/{PASSWORD}", f"nb://cells/{token}"):
        reply = mcp.call("resources/read", {"uri": uri})
        assert "error" in reply, reply
        assert leaks(json.dumps(reply), token) == [], (uri, reply)


def test_tool_errors_do_not_echo_secrets(probed, mcp):
    token = probed[1]["token"]
    for uri in (f"typed://year/{OPENAI}", f"nb://vars/{GITHUB}", f"plain://echo/{PASSWORD}"):
        reply = mcp.call("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
        assert reply["result"]["isError"] is True, reply
        assert leaks(json.dumps(reply), token) == [], (uri, reply)


def test_changes_since_does_not_list_secret_uris(probed, mcp):
    k, info = probed
    mcp.call("tools/call", {"name": "read_resource", "arguments": {"uri": "nb://vars/conn_cfg"}})
    mcp.call("tools/call", {"name": "changes_since", "arguments": {"wait_seconds": 0}})
    k.run(f"conn_cfg = Conn(host='db2', note={GITHUB!r})")
    reply = mcp.call("tools/call", {"name": "changes_since", "arguments": {"wait_seconds": 0}})
    assert "nb://vars/conn_cfg" in json.dumps(reply)
    assert leaks(json.dumps(reply), info["token"]) == []


def test_structured_values_schemas_and_notebook_active(probed, mcp):
    k, info = probed
    served = []
    for uri in ("nb://vars/conn_cfg", "nb://vars/conn_cfg/schema", "nb://schemas/by_year"):
        served.append(json.dumps(mcp.call("resources/read", {"uri": uri})))
    fe = Frontend(k)
    fe.open()
    fe.wait(lambda d: d.get("type") == "state")
    doc = notebook(code("c1", f"api_key = {OPENAI!r}\nprint({GITHUB!r})", [], 1))
    fe.send({"type": "document", "nb": doc})
    fe.send({"type": "active", "active": "c1", "selected": ["c1"]})
    fe.state()  # the comm handled both messages
    served.append(json.dumps(mcp.call("resources/read", {"uri": "nb://notebook/active"})))
    assert "c1" in served[-1]
    fe.close()
    assert leaks("\n".join(served), info["token"]) == []


def test_duckdb_listing_and_frames(probed, mcp):
    pytest.importorskip("duckdb")
    k, info = probed
    k.run(
        "import duckdb\n"
        "ddb = duckdb.connect()\n"
        f'ddb.execute(\'CREATE TABLE "t_{GITHUB}" ("{OPENAI}" VARCHAR, ok INT)\')\n'
        f"ddb.execute('INSERT INTO \"t_{GITHUB}\" VALUES (?, 1)', [{PASSWORD!r}])\n"
        f"rel_probe = ddb.sql('SELECT * FROM \"t_{GITHUB}\"')\n"
    )
    served = []
    listing = mcp.call("resources/read", {"uri": "nb://db/ddb"})
    served.append(json.dumps(listing))
    assert "result" in listing, listing
    for uri in ("nb://frames/rel_probe", "nb://frames/rel_probe?format=json", "nb://frames/rel_probe/schema"):
        served.append(json.dumps(mcp.call("resources/read", {"uri": uri})))
    templates = mcp.result("resources/templates/list")["resourceTemplates"]
    for t in templates:
        if t["uriTemplate"].startswith("nb://db/ddb/tables/"):
            for prefix in ("", "t_", "gh"):
                served.append(
                    json.dumps(
                        mcp.call(
                            "completion/complete",
                            {
                                "ref": {"type": "ref/resource", "uri": t["uriTemplate"]},
                                "argument": {"name": "table", "value": prefix},
                            },
                        )
                    )
                )
    assert leaks("\n".join(served), info["token"]) == []


def test_comm_state_does_not_carry_secrets(probed, mcp):
    """A client's name and its subscriptions reach the panel: masked like everything else that leaves."""
    k, info = probed
    c = Mcp(info)
    r = c.post(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "agent " + OPENAI, "version": "1"},
            },
        }
    )
    c.session = r.headers["mcp-session-id"]
    c.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    c.call("resources/subscribe", {"uri": f"nb://vars/{GITHUB}"})
    c.call("resources/subscribe", {"uri": f"typed://year/{PASSWORD}"})
    fe = Frontend(k)
    fe.open()
    state = fe.state()
    fe.close()
    c.close()
    text = json.dumps(state)
    assert "agent" in text
    assert leaks(text, info["token"]) == []


def test_a_credential_after_an_underscore_is_still_a_credential():
    """``t_ghp_…`` (a table named after a key), ``OPENAI_sk-…``: an underscore is no word boundary for a
    credential; a letter still is (``risk-…``, ``ghghp_…`` stay)."""
    from mcp_notebook.redact import mask_secrets

    for text in (f"t_{GITHUB}", f"KEY_{OPENAI}", f"x_{OPENAI}.csv"):
        assert GITHUB not in mask_secrets(text) and OPENAI not in mask_secrets(text), text
    plain = "risk-management-abcdefghijklmnopqrstuvwxyz"
    assert mask_secrets(plain) == plain
