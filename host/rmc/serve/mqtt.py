"""The service's rows published on an MQTT broker, each once acknowledged (docs/mqtt.md).

The outbox is the database itself: frames, events and commands get growing ids as the
writer stores them (rmc.serve.store). A `Publisher` thread reads the rows past its cursors in
id order, a page at a time, publishes them with QoS 1, waits until the broker has
acknowledged every one, then moves its cursors (`mqtt_cursor`, one a table and source table,
stored every SAVE_S). A page's frames go in one message a table (MAX_BYTES at most: more
messages for more), the lines as stored, so that a subscriber still checks each line's tag
alone; and a page not full waits LINGER_S after the last one, so that under load a message
carries a tenth of a second of a table's frames (paho costs ~40 µs a message: one a frame
was 11,000-17,000 frames a second a core, short of 200 tables at line rate, 27,000). So the
service's write path is unchanged, a broker down or restarting loses nothing (the rows wait
in the database, the cursors do not move), and a service killed before its cursors' save
publishes a second's worth of rows again: subscribers drop them by their key ((table, boot,
seq) for a frame, (table, kind, n) for an event, (table, boot, cseq) for a command).

Rows become visible in id order because ONE thread (rmc.serve.writer) commits every frame,
event and command: on PostgreSQL, ids of concurrent transactions may become visible out of
order, and a cursor would then skip a row committed late. With several services on one
database (rmc.serve.lease) there are several writers; but a table is written by one service
at a time, its handover fenced, so a table's rows still become visible in id order: hence a
cursor a table. Each service publishes the tables it holds (`leases`); a table's cursor moves
past its rows published and past a safe point below which every row of the held tables is
visible (`Leases.top`: where the writer's last batch began). See `Publisher._page`.

Topics, under a prefix (`rmc` by default):

  {prefix}/{table}/frames         frame lines as received, one a line ("\n"), (boot, seq) order
  {prefix}/{table}/event/{kind}   JSON: table, kind, n, boot, seq, data (results: announcement)
  {prefix}/{table}/event/command  JSON: a command with its answer (once answered, or late)
  {prefix}/{table}/results        retained JSON: the last 20 valid results, newest first
  {prefix}/{table}/state          retained JSON: the table's newest STAT (when it changes), at
                                  most one a page
"""

from __future__ import annotations

import collections
import functools
import json
import operator
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from rmc.serve.store import CommandRec, EventRec, FrameRec, MqttCursorRec, Store, StoreError

DEFAULT_PREFIX = "rmc"
DEFAULT_PORT = 1883
PAGE = 20_000  # rows of a source table read, published and acknowledged at once, at most
MAX_BYTES = 64 * 1024  # a frames message's payload at most (a longer line goes alone)
LINGER_S = 0.1  # a page not full waits this long after the last one: under load a
# table's frames go in one message every LINGER_S, not one a commit of the writer (20 a
# second), so messages a second stay ~10 a table whatever the frame rate; longer costs
# latency (0.25 s: p99 326 ms at 10 tables, quiet machine; 0.1 s: 177 ms)
RESULTS_KEPT = 20  # the retained results message holds this many
IDLE_S = 0.05  # nothing new: look again after this long
RETRY_S = (0.2, 10.0)  # a broker or database that fails: tried again, the delay doubling
ANSWER_WAIT_S = 10.0  # a command is published with its answer, or unanswered after this
SAVE_S = 1.0  # the cursors are stored this often (and at the end): a kill publishes again
# what was acknowledged since, at most (subscribers drop it by key)
INFLIGHT = 0  # QoS 1 messages on their way at once: no limit but the page (paho walks its
# whole queue at each acknowledgement when it has a limit: 170 µs a message at 1,000)
SOURCES = ("frames", "events", "commands")
_PREFIX = re.compile(r"[^#+\x00]+")  # a topic's levels; no wildcard


class MqttError(ValueError):
    """A broker URL or prefix that cannot be used (one-line reason)."""


