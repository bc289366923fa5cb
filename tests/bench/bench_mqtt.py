"""Benchmark of the service's MQTT publisher (issue 23): messages and frames a second a core.

Run by `make bench` (or: .venv/bin/python tests/bench/bench_mqtt.py [--help]). Figures are
printed and written to build/bench/mqtt.json. It needs a real Mosquitto (Debian:
`apt-get install mosquitto`); without one it says so and skips.

A database (SQLite; PostgreSQL too where `tests/pgserver.py` can run one) is filled with the
rows of TABLES simulated tables, FRAMES frames each, written as the service writes them
(batches of every table's frames, with the events the decree's rules derive from them: a
result every ~20 frames, as `rmc.serve.simtable`'s scripted sessions at line rate). Then a
`rmc.serve.mqtt.Publisher` publishes that backlog to a Mosquitto of the bench's own, from
its first row, and the bench waits until the broker has acknowledged the last one. Nothing
subscribes: what is measured is the publisher's side (reading the rows, making the messages,
paho's work), not a subscriber's.

- "per frame": one frame a message (`max_bytes=1`), as the publisher was first written;
- "batched": a table's frames of a page in one message (64 KB at most), with pages of 5,000
  rows and of the default 20,000.

"messages" counts every message (frames, events one a message, the retained results and
state); "frames/msg" is the frame lines a message on `.../frames`.

Measured: messages and frame lines acknowledged, wall time, and the CPU of the publisher's
two threads (its own and paho's network thread, Linux /proc) -> messages and frames a second
per core of that CPU; the broker's CPU apart. The goal is 200 tables at line rate (~27,000
frames a second, `docs/serve.md`) on well under a core.

"subscriber": `rmc subscribe`'s work on the same lines (split from batched messages; CRC,
HMAC with the table's key, numbering, the decree's rules, duplicates by key), frames a
second on one core, without a broker.

The machine's other work changes every figure: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "host"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: mqtt_support, pgserver

from rich.console import Console
from rich.table import Table

from rmc.frames import decode
from rmc.serve.derive import Deriver
from rmc.serve.mqtt import MAX_BYTES, PAGE, Publisher
from rmc.serve.simtable import make_frames, table_key
from rmc.serve.store import Batch, FrameRow, Store

SECRET = bytes(range(32))
TABLES = 200
FRAMES = 400  # a table's frames: 80,000 in all
TICK_FRAMES = 7  # a table's frames a batch: 50 ms at line rate (135 frames a second)
TIMEOUT_S = 600.0
TICK = os.sysconf("SC_CLK_TCK")


def tid_cpu(tid: int | None) -> float:
    """CPU seconds of one of this process's threads (Linux /proc); 0 when it is gone."""
    if tid is None:
        return 0.0
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(rest[11]) + int(rest[12])) / TICK


def pid_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(rest[11]) + int(rest[12])) / TICK


def table_ids(n: int) -> list[str]:
    return [f"M{i:03d}" for i in range(1, n + 1)]


def fill(store: Store, tables: int, frames: int) -> tuple[int, int, dict[str, list[bytes]]]:
    """Every table's frames and derived events written in batches of TICK_FRAMES a table, as
    the service's writer gets them; (frames, events, lines by table)."""
    lines = {
        t: [x.rstrip(b"\n") for x in make_frames(t, frames, key=table_key(SECRET, t))]
        for t in table_ids(tables)
    }
    derivers = {t: Deriver(t) for t in lines}
    n_events = 0
    batch = Batch()
    for at in range(0, frames, TICK_FRAMES):
        for t, ls in lines.items():
            for line in ls[at : at + TICK_FRAMES]:
                f = decode(line)
                rx = 1_000_000 + at * 1000 + f.seq
                batch.frames.append(
                    FrameRow(t, f.boot, f.seq, f.ms, f.type, line.decode(), rx, False)
                )
                derivers[t].add(f, rx)
            d = derivers[t].advance(None)
            batch.events += d.events
            batch.results += d.results
            batch.opens += d.opens
            batch.closes += d.closes
            n_events += len(d.events)
        if len(batch) >= 20_000:
            store.write(batch)
            batch = Batch()
    if len(batch):
        store.write(batch)
    return tables * frames, n_events, lines


@dataclass
class Run:
    db: str
    mode: str
    page: int
    max_bytes: int
    messages: int
    frames: int
    events: int
    wall_s: float
    cpu_s: float  # the publisher's two threads
    broker_cpu_s: float
    msgs_per_core: float = 0.0
    frames_per_core: float = 0.0
    frames_per_s: float = 0.0
    frame_messages: int = 0
    lines_per_message: float = 0.0


