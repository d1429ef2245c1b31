"""Executed cells and their outputs as resources (nb://cells...), against a real kernel."""

from __future__ import annotations

import base64
import json
import sys
import warnings
from typing import Any

import anyio
from kernel_harness import Kernel
from sdk import connect

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read(mcp, uri: str) -> dict[str, Any]:
    return mcp.result("resources/read", {"uri": uri})["contents"][0]


def read_json(mcp, uri: str) -> dict[str, Any]:
    return json.loads(read(mcp, uri)["text"])


def last_cell(mcp) -> dict[str, Any]:
    """The cell doc of the latest finished cell (the one before the read itself is not a cell)."""
    index = read_json(mcp, "nb://cells")
    return read_json(mcp, f"nb://cells/{index['last_seq']}")


def test_source_stdout_and_execute_result(kernel, hub, mcp):
    kernel.run("print('hello cells')\n21 * 2")
    cell = last_cell(mcp)
    assert cell["source"] == "print('hello cells')\n21 * 2"
    assert cell["status"] == "ok" and cell["duration"] >= 0 and cell["started"] and cell["finished"]
    kinds = [o["output_type"] for o in cell["outputs"]]
    assert kinds == ["stream", "execute_result"]
    stream, result = cell["outputs"]
    assert stream["name"] == "stdout"
    text = read(mcp, stream["uri"])
    assert text["mimeType"] == "text/plain" and text["text"] == "hello cells\n"
    out = read(mcp, result["uri"])
    assert out["mimeType"] == "text/plain" and out["text"] == "42"
    index = read_json(mcp, "nb://cells")
    row = index["cells"][-1]
    assert row["first_line"] == "print('hello cells')" and row["outputs"] == 2 and row["seq"] == cell["seq"]


def test_html_display_richest_mime_and_choice(kernel, hub, mcp):
    kernel.run("from IPython.display import HTML, display\ndisplay(HTML('<b>bold</b>'))")
    cell = last_cell(mcp)
    (out,) = cell["outputs"]
    assert out["output_type"] == "display_data" and set(out["mime_types"]) == {"text/html", "text/plain"}
    html = read(mcp, out["uri"])
    assert html["mimeType"] == "text/html" and html["text"] == "<b>bold</b>"
    plain = read(mcp, out["uri"] + "?mime=text/plain")
    assert plain["mimeType"] == "text/plain" and "HTML object" in plain["text"]
    bad = mcp.call("resources/read", {"uri": out["uri"] + "?mime=image/png"})
    assert bad["error"]["code"] == -32602


def test_markdown_json_svg_bundles(kernel, hub, mcp):
    kernel.run(
        "from IPython.display import Markdown, JSON, SVG, display\n"
        "display(Markdown('# Title'))\n"
        "display(JSON({'a': [1, 2]}))\n"
        'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"></svg>\'))'
    )
    cell = last_cell(mcp)
    defaults = [o["default_mime"] for o in cell["outputs"]]
    assert defaults == ["text/markdown", "application/json", "image/svg+xml"]
    md, js, svg = (read(mcp, o["uri"]) for o in cell["outputs"])
    assert md["text"] == "# Title"
    assert json.loads(js["text"]) == {"a": [1, 2]}
    assert svg["mimeType"] == "image/svg+xml" and svg["text"].startswith("<svg")


def test_error_traceback_without_ansi(kernel, hub, mcp):
    kernel.run("def boom():\n    raise ValueError('bad thing')\nboom()", check=False)
    cell = last_cell(mcp)
    assert cell["status"] == "error"
    (err,) = cell["outputs"]
    assert err["output_type"] == "error" and err["ename"] == "ValueError" and err["evalue"] == "bad thing"
    text = read(mcp, err["uri"])["text"]
    assert "\x1b" not in text
    assert "ValueError: bad thing" in text and "boom()" in text


def test_matplotlib_png_blob(kernel, hub, mcp):
    kernel.run("%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()", timeout=120)
    cell = last_cell(mcp)
    images = [o for o in cell["outputs"] if "image/png" in o["mime_types"]]
    assert len(images) == 1 and images[0]["default_mime"] == "image/png"
    content = read(mcp, images[0]["uri"])
    assert content["mimeType"] == "image/png" and "text" not in content
    data = base64.b64decode(content["blob"])
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    listed = {r["uri"]: r for r in mcp.result("resources/list")["resources"]}
    entry = listed[images[0]["uri"]]
    assert entry["mimeType"] == "image/png" and entry["size"] == len(data)
    assert entry["annotations"]["lastModified"].endswith("Z")


