"""The decree's rules across frames (docs/protocol.md, "Checking"), one by one."""

from __future__ import annotations

import zlib

from rmc.checker import RULES, Checker, check_bytes
from rmc.framegen import ScriptedTable, result_fields, session_lines
from rmc.trace import TraceWriter, default_wheel, make_header, wheel_id
from rmcfw import proto
from rmcfw.frames import Encoder
from rmcfw.frames import wheel_id as fw_wheel_id


class Script:
    """A scripted table whose frames can be edited before they are checked."""

    def __init__(self, prev: str = "-") -> None:
        """prev="-": the table's first boot (the recording holds every launch); "B:S": a
        later boot, the recording beginning there."""
        self.enc = Encoder("T01", 1 if prev == "-" else int(prev.split(":")[0]) + 1)
        self.lines: list[bytes] = []
        self.table = ScriptedTable(self.emit, seed=4, revs=5, status_every=0)
        self.table.boot(prev=prev)

    def emit(self, ftype: str, fields: tuple) -> None:
        self.lines.append(bytes(self.enc.frame(ftype, fields)))

    def report(self):
        c = Checker()
        c.feed_many(self.lines)
        r = c.report()
        assert r.gaps == [] and r.crc_errors == 0
        return r

    def rules(self) -> list[str]:
        return [v["rule"] for v in self.report().violations]


def _session(spins: int = 4) -> Script:
    s = Script()
    s.table.session(spins)
    return s


def test_clean_session_has_no_violation():
    assert _session(5).rules() == []


def test_rotor_not_reversed():
    s = Script()
    s.table.open()
    s.table.play()
    s.table.rdir = "ccw" if s.table.rdir == "cw" else "cw"  # the next play flips it back
    s.table.play()
    assert "rotor_not_reversed" in s.rules()


def test_ball_with_rotor_and_few_revs():
    s = Script()
    s.table.open()
    s.emit(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "cw"))
    s.emit(proto.T_RNVP, ("spin", 1))
    s.emit(proto.T_DROP, ("spin", 1, "revs", 3))
    s.emit(proto.T_RESULT, result_fields(1, "17"))
    assert s.rules() == ["ball_with_rotor", "few_revs"]


def test_revolutions_counted_from_rev_frames_when_drop_does_not():
    s = Script()
    s.table.open()
    s.emit(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "ccw"))
    for n in (1, 2, 3):
        s.emit(proto.T_REV, ("spin", 1, "n", n, "period_us", 500000))
    s.emit(proto.T_RNVP, ("spin", 1))
    s.emit(proto.T_DROP, ("spin", 1))
    s.emit(proto.T_RESULT, result_fields(1, "17"))
    assert s.rules() == ["few_revs"]


def test_drop_and_result_without_rnvp():
    s = Script()
    s.table.open()
    s.emit(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "ccw"))
    s.emit(proto.T_DROP, ("spin", 1, "revs", 9))
    s.emit(proto.T_RESULT, result_fields(1, "0"))
    assert s.rules() == ["drop_before_rnvp", "result_without_rnvp"]


def test_two_outcomes_and_no_outcome():
    s = Script()
    s.table.open()
    s.table.play()
    s.emit(proto.T_VOID, ("spin", 1, "reason", proto.V_SENSORS))
    s.emit(proto.T_LAUNCH, ("spin", 2, "rdir", "ccw", "bdir", "cw"))
    s.emit(proto.T_LAUNCH, ("spin", 3, "rdir", "cw", "bdir", "ccw"))
    assert s.rules() == ["two_outcomes", "no_outcome"]


def test_result_of_another_spin():
    s = Script()
    s.table.open()
    s.emit(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "ccw"))
    s.emit(proto.T_RNVP, ("spin", 2))
    assert s.rules() == ["spin_mismatch"]


def test_pockets_chances_and_void_reasons():
    s = Script()
    s.table.open()
    s.emit(
        proto.T_RESULT,
        ("spin", 1, "num", "37", "colour", "rouge", "parity", "impair", "half", "passe"),
    )
    s.emit(proto.T_RESULT, ("spin", 2, "num", "00", "colour", "rouge", "parity", "-", "half", "-"))
    s.emit(proto.T_VOID, ("spin", 3, "reason", "croupier_sneezed"))
    # (none of them launched either, on a recording that holds every launch)
    assert s.rules() == [
        "not_a_pocket",
        "not_launched",
        "wrong_chances",
        "not_launched",
        "unknown_void_reason",
        "not_launched",
    ]
    r = s.report()
    assert r.results == []
    assert [(x["spin"], x["result"], x["rules"]) for x in r.rejected] == [
        (1, "37", ["not_a_pocket", "not_launched"]),
        (2, "00", ["not_launched", "wrong_chances"]),
    ]


