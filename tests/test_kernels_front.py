"""One endpoint for every kernel on this machine: real kernels with hubs in an isolated runtime dir,
the front (mcp_notebook.allkernels) serving them, and the official SDK client in both eras: the
kernels listed, qualified and bare reads, updates from every kernel, a new kernel appearing, a
shut-down one vanishing, subscriptions kept across a kernel restart, changes_since for tool-only
clients, and the stdio bridge with no selector."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from kernel_harness import Kernel
from sdk import connect

from mcp_notebook.allkernels.directory import LocalDirectory, write_focus
from mcp_notebook.allkernels.front import KernelsFront
from mcp_notebook.allkernels.naming import labels, qualify, split
from mcp_notebook.runtime import PREFIX

pytestmark = pytest.mark.timeout(240)


def test_naming_round_trips_and_labels_are_unique():
    assert labels([("k1", "/a/analysis.ipynb"), ("k2", "b/report.ipynb"), ("k3", "c/report.ipynb")]) == {
        "k1": "analysis",
        "k2": "k2",
        "k3": "k3",
    }
    assert qualify("my notebook", "nb://vars/df") == "nb://kernels/my%20notebook/vars/df"
    assert split("nb://kernels/my%20notebook/vars/df") == ("my notebook", "nb://vars/df")
    assert split(qualify("a", "app://orders/north?x=1")) == ("a", "app://orders/north?x=1")
    assert split("nb://kernels") is None and split("nb://kernels/a") is None


def test_a_listing_asked_while_another_thread_reads_waits_for_it(tmp_path, monkeypatch):
    """The front's tick thread and a request thread list at once: the second must not see the new
    directory beside the old, empty listing (the bare bridge once answered "no kernel" so)."""
    import threading

    from mcp_notebook.allkernels import directory as directory_module

    record = {"url": "http://127.0.0.1:9/mcp", "token": "t", "pid": os.getpid(), "started_at": 1.0}
    (tmp_path / f"{PREFIX}k1.json").write_text(json.dumps(record))
    reading, release = threading.Event(), threading.Event()
    real = directory_module.discover

    def slow_discover(*args, **kwargs):  # the first look is held inside its read
        reading.set()
        assert release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(directory_module, "discover", slow_discover)
    listing = LocalDirectory(tmp_path)
    seen: dict[str, int] = {}
    first = threading.Thread(target=lambda: seen.setdefault("first", len(listing.entries())))
    first.start()
    assert reading.wait(10)
    second = threading.Thread(target=lambda: seen.setdefault("second", len(listing.entries(fresh=True))))
    second.start()
    second.join(0.3)
    release.set()
    first.join(10)
    second.join(10)
    assert seen == {"first": 1, "second": 1}


def _notebook_kernel(runtime: Path, name: str, tmp: Path) -> Kernel:
    kernel = Kernel(env={"JUPYTER_RUNTIME_DIR": str(runtime)}, cwd=str(tmp))
    kernel.run(f"%config MCPHub.notebook_path = {str(tmp / (name + '.ipynb'))!r}")
    kernel.load_hub()
    kernel.run(f"x = {name!r}")
    return kernel


@pytest.fixture
def two_kernels(tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    kernels = {name: _notebook_kernel(runtime, name, tmp_path) for name in ("alpha", "beta")}
    front = KernelsFront(LocalDirectory(runtime))
    url = front.serve_http()
    yield {
        "runtime": runtime,
        "kernels": kernels,
        "info": {"url": url, "token": front.settings.token},
        "tmp": tmp_path,
        "front": front,
    }
    front.close()
    for kernel in kernels.values():
        kernel.shutdown()


@pytest.mark.parametrize("mode", ["legacy", "stateless"])
def test_every_kernel_through_one_endpoint(two_kernels, mode):
    kernels, info = two_kernels["kernels"], two_kernels["info"]
    sdk_mode = "auto" if mode == "stateless" else "legacy"

    async def go() -> None:
        async with connect(info, mode=sdk_mode) as (client, inbox):
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            assert sorted(k["label"] for k in listed) == ["alpha", "beta"]
            assert sum(k["current"] for k in listed) == 1
            resources = await client.list_resources()
            uris = {str(r.uri) for r in resources.resources}
            assert {"nb://kernels", "nb://kernels/alpha/vars/x", "nb://kernels/beta/vars/x"} <= uris
            titles = {str(r.uri): r.title for r in resources.resources}
            assert "alpha.ipynb" in titles["nb://kernels/alpha/vars/x"]
            for name in ("alpha", "beta"):
                read = await client.read_resource(f"nb://kernels/{name}/vars/x")
                assert name in read.contents[0].text and str(read.contents[0].uri) == f"nb://kernels/{name}/vars/x"
            # updates from every kernel, then bare URIs: the kernel that ran a cell last
            watched = ["nb://kernels/alpha/vars/x", "nb://kernels/beta/vars/x"]
            if mode == "legacy":
                for uri in watched:
                    await client.subscribe_resource(uri)
                await anyio.sleep(0.5)  # the front opens its listens on both hubs
                for name in ("beta", "alpha"):
                    await anyio.to_thread.run_sync(lambda n=name: kernels[n].run(f"x = '{n} 2'"))
                    await inbox.wait_for(lambda i, n=name: f"nb://kernels/{n}/vars/x" in i.updated, timeout=15)
            else:
                async with client.listen(resource_subscriptions=watched) as sub:
                    assert sorted(sub.honored.resource_subscriptions) == watched
                    await anyio.sleep(0.5)
                    for name in ("beta", "alpha"):
                        await anyio.to_thread.run_sync(lambda n=name: kernels[n].run(f"x = '{n} 2'"))
                        with anyio.fail_after(15):
                            async for event in sub:
                                if getattr(event, "uri", None) == f"nb://kernels/{name}/vars/x":
                                    break
            await anyio.sleep(1.5)  # the front learns alpha ran last
            bare = await client.read_resource("nb://vars/x")
            assert "alpha 2" in bare.contents[0].text
            missing = await client.call_tool("read_resource", {"uri": "nb://kernels/gamma/vars/x"})
            assert missing.is_error

    anyio.run(go)


def test_focus_kernels_coming_and_going_and_a_restart(two_kernels):
    kernels, info, runtime, tmp = (
        two_kernels["kernels"],
        two_kernels["info"],
        two_kernels["runtime"],
        two_kernels["tmp"],
    )

    async def go() -> None:
        async with connect(info, mode="legacy") as (client, inbox):
            beta_id = next(
                k["id"]
                for k in json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
                if k["label"] == "beta"
            )
            write_focus(runtime, beta_id)
            assert "beta" in (await client.read_resource("nb://vars/x")).contents[0].text
            await client.subscribe_resource("nb://kernels/alpha/vars/x")
            gamma = await anyio.to_thread.run_sync(lambda: _notebook_kernel(runtime, "gamma", tmp))
            try:
                await inbox.wait_for(lambda i: i.list_changed >= 1, timeout=15)
                read = await client.read_resource("nb://kernels/gamma/vars/x")
                assert "gamma" in read.contents[0].text
            finally:
                await anyio.to_thread.run_sync(gamma.shutdown)
            before = inbox.list_changed
            await inbox.wait_for(lambda i: i.list_changed > before, timeout=15)
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            assert "gamma" not in {k["label"] for k in listed}
            # alpha restarts: same notebook, a new hub; the subscription carries over
            alpha = kernels["alpha"]
            await anyio.to_thread.run_sync(alpha.restart)
            await anyio.to_thread.run_sync(
                lambda: alpha.run(f"%config MCPHub.notebook_path = {str(tmp / 'alpha.ipynb')!r}")
            )
            await anyio.to_thread.run_sync(alpha.load_hub)
            await anyio.sleep(2.5)
            await anyio.to_thread.run_sync(lambda: alpha.run("x = 'alpha reborn'"))
            await inbox.wait_for(lambda i: "nb://kernels/alpha/vars/x" in i.updated, timeout=15)
            assert "reborn" in (await client.read_resource("nb://kernels/alpha/vars/x")).contents[0].text

    anyio.run(go)


def test_completion_on_the_qualified_templates(two_kernels):
    import mcp_types as types

    async def go() -> None:
        async with connect(two_kernels["info"]) as (client, _):
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert "nb://kernels/{kernel}/vars/{name}" in templates and "nb://vars/{name}" in templates
            ref = types.ResourceTemplateReference(type="ref/resource", uri="nb://kernels/{kernel}/vars/{name}")
            kernels = await client.complete(ref, {"name": "kernel", "value": "al"})
            assert kernels.completion.values == ["alpha"]
            names = await client.complete(ref, {"name": "name", "value": ""}, context_arguments={"kernel": "beta"})
            assert "x" in names.completion.values

    anyio.run(go)


def test_tool_only_client_sees_changes_in_any_kernel(two_kernels):
    kernels, info = two_kernels["kernels"], two_kernels["info"]

    async def go() -> None:
        async with connect(info) as (client, _):
            read = await client.call_tool("read_resource", {"uri": "nb://kernels/beta/vars/x"})
            assert not read.is_error and "beta" in read.content[0].text
            await anyio.sleep(1.0)
            await anyio.to_thread.run_sync(lambda: kernels["beta"].run("x = 'changed'"))
            for _ in range(50):
                doc = json.loads((await client.call_tool("changes_since", {})).content[0].text)
                if "nb://kernels/beta/vars/x" in doc["changed"]:
                    break
                await anyio.sleep(0.2)
            assert "nb://kernels/beta/vars/x" in doc["changed"], doc

    anyio.run(go)


def test_a_change_right_after_the_first_read_is_not_lost(two_kernels, tmp_path):
    """A tool-only client reads a variable and the very next cell changes it: the front's listen on
    that kernel must cover the variable before the read is answered. Beta's hub is reached through
    a relay that holds each new connection 0.5 s (a slow network): the listen that takes up the
    variable opens late, and the change fell between (changes_since said nothing)."""
    from urllib.parse import urlsplit

    from slow_relay import SlowRelay

    kernels = two_kernels["kernels"]
    names = [f"v{i}" for i in range(3)]
    kernels["beta"].run("; ".join(f"{n} = 'first'" for n in names))
    record_file = next(
        f
        for f in two_kernels["runtime"].glob(f"{PREFIX}*.json")
        if json.loads(f.read_text())["pid"] == kernels["beta"].pid()
    )
    record = json.loads(record_file.read_text())
    hub = urlsplit(record["url"])
    relay = SlowRelay((hub.hostname, hub.port), delay=0.5)
    slow = tmp_path / "slow-runtime"
    slow.mkdir()
    record["url"] = record["url"].replace(f":{hub.port}/", f":{relay.port}/")
    (slow / record_file.name).write_text(json.dumps(record))
    front = KernelsFront(LocalDirectory(slow))
    info = {"url": front.serve_http(), "token": front.settings.token}

    async def go() -> None:
        async with connect(info) as (client, _):
            cursor = json.loads((await client.call_tool("changes_since", {})).content[0].text)["cursor"]
            for name in names:
                uri = f"nb://vars/{name}"
                assert not (await client.call_tool("read_resource", {"uri": uri})).is_error
                await anyio.to_thread.run_sync(lambda n=name: kernels["beta"].run(f"{n} = 'changed'"))
                seen: list[str] = []
                for _ in range(5):  # other URIs may change meanwhile (nb://kernels): bounded
                    args = {"cursor": cursor, "wait_seconds": 5}
                    doc = json.loads((await client.call_tool("changes_since", args)).content[0].text)
                    cursor, seen = doc["cursor"], seen + doc["changed"]
                    if uri in seen or doc.get("timed_out"):
                        break
                assert uri in seen, (name, seen)

    try:
        anyio.run(go)
    finally:
        front.close()
        relay.close()


def test_a_kernel_named_by_its_id_is_heard(two_kernels):
    """A client that names a kernel by its id (not its label) hears of its changes: the front once
    matched a hub's notification only against the label, and an in-place change of the frame was
    never told (changes_since waited in vain)."""
    kernels, info = two_kernels["kernels"], two_kernels["info"]
    kernels["beta"].run("import pandas as pd; df = pd.DataFrame({'sales': [10.0, 20.0]})")

    async def go() -> None:
        async with connect(info) as (client, _):
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            beta = next(k for k in listed if k["label"] == "beta")
            assert beta["id"] != "beta"
            uri = f"nb://kernels/{beta['id']}/frames/df"
            assert not (await client.call_tool("read_resource", {"uri": uri})).is_error
            cursor = json.loads((await client.call_tool("changes_since", {})).content[0].text)["cursor"]
            await anyio.to_thread.run_sync(lambda: kernels["beta"].run('df["sales"] *= 1.5'))
            seen: list[str] = []
            for _ in range(5):  # bounded: other URIs (nb://kernels) may change meanwhile
                args = {"cursor": cursor, "wait_seconds": 10}
                doc = json.loads((await client.call_tool("changes_since", args)).content[0].text)
                cursor, seen = doc["cursor"], seen + doc["changed"]
                if uri in seen or doc.get("timed_out"):
                    break
            assert uri in seen, doc
            assert any(line.startswith(f"{uri}: changed in place") for line in doc["summary"]), doc["summary"]

    anyio.run(go)


def test_a_listen_of_many_uris_reopens_the_hubs_listen_a_few_times_not_per_uri(two_kernels):
    """A stateless listen's whole set is watched at once (Resources.watch_all): the front's listen on
    the kernel reopens a few times for 60 new URIs, and the listen is answered once they are covered."""
    kernels, info = two_kernels["kernels"], two_kernels["info"]
    kernels["alpha"].run("; ".join(f"w{i} = {i}" for i in range(60)))
    front = two_kernels["front"]
    listens = front.provider._listens
    opened: list[frozenset[str]] = []
    real = listens._stream

    async def counting(key, wish):  # the same stream, counted
        opened.append(wish[1])
        await real(key, wish)

    listens._stream = counting
    uris = [f"nb://kernels/alpha/vars/w{i}" for i in range(60)]

    async def go() -> None:
        async with connect(info) as (client, _):  # the SDK's default: the stateless era
            async with client.listen(resource_subscriptions=uris) as sub:
                covered = [u for u in opened[-1]] if opened else []
                assert len([u for u in covered if u.startswith("nb://vars/w")]) == 60, sorted(covered)[:5]
                await anyio.to_thread.run_sync(lambda: kernels["alpha"].run("w7 = 'seven'"))
                with anyio.fail_after(15):
                    async for event in sub:
                        if getattr(event, "uri", None) == "nb://kernels/alpha/vars/w7":
                            break

    anyio.run(go)
    assert len(opened) <= 10, len(opened)


def test_the_bridge_with_no_selector_serves_every_kernel(two_kernels):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    runtime = two_kernels["runtime"]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_notebook", "bridge"], env=env)

    async def go() -> None:
        async with Client(params, cache=None) as client:
            listed = json.loads((await client.read_resource("nb://kernels")).contents[0].text)["kernels"]
            assert sorted(k["label"] for k in listed) == ["alpha", "beta"]
            read = await client.call_tool("read_resource", {"uri": "nb://kernels/alpha/vars/x"})
            assert "alpha" in read.content[0].text

    anyio.run(go)


def test_an_apps_host_through_the_front_opens_views_of_any_kernel(two_kernels):
    from mcp.client.extension import advertise

    kernels = two_kernels["kernels"]
    kernels["beta"].run("import pandas as pd\nbeta_df = pd.DataFrame({'v': range(300)})")
    ext = advertise("io.modelcontextprotocol/ui", {"mimeTypes": ["text/html;profile=mcp-app"]})

    async def run() -> None:
        async with connect(two_kernels["info"], mode="auto", extensions=[ext]) as (client, _):
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["explore_frame"].meta["ui"]["resourceUri"] == "ui://mcp-notebook/frame-explorer"
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "ui://mcp-notebook/changes" in listed
            html = await client.read_resource("ui://mcp-notebook/frame-explorer")
            assert html.contents[0].mime_type == "text/html;profile=mcp-app"
            result = await client.call_tool("explore_frame", {"name": "nb://kernels/beta/frames/beta_df"})
            doc = result.structured_content
            assert doc["uri"] == "nb://kernels/beta/frames/beta_df" and doc["schema"]["shape"] == [300, 1]
            page = await client.call_tool("read_resource", {"uri": doc["uri"] + "?offset=250&limit=5&format=json"})
            first = page.structured_content["contents"][0]  # its text is sent once, in content
            assert [row["v"] for row in json.loads(page.content[first["content"]].text)] == list(range(250, 255))
        async with connect(two_kernels["info"], mode="auto") as (client, _):  # no Apps: no views
            assert [t.name for t in (await client.list_tools()).tools] == [
                "list_resources",
                "read_resource",
                "changes_since",
            ]

    anyio.run(run)
