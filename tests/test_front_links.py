"""Every link in every reply of the all-kernels front leads back to the kernel that answered (issue
#32): two real kernels holding different values under the same names, behind the bare
``mcp-notebook bridge`` (stdio, the official SDK client) and behind a Jupyter server's
``{base_url}mcp-notebook/mcp``; from reads, tools (read_resource, list_resources, changes_since,
explore_frame, show_outputs, watch_changes) and completion, every URI found is followed (breadth
first, bounded) and must be qualified with the same kernel and read that kernel's values. A user's
string that merely holds ``nb://`` (a repr) is left as the kernel wrote it."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
import mcp_types as types
import pytest
from jserver import JupyterServer, load_hub, run
from kernel_harness import Kernel
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.timeout(400)
ROWS = {"alpha": 300, "beta": 200}
MAX_READS = 60  # per kernel and carrier: enough to reach every kind of link, bounded
LINK = re.compile(r"^[a-z][a-z0-9+.-]*://\S+$")
NOT_KERNELS = ("http://", "https://", "ui://")
APPS = advertise("io.modelcontextprotocol/ui", {"mimeTypes": ["text/html;profile=mcp-app"]})

SETUP = """
import pandas as pd, mcp_notebook
sales = pd.DataFrame({{"kernel": [{label!r}] * {rows}, "n": range({rows})}})
settings = {{"who": {label!r}, "epochs": 1}}
note = "see nb://vars/sales for the numbers"
print("hello from", {label!r})

@mcp_notebook.resource("app://orders/{{region}}", mime_type="application/json", complete={{"region": ["north", "south"]}})
def orders(region):
    return {{"region": region, "kernel": {label!r}, "next": "app://orders/" + ("south" if region == "north" else "north"),
            "sales": "nb://vars/sales"}}

@mcp_notebook.resource("app://pick{{?target}}", mime_type="application/json",
                       complete={{"target": ["nb://vars/sales", "app://orders/north"]}})
def pick(target=""):
    return {{"target": target, "kernel": {label!r}}}