def test_session_rules():
    s = Script()
    s.table.open()
    s.table.play()
    s.table.close()  # no LAST3
    s.table.play()  # while closed
    assert s.rules() == ["last_three_not_announced", "spin_while_closed"]

    s = Script()
    s.table.open()
    s.table.play()
    s.emit(proto.T_LAST_THREE, ("last", 2, "left", 1))  # too late
    s.table.play()
    s.table.play()  # spin 3, after the announced last spin 2
    s.emit(proto.T_SESSION_CLOSE, ("chef", "c", "session", 1, "spins", 3))  # lid never locked
    assert s.rules() == ["last_three_late", "after_last_spin", "lid_not_locked"]


def test_a_session_with_no_coup_closes_without_the_last_three():
    """Nothing to announce when no coup was played (the table lets such a session close):
    none launched, or every launch voided. One coup, seen or counted by the table's SCLOSE
    (a recording that missed it), needs the announcement."""
    s = Script()
    s.table.open()
    s.table.close()
    s.table.open()
    s.table.play(void="same_dir")
    s.table.close()
    assert s.rules() == []

    s = Script()
    s.table.open()
    s.table.play(void="same_dir")
    s.table.play()
    s.table.close()
    assert s.rules() == ["last_three_not_announced"]

    s = Script()
    s.table.open()
    s.emit(proto.T_SESSION_CLOSE, ("chef", "c", "session", 1, "spins", 2))
    s.emit(proto.T_LID, ("locked", 1))
    # (the table counts two coups the recording does not hold, with no gap to hide them)
    assert s.rules() == ["coup_count", "last_three_not_announced"]

    s = Script()  # a bad count: said, and the session is closed all the same
    s.table.open()
    s.table.play()
    s.emit(proto.T_SESSION_CLOSE, ("chef", "c", "session", 1, "spins", "x"))
    s.emit(proto.T_LID, ("locked", 1))
    s.table.play()
    assert s.rules() == ["bad_field", "last_three_not_announced", "spin_while_closed"]

    s = Script(prev="1:40")  # the session opened before the recording began, no count given
    s.emit(proto.T_SESSION_CLOSE, ("chef", "c", "session", 1))
    s.emit(proto.T_LID, ("locked", 1))
    assert s.rules() == ["last_three_not_announced"]


def test_last_three_repeated_as_a_countdown_is_fine():
    s = Script()
    s.table.open()
    s.table.play()
    for left in (3, 2, 1):
        s.emit(proto.T_LAST_THREE, ("last", 4, "left", left))
        s.table.play()
    s.table.close()
    assert s.rules() == []


def test_a_voided_spin_is_no_coup_of_the_last_three():
    """Decree 1-7 counts coups: a void among the last three moves no count, a 4th coup does."""
    s = Script()
    s.table.open()
    s.table.play()
    s.emit(proto.T_LAST_THREE, ("last", 4, "left", 3))
    s.table.play()
    s.table.play(void="same_dir")
    s.table.play()
    s.table.play()
    assert s.rules() == []
    s.table.play()  # a fourth coup after the announcement
    assert s.rules() == ["after_last_spin"]


def test_bad_fields_are_violations_not_crashes():
    s = Script()
    s.table.open()
    s.emit(proto.T_LAUNCH, ("spin", "one", "rdir", "cw", "bdir", "ccw"))
    s.emit(proto.T_LAUNCH, ("spin", 2))
    assert s.rules() == ["bad_field", "bad_field"]


