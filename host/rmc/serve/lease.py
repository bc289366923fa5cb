"""Several `rmc serve` on one database, each table served by one of them at a time: leases.

A service given a lease name (`lease = "pit-a"` in its configuration, or `--lease pit-a`)
serves a table only while it holds the table's row in `table_lease` (table, holder, epoch,
expires_us; docs/service-db.md). Times are the DATABASE's clock (`clock_timestamp()` on
PostgreSQL), so that services on machines whose clocks differ agree on what has expired.

- Taking: one statement in one transaction, `INSERT ... ON CONFLICT DO NOTHING` (a table never
  leased) or `UPDATE ... SET holder = me, epoch = epoch + 1 WHERE table_id = T AND
  expires_us < now RETURNING epoch`. PostgreSQL locks the row: of two services taking it at
  once, the second waits, sees the new expiry, and updates nothing. `epoch` is the fencing
  token: it grows at every taking.
- Renewing: every RENEW_S (1 s), one UPDATE of the holder's rows, `expires_us = now +
  LEASE_S`. A row that comes back with another epoch, or not at all, is lost: the table is
  dropped at once (its port closed, its runner gone).
- Taken over: a lease not renewed for LEASE_S (3 s) may be taken by any service that has the
  table in its configuration (its URL and key). The service that takes it starts it as a
  restart does (rmc.serve.service: the stored frames fed again to the rules, every gap and
  the frames sent meanwhile asked again from the table's journal): within LEASE_S + RENEW_S
  of the holder's death, no frame lost.
- A restarted service takes back at once the leases still under its name (its previous
  life's, killed): it does not wait for them to expire. Two processes given one name steal
  from each other: names must differ.
- Standby tables (`standby = true` in a table's entry): taken only once their lease has
  expired (their own service died), or, never leased, STANDBY_S after this service started
  (its own service had the time to start). The others are taken as soon as they are free.
- Stopped cleanly, a service writes what it read, then releases its leases (expired now): a
  standby service takes them at its next turn.

Fencing. A service that lost a table may still hold rows of it in its writer's queue (it was
stalled past its lease, or the database was away). Each batch's transaction first reads the
lease rows of the batch's tables, `FOR SHARE` on PostgreSQL (on SQLite the transaction holds
the database's write lock already), and leaves out the rows of any table not held under this
holder's name AND epoch. The share lock makes a taking wait until that batch is committed:
when a service takes a table, every row of the previous holder is stored or will never be,
so the rows it reads at start (`Store.resume`) are all there will be, and its own rows come
after them (ids included). Rows left out are not lost: the new holder asks the table's
journal for every frame it does not find stored. The writer counts them (`fenced`).

Tables held elsewhere: `Service.runners` keeps an `Elsewhere` for each, so that the API
answers for every table: results, sessions, events and the rest come from the database as
for any table; the link shows `served_by`; a command is refused (503) with the holder's
name. Their live events come from the database: every RENEW_S the rows of `results` and
`events` added since are put on the service's event bus (`"via": "database"`), a second late.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, literal_column, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from rmc.serve.store import (
    BATCH_LISTS,
    Batch,
    CommandRec,
    EventRec,
    FrameRec,
    ResultRec,
    Store,
    StoreError,
    TableLeaseRec,
)
from rmc.serve.tables import Health, TableSpec

LEASE_S = 3.0  # a lease not renewed for this long may be taken by another service
RENEW_S = 1.0  # the holder renews its leases this often
STANDBY_S = 10.0  # a standby table never leased is taken this long after the start
MIRROR_ROWS = 2000  # rows of tables held elsewhere put on the bus a turn, at most

L = TableLeaseRec
_SOURCES = {"frames": FrameRec, "events": EventRec, "commands": CommandRec}  # rmc.serve.mqtt's


def db_now_us(dialect: str) -> Any:
    """The database's clock, µs since the epoch, as an SQL expression."""
    if dialect == "postgresql":
        return literal_column("CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)")
    return literal_column("CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)")


def _error(what: str, e: SQLAlchemyError) -> StoreError:
    return StoreError(f"{what}: {str(e).strip().splitlines()[0]}", transient=True)


@dataclass(frozen=True)
class LeaseRow:
    holder: str
    epoch: int
    expired: bool