"""


def test_the_rule_rewrites_whole_uris_of_the_kernel_only():
    from mcp_notebook.allkernels.links import Linker

    linker = Linker("alpha", frozenset({"app"}))
    doc = {
        "uri": "nb://vars/sales",
        "page": {"next": "nb://frames/sales?offset=5", "schema": "nb://frames/sales/schema"},
        "custom": ["app://orders/north", "ui://mcp-notebook/frame-explorer", "https://example.com/x"],
        "repr": "{'link': 'nb://vars/sales'}",
        "prose": "see nb://vars/sales",
        "already": "nb://kernels/beta/vars/x",
        "other": "other://thing",
        "nb://vars/key": "keys are data",
        "broken": "nb://vars/a b",
    }
    out = json.loads(linker.text(json.dumps(doc), "application/json"))
    assert out["uri"] == "nb://kernels/alpha/vars/sales"
    assert out["page"] == {
        "next": "nb://kernels/alpha/frames/sales?offset=5",
        "schema": "nb://kernels/alpha/frames/sales/schema",
    }
    assert out["custom"] == ["nb://kernels/alpha/app://orders/north", doc["custom"][1], doc["custom"][2]]
    for key in ("repr", "prose", "already", "other", "nb://vars/key", "broken"):
        assert out[key] == doc[key]
    text = "a,b\nnb://vars/sales,1\n"
    assert linker.text(text, "text/csv") is text  # not JSON: byte for byte
    nothing = json.dumps({"n": 1})
    assert linker.text(nothing, "application/json") is nothing


# -- the walk --------------------------------------------------------------------------------------
def _strings(obj: Any) -> Iterator[str]:
    """Every string value in ``obj``, JSON texts opened (keys are data, not links)."""
    if isinstance(obj, str):
        yield obj
        if obj[:1] in "{[":
            try:
                yield from _strings(json.loads(obj))
            except ValueError:
                pass
    elif isinstance(obj, list):
        for item in obj:
            yield from _strings(item)
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _strings(value)


def links_of(reply: Any) -> set[str]:
    doc = reply.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(reply, "model_dump") else reply
    return {s for s in _strings(doc) if LINK.match(s) and not s.startswith(NOT_KERNELS)}


class Walk:
    """Follows links from one kernel's replies; every link must be that kernel's."""

    def __init__(self, client: Client, label: str, other: str):
        self.client, self.label, self.other = client, label, other
        self.prefix = f"nb://kernels/{label}/"
        self.queue: list[str] = []
        self.seen: set[str] = set()
        self.reads = 0
        self.kinds: set[str] = set()

    def found(self, where: str, reply: Any) -> None:
        for link in sorted(links_of(reply)):
            assert link.startswith(self.prefix), f"{where} links {link}, not {self.label}'s"
            if link not in self.seen:
                self.seen.add(link)
                self.queue.append(link)

    def landed(self, uri: str, text: str) -> None:
        assert f"'{self.other}'" not in text and f'"{self.other}"' not in text, f"{uri} read {self.other}'s values"

    async def run(self) -> None:
        while self.queue and self.reads < MAX_READS:
            uri = self.queue.pop(0)
            read = await self.client.read_resource(uri)
            self.reads += 1
            self.kinds.add(re.sub(r"[?/].*", "", uri[len(self.prefix) :]))
            for c in read.contents:
                self.landed(uri, getattr(c, "text", "") or "")
            self.found(uri, read)


async def _walk_kernel(client: Client, label: str, other: str, current: str) -> Walk:
    walk = Walk(client, label, other)
    p = walk.prefix
    for uri in (
        f"{p}vars",
        f"{p}vars/sales",
        f"{p}vars/settings",
        f"{p}frames/sales?limit=50&format=json",
        f"{p}frames/sales?limit=50",
        f"{p}cells",
        f"{p}notebook",
        f"{p}kernel",
        f"{p}app://orders/north",
    ):
        walk.seen.add(uri)
        walk.queue.append(uri)
    await walk.run()
    assert {"vars", "frames", "cells", "app:"} <= walk.kinds, walk.kinds
    rows = json.loads((await client.read_resource(f"{p}frames/sales/schema")).contents[0].text)["shape"][0]
    assert rows == ROWS[label]
    # a repr that holds "nb://" is the user's text, left alone
    note = json.loads((await client.read_resource(f"{p}vars/note")).contents[0].text)
    assert note["repr"] == "'see nb://vars/sales for the numbers'"

    # tools: read_resource (text, structured, resource links), explore_frame, changes_since
    for args in ({"uri": f"{p}vars/sales"}, {"uri": f"{p}frames/sales?limit=5&format=json"}, {"uri": f"{p}cells"}):
        tool = await client.call_tool("read_resource", args)
        assert not tool.is_error
        walk.found(f"read_resource {args}", tool)
    explored = await client.call_tool("explore_frame", {"name": f"{p}frames/sales"})
    assert not explored.is_error and explored.structured_content["schema"]["shape"][0] == ROWS[label]
    walk.found("explore_frame", explored)
    walk.queue += [u for u in (explored.structured_content["uri"], explored.structured_content["schemaUri"])]
    # completion values that are URIs come qualified, and go back to the kernel unqualified
    ref = types.ResourceTemplateReference(type="ref/resource", uri="nb://kernels/{kernel}/app://pick{?target}")
    values = (
        await client.complete(ref, {"name": "target", "value": ""}, context_arguments={"kernel": label})
    ).completion.values
    assert sorted(values) == sorted([f"{p}vars/sales", f"{p}app://orders/north"]), values
    for value in values:
        picked = await client.read_resource(f"{p}app://pick?target={quote(value, safe='')}")
        assert json.loads(picked.contents[0].text) == {"target": value, "kernel": label}
    await walk.run()
    return walk


async def _walk_all(client: Client, kernels: dict[str, Any], ran: Any) -> None:
    listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
    assert sorted(k["label"] for k in listed) == ["alpha", "beta"]
    for row in listed:  # (#32: state and last execution were null, locally and through the server)
        assert row["state"] in ("idle", "busy") and isinstance(row["last_execution"], float), row
    current = next(k["label"] for k in listed if k["current"])
    for label, other in (("alpha", "beta"), ("beta", "alpha")):
        walk = await _walk_kernel(client, label, other, current)
        assert walk.reads >= 10
    # changes_since and watch_changes: the change lines and URIs of a kernel are qualified with it
    watched = await client.call_tool("read_resource", {"uri": "nb://kernels/beta/vars/settings"})
    assert not watched.is_error
    feed = await client.call_tool("watch_changes", {})
    assert not feed.is_error
    cursor = feed.structured_content["cursor"]
    await anyio.sleep(1.5)  # the front's listen on beta takes up the watched URI
    await anyio.to_thread.run_sync(ran, "beta", "settings['epochs'] += 1; settings = dict(settings)")
    with anyio.fail_after(30):
        while True:
            changes = await client.call_tool("changes_since", {"cursor": cursor, "wait_seconds": 2})
            doc = changes.structured_content or json.loads(changes.content[0].text)
            if "nb://kernels/beta/vars/settings" in doc["changed"]:
                break
    lines = [u for line in doc["summary"] for u in re.findall(r"[a-z]+://\S+?(?=:?\s|:$|$)", line)]
    assert lines and all(u.startswith("nb://kernels/beta/") for u in lines), doc["summary"]
    assert all(u.startswith("nb://kernels/") for u in links_of(changes)), links_of(changes)
    # list_resources: every kernel's resources qualified with its label
    listing = await client.call_tool("list_resources", {})
    doc = json.loads(listing.content[0].text)
    for link in [r["uri"] for r in doc["resources"]] + [c.uri for c in listing.content if c.type == "resource_link"]:
        assert link.startswith(("nb://kernels/alpha/", "nb://kernels/beta/")) or link == "nb://kernels", link
    templates = [t["uriTemplate"] for t in doc["templates"]]
    assert "nb://kernels/{kernel}/frames/{name}{?offset,limit,columns,format,sort,filter}" in templates or any(
        t.startswith("nb://kernels/{kernel}/frames/") for t in templates
    )  # (and the current kernel's own templates, bare: bare URIs address it)
    # show_outputs (the current kernel's newest cell): its links are that kernel's
    listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
    current = next(k["label"] for k in listed if k["current"])
    shown = await client.call_tool("show_outputs", {})
    assert not shown.is_error
    for link in links_of(shown.structured_content):
        assert link.startswith(f"nb://kernels/{current}/"), link


# -- behind the bare bridge ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("links")
    runtime = tmp / "runtime"
    runtime.mkdir()
    kernels: dict[str, Kernel] = {}
    try:
        for label in ("alpha", "beta"):
            kernel = kernels[label] = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)}, cwd=str(tmp))
            kernel.run(f"%config MCPHub.notebook_path = {str(tmp / (label + '.ipynb'))!r}")
            kernel.load_hub()
            kernel.run(SETUP.format(label=label, rows=ROWS[label]))
        yield {"runtime": runtime, "kernels": kernels}
    finally:
        for kernel in kernels.values():
            kernel.shutdown()


def test_every_link_leads_home_through_the_bare_bridge(local):
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(local["runtime"])}
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_notebook", "bridge"], env=env)

    def ran(label: str, code: str) -> None:
        local["kernels"][label].run(code)

    async def go() -> None:
        async with Client(params, cache=None, extensions=[APPS]) as client:
            await _walk_all(client, local["kernels"], ran)

    anyio.run(go)


# -- behind a Jupyter server's endpoint ------------------------------------------------------------
TOKEN = "links-jupyter-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    s = JupyterServer(tmp_path_factory.mktemp("jlinks"), token=TOKEN, base_url="/user/ann/")
    try:
        kernels = {}
        for label in ("alpha", "beta"):
            kc = s.client(s.start_session(f"{label}.ipynb"))
            load_hub(kc)
            run(kc, SETUP.format(label=label, rows=ROWS[label]))
            kernels[label] = kc
        yield {"server": s, "kernels": kernels, "url": f"{s.url}mcp-notebook/mcp"}
    finally:
        s.stop()


def test_every_link_leads_home_through_the_server_endpoint(server):
    def ran(label: str, code: str) -> None:
        run(server["kernels"][label], code)

    async def go() -> None:
        headers = {"Authorization": f"token {TOKEN}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
            transport = streamable_http_client(server["url"], http_client=http)
            async with Client(transport, cache=None, extensions=[APPS]) as client:
                await _walk_all(client, server["kernels"], ran)

    anyio.run(go)
