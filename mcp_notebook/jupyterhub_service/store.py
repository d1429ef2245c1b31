"""What the service remembers: clients, grants, codes, tokens, pending sign-ins and shared keys, in
the database of ``database.py`` (a sqlite file, or PostgreSQL shared by replicas).

No secret is stored as it is. Codes and tokens are kept as a hash (their SHA-256: they are 256
random bits). The user's JupyterHub token, which a grant needs to reach the user's servers, is sealed
(AES-GCM) under a key derived from the code or token that carries it, so only a client holding
that code or token can have it opened; the file alone reveals nothing usable. Client secrets of
registered clients are hashed too.

Races are settled by the database: a code or a refresh token is claimed by one conditional update
(one winner), a token is stored only while its grant is live (PostgreSQL: ``FOR SHARE`` on the
grant's row, which a revocation's update waits for), and a revocation updates the grant and
deletes its tokens in one transaction. On sqlite (one process) a lock serializes writers as well.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from .database import engine, upgrade


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
class SessionRow:
    """A handshake-era MCP session as replicas share it (its id is stored as a hash)."""

    hash: str
    family: str
    version: str
    client: dict[str, Any]
    log_level: str | None
    subscriptions: list[str]
    ended: bool
    updated: float


MAX_SESSIONS_PER_GRANT = 100


@dataclass
class TokenRow:
    family: str
    kind: str  # "access" | "refresh"
    sealed: str
    expires: float
    used: bool


class Store:
    """The database, through SQLAlchemy (a lock serializes sqlite's writers: one process)."""

    def __init__(self, path: str = "", db_url: str = ""):
        self.engine = engine(db_url, path)
        self.postgres = self.engine.dialect.name == "postgresql"
        self._lock = threading.Lock() if not self.postgres else contextlib.nullcontext()
        with self._lock:
            upgrade(self.engine)

    def _run(self, sql: str, **args: Any) -> list[Any]:
        with self._lock, self.engine.begin() as conn:
            result = conn.execute(text(sql), args)
            return list(result) if result.returns_rows else []

    def _count(self, sql: str, **args: Any) -> int:
        with self._lock, self.engine.begin() as conn:
            return conn.execute(text(sql), args).rowcount

    # -- clients ----------------------------------------------------------------------------
    def save_client(self, client_id: str, kind: str, metadata: dict[str, Any], secret: str | None) -> None:
        values = {
            "id": client_id,
            "kind": kind,
            "md": json.dumps(metadata),
            "sh": hash_secret(secret) if secret else None,
            "now": time.time(),
        }
        try:
            with self._lock, self.engine.begin() as conn:
                conn.execute(text("DELETE FROM clients WHERE client_id = :id"), values)
                conn.execute(text("INSERT INTO clients VALUES (:id, :kind, :md, :sh, :now)"), values)
        except sa_exc.IntegrityError:  # another replica saved the same client at the same moment
            pass

    def client(self, client_id: str) -> tuple[str, dict[str, Any], str | None] | None:
        rows = self._run("SELECT kind, metadata, secret_hash FROM clients WHERE client_id = :id", id=client_id)
        return (rows[0][0], json.loads(rows[0][1]), rows[0][2]) if rows else None

    def count_clients(self, kind: str) -> int:
        return int(self._run("SELECT COUNT(*) FROM clients WHERE kind = :kind", kind=kind)[0][0])

    # -- codes -----------------------------------------------------------------------------
    def save_code(self, code: str, fields: dict[str, Any], jupyterhub_token: str, expires: float) -> None:
        self._run(
            'INSERT INTO codes (hash, client_id, "user", scope, redirect_uri, resource, challenge, method, sealed, '
            "expires, used) VALUES (:hash, :client_id, :user, :scope, :redirect_uri, :resource, :challenge, "
            ":method, :sealed, :expires, 0)",
            **fields,
            hash=digest(code),
            sealed=seal(code, jupyterhub_token),
            expires=expires,
        )

    def code(self, code: str) -> dict[str, Any] | None:
        cols = "client_id, user, scope, redirect_uri, resource, challenge, method, sealed, expires, used, family"
        quoted = cols.replace("user", '"user"')
        rows = self._run(f"SELECT {quoted} FROM codes WHERE hash = :h", h=digest(code))
        if not rows:
            return None
        out = dict(zip(cols.split(", "), rows[0], strict=True))
        sealed = out.pop("sealed")
        out["jupyterhub_token"] = unseal(code, sealed) if sealed else ""  # "": used or expired, the token gone
        return out

    def use_code(self, code: str) -> bool:
        """Claim a code for one exchange (once: False when it was claimed before). Claimed before its
        tokens are made, so two exchanges in flight never both succeed."""
        return self._count("UPDATE codes SET used = 1, sealed = '' WHERE hash = :h AND used = 0", h=digest(code)) == 1

    def link_code(self, code: str, family: str) -> bool:
        """Record the grant a code's exchange made (False: the code was replayed meanwhile)."""
        sql = "UPDATE codes SET family = :f WHERE hash = :h AND family IS NULL"
        return self._count(sql, f=family, h=digest(code)) == 1

    def replayed_code(self, code: str) -> str | None:
        """A used code was presented again: the grant its exchange made (to revoke), or None when that
        exchange is still in flight (it is marked, and its exchange ends its own grant)."""
        with self._lock, self.engine.begin() as conn:
            args = {"f": REPLAYED, "h": digest(code)}
            conn.execute(text("UPDATE codes SET family = :f WHERE hash = :h AND family IS NULL"), args)
            rows = list(conn.execute(text("SELECT family FROM codes WHERE hash = :h"), args))
        family = rows[0][0] if rows else None
        return None if family in (None, REPLAYED) else family

    # -- grants and tokens -------------------------------------------------------------------
    def new_grant(self, user: str, client_id: str, client_name: str, scope: str, resource: str) -> str:
        family = secrets.token_urlsafe(12)
        now = time.time()
        self._run(
            "INSERT INTO grants VALUES (:f, :user, :cid, :name, :scope, :res, :now, :now, 0, NULL)",
            f=family,
            user=user,
            cid=client_id,
            name=client_name,
            scope=scope,
            res=resource,
            now=now,
        )
        return family

    GRANT = 'family, "user", client_id, client_name, scope, resource, created, last_used, revoked'

    def grant(self, family: str) -> Grant | None:
        rows = self._run(f"SELECT {self.GRANT} FROM grants WHERE family = :f", f=family)
        return Grant(*rows[0][:8], bool(rows[0][8])) if rows else None

    def grants(self, user: str | None = None) -> list[Grant]:
        if user is None:
            rows = self._run(f'SELECT {self.GRANT} FROM grants WHERE revoked = 0 ORDER BY "user", created')
        else:
            rows = self._run(
                f'SELECT {self.GRANT} FROM grants WHERE revoked = 0 AND "user" = :u ORDER BY created', u=user
            )
        return [Grant(*r[:8], bool(r[8])) for r in rows]

    def touch(self, family: str) -> None:
        self._run("UPDATE grants SET last_used = :now WHERE family = :f", now=time.time(), f=family)

    def revoke(self, family: str) -> None:
        """End a grant: its tokens are deleted (and with them every sealed copy of its JupyterHub
        token), its codes can no longer be exchanged (one transaction: a token saved meanwhile
        either precedes it and is deleted, or follows it and is refused)."""
        with self._lock, self.engine.begin() as conn:
            args = {"f": family, "now": time.time()}
            conn.execute(text("UPDATE grants SET revoked = 1, revoked_at = :now WHERE family = :f"), args)
            conn.execute(text("DELETE FROM tokens WHERE family = :f"), args)
            conn.execute(text("UPDATE codes SET used = 1, sealed = '' WHERE family = :f"), args)
            conn.execute(text("UPDATE sessions SET ended = 1, updated = :now WHERE family = :f"), args)

    def revoked_since(self, since: float) -> tuple[list[str], float]:
        """Grants revoked at ``since`` or later (by any replica), and the time to ask from next."""
        now = time.time()
        rows = self._run("SELECT family FROM grants WHERE revoked_at >= :since", since=since)
        return [r[0] for r in rows], now - 2.0  # overlap: another replica's clock or commit may lag

    def save_token(self, token: str, family: str, kind: str, jupyterhub_token: str, expires: float) -> bool:
        """Store a token of a live grant (False, nothing stored: the grant was revoked, perhaps while
        the request that made the token was in flight)."""
        share = " FOR SHARE" if self.postgres else ""
        return (
            self._count(
                "INSERT INTO tokens (hash, family, kind, sealed, expires, used) "
                f"SELECT :h, :f, :kind, :sealed, :exp, 0 FROM grants WHERE family = :f AND revoked = 0{share}",
                h=digest(token),
                f=family,
                kind=kind,
                sealed=seal(token, jupyterhub_token),
                exp=expires,
            )
            == 1
        )

    def token(self, token: str) -> TokenRow | None:
        rows = self._run("SELECT family, kind, sealed, expires, used FROM tokens WHERE hash = :h", h=digest(token))
        return TokenRow(*rows[0][:4], bool(rows[0][4])) if rows else None

    def use_refresh(self, token: str) -> bool:
        """Claim a refresh token for one refresh (once: False when it was claimed before). Claimed
        before the new tokens are made, so two refreshes in flight never both succeed."""
        sql = "UPDATE tokens SET used = 1, sealed = '' WHERE hash = :h AND kind = 'refresh' AND used = 0"
        return self._count(sql, h=digest(token)) == 1

    # -- handshake-era sessions ---------------------------------------------------------------
    def save_session(
        self,
        sid: str,
        family: str,
        version: str,
        client: dict[str, Any],
        log_level: str | None,
        subscriptions: list[str],
        new: bool,
    ) -> None:
        """A session made (``new``) or changed by its client; a grant keeps its newest
        ``MAX_SESSIONS_PER_GRANT`` sessions."""
        values = {
            "h": digest(sid),
            "f": family,
            "v": version,
            "c": json.dumps(client),
            "l": log_level,
            "s": json.dumps(sorted(subscriptions)),
            "now": time.time(),
            "keep": MAX_SESSIONS_PER_GRANT,
        }
        with self._lock, self.engine.begin() as conn:
            if new:
                conn.execute(text("INSERT INTO sessions VALUES (:h, :f, :v, :c, :l, :s, :now, :now, 0)"), values)
                conn.execute(
                    text(
                        "DELETE FROM sessions WHERE family = :f AND hash NOT IN (SELECT hash FROM sessions "
                        "WHERE family = :f ORDER BY created DESC LIMIT :keep)"
                    ),
                    values,
                )
            else:
                conn.execute(
                    text(
                        "UPDATE sessions SET log_level = :l, subscriptions = :s, updated = :now "
                        "WHERE hash = :h AND family = :f AND ended = 0"
                    ),
                    values,
                )

    def end_session(self, sid: str) -> None:
        self._run("UPDATE sessions SET ended = 1, updated = :now WHERE hash = :h", h=digest(sid), now=time.time())

    SESSION = "hash, family, version, client, log_level, subscriptions, ended, updated"

    def session(self, sid: str) -> SessionRow | None:
        rows = self._run(f"SELECT {self.SESSION} FROM sessions WHERE hash = :h", h=digest(sid))
        return _session_row(rows[0]) if rows else None

    def sessions_since(self, since: float) -> tuple[list[SessionRow], float]:
        """Sessions changed or ended at ``since`` or later (by any replica), and the time to ask from next."""
        now = time.time()
        rows = self._run(f"SELECT {self.SESSION} FROM sessions WHERE updated >= :t", t=since)
        return [_session_row(r) for r in rows], now - 2.0  # overlap, as revoked_since

    # -- what replicas share -----------------------------------------------------------------
    def add_pending(
        self, query: str, address: str, seconds: float, total: int, per_address: int
    ) -> tuple[str, str] | None:
        """A sign-in awaiting consent: its id and the browser's nonce; None past the caps (``total``
        and ``per_address`` among those younger than ``seconds``)."""
        since = time.time() - seconds
        pending_id, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        with self._lock, self.engine.begin() as conn:
            conn.execute(text("DELETE FROM pending WHERE created < :t"), {"t": since})
            counts = conn.execute(
                text("SELECT COUNT(*), SUM(CASE WHEN address = :a THEN 1 ELSE 0 END) FROM pending"), {"a": address}
            ).one()
            if counts[0] >= total or (counts[1] or 0) >= per_address:
                return None
            conn.execute(
                text("INSERT INTO pending VALUES (:id, :q, :n, :a, :now)"),
                {"id": pending_id, "q": query, "n": nonce, "a": address, "now": time.time()},
            )
        return pending_id, nonce

    def pending(self, pending_id: str, seconds: float) -> tuple[str, str] | None:
        """(query, nonce) of a sign-in awaiting consent, younger than ``seconds``."""
        sql = "SELECT query, nonce FROM pending WHERE id = :id AND created >= :t"
        rows = self._run(sql, id=pending_id, t=time.time() - seconds)
        return (rows[0][0], rows[0][1]) if rows else None

    def drop_pending(self, pending_id: str) -> None:
        self._run("DELETE FROM pending WHERE id = :id", id=pending_id)

    def save_hub_state(self, state_id: str, state: dict[str, Any]) -> None:
        """A JupyterHub sign-in's state (next URL, PKCE verifier), for whichever replica gets the callback."""
        sql = "INSERT INTO hub_states VALUES (:id, :state, :now)"
        self._run(sql, id=state_id, state=json.dumps(state), now=time.time())

    def hub_state(self, state_id: str, seconds: float = 600.0) -> dict[str, Any] | None:
        sql = "SELECT state FROM hub_states WHERE id = :id AND created >= :t"
        rows = self._run(sql, id=state_id, t=time.time() - seconds)
        return json.loads(rows[0][0]) if rows else None

    def drop_hub_state(self, state_id: str) -> None:
        self._run("DELETE FROM hub_states WHERE id = :id OR created < :t", id=state_id, t=time.time() - 3600)

    def take(self, address: str, per_second: float, burst: int) -> bool:
        """One from ``address``'s token bucket (``burst`` at once, then ``per_second``), shared by
        every replica; False when it is empty."""
        now = time.time()
        lock = " FOR UPDATE" if self.postgres else ""
        for _ in range(3):
            try:
                with self._lock, self.engine.begin() as conn:
                    row = conn.execute(
                        text(f"SELECT level, at FROM rates WHERE address = :a{lock}"), {"a": address}
                    ).first()
                    level = float(burst) if row is None else min(float(burst), row[0] + (now - row[1]) * per_second)
                    allowed = level >= 1.0
                    values = {"a": address, "l": level - 1.0 if allowed else level, "t": now}
                    if row is None:
                        conn.execute(text("INSERT INTO rates VALUES (:a, :l, :t)"), values)
                    else:
                        conn.execute(text("UPDATE rates SET level = :l, at = :t WHERE address = :a"), values)
                    return allowed
            except sa_exc.IntegrityError:  # another replica made the row first: read it again
                continue
        return False

    def key(self, name: str) -> bytes:
        """A secret every replica shares (made by the first to ask)."""
        for _ in range(3):
            rows = self._run("SELECT value FROM keys WHERE name = :n", n=name)
            if rows:
                return bytes.fromhex(rows[0][0])
            try:
                self._run("INSERT INTO keys VALUES (:n, :v)", n=name, v=secrets.token_hex(32))
            except sa_exc.IntegrityError:
                pass  # another replica made it first
        raise RuntimeError(f"the shared key {name} could not be made")

    def purge(self, unused_client_seconds: float = 86400.0) -> None:
        """Forget what expired a while ago (a used refresh token is kept until it expires: its reuse
        must still be recognized), and registered clients that never got a grant."""
        now = time.time()
        self._run(
            "DELETE FROM clients WHERE kind IN ('dcr', 'cimd') AND created < :t AND client_id NOT IN "
            "(SELECT client_id FROM grants)",
            t=now - unused_client_seconds,
        )
        self._run("DELETE FROM tokens WHERE expires < :t", t=now - 60)
        self._run("UPDATE codes SET sealed = '' WHERE expires < :t OR used = 1", t=now)
        self._run("DELETE FROM codes WHERE expires < :t", t=now - 3600)
        self._run("DELETE FROM grants WHERE revoked = 1 AND last_used < :t", t=now - 7 * 24 * 3600)
        self._run("DELETE FROM pending WHERE created < :t", t=now - 3600)
        self._run("DELETE FROM hub_states WHERE created < :t", t=now - 3600)
        self._run("DELETE FROM rates WHERE at < :t", t=now - 3600)
        self._run(
            "DELETE FROM sessions WHERE (ended = 1 AND updated < :t) OR created < :old",
            t=now - 3600,
            old=now - 7 * 24 * 3600,
        )

    def close(self) -> None:
        self.engine.dispose()


def _session_row(row: Any) -> SessionRow:
    return SessionRow(row[0], row[1], row[2], json.loads(row[3]), row[4], json.loads(row[5]), bool(row[6]), row[7])
