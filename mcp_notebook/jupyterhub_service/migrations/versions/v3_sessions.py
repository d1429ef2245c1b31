"""Handshake-era MCP sessions, shared by replicas: any replica answers a session another made, and
a GET stream reopened at another replica keeps the session's subscriptions."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v3"
down_revision = "v2"


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("hash", sa.Text, primary_key=True),
        sa.Column("family", sa.Text, nullable=False),
        sa.Column("version", sa.Text, nullable=False),
        sa.Column("client", sa.Text, nullable=False),
        sa.Column("log_level", sa.Text),
        sa.Column("subscriptions", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("updated", sa.Float, nullable=False),
        sa.Column("ended", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("sessions_family", "sessions", ["family"])
    op.create_index("sessions_updated", "sessions", ["updated"])
