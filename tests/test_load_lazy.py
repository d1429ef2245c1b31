"""What ``%load_ext`` leaves for later (docs/DESIGN.md, "Loading, fourth cut", "sixth cut", "seventh cut" and "eighth cut"): the tables room,
figure bundles, typed resources and diffs are not imported by the loading cell; the rooms are
imported after it ends, off the main thread, or at their first use, whichever comes first; the
library names the hub registers before the room is imported are the room's own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from typing import Any

import pytest
from conftest import Mcp
from kernel_harness import Kernel

from mcp_notebook import redact
from mcp_notebook.lazy_re import LazyPatterns
from mcp_notebook.postcell.nswatch import NamespaceWatch
from mcp_notebook.providers import frames, structured, variables
from mcp_notebook.providers.base import ChangeSet, LazyProvider, Provider
from mcp_notebook.providers.frames import engines, tables
from mcp_notebook.resources import Resources
from mcp_notebook.types import Contents
from mcp_notebook.uri import TemplateError, compile_template

ROOMS = (
    "mcp_notebook.providers.frames.provider",
    "mcp_notebook.providers.frames.pages",
    "mcp_notebook.providers.frames.databases",
    "mcp_notebook.providers.frames.tables",
)
LATER = (*ROOMS, "mcp_notebook.figures.bundle", "mcp_notebook.providers.typed", "mcp_notebook.providers.structured")
LOADED = f"import sys as _s, json as _j\nprint(_j.dumps(sorted(m for m in {LATER!r} if m in _s.modules)))"
# The pattern groups compiled at their first use or by the after-load thread ("Loading, eighth cut").
LAZY_RE = (
    "mcp_notebook.redact",
    "mcp_notebook.protocol.fast_read",
    "mcp_notebook.protocol.wire_http11",
    "mcp_notebook.protocol.jsonrpc",
    "mcp_notebook.protocol.security",
)
COMPILED = (
    f"import sys as _s, json as _j\nprint(_j.dumps(sorted(m for m in {LAZY_RE!r} if _s.modules[m]._RE.compiled)))"
)


def loaded(k: Kernel, first: str = "") -> list[str]:
    return json.loads(k.run(first + LOADED).stdout.strip().splitlines()[-1])


def test_the_names_registered_before_the_room_are_the_rooms_own():
    assert frames.TABLE_LIBRARIES == tables.LIBRARIES
    assert frames.ENGINE_LIBRARIES == engines.ENGINE_LIBRARIES
    assert frames.CONNECTION_LIBRARIES == engines.CONNECTION_LIBRARIES
    assert variables.STRUCTURED.markers == structured.SERVES_MARKERS  # named before structured.py is imported


class Room(Provider):
    uri_prefixes = ("room://",)

    def owns(self, uri: str) -> bool:
        return uri.startswith("room://")

    def read(self, uri: str) -> list[Contents]:
        return [Contents(uri=uri, text="inside")]

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        return ChangeSet(updated={"room://x"} & watched)


def test_a_lazy_provider_is_built_once_at_its_first_use():
    built: list[Room] = []
    empty = [True]
    lazy = LazyProvider(("room://",), lambda: built.append(Room()) or built[-1], lists_nothing=lambda: empty[0])
    resources = Resources([lazy])
    assert resources.list_resources() == [] and not built  # nothing of its kinds: listed without building it
    empty[0] = False
    assert resources.list_resources() == [] and len(built) == 1  # something may be: built to list
    built.clear()
    lazy = LazyProvider(("room://",), lambda: built.append(Room()) or built[-1])
    resources = Resources([lazy])
    resources.after_cell()  # the post-cell hook does not build it: nothing of it can be watched yet
    assert resources.owner("other://x") is None and not built
    assert resources.read("room://x")[0].text == "inside" and len(built) == 1
    resources.watch("room://x")
    resources.after_cell()
    assert resources.journal.since(0)[0][-1][3] == ("room://x",)  # built, its own compare runs per cell
    assert len(built) == 1


def test_load_leaves_the_rooms_for_after_the_loading_cell(tmp_path):
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        k.run("import numpy as np\narr = np.arange(12).reshape(3, 4)\nx = 41")
        out = k.run("get_ipython().run_line_magic('load_ext', 'mcp_notebook')\n" + LOADED + "\n" + COMPILED).stdout
        rooms, patterns = (json.loads(line) for line in out.strip().splitlines()[-2:])
        assert rooms == [] and patterns == []  # in the loading cell: no room imported, no pattern group compiled
        client = Mcp(k.info())
        client.initialize()
        assert "41" in client.result("resources/read", {"uri": "nb://vars/x"})["contents"][0]["text"]
        deadline = time.monotonic() + 30
        after = {*ROOMS, "mcp_notebook.providers.structured"}  # structured.py: by the same thread, after the rooms
        while not after <= set(loaded(k)) and time.monotonic() < deadline:  # bounded
            time.sleep(0.1)
        assert after <= set(loaded(k))  # imported after the loading cell, with no request asking
        assert json.loads(k.run(COMPILED).stdout.strip().splitlines()[-1]) == sorted(LAZY_RE)  # compiled by then too
        index = json.loads(client.result("resources/read", {"uri": "nb://vars"})["contents"][0]["text"])
        rows = {row["name"]: row for row in index["variables"]}
        assert rows["arr"]["frame"] == "nb://frames/arr"  # the room's link, registered before it was imported
        page = client.result("resources/read", {"uri": "nb://frames/arr?format=json"})
        assert json.loads(page["contents"][0]["text"])
        templates = [t["uriTemplate"] for t in client.result("resources/templates/list")["resourceTemplates"]]
        assert any(t.startswith("nb://frames/") for t in templates) and any(t.startswith("nb://db/") for t in templates)
        assert "mcp_notebook.providers.typed" not in loaded(k)
        k.run(
            "import mcp_notebook\n@mcp_notebook.resource('demo://typed/{n}')\ndef typed_demo(n: int) -> dict:\n    return {'n': n}"
        )
        assert json.loads(client.result("resources/read", {"uri": "demo://typed/7"})["contents"][0]["text"]) == {"n": 7}
        assert "mcp_notebook.providers.typed" in loaded(k)  # with the first typed registration
        k.run("from IPython.display import display, HTML\ndisplay(HTML('<b>shown</b>'))")
        assert "mcp_notebook.figures.bundle" in loaded(k)  # an output is described when it is recorded
    finally:
        k.shutdown()


def test_what_the_hub_imports_to_load_creates_no_dataclass():
    """Creating a dataclass costs ~0.4 ms on Python 3.13 (its methods are generated and compiled):
    the modules ``%load_ext`` imports define plain classes (DESIGN, "Loading, fifth cut")."""
    code = (
        "import sys, json, mcp_notebook.inkernel.kernel_hub, mcp_notebook.inkernel.lab_comm, mcp_notebook.inkernel.magics\n"
        "print(json.dumps(sorted(f'{m.__name__}.{k}' for m in list(sys.modules.values())"
        " if getattr(m, '__name__', '').startswith('mcp_notebook')"
        " for k, v in vars(m).items() if isinstance(v, type) and v.__module__ == m.__name__"
        " and '__dataclass_fields__' in v.__dict__)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout) == []


def test_a_pattern_group_compiled_late_still_masks_the_first_text():
    """Masking is never skipped: the redactor's patterns compile at the first mask if nothing compiled them."""
    group = redact._RE
    saved = {k: group.__dict__.pop(k) for k in list(group.__dict__) if k != "_sources"}
    try:
        assert not group.compiled
        key = "sk-proj-" + "a1B2" * 8
        assert redact.mask_secrets(f"token is {key}") == "token is [REDACTED]"
        assert group.compiled  # all four at once
        assert redact.mask_secrets('db_password = "hunter22"') == 'db_password = "[REDACTED]"'
    finally:
        group.__dict__.update(saved)
    parser = getattr(re, "_parser", None) or __import__("sre_parse")  # 3.10: sre_parse
    assert parser.parse(redact._SECRET_VALUE).getwidth()[0] == redact.SHORTEST_SHAPE  # shorter text: no shape
    assert redact.contains_secret("xoxb-" + "1" * 10) and not redact.contains_secret("xoxb-" + "1" * 9)
    fresh = LazyPatterns(word=rb"[a-z]+")
    assert fresh.word.findall(b"ab 12 cd") == [b"ab", b"cd"] and fresh.compiled
    with pytest.raises(AttributeError):
        fresh.other  # noqa: B018 -- not a pattern of the group


