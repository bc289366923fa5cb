"""A subscriber to the table service's MQTT topics that verifies what it hears (`rmc subscribe`).

Each table's frames (`{prefix}/{table}/frames`: the lines as the service received them, one
a line, several a message; each line is split off and checked alone) go
through the checker `rmc check` runs (`rmc.checker.Checker`: CRC, tag with the table's key,
numbering, duplicates, conflicts) and the decree's rules, live (`rmc.serve.derive.Deriver`,
the service's own: applied in (boot, seq) order as far as no frame is missing). A frame
heard again under a (boot, seq) already held, with the same bytes, is a publisher's duplicate
(a broker or a service restarted): it is dropped before the checker, and counted. What the
rules find is printed as it comes: results with their announcement, voids, violations,
faults, tamper. The service's own findings (`{prefix}/{table}/event/...`) are kept and its
results compared with ours at the end.

A trace (`-o`) holds each frame line once, as heard, with the subscriber's receive time:
`rmc check` reads it (docs/traces.md). One table a trace: `-o` names a file for a single
table, a folder (`{table}.jsonl` in it), or a pattern with `{table}`.
"""

from __future__ import annotations

import heapq
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.text import Text

from rmc.checker import Checker
from rmc.serve.derive import Deriver
from rmc.serve.mqtt import Broker, announcement, client
from rmc.trace import TraceWriter, make_header
from rmcfw import proto


class OutputError(ValueError):
    """A trace that cannot be written: a one-line reason."""


@dataclass
class Output:
    """Where each table's trace goes: a pattern with {table}, a folder, or one file (for
    the first table heard; `--table` names it)."""

    path: str
    force: bool = False
    single: str | None = None  # the table the single file was given to

    def for_table(self, table: str) -> Path | None:
        """The table's trace file, or None when -o is one file taken by another table."""
        if "{table}" in self.path:
            return Path(self.path.replace("{table}", table))
        p = Path(self.path)
        if p.is_dir():
            return p / f"{table}.jsonl"
        if self.single is None:
            self.single = table
        return p if self.single == table else None

    def check(self, path: Path) -> None:
        if path.exists() and not self.force:
            raise OutputError(f"{path} exists: give --force to replace it")
        if not path.parent.is_dir():
            raise OutputError(f"cannot write {path}: no folder {path.parent}")


@dataclass
class TableFeed:
    """One table's stream as heard: its checker, its rules, its trace."""

    table: str
    checker: Checker
    deriver: Deriver
    writer: TraceWriter | None = None
    trace: Path | None = None
    heard: int = 0  # frame messages
    dropped: int = 0  # duplicates dropped by (boot, seq)
    top: tuple[int, int] | None = None  # the last frame of the unbroken run from the first
    ahead: list[tuple[int, int]] = field(default_factory=list)  # heap: frames past a gap
    told_results: bool = False  # the retained results printed (once: again at reconnections)
    ours: list[dict[str, Any]] = field(default_factory=list)  # results our rules found
    theirs: dict[int, dict[str, Any]] = field(default_factory=dict)  # the service's, by n
    events: int = 0  # the service's events heard (duplicates dropped by (kind, n))
    event_keys: set[tuple[str, int]] = field(default_factory=set)

    def place(self, key: tuple[int, int]) -> tuple[int, int] | None:
        """A new frame's key into the run; the first missing key (None: none missing)."""
        if self.top is None or _next(self.top, key):
            self.top = key
            while self.ahead and _next(self.top, self.ahead[0]):
                self.top = heapq.heappop(self.ahead)
        elif key > self.top:
            heapq.heappush(self.ahead, key)
        if not self.ahead:
            return None
        return (self.top[0], self.top[1] + 1)


def _next(top: tuple[int, int], key: tuple[int, int]) -> bool:
    return key == (top[0], top[1] + 1) or (key[0] > top[0] and key[1] == 1)


def _key(line: bytes) -> tuple[int, int] | None:
    parts = line.lstrip(b"~").split(b",", 4)
    if len(parts) < 5 or not parts[2].isdigit() or not parts[3].isdigit():
        return None
    return int(parts[2]), int(parts[3])


