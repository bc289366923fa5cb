"""The table service's database: every frame as received, what the checker derives, commands.

SQLAlchemy 2 on SQLite (default, embedded) or PostgreSQL (psycopg 3), the same code for both.
`Store.open(url)` connects and brings the schema to the newest Alembic revision
(`rmc/serve/migrations`); `write(batch)` stores one service batch in one transaction, each
row type in one executemany statement, insert-or-ignore on the natural keys, so that writing a
batch again (after a kill -9 and a restart) stores nothing twice. The query methods give plain
JSON-ready dicts, times as integer microseconds since the Unix epoch (UTC). The schema is
described in docs/service-db.md.

One writer thread calls `write`, HTTP threads call the queries: one Engine and its pool serve
both (SQLite in WAL mode, so readers never block the writer, nor it them).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import operator
import os
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Connection,
    Engine,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Text,
    UniqueConstraint,
    and_,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.pool import StaticPool

from rmc.link import ASK_BACK

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class StoreError(Exception):
    """The database failed: a one-line reason. `transient` is True when trying again later
    may succeed (server unreachable, connection lost, database locked), False when the same
    request will fail again (a row breaking a constraint, a bad URL)."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def now_us() -> int:
    return time.time_ns() // 1000


# --- rows handed over by the service -------------------------------------------------------


@dataclass
class FrameRow:
    table: str
    boot: int
    seq: int
    ms: int
    type: str
    line: str  # as received, without the newline, with its leading "~" when resent
    rx_us: int
    resent: bool


@dataclass
class AnswerRow:
    table: str
    boot: int
    cseq: int | None
    cmd: str
    ok: bool
    detail: str
    line: str
    rx_us: int


@dataclass
class DamageRow:
    table: str
    rx_us: int
    line: bytes
    why: str  # crc, malformed, auth, noise, conflict, foreign


@dataclass
class EventRow:
    table: str
    kind: str
    n: int  # ordinal within (table, kind): 0, 1, 2, ...
    boot: int
    seq: int
    data: dict


@dataclass
class ResultRow:
    table: str
    boot: int
    seq: int
    spin: int
    result: str
    colour: str
    parity: str
    half: str
    rx_us: int
    valid: bool
    session: int | None


@dataclass
class SessionOpen:
    table: str
    session: int
    boot: int
    seq: int
    chef: str
    opened_us: int


@dataclass
class SessionClose:
    table: str
    session: int
    boot: int
    seq: int
    spins: int | None
    reason: str | None
    closed_us: int


@dataclass
class CommandRow:
    table: str
    boot: int
    cseq: int
    cmd: str
    args: list
    by: str
    role: str
    line: str
    sent_us: int


@dataclass
class CommandAnswer:
    table: str
    boot: int
    cseq: int
    ok: bool
    detail: str
    answer_line: str
    answered_us: int