def publish_backlog(
    store: Store, db: str, broker, mode: str, page: int, max_bytes: int, frames: int, events: int
) -> Run:
    prefix = f"bench/{mode.replace(' ', '-')}-{page}"  # a cursor of its own: from row 1
    pub = Publisher(store, broker.url, prefix, page=page, max_bytes=max_bytes, linger_s=0.0)
    cpu0 = broker0 = 0.0
    t0 = 0.0
    started = threading.Event()

    def sample() -> None:
        nonlocal cpu0, broker0, t0
        cpu0 = tid_cpu(pub._thread.native_id) + tid_cpu(paho_tid())
        broker0 = pid_cpu(broker.proc.pid)
        t0 = time.monotonic()
        started.set()

    def paho_tid() -> int | None:
        th = getattr(pub._mqtt, "_thread", None)
        return th.native_id if th is not None else None

    pub.start()
    deadline = time.monotonic() + 30
    while not pub.health.connected:  # connected first: the connection's wait is not counted
        if time.monotonic() > deadline:
            raise RuntimeError("the publisher did not connect to the broker")
        time.sleep(0.01)
    last_event = events_top(store)
    sample()
    deadline = time.monotonic() + TIMEOUT_S
    while pub.health.frames < frames or (pub.health.cursor or {}).get("events", 0) < last_event:
        if time.monotonic() > deadline:
            raise RuntimeError(f"not published in {TIMEOUT_S:g} s: {pub.health.as_dict()}")
        time.sleep(0.005)
    wall = time.monotonic() - t0
    cpu = tid_cpu(pub._thread.native_id) + tid_cpu(paho_tid()) - cpu0
    broker_cpu = pid_cpu(broker.proc.pid) - broker0
    msgs = pub.health.published
    pub.stop()
    r = Run(db, mode, page, max_bytes, msgs, pub.health.frames, events, wall, cpu, broker_cpu)
    core = max(cpu, 1e-9)
    r.msgs_per_core = msgs / core
    r.frames_per_core = r.frames / core
    r.frames_per_s = r.frames / wall
    r.frame_messages = pub.health.frame_messages
    r.lines_per_message = r.frames / max(1, r.frame_messages)
    return r


def events_top(store: Store) -> int:
    from sqlalchemy import func, select

    from rmc.serve.store import EventRec

    with store._read() as conn:
        return conn.execute(select(func.max(EventRec.id))).scalar() or 0


def subscriber_rate(lines: dict[str, list[bytes]], tables: int) -> float:
    """Frames a second on one core through rmc subscribe's checks (split from messages)."""
    from rmc.serve.mqtt import parse_url
    from rmc.subscribe import Subscriber

    ids = list(lines)[:tables]
    keys = {t: table_key(SECRET, t) for t in ids}
    sub = Subscriber(parse_url("mqtt://127.0.0.1"), "bench", keys)
    per_table = len(lines[ids[0]])
    payloads = [(t, b"\n".join(lines[t][i : i + 25])) for i in range(0, per_table, 25) for t in ids]
    n = sum(p.count(b"\n") + 1 for _, p in payloads)
    c0 = time.thread_time()
    for t, p in payloads:
        for line in p.split(b"\n"):
            sub.frame(t, line, 0.0)
    cpu = time.thread_time() - c0
    report = sub.finish()
    assert all(j["valid"] == per_table and not j["gaps"] for j in report.values()), "not clean"
    return n / cpu


def databases(folder: Path) -> list[tuple[str, str, object]]:
    out: list[tuple[str, str, object]] = [("SQLite", f"sqlite:///{folder / 'bench.db'}", None)]
    try:
        from pgserver import PgServer

        if PgServer.missing_reason() is None:
            pg = PgServer().start()
            out.append(("PostgreSQL", pg.new_database(), pg))
    except Exception as e:  # a bench without PostgreSQL still says what it can
        print(f"PostgreSQL skipped: {e}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=TABLES)
    ap.add_argument("--frames", type=int, default=FRAMES, help="frames a table")
    ap.add_argument("--sqlite-only", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("build/bench/mqtt.json"))
    a = ap.parse_args(argv)
    con = Console(width=max(Console().width, 120))
    from mqtt_support import Mosquitto, find_mosquitto

    if find_mosquitto() is None:
        con.print("bench_mqtt: skipped: mosquitto not installed (apt-get install mosquitto)")
        return 0
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="rmc-bench-mqtt-") as tmp, Mosquitto() as broker:
        dbs = databases(Path(tmp))
        if a.sqlite_only:
            dbs = dbs[:1]
        lines: dict[str, list[bytes]] = {}
        for name, url, server in dbs:
            try:
                store = Store.open(url)
                frames, events, lines = fill(store, a.tables, a.frames)
                for mode, page, max_bytes in (
                    ("per frame", PAGE, 1),
                    ("batched", 5000, MAX_BYTES),
                    ("batched", PAGE, MAX_BYTES),
                ):
                    r = publish_backlog(store, name, broker, mode, page, max_bytes, frames, events)
                    runs.append(r)
                    con.print(
                        f"{name} {mode} page {page}: {r.messages:,} messages, "
                        f"{r.frames:,} frames in {r.wall_s:.1f} s"
                    )
                store.close()
            finally:
                if server is not None:
                    server.stop()  # type: ignore[attr-defined]
        sub_rate = subscriber_rate(lines, min(20, a.tables))
    load = os.getloadavg()
    t = Table(
        title=f"rmc serve --mqtt: {a.tables} tables, {a.frames} frames each, backlog published"
    )
    cols = ("db", "mode", "page", "messages", "frames/msg", "frames/s", "cores",
            "msgs/s/core", "frames/s/core", "broker cores")  # fmt: skip
    for col in cols:
        t.add_column(col, justify="left" if col in ("db", "mode") else "right")
    for r in runs:
        t.add_row(
            r.db,
            r.mode,
            f"{r.page:,}",
            f"{r.messages:,}",
            f"{r.lines_per_message:.1f}",
            f"{r.frames_per_s:,.0f}",
            f"{r.cpu_s / r.wall_s:.2f}",
            f"{r.msgs_per_core:,.0f}",
            f"{r.frames_per_core:,.0f}",
            f"{r.broker_cpu_s / r.wall_s:.2f}",
        )
    con.print(t)
    con.print(
        f"subscriber (rmc subscribe's checks, HMAC verified): {sub_rate:,.0f} frames/s on one "
        f"core; load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on "
        f"{os.cpu_count()} cores"
    )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"runs": [asdict(r) for r in runs], "subscriber_frames_per_s": sub_rate, "load": load}
    a.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