class Subscriber:
    """Hears the topics of `prefix` on a broker; `show(Text)` prints (literal user text)."""

    def __init__(
        self,
        broker: Broker,
        prefix: str,
        keys: dict[str, bytes] | None = None,
        output: Output | None = None,
        tables: list[str] | None = None,
        client_id: str | None = None,
        show: Callable[[Text], None] = lambda t: None,
    ) -> None:
        self.broker = broker
        self.prefix = prefix
        self.keys = dict(keys or {})
        self.output = output
        self.only = list(tables or [])
        self.own_id = client_id is None
        self.client_id = client_id or f"rmc-subscribe-{socket.gethostname()}-{os.getpid()}"
        self.show = show
        self.feeds: dict[str, TableFeed] = {}
        self.lock = threading.Lock()
        self.errors: list[str] = []  # traces that could not be written
        self.refused: str | None = None  # the broker refused the connection: why
        self.connected = threading.Event()
        self.connects = 0
        self._mqtt: Any = None
        # called with (table, boot, seq) once a frame is checked and placed in its table's
        # run (a benchmark's latency probe, tests/bench/mqtt_e2e.py); None: nothing is done
        self.on_verified: Callable[[str, int, int], None] | None = None

    # --- the connection ---

    def topics(self) -> list[str]:
        names = self.only or ["+"]
        out = []
        for t in names:
            base = f"{self.prefix}/{t}"
            out += [f"{base}/frames", f"{base}/event/#", f"{base}/results"]
        return out

    def start(self) -> Subscriber:
        """Connected and subscribed (a persistent session: what is published while this is
        away, a broker restarting included, waits at the broker). OSError when the broker
        cannot be reached."""
        c = self._mqtt = client(self.broker, self.client_id, clean=False)
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.connect(self.broker.host, self.broker.port, keepalive=30)
        c.loop_start()
        return self

    def stop(self) -> None:
        if self._mqtt is None:
            return
        self._mqtt.disconnect()
        self._mqtt.loop_stop()
        if self.own_id:
            self._forget_session()

    def _forget_session(self) -> None:
        """A session of our own making is of no use after us: the broker drops it."""
        try:
            c = client(self.broker, self.client_id, clean=True)
            c.connect(self.broker.host, self.broker.port, keepalive=5)
            c.disconnect()
        except OSError:
            pass

    def _on_connect(self, c: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            self.refused = str(reason)
            self.connected.set()
            return
        self.connects += 1
        if self.connects > 1:
            self.show(Text(f"broker {self.broker.where}: connected again", "yellow"))
        c.subscribe([(t, 1) for t in self.topics()])
        self.connected.set()

    def _on_disconnect(self, c: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            self.show(Text(f"broker {self.broker.where}: connection lost ({reason})", "yellow"))

    def _on_message(self, c: Any, userdata: Any, msg: Any) -> None:
        rx_ms = time.time() * 1000
        parts = msg.topic[len(self.prefix) + 1 :].split("/")
        if not msg.topic.startswith(self.prefix + "/") or len(parts) < 2:
            return
        table, what = parts[0], parts[1]
        with self.lock:
            try:
                if what == "frames":
                    for line in bytes(msg.payload).split(b"\n"):
                        self.frame(table, line, rx_ms)
                elif what == "event" and len(parts) == 3:
                    self.event(table, parts[2], bytes(msg.payload))
                elif what == "results" and msg.retain:
                    self.retained_results(table, bytes(msg.payload))
            except OSError as e:  # the trace's disk: said once, the rest goes on
                self._error(f"{table}: cannot write the trace: {e.strerror or e}")
                feed = self.feeds.get(table)
                if feed is not None and feed.writer is not None:
                    feed.writer = None

    # --- what is heard ---

    def feed(self, table: str) -> TableFeed:
        t = self.feeds.get(table)
        if t is not None:
            return t
        t = TableFeed(table, Checker(self.keys.get(table), table=table), Deriver(table))
        self.feeds[table] = t
        if self.output is not None:
            path = self.output.for_table(table)
            if path is None:
                self._error(f"{table}: not written: -o names one file, taken by "
                            f"{self.output.single}; use a folder or {{table}}")  # fmt: skip
            else:
                try:
                    self.output.check(path)
                    where = {"broker": self.broker.where, "prefix": self.prefix}
                    header = make_header(table, "record", wheel="unknown", mqtt=where)
                    t.writer, t.trace = TraceWriter(path, header), path
                except (OutputError, OSError) as e:
                    why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                    self._error(f"{table}: {why}")
        return t

    def _error(self, text: str) -> None:
        self.errors.append(text)
        self.show(Text(f"trace: {text}", "red"))

    def frame(self, table: str, line: bytes, rx_ms: float) -> None:
        t = self.feed(table)
        t.heard += 1
        key = _key(line)
        c = t.checker
        if key is not None:
            old = c.frames.get(key)
            if old is not None and old.line == line.lstrip(b"~"):
                t.dropped += 1  # published again (a restart): its key says so
                return
        if t.writer is not None:
            t.writer.frame(line, rx_ms)
        f = c.feed(line, rx_ms)
        if f is None or f.seq == proto.SEQ_NONE:
            if c.why in ("crc", "malformed", "auth", "foreign", "conflict"):
                self.show(Text.assemble((f"{table} {c.why}", "red"), " ", line.decode("latin-1")))
            return
        t.deriver.add(f, int(rx_ms * 1000))
        was_whole = not t.ahead
        missing = t.place((f.boot, f.seq))
        if self.on_verified is not None:
            self.on_verified(table, f.boot, f.seq)
        if missing is not None and was_whole:  # told once a gap opens, not at each frame
            self.show(Text(f"{table} gap: boot {missing[0]} from seq {missing[1]} missing",
                           "yellow"))  # fmt: skip
        for e in t.deriver.advance(missing).events:
            self.finding(t, e.kind, e.data)

    def finding(self, t: TableFeed, kind: str, data: dict[str, Any]) -> None:
        """What our own rules found: printed as it comes."""
        if kind == "result":
            t.ours.append(data)
            said = announcement(str(data.get("result"))) or str(data.get("result"))
            self.show(Text.assemble((f"{t.table} spin {data.get('spin')}:", "bold green"),
                                    " ", said))  # fmt: skip
            return
        style = {"void": "yellow", "fault": "yellow", "setting": "yellow"}.get(kind, "red")
        if kind in ("session_open", "session_close", "last3", "incident", "forced_close"):
            style = ""
        detail = ", ".join(f"{k}={v}" for k, v in data.items())
        self.show(Text.assemble((f"{t.table} {kind}", style), " ", detail))

    def event(self, table: str, kind: str, payload: bytes) -> None:
        """The service's own findings: kept (duplicates dropped by (kind, n)), its results
        compared with ours at the end."""
        import json

        try:
            e = json.loads(payload)
        except ValueError:
            return
        t = self.feed(table)
        n = e.get("n") if kind != "command" else (e.get("boot"), e.get("cseq"))
        key = (kind, n)
        if key in t.event_keys:
            return
        t.event_keys.add(key)  # type: ignore[arg-type]
        t.events += 1
        if kind == "result" and isinstance(n, int):
            t.theirs[n] = e.get("data") or {}

    def retained_results(self, table: str, payload: bytes) -> None:
        import json

        t = self.feed(table)
        try:
            items = json.loads(payload).get("results", [])
            said = ", ".join(str(r.get("result")) for r in items[:10])
        except (ValueError, AttributeError):
            return
        if t.told_results:
            return
        t.told_results = True
        self.show(Text.assemble((f"{table} last results", "bold"), " (newest first): ", said))

    # --- the end ---

    def finish(self) -> dict[str, dict[str, Any]]:
        """Every trace ended; per table, `rmc check`'s report as JSON with what this adds:
        `heard`, `dropped` (duplicates by key), `service_results`, `mismatches`."""
        out = {}
        with self.lock:
            for table, t in sorted(self.feeds.items()):
                if t.writer is not None:
                    t.writer.close()
                r = t.checker.report()
                j = r.to_json()
                mism = [
                    n
                    for n, x in enumerate(r.results)
                    if n in t.theirs
                    and (t.theirs[n].get("spin"), t.theirs[n].get("result"))
                    != (x["spin"], x["result"])
                ]
                j.update(heard=t.heard, dropped=t.dropped, service_results=len(t.theirs),
                         mismatches=mism, trace=str(t.trace) if t.trace else None)  # fmt: skip
                j["clean"] = r.clean and not mism
                out[table] = j
        return out
