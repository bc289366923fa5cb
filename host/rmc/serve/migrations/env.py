"""Alembic's environment for the service's database.

`rmc.serve.store.Store.open` runs the migrations itself: it hands its connection over in
`config.attributes["connection"]` (no alembic.ini at run time). From the command line (to add
a revision, see README.md), the URL comes from the ini file's `sqlalchemy.url`.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from rmc.serve.store import Base

config = context.config
target_metadata = Base.metadata


def _run(connection) -> None:
    # batch mode: SQLite alters a table by copying it, which later revisions will need
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
    with engine.begin() as conn:
        _run(conn)


if context.is_offline_mode():
    run_offline()
else:
    run_online()