def test_a_uri_template_compiles_its_pattern_at_the_first_match():
    template = compile_template("nb://lazy-test/{name}{?offset}")
    assert template._regex is None  # parsed (variables known), not compiled
    assert template.variables == ("name", "offset")
    assert template.match("nb://lazy-test/x?offset=2") == {"name": "x", "offset": "2"}
    assert template._regex is not None and template.match("nb://other/x") is None
    with pytest.raises(TemplateError, match="too alike"):  # one regex group name: refused when parsed
        compile_template("nb://lazy-test/{a.b}/{a_b}")


# DESIGN, "Loading, sixth cut": what the first read does not need waits for its own first use.
AFTER_READ = ("mcp_notebook.protocol.tools", "mcp_notebook.nb_tools", "mcp_notebook.inkernel.lab_comm")
EARLY_READ = """
get_ipython().run_line_magic('load_ext', 'mcp_notebook')
import http.client as _hc, json as _j, sys as _s, gc as _gc, mcp_notebook as _m
_info = _m.connection_info()
_hp = _info['url'].split('//')[1].split('/')[0]
_c = _hc.HTTPConnection(_hp, timeout=30)
_init = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-11-25',
         'capabilities': {}, 'clientInfo': {'name': 'early', 'version': '1'}}}
_c.request('POST', '/mcp', body=_j.dumps(_init), headers={'Authorization': 'Bearer ' + _info['token'],
           'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'})
_r = _c.getresponse()
print(_j.dumps({'status': _r.status, 'body': _r.read().decode(), 'loaded': sorted(m for m in AFTER_READ if m in _s.modules),
                'gc': [_gc.isenabled(), _gc.get_freeze_count()]}))
"""