@dataclass
class Batch:
    """Everything one service batch writes, in one transaction."""

    frames: list[FrameRow] = field(default_factory=list)
    answers: list[AnswerRow] = field(default_factory=list)
    damage: list[DamageRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    results: list[ResultRow] = field(default_factory=list)
    opens: list[SessionOpen] = field(default_factory=list)
    # a close whose open is not stored becomes a session row of its own (boot/seq of the
    # close, chef and opened_us NULL), merged into the open's row if that comes later
    closes: list[SessionClose] = field(default_factory=list)
    commands: list[CommandRow] = field(default_factory=list)
    answered: list[CommandAnswer] = field(default_factory=list)

    def __len__(self) -> int:
        # called for every batch handed over and merged: spelled out, as dataclasses.fields()
        # costs microseconds a call
        return (
            len(self.frames) + len(self.answers) + len(self.damage) + len(self.events)
            + len(self.results) + len(self.opens) + len(self.closes) + len(self.commands)
            + len(self.answered)
        )  # fmt: skip


BATCH_LISTS = tuple(f.name for f in fields(Batch))  # its row lists, in writing order


@dataclass
class Resume:
    """What a restarted service needs to take up a table again."""

    high: dict[int, int]  # boot -> highest seq stored
    # boot -> seqs missing (sorted) from 1 to the boot's highest stored seq, the first boot
    # too: a service that joined a boot mid-stream asks for its start (rmc.link's
    # from_start) and may have been stopped before it came; only boots with something missing
    missing: dict[int, list[int]]
    first_boot: int | None
    events: dict[str, int]  # kind -> events stored (the next n)
    last_cseq: dict[int, int]  # boot -> highest command cseq stored
    frames: int  # frames stored
    # [boot, first, last]: frames the table's journal no longer held (LOST events), left
    # out of `missing`: asked for once, reported once
    lost: list[list[int]] = field(default_factory=list)


LOST = "lost"  # the event kind of frames found lost for good (rmc.link's LinkStats.lost)


# --- schema ---------------------------------------------------------------------------------

# Stable constraint names, so that later migrations can name what they alter.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Row ids: 64-bit on PostgreSQL; SQLite autoincrements only an INTEGER PRIMARY KEY (its rowid,
# 64-bit already).
Id = BigInteger().with_variant(Integer(), "sqlite")
# The wire's numbers (boot, seq, spin, session, ...) go up to 2^32 - 1: more than a 32-bit
# signed INTEGER holds on PostgreSQL, so they are BIGINT.
Num = BigInteger


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _table_fk() -> Any:
    return ForeignKey("tables.id")


class TableRec(Base):
    __tablename__ = "tables"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    url: Mapped[str | None] = mapped_column(Text)
    added_us: Mapped[int] = mapped_column(BigInteger)


class FrameRec(Base):
    __tablename__ = "frames"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(Text, _table_fk())
    boot: Mapped[int] = mapped_column(Num)
    seq: Mapped[int] = mapped_column(Num)
    ms: Mapped[int] = mapped_column(BigInteger)
    type: Mapped[str] = mapped_column(Text)
    line: Mapped[str] = mapped_column(Text)
    rx_us: Mapped[int] = mapped_column(BigInteger)
    resent: Mapped[bool] = mapped_column(Boolean)
    # the frame's `spin` field, read from the line when stored (`spin_of`): a spin's frames
    # are found by index, not by a text scan of every line
    spin: Mapped[int | None] = mapped_column(Num)
    __table_args__ = (
        UniqueConstraint("table_id", "boot", "seq"),
        Index(None, "table_id", "type"),
        Index(None, "table_id", "rx_us"),
        Index(None, "table_id", "spin"),
    )


class AnswerRec(Base):
    __tablename__ = "answers"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(Text, _table_fk())
    boot: Mapped[int] = mapped_column(Num)
    cseq: Mapped[int | None] = mapped_column(Num)
    cmd: Mapped[str] = mapped_column(Text)
    ok: Mapped[bool] = mapped_column(Boolean)
    detail: Mapped[str] = mapped_column(Text)
    line: Mapped[str] = mapped_column(Text)
    rx_us: Mapped[int] = mapped_column(BigInteger)
    __table_args__ = (Index(None, "table_id", "rx_us"),)


class DamageRec(Base):
    __tablename__ = "damage"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(Text, _table_fk())
    rx_us: Mapped[int] = mapped_column(BigInteger)
    line: Mapped[bytes] = mapped_column(LargeBinary)
    why: Mapped[str] = mapped_column(Text)
    __table_args__ = (Index(None, "table_id", "rx_us"),)


class EventRec(Base):
    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(Text, _table_fk())
    kind: Mapped[str] = mapped_column(Text)
    n: Mapped[int] = mapped_column(BigInteger)
    boot: Mapped[int] = mapped_column(Num)
    seq: Mapped[int] = mapped_column(Num)
    data: Mapped[dict] = mapped_column(JSON)
    __table_args__ = (
        UniqueConstraint("table_id", "kind", "n"),
        Index(None, "table_id", "boot", "seq"),
    )


class ResultRec(Base):
    __tablename__ = "results"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(Text, _table_fk())
    boot: Mapped[int] = mapped_column(Num)
    seq: Mapped[int] = mapped_column(Num)
    spin: Mapped[int] = mapped_column(Num)
    result: Mapped[str] = mapped_column(Text)
    colour: Mapped[str] = mapped_column(Text)
    parity: Mapped[str] = mapped_column(Text)
    half: Mapped[str] = mapped_column(Text)
    rx_us: Mapped[int] = mapped_column(BigInteger)
    valid: Mapped[bool] = mapped_column(Boolean)
    session: Mapped[int | None] = mapped_column(Num)
    __table_args__ = (
        UniqueConstraint("table_id", "boot", "seq"),
        Index(None, "table_id", "spin"),
    )


class SessionRec(Base):
    __tablename__ = "sessions"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(Text, _table_fk())
    session: Mapped[int] = mapped_column(Num)
    boot: Mapped[int] = mapped_column(Num)  # of the SOPEN (of the SCLOSE if no open stored)
    seq: Mapped[int] = mapped_column(Num)
    chef: Mapped[str | None] = mapped_column(Text)
    opened_us: Mapped[int | None] = mapped_column(BigInteger)
    closed_us: Mapped[int | None] = mapped_column(BigInteger)
    close_boot: Mapped[int | None] = mapped_column(Num)
    close_seq: Mapped[int | None] = mapped_column(Num)
    spins: Mapped[int | None] = mapped_column(Num)
    reason: Mapped[str | None] = mapped_column(Text)
    __table_args__ = (
        UniqueConstraint("table_id", "boot", "seq"),
        Index(None, "table_id", "session"),
    )


class CommandRec(Base):
    __tablename__ = "commands"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(Text, _table_fk())
    boot: Mapped[int] = mapped_column(Num)
    cseq: Mapped[int] = mapped_column(Num)
    cmd: Mapped[str] = mapped_column(Text)
    args: Mapped[list] = mapped_column(JSON)
    by: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    line: Mapped[str] = mapped_column(Text)
    sent_us: Mapped[int] = mapped_column(BigInteger)
    answered_us: Mapped[int | None] = mapped_column(BigInteger)
    ok: Mapped[bool | None] = mapped_column(Boolean)
    detail: Mapped[str | None] = mapped_column(Text)
    answer_line: Mapped[str | None] = mapped_column(Text)
    __table_args__ = (
        UniqueConstraint("table_id", "boot", "cseq"),
        Index(None, "table_id", "sent_us"),
    )


class AuditRec(Base):
    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    at_us: Mapped[int] = mapped_column(BigInteger)
    who: Mapped[str | None] = mapped_column(Text)
    role: Mapped[str | None] = mapped_column(Text)
    method: Mapped[str] = mapped_column(Text)
    path: Mapped[str] = mapped_column(Text)
    status: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)
    __table_args__ = (Index(None, "at_us"),)


class MqttCursorRec(Base):
    """How far a publisher (rmc.serve.mqtt) has had a table's rows of a source table
    acknowledged by its broker: that table's rows with `id` <= `last_id` are published. The
    outbox is the source tables themselves; this is its only state. Per table: a table is
    written by one service at a time (rmc.serve.lease), so its rows become visible in id
    order, which rows of several tables written by several services do not."""

    __tablename__ = "mqtt_cursor"
    name: Mapped[str] = mapped_column(Text, primary_key=True)  # the publisher: broker/prefix
    source_table: Mapped[str] = mapped_column(Text, primary_key=True)  # frames, events, ...
    table_id: Mapped[str] = mapped_column(Text, primary_key=True)  # the table whose rows
    last_id: Mapped[int] = mapped_column(BigInteger)


