"""Benchmark of the MQTT path (issue 23): end-to-end latency and how many tables it carries.

Run by `make bench`, or: .venv/bin/python tests/bench/bench_mqtt.py [--short] [--help]
(RMC_BENCH_SHORT=1 is --short). Figures are printed and written to build/bench/mqtt.json. It
needs a real Mosquitto (Debian: `apt-get install mosquitto`); without one it says so and
skips.

1. End to end (tests/bench/mqtt_e2e.py): N simulated tables at line rate (115200 baud, the
   scripted sessions' frames, each table's own HMAC key; 50, 100, 200, 500 by default)
   -> `rmc serve --mqtt` as a process (SQLite; PostgreSQL with --db) -> a Mosquitto of the
   bench's own on loopback -> `rmc.subscribe.Subscriber` (what `rmc subscribe` runs: CRC,
   HMAC, the frame's place in its table's sequence, the rules). Latency: from when the
   service read the frame off the table's link (its stored rx_us) to when the subscriber
   had verified it (a hook, `Subscriber.on_verified`), p50/p99 over the frames read in the
   steady window; a frame not verified by the end of the grace counts as infinite. Rates,
   and CPU of the service's process, the broker, the subscriber's thread, the simulated
   tables.
2. The ceiling: each part's CPU a frame, from the runs (the whole run, backlog included)
   and alone on one thread (the subscriber's checks; decode + HMAC, the least any checker
   does; the publisher publishing a stored backlog; the service's Store.write of the same
   rows); the broker alone with a trivial paho publisher and subscriber at the message
   rate of the most tables asked. From these: the tables at line rate this machine's cores
   carry, with this code and with only the unavoidable stages.
3. `--publisher`: the publisher alone on a stored backlog, batched or one frame a message,
   SQLite and PostgreSQL (the figures of docs/mqtt.md's "The publisher alone").

The machine's other work changes every figure: the load average is printed beside them.
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

import mqtt_e2e
from rich.console import Console
from rich.table import Table

from rmc.frames import Verifier, decode
from rmc.serve.derive import Deriver
from rmc.serve.mqtt import MAX_BYTES, PAGE, Publisher
from rmc.serve.simtable import make_frames, table_key
from rmc.serve.store import Batch, FrameRow, Store

SECRET = bytes(range(32))
TABLES = 200
FRAMES = 400  # a table's frames: 80,000 in all
TICK_FRAMES = 7  # a table's frames a batch: 50 ms at line rate (135 frames a second)
TIMEOUT_S = 600.0
GOAL_TABLES, GOAL_P99_MS = 500, 250.0  # issue 23
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


def fill(
    store: Store, tables: int, frames: int, write_cpu: list[float] | None = None
) -> tuple[int, int, dict[str, list[bytes]]]:
    """Every table's frames and derived events written in batches of TICK_FRAMES a table, as
    the service's writer gets them; (frames, events, lines by table). `write_cpu` gets the
    CPU seconds Store.write took (this thread)."""
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
            _write(store, batch, write_cpu)
            batch = Batch()
    if len(batch):
        _write(store, batch, write_cpu)
    return tables * frames, n_events, lines


def _write(store: Store, batch: Batch, cpu: list[float] | None) -> None:
    c0 = time.thread_time()
    store.write(batch)
    if cpu is not None:
        cpu.append(time.thread_time() - c0)


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
    """Frames a second on one core through rmc subscribe's checks (split from messages of
    25 lines)."""
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


def decode_rate(lines: dict[str, list[bytes]]) -> float:
    """Frames a second on one core through decode + HMAC alone: the least any verifier does."""
    n = 0
    c0 = time.thread_time()
    for t, ls in lines.items():
        v = Verifier(table_key(SECRET, t))
        for line in ls:
            decode(line, v)
        n += len(ls)
    return n / (time.thread_time() - c0)


def databases(folder: Path, which: list[str]) -> list[tuple[str, str, object]]:
    """(name, URL, server to stop) for each of `which` ("sqlite", "postgresql") that runs."""
    out: list[tuple[str, str, object]] = []
    if "sqlite" in which:
        out.append(("SQLite", f"sqlite:///{folder / 'bench.db'}", None))
    if "postgresql" in which:
        try:
            from pgserver import PgServer

            why = PgServer.missing_reason()
            if why is None:
                pg = PgServer().start()
                out.append(("PostgreSQL", pg.new_database(), pg))
            else:
                print(f"PostgreSQL skipped: {why}", file=sys.stderr)
        except Exception as e:  # a bench without PostgreSQL still says what it can
            print(f"PostgreSQL skipped: {e}", file=sys.stderr)
    return out


# --- 3. the publisher alone on a stored backlog ---------------------------------------------


def publisher_matrix(con: Console, broker, tables: int, frames: int, which: list[str]) -> list[Run]:
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="rmc-bench-mqtt-") as tmp:
        for name, url, server in databases(Path(tmp), which):
            try:
                store = Store.open(url)
                n_frames, events, _ = fill(store, tables, frames)
                for mode, page, max_bytes in (
                    ("per frame", PAGE, 1),
                    ("batched", 5000, MAX_BYTES),
                    ("batched", PAGE, MAX_BYTES),
                ):
                    r = publish_backlog(
                        store, name, broker, mode, page, max_bytes, n_frames, events
                    )
                    runs.append(r)
                    con.print(
                        f"{name} {mode} page {page}: {r.messages:,} messages, "
                        f"{r.frames:,} frames in {r.wall_s:.1f} s",
                        markup=False,
                    )
                store.close()
            finally:
                if server is not None:
                    server.stop()  # type: ignore[attr-defined]
    t = Table(
        title=f"the publisher alone: {tables} tables, {frames} frames each, backlog published",
        title_justify="left",
    )
    cols = ("db", "mode", "page", "messages", "frames/msg", "frames/s", "cores",
            "msgs/s/core", "frames/s/core", "broker cores")  # fmt: skip
    for col in cols:
        t.add_column(col, justify="left" if col in ("db", "mode") else "right")
    for r in runs:
        t.add_row(r.db, r.mode, f"{r.page:,}", f"{r.messages:,}", f"{r.lines_per_message:.1f}",
                  f"{r.frames_per_s:,.0f}", f"{r.cpu_s / r.wall_s:.2f}",
                  f"{r.msgs_per_core:,.0f}", f"{r.frames_per_core:,.0f}",
                  f"{r.broker_cpu_s / r.wall_s:.2f}")  # fmt: skip
    con.print(t)
    return runs


# --- 2. the ceiling -------------------------------------------------------------------------


@dataclass
class Stages:
    """CPU µs a frame of each part, alone on one thread (no broker unless said)."""

    decode_hmac_us: float = 0.0  # rmc.frames.decode with the table's key
    subscriber_us: float = 0.0  # Subscriber.frame: + numbering, duplicates, the rules
    store_us: float = 0.0  # the service's Store.write of the frames' rows and events (SQLite)
    publisher_us: float = 0.0  # the publisher on a stored backlog, batched (its two threads)
    events_per_frame: float = 0.0  # of the scripted sessions at line rate


def stages(broker, tables: int = 50, frames: int = 400) -> Stages:
    """Each part alone: `tables` tables' `frames` frames stored, published, checked."""
    st = Stages()
    with tempfile.TemporaryDirectory(prefix="rmc-bench-mqtt-") as tmp:
        store = Store.open(f"sqlite:///{tmp}/stages.db")
        cpu: list[float] = []
        n, events, lines = fill(store, tables, frames, cpu)
        st.store_us = sum(cpu) / n * 1e6
        st.events_per_frame = events / n
        r = publish_backlog(store, "SQLite", broker, "batched", PAGE, MAX_BYTES, n, events)
        st.publisher_us = r.cpu_s / max(1, r.frames) * 1e6
        store.close()
    st.decode_hmac_us = 1e6 / decode_rate(lines)
    st.subscriber_us = 1e6 / subscriber_rate(lines, tables)
    return st


