"""The first schema: tables, frames, answers, damage, events, results, sessions, commands,
audit (docs/service-db.md).

Revision ID: 0001
Revises:
Create Date: 2026-12-01

Written out in full, not from the models: a revision stays what it was when the models change.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 64-bit ids (SQLite autoincrements only an INTEGER PRIMARY KEY, 64-bit already)
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
BIG = sa.BigInteger  # microsecond times, the firmware clock, the wire's numbers (< 2^32)


def _id() -> sa.Column:
    return sa.Column("id", ID, autoincrement=True, nullable=False)


def _table_id(name: str) -> list:
    return [
        sa.Column("table_id", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["table_id"], ["tables.id"], name=f"fk_{name}_table_id_tables"),
        sa.PrimaryKeyConstraint("id", name=f"pk_{name}"),
    ]


def _index(table: str, *cols: str) -> None:
    op.create_index(f"ix_{table}_{'_'.join(cols)}", table, list(cols))


def _unique(table: str, *cols: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*cols, name=f"uq_{table}_{'_'.join(cols)}")


def upgrade() -> None:
    """Create the nine tables and their indexes. Long, and left so: a migration is a fixed
    record of the schema as it was first shipped, written out table by table as a reader
    of docs/service-db.md expects to find it; cut into helpers, it would read less plainly
    and could change with them, which a revision applied to databases in service must not."""
    op.create_table(
        "tables",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("added_us", BIG(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tables"),
    )
    op.create_table(
        "frames",
        _id(),
        *_table_id("frames"),
        sa.Column("boot", BIG(), nullable=False),
        sa.Column("seq", BIG(), nullable=False),
        sa.Column("ms", BIG(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.Column("rx_us", BIG(), nullable=False),
        sa.Column("resent", sa.Boolean(), nullable=False),
        sa.Column("spin", BIG(), nullable=True),
        _unique("frames", "table_id", "boot", "seq"),
    )
    _index("frames", "table_id", "type")
    _index("frames", "table_id", "rx_us")
    _index("frames", "table_id", "spin")
    op.create_table(
        "answers",
        _id(),
        *_table_id("answers"),
        sa.Column("boot", BIG(), nullable=False),
        sa.Column("cseq", BIG(), nullable=True),
        sa.Column("cmd", sa.Text(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.Column("rx_us", BIG(), nullable=False),
    )
    _index("answers", "table_id", "rx_us")
    op.create_table(
        "damage",
        _id(),
        *_table_id("damage"),
        sa.Column("rx_us", BIG(), nullable=False),
        sa.Column("line", sa.LargeBinary(), nullable=False),
        sa.Column("why", sa.Text(), nullable=False),
    )
    _index("damage", "table_id", "rx_us")
    op.create_table(
        "events",
        _id(),
        *_table_id("events"),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("n", BIG(), nullable=False),
        sa.Column("boot", BIG(), nullable=False),
        sa.Column("seq", BIG(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        _unique("events", "table_id", "kind", "n"),
    )
    _index("events", "table_id", "boot", "seq")
    op.create_table(
        "results",
        _id(),
        *_table_id("results"),
        sa.Column("boot", BIG(), nullable=False),
        sa.Column("seq", BIG(), nullable=False),
        sa.Column("spin", BIG(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("colour", sa.Text(), nullable=False),
        sa.Column("parity", sa.Text(), nullable=False),
        sa.Column("half", sa.Text(), nullable=False),
        sa.Column("rx_us", BIG(), nullable=False),
        sa.Column("valid", sa.Boolean(), nullable=False),
        sa.Column("session", BIG(), nullable=True),
        _unique("results", "table_id", "boot", "seq"),
    )
    _index("results", "table_id", "spin")
    op.create_table(
        "sessions",
        _id(),
        *_table_id("sessions"),
        sa.Column("session", BIG(), nullable=False),
        sa.Column("boot", BIG(), nullable=False),
        sa.Column("seq", BIG(), nullable=False),
        sa.Column("chef", sa.Text(), nullable=True),
        sa.Column("opened_us", BIG(), nullable=True),
        sa.Column("closed_us", BIG(), nullable=True),
        sa.Column("close_boot", BIG(), nullable=True),
        sa.Column("close_seq", BIG(), nullable=True),
        sa.Column("spins", BIG(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        _unique("sessions", "table_id", "boot", "seq"),
    )
    _index("sessions", "table_id", "session")
    op.create_table(
        "commands",
        _id(),
        *_table_id("commands"),
        sa.Column("boot", BIG(), nullable=False),
        sa.Column("cseq", BIG(), nullable=False),
        sa.Column("cmd", sa.Text(), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("by", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.Column("sent_us", BIG(), nullable=False),
        sa.Column("answered_us", BIG(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("answer_line", sa.Text(), nullable=True),
        _unique("commands", "table_id", "boot", "cseq"),
    )
    _index("commands", "table_id", "sent_us")
    op.create_table(
        "audit",
        _id(),
        sa.Column("at_us", BIG(), nullable=False),
        sa.Column("who", sa.Text(), nullable=True),
        sa.Column("role", sa.Text(), nullable=True),
        sa.Column("method", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit"),
    )
    _index("audit", "at_us")


def downgrade() -> None:
    for name in ("audit", "commands", "sessions", "results", "events", "damage", "answers",
                 "frames", "tables"):  # fmt: skip
        op.drop_table(name)  # its indexes go with it
