"""Table leases: several services on one database, each table served by one at a time
(rmc.serve.lease, docs/service-db.md).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-11

Written out in full, not from the models: a revision stays what it was when the models change.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "table_lease",
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("expires_us", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["table_id"], ["tables.id"], name="fk_table_lease_table_id_tables"),
        sa.PrimaryKeyConstraint("table_id", name="pk_table_lease"),
    )


def downgrade() -> None:
    op.drop_table("table_lease")
