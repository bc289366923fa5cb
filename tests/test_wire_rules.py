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

    def __init__(self) -> None:
        self.enc = Encoder("T01", 1)
        self.lines: list[bytes] = []
        self.table = ScriptedTable(self.emit, seed=4, revs=5, status_every=0)
        self.table.boot()

    def emit(self, ftype: str, fields: tuple) -> None:
        self.lines.append(bytes(self.enc.frame(ftype, fields)))

    def rules(self) -> list[str]:
        c = Checker()
        c.feed_many(self.lines)
        r = c.report()
        assert r.gaps == [] and r.crc_errors == 0
        return [v["rule"] for v in r.violations]


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
    assert s.rules() == ["not_a_pocket", "wrong_chances", "unknown_void_reason"]


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
    assert s.rules() == ["last_three_not_announced"]

    s = Script()  # a bad count: said, and the session is closed all the same
    s.table.open()
    s.table.play()
    s.emit(proto.T_SESSION_CLOSE, ("chef", "c", "session", 1, "spins", "x"))
    s.emit(proto.T_LID, ("locked", 1))
    s.table.play()
    assert s.rules() == ["bad_field", "last_three_not_announced", "spin_while_closed"]

    s = Script()  # the session opened before the recording began, its count not given
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
