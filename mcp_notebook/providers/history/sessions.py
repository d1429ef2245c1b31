"""Inputs of earlier sessions of this kernel's notebook, from IPython's history database:
``nb://history{?q,offset,limit}`` (newest first, searchable by text) and
``nb://history/{session}{?offset,limit}`` (one session in order). The current session's cells stay
the live ``nb://cells``.

IPython's history is per profile, not per notebook: every kernel of the profile writes its session
to one sqlite file. Which sessions are this notebook's is recorded by the hubs themselves, in a
small sidecar beside that file (``mcp-notebook-sessions.sqlite``: history file name, session number,
kernel id, notebook path), written when a hub starts and again when its notebook path becomes known
or changes. A hub that knows its notebook path shows the sessions recorded with that path; one that
does not, the sessions of its kernel id (a restarted kernel keeps its id). Sessions run before the
extension was loaded in them are not attributed to any notebook.

The history file is opened read-only (``file:…?mode=ro``), a short lock timeout, and a progress
handler that interrupts any query after ``QUERY_SECONDS``, so a read never holds the kernel's own
writer for long; a busy or unreadable file, or history turned off, is a clear JSON answer.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ...redact import mask_secrets
from ...types import Annotations, Contents, Resource, ResourceTemplate
from ...uri import compile_template
from ..base import InvalidResourceParams, Provider, ResourceNotFound, int_param

log = logging.getLogger(__name__)

INDEX_URI = "nb://history"
SESSION_TEMPLATE = "nb://history/{session}{?offset,limit}"
_INDEX = compile_template("nb://history{?q,offset,limit}")
_SESSION = compile_template(SESSION_TEMPLATE)
_JSON = "application/json"
SIDECAR = "mcp-notebook-sessions.sqlite"
QUERY_SECONDS = 0.5  # a query is interrupted after this long (the rows read so far are kept)
LOCK_SECONDS = 0.2  # waiting for a lock held by the kernel's writer
MAX_SESSIONS = 200  # earlier sessions of one notebook looked at
LISTED_SESSIONS = 20
DEFAULT_LIMIT, MAX_LIMIT = 50, 500
MAX_SOURCE = 4_000  # characters of one input
_MASK_MARGIN = 512


class HistoryUnavailable(Exception):
    """History is off, in memory, missing, unreadable or busy: the reason, said plainly."""


def sidecar_path(hist_file: str) -> Path:
    return Path(hist_file).with_name(SIDECAR)


def record_session(hist_file: str, session: int, kernel_id: str | None, notebook: str | None) -> None:
    """Say in the sidecar that ``session`` of ``hist_file`` is this notebook's (kernel id, path)."""
    conn = sqlite3.connect(sidecar_path(hist_file), timeout=1.0)
    try:
        with conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS sessions (db TEXT, session INTEGER, kernel_id TEXT, notebook TEXT, "
                "recorded REAL, PRIMARY KEY (db, session))"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS by_notebook ON sessions (db, notebook)")
            conn.execute("CREATE INDEX IF NOT EXISTS by_kernel ON sessions (db, kernel_id)")
            conn.execute(
                "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?)",
                (Path(hist_file).name, session, kernel_id, notebook, time.time()),
            )
    finally:
        conn.close()


def _read_only(path: str) -> sqlite3.Connection:
    if not os.path.exists(path):
        raise HistoryUnavailable(f"no history file at {path}")
    conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True, timeout=LOCK_SECONDS)
    deadline = time.monotonic() + QUERY_SECONDS
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 2_000)
    return conn


