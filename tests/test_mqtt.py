"""The service's MQTT publisher (rmc.serve.mqtt) with a real Mosquitto and a real store.

Rows written to the store (SQLite, and a throwaway PostgreSQL) reach the broker in id order,
each once after dropping duplicates by key; the retained results and state are the store's;
a broker stopped for a while mid-stream loses nothing; a publisher that lost its cursor's
last saves publishes rows again, which a subscriber drops by key. Every wait polls for its
condition.
"""

from __future__ import annotations

import json
import time

import pytest
from mqtt_support import Heard, mosquitto_fixture, wait_until  # noqa: F401  (`mosquitto`)
from pgserver import pg_server  # noqa: F401  (fixture)

from rmc.frames import decode
from rmc.serve.derive import Deriver
from rmc.serve.mqtt import MqttError, Publisher, _ready_commands, check_prefix, parse_url
from rmc.serve.simtable import make_frames, table_key
from rmc.serve.store import Batch, FrameRow, MqttCursorRec, Store
from rmcfw import proto

SECRET = bytes(range(32))
PREFIX = "rmc/test"
TIMEOUT = 120.0


def wait_for(cond, what: str, timeout: float = TIMEOUT, state=None):
    return wait_until(cond, what, timeout, state)


class Feed:
    """A table's scripted frames written to the store in batches, with what the rules derive
    from them, as the service writes them."""

    def __init__(self, table: str, n: int) -> None:
        self.table = table
        self.lines = [x.rstrip(b"\n") for x in make_frames(table, n, key=table_key(SECRET, table))]
        self.deriver = Deriver(table)
        self.at = 0

    def batch(self, count: int) -> Batch:
        b = Batch()
        for line in self.lines[self.at : self.at + count]:
            f = decode(line)
            rx = 1_000_000 + f.seq
            b.frames.append(FrameRow(self.table, f.boot, f.seq, f.ms, f.type, line.decode(), rx,
                                     False))  # fmt: skip
            self.deriver.add(f, rx)
        self.at = min(self.at + count, len(self.lines))
        d = self.deriver.advance(None)
        b.events, b.results, b.opens, b.closes = d.events, d.results, d.opens, d.closes
        return b


def frame_messages(heard: Heard, table: str) -> list[list[bytes]]:
    """The table's frames messages heard, each as its lines."""
    return [
        m.payload.split(b"\n") for m in heard.where(lambda m: m.topic == f"{PREFIX}/{table}/frames")
    ]


def frame_lines(heard: Heard, table: str) -> list[bytes]:
    """Every frame line heard, duplicates included, in the order heard."""
    return [line for msg in frame_messages(heard, table) for line in msg]


def frames_once(heard: Heard, table: str) -> list[bytes]:
    """The table's frames heard, duplicates dropped by (boot, seq), in the order first heard."""
    seen, out = set(), []
    for line in frame_lines(heard, table):
        f = decode(line.lstrip(b"~"))
        if (f.boot, f.seq) not in seen:
            seen.add((f.boot, f.seq))
            out.append(line)
    return out


def key_of(line: bytes) -> tuple[int, int]:
    f = decode(line.lstrip(b"~"))
    return f.boot, f.seq


def events_once(heard: Heard, table: str) -> dict[tuple[str, int], dict]:
    out: dict[tuple[str, int], dict] = {}
    for m in heard.where(lambda m: m.topic.startswith(f"{PREFIX}/{table}/event/")):
        e = json.loads(m.payload)
        if e["kind"] != "command":
            out.setdefault((e["kind"], e["n"]), e)
    return out


def retained(heard: Heard, table: str) -> dict[str, dict] | None:
    """The table's retained results and state messages, once both are heard."""
    got = {
        m.topic.rsplit("/", 1)[1]: json.loads(m.payload)
        for m in heard.where(lambda m: m.topic.startswith(f"{PREFIX}/{table}/") and m.retain)
    }
    return got if {"results", "state"} <= set(got) else None


def stored_lines(store: Store, table: str) -> list[bytes]:
    """The table's frame lines in id order (the order of reception, the outbox's)."""
    from sqlalchemy import select

    from rmc.serve.store import FrameRec as F

    with store._read() as conn:
        rows = conn.execute(select(F.line).where(F.table_id == table).order_by(F.id)).all()
    return [r.line.encode() for r in rows]


