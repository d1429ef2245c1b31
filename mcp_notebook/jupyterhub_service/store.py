"""What the service remembers, in one small sqlite file: clients, grants, codes and tokens.

No secret is stored as it is. Codes and tokens are kept as a hash (their SHA-256: they are 256
random bits). The user's JupyterHub token, which a grant needs to reach the user's servers, is sealed
(AES-GCM) under a key derived from the code or token that carries it, so only a client holding
that code or token can have it opened; the file alone reveals nothing usable. Client secrets of
registered clients are hashed too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SCHEMA = """
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


def digest(secret: str) -> str:
    """The stored form of a code or token."""
    return hashlib.sha256(b"mcp-notebook id\0" + secret.encode()).hexdigest()


def seal(key_source: str, plain: str) -> str:
    """``plain`` encrypted under a key only ``key_source`` (a code or token) gives."""
    key = hashlib.sha256(b"mcp-notebook key\0" + key_source.encode()).digest()
    nonce = secrets.token_bytes(12)
    return base64.b64encode(nonce + AESGCM(key).encrypt(nonce, plain.encode(), None)).decode()


def unseal(key_source: str, sealed: str) -> str:
    key = hashlib.sha256(b"mcp-notebook key\0" + key_source.encode()).digest()
    raw = base64.b64decode(sealed)
    return AESGCM(key).decrypt(raw[:12], raw[12:], None).decode()


SHA256_PREFIX = "sha256$"
REPLAYED = "!replayed"  # a code's family while its first exchange is in flight and a replay was seen


def hash_secret(secret: str) -> str:
    """A client secret's stored form: its SHA-256 (secrets are random and long: no stretching needed,
    so checking one costs nothing on the event loop)."""
    return SHA256_PREFIX + hashlib.sha256(b"mcp-notebook client secret\0" + secret.encode()).hexdigest()


def check_secret(secret: str, stored: str) -> bool:
    """``secret`` against a stored hash: SHA-256, or (a file from an earlier version) scrypt, which
    is slow: callers run this off the event loop."""
    if stored.startswith(SHA256_PREFIX):
        return hmac.compare_digest(hash_secret(secret), stored)
    salt, _, want = stored.partition(":")
    got = hashlib.scrypt(secret.encode(), salt=bytes.fromhex(salt), n=2**14, r=8, p=1).hex()
    return hmac.compare_digest(got, want)


@dataclass
class Grant:
    """One client's authorization by one user: every token it gets belongs to this family."""

    family: str
    user: str
    client_id: str
    client_name: str
    scope: str
    resource: str
    created: float
    last_used: float
    revoked: bool


@dataclass
class TokenRow:
    family: str
    kind: str  # "access" | "refresh"
    sealed: str
    expires: float
    used: bool