@dataclass
class Ceiling:
    frames_per_table_s: float  # a table at line rate
    cores: int
    from_run: int  # the run (its tables) the figures of "this code" come from
    this_code_us: float  # service + broker + subscriber, a frame, from the largest run
    this_code_tables: float  # tables at line rate all the cores carry with it
    one_subscriber_tables: float  # ... one subscriber process (one core at most: the GIL)
    floor_us: float  # decode + HMAC twice, Store.write, the publisher, the broker alone
    floor_tables: float
    goal_cores: float = 0.0  # cores GOAL_TABLES at line rate take at this code's cost


def ceiling(runs: list, st: Stages, alone, fps: float) -> Ceiling | None:
    """From the CPU a frame of the largest run that verified every frame (else the one that
    verified the most; its parts' CPU is then shared by fewer frames than it should be) and
    the stages alone."""
    if not runs:
        return None
    whole = [r for r in runs if r.missing == 0]
    big = max(whole or runs, key=lambda r: (r.tables, r.frames_verified))
    cores = os.cpu_count() or 1
    this = big.service_us + big.broker_us + big.subscriber_us
    broker_frame = big.broker_us
    if alone is not None and alone.achieved_per_s and alone.frames_per_s:
        broker_frame = alone.broker_cores / alone.frames_per_s * 1e6
    floor = 2 * st.decode_hmac_us + st.store_us + st.publisher_us + broker_frame
    return Ceiling(
        fps,
        cores,
        big.tables,
        this,
        cores * 1e6 / (this * fps),
        1e6 / (max(big.subscriber_us, 1e-9) * fps),
        floor,
        cores * 1e6 / (floor * fps),
        GOAL_TABLES * fps * this / 1e6,
    )