def stored_events(store: Store, table: str) -> dict[tuple[str, int], dict]:
    return {(e["kind"], e["n"]): e for e in store.events(table, last=10**9)}


def test_urls_and_prefixes():
    b = parse_url("mqtt://user:pw@broker.example:1884/rmc/site1")
    assert (b.host, b.port, b.username, b.password, b.prefix) == (
        "broker.example", 1884, "user", "pw", "rmc/site1")  # fmt: skip
    assert parse_url("mqtt://127.0.0.1").port == 1883
    assert parse_url("mqtts://h").port == 8883 and parse_url("mqtts://h").tls
    for bad in ("http://h:1", "mqtt://", "mqtt://h:99999", "h:1883", "mqtt://h/a/+"):
        with pytest.raises(MqttError):
            parse_url(bad)
    assert check_prefix("/rmc/site/") == "rmc/site"
    with pytest.raises(MqttError):
        check_prefix("rmc/#")


def test_rows_reach_the_broker_in_order_once_with_retained_results_and_state(mosquitto, db):
    store = Store.open(db)
    feeds = [Feed("A01", 900), Feed("A02", 700)]
    heard = Heard(mosquitto.port, [f"{PREFIX}/#"], "t-heard")
    wait_for(lambda: heard.connects, "the subscriber connected")
    states: list[dict] = []
    pub = Publisher(store, mosquitto.url, PREFIX, on_state=states.append, page=500).start()
    try:
        for _ in range(3):
            for f in feeds:
                store.write(f.batch(300))
        for f in feeds:
            wait_for(
                lambda f=f: len(frames_once(heard, f.table)) == f.at,
                f"every frame of {f.table}",
                state=lambda f=f: (len(frames_once(heard, f.table)), f.at, pub.health.as_dict()),
            )
            want_events = stored_events(store, f.table)
            wait_for(lambda f=f, w=want_events: len(events_once(heard, f.table)) == len(w),
                     f"every event of {f.table}")  # fmt: skip
        wait_for(pub.idle, "the publisher idle")
        assert states and states[0]["type"] == "mqtt" and states[0]["connected"] is True
        for f in feeds:
            # in id order, each once: no duplicate at all on a broker that stayed up
            assert frame_lines(heard, f.table) == stored_lines(store, f.table)
            assert frame_lines(heard, f.table) == f.lines[: f.at]
            # in few messages: a page's frames of a table go together (3 batches of 300)
            msgs = frame_messages(heard, f.table)
            assert len(msgs) <= 6 and max(map(len, msgs)) >= 100, [len(m) for m in msgs]
            got = events_once(heard, f.table)
            want = stored_events(store, f.table)
            assert set(got) == set(want)
            for k, e in want.items():
                assert (got[k]["boot"], got[k]["seq"], got[k]["data"]) == (
                    e["boot"], e["seq"], e["data"])  # fmt: skip
            results = [got[k] for k in sorted(got) if k[0] == "result"]
            assert results and all(r["announcement"] for r in results)
        # the retained messages, as a subscriber arriving now gets them
        late = Heard(mosquitto.port, [f"{PREFIX}/+/results", f"{PREFIX}/+/state"], "t-late")
        try:
            for f in feeds:
                msgs = wait_for(lambda f=f: retained(late, f.table), "the retained messages")
                want = store.results(f.table, last=20, valid_only=True)
                assert len(want) == 20
                assert [(r["spin"], r["result"]) for r in msgs["results"]["results"]] == [
                    (r["spin"], r["result"]) for r in want
                ]
                stats = [decode(x) for x in f.lines[: f.at] if b",STAT," in x]
                assert msgs["state"]["seq"] <= stats[-1].seq
                assert {k: msgs["state"][k] for k in stats[-1].fields} == dict(stats[-1].fields)
        finally:
            late.close()
        # the cursor: every row acknowledged (stored every SAVE_S, and at the end)
        pub.stop()
        with store._read() as conn:
            from sqlalchemy import select

            C = MqttCursorRec
            cur = conn.execute(select(C.table_id, C.last_id).where(C.source_table == "frames"))
            cur = dict(cur.all())
        # every table's frames cursor past every frame (ids 1.. on a fresh database)
        assert cur == {f.table: sum(f.at for f in feeds) for f in feeds}
    finally:
        pub.stop()
        heard.close()
        store.close()


