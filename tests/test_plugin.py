"""The Claude Code plugin, its skills, what every server tells the model, and the registry entry.

- The real `claude` CLI with a scratch home on a copy of the repository's marketplace: added,
  validated, installed, its details read (always-on cost), `claude mcp list` connecting the
  plugin's notebook server, which serves a live kernel as Claude Code starts it; uninstalled.
- Every `nb://` URI the skills and the instructions write is served: literal ones read against a
  live kernel through the plugin's server (the all-kernels front), templated ones matched against
  its `resources/templates/list`.
- Per server (the in-kernel hub, the all-kernels front, the Hub service's front): instructions of
  300 characters or more, every tool and template described, and instructions + tools/list +
  resources/templates/list (as sent) at most 12,000 characters; docs/model-context.md shows them
  in full (MCP_NB_WRITE_DOCS=1 rewrites it).
- `server.json` against the vendored registry schema, field by field; versions agree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from kernel_harness import Kernel
from test_claude_code import META, claude_bin

from mcp_notebook import instructions
from mcp_notebook.allkernels.directory import LocalDirectory
from mcp_notebook.allkernels.front import KernelsFront
from mcp_notebook.allkernels.upstream import HubError, call
from mcp_notebook.budget import wire_chars
from mcp_notebook.hubclient.address import VERSION, HubAddress
from mcp_notebook.hubclient.blocking import exchange
from mcp_notebook.protocol.eras import META_CAPS, META_CLIENT_INFO, META_VERSION
from mcp_notebook.providers.nb_tools import NB_WORDS, VIEW_TOOLS
from mcp_notebook.version import __version__

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "plugins" / "mcp-notebook"
SKILLS = sorted((PLUGIN / "skills").glob("*/SKILL.md"))
CONTEXT_LIMIT = 12_000
MIN_INSTRUCTIONS = 300
MODEL_CONTEXT = ROOT / "docs" / "model-context.md"
SETUP = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 5, 3], 'b': ['x', 'y', 'z']})\nrevenue = 12.5"


# -- the model's context, per server ------------------------------------------------------------
APPS = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}


def _ask(hub: HubAddress, method: str, caps: dict[str, Any]) -> dict[str, Any]:
    """One stateless request offering ``caps`` (MCP Apps lists three more tools)."""
    meta = {META_VERSION: VERSION, META_CAPS: caps, META_CLIENT_INFO: {"name": "test-plugin", "version": "1"}}
    params = {"_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    status, _, raw = exchange(hub.endpoint, "POST", hub.headers(method, params), body, 30)
    assert status == 200, raw[:300]
    return json.loads(raw)["result"]


def context_of(hub: HubAddress, caps: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a host receives and puts before the model: instructions, tools, templates (as sent)."""
    caps = caps or {}
    text = _ask(hub, "server/discover", caps).get("instructions") or ""
    tools = _ask(hub, "tools/list", caps)["tools"]
    templates = _ask(hub, "resources/templates/list", caps)["resourceTemplates"]
    return {
        "instructions": text,
        "tools": tools,
        "templates": templates,
        "chars": len(text) + wire_chars(tools) + wire_chars(templates),
    }


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """A live kernel with a hub, the all-kernels front over it, and the Hub service's front."""
    runtime = tmp_path_factory.mktemp("runtime")
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)}, cwd=str(runtime))
    fronts: list[KernelsFront] = []
    try:
        (runtime / "sales.ipynb").write_text(json.dumps(_notebook()))
        info = kernel.load_hub("%config MCPHub.notebook_path = 'sales.ipynb'")
        kernel.run(SETUP)
        for _ in range(6):  # cells the skills' examples name (nb://cells/7)
            kernel.run("revenue += 1")
        kernel.run("1/0", check=False)
        front = KernelsFront(LocalDirectory(runtime))
        service = KernelsFront(LocalDirectory(runtime), instructions=instructions.SERVICE)
        fronts += [front, service]
        yield {
            "hub": HubAddress(info["url"], info["token"]),
            "front": HubAddress(front.serve_http(), front.settings.token),
            "service": HubAddress(service.serve_http(), service.settings.token),
            "runtime": runtime,
        }
    finally:
        for f in fronts:
            f.close()
        kernel.shutdown()


