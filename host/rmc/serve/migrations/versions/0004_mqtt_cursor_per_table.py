"""The MQTT publisher's cursor per table: with several services on one database (leases),
each publishes the tables it holds, from where the previous holder's publisher left them
(docs/mqtt.md, docs/service-db.md).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-11

Written out in full, not from the models: a revision stays what it was when the models change.
The cursors kept (one a publisher and source table) become one a table each, at the same id:
every table's rows up to it were published. The table is made again (its primary key
changes), the rows carried over through Python: there are a handful.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    conn = op.get_bind()
    old = conn.execute(sa.text("SELECT name, source_table, last_id FROM mqtt_cursor")).all()
    tables = conn.execute(sa.text("SELECT id FROM tables")).scalars().all()
    op.drop_table("mqtt_cursor")
    cursor = op.create_table(
        "mqtt_cursor",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("source_table", sa.Text(), nullable=False),
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", "source_table", "table_id", name="pk_mqtt_cursor"),
    )
    rows = [
        {"name": n, "source_table": src, "table_id": t, "last_id": last}
        for n, src, last in old
        for t in tables
    ]
    if rows:
        op.bulk_insert(cursor, rows)


def downgrade() -> None:
    conn = op.get_bind()
    # the lowest of a publisher's tables: what every table had published at least
    old = conn.execute(
        sa.text(
            "SELECT name, source_table, min(last_id) FROM mqtt_cursor GROUP BY name, source_table"
        )
    ).all()
    op.drop_table("mqtt_cursor")
    cursor = op.create_table(
        "mqtt_cursor",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("source_table", sa.Text(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", "source_table", name="pk_mqtt_cursor"),
    )
    rows = [{"name": n, "source_table": src, "last_id": last} for n, src, last in old]
    if rows:
        op.bulk_insert(cursor, rows)