@dataclass(frozen=True)
class Broker:
    host: str
    port: int
    tls: bool = False
    username: str | None = None
    password: str | None = None
    prefix: str | None = None  # the URL's path, if any

    @property
    def where(self) -> str:
        """host:port, no password: for messages and the cursor's name."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_url(url: str) -> Broker:
    """mqtt://[USER[:PASSWORD]@]HOST[:PORT][/PREFIX] (or mqtts:// for TLS). MqttError."""
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as e:
        raise MqttError(f"bad broker URL {url!r}: {e}") from None
    if u.scheme not in ("mqtt", "mqtts", "tcp"):
        raise MqttError(f"bad broker URL {url!r}: use mqtt://HOST:PORT (or mqtts://)")
    if not u.hostname:
        raise MqttError(f"bad broker URL {url!r}: no host")
    tls = u.scheme == "mqtts"
    prefix = u.path.strip("/") or None
    if prefix is not None:
        prefix = check_prefix(unquote(prefix))
    return Broker(
        u.hostname,
        port or (8883 if tls else DEFAULT_PORT),
        tls,
        unquote(u.username) if u.username else None,
        unquote(u.password) if u.password else None,
        prefix,
    )


def check_prefix(prefix: str) -> str:
    p = prefix.strip("/")
    if not p or not _PREFIX.fullmatch(p) or "//" in p:
        raise MqttError(f"bad topic prefix {prefix!r}: levels separated by '/', no + nor #")
    return p


def client(broker: Broker, client_id: str, clean: bool) -> Any:
    """A paho client for the broker (MQTT 3.1.1), not connected yet."""
    import paho.mqtt.client as mqtt

    c = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=clean,
        protocol=mqtt.MQTTv311,
    )
    if broker.username is not None:
        c.username_pw_set(broker.username, broker.password)
    if broker.tls:
        c.tls_set()
    c.max_inflight_messages_set(INFLIGHT)
    c.reconnect_delay_set(1, int(RETRY_S[1]))
    return c


def frames_topic(prefix: str, table: str) -> str:
    return f"{prefix}/{table}/frames"


def event_topic(prefix: str, table: str, kind: str) -> str:
    return f"{prefix}/{table}/event/{kind}"


@functools.lru_cache(maxsize=64)  # 39 pockets; 5 µs a call, one a result
def announcement(result: str) -> str | None:
    from rmc.settle import ResultError, announce_result

    try:
        return announce_result(result)
    except ResultError:
        return None


@dataclass
class MqttHealth:
    broker: str
    prefix: str
    connected: bool = False
    error: str | None = None
    since_us: int | None = None
    published: int = 0  # messages acknowledged by the broker since start
    frames: int = 0  # frame lines in them
    frame_messages: int = 0  # messages on .../frames among them
    cursor: dict[str, int] | None = None
    pending: int = 0  # messages published, not acknowledged yet

    def as_dict(self) -> dict[str, Any]:
        return {
            "broker": self.broker,
            "prefix": self.prefix,
            "connected": self.connected,
            "error": self.error,
            "since_us": self.since_us,
            "published": self.published,
            "frames": self.frames,
            "frame_messages": self.frame_messages,
            "pending": self.pending,
            "cursor": dict(self.cursor or {}),
        }


def _now_us() -> int:
    return time.time_ns() // 1000