def _notebook() -> dict[str, Any]:
    cell = {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# Sales"}
    return {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.parametrize("apps", [False, True], ids=["plain", "apps"])
@pytest.mark.parametrize("name", ["hub", "front", "service"])
def test_what_each_server_tells_the_model_teaches_and_stays_small(servers, name, apps):
    ctx = context_of(servers[name], APPS if apps else None)
    assert len(ctx["tools"]) == (6 if apps else 3)
    assert len(ctx["instructions"]) >= MIN_INSTRUCTIONS, ctx["instructions"]
    for phrase in ("nb://vars", "schema", "never", "instead of asking the user to print", "changes_since"):
        assert phrase in ctx["instructions"], phrase
    for tool in ctx["tools"]:
        assert len(tool.get("description") or "") >= 80, tool["name"]
    described = [
        t for t in ctx["templates"] if not (name != "hub" and not t["uriTemplate"].startswith("nb://kernels/"))
    ]
    for template in described:  # (the fronts' bare twins name only their URI: the qualified ones say it)
        assert len(template.get("description") or "") >= 40, template["uriTemplate"]
    assert ctx["chars"] <= CONTEXT_LIMIT, f"{name}: {ctx['chars']} characters before the model"
    print(name, "apps" if apps else "plain", "instructions", len(ctx["instructions"]), "context", ctx["chars"])


# -- every nb:// URI the skills and instructions write -------------------------------------------
def uris_in(text: str) -> list[str]:
    """The nb:// URIs of a text; in a skill every one is in backticks (so it is found whole)."""
    return re.findall(r"nb://[^\s`'\"()]+", text)


def _template_regex(template: str) -> tuple[re.Pattern[str], set[str]]:
    path, _, query = template.partition("{?")
    pattern = re.escape(path).replace(r"\{", "{").replace(r"\}", "}")
    pattern = re.sub(r"\{[^}]+\}", r"[^/?]+", pattern)
    return re.compile(pattern + r"/?"), set(query.rstrip("}").split(",")) if query else set()


def served_by_templates(uri: str, templates: list[str]) -> bool:
    """A templated URI (``{name}`` in its path, an optional query) matches a listed template."""
    path, _, query = uri.partition("?")
    path = re.sub(r"\{[^}]+\}", "X", path)
    asked = {p.split("=", 1)[0] for p in query.split("&") if p}
    for template in templates:
        regex, params = _template_regex(template)
        if regex.fullmatch(path) and asked <= params:
            return True
    return False


def test_every_uri_the_skills_and_instructions_write_is_served(servers):
    front = servers["front"]
    templates = [t["uriTemplate"] for t in call(front, "resources/templates/list", {})["resourceTemplates"]]
    kernel = json.loads(call(front, "resources/read", {"uri": "nb://kernels"})["contents"][0]["text"])["kernels"][0][
        "id"
    ]
    texts = {p.parent.name: p.read_text() for p in SKILLS}
    texts.update({f"instructions.{k}": getattr(instructions, k) for k in ("HUB", "FRONT", "SERVICE")})
    texts.update({f"tool {t.name}": t.description for t in (*NB_WORDS, *VIEW_TOOLS)})
    assert len(SKILLS) >= 2
    checked = 0
    for where, text in texts.items():
        if where in {p.parent.name for p in SKILLS}:  # every nb:// of a skill is in backticks
            assert text.count("nb://") == len(re.findall(r"`[^`\n]*nb://[^`\n]*`", text)), where
        for uri in uris_in(text):
            uri = uri.rstrip(".,;:")
            if "{" in uri and not served_by_templates(uri, templates):
                # a listed resource under a kernel's prefix (nb://kernels/{kernel}/vars): read for the kernel
                assert re.findall(r"\{[^}]+\}", uri) == ["{kernel}"], f"{where}: {uri} matches no template"
                uri = uri.replace("{kernel}", kernel)
            if "{" not in uri:
                try:
                    contents = call(front, "resources/read", {"uri": uri})["contents"]
                except HubError as exc:
                    raise AssertionError(f"{where}: {uri} is not served: {exc}") from None
                assert contents and (contents[0].get("text") or contents[0].get("blob")), uri
            checked += 1
    assert checked >= 25, checked


def test_the_model_context_page_shows_it_in_full(servers):
    names = ("hub", "front", "service")
    page = render_model_context(
        {name: context_of(servers[name]) for name in names}, {name: context_of(servers[name], APPS) for name in names}
    )
    if os.environ.get("MCP_NB_WRITE_DOCS") == "1":
        MODEL_CONTEXT.write_text(page)
    assert MODEL_CONTEXT.read_text() == page, "docs/model-context.md drifted: rerun with MCP_NB_WRITE_DOCS=1"


def _skill_description(path: Path) -> str:
    front = path.read_text().split("---")[1]
    return next(line.split(":", 1)[1].strip() for line in front.splitlines() if line.startswith("description:"))


def render_model_context(ctx: dict[str, dict[str, Any]], apps: dict[str, dict[str, Any]]) -> str:
    """docs/model-context.md: every word a host puts before the model, per server."""
    titles = {
        "hub": "The in-kernel hub (`%load_ext mcp_notebook`, one kernel)",
        "front": "The all-kernels front (`mcp-notebook bridge`, the plugin, a Jupyter server's endpoint)",
        "service": "The JupyterHub service (one URL for every user)",
    }
    out = [
        "# What the model is told",
        "",
        "Hosts put a server's `instructions`, its tools (`tools/list`) and its URI templates",
        "(`resources/templates/list`) before the model; Claude Code also lists the plugin's skills. This page",
        "shows all of it, word for word, as the servers send it (generated by `tests/test_plugin.py`, which",
        "fails when it drifts). Sizes are characters as sent (compact JSON), held under",
        f"{CONTEXT_LIMIT:,} per server by the same test. A host that offers MCP Apps (views) also gets the",
        "three view tools.",
        "",
        "| server | instructions | tools/list | resources/templates/list | together | with MCP Apps |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in ctx.items():
        row = (
            len(c["instructions"]),
            wire_chars(c["tools"]),
            wire_chars(c["templates"]),
            c["chars"],
            apps[name]["chars"],
        )
        out.append(f"| {name} | " + " | ".join(f"{n:,}" for n in row) + " |")
    out += ["", "## The plugin's skills (always listed: name and description)", "", "```text"]
    out += [f"{p.parent.name}: {_skill_description(p)}" for p in SKILLS]
    out += ["```", "", "Their bodies load only when a skill fires: `plugins/mcp-notebook/skills/*/SKILL.md`.", ""]
    for name, c in ctx.items():
        out += [f"## {titles[name]}", "", "Instructions:", "", "```text", c["instructions"], "```", ""]
        if name == "service":
            out += ["Tools and templates: as the all-kernels front's.", ""]
            continue
        out += ["Tools (the last three only for hosts that offer MCP Apps):", "", "```text"]
        out += [f"{t['name']}: {t['description']}" for t in apps[name]["tools"]]
        out += ["```", "", "URI templates:", "", "```text"]
        out += [f"{t['uriTemplate']}: {t.get('description') or '(the current kernel)'}" for t in c["templates"]]
        out += ["```", ""]
    return "\n".join(out)


# -- versions and the registry entry --------------------------------------------------------------
def test_versions_agree():
    marketplace = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    plugin = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    server = json.loads((ROOT / "server.json").read_text())
    found = {
        "plugin.json": plugin["version"],
        "marketplace metadata": marketplace["metadata"]["version"],
        "marketplace plugin entry": marketplace["plugins"][0]["version"],
        "server.json": server["version"],
        "server.json package": server["packages"][0]["version"],
    }
    assert found == dict.fromkeys(found, __version__), found
    assert (
        marketplace["plugins"][0]["name"] == plugin["name"]
        and marketplace["plugins"][0]["source"] == "./plugins/mcp-notebook"
    )


def test_server_json_is_a_registry_entry_field_by_field():
    schema = json.loads((ROOT / "tests" / "registry" / "server.schema.json").read_text())
    server = json.loads((ROOT / "server.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(server)
    assert (
        server["$schema"] == schema["$id"]
        and re.search(r"/schemas/(\d{4}-\d\d-\d\d)/", schema["$id"])[1] >= "2025-09-29"
    )
    assert re.fullmatch(r"io\.github\.[A-Za-z0-9-]+/[A-Za-z0-9._-]+", server["name"])  # reverse DNS, GitHub namespace
    owner = server["name"].split("/")[0].removeprefix("io.github.")
    assert server["repository"] == {"url": f"https://github.com/{owner}/mcp-notebook", "source": "github"}
    assert len(server["description"]) <= 100
    (package,) = server["packages"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert package["registryType"] == "pypi" and f'name = "{package["identifier"]}"' in pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", package["version"])  # a specific version, never a range
    assert package["transport"] == {"type": "stdio"}
    assert [a.get("value") for a in package["packageArguments"]] == ["bridge"]
    assert 'readme = "README.md"' in pyproject  # PyPI shows the README, where the registry looks
    assert f"mcp-name: {server['name']}" in (ROOT / "README.md").read_text()
    bad = {**server, "packages": [{**package, "version": "latest"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(bad)


# -- the real Claude Code CLI ----------------------------------------------------------------------
WRAPPER = """#!/bin/sh
# What Claude Code starts for the plugin's server: logged, then the real command.
echo "$JUPYTER_RUNTIME_DIR" > "{log}.env"
echo "$@" > "{log}.args"
tee -a "{log}.in" | "{python}" -m mcp_notebook "$@" | tee -a "{log}.out"
"""


def _stdio(cmd: list[str], env: dict[str, str], messages: list[dict[str, Any]]) -> dict[Any, Any]:
    """Send stateless requests to a stdio server; its replies by id."""
    body = "".join(json.dumps(m) + "\n" for m in messages)
    proc = subprocess.run(cmd, input=body, env=env, capture_output=True, text=True, timeout=60)
    return {m.get("id"): m for m in map(json.loads, proc.stdout.splitlines()) if "id" in m}


@pytest.mark.skipif(claude_bin() is None, reason="no `claude` CLI: npm install @anthropic-ai/claude-code")
def test_the_real_claude_cli_installs_the_plugin_and_connects_it(tmp_path):
    claude = claude_bin()
    assert claude is not None
    home, clone, runtime, bin_dir = (tmp_path / d for d in ("home", "clone", "runtime", "bin"))
    for d in (home, clone, runtime, bin_dir):
        d.mkdir()
    for part in (".claude-plugin", "plugins"):  # the marketplace as a clone holds it
        shutil.copytree(ROOT / part, clone / part)
    log = tmp_path / "exchange"
    wrapper = bin_dir / "mcp-notebook"
    wrapper.write_text(WRAPPER.format(log=log, python=sys.executable))
    wrapper.chmod(0o755)
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "PYTHONPATH": str(ROOT),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([claude, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    for path in (clone, PLUGIN):
        assert "Validation passed" in run("plugin", "validate", "--strict", str(path)).stdout
    run("plugin", "marketplace", "add", str(clone))
    run("plugin", "install", "mcp-notebook@mcp-notebook")
    details = run("plugin", "details", "mcp-notebook").stdout
    always_on = int(re.search(r"Always-on:\s+~?([\d,]+) tok", details)[1].replace(",", ""))
    assert always_on <= 400, details
    assert re.search(r"Skills \(2\)\s+notebook, notebook-changes", details) and "MCP servers (1)  notebook" in details
    assert __version__ in details

    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)}, cwd=str(runtime))
    try:
        kernel.load_hub()
        kernel.run("plugin_check = 42")
        listed = run("mcp", "list").stdout
        assert re.search(r"plugin:mcp-notebook:notebook: mcp-notebook bridge - .*Connected", listed), listed
        sent = [json.loads(line) for line in Path(f"{log}.in").read_text().splitlines() if line.strip()]
        answers = {m.get("id"): m for m in map(json.loads, Path(f"{log}.out").read_text().splitlines()) if "id" in m}
        assert sent[0]["method"] in ("server/discover", "initialize"), sent[0]
        assert answers[sent[0]["id"]]["result"]["instructions"] == instructions.FRONT
        assert Path(f"{log}.args").read_text().split() == ["bridge"]
        # the same command in the environment Claude Code gave it serves the live kernel
        started = {**env, "JUPYTER_RUNTIME_DIR": Path(f"{log}.env").read_text().strip()}
        meta = META  # (the stateless era Claude Code speaks)
        replies = _stdio(
            [str(wrapper), "bridge"],
            started,
            [
                {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "nb://kernels", "_meta": meta}},
                {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "nb://vars/plugin_check", "_meta": meta}},
            ],
        )  # fmt: skip
        assert len(json.loads(replies[1]["result"]["contents"][0]["text"])["kernels"]) == 1, replies
        assert "42" in replies[2]["result"]["contents"][0]["text"], replies
    finally:
        kernel.shutdown()

    run("plugin", "uninstall", "mcp-notebook@mcp-notebook")
    run("plugin", "marketplace", "remove", "mcp-notebook")
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert not settings.get("enabledPlugins") and not settings.get("extraKnownMarketplaces"), settings
    installed = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())
    assert installed["plugins"] == {}
    assert not (home / ".claude" / "plugins" / "data" / "mcp-notebook-mcp-notebook").exists()
    cached = home / ".claude" / "plugins" / "cache" / "mcp-notebook"
    assert not cached.exists() or all((v / ".orphaned_at").exists() for v in cached.glob("*/*")), "not let go"
    assert "mcp-notebook" not in run("mcp", "list").stdout
    claude_own = {".claude", "claude-cli-nodejs"}  # its settings and plugin cache; its own MCP logs
    ours = [p for p in home.rglob("*") if "mcp-notebook" in p.name and not claude_own & set(p.parts)]
    assert ours == [], ours  # nothing of ours outside Claude Code's own folders
