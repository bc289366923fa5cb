"""The service's live rules (rmc.serve.derive) find exactly what `rmc check` finds in the
same frames, whatever order the frames arrive in, and a deriver restarted on the stored
frames writes only what was not written before."""

from __future__ import annotations

import random

import pytest

from rmc.checker import Checker
from rmc.framegen import ScriptedTable, result_fields
from rmc.frames import decode
from rmc.serve.derive import _LISTS, Derived, Deriver
from rmcfw import proto
from rmcfw.frames import Encoder

TABLE = "T01"


def eventful_lines() -> list[bytes]:
    """Two sessions with a void, a fault raised and cleared, a tamper, a threshold change, a
    rotor not reversed (a violation and a rejected result), and a result of a spin never
    launched."""
    enc = Encoder(TABLE, 1, None)
    lines: list[bytes] = []
    ms = [0]

    def emit(ftype: str, fields: tuple) -> None:
        ms[0] += 250
        lines.append(bytes(enc.frame(ftype, fields, ms=ms[0])))

    t = ScriptedTable(emit, seed=3, revs=6)
    t.boot()
    t.open("marie", 1)
    t.play()
    t.play(void="few_revs")
    emit(proto.T_FAULT, ("code", "pocket_stuck_on", "on", 1, "detail", "pocket 7"))
    t.play()
    emit(proto.T_FAULT, ("code", "pocket_stuck_on", "on", 0, "detail", "pocket 7"))
    emit(proto.T_TAMPER, ("what", "cmd_auth", "n", 2))
    emit(proto.T_CONFIG, ("key", "min_revs", "old", 6, "new", 8, "by", "paul"))
    t.rdir = "cw" if t.rdir == "ccw" else "ccw"  # the next spin turns the rotor as before
    t.play()
    t.announce_last_three()
    t.play()
    t.play()
    t.play()
    t.close("marie", 1)
    emit(proto.T_RESULT, result_fields(99, "17"))  # never launched, and no session open
    t.session(4, "marie")
    return lines


def frames(lines: list[bytes]):
    return [decode(ln) for ln in lines]


def expected(lines: list[bytes]) -> dict[str, list[dict]]:
    c = Checker(None, TABLE)
    c.feed_many(lines)
    r = c.report()
    return {kind: getattr(r, name) for name, kind in _LISTS}


def by_kind(rows) -> dict[str, list]:
    out: dict[str, list] = {}
    for e in rows:
        out.setdefault(e.kind, []).append(e)
    return out


def test_the_scenario_has_something_of_each_kind():
    want = expected(eventful_lines())
    for kind in ("result", "rejected", "void", "violation", "fault", "tamper", "alert", "setting"):
        assert want[kind], kind


@pytest.mark.parametrize("seed", range(6))
def test_live_rules_find_what_the_checker_finds_in_any_arrival_order(seed):
    lines = eventful_lines()
    fs = frames(lines)
    rnd = random.Random(seed)
    order = list(range(len(fs)))
    # frames arrive late in bursts (resends): shuffle windows of the stream
    for i in range(0, len(order), 7):
        window = order[i : i + rnd.randint(2, 12)]
        rnd.shuffle(window)
        order[i : i + len(window)] = window
    d = Deriver(TABLE)
    got = []
    arrived: set[int] = set()
    for i in order:
        d.add(fs[i], rx_us=1000 + i)
        arrived.add(i)
        first_missing = next((j for j in range(len(fs)) if j not in arrived), None)
        key = None if first_missing is None else (fs[first_missing].boot, fs[first_missing].seq)
        got += d.advance(key).events
    assert d.held == 0
    want = expected(lines)
    kinds = by_kind(got)
    for kind, items in want.items():
        rows = kinds.get(kind, [])
        assert [e.data for e in rows] == items, kind
        assert [e.n for e in rows] == list(range(len(items)))
    # sessions and announcements are on record as events of their own
    assert len(kinds["session_open"]) == 2 and len(kinds["session_close"]) == 2
    assert kinds["last3"]


def test_results_carry_the_frame_the_chances_and_validity():
    lines = eventful_lines()
    d = Deriver(TABLE)
    for i, f in enumerate(frames(lines)):
        d.add(f, rx_us=5_000 + i)
    out = d.advance(None)
    want = expected(lines)
    assert len(out.results) == len(want["result"]) + len(want["rejected"])
    valid = [(r.spin, r.result) for r in out.results if r.valid]
    assert valid == [(x["spin"], x["result"]) for x in want["result"]]
    rejected = [(r.spin, r.result) for r in out.results if not r.valid]
    assert rejected == [(x["spin"], x["result"]) for x in want["rejected"]]
    for r in out.results:
        assert r.colour and r.parity and r.half and r.rx_us >= 5_000
    assert [r.session for r in out.results].count(None) == 1  # the one between sessions
    assert [o.chef for o in out.opens] == ["marie", "marie"]
    assert [c.spins for c in out.closes] == [6, 4]


def test_a_restarted_deriver_writes_only_what_was_not_written():
    lines = eventful_lines()
    fs = frames(lines)
    cut = len(fs) // 2
    first = Deriver(TABLE)
    for f in fs[:cut]:
        first.add(f, 0)
    before = first.advance(None)
    done: dict[str, int] = {}
    for e in before.events:
        done[e.kind] = max(done.get(e.kind, 0), e.n + 1)
    # restarted: the stored frames fed again, then the rest
    second = Deriver(TABLE, done)
    for f in fs:
        second.add(f, 0)
    after = second.advance(None)
    both = before.events + after.events
    keys = [(e.kind, e.n) for e in both]
    assert len(keys) == len(set(keys))  # nothing twice
    whole = Deriver(TABLE)
    for f in fs:
        whole.add(f, 0)
    all_at_once = whole.advance(None)
    assert sorted(keys) == sorted((e.kind, e.n) for e in all_at_once.events)
    assert len(before.results) + len(after.results) == len(all_at_once.results)


