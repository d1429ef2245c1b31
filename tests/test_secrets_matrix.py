"""Secrets matrix: every credential shape and every secret-named value, planted in every kind of
place in a real kernel and its .ipynb, read back through every resource, template, completion and
tool, in both protocol eras: not one full secret value may be served.

The fake secrets are random per run. The hub's own token is one of them.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import nbformat
import pytest
from conftest import Mcp
from kernel_harness import Kernel

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"


def rand(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def make_secrets() -> dict[str, str]:
    pem_body = "\n".join(rand(ALNUM + "+/", 64) for _ in range(4))
    return {
        "openai": "sk-proj-" + rand(B64URL, 48),
        "anthropic": "sk-ant-api03-" + rand(B64URL, 80),
        "github": "ghp_" + rand(ALNUM, 36),
        "github_pat": "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
        "aws_id": "AKIA" + rand(string.ascii_uppercase + string.digits, 16),
        "slack": "xoxb-" + rand(string.digits, 12) + "-" + rand(string.digits, 12) + "-" + rand(ALNUM, 24),
        "google": "AIza" + rand(B64URL, 35),
        "hf": "hf_" + rand(ALNUM, 34),
        "pem": f"-----BEGIN PRIVATE KEY-----\n{pem_body}\n-----END PRIVATE KEY-----",
        "jwt": "eyJ" + rand(B64URL, 30) + ".eyJ" + rand(B64URL, 40) + "." + rand(B64URL, 43),
    }


SHAPED = make_secrets()
# Values without a recognisable shape: only their variable's name marks them as secret.
NAMED = {
    "aws_secret_access_key": rand(ALNUM + "/+", 40),
    "db_password": "hunter2-" + rand(ALNUM, 12),
    "slack_webhook_secret": rand(ALNUM, 24),
}
IDENTIFIER_SAFE = ("github", "github_pat", "aws_id", "hf")


def planting_cells() -> list[str]:
    cells = []
    for kind, value in SHAPED.items():
        v = json.dumps(value)
        cells.append(
            f"{kind}_value = {v}\n"  # a value
            f"nested_{kind} = {{'cfg': [{v}], 'inner': {{'deep': ({v},)}}}}\n"  # nested values
            f"keyed_{kind} = {{{v}: 1}}\n"  # a dict key
            f"def fn_{kind}(arg={v}):\n    {json.dumps('Uses ' + value)}\n    return arg\n"  # default, docstring
            f"print({v})\n"  # printed output
        )
        cells.append(f"raise RuntimeError({v})")  # a traceback
        cells.append(f"import pandas as pd\nframe_{kind} = pd.DataFrame({{{v}: [1, 2], 'ok': [3, 4]}})")  # a label
    for kind in IDENTIFIER_SAFE:
        cells.append(f"globals()[{json.dumps(SHAPED[kind])}] = 42")  # a name
    for name, value in NAMED.items():
        v = json.dumps(value)
        cells.append(
            f"{name} = {v}\n"
            f"settings_{name} = {{'nested': [{name}], {name!r}: {name}}}\n"
            f"def connect_{name}(secret={name}):\n    return secret\n"
            f"connect_{name}.__doc__ = 'connects with ' + {name}\n"
            f"print({name})\n"
            f"frame_{name} = pd.DataFrame({{{name}: [1], 'ok': [2]}})\n"
        )
        cells.append(f"raise ValueError({name})")
    # Everyday code that binds bare secret words: must not mask ordinary words everywhere.
    cells.append(
        "weather_cols = ['temperature', 'humidity']\n"
        "for key in weather_cols:\n    pass\n"
        "for token in 'the tokenizer splits sentences'.split():\n    pass\n"
    )
    # The hub's own token: copied into variables, built into headers, printed, raised.
    cells.append(
        "import mcp_notebook\n"
        "conn = dict(mcp_notebook.connection_info())\n"
        "headers = {'Authorization': 'Bearer ' + conn['token']}\n"
        "copied = [conn['token']]\n"
        "print(conn)\n"
        "print(headers)\n"
    )
    cells.append("raise KeyError(conn['token'])")
    # Custom resources: secrets in descriptors, text, bytes, JSON, error messages and completions.
    v = json.dumps(SHAPED["openai"])
    cells.append(
        "import mcp_notebook\n"
        f"@mcp_notebook.resource('leaky://text', name='leaky-' + {v}, title='t ' + db_password,"
        f" description='d ' + {json.dumps(SHAPED['github'])}, mime_type='text/plain')\n"
        f"def leaky_text():\n    return 'text ' + {v} + ' ' + db_password + ' ' + conn['token']\n"
        "@mcp_notebook.resource('leaky://bytes', mime_type='application/octet-stream')\n"
        f"def leaky_bytes():\n    return ('bytes ' + db_password + ' ' + {v}).encode()\n"
        "@mcp_notebook.resource('leaky://json')\n"
        f"def leaky_json():\n    return {{'nested': [{v}], 'password': db_password, 'h': headers}}\n"
        "@mcp_notebook.resource('leaky://raise')\n"
        f"def leaky_raise():\n    raise RuntimeError('boom ' + {v} + ' ' + db_password)\n"
        f"@mcp_notebook.resource('leaky://t/{{x}}', complete={{'x': [{v}, db_password, 'safe-value']}})\n"
        "def leaky_t(x):\n    return x\n"
    )
    return cells


def write_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    everything = list(SHAPED.values()) + list(NAMED.values())
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Keys\n" + "\n\n".join(f"- {v}" for v in everything), id="md-secrets"),
        nbformat.v4.new_code_cell(
            "\n".join(f"k{i} = {json.dumps(v)}" for i, v in enumerate(everything)), id="code-secrets", execution_count=1
        ),
    ]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="\n".join(everything))]
    nbformat.write(nb, str(path))


class Stateless:
    """Stateless 2026-07-28 requests over plain HTTP."""

    def __init__(self, info: dict[str, Any]):
        self.url, self.token = info["url"], info["token"]
        self.http = httpx.Client(timeout=30)

    def call(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
        }
        params = dict(params or {})
        if method == "resources/read":
            headers["Mcp-Name"] = params["uri"] if params["uri"].isascii() else "=?base64?"
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        return self.http.post(self.url, json=body, headers=headers)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, dict[str, Any]]]:
    nb = tmp_path_factory.mktemp("nb") / "secrets.ipynb"
    write_notebook(nb)
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path_factory.mktemp("runtime"))})
    try:
        info = k.load_hub(f"%config MCPHub.notebook_path = {str(nb)!r}")
        for code in planting_cells():
            k.run(code, check=False)
        yield k, info
    finally:
        k.shutdown()


def forbidden(token: str) -> dict[str, str]:
    """Every full value (and its JSON-escaped form, as it would appear inside a JSON body)."""
    out = {}
    for name, value in [*SHAPED.items(), *NAMED.items(), ("token", token)]:
        out[name] = value
        out[name + " (json)"] = json.dumps(value)[1:-1]
    for n, line in enumerate(SHAPED["pem"].splitlines()[1:-1]):
        out[f"pem line {n}"] = line
    return out


def template_variables(template: str) -> list[str]:
    names = []
    for expr in re.findall(r"\{([^}]*)\}", template):
        names += [v.strip() for v in expr.lstrip("?&/#.;+").split(",")]
    return names


def sweep_handshake(mcp: Mcp) -> list[str]:
    """Read everything there is, the way a client would, and return every served body."""
    served: list[str] = []

    def call(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        mcp._id += 1
        r = mcp.post({"jsonrpc": "2.0", "id": mcp._id, "method": method, "params": params or {}})
        served.append(r.text)
        try:
            return r.json()
        except ValueError:
            return {}

    def read_json(uri: str) -> Any:
        reply = call("resources/read", {"uri": uri})
        try:
            return json.loads(reply["result"]["contents"][0]["text"])
        except (KeyError, ValueError, IndexError):
            return None

    resources, cursor = [], None
    while True:
        result = call("resources/list", {"cursor": cursor} if cursor else {}).get("result", {})
        resources += result.get("resources", [])
        cursor = result.get("nextCursor")
        if not cursor:
            break
    templates = call("resources/templates/list").get("result", {}).get("resourceTemplates", [])
    uris = {r["uri"] for r in resources}
    index = read_json("nb://vars?limit=100000") or {}
    names = [v["name"] for v in index.get("variables", [])]
    hidden = ["db_password", "aws_secret_access_key", "openai_value", "conn", "headers", "copied"]
    for name in names + hidden:
        uris.add(f"nb://vars/{name}")
        if name.startswith("frame_"):
            for fmt in ("csv", "json", "markdown"):
                uris.add(f"nb://frames/{name}?format={fmt}")
            uris.add(f"nb://frames/{name}/schema")
    cells = read_json("nb://cells?limit=100000") or {}
    for cell in cells.get("cells", []):
        uris.add(cell["uri"])
        doc = read_json(cell["uri"]) or {}
        for out in doc.get("outputs", []):
            for mime in out.get("mime_types", []):
                uris.add(f"{out['uri']}?mime={quote(mime, safe='')}")
    notebook = read_json("nb://notebook") or {}
    for cell in notebook.get("cells", []):
        if cell.get("id"):
            uris.add(f"nb://notebook/cells/{cell['id']}")
    for uri in sorted(uris):
        call("resources/read", {"uri": uri})
        call("tools/call", {"name": "read_resource", "arguments": {"uri": uri}})
    cursor = None
    while True:
        args = {"cursor": cursor} if cursor else {}
        reply = call("tools/call", {"name": "list_resources", "arguments": args})
        try:
            cursor = json.loads(reply["result"]["content"][0]["text"]).get("nextCursor")
        except (KeyError, ValueError, IndexError):
            cursor = None
        if not cursor:
            break
    frames = [n for n in names if n.startswith("frame_")]
    prefixes = {""} | {v[:3] for v in [*SHAPED.values(), *NAMED.values()]}
    for template in templates:
        uri_template = template["uriTemplate"]
        for variable in template_variables(uri_template):
            contexts = [{}] + [{"name": f} for f in frames] if "frames" in uri_template else [{}]
            for context in contexts:
                for prefix in sorted(prefixes):
                    params: dict[str, Any] = {
                        "ref": {"type": "ref/resource", "uri": uri_template},
                        "argument": {"name": variable, "value": prefix},
                    }
                    if context:
                        params["context"] = {"arguments": context}
                    call("completion/complete", params)
    return served


def with_blobs(served: list[str]) -> str:
    """Every body, plus the decoded text of every base64 blob in it."""
    out = list(served)
    for body in served:
        for blob in re.findall(r'"(?:blob|data)":\s*"([A-Za-z0-9+/=]+)"', body):
            try:
                out.append(base64.b64decode(blob).decode("utf-8", "replace"))
            except ValueError:
                pass
    return "\n".join(out)


def assert_nothing_served(served: list[str], token: str) -> None:
    leaks = []
    bodies = with_blobs(served)
    for label, value in forbidden(token).items():
        if value in bodies:
            leaks.append(label)
    assert leaks == [], f"served in full: {leaks}"


def test_planting_worked(planted):
    k, _ = planted
    out = k.run(f"print(len(nested_openai['cfg'][0]), db_password == {NAMED['db_password']!r})")
    assert out.stdout.split() == [str(len(SHAPED["openai"])), "True"]


def test_no_secret_served_through_any_resource_template_completion_or_tool(planted):
    _, info = planted
    mcp = Mcp(info)
    try:
        mcp.initialize()
        served = sweep_handshake(mcp)
    finally:
        mcp.close()
    assert len(served) > 200  # the sweep really read things
    assert any("[REDACTED]" in body for body in served)
    assert "bytes [REDACTED]" in with_blobs(served)  # the custom resource's bytes were served, masked
    assert any("safe-value" in body for body in served)  # completion still answers, minus the secrets
    assert_nothing_served(served, info["token"])


def test_no_secret_served_in_the_stateless_era(planted):
    _, info = planted
    client = Stateless(info)
    served = []
    listed = client.call("resources/list")
    served.append(listed.text)
    uris = [r["uri"] for r in listed.json()["result"]["resources"]]
    uris += ["nb://notebook", "nb://cells", "nb://vars/headers", "nb://vars/settings_db_password", "nb://kernel"]
    for uri in uris:
        served.append(client.call("resources/read", {"uri": uri}).text)
    served.append(client.call("tools/call", {"name": "list_resources", "arguments": {}}).text)
    assert_nothing_served(served, info["token"])


def test_everyday_words_bound_to_bare_secret_names_stay_readable(planted):
    _, info = planted
    mcp = Mcp(info)
    try:
        mcp.initialize()
        text = mcp.result("resources/read", {"uri": "nb://vars/weather_cols"})["contents"][0]["text"]
        assert "temperature" in text and "humidity" in text
    finally:
        mcp.close()


def test_values_the_hub_hides_are_masked_in_sources_and_outputs(planted):
    """The specific promise: db_password is hidden in nb://vars, so it is masked in nb://cells too."""
    _, info = planted
    mcp = Mcp(info)
    try:
        mcp.initialize()
        cells = json.loads(mcp.result("resources/read", {"uri": "nb://cells?limit=1000"})["contents"][0]["text"])
        for cell in cells["cells"]:
            doc = mcp.result("resources/read", {"uri": cell["uri"]})["contents"][0]["text"]
            if "db_password = " in doc:
                assert 'db_password = \\"[REDACTED]\\"' in doc
                break
        else:
            raise AssertionError("the cell assigning db_password is not in nb://cells")
    finally:
        mcp.close()