def test_the_pocket_under_the_ball_sensor_is_a_pocket_or_a_dash():
    """LAUNCH's and DROP's `under` (the dealer's signature): a pocket label in its one
    spelling, or "-"; anything else is a bad field, and the spin is checked all the same."""
    good = Script()
    good.table.open()
    for under in ("17", "0", "00", "CMC", "-"):
        n = good.table.spin = good.table.spin + 1
        good.table.rdir = "cw" if good.table.rdir == "ccw" else "ccw"
        bdir = "ccw" if good.table.rdir == "cw" else "cw"
        good.emit(
            proto.T_LAUNCH, ("spin", n, "rdir", good.table.rdir, "bdir", bdir, "under", under)
        )
        good.emit(proto.T_RNVP, ("spin", n, "drop_ms", 1, "lead_ms", 1, "why", "fit"))
        good.emit(proto.T_DROP, ("spin", n, "revs", 9, "under", under))
        good.emit(proto.T_RESULT, result_fields(n, "5"))
    assert good.rules() == [] and len(good.report().results) == 5
    for bad in ("017", "37", "cmc", "", "x", "%2d"):
        s = Script()
        s.table.open()
        s.emit(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "ccw", "under", bad))
        s.emit(proto.T_RNVP, ("spin", 1, "drop_ms", 1, "lead_ms", 1, "why", "fit"))
        s.emit(proto.T_DROP, ("spin", 1, "revs", 9, "under", bad))
        s.emit(proto.T_RESULT, result_fields(1, "5"))
        r = s.report()
        assert [v["rule"] for v in r.violations] == ["bad_field", "bad_field"], (bad, r.violations)
        assert "under" in r.violations[0]["detail"]
        assert r.results == [{"spin": 1, "result": "5"}]  # the game's rules are kept
    # an older firmware's frames carry no `under`: nothing to say
    old = Script()
    old.table.open()
    old.emit(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "ccw"))
    old.emit(proto.T_RNVP, ("spin", 1, "drop_ms", 1, "lead_ms", 1, "why", "fit"))
    old.emit(proto.T_DROP, ("spin", 1, "revs", 9))
    old.emit(proto.T_RESULT, result_fields(1, "5"))
    assert old.rules() == []


def test_a_board_with_another_wheel_definition():
    # the board's BOOT carries the id of the pocket order it was given (rmc.trace.wheel_id)
    s = _session(2)
    c = Checker(wheel=wheel_id())
    c.feed_many(s.lines)
    assert c.report().violations == []
    swapped = list(default_wheel()["pockets"])
    swapped[0], swapped[1] = swapped[1], swapped[0]  # two pockets wired the other way round
    c = Checker(wheel=wheel_id({"pockets": swapped}))
    c.feed_many(s.lines)
    assert [v["rule"] for v in c.report().violations] == ["wheel"]
    # a BOOT whose fields do not parse carries no id: flagged, not a crash
    bad = Script()
    body = b"$1,T01,1,1,0,BOOT,fw=a,fw=b"  # a field name twice
    bad.lines[0] = body + b"*%08x" % zlib.crc32(body)
    c = Checker(wheel=wheel_id())
    c.feed_many(bad.lines)
    assert "wheel" in [v["rule"] for v in c.report().violations]
    # the firmware computes the same id from the same labels
    assert wheel_id() == fw_wheel_id(tuple(str(x) for x in default_wheel()["pockets"]))
    assert wheel_id({"pockets": []}) is None and wheel_id({"name": "unknown"}) is None


def test_a_trace_expects_the_wheel_its_header_names(tmp_path):
    # `rmc check TRACE`: the board must have booted with the wheel the trace records
    lines, _ = session_lines(3)
    swapped = dict(default_wheel())
    pockets = list(swapped["pockets"])
    pockets[5], pockets[6] = pockets[6], pockets[5]
    swapped["pockets"] = pockets
    for wheel, expected in ((None, []), (swapped, ["wheel"]), ("unknown", [])):
        path = tmp_path / "t.jsonl"
        w = TraceWriter(path, make_header("T01", "record", wheel=wheel))
        for line in lines:
            w.frame(line, 0.0)
        w.close()
        report, kind, _ = check_bytes(path.read_bytes())
        assert kind == "trace" and [v["rule"] for v in report.violations] == expected


def test_every_rule_has_a_test_here():
    text = open(__file__).read()
    for rule in RULES:
        if rule not in ("conflict", "table"):  # in test_wire_fuzz.py
            assert f'"{rule}"' in text, rule


# --- an auditor's view (issue 19): what a recording from the first boot must hold ---------


def _play_after(s: Script, *frames: tuple[str, tuple]) -> None:
    for ftype, fields in frames:
        s.emit(ftype, fields)