def test_a_frame_held_behind_a_gap_waits_for_it():
    fs = frames(eventful_lines())
    d = Deriver(TABLE)
    for f in fs[:10] + fs[11:]:
        d.add(f, 0)
    missing = (fs[10].boot, fs[10].seq)
    d.advance(missing)
    assert d.fed == (fs[9].boot, fs[9].seq)
    assert d.held == len(fs) - 11
    d.add(fs[10], 0)
    d.advance(None)
    assert d.held == 0 and d.fed == (fs[-1].boot, fs[-1].seq)


def _rows(d: Derived) -> dict[str, list]:
    return {
        "events": sorted((e.kind, e.n, e.boot, e.seq, repr(e.data)) for e in d.events),
        "results": [(r.boot, r.seq, r.spin, r.result, r.valid, r.session) for r in d.results],
        "opens": d.opens,
        "closes": d.closes,
    }


@pytest.mark.parametrize("step", [2, 5, 13, 1000])
def test_frames_applied_in_bulk_give_what_one_at_a_time_gives(step):
    """The rules take the frames of an advance in runs; every row keeps the frame that
    made it, as when they are applied one by one."""
    fs = frames(eventful_lines())
    one = Deriver(TABLE)
    by_one = Derived()
    for i, f in enumerate(fs):
        one.add(f, 1000 + i)
        d = one.advance(None)
        for name in ("events", "results", "opens", "closes"):
            getattr(by_one, name).extend(getattr(d, name))
    bulk = Deriver(TABLE)
    in_bulk = Derived()
    for i in range(0, len(fs), step):
        for j, f in enumerate(fs[i : i + step], start=i):
            bulk.add(f, 1000 + j)
        d = bulk.advance(None)
        for name in ("events", "results", "opens", "closes"):
            getattr(in_bulk, name).extend(getattr(d, name))
    assert _rows(in_bulk) == _rows(by_one)
    assert bulk.state == one.state and bulk.session == one.session


def test_each_finding_has_the_frame_that_made_it():
    """A result, a rejected result and a void carry their own RES or VOID frame (they have
    no (boot, seq) in the rules' lists); the rest their own (boot, seq)."""
    fs = frames(eventful_lines())
    by_key = {(f.boot, f.seq): f for f in fs}
    d = Deriver(TABLE)
    for f in fs:
        d.add(f, 1000 + f.seq)
    out = d.advance(None)
    for e in out.events:
        f = by_key[(e.boot, e.seq)]
        if e.kind in ("result", "rejected"):
            assert f.type == proto.T_RESULT and f.fields["spin"] == str(e.data["spin"])
            assert f.fields["num"] == e.data["result"]
        elif e.kind == "void":
            assert f.type == proto.T_VOID and f.fields["spin"] == str(e.data["spin"])
        elif "boot" in e.data:
            assert (e.data["boot"], e.data["seq"]) == (e.boot, e.seq)
    for r in out.results:
        f = by_key[(r.boot, r.seq)]
        assert f.type == proto.T_RESULT and r.rx_us == 1000 + f.seq
        assert (str(r.spin), r.result) == (f.fields["spin"], f.fields["num"])


class _Loaded:
    """A wheel whose every result is the same pocket: the integrity monitor must see it."""

    def choice(self, numbers):
        return "17"


def _session_lines(spins: int, loaded: bool) -> list[bytes]:
    enc = Encoder(TABLE, 1, None)
    lines: list[bytes] = []
    ms = [0]

    def emit(ftype: str, fields: tuple) -> None:
        ms[0] += 250
        lines.append(bytes(enc.frame(ftype, fields, ms=ms[0])))

    t = ScriptedTable(emit, seed=5, revs=6, status_every=0)
    if loaded:
        t.rng = _Loaded()
    t.boot()
    t.session(spins)
    return lines


def _integrity(events) -> list:
    return [e for e in events if e.kind == "integrity"]


def test_a_loaded_wheel_raises_an_integrity_alarm_once_across_a_restart():
    fs = frames(_session_lines(150, loaded=True))
    whole = Deriver(TABLE)
    for f in fs:
        whole.add(f, 0)
    alarms = _integrity(whole.advance(None).events)
    assert alarms, "no alarm from a wheel that gives 17 every time"
    assert "17" in alarms[0].data["detector"]
    assert alarms[0].data["results"] < 150
    # restarted after the first alarm was stored: the same alarms, none written twice
    done = {"integrity": 1, **{kind: 0 for _, kind in _LISTS}}
    again = Deriver(TABLE, done)
    for f in fs:
        again.add(f, 0)
    later = _integrity(again.advance(None).events)
    assert [e.n for e in later] == [e.n for e in alarms[1:]]
    assert [e.data for e in later] == [e.data for e in alarms[1:]]


def test_a_fair_session_raises_no_integrity_alarm():
    d = Deriver(TABLE)
    for f in frames(_session_lines(150, loaded=False)):
        d.add(f, 0)
    out = d.advance(None)
    assert len(out.results) == 150 and not _integrity(out.events)