class Publisher:
    """One broker, one prefix: the store's rows past the cursor, published in id order.

    `on_state(event)` (the service's bus) hears `{"type": "mqtt", "connected", "error", ...}`
    when the broker's state changes. `start()`, `stop()`; `health` for the API."""

    def __init__(
        self,
        store: Store,
        url: str,
        prefix: str | None = None,
        on_state: Callable[[dict[str, Any]], None] | None = None,
        page: int = PAGE,
        client_id: str | None = None,
        max_bytes: int = MAX_BYTES,
        linger_s: float | None = None,  # None: LINGER_S
        leases: Any = None,
    ) -> None:
        self.store = store
        self.broker = parse_url(url)
        self.prefix = check_prefix(prefix or self.broker.prefix or DEFAULT_PREFIX)
        self.name = f"{self.broker.where}/{self.prefix}"  # the cursor's row
        self.on_state = on_state
        self.page = page
        self.max_bytes = max_bytes
        self.linger_s = LINGER_S if linger_s is None else linger_s
        # the outbox is the database: no session state is needed at the broker for sending
        self.client_id = client_id or f"rmc-serve-{socket.gethostname()}-{id(self):x}"[:64]
        self.health = MqttHealth(self.broker.where, self.prefix)
        self._stop = threading.Event()
        self._drain_until = 0.0
        self._acked: set[int] = set()  # mids the broker acknowledged, not yet waited for
        self._cv = threading.Condition()
        self._mqtt: Any = None
        self._thread = threading.Thread(target=self._run, name="mqtt-publisher", daemon=True)
        # rmc.serve.lease.Leases: several services on the database; this one publishes the
        # tables it holds (None: every table)
        self.leases = leases
        self.cursor: dict[str, dict[str, int]] = {}  # source table -> table -> last id published
        self.low: dict[str, int] = {}  # without leases: where the next page starts
        self._unsaved: dict[str, dict[str, int]] = {src: {} for src in SOURCES}
        self._saved_at = 0.0  # monotonic
        self._results: dict[str, collections.deque] = {}
        # table -> the last STAT published: its (boot, seq) and fields
        self._state: dict[str, tuple[tuple[int, int], dict[str, str]]] = {}

    # --- life ---

    def start(self) -> Publisher:
        c = self._mqtt = client(self.broker, self.client_id, clean=True)
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_publish = self._on_publish
        c.connect_async(self.broker.host, self.broker.port, keepalive=30)
        c.loop_start()  # paho's thread: connects, reconnects, resends what is not acknowledged
        self._thread.start()
        return self

    def stop(self, drain_s: float = 2.0) -> None:
        """Stop; the rows stored before the call are published first, for up to `drain_s`
        (a broker down: they wait in the database for the next start)."""
        self._drain_until = time.monotonic() + drain_s
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        self._thread.join(drain_s + 10)
        if self._mqtt is not None:
            self._mqtt.disconnect()
            self._mqtt.loop_stop()

    def idle(self) -> bool:
        """Every row stored so far of the tables it publishes, published and acknowledged
        (for tests)."""
        if not self.cursor:
            return False
        held = None if self.leases is None else set(self.leases.held)
        for src in SOURCES:
            cur = self.cursor[src]
            if held is not None:
                if any(t not in cur for t in held):
                    return False
                low = min((cur[t] for t in held), default=0)
            else:
                low = self.low[src]
            rows = self._read(src, self.page, low, held)
            if any(r[0] > cur.get(r[1], low) for r in rows):
                return False
        return True

    # --- paho's callbacks (its thread) ---

    def _on_connect(self, c: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        ok = not reason.is_failure
        self._set_state(ok, None if ok else f"broker refused: {reason}")

    def _on_disconnect(self, c: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self._set_state(False, f"disconnected: {reason}")

    def _on_publish(self, c: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        with self._cv:
            self._acked.add(mid)
            self._cv.notify_all()

    def _set_state(self, connected: bool, error: str | None) -> None:
        h = self.health
        if h.connected == connected and h.error == error:
            return
        h.connected, h.error, h.since_us = connected, error, _now_us()
        if self.on_state is not None:
            self.on_state({"type": "mqtt", **h.as_dict()})

    # --- the loop ---

    def _run(self) -> None:
        delay = RETRY_S[0]
        last = -1e9  # monotonic time the last turn that published anything began
        while True:
            sent = 0
            try:
                if not self.cursor:
                    self._load()
                wait = last + self.linger_s - time.monotonic()
                if wait > 0:
                    self._stop.wait(wait)  # (a stop: drained at once)
                began = time.monotonic()
                sent, full = self._turn()
                if sent:
                    last = -1e9 if full else began  # a backlog is caught up without pause
                delay = RETRY_S[0]
            except StoreError as e:  # the database is down: the service's health says so
                sent = 0
                self._stop.wait(delay)
                delay = min(delay * 2, RETRY_S[1])
                self.health.error = f"database: {e}"
            if self._stop.is_set() and (not sent or time.monotonic() > self._drain_until):
                try:
                    self._save(force=True)
                except StoreError:
                    pass  # published again at the next start
                return
            if not sent:
                self._stop.wait(IDLE_S)

    def _load(self) -> None:
        """The cursors stored (per source table and table; none: nothing published yet)."""
        C = MqttCursorRec
        with self.store._read() as conn:
            rows = conn.execute(
                select(C.source_table, C.table_id, C.last_id).where(C.name == self.name)
            ).all()
        cursor: dict[str, dict[str, int]] = {src: {} for src in SOURCES}
        for src, table, last in rows:
            cursor.setdefault(src, {})[table] = last
        self.low = {src: min(cursor[src].values(), default=0) for src in SOURCES}
        self.cursor = cursor
        self.health.cursor = dict(self.low)

    def _cursors_for(self, tables: set[str]) -> None:
        """The stored cursors of tables newly held (taken over from another service)."""
        missing = {t for t in tables if any(t not in self.cursor[src] for src in SOURCES)}
        if not missing:
            return
        C = MqttCursorRec
        with self.store._read() as conn:
            rows = conn.execute(
                select(C.source_table, C.table_id, C.last_id).where(
                    C.name == self.name, C.table_id.in_(sorted(missing))
                )
            ).all()
        for src in SOURCES:
            for t in missing:
                self.cursor[src].setdefault(t, 0)
        for src, table, last in rows:
            if src in self.cursor:
                self.cursor[src][table] = max(self.cursor[src][table], last)

    def _read(
        self, src: str, limit: int, low: int | None = None, tables: set[str] | None = None
    ) -> list:
        """Rows of a source table past `low` (default: where the next page starts), of
        `tables` only when given, in id order."""
        if low is None:
            low = self.low.get(src, 0)
        with self.store._read() as conn:
            if src == "frames":
                F = FrameRec
                stmt = select(F.id, F.table_id, F.type, F.line, F.boot, F.seq, F.rx_us)
            elif src == "events":
                E = EventRec
                stmt = select(E.id, E.table_id, E.kind, E.n, E.boot, E.seq, E.data)
            else:
                K = CommandRec
                stmt = select(K.id, K.table_id, K.boot, K.cseq, K.cmd, K.args, K.by, K.role,
                              K.line, K.sent_us, K.answered_us, K.ok, K.detail,
                              K.answer_line)  # fmt: skip
            model = {"frames": FrameRec, "events": EventRec, "commands": CommandRec}[src]
            stmt = stmt.where(model.id > low)
            if tables is not None:
                stmt = stmt.where(model.table_id.in_(sorted(tables)))
            return conn.execute(stmt.order_by(model.id).limit(limit)).all()

    def _turn(self) -> tuple[int, bool]:
        """A page of each source table published and every message acknowledged; then the
        cursors moved (stored every SAVE_S): the rows published, and whether a page was full
        (a backlog: the next turn comes at once). Where the cursors go: `_page`."""
        held = None if self.leases is None else set(self.leases.held)
        top = None if self.leases is None else dict(self.leases.top)
        if held is not None:
            for cur in self.cursor.values():  # a table lost: its cursor read again if retaken
                for t in [t for t in cur if t not in held]:
                    del cur[t]
            if not held:
                return 0, False
            self._cursors_for(held)
        messages: list[tuple[str, bytes, bool]] = []
        moves: dict[str, dict[str, int]] = {}
        lows: dict[str, int] = {}
        rows_in = 0
        full_any = False
        for src in SOURCES:
            new, moves[src], low, full = self._page(src, held, top)
            full_any = full_any or full
            if low is not None:
                lows[src] = low
            if new:
                messages += getattr(self, f"_{src}")(new)
                rows_in += len(new)
        if messages and not self._publish(messages):
            return 0, False  # stopped before the broker acknowledged them: published again later
        for src, moved in moves.items():
            self.cursor[src].update(moved)
            self._unsaved[src].update(moved)
        self.low.update(lows)
        self.health.cursor = {
            src: min(self.cursor[src].values(), default=self.low.get(src, 0)) for src in SOURCES
        }
        self._save()
        return rows_in, full_any

    def _page(
        self, src: str, held: set[str] | None, top: dict[str, int] | None
    ) -> tuple[list, dict[str, int], int | None, bool]:
        """A page of a source table: (its rows to publish, the tables' cursors that move once
        they are acknowledged, where the next page starts without leases (None: where it
        did), whether the page was full).

        Where a table's cursor goes: past its rows published, and past `safe`, up to which
        every row of the tables read is visible and was read. Without leases one writer
        stores every row, in id order: `safe` is the page's last id. With leases, each table
        is written by its holder alone (fenced), so a table's rows become visible in id order,
        but rows of the tables we hold do not, among those of other services' tables:
        `safe` is then the id our writer's last batch began at (`Leases.top`), below which
        every row of ours is committed."""
        cur = self.cursor[src]
        low = self.low[src] if held is None else min(cur[t] for t in held)
        rows = self._read(src, self.page, low, held)
        full = len(rows) == self.page
        new = [r for r in rows if r[0] > cur.get(r[1], low)]
        safe: int | None
        if held is None:
            safe = rows[-1][0] if rows else None
        else:
            assert top is not None
            safe = min(top.get(src, 0), rows[-1][0]) if full else top.get(src, 0)
        if src == "commands":
            ready = _ready_commands(new)
            if len(ready) < len(new):  # a command awaiting its answer: nothing past it
                first = new[len(ready)][0] - 1
                safe = first if safe is None else min(safe, first)
            new = ready
        last: dict[str, int] = {}
        for r in new:
            last[r[1]] = r[0]
        names = held if held is not None else set(cur) | set(last)
        moved = {}
        for t in names:
            was = cur.get(t, low if held is None else 0)
            v = max(was, last.get(t, 0), safe or 0)
            if v != cur.get(t):
                moved[t] = v
        next_low = max(low, safe) if held is None and safe is not None else None
        return new, moved, next_low, full

    def _frames(self, rows: list) -> list[tuple[str, bytes, bool]]:
        """Per table, its frame lines in (boot, seq) order, as few messages as MAX_BYTES
        allows; then its state, when its newest STAT changed it. (Rows are read by index:
        a Row's attribute costs ten times as much, and there are 27,000 rows a second.)"""
        tables: dict[str, list] = {}
        for r in rows:  # (id, table_id, type, line, boot, seq, rx_us)
            rs = tables.get(r[1])
            if rs is None:
                rs = tables[r[1]] = []
            rs.append(r)
        out: list[tuple[str, bytes, bool]] = []
        limit = self.max_bytes
        for table, rs in tables.items():
            rs.sort(key=_BOOT_SEQ)
            topic = frames_topic(self.prefix, table)
            chunk: list[bytes] = []
            size = 0
            stat = None
            for r in rs:
                line = r[3].encode("latin-1")
                if chunk and size + len(line) > limit:
                    out.append((topic, b"\n".join(chunk), False))
                    chunk, size = [], 0
                chunk.append(line)
                size += len(line) + 1
                if r[2] == "STAT":
                    stat = r
            out.append((topic, b"\n".join(chunk), False))
            state = self._stat(stat) if stat is not None else None
            if state is not None:
                out.append((f"{self.prefix}/{table}/state", state, True))
        return out

    def _stat(self, r: Any) -> bytes | None:
        """The table's state message when this STAT frame, newer than the last one published
        (a STAT resent late is not), changes it; else None."""
        from rmc.frames import FrameError, decode

        _, table, _, line, boot, seq, rx_us = r
        before = self._state.get(table)
        if before is not None and before[0] >= (boot, seq):
            return None
        try:
            fields = dict(decode(line.lstrip("~").encode("latin-1")).fields)
        except (FrameError, ValueError):
            return None
        self._state[table] = ((boot, seq), fields)
        if before is not None and before[1] == fields:
            return None
        msg = {"table": table, "boot": boot, "seq": seq, "rx_us": rx_us, **fields}
        return json.dumps(msg).encode()

    def _events(self, rows: list) -> list[tuple[str, bytes, bool]]:
        out = []
        touched = set()
        prefix = self.prefix
        for _, table, kind, n, boot, seq, data in rows:
            msg = {"table": table, "kind": kind, "n": n, "boot": boot, "seq": seq, "data": data}
            if kind == "result":
                msg["announcement"] = announcement(str(data.get("result", "")))
                q = self._results.get(table)
                if q is None:
                    q = self._results[table] = self._results_before(table)
                q.appendleft(_result_item(n, boot, seq, data))
                touched.add(table)
            out.append((f"{prefix}/{table}/event/{kind}", json.dumps(msg).encode(), False))
        for t in sorted(touched):
            msg = {"table": t, "results": list(self._results[t])}
            out.append((f"{prefix}/{t}/results", json.dumps(msg).encode(), True))
        return out

    def _results_before(self, table: str) -> collections.deque:
        """A table's last results published before (its retained message's start)."""
        E = EventRec
        done = self.cursor["events"].get(table, self.low.get("events", 0))
        with self.store._read() as conn:
            last = conn.execute(
                select(E.n, E.boot, E.seq, E.data)
                .where(E.table_id == table, E.kind == "result", E.id <= done)
                .order_by(E.id.desc())
                .limit(RESULTS_KEPT)
            ).all()
        q: collections.deque = collections.deque(maxlen=RESULTS_KEPT)
        for n, boot, seq, data in reversed(last):
            q.appendleft(_result_item(n, boot, seq, data))
        return q

    def _commands(self, rows: list) -> list[tuple[str, bytes, bool]]:
        out = []
        for r in rows:
            msg = {"table": r.table_id, "kind": "command", "boot": r.boot, "seq": r.cseq,
                   "cseq": r.cseq, "cmd": r.cmd, "args": r.args, "by": r.by, "role": r.role,
                   "line": r.line, "sent_us": r.sent_us, "answered_us": r.answered_us,
                   "ok": r.ok, "detail": r.detail, "answer_line": r.answer_line}  # fmt: skip
            out.append(
                (event_topic(self.prefix, r.table_id, "command"), json.dumps(msg).encode(), False)
            )
        return out

    def _publish(self, messages: list[tuple[str, bytes, bool]]) -> bool:
        """Published with QoS 1 and every one acknowledged: True. Paho keeps what is not
        acknowledged and sends it again after a reconnection; this waits, however long the
        broker is away, unless the service stops (False: the cursor stays)."""
        c = self._mqtt
        # (not info.is_published(): it raises for a message queued while disconnected,
        # which paho still sends once connected)
        waiting = collections.deque(c.publish(t, p, qos=1, retain=r).mid for t, p, r in messages)
        frames = [p for t, p, _ in messages if t.endswith("/frames")]
        acked = self._acked
        self.health.pending = len(waiting)
        with self._cv:
            while waiting:
                while waiting and waiting[0] in acked:
                    acked.discard(waiting.popleft())
                    self.health.published += 1
                self.health.pending = len(waiting)
                if not waiting:
                    break
                if self._stop.is_set() and time.monotonic() > self._drain_until:
                    return False
                self._cv.wait(0.2)
        self.health.frames += sum(p.count(b"\n") + 1 for p in frames)
        self.health.frame_messages += len(frames)
        return True

    def _save(self, force: bool = False) -> None:
        """The cursors that moved, stored in one transaction, every SAVE_S (or now). With
        leases, only those of the tables still held (checked in the transaction, FOR SHARE)
        and never backwards: a service that lost a table does not move its cursor."""
        now = time.monotonic()
        if not force and now - self._saved_at < SAVE_S:
            return
        rows = [{"name": self.name, "source_table": src, "table_id": t, "last_id": v}
                for src, moved in self._unsaved.items() for t, v in moved.items()]  # fmt: skip
        if not rows:
            return
        C = MqttCursorRec
        insert = sqlite.insert if self.store.dialect == "sqlite" else postgresql.insert
        stmt = insert(C)
        stmt = stmt.on_conflict_do_update(
            index_elements=[C.name, C.source_table, C.table_id],
            set_={"last_id": stmt.excluded.last_id},
            where=C.last_id < stmt.excluded.last_id,
        )
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with self.store._write() as conn:
                if self.leases is not None:
                    ours = self.leases.ours(conn, {r["table_id"] for r in rows})
                    rows = [r for r in rows if r["table_id"] in ours]
                if rows:
                    conn.execute(stmt, rows)
        except SQLAlchemyError as e:
            raise StoreError(f"cannot save the MQTT cursor: {e}", transient=True) from None
        self._unsaved = {src: {} for src in SOURCES}
        self._saved_at = now


_BOOT_SEQ = operator.itemgetter(4, 5)  # a frame row's (boot, seq)


def _result_item(n: int, boot: int, seq: int, data: dict) -> dict[str, Any]:
    result = str(data.get("result", ""))
    return {"n": n, "boot": boot, "seq": seq, "spin": data.get("spin"), "result": result,
            "announcement": announcement(result)}  # fmt: skip


def _ready_commands(rows: list) -> list:
    """The commands that can go: in id order, up to the first one neither answered nor
    older than ANSWER_WAIT_S (its answer may still come; it goes without one after that)."""
    old = _now_us() - int(ANSWER_WAIT_S * 1e6)
    out = []
    for r in rows:
        if r.answered_us is None and r.sent_us > old:
            break
        out.append(r)
    return out
