"""The ipywidgets views, without a browser: built in a real kernel (and in-process), driven by cells,
clicks and real MCP clients, asserted on the widget objects' state."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

WAIT = """
import asyncio as _asyncio
for _i in range(200):  # bounded: at most ~10 s; yields to the kernel loop that delivers updates
    if {cond}:
        break
    await _asyncio.sleep(0.05)
"""


def wait_in_kernel(kernel: Any, cond: str) -> None:
    """Let the kernel's event loop run (top-level await) until ``cond`` holds in the kernel."""
    kernel.run(WAIT.format(cond=cond))


def state(kernel: Any, expr: str) -> Any:
    out = kernel.run(f"import json as _json\nprint(_json.dumps({expr}, default=str))")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- in a real kernel ------------------------------------------------------------------------


def test_watch_view_follows_a_dataframe_changed_by_a_cell(kernel, hub):
    kernel.run(
        textwrap.dedent(
            """
            import pandas as pd, mcp_notebook
            wdf = pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]})
            """
        )
    )
    kernel.run('wview = mcp_notebook.watch("nb://vars/wdf")')  # not in the cell that binds wdf (that is an update)
    before = state(kernel, "{'updates': wview.updates, 'text': wview.text, 'deferred': wview._main.deferred}")
    assert before["updates"] == 0 and before["deferred"] is True  # updates go through the kernel's io_loop
    assert "nb://vars/wdf" in state(kernel, "sorted(mcp_notebook.hub().resources.watched())")

    kernel.run('wdf.loc[0, "x"] = 99')  # in place, same shape: found by the hub's exact check
    wait_in_kernel(kernel, "wview.updates >= 1")
    after = state(kernel, "{'updates': wview.updates, 'text': wview.text, 'title': wview.title.value}")
    assert after["updates"] == 1, after
    assert "99" in after["text"] and "99" not in before["text"]
    assert "1 update" in after["title"]

    kernel.run('wdf["z"] = wdf["x"] * 2')  # a new column: the cheap fingerprint (shape) changes
    wait_in_kernel(kernel, "wview.updates >= 2")
    assert '"z"' in state(kernel, "wview.text") or " z" in state(kernel, "wview.text")

    kernel.run("wview.stop_button.click()")  # the view's own close button
    after_close = state(kernel, "{'closed': wview.closed, 'watched': sorted(mcp_notebook.hub().resources.watched())}")
    assert after_close == {"closed": True, "watched": []}
    kernel.run('wdf.loc[1, "x"] = -1')
    assert state(kernel, "wview.updates") == 2  # a closed view no longer listens


def test_browser_filters_previews_and_subscribes(kernel, hub):
    kernel.run(
        textwrap.dedent(
            """
            import mcp_notebook
            bcounts = {"n": 1}
            btext = "hello"
            """
        )
    )
    kernel.run("b = mcp_notebook.browser()")
    assert "vars" in state(kernel, "list(b.kind.options)")
    kernel.run('b.kind.value = "kernel"')
    assert state(kernel, "b.visible()") == ["nb://kernel"]
    kernel.run('b.kind.value = "vars"; b.filter.value = "bcoun"')
    assert state(kernel, "b.visible()") == ["nb://vars/bcounts"]

    kernel.run('b.listing.value = "nb://vars/bcounts"')  # what a click in the list does
    shown = state(kernel, "{'current': b.current, 'uri': b.uri.value, 'text': b.text}")
    assert shown["current"] == shown["uri"] == "nb://vars/bcounts"
    assert "{'n': 1}" in shown["text"] and "application/json" in shown["text"]

    kernel.run("b.subscribe.value = True")  # the Subscribe toggle
    assert state(kernel, "sorted(mcp_notebook.hub().resources.watched())") == ["nb://vars/bcounts"]
    kernel.run('bcounts["n"] = 2')
    wait_in_kernel(kernel, "b.updates >= 1")
    assert "{'n': 2}" in state(kernel, "b.text")

    kernel.run("newvar_for_browser = 1")  # list_changed reloads the list
    wait_in_kernel(kernel, "'nb://vars/newvar_for_browser' in [r.uri for r in b._resources]")
    kernel.run('b.filter.value = "newvar_for"')
    assert state(kernel, "b.visible()") == ["nb://vars/newvar_for_browser"]
    assert state(kernel, "b.current") == "nb://vars/bcounts"  # filtering does not move the preview

    kernel.run('b.uri.value = "nb://vars/nope"; b.read_button.click()')
    assert "ResourceNotFound" in state(kernel, "b.text")
    # the subscription follows the preview (a name not defined yet may be watched, as with a client)
    assert state(kernel, "sorted(mcp_notebook.hub().resources.watched())") == ["nb://vars/nope"]
    kernel.run("b.close()")
    assert state(kernel, "sorted(mcp_notebook.hub().resources.watched())") == []