def test_store_history_false_gets_distinct_seqs(kernel, hub, mcp):
    for i in range(3):
        kernel.run(f"nbval_like = {i}", store_history=False)
    rows = read_json(mcp, "nb://cells")["cells"][-3:]
    assert [r["first_line"] for r in rows] == [f"nbval_like = {i}" for i in range(3)]
    seqs = [r["seq"] for r in rows]
    assert seqs == list(range(seqs[0], seqs[0] + 3))
    assert len({r["execution_count"] for r in rows}) == 1  # the counter did not move


def test_secret_in_output_and_source_is_masked(kernel, hub, mcp):
    kernel.run("leak = 'sk-proj-' + 'A1b2C3d4' * 4\nprint('token is', leak)\nshown = 'ghp_' + 'x' * 36")
    kernel.run("print('sk-proj-' + 'Z9y8X7w6' * 4)")
    cell = last_cell(mcp)
    text = read(mcp, cell["outputs"][0]["uri"])["text"]
    assert "[REDACTED]" in text and "Z9y8X7w6Z9y8" not in text
    assert "[REDACTED]" in cell["outputs"][0]["preview"]
    kernel.run("# ghp_" + "Q" * 36 + "\n1")
    cell = last_cell(mcp)
    assert "[REDACTED]" in cell["source"] and "QQQQ" not in cell["source"]


def test_long_text_is_paged_and_capped_at_capture(kernel, hub, mcp):
    kernel.run("import mcp_notebook\n_cfg = mcp_notebook.hub().config\n_cfg.max_read_chars = 1000")
    try:
        kernel.run("print('a' * 1500 + 'b' * 1000)")
        out = last_cell(mcp)["outputs"][0]
        page = read(mcp, out["uri"])
        assert page["text"].startswith("a" * 1000) and "[truncated: chars 0-1000 of 2501" in page["text"]
        nxt = page["_meta"]["next"]
        assert nxt == out["uri"] + "?offset=1000"
        page2 = read(mcp, nxt)
        assert page2["text"].startswith("a" * 500 + "b" * 500)
        page3 = read(mcp, page2["_meta"]["next"])
        assert "truncated" not in (page3.get("_meta") or {}) and page3["text"] == "b" * 500 + "\n"
        kernel.run("_cfg.max_output_chars = 300")
        kernel.run("print('c' * 1000)")
        out = last_cell(mcp)["outputs"][0]
        assert out["chars"] == 1001 and out["truncated_at_capture"]
        text = read(mcp, out["uri"])["text"]
        assert text.startswith("c" * 300) and "cut at capture" in text and "c" * 301 not in text
    finally:
        kernel.run("_cfg.max_read_chars = 60000\n_cfg.max_output_chars = 500000")


def test_history_is_bounded(kernel, hub, mcp):
    kernel.run("import mcp_notebook\nmcp_notebook.hub().config.max_cells = 5")
    try:
        for i in range(7):
            kernel.run(f"bounded_{i} = {i}")
        index = read_json(mcp, "nb://cells")
        assert index["count"] == 5 and [r["first_line"] for r in index["cells"]] == [
            f"bounded_{i} = {i}" for i in range(2, 7)
        ]
        gone = mcp.call("resources/read", {"uri": f"nb://cells/{index['first_seq'] - 1}"})
        assert gone["error"]["code"] == -32002
        page = read_json(mcp, "nb://cells?offset=1&limit=2")
        assert [r["seq"] for r in page["cells"]] == [index["first_seq"] + 1, index["first_seq"] + 2]
        assert page["next"] == "nb://cells?offset=3&limit=2"
    finally:
        kernel.run("mcp_notebook.hub().config.max_cells = 200")


def test_display_update_reaches_the_earlier_cell(kernel, hub, mcp):
    kernel.run("from IPython.display import display\nhandle = display('first', display_id=True)")
    seq = last_cell(mcp)["seq"]
    kernel.run("handle.update('second')")
    cell = read_json(mcp, f"nb://cells/{seq}")
    assert read(mcp, cell["outputs"][0]["uri"])["text"] == "'second'"
    kernel.run("from IPython.display import clear_output\nprint('gone')\nclear_output()\nprint('kept')")
    outs = last_cell(mcp)["outputs"]
    assert len(outs) == 1 and outs[0]["preview"] == "kept\n"


