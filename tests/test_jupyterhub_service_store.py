"""The store on SQLAlchemy: a sqlite file an earlier version made (no alembic, the first schema)
opens, is upgraded in place and keeps its clients, grants and tokens; a new file is private (0600);
``db_url`` follows JupyterHub's spelling."""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import stat
import time
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")

from mcp_notebook.jupyterhub_service.database import resolved_url
from mcp_notebook.jupyterhub_service.store import Store, check_secret, digest, seal

# the schema of the store before this version (mcp_notebook 0.x, sqlite3 by hand), as it stands in files
FIRST_SCHEMA = """
CREATE TABLE IF NOT EXISTS clients (
  client_id TEXT PRIMARY KEY, kind TEXT NOT NULL, metadata TEXT NOT NULL,
  secret_hash TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS grants (
  family TEXT PRIMARY KEY, user TEXT NOT NULL, client_id TEXT NOT NULL, client_name TEXT NOT NULL,
  scope TEXT NOT NULL, resource TEXT NOT NULL, created REAL NOT NULL, last_used REAL NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS codes (
  hash TEXT PRIMARY KEY, client_id TEXT NOT NULL, user TEXT NOT NULL, scope TEXT NOT NULL,
  redirect_uri TEXT NOT NULL, resource TEXT NOT NULL, challenge TEXT NOT NULL, method TEXT NOT NULL,
  sealed TEXT NOT NULL, expires REAL NOT NULL, used INTEGER NOT NULL DEFAULT 0, family TEXT);
CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY, family TEXT NOT NULL, kind TEXT NOT NULL, sealed TEXT NOT NULL,
  expires REAL NOT NULL, used INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS tokens_family ON tokens(family);
"""


def old_file(path: Path) -> dict[str, str]:
    """A store file as the earlier version left it: a configured client with an scrypt-hashed secret,
    a grant and its access token."""
    db = sqlite3.connect(path)
    db.executescript(FIRST_SCHEMA)
    salt = secrets.token_bytes(16)
    scrypt = salt.hex() + ":" + hashlib.scrypt(b"old-secret", salt=salt, n=2**14, r=8, p=1).hex()
    now = time.time()
    db.execute("INSERT INTO clients VALUES ('old-client', 'config', '{\"redirect_uris\": []}', ?, ?)", (scrypt, now))
    db.execute(
        "INSERT INTO grants VALUES ('fam1', 'alice', 'old-client', 'Old', 'kernels:read', 'https://h/mcp', ?, ?, 0)",
        (now, now),
    )
    token = "mcpnb_at_" + secrets.token_urlsafe(32)
    db.execute(
        "INSERT INTO tokens VALUES (?, 'fam1', 'access', ?, ?, 0)",
        (digest(token), seal(token, "jupyterhub-token"), now + 3600),
    )
    db.commit()
    db.close()
    return {"token": token}


def test_a_file_of_the_first_schema_opens_upgraded_with_its_grants(tmp_path):
    path = tmp_path / "mcp-notebook-oauth.sqlite"
    made = old_file(path)
    store = Store(str(path))
    try:
        grant = store.grant("fam1")
        assert grant is not None and grant.user == "alice" and not grant.revoked
        row = store.token(made["token"])
        assert row is not None and row.family == "fam1" and row.kind == "access"
        kind, _, secret_hash = store.client("old-client")
        assert kind == "config" and check_secret("old-secret", secret_hash)
        assert store.revoked_since(0)[0] == []
        store.revoke("fam1")  # the columns the upgrade added work
        assert store.revoked_since(0)[0] == ["fam1"] and store.token(made["token"]) is None
        assert len(store.key("cookie")) == 32 and store.key("cookie") == store.key("cookie")
    finally:
        store.close()
    version = sqlite3.connect(path).execute("SELECT version_num FROM alembic_version").fetchall()
    assert version == [("v3",)]
    again = Store(str(path))  # opening an upgraded file changes nothing
    assert again.grant("fam1").revoked
    again.close()