def test_a_result_of_a_spin_never_launched_is_rejected():
    # From the first boot (BOOT prev=-) every launch is in the recording.
    s = Script()
    s.table.open()
    s.table.play()
    s.emit(proto.T_RESULT, result_fields(7, "17"))
    r = s.report()
    assert [v["rule"] for v in r.violations] == ["not_launched"]
    assert [x["spin"] for x in r.results] == [1]
    assert [(x["spin"], x["result"], x["rules"]) for x in r.rejected] == [
        (7, "17", ["not_launched"])
    ]
    # A recording that began later excuses only its first spin's launch, made before it.
    s = Script(prev="3:80")
    s.emit(proto.T_RNVP, ("spin", 9, "drop_ms", 1500, "lead_ms", 1200, "why", "fit"))
    s.emit(proto.T_RESULT, result_fields(9, "4"))
    s.emit(proto.T_RESULT, result_fields(10, "5"))
    r = s.report()
    assert [x["spin"] for x in r.results] == [9]
    assert [x["spin"] for x in r.rejected] == [10]
    assert [v["rule"] for v in r.violations] == ["not_launched"]


def test_a_second_result_for_a_settled_spin_is_rejected():
    s = Script()
    s.table.open()
    s.table.play()
    s.table.play()
    first = s.table.results[0]
    s.emit(proto.T_RESULT, result_fields(1, "36" if first[1] != "36" else "35"))
    s.emit(proto.T_VOID, ("spin", 1, "reason", proto.V_SENSORS))
    r = s.report()
    assert [v["rule"] for v in r.violations] == ["two_outcomes", "two_outcomes"]
    assert [(x["spin"], x["result"]) for x in r.results] == s.table.results
    assert [x["rules"] for x in r.rejected] == [["two_outcomes"]]


def test_a_result_without_rnvp_is_rejected():
    s = Script()
    s.table.open()
    s.table.spin = 1
    s.emit(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "ccw"))
    s.emit(proto.T_RESULT, result_fields(1, "12"))
    r = s.report()
    assert [v["rule"] for v in r.violations] == ["result_without_rnvp"]
    assert r.results == [] and r.rejected[0]["rules"] == ["result_without_rnvp"]


def test_fields_are_read_as_the_grammar_writes_them():
    """Enumerations exactly, integers in their one spelling: anything else is bad_field."""
    for rdir, spin in (("CW", "1"), ("up", "1"), ("cw", "+1"), ("cw", "01"), ("cw", "1_0")):
        s = Script()
        s.table.open()
        s.emit(proto.T_LAUNCH, ("spin", spin, "rdir", rdir, "bdir", "ccw"))
        assert "bad_field" in s.rules(), (rdir, spin)
    s = Script()
    s.emit(proto.T_LID, ("locked", "yes"))
    s.emit(proto.T_FAULT, ("code", proto.F_ROTOR, "on", "2", "detail", ""))
    assert s.rules() == ["bad_field", "bad_field"]


def test_a_launch_before_any_session_at_first_boot():
    s = Script()  # the first boot starts closed
    s.table.play()
    assert s.rules() == ["spin_while_closed"]
    assert s.report().rejected[0]["rules"] == ["spin_while_closed"]
    s = Script(prev="2:10")  # a later boot: the session may have opened before
    s.table.play()
    assert s.rules() == []


def test_the_last_three_announced_after_the_first_of_them_closed_its_bets():
    s = Script()
    s.table.open()
    s.table.play()
    n = s.table.spin + 1
    s.emit(proto.T_LAUNCH, ("spin", n, "rdir", "ccw", "bdir", "cw"))
    for i in range(1, 6):
        s.emit(proto.T_REV, ("spin", n, "n", i, "period_us", 600000))
    s.emit(proto.T_RNVP, ("spin", n, "drop_ms", 1500, "lead_ms", 1200, "why", "fit"))
    s.emit(proto.T_LAST_THREE, ("last", 4, "left", 3))  # bets on spin n closed already
    s.emit(proto.T_DROP, ("spin", n, "revs", 5))
    s.emit(proto.T_RESULT, result_fields(n, "8"))
    r = s.report()
    assert [v["rule"] for v in r.violations] == ["last_three_late"]
    # the LAST3 frame's violation: the result itself stays valid
    assert r.results[-1]["result"] == "8" and r.rejected == []
    # Before its « rien ne va plus », or on a spin that turns out void, it is in time.
    for void in (False, True):
        s = Script()
        s.table.open()
        s.table.play()
        n = s.table.spin + 1
        s.emit(proto.T_LAUNCH, ("spin", n, "rdir", "ccw", "bdir", "cw"))
        if void:
            s.emit(proto.T_RNVP, ("spin", n, "drop_ms", 1500, "lead_ms", 1200, "why", "fit"))
        s.emit(proto.T_LAST_THREE, ("last", 4, "left", 3))
        if not void:
            s.emit(proto.T_RNVP, ("spin", n, "drop_ms", 1500, "lead_ms", 1200, "why", "fit"))
        for i in range(1, 6):
            s.emit(proto.T_REV, ("spin", n, "n", i, "period_us", 600000))
        s.emit(proto.T_DROP, ("spin", n, "revs", 5))
        s.emit(*((proto.T_VOID, ("spin", n, "reason", "sensors")) if void else
                 (proto.T_RESULT, result_fields(n, "8"))))  # fmt: skip
        assert s.rules() == [], void