def test_cell_id_from_the_execute_request(kernel, hub, mcp):
    msg = kernel.kc.session.msg(
        "execute_request",
        {"code": "with_id = 1", "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False},
        metadata={"cellId": "cell-abc-123"},
    )
    kernel.kc.shell_channel.send(msg)
    kernel.wait_idle(msg["header"]["msg_id"])
    row = read_json(mcp, "nb://cells")["cells"][-1]
    assert row["cell_id"] == "cell-abc-123" and row["first_line"] == "with_id = 1"


def test_list_templates_and_completion(kernel, hub, mcp):
    kernel.run("listed = 1")
    kernel.run("listed = 2")
    resources = mcp.result("resources/list")["resources"]
    uris = [r["uri"] for r in resources]
    assert "nb://cells" in uris
    index = read_json(mcp, "nb://cells")
    last = index["last_seq"]
    assert f"nb://cells/{last}" in uris and f"nb://cells/{last - 1}" in uris
    entry = next(r for r in resources if r["uri"] == f"nb://cells/{last}")
    assert entry["mimeType"] == "application/json" and entry["size"] == len(
        read(mcp, entry["uri"])["text"].encode("utf-8")
    )
    assert len([u for u in uris if u.startswith("nb://cells/") and "/outputs/" not in u]) <= 10
    templates = {t["uriTemplate"] for t in mcp.result("resources/templates/list")["resourceTemplates"]}
    assert {"nb://cells/{seq}", "nb://cells/{seq}/outputs/{index}{?mime,offset}"} <= templates
    done = mcp.result(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "nb://cells/{seq}"}, "argument": {"name": "seq", "value": ""}},
    )
    assert done["completion"]["values"][:2] == [str(last), str(last - 1)]


def test_subscribed_index_and_cell_get_updates():
    """Its own kernel: subscribing and notifications after cells (handshake era, official SDK client)."""
    k = Kernel()
    try:
        info = k.load_hub()
        k.run("x = 1")

        async def go():
            async with connect(info, "legacy") as (client, inbox):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource("nb://cells")
                await anyio.to_thread.run_sync(k.run, "print('tick')")
                await inbox.wait_for(lambda i: "nb://cells" in i.updated and i.list_changed)
                read = await client.read_resource("nb://cells")
                assert json.loads(read.contents[0].text)["cells"][-1]["first_line"] == "print('tick')"

        anyio.run(go)
    finally:
        k.shutdown()


def test_unload_leaves_no_hook():
    k = Kernel()
    try:
        probe = (
            "import sys, json\n"
            "_ip = get_ipython()\n"
            "print(json.dumps({'pre': len(_ip.events.callbacks['pre_run_cell']),"
            " 'post': len(_ip.events.callbacks['post_run_cell']),"
            " 'dp': len(getattr(_ip.display_pub, '_hooks', [])),"
            " 'dh': len(getattr(_ip.displayhook, '_hooks', [])),"
            " 'out': sys.stdout.write.__module__, 'err': sys.stderr.write.__module__,"
            " 'tb': '_showtraceback' in vars(_ip),"
            " 'wfd': 'write_format_data' in vars(_ip.displayhook),"
            " 'pub': 'publish' in vars(_ip.display_pub)}))"
        )
        before = json.loads(k.run(probe).stdout)
        k.load_hub()
        loaded = json.loads(k.run(probe).stdout)
        # one pre_run_cell and one post_run_cell callback: the hub's, which calls the capture's (issue #48)
        assert loaded["pre"] == before["pre"] + 1 and loaded["post"] == before["post"] + 1
        assert loaded["dp"] == before["dp"] + 1
        assert loaded["out"] == loaded["err"] == "mcp_notebook.capture" != before["out"]
        k.run("%unload_ext mcp_notebook")
        after = json.loads(k.run(probe).stdout)
        assert after == before
        k.run("%load_ext mcp_notebook")  # and a second load works again
        assert json.loads(k.run(probe).stdout) == loaded
        k.run("%unload_ext mcp_notebook")
        assert json.loads(k.run(probe).stdout) == before
    finally:
        k.shutdown()


