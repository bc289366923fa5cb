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
*X;5;1044;00;0;270;1
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
    assert report.results == [{"spin": 1042, "result": "23"}, {"spin": 1044, "result": "00"}]
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
    log = "*X;3;1;0;0;270;0\n*X;4;1;0;0;270;0\n*X;5;1;37;0;270;0\n"
    report, _, _ = check_bytes(_trace_bytes(import_log(log).records))
    assert [v["rule"] for v in report.violations] == ["not_a_pocket"]


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