class Leases:
    """One holder's leases in the database (no thread): take, renew, release; the writer's
    `fence`. `held` (table -> epoch) is replaced, never changed in place: other threads read
    it without a lock."""

    def __init__(self, store: Store, holder: str, lease_s: float = LEASE_S) -> None:
        self.store = store
        self.holder = holder
        self.lease_us = int(lease_s * 1e6)
        self.held: dict[str, int] = {}
        self.fenced = 0  # rows left out of batches: their table was not ours any more
        # source table -> the highest id stored when our writer's last batch began: every row
        # of a table we hold up to it is visible (ours were committed, the previous holder's
        # before we took it), the rest will have higher ids (rmc.serve.mqtt's safe point)
        self.top: dict[str, int] = {}
        self._lock = threading.Lock()  # one taking or renewal at a time

    def _now(self) -> Any:
        return db_now_us(self.store.dialect)

    def rows(self) -> dict[str, LeaseRow]:
        """Every lease row, as the database sees it now."""
        try:
            with self.store._read() as conn:
                now = conn.execute(select(self._now())).scalar_one()
                got = conn.execute(select(L.table_id, L.holder, L.epoch, L.expires_us)).all()
        except StoreError:
            raise
        return {t: LeaseRow(h, e, x < now) for t, h, e, x in got}

    def take(self, table: str, own: bool = False) -> int | None:
        """The table's lease if it is free (never leased, or expired), or, with `own`, held
        under this holder's name (a previous life of this service): its epoch, else None."""
        now = self._now()
        ins = postgresql.insert if self.store.dialect == "postgresql" else sqlite.insert
        first = (
            ins(L)
            .values(table_id=table, holder=self.holder, epoch=1, expires_us=now + self.lease_us)
            .on_conflict_do_nothing()
            .returning(L.epoch)
        )
        free = L.expires_us < now
        if own:
            free = or_(free, L.holder == self.holder)
        again = (
            update(L)
            .where(L.table_id == table, free)
            .values(holder=self.holder, epoch=L.epoch + 1, expires_us=now + self.lease_us)
            .returning(L.epoch)
        )
        with self._lock:
            try:
                with self.store._write() as conn:
                    epoch = conn.execute(first).scalar()
                    if epoch is None:
                        epoch = conn.execute(again).scalar()
            except SQLAlchemyError as e:
                raise _error(f"cannot take the lease of {table}", e) from None
            if epoch is not None:
                self.held = {**self.held, table: epoch}
            return epoch

    def renew(self) -> set[str]:
        """Every lease held, renewed; the tables whose lease was lost (taken by another)."""
        with self._lock:
            held = self.held
            if not held:
                return set()
            stmt = (
                update(L)
                .where(L.holder == self.holder, L.table_id.in_(sorted(held)))
                .values(expires_us=self._now() + self.lease_us)
                .returning(L.table_id, L.epoch)
            )
            try:
                with self.store._write() as conn:
                    got = dict(conn.execute(stmt).all())
            except SQLAlchemyError as e:
                raise _error("cannot renew the leases", e) from None
            lost = {t for t, e in held.items() if got.get(t) != e}
            if lost:
                self.held = {t: e for t, e in held.items() if t not in lost}
            return lost

    def release(self, tables: list[str] | None = None) -> None:
        """The leases given up (expired now): another service may take them at once."""
        with self._lock:
            held = self.held
            names = [t for t in (held if tables is None else tables) if t in held]
            if not names:
                return
            self.held = {t: e for t, e in held.items() if t not in names}
            try:
                with self.store._write() as conn:
                    for t in names:
                        conn.execute(
                            update(L)
                            .where(L.table_id == t, L.holder == self.holder, L.epoch == held[t])
                            .values(expires_us=0)
                        )
            except SQLAlchemyError:
                pass  # they expire by themselves

    def ours(self, conn: Any, tables: set[str]) -> set[str]:
        """In a transaction: those of `tables` this holder holds (name and epoch) in the
        database now. On PostgreSQL their lease rows stay locked (FOR SHARE) until the
        transaction ends: a taking waits for it."""
        if not tables:
            return set()
        q = select(L.table_id, L.holder, L.epoch).where(L.table_id.in_(sorted(tables)))
        if self.store.dialect == "postgresql":
            q = q.order_by(L.table_id).with_for_update(read=True)  # FOR SHARE
        held = self.held
        return {t for t, h, e in conn.execute(q) if h == self.holder and held.get(t) == e}

    def fence(self, conn: Any, batch: Batch) -> Batch:
        """In a batch's transaction: the batch without the rows of tables this holder does not
        hold (name and epoch) in the database now (`ours`: a taking waits for the batch)."""
        # before our rows: the writer has no other transaction under way, so every row of
        # ours up to here is committed (see `top`)
        self.top = {
            src: conn.execute(select(func.max(model.id))).scalar() or 0
            for src, model in _SOURCES.items()
        }
        names = set()
        for name in BATCH_LISTS:
            names.update(r.table for r in getattr(batch, name))
        if not names:
            return batch
        ours = self.ours(conn, names)
        if ours >= names:
            return batch
        out = Batch()
        for name in BATCH_LISTS:
            rows = getattr(batch, name)
            kept = [r for r in rows if r.table in ours]
            self.fenced += len(rows) - len(kept)
            setattr(out, name, kept)
        return out