def test_a_broker_stopped_mid_stream_loses_nothing(mosquitto, tmp_path):
    store = Store.open(f"sqlite:///{tmp_path / 'rmc.db'}")
    feeds = [Feed("B01", 6000), Feed("B02", 6000)]
    heard = Heard(mosquitto.port, [f"{PREFIX}/#"], "t-heard")
    wait_for(lambda: heard.connects, "the subscriber connected")
    states: list[dict] = []
    pub = Publisher(store, mosquitto.url, PREFIX, on_state=states.append, page=1000).start()
    try:
        for f in feeds:
            store.write(f.batch(3000))
        wait_for(lambda: len(frames_once(heard, "B01")) > 500, "frames heard before the stop")
        mosquitto.stop()
        wait_for(lambda: not pub.health.connected, "the publisher to see the broker gone")
        assert any(s["connected"] is False and s["error"] for s in states)
        for f in feeds:  # rows written while the broker is down wait in the database
            store.write(f.batch(3000))
        mosquitto.start()
        for f in feeds:
            wait_for(
                lambda f=f: len(frames_once(heard, f.table)) == f.at,
                f"every frame of {f.table}",
                state=lambda f=f: (len(frames_once(heard, f.table)), f.at, pub.health.as_dict()),
            )
            assert frames_once(heard, f.table) == f.lines
            want = stored_events(store, f.table)
            wait_for(lambda f=f, w=want: len(events_once(heard, f.table)) == len(w),
                     f"every event of {f.table}")  # fmt: skip
            assert set(events_once(heard, f.table)) == set(want)
        assert heard.connects >= 2 and pub.health.connected
    finally:
        pub.stop()
        heard.close()
        store.close()


def test_a_publisher_whose_cursor_was_not_saved_publishes_duplicates_only(mosquitto, tmp_path):
    """As a service killed between a publication and its cursor's save: started again, it
    publishes those rows again; dropped by key, every frame and event is there once."""
    store = Store.open(f"sqlite:///{tmp_path / 'rmc.db'}")
    feed = Feed("K01", 2000)
    heard = Heard(mosquitto.port, [f"{PREFIX}/#"], "t-heard")
    wait_for(lambda: heard.connects, "the subscriber connected")
    pub = Publisher(store, mosquitto.url, PREFIX, page=300).start()
    try:
        store.write(feed.batch(800))
        with store._write() as conn:
            from sqlalchemy import text

            last = conn.execute(text("SELECT max(id) FROM frames")).scalar()

        def first_published() -> bool:  # its cursor past the 800 frames, not a page short
            return pub.idle() and pub.cursor.get("frames", {}).get("K01", 0) >= last

        wait_for(first_published, "the first rows published")
        saved = {src: dict(m) for src, m in pub.cursor.items()}
        store.write(feed.batch(1200))
        wait_for(lambda: len(frames_once(heard, "K01")) == 2000, "every frame")
        wait_for(pub.idle, "every row published")
    finally:
        pub.stop()
    # the saves after `saved` lost, as a kill -9 before them would have
    with store._write() as conn:
        from sqlalchemy import update

        C = MqttCursorRec
        for src, m in saved.items():
            for table, last in m.items():
                conn.execute(update(C).where(C.source_table == src, C.table_id == table)
                             .values(last_id=last))  # fmt: skip
    raw_before = len(frame_lines(heard, "K01"))
    pub = Publisher(store, mosquitto.url, PREFIX, page=300).start()
    try:

        def heard_again() -> bool:
            return len(frame_lines(heard, "K01")) == raw_before + 1200

        wait_for(heard_again, "the rows after the saved cursor published again")
        wait_for(pub.idle, "every row published")
        assert frames_once(heard, "K01") == feed.lines
        assert set(events_once(heard, "K01")) == set(stored_events(store, "K01"))
        # the duplicates are the frames after the saved cursor, exactly
        assert frame_lines(heard, "K01") == feed.lines + feed.lines[800:]
    finally:
        pub.stop()
        heard.close()
        store.close()


