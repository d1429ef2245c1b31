"""The store's database: JupyterHub's ``db_url`` conventions (sqlite by default, one file, mode
0600; PostgreSQL for more than one replica), its tables, and their upgrade in place with alembic
(``migrations/``), a file of an earlier version included (it has the tables of ``v1`` and no
alembic version: ``v1`` finds them, ``v2`` adds what replicas share, ``v3`` handshake-era sessions)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData()
clients = sa.Table(
    "clients",
    metadata,
    sa.Column("client_id", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("secret_hash", sa.Text),
    sa.Column("created", sa.Float, nullable=False),
)
grants = sa.Table(
    "grants",
    metadata,
    sa.Column("family", sa.Text, primary_key=True),
    sa.Column("user", sa.Text, nullable=False),
    sa.Column("client_id", sa.Text, nullable=False),
    sa.Column("client_name", sa.Text, nullable=False),
    sa.Column("scope", sa.Text, nullable=False),
    sa.Column("resource", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("last_used", sa.Float, nullable=False),
    sa.Column("revoked", sa.Integer, nullable=False, server_default="0"),
    sa.Column("revoked_at", sa.Float),  # v2: replicas learn of revocations from it
)
codes = sa.Table(
    "codes",
    metadata,
    sa.Column("hash", sa.Text, primary_key=True),
    *(sa.Column(name, sa.Text, nullable=False) for name in ("client_id", "user", "scope", "redirect_uri")),
    *(sa.Column(name, sa.Text, nullable=False) for name in ("resource", "challenge", "method", "sealed")),
    sa.Column("expires", sa.Float, nullable=False),
    sa.Column("used", sa.Integer, nullable=False, server_default="0"),
    sa.Column("family", sa.Text),
)
tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("hash", sa.Text, primary_key=True),
    sa.Column("family", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("sealed", sa.Text, nullable=False),
    sa.Column("expires", sa.Float, nullable=False),
    sa.Column("used", sa.Integer, nullable=False, server_default="0"),
)
pending = sa.Table(  # v2: sign-ins awaiting consent, answered by any replica
    "pending",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("query", sa.Text, nullable=False),
    sa.Column("nonce", sa.Text, nullable=False),
    sa.Column("address", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)
hub_states = sa.Table(  # v2: JupyterHub sign-in states (HubOAuth keeps them in memory: one replica)
    "hub_states",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)
rates = sa.Table(  # v2: registrations per calling address, counted by every replica together
    "rates",
    metadata,
    sa.Column("address", sa.Text, primary_key=True),
    sa.Column("level", sa.Float, nullable=False),
    sa.Column("at", sa.Float, nullable=False),
)
keys = sa.Table(  # v2: secrets every replica shares (cookie signing, consent CSRF)
    "keys",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
sessions = sa.Table(  # v3: handshake-era MCP sessions, answered by any replica
    "sessions",
    metadata,
    sa.Column("hash", sa.Text, primary_key=True),  # the session id's SHA-256 (store.digest)
    sa.Column("family", sa.Text, nullable=False),  # the grant: a session is used with its grant's tokens only
    sa.Column("version", sa.Text, nullable=False),  # the negotiated revision
    sa.Column("client", sa.Text, nullable=False),  # JSON: clientInfo and capabilities
    sa.Column("log_level", sa.Text),
    sa.Column("subscriptions", sa.Text, nullable=False),  # JSON list of URIs
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("updated", sa.Float, nullable=False),  # replicas follow changes by it
    sa.Column("ended", sa.Integer, nullable=False, server_default="0"),  # DELETE by the client
)


def resolved_url(db_url: str, db_path: str) -> str:
    """``db_url`` as JupyterHub spells it (``sqlite:///file``, ``postgresql://…``), with the driver
    installed (psycopg 3 when psycopg2 is absent); default: the sqlite file ``db_path``."""
    url = db_url or ("sqlite://" if db_path == ":memory:" else f"sqlite:///{db_path}")
    scheme, _, rest = url.partition("://")
    if scheme in ("postgresql", "postgres") and importlib.util.find_spec("psycopg2") is None:
        return "postgresql+psycopg://" + rest
    return "postgresql://" + rest if scheme == "postgres" else url


def _private_file(url: sa.URL) -> None:
    """Create the sqlite file with mode 0600 (never world-readable, whatever the umask)."""
    if url.database and url.database != ":memory:" and not url.database.startswith("file:"):
        path = Path(url.database)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        path.chmod(0o600)


def engine(db_url: str, db_path: str = "") -> sa.Engine:
    """An engine for the store (sqlite: WAL, one shared in-memory database for ``:memory:``)."""
    url = sa.make_url(resolved_url(db_url, db_path))
    if url.get_backend_name() != "sqlite":
        return sa.create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=8)
    _private_file(url)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
    if not url.database or url.database == ":memory:":
        kwargs["poolclass"] = sa.StaticPool
    eng = sa.create_engine(url, **kwargs)

    @sa.event.listens_for(eng, "connect")
    def _pragmas(conn: Any, _record: Any) -> None:
        if url.database and url.database != ":memory:":  # a write-ahead log, synced at checkpoints
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")

    return eng


def upgrade(eng: sa.Engine) -> None:
    """Bring the database to the newest schema, in place (alembic, as JupyterHub does)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    with eng.begin() as conn:
        if eng.dialect.name == "postgresql":  # replicas starting together: one upgrades, the others wait
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(4242042)"))
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