class Elsewhere:
    """A table this service knows and does not serve now: held by another service (or by
    none yet). The API reads it from the database; commands go to its holder."""

    def __init__(self, spec: TableSpec, holder: str | None = None) -> None:
        self.spec = spec
        self.holder = holder
        why = f"served by {holder}" if holder else "not served yet (no lease)"
        self.health = Health(error=why)

    def link_state(self) -> dict[str, Any]:
        h = self.health
        return {"connected": False, "silent": False, "since_us": None, "last_rx_us": None,
                "reconnects": 0, "error": h.error, "lines": 0, "frames": 0, "damaged": 0,
                "duplicates": 0, "missing": 0, "resends_asked": 0, "lost": [],
                "served_by": self.holder}  # fmt: skip

    def table_state(self) -> dict[str, Any]:
        return {"state": None, "spin": None, "lid": None, "session": None, "active_faults": []}

    def command(self, verb: str, cmd: str, fields: tuple, by: str, role: str,
                timeout: float = 0.0) -> dict[str, Any]:  # fmt: skip
        where = f"served by {self.holder}: give the command there" if self.holder else (
            "not served by any service now")  # fmt: skip
        return {"command": verb, "cmd": cmd, "by": by,
                "error": f"the table is not connected here: {where}"}  # fmt: skip


class Mirror:
    """The rows of `results` and `events` of tables held elsewhere, put on the bus as the
    tables' own runners put theirs, once stored (a second late). Rows are read by id: with
    several writers an id may become visible after a larger one, and its live event is then
    missed (the API has the row)."""

    def __init__(self, store: Store, publish: Callable[[dict[str, Any]], None]) -> None:
        self.store = store
        self.publish = publish
        self.last: dict[str, int] | None = None  # source table -> the last id looked at

    def poll(self, tables: set[str]) -> None:
        with self.store._read() as conn:
            tops = {
                "results": conn.execute(select(func.max(ResultRec.id))).scalar() or 0,
                "events": conn.execute(select(func.max(EventRec.id))).scalar() or 0,
            }
            if self.last is None or not tables:
                self.last = tops  # only what comes from now on
                return
            R, E = ResultRec, EventRec
            names = sorted(tables)
            cols = (R.id, R.table_id, R.spin, R.result, R.colour, R.parity, R.half, R.rx_us,
                    R.valid, R.boot, R.seq)  # fmt: skip
            new_r = (R.id > self.last["results"], R.id <= tops["results"], R.table_id.in_(names))
            results = conn.execute(
                select(*cols).where(*new_r).order_by(R.id).limit(MIRROR_ROWS)
            ).all()
            new_e = (E.id > self.last["events"], E.id <= tops["events"], E.table_id.in_(names),
                     E.kind.not_in(("result", "rejected")))  # fmt: skip
            events = conn.execute(
                select(E.id, E.table_id, E.kind, E.boot, E.seq, E.data)
                .where(*new_e)
                .order_by(E.id)
                .limit(MIRROR_ROWS)
            ).all()
        for _, t, spin, result, colour, parity, half, rx, valid, boot, seq in results:
            self.publish({"type": "result", "table": t, "spin": spin, "result": result,
                          "colour": colour, "parity": parity, "half": half, "at_us": rx,
                          "valid": valid, "boot": boot, "seq": seq, "via": "database"})  # fmt: skip
        for _, t, kind, boot, seq, data in events:
            self.publish({"type": kind, "table": t, "boot": boot, "seq": seq, "data": data,
                          "via": "database"})  # fmt: skip
        self.last = {
            "results": results[-1][0] if len(results) == MIRROR_ROWS else tops["results"],
            "events": events[-1][0] if len(events) == MIRROR_ROWS else tops["events"],
        }


