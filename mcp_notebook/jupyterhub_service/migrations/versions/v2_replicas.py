"""What replicas share: when a grant was revoked (the others drop it from memory within a second),
sign-ins pending consent, JupyterHub sign-in states, registration rates per address, and the keys every replica signs with."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v2"
down_revision = "v1"


def upgrade() -> None:
    with op.batch_alter_table("grants") as batch:
        batch.add_column(sa.Column("revoked_at", sa.Float))
    op.create_index("grants_revoked_at", "grants", ["revoked_at"])
    op.create_table(
        "pending",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("query", sa.Text, nullable=False),
        sa.Column("nonce", sa.Text, nullable=False),
        sa.Column("address", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_index("pending_address", "pending", ["address"])
    op.create_index("pending_created", "pending", ["created"])
    op.create_table(
        "hub_states",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_table(
        "rates",
        sa.Column("address", sa.Text, primary_key=True),
        sa.Column("level", sa.Float, nullable=False),
        sa.Column("at", sa.Float, nullable=False),
    )
    op.create_table("keys", sa.Column("name", sa.Text, primary_key=True), sa.Column("value", sa.Text, nullable=False))
