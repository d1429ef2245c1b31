"""Figures a model can read (issue #44): a gallery of figures of known data drawn in one real
kernel (matplotlib, pandas, seaborn, Plotly, Altair) and other rich outputs, read through the
official SDK client in both eras; each description's numbers checked against the data; the same
outputs read by a client that ignores images; bad input still served."""

from __future__ import annotations

import base64
import importlib.util
import json
from typing import Any

import anyio
import numpy as np
import pytest
import sdk
from figure_gallery import GALLERY, RICH, Fig

pytestmark = pytest.mark.timeout(600)

ALL = GALLERY + RICH
AVAILABLE = {lib: importlib.util.find_spec(lib) is not None for lib in {f.lib for f in ALL}}
SETUP = (
    "%matplotlib inline\nimport numpy as np\nimport plotly.io as pio\npio.renderers.default = 'plotly_mimetype'\n"
    if AVAILABLE.get("plotly")
    else "%matplotlib inline\nimport numpy as np\n"
)


def _usable(fig: Fig) -> bool:
    return AVAILABLE[fig.lib] and (fig.lib != "seaborn" or AVAILABLE.get("pandas", True))


def expected(fig: Fig) -> list[str]:
    ns: dict[str, Any] = {"np": np}
    exec(fig.data, ns)  # the same data, here
    return fig.expect(ns)


@pytest.fixture(scope="module")
def drawn(kernel, hub) -> dict[str, str]:
    """Every usable figure drawn in the module's kernel, one cell each: name -> its output's URI."""
    kernel.run(SETUP)
    for fig in ALL:
        if _usable(fig):
            kernel.run(f"# fig:{fig.name}\n{fig.data}{fig.draw}", timeout=120)
    return locate(hub, [f.name for f in ALL if _usable(f)])


def locate(hub: dict[str, Any], names: list[str]) -> dict[str, str]:
    """Each figure cell's first described output, found by its first line through a raw client."""
    from conftest import Mcp

    client = Mcp(hub)
    client.initialize()
    try:
        index = json.loads(client.result("resources/read", {"uri": "nb://cells?limit=500"})["contents"][0]["text"])
        out = {}
        for row in index["cells"]:
            name = row["first_line"].removeprefix("# fig:")
            if name in names:
                cell = json.loads(client.result("resources/read", {"uri": row["uri"]})["contents"][0]["text"])
                described = [
                    o for o in cell["outputs"] if "description_uri" in o or set(o["mime_types"]) - {"text/plain"}
                ]
                assert described, (name, cell["outputs"])
                out[name] = described[0]["uri"]
        return out
    finally:
        client.close()


def test_the_gallery_holds_forty_figures_of_known_data():
    assert len(GALLERY) >= 40
    kinds = {f.lib for f in GALLERY}
    assert {"matplotlib", "pandas", "seaborn", "plotly", "altair"} <= kinds


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # the handshake era; the stateless era (discover)
def test_each_description_matches_its_data_through_the_sdk(hub, drawn, mode):
    missing = [f.name for f in ALL if not _usable(f)]
    failures: list[str] = []

    async def run() -> None:
        async with sdk.connect(hub, mode=mode) as (client, _):
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            assert "nb://cells/{seq}/outputs/{index}/description" in templates
            for fig in ALL:
                if fig.name in missing:
                    continue
                read = await client.read_resource(drawn[fig.name])
                items = read.contents
                text = items[-1].text
                assert str(items[-1].uri).endswith("/description"), (fig.name, items)
                if fig in GALLERY and fig.lib in ("matplotlib", "pandas", "seaborn"):
                    assert items[0].mime_type == "image/png" and base64.b64decode(items[0].blob)[:4] == b"\x89PNG"
                failures.extend(f"{fig.name}: {want!r} not in\n{text}" for want in expected(fig) if want not in text)
                assert len(text) <= 2000

    anyio.run(run)
    assert not failures, "\n\n".join(failures)
    if missing:
        pytest.skip(f"not installed here, not drawn: {sorted({f.lib for f in ALL if f.name in missing})}")