# --- output ---------------------------------------------------------------------------------


def _ms(x: float) -> str:
    if x != x:
        return "-"
    if x == float("inf"):
        return "inf"
    return f"{x:,.0f}"


def show_e2e(con: Console, runs: list) -> None:
    t = Table(
        title="end to end: tables at line rate -> rmc serve --mqtt -> Mosquitto -> subscriber "
        "(verified)",
        title_justify="left",
    )
    cols = ("db", "tables", "load", "sent/s", "read/s", "verif/s", "miss", "p50 ms", "p99 ms",
            ">sub p99", "serve", "broker", "sub", "sim", "serve µs", "brk µs", "sub µs",
            "f/msg")  # fmt: skip
    for c in cols:
        t.add_column(c, justify="left" if c == "db" else "right", no_wrap=True)
    for r in runs:
        t.add_row(
            r.db + ("" if r.linger_s is None else f" {r.linger_s:g} s"),
            str(r.tables),
            f"{r.load[0]:.1f}",
            f"{r.sent_per_s:,.0f}",
            f"{r.read_per_s:,.0f}",
            f"{r.verified_per_s:,.0f}",
            f"{r.missing:,}",
            _ms(r.p50_ms),
            _ms(r.p99_ms),
            _ms(r.to_sub_p99_ms),
            f"{r.service_cores:.2f}",
            f"{r.broker_cores:.2f}",
            f"{r.subscriber_cores:.2f}",
            f"{r.sim_cores:.2f}",
            f"{r.service_us:.0f}",
            f"{r.broker_us:.1f}",
            f"{r.subscriber_us:.0f}",
            f"{r.frames_stored / max(1, r.frame_messages):.0f}" if r.frame_messages else "-",
        )
    con.print(t)
    con.print(
        "sent/s, read/s, verified/s: frames the tables sent, the service read, the subscriber "
        "verified, in the steady window; missing: sent, not verified by the end of the grace; "
        "p50/p99: read by the service -> verified by the subscriber (a frame never verified "
        "counts as inf); >sub p99: read -> its message handed to the subscriber; serve, "
        "broker, sub, sim: cores (CPU s per wall s) in the window of the service's process, "
        "the broker, the subscriber's thread, the simulated tables (the load, not the "
        "system); µs: CPU a frame over the whole run, backlog included; f/msg: frames a "
        "message; load: the 1-minute load average at the end of the run.",
        markup=False,
    )