class LeaseKeeper:
    """The service's leases, kept by two threads: one renews them every RENEW_S and drops a
    table whose lease is lost (quick: nothing else holds it up), the other takes the free
    ones and starts them (`Service.add_table`: reading a table's stored frames may take
    seconds), keeps the `Elsewhere` of the others and mirrors their events."""

    def __init__(
        self,
        service: Any,
        leases: Leases,
        specs: list[TableSpec],
        standby: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        self.service = service
        self.leases = leases
        self.specs = {s.id: s for s in specs}
        self.standby = set(standby)
        self.mirror = Mirror(leases.store, service.bus.publish)
        self.started = time.monotonic()
        self.valid_until = 0.0  # monotonic: our leases are surely ours until then
        self.error: str | None = None
        self._stop = threading.Event()
        self._first = True  # the first taking: this holder's own leases taken back at once
        self._renewer = threading.Thread(target=self._renewing, name="lease-renew", daemon=True)
        self._taker = threading.Thread(target=self._taking, name="lease-take", daemon=True)

    def start(self) -> LeaseKeeper:
        for spec in self.specs.values():
            self.service.store.ensure_table(spec.id, spec.url)
            self.service.drop_table(spec.id, Elsewhere(spec))
        self.valid_until = time.monotonic() + LEASE_S - RENEW_S / 2
        self._take()  # before the API answers: the tables free now are served at once
        self._renewer.start()
        self._taker.start()
        return self

    def stop(self) -> None:
        """Both threads stopped, then every lease released (the rows read are written: the
        service's writer has stopped before)."""
        self._stop.set()
        for t in (self._renewer, self._taker):
            if t.is_alive():
                t.join(10)
        self.leases.release()

    def health(self) -> dict[str, Any]:
        return {"holder": self.leases.holder, "held": sorted(self.leases.held),
                "fenced_rows": self.leases.fenced, "error": self.error}  # fmt: skip

    # --- renewing ---

    def _renewing(self) -> None:
        while not self._stop.wait(RENEW_S):
            began = time.monotonic()
            try:
                lost = self.leases.renew()
                self.valid_until = began + LEASE_S - RENEW_S / 2
                self.error = None
            except Exception as e:  # the database (StoreError), or a bug: as if it were down
                if not isinstance(e, StoreError):
                    traceback.print_exc(file=sys.stderr)
                self.error = str(e)
                if time.monotonic() < self.valid_until:
                    continue
                # the database away this long: another service may take our tables soon;
                # stop reading them (our writer's rows are fenced anyway)
                lost = set(self.leases.held)
                self.leases.held = {}
            for t in sorted(lost):
                try:
                    self._lose(t)
                except Exception:  # a bug: said; the table is not ours any more all the same
                    traceback.print_exc(file=sys.stderr)

    def _lose(self, table: str) -> None:
        spec = self.specs.get(table)
        if spec is None:
            return
        holder = None
        try:
            row = self.leases.rows().get(table)
            holder = row.holder if row is not None else None
        except StoreError:
            pass
        self.service.drop_table(table, Elsewhere(spec, holder))
        self.service.bus.publish({"type": "lease", "table": table, "held": False,
                                  "holder": holder})  # fmt: skip

    # --- taking ---

    def _taking(self) -> None:
        while not self._stop.wait(RENEW_S):
            try:
                self._take()
                self.mirror.poll(self._elsewhere())
            except StoreError as e:
                self.error = str(e)
            except Exception:  # a bug: said, and the leases are taken on
                traceback.print_exc(file=sys.stderr)

    def _elsewhere(self) -> set[str]:
        return {t for t, r in self.service.runners.items() if isinstance(r, Elsewhere)}

    def _take(self) -> None:
        rows = self.leases.rows()
        own = self._first
        self._first = False
        for t, spec in self.specs.items():
            if self._stop.is_set():
                return
            if t in self.leases.held:
                continue
            row = rows.get(t)
            if self._may_take(t, row, own) and self.leases.take(t, own=own) is not None:
                self.service.add_table(spec)
                self.service.bus.publish({"type": "lease", "table": t, "held": True,
                                          "holder": self.leases.holder})  # fmt: skip
                continue
            # held elsewhere: the API shows by whom
            holder = row.holder if row is not None and not row.expired else None
            cur = self.service.runners.get(t)
            if not isinstance(cur, Elsewhere) or cur.holder != holder:
                self.service.drop_table(t, Elsewhere(spec, holder))
        # tables leased by other services and not in our configuration: known to the API too
        for t, row in rows.items():
            if t not in self.specs and not isinstance(self.service.runners.get(t), Elsewhere):
                self.service.drop_table(t, Elsewhere(TableSpec(t, ""), row.holder))

    def _may_take(self, table: str, row: LeaseRow | None, own: bool) -> bool:
        if row is None:  # never leased
            return table not in self.standby or time.monotonic() - self.started > STANDBY_S
        if own and row.holder == self.leases.holder:
            return True  # ours, from before a restart
        return row.expired
