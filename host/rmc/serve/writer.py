"""The service's one database writer: every table's rows, in order, one transaction a batch.

The tables' thread hands every table's rows over once a tick (`put`, rmc.serve.tables); this
thread merges what is waiting into one batch (at most `MAX_ROWS` rows) and writes it in one
transaction: a busy service writes fewer, bigger transactions by itself. It is a thread of
its own so that a database that is slow, or down, never holds up the reading of the tables
(the store's bulk writes keep what it needs of the GIL small: rmc.serve.store).

A store that fails (a database restarting, a full disk) is tried again with a growing
delay, with the same batch: rows wait in memory meanwhile, in order, and none is dropped.
The order matters: a table's derived rows follow the frames they come from, so a batch never
holds a result whose frame is not stored.
"""

from __future__ import annotations

import collections
import json
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from rmc.serve.store import Batch, Store, StoreError

MAX_ROWS = 20_000  # rows merged into one transaction at most (a backlog is caught up in few)
RETRY_S = (0.2, 5.0)


@dataclass
class WriterHealth:
    ok: bool = True
    error: str | None = None
    since_us: int | None = None
    batches: int = 0
    rows: int = 0
    retries: int = 0
    pending: int = 0
    refused: int = 0  # rows the database refused for good (reported on standard error)


def _merge(batches: list[Batch]) -> Batch:
    out = Batch()
    for b in batches:
        for name in Batch.__dataclass_fields__:
            getattr(out, name).extend(getattr(b, name))
    return out


class Writer:
    def __init__(self, store: Store, on_state: Any = None, fence: Any = None) -> None:
        self.store = store
        self.fence = fence  # rmc.serve.lease.Leases.fence: a table's rows only while held
        self.on_state = on_state  # called with the health when the store fails or recovers
        self.health = WriterHealth()
        self._queue: collections.deque[Batch] = collections.deque()
        self._cv = threading.Condition()
        self._busy = False
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def put(self, batch: Batch) -> None:
        with self._cv:
            self._queue.append(batch)
            self.health.pending += len(batch)
            self._cv.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every row handed over is written; False if it was not in time."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def stop(self, timeout: float = 10.0) -> bool:
        done = self.flush(timeout)
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout)
        return done

    def _take(self) -> Batch | None:
        with self._cv:
            while not self._queue and not self._stop:
                self._cv.wait()
            if not self._queue:
                return None
            taken: list[Batch] = []
            rows = 0
            while self._queue and (not taken or rows + len(self._queue[0]) <= MAX_ROWS):
                b = self._queue.popleft()
                taken.append(b)
                rows += len(b)
            self._busy = True
            return taken[0] if len(taken) == 1 else _merge(taken)

    def _run(self) -> None:
        delay = RETRY_S[0]
        while True:
            batch = self._take()
            if batch is None:
                return
            while True:
                try:
                    self._write(batch)
                    break
                except StoreError as e:
                    if not e.transient:
                        self._one_by_one(batch)  # a row the database refuses for good
                        break
                    h = self.health
                    h.retries += 1
                    if h.ok or h.error != str(e):
                        h.ok, h.error, h.since_us = False, str(e), time.time_ns() // 1000
                        self._tell()
                    with self._cv:
                        self._cv.wait(delay)
                    delay = min(delay * 2, RETRY_S[1])
            delay = RETRY_S[0]
            h = self.health
            with self._cv:
                h.batches += 1
                h.rows += len(batch)
                h.pending -= len(batch)
                self._busy = False
                self._cv.notify_all()
            if not h.ok:
                h.ok, h.error, h.since_us = True, None, time.time_ns() // 1000
                self._tell()

    def _one_by_one(self, batch: Batch) -> None:
        """A batch the database refuses whatever the retries (a row it cannot take): every
        row is written alone, so that the others are kept; the rows refused are reported on
        standard error as JSON, with why, and counted in the health (never dropped silently).
        A transient failure on the way is retried as any other."""
        for name in Batch.__dataclass_fields__:
            for row in getattr(batch, name):
                one = Batch()
                getattr(one, name).append(row)
                delay = RETRY_S[0]
                while True:
                    try:
                        self._write(one)
                        break
                    except StoreError as e:
                        if e.transient:
                            time.sleep(delay)
                            delay = min(delay * 2, RETRY_S[1])
                            continue
                        self.health.refused += 1
                        self.health.error = f"rows refused: {e}"
                        record = {"refused": name, "why": str(e), "row": repr(row)}
                        print(json.dumps(record), file=sys.stderr, flush=True)
                        self._tell()
                        break

    def _write(self, batch: Batch) -> None:
        if self.fence is None:
            self.store.write(batch)
        else:
            self.store.write(batch, fence=self.fence)

    def _tell(self) -> None:
        if self.on_state is not None:
            self.on_state(self.health)