def test_panel_shows_clients_subscriptions_and_notifications(kernel, hub, mcp):
    kernel.run("import mcp_notebook\npvalue = [1]")
    kernel.run("panel = mcp_notebook.panel()")
    first = state(kernel, "panel.state()")
    assert first["running"] and first["url"] == hub["url"]
    assert "2026-07-28" in first["revisions"] and "2024-11-05" in first["revisions"]
    assert [c["client"] for c in first["clients"]] == ["pytest 1"]  # the mcp fixture's session

    mcp.result("resources/subscribe", {"uri": "nb://vars/pvalue"})  # from the HTTP thread: activity
    wait_in_kernel(kernel, "'nb://vars/pvalue' in panel.clients.value")
    html = state(kernel, "panel.clients.value")
    assert "pytest" in html and "2025-11-25" in html

    kernel.run("pvalue.append(2)")
    wait_in_kernel(kernel, "'updated nb://vars/pvalue' in panel.recent.value")
    summary = state(kernel, "repr(panel)")
    assert "updated nb://vars/pvalue" in summary and "clients: 1" in summary
    assert hub["token"] not in summary and hub["token"] not in state(kernel, "panel.endpoint.value")

    mcp.result("resources/unsubscribe", {"uri": "nb://vars/pvalue"})
    wait_in_kernel(kernel, "'nb://vars/pvalue' not in panel.clients.value")
    assert state(kernel, "panel.state()['clients'][0]['subscriptions']") == []


def test_panel_stop_and_start_buttons(kernel, hub):
    kernel.run("import mcp_notebook\nsp = mcp_notebook.panel()")
    kernel.run("sp.toggle.click()")  # Stop
    stopped = state(kernel, "{'s': sp.state(), 'label': sp.toggle.description, 'title': sp.title.value}")
    assert stopped["s"]["running"] is False and stopped["label"] == "Start" and "stopped" in stopped["title"]
    assert "stopped" in kernel.run("%mcp").stdout  # stopped like %mcp stop: the magic stays
    kernel.run("sp.toggle.click()")  # Start: a new hub, the panel follows it
    started = state(kernel, "{'s': sp.state(), 'label': sp.toggle.description}")
    assert started["s"]["running"] is True and started["label"] == "Stop"
    assert started["s"]["url"] == state(kernel, "mcp_notebook.connection_info()['url']")
    kernel.run("%reload_ext mcp_notebook")  # a hub replaced by a cell: the panel notices
    wait_in_kernel(kernel, "sp.state()['url'] == mcp_notebook.connection_info()['url']")
    assert state(kernel, "sp._kh is mcp_notebook.hub()") is True
    kernel.run("sp.close()")
    assert state(kernel, "sp._kh is None and sp.closed") is True


def test_text_fallback_in_the_kernel(kernel, hub):
    kernel.run("import mcp_notebook\nftext = 'plain'")
    kernel.run("fw = mcp_notebook.watch('nb://vars/ftext')")
    out = kernel.run("fw")
    data = out.results[-1]
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"].startswith("watching nb://vars/ftext · 0 updates")
    assert "'plain'" in data["text/plain"]
    kernel.run("fw.close()")
    assert kernel.run("fw").results[-1] == {"text/plain": "closed watch of nb://vars/ftext"}


# -- in-process: an InteractiveShell without a kernel (updates are synchronous) ---------------


@pytest.fixture(scope="module")
def shell():
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_cell("%load_ext mcp_notebook")
    try:
        yield ip
    finally:
        ip.run_cell("%unload_ext mcp_notebook")


def run(ip: Any, code: str) -> None:
    result = ip.run_cell(code)
    result.raise_error()


def test_in_process_watch_of_a_dataframe(shell):
    import mcp_notebook

    run(shell, "import pandas as pd, mcp_notebook\nidf = pd.DataFrame({'v': [1.5, 2.5]})")
    view = mcp_notebook.watch("nb://vars/idf")
    assert view._main.deferred is False
    run(shell, "idf.loc[1, 'v'] = 7.25")
    assert mcp_notebook.hub().resources.drain()
    assert view.updates == 1 and "7.25" in view.text
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"].startswith("watching nb://vars/idf · 1 update\n")
    view.close()
    assert "nb://vars/idf" not in mcp_notebook.hub().resources.watched()


def test_in_process_custom_resources_render_tables_and_images(shell):
    import ipywidgets as W

    import mcp_notebook
    from mcp_notebook.widgets import content

    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16

    @mcp_notebook.resource("wtest://table", mime_type="text/csv")
    def table() -> str:
        return "a,b\n1,x\n2,<y>\n"

    @mcp_notebook.resource("wtest://image", mime_type="image/png")
    def image() -> bytes:
        return png

    try:
        b = mcp_notebook.browser(kind="wtest")
        assert sorted(b.visible()) == ["wtest://image", "wtest://table"]
        b.select("wtest://table")
        html = b._contents.box.children[1].value
        assert "<th>a</th>" in html and "<td>&lt;y&gt;</td>" in html
        b.select("wtest://image")
        img = b._contents.box.children[1]
        assert isinstance(img, W.Image) and img.value == png and img.format == "png"
        assert "[binary image/png, 24 bytes]" in b.text
        b.subscribe.value = True
        mcp_notebook.notify("wtest://image")
        assert b.updates == 1
        b.close()
        assert "wtest://image" not in mcp_notebook.hub().resources.watched()
    finally:
        mcp_notebook.remove_resource("wtest://table")
        mcp_notebook.remove_resource("wtest://image")
    assert content.kind_of("nb://frames/df?limit=5") == "frames" and content.kind_of("x") == "other"


def test_in_process_recent_notifications_are_bounded(shell):
    import mcp_notebook
    from mcp_notebook.inkernel.activity import MAX_RECENT, recent_notifications

    hub = mcp_notebook.hub().resources
    log = recent_notifications(hub)
    start = log.total
    for _ in range(MAX_RECENT + 5):
        mcp_notebook.notify(list_changed=True)
    assert log.total == start + MAX_RECENT + 5
    assert len(log.items()) == MAX_RECENT
    assert recent_notifications(hub) is log  # one buffer per hub