def test_a_message_holds_its_lines_in_boot_seq_order_within_its_size(mosquitto, tmp_path):
    """Frames stored out of order (resent after a gap, with their "~") go out sorted by
    (boot, seq) within a message; no message passes max_bytes; every line once, as stored."""
    store = Store.open(f"sqlite:///{tmp_path / 'rmc.db'}")
    feed = Feed("S01", 1500)
    held = set(range(100, 140))  # lost on the line, resent after the later ones
    b = feed.batch(1500)
    first = [r for i, r in enumerate(b.frames) if i not in held]
    resent = [r for i, r in enumerate(b.frames) if i in held]
    for r in resent:
        r.line, r.resent = "~" + r.line, True
    b.frames = first + resent
    heard = Heard(mosquitto.port, [f"{PREFIX}/#"], "t-heard")
    wait_for(lambda: heard.connects, "the subscriber connected")
    limit = 4000
    pub = Publisher(store, mosquitto.url, PREFIX, max_bytes=limit).start()
    try:
        store.write(b)
        wait_for(lambda: len(frames_once(heard, "S01")) == 1500, "every frame")
        wait_for(pub.idle, "the publisher idle")
        msgs = frame_messages(heard, "S01")
        assert len(msgs) > 1
        for m in msgs:
            assert len(b"\n".join(m)) <= limit
            assert [key_of(x) for x in m] == sorted(key_of(x) for x in m)
        lines = frame_lines(heard, "S01")
        assert sorted(lines) == sorted(stored_lines(store, "S01"))
        assert [key_of(x) for x in lines] == [(1, s) for s in range(1, 1501)]
        assert sum(x.startswith(b"~") for x in lines) == len(held)
        assert pub.health.frames == 1500 and pub.health.published >= len(msgs)
    finally:
        pub.stop()
        heard.close()
        store.close()


def test_commands_are_published_with_their_answers(mosquitto, tmp_path):
    from rmc.serve.store import CommandAnswer, CommandRow

    store = Store.open(f"sqlite:///{tmp_path / 'rmc.db'}")
    heard = Heard(mosquitto.port, [f"{PREFIX}/+/event/command"], "t-heard")
    wait_for(lambda: heard.connects, "the subscriber connected")
    pub = Publisher(store, mosquitto.url, PREFIX).start()
    try:
        now = time.time_ns() // 1000
        line = ">1,C01,1,5,0,STATUS*0"
        row = CommandRow("C01", 1, 5, proto.C_STATUS, [], "paul", "engineer", line, now)
        store.write(Batch(commands=[row]))
        # not published before its answer (or ANSWER_WAIT_S)
        assert _ready_commands(pub._read("commands", 10)) == []
        store.write(
            Batch(answered=[CommandAnswer("C01", 1, 5, True, "", "$1,C01,1,0,0,ACK*0", now)])
        )
        got = wait_for(lambda: heard.where(lambda m: True), "the command")
        e = json.loads(got[0].payload)
        assert (e["table"], e["boot"], e["cseq"], e["ok"], e["by"]) == ("C01", 1, 5, True, "paul")
    finally:
        pub.stop()
        heard.close()
        store.close()


def test_serve_and_subscribe_refuse_a_bad_broker_url_in_one_line(capsys):
    from rmc.cli import main

    assert main(["serve", "--mqtt", "http://x", "--table", "T1=socket://127.0.0.1:1"]) == 2
    assert main(["subscribe", "mqtt://127.0.0.1:1/rmc"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "rmc serve: bad broker URL 'http://x': use mqtt://HOST:PORT (or mqtts://)",
        "rmc subscribe: cannot reach broker 127.0.0.1:1: Connection refused",
    ]


def test_the_cursors_of_revision_0002_become_one_a_table(db):
    """A database at revision 0003 with a publisher's cursors (one a source table), opened:
    revision 0004 gives every table its own cursor at the same id."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, select, text

    from rmc.serve.store import MIGRATIONS, _engine_url

    engine = create_engine(_engine_url(db)[0])
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        conn.execute(text("INSERT INTO tables (id, url, added_us) VALUES ('T1', NULL, 1), "
                          "('T2', NULL, 1)"))  # fmt: skip
        conn.execute(text("INSERT INTO mqtt_cursor (name, source_table, last_id) VALUES "
                          "('b:1/p', 'frames', 42), ('b:1/p', 'events', 7)"))  # fmt: skip
    engine.dispose()
    with Store.open(db) as store, store._read() as conn:
        C = MqttCursorRec
        rows = conn.execute(select(C.name, C.source_table, C.table_id, C.last_id)).all()
    want = [("events", t, 7) for t in ("T1", "T2")] + [("frames", t, 42) for t in ("T1", "T2")]
    assert sorted(rows) == [("b:1/p", *w) for w in want]
