"""What ``%load_ext`` leaves for later (docs/DESIGN.md, "Loading, fourth cut"): the tables room,
figure bundles, typed resources and diffs are imported at their first use, and that first use
works over real HTTP; the library names the hub registers before the room is imported are the
room's own."""

from __future__ import annotations

import json

from conftest import Mcp
from kernel_harness import Kernel

from mcp_notebook.providers import frames
from mcp_notebook.providers.frames import engines, tables

LATER = (
    "mcp_notebook.providers.frames.provider",
    "mcp_notebook.providers.frames.pages",
    "mcp_notebook.providers.frames.databases",
    "mcp_notebook.providers.frames.tables",
    "mcp_notebook.figures.bundle",
    "mcp_notebook.providers.typed",
)

LOADED = f"""import sys as _s, json as _j
print(_j.dumps(sorted(m for m in {LATER!r} if m in _s.modules)))"""


def loaded(k: Kernel) -> list[str]:
    return json.loads(k.run(LOADED).stdout.strip().splitlines()[-1])


def test_the_names_registered_before_the_room_are_the_rooms_own():
    assert frames.TABLE_LIBRARIES == tables.LIBRARIES
    assert frames.ENGINE_LIBRARIES == engines.ENGINE_LIBRARIES
    assert frames.CONNECTION_LIBRARIES == engines.CONNECTION_LIBRARIES


def test_load_imports_the_rest_at_first_use(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.run("import numpy as np\narr = np.arange(12).reshape(3, 4)\nx = 41")
        k.run("%load_ext mcp_notebook")
        assert loaded(k) == []  # nothing of it at load, nor after a cell ran (the post-cell hook)
        client = Mcp(k.info())
        client.initialize()
        x = client.result("resources/read", {"uri": "nb://vars/x"})
        assert "41" in x["contents"][0]["text"]
        assert loaded(k) == []  # a first read of a variable pays none of it
        index = json.loads(client.result("resources/read", {"uri": "nb://vars"})["contents"][0]["text"])
        rows = {row["name"]: row for row in index["variables"]}
        assert rows["arr"]["frame"] == "nb://frames/arr"  # the room's link, registered before it was imported
        page = client.result("resources/read", {"uri": "nb://frames/arr?format=json"})
        assert json.loads(page["contents"][0]["text"])  # the room serves once imported
        templates = [t["uriTemplate"] for t in client.result("resources/templates/list")["resourceTemplates"]]
        assert any(t.startswith("nb://frames/") for t in templates) and any(t.startswith("nb://db/") for t in templates)
        k.run(
            "import mcp_notebook\n@mcp_notebook.resource('demo://typed/{n}')\ndef typed_demo(n: int) -> dict:\n    return {'n': n}"
        )
        got = client.result("resources/read", {"uri": "demo://typed/7"})
        assert json.loads(got["contents"][0]["text"]) == {"n": 7}
        assert set(loaded(k)) >= set(LATER) - {"mcp_notebook.figures.bundle"}
        k.run("from IPython.display import display, HTML\ndisplay(HTML('<b>shown</b>'))")
        assert "mcp_notebook.figures.bundle" in loaded(k)  # an output is described when it is recorded
    finally:
        k.shutdown()