def test_tamper_the_lid_opened_and_faults_left_active_are_not_clean():
    s = _session(4)
    assert s.report().clean and s.report().alerts == []
    s.emit(proto.T_LID, ("locked", 0))  # closed, then unlocked
    s.emit(proto.T_TAMPER, ("what", "lid"))
    s.emit(proto.T_FAULT, ("code", proto.F_ROTOR, "on", 1, "detail", "x"))
    s.emit(proto.T_FAULT, ("code", proto.F_BALL, "on", 1, "detail", ""))
    s.emit(proto.T_FAULT, ("code", proto.F_BALL, "on", 0, "detail", ""))
    r = s.report()
    assert r.violations == [] and r.sound and not r.clean
    assert [a["what"] for a in r.alerts] == ["lid_opened", "tamper", "fault_active"]
    assert r.active_faults == [proto.F_ROTOR]


def test_faults_still_active_at_power_up_count_until_cleared():
    enc = Encoder("T01", 5)
    boot = ("fw", "0", "wheel", "", "reset", "power", "faults", proto.F_ROTOR, "prev", "4:9")
    lines = [bytes(enc.frame(proto.T_BOOT, boot))]
    c = Checker()
    c.feed_many(lines)
    assert c.report().active_faults == [proto.F_ROTOR] and not c.report().clean
    lines.append(bytes(enc.frame(proto.T_FAULT, ("code", proto.F_ROTOR, "on", 0, "detail", ""))))
    c = Checker()
    c.feed_many(lines)
    assert c.report().active_faults == [] and c.report().clean


def test_frames_of_another_table_than_the_trace_names(tmp_path):
    s = _session(3)
    for table, rules in (("T01", []), ("T02", ["table"])):
        path = tmp_path / f"{table}.jsonl"
        with open(path, "w") as f, TraceWriter(f, make_header(table, "record")) as w:
            for line in s.lines:
                w.frame(line.rstrip(b"\n"), rx_ms=0)
        r, _, _ = check_bytes(path.read_bytes())
        assert sorted({v["rule"] for v in r.violations}) == rules, table
        if rules:
            assert r.results == [] or not r.clean


def test_every_threshold_change_is_reported_and_a_forbidden_one_is_a_violation():
    s = _session(3)
    s.emit(proto.T_CONFIG, ("key", "settle_ms", "old", 800, "new", 900, "by", "E1"))
    s.emit(proto.T_CONFIG, ("key", "min_revs", "old", 4, "new", 2, "by", "E1"))  # below 4
    s.emit(proto.T_CONFIG, ("key", "max_speed", "old", 1, "new", 2, "by", "E1"))  # no such
    s.emit(proto.T_CONFIG, ("key", "settle_ms", "old", 900, "new", 800, "by", ""))  # who?
    r = s.report()
    assert [v["rule"] for v in r.violations] == ["bad_threshold", "bad_threshold", "bad_field"]
    assert [(c["key"], c["old"], c["new"], c["by"]) for c in r.settings] == [
        ("settle_ms", 800, 900, "E1"),
        ("min_revs", 4, 2, "E1"),
        ("max_speed", 1, 2, "E1"),
        ("settle_ms", 900, 800, ""),
    ]


def test_a_forced_close_needs_no_last_three_and_is_reported():
    s = Script()
    s.table.open()
    s.table.play()
    s.emit(proto.T_SESSION_CLOSE, ("chef", "c", "session", 1, "spins", 1, "reason", "fault, rotor"))
    s.emit(proto.T_LID, ("locked", 1))
    r = s.report()
    assert r.violations == [] and r.clean
    assert [(c["coups"], c["reason"]) for c in r.forced_closes] == [(1, "fault, rotor")]