def test_load_returns_before_the_loop_turns_and_leaves_tools_and_the_lab_comm(tmp_path):
    """%load_ext returns once the server thread is started: a request sent at once, from the loading
    cell itself, waits in the socket's backlog and is answered. The tools and the JupyterLab comm are
    not imported by loading: the tools after the loading cell (or at the first tools/list), the comm
    at its first open. The collector is on again after loading, left off if it was off."""
    from test_frontend_comm import Frontend

    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        out = json.loads(k.run(f"AFTER_READ = {AFTER_READ!r}\n" + EARLY_READ).stdout.strip().splitlines()[-1])
        assert out["status"] == 200 and '"result"' in out["body"] and "serverInfo" in out["body"]
        assert out["loaded"] == []  # nor by the first request (an initialize)
        assert out["gc"] == [True, 0]  # the collector is back on; nothing left frozen
        client = Mcp(k.info())
        client.initialize(capabilities={"extensions": {"io.modelcontextprotocol/ui": True}})  # Apps: view tools too
        names = [t["name"] for t in client.result("tools/list")["tools"]]
        assert "read_resource" in names and "watch_changes" in names  # nb_tools' views tools: added when made
        assert "mcp_notebook.inkernel.lab_comm" not in k.run("import sys; print(list(sys.modules))").stdout
        front = Frontend(k)
        front.open()
        state = front.wait(lambda d: d.get("type") == "state")
        assert state["state"]["running"] is True  # the comm found the running hub
        assert "mcp_notebook.inkernel.lab_comm" in k.run("import sys; print(list(sys.modules))").stdout
        k.execute_nowait("%unload_ext mcp_notebook")
        front.wait_closed()  # unloading closes the comm the channel took over
        k.kc.get_shell_msg(timeout=60)  # the unload's execute_reply
        reload = (
            "import gc\ngc.disable()\nget_ipython().run_line_magic('load_ext', 'mcp_notebook')\nprint(gc.isenabled())"
        )
        assert k.run(reload).stdout.strip().splitlines()[-1] == "False"  # the user's choice stands
        k.run("gc.enable()")
    finally:
        k.shutdown()


def test_the_portable_path_answers_a_request_sent_as_loading_returns(tmp_path):
    """The portable path's server (asyncio's own, made by the loop's first turn) takes the backlog too."""
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path), "MCP_NOTEBOOK_PORTABLE": "1"})
    try:
        out = json.loads(k.run(f"AFTER_READ = {AFTER_READ!r}\n" + EARLY_READ).stdout.strip().splitlines()[-1])
        assert out["status"] == 200 and "serverInfo" in out["body"]
        fast = k.run("import mcp_notebook; print(mcp_notebook.hub().fast_paths())").stdout
        assert "'portable': True" in fast and "'loop': 'asyncio'" in fast
    finally:
        k.shutdown()