def test_a_new_store_file_is_private(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "new.sqlite"
        Store(str(path)).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_db_url_follows_jupyterhubs_spelling():
    assert resolved_url("", "x.sqlite") == "sqlite:///x.sqlite"
    assert resolved_url("", ":memory:") == "sqlite://"
    assert resolved_url("sqlite:///tmp/a.sqlite", "ignored") == "sqlite:///tmp/a.sqlite"
    pg = resolved_url("postgresql://hub@db/hub", "")
    assert pg in ("postgresql://hub@db/hub", "postgresql+psycopg://hub@db/hub")


def test_registered_clients_that_never_got_a_grant_are_purged(tmp_path):
    store = Store(str(tmp_path / "s.sqlite"))
    try:
        for client_id in ("unused", "used"):
            store.save_client(client_id, "dcr", {"redirect_uris": []}, None)
        store.save_client("configured", "config", {"redirect_uris": []}, None)
        store.new_grant("alice", "used", "Used", "kernels:read", "https://h/mcp")
        store.purge(unused_client_seconds=3600)
        assert store.client("unused") is not None  # young: kept
        store.purge(unused_client_seconds=-1)
        assert store.client("unused") is None
        assert store.client("used") is not None and store.client("configured") is not None
        assert store.count_clients("dcr") == 1
    finally:
        store.close()


def test_sessions_are_kept_as_hashes_changed_ended_and_ended_with_their_grant(tmp_path):
    store = Store(str(tmp_path / "s.sqlite"))
    try:
        family = store.new_grant("alice", "c1", "Client", "mcp", "http://x/mcp")
        sid, client = secrets.token_urlsafe(24), {"info": {"name": "sdk"}, "capabilities": {}}
        store.save_session(sid, family, "2025-11-25", client, None, [], new=True)
        store.save_session(sid, family, "2025-11-25", client, "info", ["nb://vars/x"], new=False)
        row = store.session(sid)
        assert row is not None and row.hash == digest(sid) and row.family == family and not row.ended
        assert (row.version, row.client, row.log_level, row.subscriptions) == (
            "2025-11-25",
            client,
            "info",
            ["nb://vars/x"],
        )
        raw = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT * FROM sessions").fetchall()
        assert sid not in repr(raw)  # the id itself is never stored
        rows, _ = store.sessions_since(time.time() - 5)
        assert [r.hash for r in rows] == [digest(sid)]
        other = secrets.token_urlsafe(24)
        store.save_session(other, family, "2025-11-25", client, None, [], new=True)
        store.end_session(other)
        assert store.session(other).ended
        store.revoke(family)
        assert store.session(sid).ended
    finally:
        store.close()


def test_a_session_row_keeps_a_bounded_copy_of_what_the_client_sent(tmp_path):
    from mcp_notebook.jupyterhub_service.sessions import MAX_CLIENT_BYTES, SharedSessions
    from mcp_notebook.protocol.handshake import Session

    store = Store(str(tmp_path / "b.sqlite"))
    try:
        family = store.new_grant("alice", "c1", "Client", "mcp", "http://x/mcp")
        huge = Session(secrets.token_urlsafe(24), "2025-11-25", {"name": "n" * 100_000, "x": "y" * 10**6}, {"a": {}})
        SharedSessions(store)._record(family, "created", huge)
        row = store.session(huge.id)
        assert row.client == {"info": {"name": "n" * 200, "version": ""}, "capabilities": {"a": {}}}
        small = Session(secrets.token_urlsafe(24), "2025-11-25", {"name": "sdk", "version": "2"}, {"b": {"c": 1}})
        SharedSessions(store)._record(family, "created", small)
        assert store.session(small.id).client == {"info": small.client_info, "capabilities": small.capabilities}
        assert MAX_CLIENT_BYTES < 10**6
    finally:
        store.close()
