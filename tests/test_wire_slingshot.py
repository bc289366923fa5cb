"""Import of Cammegh SlingShot logs into traces, checked by the same checker."""

from __future__ import annotations

import json

from rmc.checker import check_bytes
from rmc.cli import main
from rmc.slingshot import import_log

LOG = """\
[2025-09-16 06:45:20.082] Receive >>> *X;2;1041;17;0;268;0
[2025-09-16 06:45:21.082] Receive >>> *X;3;1042;17;0;268;1
[2025-09-16 06:45:30.082] Receive >>> *X;4;1042;17;0;268;1
[2025-09-16 06:45:38.082] Receive >>> *X;5;1042;23;0;268;1
[2025-09-16 06:45:38.582] Receive >>> *X;5;1042;23;0;268;1
[2025-09-16 06:45:41.082] Receive >>> *X;3;1043;23;0;270;0
[2025-09-16 06:45:42.082] Receive >>> *X;3;1043;23;2;270;0
[2025-09-16 06:45:50.082] Receive >>> *X;4;1043;23;2;270;0
[2025-09-16 06:45:58.082] Receive >>> *X;5;1043;0;2;270;0
not a status line
*X;3;1044;0;4;270;1
*X;4;1044;0;0;270;1
*X;5;1044; 0;0;270;1
*X;3;1045;0;1;270;0
*X;5;1045;5;1;270;0
*X;3;1046;0;8;270;1
*X;4;1046;0;0;270;1
*X;5;1046;7;0;270;1
*X;6;1046;7;0;0;1
"""