def test_the_exact_image_alone_and_the_description_alone(hub, drawn, mcp):
    uri = drawn["line"]
    only = mcp.result("resources/read", {"uri": uri + "?mime=image/png"})["contents"]
    assert len(only) == 1 and only[0]["mimeType"] == "image/png" and "blob" in only[0]
    desc = mcp.result("resources/read", {"uri": uri + "/description"})["contents"]
    assert len(desc) == 1 and desc[0]["mimeType"] == "text/plain" and 'line "parabola"' in desc[0]["text"]


def test_a_client_that_ignores_images_still_reads_every_figure(hub, drawn, mcp):
    """Only text items kept, as a host that drops images does: the numbers are all there."""
    for fig in GALLERY:
        if fig.name not in drawn:
            continue
        contents = mcp.result("resources/read", {"uri": drawn[fig.name]})["contents"]
        texts = "\n".join(c["text"] for c in contents if "text" in c)
        assert all(want in texts for want in expected(fig)), (fig.name, texts)


def test_tool_only_hosts_get_the_description_through_read_resource(hub, drawn, mcp):
    result = mcp.result("tools/call", {"name": "read_resource", "arguments": {"uri": drawn["two_lines"]}})
    kinds = [c["type"] for c in result["content"]]
    assert kinds[0] == "image" and "text" in kinds
    assert any('line "sin"' in c.get("text", "") for c in result["content"])


def test_a_figure_changed_in_a_later_cell_is_described_as_it_is_then(kernel, hub, mcp):
    kernel.run(
        "# fig:again1\nimport matplotlib.pyplot as plt\nfig_a, ax_a = plt.subplots()\nax_a.plot([1, 2, 3], label='one')\nplt.show()"
    )
    kernel.run("# fig:again2\nax_a.plot([3, 2, 1], label='two')\nfig_a")
    uris = locate(hub, ["again1", "again2"])
    first = mcp.result("resources/read", {"uri": uris["again1"] + "/description"})["contents"][0]["text"]
    second = mcp.result("resources/read", {"uri": uris["again2"] + "/description"})["contents"][0]["text"]
    assert 'line "one"' in first and 'line "two"' not in first
    assert 'line "one"' in second and 'line "two"' in second


