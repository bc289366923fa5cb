"""The MQTT publisher's cursor: how far each source table's rows are acknowledged by the
broker (docs/mqtt.md, docs/service-db.md).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-10

Written out in full, not from the models: a revision stays what it was when the models change.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mqtt_cursor",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("source_table", sa.Text(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", "source_table", name="pk_mqtt_cursor"),
    )


def downgrade() -> None:
    op.drop_table("mqtt_cursor")