def show_ceiling(con: Console, st: Stages, alone, c: Ceiling | None) -> None:
    t = Table(title="the ceiling: CPU a frame, each part", title_justify="left")
    t.add_column("part")
    t.add_column("µs / frame", justify="right")
    t.add_column("how")
    t.add_row("decode + HMAC", f"{st.decode_hmac_us:.1f}", "alone, one thread: the least any "
              "verifier does, the service and the subscriber each")  # fmt: skip
    t.add_row("the subscriber's checks", f"{st.subscriber_us:.1f}",
              "alone, one thread: Subscriber.frame (numbering, duplicates, rules)")  # fmt: skip
    t.add_row(
        "the service's Store.write",
        f"{st.store_us:.1f}",
        f"alone, SQLite: the rows and events ({st.events_per_frame:.2f} a frame)",
    )
    t.add_row("the publisher", f"{st.publisher_us:.1f}",
              "alone on a stored backlog, batched: its thread and paho's")  # fmt: skip
    con.print(t)
    if alone is not None:
        con.print(
            f"broker alone (paho publisher and subscriber, QoS 1, no rmc): "
            f"{alone.achieved_per_s:,.0f} messages/s of {alone.payload:,} bytes asked "
            f"{alone.messages_per_s:,.0f}: broker {alone.broker_cores:.2f} cores, publisher "
            f"{alone.publisher_cores:.2f}, subscriber {alone.subscriber_cores:.2f}; publish -> "
            f"received p50 {alone.p50_ms:.1f} ms, p99 {alone.p99_ms:.1f} ms; "
            f"{alone.received:,} of {alone.sent:,} received",
            markup=False,
        )
    if c is not None:
        con.print(
            f"a table at line rate sends {c.frames_per_table_s:.0f} frames/s. This code "
            f"(service + broker + subscriber, the run of {c.from_run} tables): "
            f"{c.this_code_us:.0f} µs a "
            f"frame -> {c.this_code_tables:.0f} tables on {c.cores} cores, nothing else "
            f"running; one subscriber process (one core): {c.one_subscriber_tables:.0f} "
            f"tables. The unavoidable stages alone (decode + HMAC at both ends, Store.write, "
            f"the publisher, the broker): {c.floor_us:.0f} µs a frame -> "
            f"{c.floor_tables:.0f} tables on {c.cores} cores. {GOAL_TABLES} tables at line "
            f"rate take {c.goal_cores:.1f} cores at this code's cost.",
            markup=False,
        )


def verdict(con: Console, runs: list) -> None:
    for db in dict.fromkeys(r.db for r in runs):
        rs = [r for r in runs if r.db == db]
        ok = [r for r in rs if r.keeps_up and r.p99_ms < GOAL_P99_MS]
        best = max((r.tables for r in ok), default=0)
        met = any(r.tables >= GOAL_TABLES for r in ok)
        con.print(
            f"{db}: goal {GOAL_TABLES} tables at line rate, p99 under {GOAL_P99_MS:g} ms: "
            f"{'met' if met else 'NOT met'}; most tables verified with p99 under "
            f"{GOAL_P99_MS:g} ms here: {best or 'none of those run'}",
            markup=False,
        )


# --- main -----------------------------------------------------------------------------------


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", default="50,100,200,500", help="the sweep, e.g. 10,50,200")
    ap.add_argument("--duration", type=float, default=6.0, help="seconds each run's tables send")
    ap.add_argument("--db", default="sqlite", help="sqlite,postgresql")
    ap.add_argument("--short", action="store_true",
                    help="a short run: 10 and 50 tables, 4 s (or RMC_BENCH_SHORT=1)")  # fmt: skip
    ap.add_argument("--linger", type=float, help="the publisher's LINGER_S in the service")
    ap.add_argument("--no-ceiling", action="store_true", help="the sweep alone")
    ap.add_argument(
        "--publisher",
        action="store_true",
        help="also the publisher alone on a backlog (SQLite and PostgreSQL)",
    )
    ap.add_argument("--backlog-tables", type=int, default=TABLES)
    ap.add_argument("--frames", type=int, default=FRAMES, help="--publisher: frames a table")
    ap.add_argument("--out", type=Path, default=Path("build/bench/mqtt.json"))
    a = ap.parse_args(argv)
    if a.short or os.environ.get("RMC_BENCH_SHORT"):
        a.tables, a.duration = "10,50", min(a.duration, 4.0)
    return a


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    con = Console(width=max(Console().width, 172))
    from mqtt_support import Mosquitto, find_mosquitto

    if find_mosquitto() is None:
        con.print("bench_mqtt: skipped: mosquitto not installed (apt-get install mosquitto)")
        return 0
    t0 = time.monotonic()
    fps = line_fps()
    counts = [int(x) for x in a.tables.split(",") if x]
    st, alone, backlog = None, None, []
    with Mosquitto() as broker:
        e2e = sweep(con, broker, counts, [x for x in a.db.split(",") if x], a)
        if not a.no_ceiling:
            with con.status("the parts alone..."):
                st = stages(broker)
                sq = [r for r in e2e if r.db == "SQLite"] or e2e
                if sq:  # the broker alone at the message rate of the most tables asked
                    rate, size, frames_s = _message_rate(sq, max(counts), fps, st)
                    alone = mqtt_e2e.broker_alone(broker, rate, size, 3.0 if a.short else 5.0)
                    alone.frames_per_s = frames_s
        if a.publisher:
            backlog = publisher_matrix(
                con, broker, a.backlog_tables, a.frames, ["sqlite", "postgresql"]
            )
    show_e2e(con, e2e)
    verdict(con, e2e)
    c = None
    if st is not None:
        c = ceiling([r for r in e2e if r.db == "SQLite"] or e2e, st, alone, fps)
        show_ceiling(con, st, alone, c)
    load = os.getloadavg()
    con.print(
        f"(load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on {os.cpu_count()} "
        f"cores; the bench took {time.monotonic() - t0:.0f} s; other work on the machine "
        "lowers every figure)",
        markup=False,
    )
    doc = {
        "e2e": [asdict(r) for r in e2e],
        "stages": asdict(st) if st else None,
        "broker_alone": asdict(alone) if alone else None,
        "ceiling": asdict(c) if c else None,
        "publisher": [asdict(r) for r in backlog],
        "load": load,
        "cpus": os.cpu_count(),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1, default=str))
    con.print(f"figures written to {a.out}", markup=False)
    return 0


