"""The table service's database (rmc.serve.store): every test on SQLite and on PostgreSQL.

PostgreSQL is a throwaway server (tests/pgserver.py) started once per test process; its tests
skip, with the reason, where PostgreSQL is not installed.
"""

from __future__ import annotations

import random
import threading
import tracemalloc
import zlib

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from pgserver import PgServer, _free_port, pg_server  # noqa: F401  (pg_server: a fixture)
from sqlalchemy import func, select, text

from rmc.serve.store import (
    MIGRATIONS,
    AnswerRec,
    AnswerRow,
    AuditRec,
    Base,
    Batch,
    CommandAnswer,
    CommandRec,
    CommandRow,
    DamageRec,
    DamageRow,
    EventRec,
    EventRow,
    FrameRec,
    FrameRow,
    ResultRec,
    ResultRow,
    SessionClose,
    SessionOpen,
    SessionRec,
    Store,
    StoreError,
    display_url,
    show_bytes,
    spin_of,
)

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> str:
    """A fresh, empty database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/db/rmc.db"  # its folder does not exist yet
    return request.getfixturevalue("pg_server").new_database()


@pytest.fixture
def store(db_url):
    s = Store.open(db_url)
    yield s
    s.close()


# --- rows ---


def line(table: str, boot: int, seq: int, ftype: str, *fields: str, tag: bool = False) -> str:
    body = ",".join([f"$1,{table},{boot},{seq},{boot * 1000 + seq},{ftype}", *fields])
    if tag:
        body += "#0123456789abcdef"
    return f"{body}*{zlib.crc32(body.encode()):08x}"


def frame(table: str, boot: int, seq: int, ftype: str = "STAT", *fields: str, **kw) -> FrameRow:
    resent = kw.pop("resent", False)
    received = ("~" if resent else "") + line(table, boot, seq, ftype, *fields, **kw)
    return FrameRow(
        table, boot, seq, boot * 1000 + seq, ftype, received,
        1_700_000_000_000_000 + boot * 1_000_000 + seq, resent,
    )  # fmt: skip


def result(table: str, boot: int, seq: int, spin: int, num: str, valid: bool = True):
    return ResultRow(table, boot, seq, spin, num, "rouge", "impair", "manque",
                     1_700_000_000_000_000 + boot * 1_000_000 + seq, valid, 1)  # fmt: skip


def count(store: Store, model) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(model)).scalar_one()


ALL = (FrameRec, AnswerRec, DamageRec, EventRec, ResultRec, SessionRec, CommandRec)


def counts(store: Store) -> dict[str, int]:
    return {m.__tablename__: count(store, m) for m in ALL}


def full_batch(table: str = "T1") -> Batch:
    b = Batch()
    b.frames = [frame(table, 1, s) for s in range(1, 6)]
    b.frames.append(frame(table, 1, 6, "RES", "spin=1", "num=7", "colour=rouge"))
    b.answers = [AnswerRow(table, 1, 3, "OPEN", True, "", "$1,T1,1,0,9,ACK,cmd=OPEN*0", 5)]
    b.damage = [DamageRow(table, 7, b"$1,T1,garbage\xff", "crc")]
    b.events = [EventRow(table, "result", 0, 1, 6, {"spin": 1, "num": "7"})]
    b.results = [result(table, 1, 6, 1, "7")]
    b.opens = [SessionOpen(table, 1, 1, 2, "alice", 100)]
    b.closes = [SessionClose(table, 1, 1, 7, 1, None, 200)]
    b.commands = [CommandRow(table, 1, 3, "OPEN", [["chef", "alice"]], "alice", "chef",
                             ">1,T1,1,3,0,OPEN,chef=alice*0", 50)]  # fmt: skip
    b.answered = [CommandAnswer(table, 1, 3, True, "", "$1,T1,1,0,9,ACK,cmd=OPEN*0", 60)]
    return b


# --- opening and migrating ---


def _head() -> str:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg).get_current_head()


def _version(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))]


def test_open_migrates_to_head_and_again_is_a_no_op(db_url):
    s = Store.open(db_url)
    assert s.dialect == db_url.split(":")[0]
    assert _version(s) == [_head()]
    # the migrated schema is the models' one, exactly
    with s.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []
    s.write(full_batch())
    before = counts(s)
    s.close()
    s = Store.open(db_url)
    assert _version(s) == [_head()]
    assert counts(s) == before  # nothing touched
    s.close()


def test_open_accepts_url_forms(db_url, tmp_path):
    if db_url.startswith("sqlite"):
        path = tmp_path / "a" / "b" / "bare.db"
        s = Store.open(str(path))  # a bare path: SQLite, folders made
        assert s.dialect == "sqlite" and s.url == str(path) and path.exists()
        with s.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
        s.close()
        s = Store.open("sqlite://")  # memory: tests only
        s.write(full_batch())
        assert s.frame_count("T1") == 6
        s.close()
    else:
        for scheme in ("postgresql+psycopg", "postgres"):
            other = db_url.replace("postgresql", scheme, 1)
            s = Store.open(other)
            assert s.dialect == "postgresql" and s.url == other
            s.close()


def test_open_refuses_what_it_cannot_open_in_one_line(db_url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative path made by mistake lands here
    if db_url.startswith("sqlite"):
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        not_a_db = tmp_path / "garbage.db"
        not_a_db.write_bytes(b"this is no database, it is some text " * 200)
        bad = [f"sqlite:///{blocker}/sub/rmc.db", str(blocker / "rmc.db"), str(not_a_db),
               "mysql://u@h/db", "sqlite+nodriver:///x.db", "://", ""]  # fmt: skip
    else:
        down = f"postgresql://rmc:secret@127.0.0.1:{_free_port()}/rmc"  # nothing listens
        missing = db_url.rsplit("/", 1)[0] + "/no_such_database"
        bad = [down, missing]
    for url in bad:
        with pytest.raises(StoreError) as e:
            Store.open(url)
        message = str(e.value)
        assert message and "\n" not in message, (url, message)
        assert "Traceback" not in message and "[SQL" not in message
        assert "secret" not in message
    if db_url.startswith("postgresql"):
        with pytest.raises(StoreError) as e:
            Store.open(bad[0])
        assert e.value.transient and "127.0.0.1" in str(e.value)


def test_two_opening_one_fresh_database_migrate_it_once(db_url):
    stores: list[Store] = []
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            stores.append(Store.open(db_url))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_it) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors and len(stores) == 3
    assert _version(stores[0]) == [_head()]
    for s in stores:
        s.close()


def test_open_refuses_a_database_from_a_newer_rmc(db_url):
    s = Store.open(db_url)
    with s.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    s.close()
    with pytest.raises(StoreError) as e:
        Store.open(db_url)
    assert "9999" in str(e.value) and "\n" not in str(e.value)


def test_display_url_masks_the_password():
    assert display_url("postgresql://u:pw@h:5/db") == "postgresql://u:***@h:5/db"
    assert display_url("postgresql://u@h:5/db") == "postgresql://u@h:5/db"
    assert display_url("var/rmc.db") == "var/rmc.db"


# --- writing ---


def test_write_reads_back_in_order_and_twice_stores_once(store):
    rows = [frame("T1", b, s) for b in (2, 3) for s in range(1, 40)]
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    for i in range(0, len(shuffled), 13):
        store.write(Batch(frames=shuffled[i : i + 13]))
    assert list(store.frames("T1")) == rows
    assert list(store.frames("T1", batch=5)) == rows  # small fetches: the same
    store.write(Batch(frames=shuffled))  # all again: nothing new
    assert store.frame_count("T1") == len(rows)

    b = full_batch("T2")
    assert len(b) == 6 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
    store.write(b)
    once = counts(store)
    store.write(b)
    store.write(full_batch("T2"))
    # answers and damage are plain rows, without a key (the same bad line may come twice)
    plain = {"answers", "damage"}
    assert {k: v for k, v in counts(store).items() if k not in plain} == {
        k: v for k, v in once.items() if k not in plain
    }
    assert store.frame_count("T2") == 6
    assert len(store.events("T2")) == 1 and len(store.results("T2")) == 1
    assert len(store.sessions("T2")) == 1 and len(store.commands("T2")) == 1


def test_write_is_all_or_nothing(store):
    good = full_batch()
    store.write(Batch(frames=[frame("T1", 1, 100)]))
    before = counts(store)
    bad = full_batch()
    bad.results.append(ResultRow("T1", 1, 9, 2, None, "noir", "pair", "passe", 9, True, 1))
    with pytest.raises(StoreError) as e:
        store.write(bad)
    message = str(e.value)
    assert "\n" not in message and "cannot write batch" in message and "result" in message
    assert not e.value.transient  # the same batch will fail again
    assert counts(store) == before  # nothing of it: not the frames, not the events
    store.write(good)  # the store is still usable
    assert store.frame_count("T1") == 7

    wrong_type = Batch(frames=[frame("T1", 1, 200)],
                       events=[EventRow("T1", "fault", 0, 1, 200, {"x": object()})])  # fmt: skip
    with pytest.raises(StoreError) as e:
        store.write(wrong_type)
    assert "\n" not in str(e.value)
    assert store.frame_count("T1") == 7


def test_large_batches_of_many_tables_are_written_whole_once(store):
    """The bulk path (multi-row INSERTs on SQLite, COPY on PostgreSQL): batches of every size
    around its chunks, many tables interleaved, each row as given, written twice stored once,
    a batch of new and stored rows alike stores only the new."""
    tables = [f"T{i}" for i in range(7)]
    frames, events, results = [], [], []
    for seq in range(1, 150):
        for t in tables:
            frames.append(frame(t, 1, seq, "RES", f"spin={seq}", "num=7", resent=seq % 11 == 0))
            if seq % 3 == 0:
                data = {"spin": seq, "result": "7", "rules": ["a", "b\u00e9"], "x": None}
                events.append(EventRow(t, "result", seq // 3, 1, seq, data))
                results.append(ResultRow(t, 1, seq, seq, "7", "rouge", "impair", "manque",
                                         seq, seq % 2 == 0, None if seq % 5 else seq))  # fmt: skip
    cuts = [0, 1, 2, 257, 300, 555, 556, 1043]  # around SQLite's 256-row chunks
    for a, b in zip(cuts, [*cuts[1:], len(frames)], strict=True):
        store.write(Batch(frames=frames[a:b], events=events[a // 3 : b // 3],
                          results=results[a // 3 : b // 3]))  # fmt: skip
    store.write(Batch(frames=frames, events=events, results=results))  # all again
    for t in tables:
        mine = [f for f in frames if f.table == t]
        assert list(store.frames(t)) == mine
        got = store.events(t, last=10_000)[::-1]
        want = [e for e in events if e.table == t]
        assert [(e["kind"], e["n"], e["boot"], e["seq"], e["data"]) for e in got] == [
            (e.kind, e.n, e.boot, e.seq, e.data) for e in want
        ]
        got_r = store.results(t, last=10_000)[::-1]
        want_r = [r for r in results if r.table == t]
        assert [(r["seq"], r["spin"], r["valid"], r["session"], r["at_us"]) for r in got_r] == [
            (r.seq, r.spin, r.valid, r.session, r.rx_us) for r in want_r
        ]
        assert store.spin(t, 12)["frames"][0]["seq"] == 12  # the spin column is filled
    assert count(store, FrameRec) == len(frames)
    assert count(store, EventRec) == len(events) and count(store, ResultRec) == len(results)


def test_empty_batch_writes_nothing(store):
    store.write(Batch())
    assert store.tables() == []


# --- resuming ---


def test_resume_on_gaps_in_two_boots(store):
    assert store.resume("T1").first_boot is None
    # boot 4 first seen at seq 10 (the service joined it mid-stream, and may have stopped
    # before the frames it asked came): 1-9 are asked again; boot 5: 1-2 and 6 are
    # missing; boot 7 complete
    seqs = {4: [10, 11, 13, 14, 17], 5: [3, 4, 5, 7, 8], 7: [1, 2, 3]}
    frames = [frame("T1", b, s) for b, ss in seqs.items() for s in ss]
    random.Random(3).shuffle(frames)
    events = [EventRow("T1", "result", n, 4, 10, {}) for n in range(3)]
    events += [EventRow("T1", "fault", 0, 5, 3, {})]
    commands = [CommandRow("T1", b, c, "STATUS", [], "bob", "chef", ">x", 1)
                for b, c in ((4, 1), (4, 5), (4, 2), (5, 1))]  # fmt: skip
    store.write(Batch(frames=frames, events=events, commands=commands))
    store.write(Batch(frames=[frame("T2", 1, 1), frame("T2", 1, 3)]))  # another table
    r = store.resume("T1")
    assert r.high == {4: 17, 5: 8, 7: 3}
    assert r.missing == {4: [*range(1, 10), 12, 15, 16], 5: [1, 2, 6]}
    assert r.first_boot == 4
    assert r.events == {"result": 3, "fault": 1}
    assert r.last_cseq == {4: 5, 5: 1}
    assert r.frames == 13
    r2 = store.resume("T2")
    assert (r2.high, r2.missing, r2.first_boot, r2.frames) == ({1: 3}, {1: [2]}, 1, 2)
    empty = store.resume("T9")
    assert (empty.high, empty.missing, empty.first_boot, empty.events, empty.last_cseq,
            empty.frames) == ({}, {}, None, {}, {}, 0)  # fmt: skip


# --- queries ---


def test_results_newest_first(store):
    rows = [result("T1", 1, 10 + i, i + 1, str(i + 1), valid=i != 3) for i in range(8)]
    rows.append(result("T1", 2, 5, 9, "00"))  # a later boot: newer than every boot-1 result
    random.Random(1).shuffle(rows)
    store.write(Batch(results=rows))
    last = store.results("T1", last=3)
    assert [r["spin"] for r in last] == [9, 8, 7]
    assert set(last[0]) == {"spin", "result", "colour", "parity", "half", "at_us", "boot", "seq",
                            "valid", "session"}  # fmt: skip
    assert last[0] == {"spin": 9, "result": "00", "colour": "rouge", "parity": "impair",
                       "half": "manque", "at_us": 1_700_000_000_000_000 + 2_000_005, "boot": 2,
                       "seq": 5, "valid": True, "session": 1}  # fmt: skip
    assert [r["spin"] for r in store.results("T1", last=100)] == list(range(9, 0, -1))
    assert [r["valid"] for r in store.results("T1", last=100)].count(False) == 1
    assert 4 not in [r["spin"] for r in store.results("T1", last=100, valid_only=True)]
    assert store.results("T2") == []


def test_spin_finds_only_its_own_frames(store):
    f = []
    seq = 0
    for spin in (1, 2, 12, 21, 100):
        kinds = [("LAUNCH", ["rdir=cw"]), ("REV", ["n=1"]), ("RNVP", ["drop_ms=5"]),
                 ("RES", ["num=7", "colour=rouge"])]  # fmt: skip
        for ftype, extra in kinds:
            seq += 1
            # the spin field first, last (before the CRC) or tagged (before the tag)
            if ftype == "REV":
                fields = [*extra, f"spin={spin}"]
            else:
                fields = [f"spin={spin}", *extra]
            f.append(frame("T1", 1, seq, ftype, *fields, tag=spin == 21))
    seq += 1
    f.append(frame("T1", 1, seq, "RECALL", "n=10", "games=1:7;12:3;21:1"))  # no spin field
    seq += 1
    f.append(frame("T1", 1, seq, "FAULT", "code=edges_lost", "detail=spin%3d1"))  # escaped
    seq += 1
    f.append(frame("T1", 1, seq, "RES", "spin=1", "num=9", resent=True))  # resent, "~"
    f.append(frame("T2", 1, 1, "RES", "spin=1", "num=9"))  # another table
    res = [result("T1", 1, 4, 1, "7"), result("T1", 1, 12, 12, "7")]
    events = [EventRow("T1", "result", 0, 1, 4, {"spin": 1}),
              EventRow("T1", "result", 1, 1, 12, {"spin": 12})]  # fmt: skip
    store.write(Batch(frames=f, results=res, events=events))

    rec = store.spin("T1", 1)
    assert [(x["seq"], x["type"]) for x in rec["frames"]] == [
        (1, "LAUNCH"), (2, "REV"), (3, "RNVP"), (4, "RES"), (seq, "RES")]  # fmt: skip
    assert rec["frames"][-1]["line"].startswith("~$1,T1,")
    assert set(rec["frames"][0]) == {"boot", "seq", "type", "line", "rx_us"}
    assert rec["result"]["seq"] == 4 and rec["result"]["result"] == "7"
    assert [(e["kind"], e["n"]) for e in rec["events"]] == [("result", 0)]
    assert [x["seq"] for x in store.spin("T1", 12)["frames"]] == [9, 10, 11, 12]
    assert [x["seq"] for x in store.spin("T1", 21)["frames"]] == [13, 14, 15, 16]
    assert store.spin("T1", 21)["result"] is None
    assert len(store.spin("T1", 100)["frames"]) == 4
    assert store.spin("T1", 10) is None and store.spin("T1", 0) is None
    assert store.spin("T9", 1) is None


def test_spin_of():
    assert spin_of("$1,T1,3,41,12345,RES,spin=12,num=7*00000000") == 12
    assert spin_of("$1,T1,3,41,12345,REV,n=3,spin=1*00000000") == 1
    assert spin_of("~$1,T1,3,41,12345,RNVP,spin=21#0011223344556677*00000000") == 21
    assert spin_of("$1,T1,3,41,12345,FAULT,detail=spin%3d1*00000000") is None
    assert spin_of("$1,T1,3,41,12345,RES,xspin=1,num=7*00000000") is None
    assert spin_of("$1,T1,3,41,12345,RES,spin=01,num=7*00000000") is None  # not its spelling
    assert spin_of("$1,T1,3,41,12345,RES,spin=1") is None  # no end: not a whole frame


def test_sessions_open_and_close(store):
    store.write(Batch(opens=[SessionOpen("T1", 1, 1, 5, "alice", 100)]))
    store.write(Batch(opens=[SessionOpen("T1", 2, 1, 90, "bob", 300)],
                      closes=[SessionClose("T1", 1, 1, 80, 12, None, 250)]))  # fmt: skip
    s2, s1 = store.sessions("T1")
    assert s1 == {"session": 1, "boot": 1, "seq": 5, "chef": "alice", "opened_us": 100,
                  "closed_us": 250, "close_boot": 1, "close_seq": 80, "spins": 12,
                  "reason": None}  # fmt: skip
    assert s2["session"] == 2 and s2["closed_us"] is None
    # the same close again, and the same open: nothing changes
    store.write(Batch(opens=[SessionOpen("T1", 1, 1, 5, "alice", 100)],
                      closes=[SessionClose("T1", 1, 1, 80, 12, None, 250)]))  # fmt: skip
    assert store.sessions("T1") == [s2, s1]
    # a forced close of session 2 after a reboot
    store.write(Batch(closes=[SessionClose("T1", 2, 2, 3, 4, "chef ill", 400)]))
    top = store.sessions("T1")[0]
    assert (top["session"], top["close_boot"], top["close_seq"], top["reason"]) == (
        2, 2, 3, "chef ill")  # fmt: skip
    assert len(store.sessions("T1")) == 2 and store.sessions("T1", last=1) == [top]

    # a close whose open is not stored: a row of its own, with the close's boot/seq ...
    store.write(Batch(closes=[SessionClose("T1", 3, 2, 50, 2, None, 600)]))
    store.write(Batch(closes=[SessionClose("T1", 3, 2, 50, 2, None, 600)]))  # again
    orphan = store.sessions("T1")[0]
    assert (orphan["session"], orphan["boot"], orphan["seq"], orphan["chef"],
            orphan["opened_us"], orphan["closed_us"]) == (3, 2, 50, None, None, 600)  # fmt: skip
    assert len(store.sessions("T1")) == 3
    # ... merged into the open's row when the open comes (resent after a gap)
    store.write(Batch(opens=[SessionOpen("T1", 3, 2, 10, "carol", 500)]))
    rows = store.sessions("T1")
    assert len(rows) == 3
    assert rows[0] == {"session": 3, "boot": 2, "seq": 10, "chef": "carol", "opened_us": 500,
                       "closed_us": 600, "close_boot": 2, "close_seq": 50, "spins": 2,
                       "reason": None}  # fmt: skip


def test_many_sessions_opened_and_closed_in_one_batch(store):
    """A batch of many tables' opens and closes (a busy service's): each close finds its
    own open, the same session number on two tables or twice on one table after a reboot
    included; a close written twice changes nothing; an orphan close is merged later."""
    opens = [SessionOpen(t, 1, 1, 5, "alice", 100) for t in ("T1", "T2")]
    opens += [SessionOpen("T1", 2, 1, 50, "bob", 300), SessionOpen("T1", 1, 2, 4, "carol", 500)]
    closes = [
        SessionClose("T1", 1, 1, 40, 3, None, 200),
        SessionClose("T2", 1, 1, 45, 4, None, 210),
        SessionClose("T1", 2, 1, 90, 5, "chef ill", 400),
        SessionClose("T1", 1, 2, 30, 6, None, 600),  # session 1 again, after a reboot
        SessionClose("T1", 1, 1, 40, 3, None, 200),  # the first close, again
        SessionClose("T2", 7, 1, 99, 2, None, 700),  # no open stored: an orphan
    ]
    store.write(Batch(opens=opens, closes=closes))
    got = {(r["session"], r["boot"], r["seq"]): r for r in store.sessions("T1")}
    closed = {k: (r["close_boot"], r["close_seq"], r["spins"], r["reason"]) for k, r in got.items()}
    assert closed == {
        (1, 1, 5): (1, 40, 3, None),
        (2, 1, 50): (1, 90, 5, "chef ill"),
        (1, 2, 4): (2, 30, 6, None),
    }
    t2 = {(r["session"], r["seq"]): (r["chef"], r["close_seq"]) for r in store.sessions("T2")}
    assert t2 == {(1, 5): ("alice", 45), (7, 99): (None, 99)}
    store.write(Batch(closes=closes))  # all again: nothing changes
    assert {(r["session"], r["boot"], r["seq"]): r for r in store.sessions("T1")} == got
    store.write(Batch(opens=[SessionOpen("T2", 7, 1, 60, "dave", 650)]))  # the orphan's open
    t2 = {(r["session"], r["seq"]): (r["chef"], r["close_seq"]) for r in store.sessions("T2")}
    assert t2 == {(1, 5): ("alice", 45), (7, 60): ("dave", 99)}


def test_commands_add_and_answer(store):
    c1 = CommandRow("T1", 3, 1, "OPEN", [("chef", "alice")], "alice", "chef", ">open", 1000)
    c2 = CommandRow("T1", 3, 2, "SET", [["key", "settle_ms"], ["value", "900"]], "eve",
                    "engineer", ">set", 2000)  # fmt: skip
    store.write(Batch(commands=[c1, c2]))
    first, second = store.commands("T1")[1], store.commands("T1")[0]
    assert first == {"boot": 3, "cseq": 1, "cmd": "OPEN", "args": [["chef", "alice"]],
                     "by": "alice", "role": "chef", "line": ">open", "sent_us": 1000,
                     "answered_us": None, "ok": None, "detail": None,
                     "answer_line": None}  # fmt: skip
    assert second["cmd"] == "SET" and second["args"] == [["key", "settle_ms"], ["value", "900"]]
    ans = CommandAnswer("T1", 3, 1, True, "", "$ack1", 1100)
    # the answer and a command sent in the same batch (the command first)
    c3 = CommandRow("T1", 3, 3, "LAST3", [], "alice", "chef", ">last3", 3000)
    a3 = CommandAnswer("T1", 3, 3, False, "state", "$ack3", 3100)
    store.write(Batch(commands=[c3], answered=[ans, a3]))
    store.write(Batch(commands=[c3], answered=[ans, a3]))  # again: the same
    # a later answer to the same command (a stale repeat) does not overwrite the first
    store.write(Batch(answered=[CommandAnswer("T1", 3, 1, False, "stale", "$late", 9999)]))
    # an answer to no stored command changes nothing
    store.write(Batch(answered=[CommandAnswer("T1", 3, 77, True, "", "$x", 1)]))
    rows = {r["cseq"]: r for r in store.commands("T1")}
    assert [r["cseq"] for r in store.commands("T1")] == [3, 2, 1]
    assert (rows[1]["ok"], rows[1]["detail"], rows[1]["answer_line"], rows[1]["answered_us"]) \
        == (True, "", "$ack1", 1100)  # fmt: skip
    assert (rows[3]["ok"], rows[3]["detail"]) == (False, "state")
    assert rows[2]["answered_us"] is None
    assert store.commands("T1", last=1)[0]["cseq"] == 3
    assert count(store, CommandRec) == 3


def test_events_newest_first_by_kind(store):
    evs = [EventRow("T1", kind, n, 1, seq, {"i": seq, "nested": {"a": [1, "x"]}})
           for kind, n, seq in [("result", 0, 3), ("fault", 0, 4), ("result", 1, 9)]]  # fmt: skip
    store.write(Batch(events=evs))
    got = store.events("T1")
    assert [(e["kind"], e["n"], e["seq"]) for e in got] == [
        ("result", 1, 9), ("fault", 0, 4), ("result", 0, 3)]  # fmt: skip
    assert got[0]["data"] == {"i": 9, "nested": {"a": [1, "x"]}}
    assert [e["seq"] for e in store.events("T1", kinds=["result"])] == [9, 3]
    assert [e["seq"] for e in store.events("T1", kinds=("fault", "tamper"))] == [4]
    assert store.events("T1", last=1)[0]["seq"] == 9
    assert store.events("T1", kinds=[]) == []


def test_tables_and_ensure_table(store):
    store.ensure_table("T1", "socket://127.0.0.1:1234")
    store.ensure_table("T1")  # the URL stays
    store.ensure_table("T3", "/dev/ttyUSB0")
    store.write(Batch(frames=[frame("T1", 1, 1), frame("T1", 1, 2), frame("T2", 1, 1)],
                      results=[result("T1", 1, 2, 1, "5")]))  # fmt: skip
    rows = {t["id"]: t for t in store.tables()}
    assert list(rows) == ["T1", "T2", "T3"]
    assert rows["T1"]["url"] == "socket://127.0.0.1:1234"
    assert (rows["T1"]["frames"], rows["T1"]["results"]) == (2, 1)
    assert rows["T1"]["last_rx_us"] == frame("T1", 1, 2).rx_us
    assert rows["T2"]["url"] is None  # named by a batch only
    assert (rows["T3"]["frames"], rows["T3"]["last_rx_us"], rows["T3"]["results"]) == (0, None, 0)
    store.ensure_table("T1", "socket://127.0.0.1:999")
    assert store.tables()[0]["url"] == "socket://127.0.0.1:999"


def test_audit_log(store):
    store.audit({"at_us": 5, "who": None, "role": None, "method": "POST",
                 "path": "/api/tables/T1/open", "status": 401, "reason": "no token"})  # fmt: skip
    store.audit({"at_us": 9, "who": "alice", "role": "chef", "method": "POST",
                 "path": "/api/tables/T1/open", "status": 200, "reason": "ok"})  # fmt: skip
    log = store.audit_log()
    assert [(r["status"], r["who"]) for r in log] == [(200, "alice"), (401, None)]
    assert log[1] == {"at_us": 5, "who": None, "role": None, "method": "POST",
                      "path": "/api/tables/T1/open", "status": 401,
                      "reason": "no token"}  # fmt: skip
    assert len(store.audit_log(last=1)) == 1
    with pytest.raises(StoreError):
        store.audit({"status": 500})  # no method, no path
    assert count(store, AuditRec) == 2


def test_damage_kept_as_bytes(store):
    raw = b"$1,T1,\x00\xff garbage*zz"
    store.write(Batch(damage=[DamageRow("T1", 10, raw, "crc"), DamageRow("T1", 20, b"hi", "x")]))
    with store.engine.connect() as conn:
        stored = conn.execute(select(DamageRec.line).order_by(DamageRec.rx_us)).scalars().all()
    assert stored == [raw, b"hi"]
    got = store.damage("T1")
    assert [d["why"] for d in got] == ["x", "crc"]
    assert got[1]["line"] == "$1,T1,\\x00\\xff garbage*zz"
    assert show_bytes(b"a\\b\n") == "a\\x5cb\\x0a"


# --- streaming ---


def test_frames_streams_a_large_table(store):
    n, per = 50_000, 5000
    rows = [frame("T1", 1 + i // 30_000, 1 + i % 30_000, "REV", f"spin={i // 40}", "n=1")
            for i in range(n)]  # fmt: skip
    order = list(range(0, n, per))
    random.Random(5).shuffle(order)  # batches written out of order
    for i in order:
        store.write(Batch(frames=rows[i : i + per]))
    assert store.frame_count("T1") == n
    # in (boot, seq) order, all of them, without holding them all: memory stays flat
    tracemalloc.start()
    try:
        seen = 0
        prev = (0, 0)
        for f in store.frames("T1", batch=1000):
            key = (f.boot, f.seq)
            assert key > prev
            prev = key
            seen += 1
        _, streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        held = list(store.frames("T1", batch=1000))
        _, loaded = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == n and held == rows
    assert streamed < loaded / 4, (streamed, loaded)


def test_frames_between_times(store):
    rows = [frame("T1", 1, s) for s in range(1, 11)]
    store.write(Batch(frames=rows))
    t = [f.rx_us for f in rows]
    assert list(store.frames("T1", since_us=t[3])) == rows[3:]
    assert list(store.frames("T1", until_us=t[3])) == rows[:3]
    assert list(store.frames("T1", since_us=t[2], until_us=t[5])) == rows[2:5]
    assert list(store.frames("T2")) == []


# --- threads ---


def test_queries_while_the_writer_writes(store):
    """One writer thread, readers in others: no error, readers see whole batches only."""
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for k in range(40):
                seqs = range(1 + 50 * k, 51 + 50 * k)
                store.write(Batch(frames=[frame("T1", 1, s) for s in seqs],
                                  results=[result("T1", 1, s, s, "7") for s in seqs]))  # fmt: skip
        except BaseException as e:
            errors.append(e)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                c = store.frame_count("T1")
                assert c % 50 == 0  # a batch is there whole or not at all
                store.results("T1", last=5)
                store.tables()
                store.resume("T1")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in "ab"]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors, errors
    assert store.frame_count("T1") == 2000
    assert store.resume("T1").missing == {}


def test_reopen_finds_the_rows(db_url):
    """Closed and opened again (the service's restart): the rows are there."""
    s = Store.open(db_url)
    s.write(full_batch())
    s.close()
    s = Store.open(db_url)
    assert s.frame_count("T1") == 6 and s.resume("T1").high == {1: 6}
    assert s.sessions("T1")[0]["close_seq"] == 7
    s.close()


def test_postgresql_going_away_and_back():
    """The server killed under an open store: a write fails (transient, one line), nothing is
    half-written; once the server is back the same store writes again, no reopening."""
    reason = PgServer.missing_reason()
    if reason:
        pytest.skip(reason)
    with PgServer() as pg:
        s = Store.open(pg.new_database())
        s.write(Batch(frames=[frame("T1", 1, 1)]))
        pg.kill()
        with pytest.raises(StoreError) as e:
            s.write(Batch(frames=[frame("T1", 1, 2)]))
        assert e.value.transient and "\n" not in str(e.value)
        with pytest.raises(StoreError):
            s.results("T1")  # a read too: StoreError, not a raw driver error
        pg.restart()
        s.write(Batch(frames=[frame("T1", 1, 2)]))
        assert [f.seq for f in s.frames("T1")] == [1, 2]
        s.close()