def _trace_bytes(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def test_results_misspins_faults():
    imp = import_log(LOG)
    assert imp.status_lines == 18 and imp.skipped == [10] and imp.spins == 5
    report, kind, _ = check_bytes(_trace_bytes(imp.records))
    assert kind == "trace"
    assert imp.damage == []
    assert report.results == [{"spin": 1042, "result": "23"}, {"spin": 1044, "result": "0"}]
    assert report.voids == [
        {"spin": 1043, "reason": "same_dir"},
        {"spin": 1045, "reason": "ball_out"},
        {"spin": 1046, "reason": "few_revs"},
    ]
    assert [f["on"] for f in report.faults] == ["1", "0"]
    assert report.violations == [] and report.clean


def test_rotor_not_reversed_is_flagged():
    log = "*X;3;1;0;0;270;0\n*X;4;1;0;0;270;0\n*X;5;1;5;0;270;0\n"
    log += "*X;3;2;5;0;270;0\n*X;4;2;5;0;270;0\n*X;5;2;6;0;270;0\n"
    report, _, _ = check_bytes(_trace_bytes(import_log(log).records))
    assert [v["rule"] for v in report.violations] == ["rotor_not_reversed"]


def test_result_outside_the_wheel_is_flagged():
    # 37 on a 37-pocket wheel: no result, a damaged frame the checker counts
    log = "*X;3;1;0;0;270;0\n*X;4;1;0;0;270;0\n*X;5;1;37;0;270;0\n"
    imp = import_log(log)
    report, _, _ = check_bytes(_trace_bytes(imp.records))
    assert [n for n, _ in imp.damage] == [3] and "not a pocket" in imp.damage[0][1]
    assert report.results == [] and report.crc_errors == 1 and not report.clean


def test_cli(tmp_path, capsys):
    log = tmp_path / "wheel.log"
    log.write_text(LOG)
    out = tmp_path / "wheel.trace"
    assert main(["import-slingshot", str(log), "-o", str(out)]) == 0
    assert main(["check", str(out), "--json"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert got["input"] == "trace" and len(got["results"]) == 2
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    assert main(["import-slingshot", str(empty)]) == 2
    assert main(["import-slingshot", str(tmp_path / "missing.log")]) == 2


# --- issues 19 and 20: every status line read or reported, results on their own spin ---


def _check(imp):
    report, _, _ = check_bytes(_trace_bytes(imp.records))
    return report


def _damage_lines(imp) -> list[int]:
    return [n for n, _ in imp.damage]


def test_padded_winning_number_is_read():
    # The SlingShot 2 right-aligns the number in two characters: " 4" is 4.
    log = "*X;3;011; 0;0;270;1\n*X;4;011; 0;0;270;1\n*X;5;011; 4;0;270;1\n*X;5;011; 4;0;270;1\n"
    imp = import_log(log)
    assert imp.status_lines == 4 and imp.skipped == [] and imp.damage == []
    report = _check(imp)
    assert report.results == [{"spin": 11, "result": "4"}] and report.clean


def test_unreadable_status_line_is_damage_in_the_trace():
    log = (
        "*X;3;1;0;0;270;1\n"
        "*X;4;1;0;0;270;1\n"
        "*X;5;1;;0;270\n"  # a field short
        "*X;5;1;7;0;270;1*X;5;1;7;0;270;1\n"  # two lines run together
        "*X;5;1;7;0;270;1\n"
    )
    imp = import_log(log)
    assert _damage_lines(imp) == [3, 4] and imp.skipped == []
    report = _check(imp)
    assert report.results == [{"spin": 1, "result": "7"}]
    assert report.crc_errors == 2 and not report.clean  # what `rmc check` counts as damage
    notes = [r["text"] for r in imp.records if r["kind"] == "note"]
    assert len(notes) == 2 and notes[0].startswith("slingshot line 3: ")


def test_result_is_never_given_to_the_neighbouring_spin():
    # Spin 2's number must not become spin 1's result (its state-3 line is not in the log).
    for log in (
        "*X;3;1;0;0;270;1\n*X;4;1;0;0;270;1\n*X;4;2;0;0;270;1\n*X;5;2;9;0;270;1\n",
        "*X;3;1;0;0;270;1\n*X;4;1;0;0;270;1\n*X;5;2;9;0;270;1\n",
    ):
        imp = import_log(log)
        report = _check(imp)
        assert report.results == []
        assert _damage_lines(imp)[-1] == log.count("\n")
        assert "never seen launched" in imp.damage[-1][1]
        assert not report.clean


def test_disagreements_between_lines_are_reported():
    spin1 = "*X;3;5;0;0;270;1\n*X;4;5;0;0;270;1\n*X;5;5;9;0;270;1\n"
    cases = {
        # a spin counter that goes back
        spin1 + "*X;3;4;9;0;270;0\n": (4, "went back"),
        # a win that changes within the spin's state-5 lines
        spin1 + "*X;5;5;10;0;270;1\n": (4, "changed"),
        # a counter that jumps over spins
        spin1 + "*X;3;8;9;0;270;0\n": (4, "jumped"),
        # a state-5 line for a spin never launched, at the start of the log
        "*X;5;5;9;0;270;1\n": (1, "never seen launched"),
    }
    for log, (line, words) in cases.items():
        imp = import_log(log)
        assert _damage_lines(imp) == [line], log
        assert words in imp.damage[0][1]
        assert not _check(imp).clean
    # the first number stands: the changed one is not taken
    imp = import_log(spin1 + "*X;5;5;10;0;270;1\n")
    assert _check(imp).results == [{"spin": 5, "result": "9"}]


def test_bad_time_stamp_or_state_is_reported():
    head = "[2025-09-16 06:45:20.082] Receive >>> "
    for bad, words in (
        ("[2025-13-16 06:45:21.082] Receive >>> *X;2;1;0;0;270;1", "time stamp"),
        ("[yesterday] Receive >>> *X;2;1;0;0;270;1", "time stamp"),
        ("*X;0;1;0;0;270;1", "state 0"),
        ("*X;7;1;0;0;270;1", "state 7"),
        ("*X;9;1;0;0;270;1", "state 9"),
    ):
        imp = import_log(head + "*X;2;1;0;0;270;1\n" + bad + "\n")
        assert imp.damage and imp.damage[0][0] == 2 and words in imp.damage[0][1], bad
        assert not _check(imp).clean


def test_numbers_that_are_not_our_pockets_are_flagged():
    def spin(win: str) -> str:
        return f"*X;3;1;0;0;270;1\n*X;4;1;0;0;270;1\n*X;5;1;{win};0;270;1\n"

    # 38 pockets (American wheel): 00 is reported as 37
    assert _check(import_log(spin("37"), pockets=38)).results == [{"spin": 1, "result": "00"}]
    assert _check(import_log(spin(" 0"), pockets=38)).results == [{"spin": 1, "result": "0"}]
    for win, pockets in (("37", 37), ("38", 38), ("38", 37), ("00", 37), ("00", 38), ("05", 37)):
        imp = import_log(spin(win), pockets=pockets)
        report = _check(imp)
        assert report.results == [] and _damage_lines(imp) == [3], (win, pockets)
        assert not report.clean
    imp = import_log(spin("AB"))  # letters: not a number at all
    assert _check(imp).results == [] and _damage_lines(imp) == [3]