class Store:
    """The sqlite file (one connection, serialized by a lock: the service is small)."""

    def __init__(self, path: str):
        if path != ":memory:" and not path.startswith("file:"):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))  # created private, never world-readable
            os.chmod(path, 0o600)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            if path != ":memory:":  # a write-ahead log, synced at checkpoints: a write is not an fsync
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # -- clients ----------------------------------------------------------------------------
    def save_client(self, client_id: str, kind: str, metadata: dict[str, Any], secret: str | None) -> None:
        self._run(
            "INSERT OR REPLACE INTO clients VALUES (?, ?, ?, ?, ?)",
            (client_id, kind, json.dumps(metadata), hash_secret(secret) if secret else None, time.time()),
        )

    def client(self, client_id: str) -> tuple[str, dict[str, Any], str | None] | None:
        rows = self._run("SELECT kind, metadata, secret_hash FROM clients WHERE client_id = ?", (client_id,))
        return (rows[0][0], json.loads(rows[0][1]), rows[0][2]) if rows else None

    # -- codes -----------------------------------------------------------------------------
    def save_code(self, code: str, fields: dict[str, Any], jupyterhub_token: str, expires: float) -> None:
        self._run(
            "INSERT INTO codes (hash, client_id, user, scope, redirect_uri, resource, challenge, method, sealed, "
            "expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                digest(code),
                fields["client_id"],
                fields["user"],
                fields["scope"],
                fields["redirect_uri"],
                fields["resource"],
                fields["challenge"],
                fields["method"],
                seal(code, jupyterhub_token),
                expires,
            ),
        )

    def code(self, code: str) -> dict[str, Any] | None:
        cols = "client_id, user, scope, redirect_uri, resource, challenge, method, sealed, expires, used, family"
        rows = self._run(f"SELECT {cols} FROM codes WHERE hash = ?", (digest(code),))
        if not rows:
            return None
        out = dict(zip(cols.split(", "), rows[0], strict=True))
        sealed = out.pop("sealed")
        out["jupyterhub_token"] = unseal(code, sealed) if sealed else ""  # "": used or expired, the token gone
        return out

    def use_code(self, code: str) -> bool:
        """Claim a code for one exchange (once: False when it was claimed before). Claimed before its
        tokens are made, so two exchanges in flight never both succeed."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE codes SET used = 1, sealed = '' WHERE hash = ? AND used = 0", (digest(code),)
            )
            return cur.rowcount == 1

    def link_code(self, code: str, family: str) -> bool:
        """Record the grant a code's exchange made (False: the code was replayed meanwhile)."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE codes SET family = ? WHERE hash = ? AND family IS NULL", (family, digest(code))
            )
            return cur.rowcount == 1

    def replayed_code(self, code: str) -> str | None:
        """A used code was presented again: the grant its exchange made (to revoke), or None when that
        exchange is still in flight (it is marked, and its exchange ends its own grant)."""
        with self._lock:
            self._db.execute("UPDATE codes SET family = ? WHERE hash = ? AND family IS NULL", (REPLAYED, digest(code)))
            rows = self._db.execute("SELECT family FROM codes WHERE hash = ?", (digest(code),)).fetchall()
        family = rows[0][0] if rows else None
        return None if family in (None, REPLAYED) else family

    # -- grants and tokens -------------------------------------------------------------------
    def new_grant(self, user: str, client_id: str, client_name: str, scope: str, resource: str) -> str:
        family = secrets.token_urlsafe(12)
        now = time.time()
        self._run(
            "INSERT INTO grants VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
            (family, user, client_id, client_name, scope, resource, now, now),
        )
        return family

    def grant(self, family: str) -> Grant | None:
        rows = self._run("SELECT * FROM grants WHERE family = ?", (family,))
        return Grant(*rows[0][:8], bool(rows[0][8])) if rows else None

    def grants(self, user: str | None = None) -> list[Grant]:
        if user is None:
            rows = self._run("SELECT * FROM grants WHERE revoked = 0 ORDER BY user, created")
        else:
            rows = self._run("SELECT * FROM grants WHERE revoked = 0 AND user = ? ORDER BY created", (user,))
        return [Grant(*r[:8], bool(r[8])) for r in rows]

    def touch(self, family: str) -> None:
        self._run("UPDATE grants SET last_used = ? WHERE family = ?", (time.time(), family))

    def revoke(self, family: str) -> None:
        """End a grant: its tokens are deleted (and with them every sealed copy of its JupyterHub
        token), its codes can no longer be exchanged (one transaction: a token saved meanwhile
        either precedes it and is deleted, or follows it and is refused)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("UPDATE grants SET revoked = 1 WHERE family = ?", (family,))
                self._db.execute("DELETE FROM tokens WHERE family = ?", (family,))
                self._db.execute("UPDATE codes SET used = 1, sealed = '' WHERE family = ?", (family,))
            finally:
                self._db.execute("COMMIT")

    def save_token(self, token: str, family: str, kind: str, jupyterhub_token: str, expires: float) -> bool:
        """Store a token of a live grant (False, nothing stored: the grant was revoked, perhaps while
        the request that made the token was in flight)."""
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO tokens SELECT ?, ?, ?, ?, ?, 0 WHERE EXISTS "
                "(SELECT 1 FROM grants WHERE family = ? AND revoked = 0)",
                (digest(token), family, kind, seal(token, jupyterhub_token), expires, family),
            )
            return cur.rowcount == 1

    def token(self, token: str) -> TokenRow | None:
        rows = self._run("SELECT family, kind, sealed, expires, used FROM tokens WHERE hash = ?", (digest(token),))
        return TokenRow(*rows[0][:4], bool(rows[0][4])) if rows else None

    def use_refresh(self, token: str) -> bool:
        """Claim a refresh token for one refresh (once: False when it was claimed before). Claimed
        before the new tokens are made, so two refreshes in flight never both succeed."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE tokens SET used = 1, sealed = '' WHERE hash = ? AND kind = 'refresh' AND used = 0",
                (digest(token),),
            )
            return cur.rowcount == 1

    def count_clients(self, kind: str) -> int:
        return int(self._run("SELECT COUNT(*) FROM clients WHERE kind = ?", (kind,))[0][0])

    def purge(self, unused_client_seconds: float = 86400.0) -> None:
        """Forget what expired a while ago (a used refresh token is kept until it expires: its reuse
        must still be recognized), and registered clients that never got a grant."""
        now = time.time()
        self._run(
            "DELETE FROM clients WHERE kind IN ('dcr', 'cimd') AND created < ? AND client_id NOT IN "
            "(SELECT client_id FROM grants)",
            (now - unused_client_seconds,),
        )
        self._run("DELETE FROM tokens WHERE expires < ?", (now - 60,))
        self._run("UPDATE codes SET sealed = '' WHERE expires < ? OR used = 1", (now,))
        self._run("DELETE FROM codes WHERE expires < ?", (now - 3600,))
        self._run("DELETE FROM grants WHERE revoked = 1 AND last_used < ?", (now - 7 * 24 * 3600,))

    def close(self) -> None:
        with self._lock:
            self._db.close()