class TableLeaseRec(Base):
    """Which service serves a table (rmc.serve.lease): several services on one database, a
    table served by one at a time. `epoch` grows at each taking: the fencing token."""

    __tablename__ = "table_lease"
    table_id: Mapped[str] = mapped_column(Text, _table_fk(), primary_key=True)
    holder: Mapped[str] = mapped_column(Text)  # the service's lease name
    epoch: Mapped[int] = mapped_column(BigInteger)
    expires_us: Mapped[int] = mapped_column(BigInteger)  # the database's clock


# A frame's `spin` field: after a "," (the type or another field before it), its one spelling
# (no leading zero), ended by the next field, the tag or the CRC. No value can hold ",spin=":
# "," and "=" are escaped in values.
_SPIN = re.compile(r",spin=(0|[1-9][0-9]{0,9})[,#*]")


def spin_of(line: str) -> int | None:
    """The number in a frame line's `spin` field, or None. `spin=1` is not `spin=12`."""
    m = _SPIN.search(line)
    return int(m.group(1)) if m else None


# --- URLs -----------------------------------------------------------------------------------

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def display_url(url: str) -> str:
    """The URL as given, its password masked."""
    if not _SCHEME.match(url):
        return url
    try:
        u = make_url(url)
    except ArgumentError:
        return url.split("@")[-1] if "@" in url else url
    return u.render_as_string(hide_password=True) if u.password else url


def _engine_url(url: str) -> tuple[str, str]:
    """(SQLAlchemy URL, dialect) for what a user gives: a sqlite:// or postgresql:// URL, or
    a bare file path (SQLite). Raises StoreError."""
    if not url.strip():
        raise StoreError("empty database URL")
    if "://" in url and not _SCHEME.match(url):
        raise StoreError(f"bad database URL {display_url(url)}")
    if not _SCHEME.match(url):
        return "sqlite:///" + url, "sqlite"
    try:
        u = make_url(url)
    except ArgumentError as e:
        raise StoreError(f"bad database URL {display_url(url)}: {_first_line(e)}") from None
    backend, _, driver = u.drivername.partition("+")
    if backend == "sqlite" and driver in ("", "pysqlite"):
        return url, "sqlite"
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        return u.set(drivername="postgresql+psycopg").render_as_string(False), "postgresql"
    raise StoreError(
        f"unsupported database URL {display_url(url)}: "
        "use sqlite:///FILE, postgresql://USER@HOST:PORT/DB or a file path"
    )


def _first_line(e: BaseException) -> str:
    """A driver's own message, first line (SQLAlchemy adds the SQL and a link after it)."""
    inner = getattr(e, "orig", None)
    text = str(inner if inner is not None else e).strip()
    return (text.splitlines() or [type(e).__name__])[0].strip() or type(e).__name__


def _is_transient(e: BaseException) -> bool:
    if isinstance(e, (OperationalError, InterfaceError, DisconnectionError)):
        return True
    return isinstance(e, DBAPIError) and bool(e.connection_invalidated)


def _error(what: str, e: BaseException) -> StoreError:
    return StoreError(f"{what}: {_first_line(e)}", transient=_is_transient(e))


# --- the store ------------------------------------------------------------------------------


