"""The schema of the service's first store (a sqlite file without alembic): created where absent,
found as it is in a file an earlier version made."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v1"
down_revision = None

V1 = {
    "clients": ("client_id", "kind", "metadata", "secret_hash", "created"),
    "grants": ("family", "user", "client_id", "client_name", "scope", "resource", "created", "last_used", "revoked"),
    "codes": ("hash", "client_id", "user", "scope", "redirect_uri", "resource", "challenge", "method", "sealed"),
    "tokens": ("hash", "family", "kind", "sealed", "expires", "used"),
}
FLOATS = {"created", "last_used", "expires"}
INTS = {"revoked", "used"}
NULLABLE = {"secret_hash", "family"}


def _column(name: str, primary: bool) -> sa.Column:
    kind = sa.Float if name in FLOATS else sa.Integer if name in INTS else sa.Text
    default = "0" if name in INTS else None
    return sa.Column(name, kind, primary_key=primary, nullable=name in NULLABLE, server_default=default)


def upgrade() -> None:
    present = set(sa.inspect(op.get_bind()).get_table_names())
    for table, names in V1.items():
        if table in present:
            continue
        extra = ("expires", "used", "family") if table == "codes" else ()
        op.create_table(table, *(_column(n, i == 0) for i, n in enumerate(names + extra)))
    if "tokens" not in present:
        op.create_index("tokens_family", "tokens", ["family"])