def test_plain_interactive_shell_degrades_gracefully():
    """No ipykernel: publish/displayhook/traceback wrapped on the instance, output still passes through."""
    import io
    from contextlib import redirect_stdout

    from IPython.core.interactiveshell import InteractiveShell

    from mcp_notebook.capture import CellCapture
    from mcp_notebook.inkernel.config import MCPHub
    from mcp_notebook.providers.cells import CellsProvider

    created = not InteractiveShell.initialized()  # share the process-wide shell when another test made one
    shell = InteractiveShell.instance()
    before_tb = vars(shell).get("_showtraceback")
    cfg = MCPHub()
    sink = io.StringIO()
    with redirect_stdout(sink):
        cap = CellCapture(shell, cfg)
        cap.install()
        shell.events.register("post_run_cell", cap.post_run_cell)
        try:
            shell.run_cell("print('plain')")
            shell.run_cell("40 + 2", store_history=True)
            shell.run_cell("from IPython.display import HTML, display\ndisplay(HTML('<i>x</i>'))")
            shell.run_cell("1/0")
            shell.run_cell("get_ipython().run_cell(\"print('inner')\")\nprint('outer')")  # nested run_cell
        finally:
            cap.uninstall()
            shell.events.unregister("post_run_cell", cap.post_run_cell)
            if created:
                InteractiveShell.clear_instance()
    shown = sink.getvalue()
    assert "plain" in shown and "42" in shown and "ZeroDivisionError" in shown  # passed through
    provider = CellsProvider(cap, cfg)
    cells = [json.loads(provider.read(f"nb://cells/{c.seq}")[0].text) for c in cap.snapshot()]
    assert [c["status"] for c in cells] == ["ok", "ok", "ok", "error", "ok", "ok"]
    assert [o["output_type"] for c in cells[:4] for o in c["outputs"]] == [
        "stream",
        "execute_result",
        "display_data",
        "error",
    ]
    outer, inner = cells[4], cells[5]
    assert [o["preview"] for o in inner["outputs"]] == ["inner\n"]
    assert [o["preview"] for o in outer["outputs"] if o["output_type"] == "stream"] == ["outer\n"]
    assert provider.read("nb://cells/2/outputs/0")[0].text == "42"
    html = cells[2]["outputs"][0]
    expected = "<i>x</i>" if "text/html" in html["mime_types"] else "<IPython.core.display.HTML object>"
    assert provider.read("nb://cells/3/outputs/0")[0].text == expected  # terminal shells format text/plain only
    assert "ZeroDivisionError" in provider.read("nb://cells/4/outputs/0")[0].text
    for stream in (sys.stdout, sink):
        assert "CellCapture" not in getattr(vars(stream).get("write"), "__qualname__", "")
    assert vars(shell).get("_showtraceback") is before_tb
    assert "publish" not in vars(shell.display_pub) and "write_format_data" not in vars(shell.displayhook)
    assert cap.pre_run_cell not in shell.events.callbacks["pre_run_cell"]


def test_image_size_of_base64_in_any_layout():
    """Sizes listed for images match the decoded bytes, whatever the base64 layout: IPython 9 sends
    one line, early IPython 8 releases a trailing newline after the padding, others 76-char lines."""
    import binascii
    import os

    from mcp_notebook.capture import binary_size

    for n in range(40):
        raw = os.urandom(n)
        for text in (
            base64.b64encode(raw).decode(),
            binascii.b2a_base64(raw).decode(),
            base64.encodebytes(raw).decode(),
        ):
            assert binary_size(text) == n
        assert binary_size(raw) == n


def test_the_stream_write_is_put_on_once_and_sees_every_write_of_every_cell():
    """Issue #48: the capture's write is not taken off after each cell. Where nothing else wraps per
    cell (IPython 8) it is made once and stays; under IPython 9's per-cell tee it goes on the tee each
    cell. Either way every write of every cell is recorded, a stream that stopped being sys.stdout is
    let go after the cell, and uninstall leaves no write of ours anywhere."""
    import io
    from contextlib import redirect_stdout

    import IPython
    from IPython.core.interactiveshell import InteractiveShell

    from mcp_notebook.capture import CellCapture
    from mcp_notebook.inkernel.config import MCPHub

    created = not InteractiveShell.initialized()
    shell = InteractiveShell.instance()
    first, second = io.StringIO(), io.StringIO()
    cap = CellCapture(shell, MCPHub())
    made: list[str] = []
    make_write = cap._make_write
    cap.streams._make_write = lambda original, name: made.append(name) or make_write(original, name)

    def ours(stream: io.StringIO) -> bool:
        return "CellCapture" in getattr(vars(stream).get("write"), "__qualname__", "")

    try:
        with redirect_stdout(first):
            cap.install()
            shell.events.register("post_run_cell", cap.post_run_cell)
            for i in range(5):
                shell.run_cell(f"print({i}); print('x{i}', end='')")
            stays = ours(first)
        with redirect_stdout(second):
            shell.run_cell("print('second')")
            let_go = not ours(first)
            shell.run_cell("get_ipython().run_cell(\"print('inner')\")\nprint('outer')")
    finally:
        cap.uninstall()
        shell.events.unregister("post_run_cell", cap.post_run_cell)
        if created:
            InteractiveShell.clear_instance()
    texts = [[o.text() for o in cell.outputs] for cell in cap.snapshot()]
    assert texts[:5] == [[f"{i}\nx{i}"] for i in range(5)]
    assert texts[5] == ["second\n"] and texts[6] == ["outer\n"] and texts[7] == ["inner\n"]
    assert first.getvalue() == "".join(f"{i}\nx{i}" for i in range(5)) and "inner" in second.getvalue()
    assert let_go and not ours(first) and not ours(second)
    if IPython.version_info[0] < 9:  # nothing else wraps per cell: ours made once per stream and kept
        assert stays and made.count("stdout") == 2  # first, then second
    else:  # IPython 9's tee puts back what it found after each cell: ours goes on it each outermost cell
        assert not stays and made.count("stdout") == 7