BAD = {
    "raising_artist": (
        "import matplotlib.pyplot as plt\nfrom matplotlib.lines import Line2D\n"
        "class BadLine(Line2D):\n    def get_xydata(self):\n        raise RuntimeError('no data for you')\n"
        "fig_b, ax_b = plt.subplots(); ax_b.plot([1, 2], label='ok'); ax_b.add_line(BadLine([0, 1], [0, 1])); plt.show()",
        ["BadLine: could not be read (RuntimeError: no data for you)", 'line "ok"'],
    ),
    "unknown_subclass": (
        "import matplotlib.pyplot as plt\nfrom matplotlib.figure import Figure\n"
        "class Mine(Figure):\n    pass\n"
        "m = plt.figure(FigureClass=Mine); plt.plot([4, 6, 5], label='m'); plt.show()",
        ["a subclass of matplotlib's Figure, __main__.Mine", 'line "m"', "max 6 at x=1"],
    ),
    "raising_describer": (
        "import matplotlib.pyplot as plt, mcp_notebook.figures.mpl as _mpl\n_keep = _mpl.describe_figure\n"
        "def _boom(fig, limit):\n    raise ValueError('describer broke')\n"
        "_mpl.describe_figure = _boom\ntry:\n    plt.plot([1, 2]); plt.show()\nfinally:\n    _mpl.describe_figure = _keep",
        ["could not be described (ValueError: describer broke)"],
    ),
    "drawn_in_a_thread": (
        "%matplotlib inline\nimport threading, time\nfrom matplotlib.figure import Figure\nfrom IPython.display import display\n"
        "tf = Figure(); tax = tf.add_subplot()\nstop = threading.Event()\n"
        "def _draw():\n    k = 0\n    while not stop.is_set() and k < 2000:\n        tax.plot([k, k + 1], scalex=False, scaley=False); k += 1\n"
        "th = threading.Thread(target=_draw); th.start()\ntime.sleep(0.05)\ndisplay(tf)\nstop.set(); th.join()",
        ["matplotlib Figure", "Axes 1"],
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_served_and_says_what_could_not_be_read(kernel, hub, mcp, name):
    code, wants = BAD[name]
    kernel.run(f"# fig:{name}\n{code}")
    uri = locate(hub, [name])[name]
    contents = mcp.result("resources/read", {"uri": uri})["contents"]
    assert contents[0]["mimeType"] == "image/png" and contents[0]["blob"]
    text = contents[-1]["text"]
    assert all(w in text for w in wants), text
    assert kernel.run("print(1 + 1)").stdout.strip() == "2"  # the kernel goes on


def test_descriptions_can_be_turned_off_and_bounded(kernel, hub, mcp, drawn):
    kernel.run("%config MCPHub.figure_descriptions = False")
    try:
        kernel.run("# fig:while_off\nimport matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()")
        for uri in (drawn["line"], locate(hub, ["while_off"])["while_off"]):
            contents = mcp.result("resources/read", {"uri": uri})["contents"]
            assert [c["mimeType"] for c in contents] == ["image/png"]
            off = mcp.result("resources/read", {"uri": uri + "/description"})["contents"][0]["text"]
            assert off == "Descriptions are off (MCPHub.figure_descriptions)."
    finally:
        kernel.run("%config MCPHub.figure_descriptions = True")
    assert len(mcp.result("resources/read", {"uri": drawn["line"]})["contents"]) == 2
    kernel.run("%config MCPHub.figure_description_chars = 300")
    kernel.run(
        "# fig:bounded\nimport matplotlib.pyplot as plt\nfor k in range(30):\n    plt.plot([0, k], label=f's{k}')\nplt.legend(); plt.show()"
    )
    text = mcp.result("resources/read", {"uri": locate(hub, ["bounded"])["bounded"] + "/description"})["contents"][0][
        "text"
    ]
    assert len(text) <= 300 and "[description cut at 300" in text
    kernel.run("%config MCPHub.figure_description_chars = 2000")


def test_a_cell_without_figures_pays_nothing(kernel, hub):
    """No plotting library is imported by the hub: a kernel that never drew stays without them."""
    from kernel_harness import Kernel

    fresh = Kernel()
    try:
        fresh.load_hub()
        fresh.run("x = [1, 2, 3]\nx")
        out = fresh.run(
            "import sys; print(sorted(m for m in ('matplotlib', 'plotly', 'altair', 'seaborn', 'numpy') if m in sys.modules))"
        )
        assert out.stdout.strip() == "[]"
    finally:
        fresh.shutdown()


def test_numbers_helper_agrees_with_numpy():
    """The expectations' own helper, checked once by hand."""
    from figure_gallery import nums

    assert nums(np.array([1.0, 5.0, 2.0]), [10, 20, 30]) == [
        "3 points",
        "mean 2.66667",
        "max 5 at x=20",
        "min 1 at x=10",
        "first 1, last 2",
    ]


def test_show_outputs_tells_the_model_what_the_figure_shows(hub, drawn):
    """The Apps output viewer's tool: its text for the model holds the description too."""
    from conftest import Mcp

    host = Mcp(hub)
    host.initialize(
        capabilities={"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}
    )
    try:
        seq = int(drawn["two_lines"].split("/")[3])
        result = host.result("tools/call", {"name": "show_outputs", "arguments": {"cell": seq}})
        text = result["content"][0]["text"]
        assert "Output 0: matplotlib Figure" in text and 'line "cos"' in text
        row = result["structuredContent"]["cell"]["outputs"][0]
        assert row["alt"].startswith("matplotlib Figure") and row["description_uri"].endswith("/outputs/0/description")
    finally:
        host.close()


@pytest.mark.skipif(importlib.util.find_spec("ipympl") is None, reason="ipympl (the plots extra) not installed")
def test_a_widget_figure_is_described_live_when_read(kernel, hub, mcp):
    """%matplotlib widget: the canvas is a widget that lives on; a line added in a later cell is in
    the description read after it."""
    kernel.run("%matplotlib widget")
    try:
        kernel.run(
            "# fig:widget1\nimport matplotlib.pyplot as plt\nfig_w, ax_w = plt.subplots()\nax_w.plot([1, 3, 2], label='w')"
        )
        kernel.run("ax_w.plot([5, 6], label='later')")
        uri = locate(hub, ["widget1"])["widget1"]
        text = mcp.result("resources/read", {"uri": uri + "/description"})["contents"][0]["text"]
        assert text.startswith("Interactive matplotlib figure (%matplotlib widget)")
        assert 'line "w": 3 points' in text and "max 3 at x=1" in text and 'line "later": 2 points' in text
    finally:
        kernel.run("plt.close('all')\n%matplotlib inline")


def test_the_bundle_describers_need_no_kernel():
    """figures.bundle (and what it imports) loads without IPython, a kernel, numpy or a plotting
    library, so a Jupyter server can describe a hub-less kernel's outputs (issue #43); and it reads
    Plotly JSON and a Vega-Lite spec handed to it as plain data."""
    code = (
        "import sys\n"
        "from mcp_notebook.figures.bundle import describe_bundle\n"
        "KERNEL = ('IPython', 'ipykernel', 'jupyter_client', 'matplotlib', 'plotly', 'altair', 'traitlets')\n"
        "at_import = sorted(m for m in sys.modules if m.split('.')[0] in KERNEL + ('numpy',))\n"
        "p = describe_bundle({'application/vnd.plotly.v1+json': {'data': [{'type': 'bar', 'x': ['a', 'b'], 'y': [1, 5]}],"
        " 'layout': {'title': {'text': 'T'}}}})\n"
        "v = describe_bundle({'application/vnd.vegalite.v5+json': {'mark': 'point', 'data': {'values': [{'q': 2}, {'q': 4}]},"
        " 'encoding': {'y': {'field': 'q', 'type': 'quantitative'}}}})\n"
        "after = sorted(m for m in sys.modules if m.split('.')[0] in KERNEL)  # numpy used when importable\n"
        "print(repr((p, v, at_import + after)))\n"
    )
    import ast
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    plotly, vega, loaded = ast.literal_eval(out.stdout.strip())
    assert loaded == []
    assert 'Plotly figure "T"' in plotly and "categories a, b" in plotly and "max 5 at x=b" in plotly
    assert "point mark; 2 data rows" in vega and "mean 3" in vega


def test_large_series_are_estimated_and_tables_bounded():
    """Past 200,000 points a series is read every k-th point and says so; an HTML table of 100 rows
    and 30 columns comes as its header and 15 rows of 10 columns in Markdown with what was left out."""
    import pandas as pd

    from mcp_notebook.figures.bundle import describe_bundle
    from mcp_notebook.figures.summary import describe_series

    url = describe_bundle(
        {"application/vnd.vegalite.v5+json": {"mark": "bar", "data": {"url": "data/cars.json"}, "encoding": {}}}
    )
    assert "data from data/cars.json (the renderer fetches it: its values are not read here)" in url
    y = np.arange(1_000_000, dtype=float)
    line = describe_series(y, y)
    assert line.startswith("1000000 points") and "(estimated from every 5th point)" in line
    html = pd.DataFrame(np.arange(3000).reshape(100, 30)).to_html()
    text = describe_bundle({"text/html": html, "text/plain": "frame"})
    assert text.count("\n| ") == 17 and "… 85 more rows in the HTML." in text and "… 21 more columns" in text
