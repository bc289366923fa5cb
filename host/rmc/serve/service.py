"""The table service: its tables' thread, the database writer, and the live event bus.

`Service.start()` opens the store (migrating it), starts the writer and the one thread that
reads every table (`rmc.serve.tables.Tables`), and takes up each table where the store left
it (its stored frames fed again to the rules, its gaps asked again). The HTTP API
(`rmc.serve.api`) reads the store and the runners' state, sends the operators' orders through
`order()`, and streams the bus to its clients.
"""

from __future__ import annotations

import collections
import gc
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from rmc.frames import FrameError, decode
from rmc.record import open_port
from rmc.serve import orders
from rmc.serve.config import Operator, ServeConfig
from rmc.serve.store import Store
from rmc.serve.tables import TableRunner, Tables, TableSpec
from rmc.serve.writer import Writer


class Bus:
    """Live events to any number of listeners; a listener that does not keep up (or fails)
    is dropped (a web client reconnects and reads what it missed from the API), never waited
    for: the tables' thread publishes."""

    def __init__(self, keep: int = 1000) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._listeners: dict[int, Callable[[dict[str, Any]], bool]] = {}
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)

    def publish(self, event: dict[str, Any]) -> None:
        with self._lock:
            event = {"id": next(self._ids), "at_us": time.time_ns() // 1000, **event}
            self.recent.append(event)
            listeners = list(self._listeners.items())
        for key, listener in listeners:
            try:
                kept = listener(event)
            except Exception:  # (a client's loop closed): the tables' thread goes on
                kept = False
            if not kept:
                self.unsubscribe(key)

    def subscribe(self, listener: Callable[[dict[str, Any]], bool]) -> int:
        """listener(event) -> False when it cannot take more (it is then dropped)."""
        with self._lock:
            key = next(self._ids)
            self._listeners[key] = listener
            return key

    def unsubscribe(self, key: int) -> None:
        with self._lock:
            self._listeners.pop(key, None)


# CPython's cyclic garbage collector runs every 700 allocations of container objects by
# default; a table's frames make a few each, and the link keeps every frame of the running
# service (its duplicate checks): at 200 tables its collections took a fifth of the tables'
# thread (27.6 -> 23.8 µs a frame with these thresholds). Raised, not disabled: cycles are
# still collected.
GC_THRESHOLD = (10_000, 10, 10)


class UnknownTable(KeyError):
    pass


class Service:
    def __init__(self, config: ServeConfig, opener: Callable[[str], Any] = open_port) -> None:
        self.config = config
        self.opener = opener
        self.bus = Bus()
        self.store: Store | None = None
        self.writer: Writer | None = None
        self.tables: Tables | None = None
        self.runners: dict[str, TableRunner] = {}
        self.started_us: int | None = None
        self.mqtt: Any = None  # rmc.serve.mqtt.Publisher, when config.mqtt is set
        self.leases: Any = None  # rmc.serve.lease.LeaseKeeper, when config.lease is set
        self._runners_lock = threading.Lock()  # `runners` is replaced, never changed in place

    def start(self) -> Service:
        if gc.get_threshold()[0] < GC_THRESHOLD[0]:
            gc.set_threshold(*GC_THRESHOLD)
        self.store = Store.open(self.config.db)
        leases = None
        if self.config.lease:
            from rmc.serve.lease import Leases

            leases = Leases(self.store, self.config.lease)
        fence = leases.fence if leases is not None else None
        self.writer = Writer(self.store, on_state=self._db_state, fence=fence).start()
        self.tables = Tables(self.writer.put, self.opener).start()
        if self.config.mqtt:
            from rmc.serve.mqtt import Publisher

            self.mqtt = Publisher(
                self.store,
                self.config.mqtt,
                self.config.mqtt_prefix,
                self.bus.publish,
                leases=leases,  # with leases, the tables it holds, from their cursors
            ).start()
        if leases is not None:  # the tables whose lease it takes (rmc.serve.lease)
            from rmc.serve.lease import LeaseKeeper

            self.leases = LeaseKeeper(self, leases, self.config.tables, self.config.standby)
            self.leases.start()
        else:
            for spec in self.config.tables:
                self.add_table(spec)
        self.started_us = time.time_ns() // 1000
        return self

    def add_table(self, spec: TableSpec) -> TableRunner:
        assert self.store is not None and self.tables is not None
        self.store.ensure_table(spec.id, spec.url)
        resume = self.store.resume(spec.id)
        runner = TableRunner(spec, resume, self.bus.publish, backlog=self._backlog(spec.id))
        with self._runners_lock:
            self.runners = {**self.runners, spec.id: runner}
        self.tables.add(runner)
        return runner

    def drop_table(self, table: str, instead: Any = None) -> None:
        """Stop serving a table (its lease lost): its port closed, its commands under way
        failed, its runner replaced by `instead` (rmc.serve.lease.Elsewhere: the API still
        answers for it from the database), or removed. Its rows read so far go to the
        writer, which leaves them out if the table is another service's now."""
        with self._runners_lock:
            old = self.runners.get(table)
            runners = {k: v for k, v in self.runners.items() if k != table}
            if instead is not None:
                runners[table] = instead
            self.runners = runners
        if isinstance(old, TableRunner) and self.tables is not None:
            self.tables.remove(old)

    def _backlog(self, table: str):
        assert self.store is not None
        for row in self.store.frames(table):
            try:
                f = decode(row.line.encode())
            except FrameError:
                continue  # stored as received and checked then: cannot happen, never fatal
            yield f, row.rx_us

    def stop(self) -> None:
        """Every port closed and every row read written (one thread to stop, not one a
        table)."""
        if self.tables is not None:
            self.tables.stop()
        if self.writer is not None:
            self.writer.stop()
        if self.mqtt is not None:
            self.mqtt.stop()  # after the writer: the last rows written are published first
        if self.leases is not None:
            self.leases.stop()  # after the writer and the publisher's cursor: released
        if self.store is not None:
            self.store.close()

    def flush(self, timeout: float = 10.0) -> bool:
        """Every row read so far written; False if it was not in time."""
        deadline = time.monotonic() + timeout
        if self.tables is not None and not self.tables.flush(timeout):
            return False
        left = max(0.0, deadline - time.monotonic())
        return self.writer.flush(left) if self.writer is not None else True

    def _db_state(self, health: Any) -> None:
        self.bus.publish({"type": "database", "ok": health.ok, "error": health.error})

    # --- for the API ---

    def runner(self, table: str) -> TableRunner:
        r = self.runners.get(table)
        if r is None:
            raise UnknownTable(table)
        return r

    def order(self, table: str, verb: str, args: dict[str, Any], op: Operator) -> dict[str, Any]:
        """An operator's command: checked, sent signed, its answer awaited and returned.
        OrderError for an order refused before it goes; UnknownTable."""
        runner = self.runner(table)
        v = orders.VERBS.get(verb)
        if v is None:
            raise orders.OrderError(f"no command {verb!r}")
        fields = orders.fields(verb, args, op.name, op.role)
        out = runner.command(verb, v.cmd, fields, op.name, op.role)
        self.bus.publish({"type": "command", "table": table, **out})
        return out

    def table_info(self, table: str) -> dict[str, Any]:
        r = self.runner(table)
        return {"id": table, "url": r.spec.url, "link": r.link_state(), **r.table_state()}

    def health(self) -> dict[str, Any]:
        w = self.writer.health if self.writer is not None else None
        return {
            "started_us": self.started_us,
            "database": {
                "url": self.store.url if self.store else None,
                "ok": w.ok if w else False,
                "error": w.error if w else None,
                "pending_rows": w.pending if w else 0,
                "rows": w.rows if w else 0,
                "retries": w.retries if w else 0,
            },
            "tables": len(self.runners),
            **({"mqtt": self.mqtt.health.as_dict()} if self.mqtt is not None else {}),
            **({"leases": self.leases.health()} if self.leases is not None else {}),
        }