def _rows(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> tuple[list[tuple[Any, ...]], bool]:
    """The rows of a query, and whether it was interrupted by the deadline (the rows so far kept)."""
    out: list[tuple[Any, ...]] = []
    try:
        for row in conn.execute(sql, args):
            out.append(row)
    except sqlite3.OperationalError as exc:
        text = str(exc).lower()
        if "interrupt" in text:
            return out, True
        if "locked" in text or "busy" in text:
            raise HistoryUnavailable("the history database is busy (the kernel is writing to it): try again") from None
        raise HistoryUnavailable(f"the history database could not be read: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise HistoryUnavailable(f"the history database could not be read: {exc}") from None
    return out, False


class HistoryProvider(Provider):
    """Earlier sessions' inputs of this kernel's notebook (see the module docstring)."""

    uri_prefixes = (INDEX_URI,)

    list_is_pure = True

    def __init__(
        self,
        shell: Any,
        notebook_path: Callable[[], str | None],
        kernel_id: Callable[[], str | None],
        limits: Any,
    ):
        self._shell = shell
        self._notebook = notebook_path
        self._kernel_id = kernel_id
        self._limits = limits
        self._written: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    # -- where the history is, and which sessions are this notebook's ---------------------------
    def _manager(self) -> tuple[str, int]:
        """(history file, current session number), or HistoryUnavailable saying why not."""
        hm = getattr(self._shell, "history_manager", None)
        if hm is None:
            raise HistoryUnavailable("this shell keeps no history (no IPython HistoryManager)")
        if not getattr(hm, "enabled", True):
            raise HistoryUnavailable("IPython history is off (HistoryManager.enabled = False)")
        path = str(getattr(hm, "hist_file", "") or "")
        if not path or path == ":memory:":
            raise HistoryUnavailable("IPython history is kept in memory only (HistoryManager.hist_file = ':memory:')")
        return path, int(getattr(hm, "session_number", 0) or 0)

    def remember(self) -> None:
        """Record this session in the sidecar when it is new or its notebook path changed (cheap when not)."""
        try:
            path, session = self._manager()
        except HistoryUnavailable:
            return
        key = (path, session, self._kernel_id(), self._notebook())
        if not session or key == self._written:
            return
        with self._lock:
            try:
                record_session(path, session, key[2], key[3])
                self._written = key
            except (sqlite3.Error, OSError) as exc:
                log.info("could not record history session %s: %s", session, exc)

    def _mine(self, path: str, current: int) -> tuple[list[int], str]:
        """This notebook's earlier sessions, newest first, and what they were matched by."""
        notebook, kernel = self._notebook(), self._kernel_id()
        if not os.path.exists(sidecar_path(path)):
            return [], "no session recorded yet"
        conn = _read_only(str(sidecar_path(path)))
        try:
            column, value, how = (
                ("notebook", notebook, "notebook path") if notebook else ("kernel_id", kernel, "kernel id")
            )
            if value is None:
                return [], "neither the notebook path nor the kernel id is known"
            rows, _ = _rows(
                conn,
                f"SELECT session FROM sessions WHERE db = ? AND {column} = ? AND session != ? "
                "ORDER BY session DESC LIMIT ?",
                (Path(path).name, value, current, MAX_SESSIONS),
            )
        finally:
            conn.close()
        return [r[0] for r in rows], how

    # -- Provider -------------------------------------------------------------------------------
    def owns(self, uri: str) -> bool:
        return uri == INDEX_URI or uri.startswith((INDEX_URI + "/", INDEX_URI + "?"))

    def list_resources(self) -> list[Resource]:
        return [
            Resource(
                uri=INDEX_URI,
                name="history",
                title="Inputs of earlier sessions (before restarts)",
                description="What ran in this notebook's earlier kernel sessions, from IPython's history, newest "
                "first; ?q= searches the text. The current session is nb://cells.",
                mime_type=_JSON,
                annotations=Annotations(audience=("assistant",), priority=0.5),
            )
        ]

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template="nb://history{?q,offset,limit}",
                name="history search",
                title="Search the inputs of earlier sessions",
                description="Inputs of this notebook's earlier sessions (before a restart) containing q, newest first.",
                mime_type=_JSON,
            ),
            ResourceTemplate(
                uri_template=SESSION_TEMPLATE,
                name="history session",
                title="Inputs of one earlier session",
                description="The inputs of one earlier session of this notebook, in order (session numbers: nb://history).",
                mime_type=_JSON,
            ),
        ]

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        if template == "nb://history{?q,offset,limit}":
            return []  # free text and numbers: nothing to offer
        if template != SESSION_TEMPLATE:
            return None
        if argument != "session":
            return []
        try:
            path, current = self._manager()
            sessions, _ = self._mine(path, current)
        except HistoryUnavailable:
            return []
        return [s for s in map(str, sessions) if s.startswith(value)][:100]

    def read(self, uri: str) -> list[Contents]:
        index, one = _INDEX.match(uri), _SESSION.match(uri)
        if index is None and one is None:
            raise ResourceNotFound(uri)
        self.remember()
        try:
            path, current = self._manager()
            doc = (
                self._search(uri, path, current, index) if index is not None else self._session(uri, path, current, one)
            )
        except HistoryUnavailable as exc:
            doc = {"available": False, "reason": str(exc), "current_session": "nb://cells"}
        return [Contents(uri=uri, mime_type=_JSON, text=json.dumps(doc, ensure_ascii=False, default=str))]

    def _page(self, params: dict[str, str], allowed: set[str]) -> tuple[int, int]:
        unknown = set(params) - allowed
        if unknown:
            raise InvalidResourceParams(f"unknown parameter(s) {sorted(unknown)}; use {', '.join(sorted(allowed))}")
        limit = int_param(params, "limit", DEFAULT_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidResourceParams(f"limit must be between 1 and {MAX_LIMIT}")
        return int_param(params, "offset", 0), limit

    def _search(self, uri: str, path: str, current: int, params: dict[str, str]) -> dict[str, Any]:
        offset, limit = self._page(params, {"q", "offset", "limit"})
        query = params.get("q") or ""
        sessions, how = self._mine(path, current)
        doc: dict[str, Any] = {"available": True, "current_session": current, "matched_by": how}
        doc["notebook"] = self._notebook()
        if not sessions:
            doc.update(sessions=[], inputs=[], note="no earlier session of this notebook is recorded")
            return doc
        marks = ",".join("?" * len(sessions))
        where, args = f"session IN ({marks})", tuple(sessions)
        if query:
            escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where, args = where + " AND source_raw LIKE ? ESCAPE '\\'", (*args, f"%{escaped}%")
        conn = _read_only(path)
        try:
            info, _ = _rows(
                conn,
                f"SELECT session, start, end, num_cmds FROM sessions WHERE session IN ({marks}) ORDER BY session DESC",
                tuple(sessions),
            )
            rows, partial = _rows(
                conn,
                f"SELECT session, line, source_raw FROM history WHERE {where} "
                "ORDER BY session DESC, line DESC LIMIT ? OFFSET ?",
                (*args, limit + 1, offset),
            )
        finally:
            conn.close()
        doc["sessions"] = [_session_row(r) for r in info[:LISTED_SESSIONS]]
        doc.update(
            self._inputs(
                rows, limit, offset, lambda o: _INDEX.expand({"q": query or None, "offset": o, "limit": limit})
            )
        )
        if query:
            doc["q"] = query
        if partial:
            doc["partial"] = True
            doc["note"] = f"the search stopped after {QUERY_SECONDS} s: later pages may hold more matches"
        return doc

    def _session(self, uri: str, path: str, current: int, params: dict[str, str]) -> dict[str, Any]:
        offset, limit = self._page(params, {"session", "offset", "limit"})
        raw = params["session"]
        sessions, how = self._mine(path, current)
        if not (raw.isascii() and raw.isdigit()) or int(raw) not in sessions:
            raise ResourceNotFound(
                uri, f"Resource not found: {uri} (not an earlier session of this notebook; see nb://history)"
            )
        session = int(raw)
        conn = _read_only(path)
        try:
            info, _ = _rows(conn, "SELECT session, start, end, num_cmds FROM sessions WHERE session = ?", (session,))
            rows, partial = _rows(
                conn,
                "SELECT session, line, source_raw FROM history WHERE session = ? ORDER BY line LIMIT ? OFFSET ?",
                (session, limit + 1, offset),
            )
        finally:
            conn.close()
        doc: dict[str, Any] = {"available": True, "matched_by": how, "session": _session_row(info[0]) if info else None}
        doc.update(
            self._inputs(
                rows, limit, offset, lambda o: _SESSION.expand({"session": session, "offset": o, "limit": limit})
            )
        )
        if partial:
            doc["partial"] = True
        return doc

    def _inputs(
        self, rows: list[tuple[Any, ...]], limit: int, offset: int, page: Callable[[int], str]
    ) -> dict[str, Any]:
        """Rows as masked, bounded inputs; ``next`` when more remain (or the read budget ran out)."""
        budget = self._limits.max_read_chars - 3000
        out, used = [], 0
        for session, line, source in rows[:limit]:
            text = mask_secrets(str(source or "")[: MAX_SOURCE + _MASK_MARGIN])
            item: dict[str, Any] = {"session": session, "line": line, "source": text[:MAX_SOURCE]}
            if len(text) > MAX_SOURCE:
                item["source_truncated"] = True
            item["uri"] = _SESSION.expand({"session": session})
            used += len(json.dumps(item, ensure_ascii=False)) + 2
            if used > budget and out:
                break
            out.append(item)
        doc: dict[str, Any] = {"offset": offset, "inputs": out}
        if len(out) < len(rows):
            doc["next"] = page(offset + len(out))
        return doc


def _session_row(row: tuple[Any, ...]) -> dict[str, Any]:
    session, start, end, count = row
    return {
        "session": session,
        "start": start,
        "end": end,
        "inputs": count,
        "uri": _SESSION.expand({"session": session}),
    }