class Store:
    """The service's database. Open with `Store.open(url)`; thread-safe."""

    def __init__(self, engine: Engine, url: str, dialect: str) -> None:
        self.engine = engine
        self.url = display_url(url)
        self.dialect = dialect
        self._dialect_insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
        self._inserts: dict[Any, Any] = {}  # model -> its insert-or-ignore, built once
        self._dbapi = engine.dialect.loaded_dbapi  # its Error classes (the bulk path's)
        self._sqlite_vars: int | None = None  # SQLite's bound variables a statement takes
        self._known: set[str] = set()  # tables whose `tables` row this store has committed

    def _insert(self, model: Any) -> Any:
        """INSERT ... ON CONFLICT DO NOTHING for a model, built once (building a statement
        costs more than running it on a small batch)."""
        stmt = self._inserts.get(model)
        if stmt is None:
            stmt = self._inserts[model] = self._dialect_insert(model).on_conflict_do_nothing()
        return stmt

    # --- opening ---

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect and migrate to the newest revision. StoreError (one line) when it cannot."""
        sa_url, dialect = _engine_url(url)
        shown = display_url(url)
        if dialect == "sqlite":
            engine = _sqlite_engine(sa_url, shown)
        else:
            u = make_url(sa_url)
            args = {} if "connect_timeout" in u.query else {"connect_timeout": 10}
            # pre-ping: a connection left from before a server restart is replaced, not used
            engine = create_engine(u, connect_args=args, pool_pre_ping=True)
        store = cls(engine, url, dialect)
        try:
            store._migrate()
        except StoreError:
            engine.dispose()
            raise
        return store

    def _migrate(self) -> None:
        from alembic import command
        from alembic.config import Config
        from alembic.util import CommandError

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        try:
            with self._write() as conn:
                if self.dialect == "postgresql":
                    # two services opening one fresh database: one migrates, the other waits
                    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(8019021)")
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except SQLAlchemyError as e:
            raise _error(f"cannot open database {self.url}", e) from None
        except CommandError as e:  # e.g. a database migrated by a newer rmc
            raise StoreError(f"cannot migrate database {self.url}: {_first_line(e)}") from None

    def close(self) -> None:
        if self.dialect == "sqlite":
            # SQLite's advice: gather the planner's statistics where they are stale
            with contextlib.suppress(SQLAlchemyError), self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA optimize")
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction; on SQLite it takes the write lock at once (BEGIN IMMEDIATE),
        waiting up to busy_timeout for another writer, instead of failing half-way."""
        with self.engine.connect() as conn:
            if self.dialect == "sqlite":
                conn.execution_options(sqlite_begin="IMMEDIATE")
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as e:
            raise _error("cannot read database", e) from None

    # --- writing ---

    def ensure_table(self, table: str, url: str | None = None) -> None:
        """The table's row, added if absent; its URL updated when one is given."""
        try:
            with self._write() as conn:
                conn.execute(
                    self._insert(TableRec), [{"id": table, "url": url, "added_us": now_us()}]
                )
                if url is not None:
                    conn.execute(update(TableRec).where(TableRec.id == table).values(url=url))
            self._known.add(table)
        except SQLAlchemyError as e:
            raise _error(f"cannot add table {table}", e) from None

    def write(self, batch: Batch, fence: Any = None) -> None:
        """Store one batch in one transaction: everything or (StoreError) nothing. `fence`
        (rmc.serve.lease): called first in the transaction, it gives the batch to write."""
        if not len(batch):
            return
        try:
            with self._write() as conn:
                if fence is not None:
                    batch = fence(conn, batch)
                names = self._write_batch(conn, batch)
            self._known.update(names)  # committed: their rows are there
        except SQLAlchemyError as e:
            raise _error("cannot write batch", e) from None
        except self._dbapi.Error as e:  # the bulk path's own driver calls (PostgreSQL's COPY)
            transient = isinstance(e, (self._dbapi.OperationalError, self._dbapi.InterfaceError))
            raise StoreError(f"cannot write batch: {_first_line(e)}", transient) from None
        except (TypeError, ValueError, AttributeError) as e:  # a row of the wrong shape
            raise StoreError(f"cannot write batch: {_first_line(e)}") from None

    def _write_batch(self, conn: Connection, b: Batch) -> set[str]:
        """The batch's rows, in this transaction; returns the tables it names."""
        ins = self._insert
        # a table named in a batch gets its row (the foreign keys need it), unless this
        # store has seen it stored already
        names: set[str] = set()
        for name in BATCH_LISTS:
            names.update({r.table for r in getattr(b, name)})
        if names - self._known:
            t = now_us()
            rows = [{"id": n, "url": None, "added_us": t} for n in sorted(names - self._known)]
            conn.execute(ins(TableRec), rows)
        # One statement (or a few) per row type. The rows of every frame (frames, events,
        # results: about 1.1 a frame) go first, through the driver in bulk (`_bulk_insert`);
        # the rare ones through SQLAlchemy's statements after them, in an order where a
        # session's close follows its open and a command's answer its command.
        bulk = []
        if b.frames:
            bulk.append(("frames", _FRAME_COLS, _frame_tuples(b.frames)))
        if b.events:
            bulk.append(("events", _EVENT_INSERT, _event_tuples(b.events)))
        if b.results:
            bulk.append(("results", _RESULT_INSERT, list(map(_result_tuple, b.results))))
        if bulk:
            self._bulk_insert(conn, bulk)
        if b.answers:
            conn.execute(ins(AnswerRec), _dicts(b.answers))
        if b.damage:
            conn.execute(ins(DamageRec), _dicts(b.damage))
        if b.opens:
            self._write_opens(conn, b.opens)
        if b.closes:
            self._write_closes(conn, b.closes)
        if b.commands:
            rows = _dicts(b.commands)
            for row in rows:  # (key, value) tuples or lists: stored as JSON lists
                row["args"] = [list(p) for p in row["args"]]
            conn.execute(ins(CommandRec), rows)
        if b.answered:
            # the first answer stands: an answer seen again (a resend, a batch written twice)
            # changes nothing
            C = CommandRec
            stmt = (
                update(C)
                .where(
                    C.table_id == bindparam("p_table_id"),
                    C.boot == bindparam("p_boot"),
                    C.cseq == bindparam("p_cseq"),
                    C.answered_us.is_(None),
                )
                .values(
                    answered_us=bindparam("p_answered_us"),
                    ok=bindparam("p_ok"),
                    detail=bindparam("p_detail"),
                    answer_line=bindparam("p_answer_line"),
                )
            )
            # (bound names differ from the columns': SQLAlchemy reserves those in an UPDATE)
            conn.execute(stmt, [{f"p_{k}": v for k, v in d.items()} for d in _dicts(b.answered)])
        return names

    def _bulk_insert(self, conn: Connection, parts: list[tuple[str, tuple, list]]) -> None:
        """Insert-or-ignore rows through the driver, in few statements: parts are (table,
        columns, rows as tuples in the columns' order). On SQLite multi-row INSERTs; on
        PostgreSQL a COPY into a staging table each, then one INSERT ... SELECT each, sent
        together. SQLAlchemy's per-row parameter handling cost more than the database's own
        work; and each statement lets go of the GIL, which a writer thread then waits for
        while the tables' thread runs (one statement a row starved it)."""
        if self.dialect == "sqlite":
            for table, cols, rows in parts:
                self._sqlite_insert(conn, table, cols, rows)
        else:
            _pg_copy_insert(conn, parts)

    def _sqlite_insert(
        self, conn: Connection, table: str, cols: tuple[str, ...], rows: list[tuple]
    ) -> None:
        """Chunks of SQLITE_CHUNK rows, the rest in power-of-two chunks: a handful of
        statement texts, each prepared once and kept in the driver's statement cache."""
        if self._sqlite_vars is None:
            raw = conn.connection.driver_connection
            self._sqlite_vars = raw.getlimit(self._dbapi.SQLITE_LIMIT_VARIABLE_NUMBER)
        most = min(SQLITE_CHUNK, 1 << ((self._sqlite_vars // len(cols)).bit_length() - 1))
        i, n = 0, len(rows)
        while i < n:
            left = n - i
            size = most if left >= most else 1 << (left.bit_length() - 1)
            params = tuple(itertools.chain.from_iterable(rows[i : i + size]))
            conn.exec_driver_sql(_values_sql(table, cols, size), params)
            i += size

    def _write_opens(self, conn: Connection, opens: list[SessionOpen]) -> None:
        if self.dialect == "sqlite":  # (its executemany lets go of the GIL at each row)
            self._sqlite_insert(conn, "sessions", _OPEN_INSERT, list(map(_open_tuple, opens)))
        else:
            conn.execute(self._insert(SessionRec), _dicts(opens))
        # A close stored before its open (an open resent after a gap) is a row of its own,
        # an orphan: merged into its open's row. Rare: one query for the whole batch finds
        # them (a query an open cost milliseconds a batch, each statement built anew).
        tables = sorted({o.table for o in opens})
        orphans = conn.execute(_ORPHANS, {"tables": tables}).all()
        for o in opens:
            orphan = next(
                (
                    x
                    for x in orphans
                    if x.table_id == o.table
                    and x.session == o.session
                    and (x.boot, x.seq) > (o.boot, o.seq)
                ),
                None,
            )  # the first after the open, in (boot, seq) order
            if orphan is None:
                continue
            orphans.remove(orphan)
            closing = {
                "c_closed_us": orphan.closed_us,
                "c_close_boot": orphan.close_boot,
                "c_close_seq": orphan.close_seq,
                "c_spins": orphan.spins,
                "c_reason": orphan.reason,
            }
            conn.execute(_MERGE, {"t": o.table, "b": o.boot, "q": o.seq} | closing)
            conn.execute(_DROP, {"row": orphan.id})

    def _write_closes(self, conn: Connection, closes: list[SessionClose]) -> None:
        """Each close updates its open's row: the newest row of that session opened before
        it, still open or closed by this same close (a close written twice changes nothing);
        a close without one becomes a row of its own. The rows of the batch's sessions are
        read in one query and matched here, close after close (a query and an update a
        close cost a GIL hand-over each, dozens a batch at 200 tables)."""
        found = conn.execute(
            _SESSION_ROWS,
            {"tables": sorted({c.table for c in closes}),
             "sessions": sorted({c.session for c in closes})},
        )  # fmt: skip
        rows: dict[tuple[str, int], list[dict]] = {}
        for r in found:
            rows.setdefault((r.table_id, r.session), []).append(dict(r._mapping))
        updates, alone = [], []
        for c in closes:
            at = (c.boot, c.seq)
            closing = {"closed_us": c.closed_us, "close_boot": c.boot, "close_seq": c.seq,
                       "spins": c.spins, "reason": c.reason}  # fmt: skip
            mine = rows.setdefault((c.table, c.session), [])
            open_ = [
                r
                for r in mine
                if (r["boot"], r["seq"]) < at
                and (r["closed_us"] is None or (r["close_boot"], r["close_seq"]) == at)
            ]
            if open_:
                row = max(open_, key=lambda r: (r["boot"], r["seq"]))
                row.update(closing)  # as the update leaves it, for the closes after it
                updates.append({"row": row["id"]} | {f"c_{k}": v for k, v in closing.items()})
            else:
                orphan = {"table_id": c.table, "session": c.session, "boot": c.boot,
                          "seq": c.seq} | closing  # fmt: skip
                alone.append(orphan)
                mine.append(orphan)
        if updates:
            conn.execute(_CLOSE_SET, updates)
        if alone:
            conn.execute(self._insert(SessionRec), alone)

    def audit(self, row: dict) -> None:
        """One API request, refused or accepted: at_us, who, role, method, path, status,
        reason (at_us defaults to now)."""
        rec = {
            "at_us": row.get("at_us") or now_us(),
            "who": row.get("who"),
            "role": row.get("role"),
            "method": row.get("method"),
            "path": row.get("path"),
            "status": row.get("status"),
            "reason": row.get("reason") or "",
        }
        try:
            with self._write() as conn:
                conn.execute(AuditRec.__table__.insert(), [rec])
        except SQLAlchemyError as e:
            raise _error("cannot write audit", e) from None

    # --- taking a table up again ---

    def resume(self, table: str) -> Resume:
        F = FrameRec
        with self._read() as conn:
            boots = conn.execute(
                select(F.boot, func.min(F.seq), func.max(F.seq), func.count())
                .where(F.table_id == table, F.seq > 0)
                .group_by(F.boot)
                .order_by(F.boot)
            ).all()
            high: dict[int, int] = {}
            missing: dict[int, list[int]] = {}
            first_boot = boots[0][0] if boots else None
            total = 0
            for boot, low, top, count in boots:
                high[boot] = top
                total += count
                if count == top:
                    continue  # 1 to top, nothing missing: no need to look for the gaps
                gaps = list(range(max(1, low - ASK_BACK), low))  # (older: in no journal)
                if count != top - low + 1:
                    gaps += self._gaps(conn, table, boot)
                missing[boot] = gaps
            events = dict(
                conn.execute(
                    select(EventRec.kind, func.max(EventRec.n) + 1)
                    .where(EventRec.table_id == table)
                    .group_by(EventRec.kind)
                ).all()
            )
            last_cseq = dict(
                conn.execute(
                    select(CommandRec.boot, func.max(CommandRec.cseq))
                    .where(CommandRec.table_id == table)
                    .group_by(CommandRec.boot)
                ).all()
            )
            found = conn.execute(
                select(EventRec.data)
                .where(EventRec.table_id == table, EventRec.kind == LOST)
                .order_by(EventRec.n)
            ).scalars()
            lost = [r for r in map(_lost_range, found) if r is not None]
        for boot, first, last in lost:
            if boot in missing:
                left = [s for s in missing[boot] if not first <= s <= last]
                if left:
                    missing[boot] = left
                else:
                    del missing[boot]
        return Resume(high, missing, first_boot, events, last_cseq, total, lost)

    def _gaps(self, conn: Connection, table: str, boot: int) -> list[int]:
        """The seqs missing between a boot's lowest and highest stored ones."""
        F = FrameRec
        inner = (
            select(F.seq, func.lag(F.seq).over(order_by=F.seq).label("prev"))
            .where(F.table_id == table, F.boot == boot, F.seq > 0)
            .subquery()
        )
        out: list[int] = []
        for seq, prev in conn.execute(
            select(inner.c.seq, inner.c.prev)
            .where(inner.c.seq - inner.c.prev > 1)
            .order_by(inner.c.seq)
        ):
            out.extend(range(prev + 1, seq))
        return out

    def frames(
        self,
        table: str,
        since_us: int | None = None,
        until_us: int | None = None,
        batch: int = 5000,
    ) -> Iterator[FrameRow]:
        """The table's frames in (boot, seq) order, received in since_us <= rx_us < until_us,
        streamed `batch` rows at a time (a server-side cursor on PostgreSQL)."""
        F = FrameRec
        stmt = select(F.table_id, F.boot, F.seq, F.ms, F.type, F.line, F.rx_us, F.resent).where(
            F.table_id == table
        )
        if since_us is not None:
            stmt = stmt.where(F.rx_us >= since_us)
        if until_us is not None:
            stmt = stmt.where(F.rx_us < until_us)
        stmt = stmt.order_by(F.boot, F.seq).execution_options(yield_per=batch)
        with self._read() as conn:
            try:
                for row in conn.execute(stmt):
                    yield FrameRow(*row)
            except SQLAlchemyError as e:
                raise _error("cannot read frames", e) from None

    def frame_count(self, table: str) -> int:
        with self._read() as conn:
            return conn.execute(
                select(func.count()).select_from(FrameRec).where(FrameRec.table_id == table)
            ).scalar_one()

    # --- queries (JSON-ready dicts, newest first where "last") ---

    def tables(self) -> list[dict]:
        F, R, T = FrameRec, ResultRec, TableRec
        frames = select(func.count()).where(F.table_id == T.id).scalar_subquery()
        last_rx = select(func.max(F.rx_us)).where(F.table_id == T.id).scalar_subquery()
        results = select(func.count()).where(R.table_id == T.id).scalar_subquery()
        with self._read() as conn:
            rows = conn.execute(
                select(
                    T.id,
                    T.url,
                    T.added_us,
                    frames.label("frames"),
                    last_rx.label("last_rx_us"),
                    results.label("results"),
                ).order_by(T.id)
            )
            return [dict(r._mapping) for r in rows]

    def results(self, table: str, last: int = 10, valid_only: bool = False) -> list[dict]:
        """The last results, newest first (in the table's (boot, seq) order)."""
        R = ResultRec
        stmt = select(*_RESULT_COLS).where(R.table_id == table)
        if valid_only:
            stmt = stmt.where(R.valid.is_(True))
        stmt = stmt.order_by(R.boot.desc(), R.seq.desc()).limit(last)
        with self._read() as conn:
            return [dict(r._mapping) for r in conn.execute(stmt)]

    def spin(self, table: str, spin: int) -> dict | None:
        """A spin's full record: its frames in (boot, seq) order (every frame whose `spin`
        field is the spin), its result (the valid one, else the last; every one in
        `results`), and the events its frames produced. None when nothing has that spin."""
        F, R, E = FrameRec, ResultRec, EventRec
        with self._read() as conn:
            # no ORDER BY: SQLite would then walk the (boot, seq) key instead of the spin
            # index; a spin's few frames are sorted here
            frames = sorted(
                (
                    dict(r._mapping)
                    for r in conn.execute(
                        select(F.boot, F.seq, F.type, F.line, F.rx_us).where(
                            F.table_id == table, F.spin == spin
                        )
                    )
                ),
                key=lambda f: (f["boot"], f["seq"]),
            )
            results = [
                dict(r._mapping)
                for r in conn.execute(
                    select(*_RESULT_COLS)
                    .where(R.table_id == table, R.spin == spin)
                    .order_by(R.boot, R.seq)
                )
            ]
            # the events its frames produced: by (boot, seq) ranges, then exactly
            keys = {(f["boot"], f["seq"]) for f in frames}
            spans: dict[int, list[int]] = {}
            for b, q in keys:
                lo_hi = spans.setdefault(b, [q, q])
                lo_hi[0], lo_hi[1] = min(lo_hi[0], q), max(lo_hi[1], q)
            events = []
            if keys:
                near = or_(
                    *(and_(E.boot == b, E.seq.between(lo, hi)) for b, (lo, hi) in spans.items())
                )
                events = [
                    dict(r._mapping)
                    for r in conn.execute(
                        select(*_EVENT_COLS)
                        .where(E.table_id == table, near)
                        .order_by(E.boot, E.seq, E.id)
                    )
                    if (r.boot, r.seq) in keys
                ]
        if not frames and not results:
            return None
        valid = [r for r in results if r["valid"]]
        result = (valid or results or [None])[-1]
        return {
            "spin": spin,
            "frames": frames,
            "result": result,
            "results": results,
            "events": events,
        }

    def sessions(self, table: str, last: int = 50) -> list[dict]:
        S = SessionRec
        cols = (S.session, S.boot, S.seq, S.chef, S.opened_us, S.closed_us, S.close_boot,
                S.close_seq, S.spins, S.reason)  # fmt: skip
        with self._read() as conn:
            rows = conn.execute(
                select(*cols)
                .where(S.table_id == table)
                .order_by(S.boot.desc(), S.seq.desc())
                .limit(last)
            )
            return [dict(r._mapping) for r in rows]

    def events(self, table: str, kinds: Iterable[str] | None = None, last: int = 100) -> list[dict]:
        """The last events (of these kinds), newest first in (boot, seq) order."""
        E = EventRec
        stmt = select(*_EVENT_COLS).where(E.table_id == table)
        if kinds is not None:
            stmt = stmt.where(E.kind.in_(list(kinds)))
        stmt = stmt.order_by(E.boot.desc(), E.seq.desc(), E.id.desc()).limit(last)
        with self._read() as conn:
            return [dict(r._mapping) for r in conn.execute(stmt)]

    def commands(self, table: str, last: int = 100) -> list[dict]:
        C = CommandRec
        cols = (C.boot, C.cseq, C.cmd, C.args, C.by, C.role, C.line, C.sent_us, C.answered_us,
                C.ok, C.detail, C.answer_line)  # fmt: skip
        with self._read() as conn:
            rows = conn.execute(
                select(*cols)
                .where(C.table_id == table)
                .order_by(C.sent_us.desc(), C.id.desc())
                .limit(last)
            )
            return [dict(r._mapping) for r in rows]

    def damage(self, table: str, last: int = 100) -> list[dict]:
        """The last damaged lines, newest first; `line` as text (`show_bytes`), JSON-ready."""
        D = DamageRec
        with self._read() as conn:
            rows = conn.execute(
                select(D.id, D.rx_us, D.line, D.why)
                .where(D.table_id == table)
                .order_by(D.rx_us.desc(), D.id.desc())
                .limit(last)
            )
            return [
                {"id": i, "rx_us": rx, "line": show_bytes(bytes(line)), "why": why}
                for i, rx, line, why in rows
            ]

    def audit_log(self, last: int = 100) -> list[dict]:
        A = AuditRec
        with self._read() as conn:
            rows = conn.execute(
                select(A.at_us, A.who, A.role, A.method, A.path, A.status, A.reason)
                .order_by(A.at_us.desc(), A.id.desc())
                .limit(last)
            )
            return [dict(r._mapping) for r in rows]


def _session_statements() -> tuple[Any, ...]:
    """The sessions' statements, built once (SQLAlchemy then compiles each once): closes
    with their opens, orphans merged (`Store._write_opens`, `Store._write_closes`)."""
    S = SessionRec
    b, q = bindparam("b"), bindparam("q")
    closing = {
        "closed_us": bindparam("c_closed_us"),
        "close_boot": bindparam("c_close_boot"),
        "close_seq": bindparam("c_close_seq"),
        "spins": bindparam("c_spins"),
        "reason": bindparam("c_reason"),
    }  # (bound names differ from the columns': SQLAlchemy reserves those in an UPDATE)
    orphans = (
        select(S.id, S.table_id, S.session, S.boot, S.seq, S.closed_us, S.close_boot,
               S.close_seq, S.spins, S.reason)
        .where(S.table_id.in_(bindparam("tables", expanding=True)), S.opened_us.is_(None))
        .order_by(S.boot, S.seq)
    )  # fmt: skip
    merge = update(S).where(S.table_id == bindparam("t"), S.boot == b, S.seq == q).values(**closing)
    drop = delete(S).where(S.id == bindparam("row"))
    rows = select(
        S.id, S.table_id, S.session, S.boot, S.seq, S.closed_us, S.close_boot, S.close_seq
    ).where(
        S.table_id.in_(bindparam("tables", expanding=True)),
        S.session.in_(bindparam("sessions", expanding=True)),
    )
    close = update(S).where(S.id == bindparam("row")).values(**closing)
    return orphans, merge, drop, rows, close


_ORPHANS, _MERGE, _DROP, _SESSION_ROWS, _CLOSE_SET = _session_statements()

_RESULT_COLS = (
    ResultRec.spin,
    ResultRec.result,
    ResultRec.colour,
    ResultRec.parity,
    ResultRec.half,
    ResultRec.rx_us.label("at_us"),
    ResultRec.boot,
    ResultRec.seq,
    ResultRec.valid,
    ResultRec.session,
)


_EVENT_COLS = (EventRec.id, EventRec.kind, EventRec.n, EventRec.boot, EventRec.seq, EventRec.data)


# --- the bulk path: rows as tuples, in the columns' order ---------------------------------

# rows per multi-row INSERT on SQLite (at most: its limit of bound variables): few statements,
# as each lets go of the GIL and the writer then waits for it while the tables' thread runs
SQLITE_CHUNK = 1024
_FRAME_COLS = ("table_id", "boot", "seq", "ms", "type", "line", "rx_us", "resent", "spin")
_EVENT_INSERT = ("table_id", "kind", "n", "boot", "seq", "data")
_RESULT_INSERT = ("table_id", "boot", "seq", "spin", "result", "colour", "parity", "half",
                  "rx_us", "valid", "session")  # fmt: skip
_result_tuple = operator.attrgetter("table", *_RESULT_INSERT[1:])
_OPEN_INSERT = ("table_id", "session", "boot", "seq", "chef", "opened_us")
_open_tuple = operator.attrgetter("table", *_OPEN_INSERT[1:])


def _lost_range(data: Any) -> list[int] | None:
    """A LOST event's [boot, first, last]; None for data not so (the row is not ours)."""
    r = [data.get(k) for k in ("boot", "first", "last")] if isinstance(data, dict) else []
    return r if len(r) == 3 and all(type(x) is int for x in r) else None


def _frame_tuples(frames: list[FrameRow]) -> list[tuple]:
    """Frame rows with their `spin` column (`spin_of`, inlined: a call a frame counts)."""
    search = _SPIN.search
    out = []
    for f in frames:
        line = f.line
        m = search(line) if isinstance(line, str) else None
        spin = int(m.group(1)) if m is not None else None
        out.append((f.table, f.boot, f.seq, f.ms, f.type, line, f.rx_us, f.resent, spin))
    return out


def _event_tuples(events: list[EventRow]) -> list[tuple]:
    # JSON as SQLAlchemy's JSON type writes it (json.dumps), read back by it
    dumps = json.dumps
    return [(e.table, e.kind, e.n, e.boot, e.seq, dumps(e.data)) for e in events]


@functools.cache
def _values_sql(table: str, cols: tuple[str, ...], rows: int) -> str:
    one = "(" + ",".join("?" * len(cols)) + ")"
    values = ",".join([one] * rows)
    return f"INSERT INTO {table} ({', '.join(cols)}) VALUES {values} ON CONFLICT DO NOTHING"


@functools.cache
def _staging_sql(table: str, cols: tuple[str, ...]) -> tuple[str, str, str]:
    """PostgreSQL: the staging table (made once per connection, emptied at each commit),
    the COPY into it, and the INSERT ... SELECT from it."""
    names = ", ".join(cols)
    make = (
        f"CREATE TEMP TABLE IF NOT EXISTS {table}_in ON COMMIT DELETE ROWS AS "
        f"SELECT {names} FROM {table} WITH NO DATA"
    )
    copy = f"COPY {table}_in ({names}) FROM STDIN"
    insert = f"INSERT INTO {table} ({names}) SELECT {names} FROM {table}_in ON CONFLICT DO NOTHING"
    return make, copy, insert


def _pg_copy_insert(conn: Connection, parts: list[tuple[str, tuple, list]]) -> None:
    """COPY (~2-4 µs a row here, against ~17-26 through executemany), then INSERT ... SELECT
    ... ON CONFLICT DO NOTHING: insert-or-ignore, as the statements' path. The staging
    tables are made, and the inserts sent, in one round trip each. In the transaction of
    `conn` (its driver connection)."""
    sql = [_staging_sql(table, cols) for table, cols, _ in parts]
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur:
        # (no NOTICE that a staging table exists already)
        cur.execute("; ".join(["SET LOCAL client_min_messages = warning", *(m for m, _, _ in sql)]))
        for (_, copy, _), (_, _, rows) in zip(sql, parts, strict=True):
            with cur.copy(copy) as cp:
                write = cp.write_row
                for r in rows:
                    write(r)
        cur.execute("; ".join(insert for _, _, insert in sql))


def _dicts(rows: list) -> list[dict]:
    """Dataclass rows as column dicts (`table` is the column `table_id`)."""
    names = [f.name for f in fields(rows[0])]
    cols = ["table_id" if n == "table" else n for n in names]
    return [dict(zip(cols, [getattr(r, n) for n in names], strict=True)) for r in rows]


def show_bytes(raw: bytes) -> str:
    """Bytes as printable text, unambiguous: printable ASCII as is, every other byte (and
    the backslash) as \\xNN."""
    return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in raw)


def _sqlite_engine(sa_url: str, shown: str) -> Engine:
    u = make_url(sa_url)
    db = u.database or ""
    memory = db in ("", ":memory:") or db.startswith("file::memory:")
    if not memory and not db.startswith("file:"):
        folder = Path(db).expanduser().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"cannot open database {shown}: cannot create folder {folder}: {e.strerror or e}"
            ) from None
        if not os.access(folder, os.W_OK):
            raise StoreError(f"cannot open database {shown}: folder {folder} is not writable")
    args: dict[str, Any] = {"check_same_thread": False, "timeout": 30}
    if memory:  # tests only: one connection, shared, or each would see its own database
        engine = create_engine(u, connect_args=args, poolclass=StaticPool)
    else:
        engine = create_engine(u, connect_args=args)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        # pysqlite's own transaction handling leaves DDL outside transactions: switch it off
        # and let SQLAlchemy say BEGIN (below)
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")  # readers and the writer do not block each other
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        # FULL: a committed batch survives a power cut too, not only a killed process
        cur.execute("PRAGMA synchronous=FULL")
        # A batch of many tables writes the index pages of each (~2,500 pages a batch at
        # 200 tables): a 64 MiB page cache keeps them (the default 2 MiB read them again
        # from the OS at each batch), and a checkpoint every 16,384 pages of log (64 MiB,
        # not 4) copies a page rewritten by many batches into the database once.
        cur.execute("PRAGMA cache_size=-65536")
        cur.execute("PRAGMA wal_autocheckpoint=16384")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "")
        conn.exec_driver_sql(f"BEGIN {mode}".rstrip())

    return engine