def _incident(
    s: Script, back: str | None = "17", relaunch: tuple | None = (), between: tuple = ()
) -> int:
    """Spin n stopped by an object after its « rien ne va plus », the ball put back in
    `back` (None: never seen back), then relaunched as spin n + 1."""
    s.table.spin += 1
    n = s.table.spin
    s.emit(
        proto.T_LAUNCH,
        ("spin", n, "rdir", "cw" if n % 2 else "ccw", "bdir", "ccw" if n % 2 else "cw"),
    )
    s.emit(proto.T_RNVP, ("spin", n, "drop_ms", 1, "lead_ms", 1, "why", "incident"))
    s.emit(proto.T_VOID, ("spin", n, "reason", proto.V_OBJECT))
    s.emit(proto.T_INCIDENT, ("spin", n, "step", proto.INC_START))
    if back is not None:
        s.emit(proto.T_INCIDENT, ("spin", n, "step", proto.INC_BACK, "num", back))
    for frame in between:
        s.emit(*frame)
    if relaunch is not None:
        s.emit(proto.T_INCIDENT, ("spin", n, "step", proto.INC_RELAUNCH, *relaunch))
    s.table.rdir = "cw" if n % 2 else "ccw"
    return n


def test_the_incident_procedure():
    def played(back="17", relaunch=(), bets=False, skip_relaunch=False):
        s = Script()
        s.table.open()
        s.table.rng.choice = lambda seq: "17"  # the previous coup: 17
        s.table.play()
        n = s.table.spin + 1
        between = ((proto.T_STATUS, ("state", "bets", "spin", n)),) if bets else ()
        _incident(s, back, None if skip_relaunch else relaunch, between)
        s.table.play()  # the relaunch: a spin of its own
        return s.rules()

    assert played() == []
    assert played(back="4") == ["incident_procedure"]  # put back in another pocket
    assert played(back=None) == ["incident_procedure"]  # never seen back
    assert played(relaunch=("checked", 0)) == ["incident_procedure"]
    assert played(bets=True) == ["incident_procedure"]  # bets taken in between
    assert played(skip_relaunch=True) == ["incident_procedure"]
    s = Script()
    s.table.open()
    s.table.play()
    n = s.table.spin + 1
    s.emit(proto.T_LAUNCH, ("spin", n, "rdir", "ccw", "bdir", "cw"))
    s.emit(proto.T_INCIDENT, ("spin", n, "step", proto.INC_START))  # no « rien ne va plus »
    assert "incident_procedure" in s.rules()


def test_the_session_counts_coups_as_the_recording_holds_them():
    s = Script()
    s.table.open()
    for _ in range(3):
        s.table.play()
    s.emit(proto.T_LAST_THREE, ("last", 6, "left", 3))  # 3 played: 3 left, as it says
    for _ in range(3):
        s.table.play()
    s.table.close()
    assert s.rules() == []
    s = Script()
    s.table.open()
    for _ in range(4):
        s.table.play()
    s.emit(proto.T_LAST_THREE, ("last", 6, "left", 3))  # 4 played: only 2 left
    for _ in range(2):
        s.table.play()
    s.table.close()
    assert s.rules() == ["last_three_late"]
    s = Script()
    s.table.open()
    for _ in range(3):
        s.table.play()
    s.emit(proto.T_LAST_THREE, ("last", 6, "left", 3))
    for _ in range(2):
        s.table.play()
    s.table.coups += 1  # the table's SCLOSE counts one more than was played
    s.table.close()
    assert s.rules() == ["coup_count", "closed_before_last_coup"]


def test_a_second_session_opened_over_an_open_or_unlocked_one():
    s = Script()
    s.table.open()
    s.table.open()
    assert s.rules() == ["open_while_open"]
    s = Script()
    s.table.open()
    s.table.announce_last_three()
    for _ in range(3):
        s.table.play()
    s.emit(proto.T_SESSION_CLOSE, ("chef", "c", "session", 1, "spins", 3))  # no LID after it
    s.table.open()
    assert s.rules() == ["lid_not_locked"]


def test_hop_outside_the_bounce():
    # HOP in its place (tests/test_wire_hop.py has each way out of it)
    s = Script()
    s.table.open()
    s.table.play()
    s.emit(proto.T_HOP, ("spin", 1, "lit", "17"))  # after the spin's result
    assert s.rules() == ["hop_outside_bounce"]
