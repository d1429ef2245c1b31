"""Earlier sessions from IPython's history database (issue #36): this notebook's sessions only, paged,
searched, masked; a busy, unreadable or switched-off history is a clear answer, never an error
trace; a query never runs past its deadline. The restart itself is in tests/test_lineage.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from kernel_harness import Kernel

from mcp_notebook.allkernels.naming import qualify, split
from mcp_notebook.inkernel.config import MCPHub
from mcp_notebook.providers.history import sessions as history
from mcp_notebook.providers.history.sessions import HistoryProvider, record_session
from mcp_notebook.types import InvalidResourceParams, ResourceNotFound

NOTEBOOK = "/work/analysis.ipynb"


def _history_db(path: Path, sessions: dict[int, list[str]]) -> None:
    """A history file as IPython writes it (its schema), with these inputs per session."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "CREATE TABLE sessions (session integer primary key autoincrement, start timestamp, "
            "end timestamp, num_cmds integer, remark text)"
        )
        conn.execute(
            "CREATE TABLE history (session integer, line integer, source text, source_raw text, "
            "PRIMARY KEY (session, line))"
        )
        for session, inputs in sessions.items():
            conn.execute("INSERT INTO sessions VALUES (?, '2026-01-01', '2026-01-01', ?, '')", (session, len(inputs)))
            conn.executemany(
                "INSERT INTO history VALUES (?, ?, ?, ?)", [(session, i, s, s) for i, s in enumerate(inputs, 1)]
            )
    conn.close()


def _provider(path: Path, current: int, notebook: str | None = NOTEBOOK) -> HistoryProvider:
    """The provider over a shell whose HistoryManager uses ``path`` (its attributes, as IPython's has)."""
    hm = SimpleNamespace(enabled=True, hist_file=str(path), session_number=current)
    return HistoryProvider(SimpleNamespace(history_manager=hm), lambda: notebook, lambda: "kernel-1", MCPHub())


def _read(provider: HistoryProvider, uri: str) -> dict:
    return json.loads(provider.read(uri)[0].text)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.sqlite"
    _history_db(
        path,
        {
            1: ["x = 1", "db_password = 'hunter2-secret-value'", "x += 1"],
            2: ["other notebook's input"],
            3: ["df = load()", "df.head()"],
            4: ["the current session"],
        },
    )
    record_session(str(path), 1, "kernel-1", NOTEBOOK)
    record_session(str(path), 2, "kernel-2", "/work/other.ipynb")
    record_session(str(path), 3, "kernel-1", NOTEBOOK)
    return path


def test_this_notebooks_earlier_sessions_newest_first_searched_and_masked(db):
    provider = _provider(db, current=4)
    doc = _read(provider, "nb://history")
    assert [s["session"] for s in doc["sessions"]] == [3, 1] and doc["matched_by"] == "notebook path"
    assert [(i["session"], i["line"]) for i in doc["inputs"]] == [(3, 2), (3, 1), (1, 3), (1, 2), (1, 1)]
    assert "hunter2" not in json.dumps(doc) and "other notebook" not in json.dumps(doc)
    assert [i["source"] for i in _read(provider, "nb://history?q=DF.")["inputs"]] == ["df.head()"]
    assert _read(provider, "nb://history?q=%25")["inputs"] == []  # LIKE wildcards are literal
    page = _read(provider, "nb://history?limit=2&offset=1")
    assert [i["line"] for i in page["inputs"]] == [1, 3] and page["next"] == "nb://history?offset=3&limit=2"
    one = _read(provider, "nb://history/1")
    assert [i["source"] for i in one["inputs"]][0::2] == ["x = 1", "x += 1"]
    with pytest.raises(ResourceNotFound):
        provider.read("nb://history/2")  # another notebook's session
    with pytest.raises(InvalidResourceParams):
        provider.read("nb://history?limit=0")
    assert provider.complete("nb://history/{session}{?offset,limit}", "session", "", {}) == ["3", "1"]
    # no notebook path known: the sessions of this kernel id
    by_kernel = _read(_provider(db, current=4, notebook=None), "nb://history")
    assert by_kernel["matched_by"] == "kernel id" and [s["session"] for s in by_kernel["sessions"]] == [3, 1]


def test_busy_unreadable_off_and_in_memory_history_are_clear_answers(db, tmp_path):
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # the kernel's own writer in the middle of a write
    try:
        doc = _read(_provider(db, current=4), "nb://history")
        assert doc["available"] is False and "busy" in doc["reason"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    broken = tmp_path / "broken" / "history.sqlite"
    broken.parent.mkdir()
    broken.write_bytes(b"not a database" * 100)
    record_session(str(broken), 1, "kernel-1", NOTEBOOK)
    doc = _read(_provider(broken, current=2), "nb://history")
    assert doc["available"] is False and "could not be read" in doc["reason"]
    off = _read(_off(db), "nb://history")
    assert off == {"available": False, "reason": off["reason"], "current_session": "nb://cells"}
    assert "HistoryManager.enabled = False" in off["reason"]
    memory = _read(_provider(Path(":memory:"), current=1), "nb://history/1")
    assert memory["available"] is False and ":memory:" in memory["reason"]


def _off(db: Path) -> HistoryProvider:
    provider = _provider(db, current=4)
    provider._shell.history_manager.enabled = False
    return provider


def test_a_search_stops_at_its_deadline_with_what_it_found(db, tmp_path, monkeypatch):
    big = tmp_path / "big" / "history.sqlite"
    big.parent.mkdir()
    _history_db(big, {1: [f"line {i}" for i in range(200_000)], 2: []})
    record_session(str(big), 1, "kernel-1", NOTEBOOK)
    monkeypatch.setattr(history, "QUERY_SECONDS", 0.001)
    doc = _read(_provider(big, current=2), "nb://history?q=no such text")
    assert doc["available"] is True and doc["partial"] is True and doc["inputs"] == []


def test_qualified_uris_with_a_scheme_like_query_round_trip():
    """A query holding "x:/" is not another scheme (it was read as one before)."""
    uri = qualify("analysis", "nb://history?q=http://example")
    assert split(uri) == ("analysis", "nb://history?q=http://example")
    assert split(qualify("analysis", "app://orders/north")) == ("analysis", "app://orders/north")


def test_a_kernel_with_history_off_says_so(tmp_path):
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text("c.HistoryManager.enabled = False\n")
    kernel = Kernel(env={"IPYTHONDIR": str(tmp_path / "ipython"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")})
    try:
        kernel.load_hub()
        out = kernel.run("import mcp_notebook as _m; print(_m.hub().resources.read('nb://history')[0].text)")
        doc = json.loads(out.stdout)
        assert doc["available"] is False and "HistoryManager.enabled = False" in doc["reason"]
    finally:
        kernel.shutdown()