def test_the_control_channel_waits_for_a_server_thread_still_starting():
    """%load_ext returns before the server thread has made its loop and the control carrier; a
    server asking the kernel's control channel for its hub right after the loading cell ended (a
    gateway kernel's probe) gets its answer once the carrier is there, not silence. The thread's
    start is slowed here so the question surely comes first."""
    from control_peer import ControlPeer

    k = Kernel()
    try:
        k.run(
            "import time as _t\nfrom mcp_notebook.transport.server import HttpTransport as _H\n"
            "_make = _H._make_loop\n"
            "def _slow(self):\n    _t.sleep(1.5)\n    return _make(self)\n"
            "_H._make_loop = _slow"
        )
        k.run("%load_ext mcp_notebook")
        started = time.monotonic()
        peer = ControlPeer(k.km)  # asks mcp_info_request at once and waits for the reply
        try:
            assert peer.token and time.monotonic() - started < 10
        finally:
            peer.close()
        # the kernel's shell goes on, asked through a client of its own (the peer shares, and
        # re-packs, the kernel manager's Session: the harness's client can lose its reply after it)
        k.kc.stop_channels()
        k.kc = k.km.client()
        k.kc.start_channels()
        k.kc.wait_for_ready(timeout=30)
        assert k.run("print(6 * 7)").stdout.strip() == "42"
    finally:
        k.shutdown()


HELD_LOAD = """import gc as _gc, json as _j, time as _t
from mcp_notebook.inkernel import lifecycle as _lc
from mcp_notebook.transport.server import HttpTransport as _H
_seen, _done = {}, []
_make = _H._make_loop
def _watched(self):
    _seen.update(loading_done=bool(_done), gc_on=_gc.isenabled())
    return _make(self)
_H._make_loop = _watched
def _slow_follower(hub):
    _t.sleep(0.3)  # gives up the GIL: a thread not held would make its loop meanwhile
    _done.append(1)
_lc.follow(_slow_follower, lambda hub: None)
get_ipython().run_line_magic('load_ext', 'mcp_notebook')
_lc.unfollow(_slow_follower)
import mcp_notebook as _m
_m.hub().transport.wait_ready(10)
print(_j.dumps(_seen))"""


def test_the_server_thread_starts_its_work_once_loading_has_returned(tmp_path):
    """The server thread is started held: it imports uvloop and makes its loop only once
    ``load_ipython_extension`` has done its last step (docs/DESIGN.md, "Loading, seventh cut"), so
    the loading's last steps never wait for the GIL behind that import, even when one of them gives
    the GIL up (a follower that sleeps, here)."""
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        seen = json.loads(k.run(HELD_LOAD).stdout.strip().splitlines()[-1])
        assert seen == {"loading_done": True, "gc_on": True}
        client = Mcp(k.info())
        client.initialize()
        k.run("x = 41")
        assert "41" in client.result("resources/read", {"uri": "nb://vars/x"})["contents"][0]["text"]
    finally:
        k.shutdown()


def test_a_held_server_thread_serves_once_released_and_stops_if_never_released():
    from mcp_notebook.protocol.server import McpServer, ServerSettings
    from mcp_notebook.transport.server import HttpTransport

    for release in (True, False):
        transport = HttpTransport(McpServer(Resources([]), ServerSettings(token="t" * 32)), "127.0.0.1", 0, 1_000_000)
        transport.start(wait=False, hold=True)
        time.sleep(0.3)
        assert not transport._ready.is_set()  # held: no loop made yet
        if release:
            transport.release()
            assert transport._ready.wait(10) and transport.wait_ready(1)
        started = time.monotonic()
        transport.stop()  # a held thread is let go and stopped, not waited for until its limit
        assert time.monotonic() - started < 5
        assert transport._thread is not None and not transport._thread.is_alive()


def test_a_small_namespace_makes_no_table_reader_until_it_reaches_the_size():
    """The dict-table reader (its layout check: ~0.5 ms) is made when the namespace first reaches
    ``table_from`` names, not when the watch is made at load ("Loading, eighth cut")."""
    ns: dict[str, Any] = {f"v{i}": i for i in range(5)}
    watch = NamespaceWatch(ns, table_from=50)
    assert watch.reset() == list(ns) and watch._reader is None
    grown = {f"g{i}": object() for i in range(120)}
    ns.update(grown)
    rebound, removed = watch.diff()
    assert sorted(rebound) == sorted(grown) and removed == [] and not watch._later
    assert sorted(watch.names()) == sorted(ns) and watch.diff() == ([], [])
    assert NamespaceWatch({}, table_from=50).reads_table == watch.reads_table  # asked: made then