def sweep(con: Console, broker, counts: list[int], which: list[str], a) -> list:
    """The end-to-end runs: each database, each number of tables."""
    e2e: list = []
    for name, server in _e2e_databases(which):
        try:
            for n in counts:
                with con.status(f"{name}: {n} tables, {a.duration:g} s..."):
                    # a database of its own each run (SQLite: the run makes its file)
                    new_db = getattr(server, "new_database", None)
                    pg = new_db() if new_db is not None else None
                    r = mqtt_e2e.run(n, broker, a.duration, name, pg, linger=a.linger)
                e2e.append(r)
                con.print(_line(r), markup=False)
        finally:
            if server is not None:
                server.stop()  # type: ignore[attr-defined]
    return e2e


def _e2e_databases(which: list[str]) -> list[tuple[str, object]]:
    """(name, PostgreSQL server or None for SQLite) for each of `which` that runs."""
    out: list[tuple[str, object]] = []
    if "sqlite" in which:
        out.append(("SQLite", None))
    if "postgresql" in which:
        with tempfile.TemporaryDirectory() as tmp:
            out += [(name, server) for name, _, server in databases(Path(tmp), ["postgresql"])]
    return out


def line_fps() -> float:
    """A table's frames a second at line rate (115200 baud): the scripted sessions' mean
    frame, newline included, as the simulated tables send them."""
    from rmc.serve.simtable import LINE_BPS

    sample = make_frames("B001", 400, key=table_key(SECRET, "B001"))
    return LINE_BPS / (sum(len(x) for x in sample) / len(sample))


def _message_rate(runs: list, tables: int, fps: float, st: Stages) -> tuple[float, int, float]:
    """(messages a second, bytes a message, frames a second) the service publishes for
    `tables` tables at line rate: messages a frame and bytes a message as in the smallest
    run that kept up (a steady state, not a backlog's big pages); without one, as the
    publisher's design makes them: every LINGER_S a table's frames message, its retained
    results and state, and each event."""
    from rmc.serve.mqtt import LINGER_S

    ok = [r for r in runs if r.keeps_up and r.messages]
    frames_s = tables * fps
    if not ok:
        per_frame = 3 / (fps * LINGER_S) + st.events_per_frame
        return frames_s * per_frame, int((fps * LINGER_S * 86) / 3), frames_s
    r = min(ok, key=lambda r: r.tables)
    per_frame = r.messages / max(1, r.frames_stored)
    return frames_s * per_frame, int(r.frames_stored * 86 / r.messages), frames_s


def _line(r) -> str:
    return (
        f"{r.db}, {r.tables} tables: sent {r.sent_per_s:,.0f}/s, read {r.read_per_s:,.0f}/s, "
        f"verified {r.verified_per_s:,.0f}/s, missing {r.missing:,}, p50 {_ms(r.p50_ms)} "
        f"p99 {_ms(r.p99_ms)} ms (to the subscriber p99 {_ms(r.to_sub_p99_ms)}, in it p99 "
        f"{_ms(r.in_sub_p99_ms)}), serve {r.service_cores:.2f} broker {r.broker_cores:.2f} "
        f"sub {r.subscriber_cores:.2f} sim {r.sim_cores:.2f} cores, load {r.load[0]:.1f}, "
        f"run {r.took_s:.0f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
