"""`rmc demo` end to end, shorter: the real mpremote deploys the mpy-cross-compiled firmware to
the virtual board, the firmware plays a simulated session (an object incident and a void
among its spins), the host records, checks and settles it. The host's results, voids and
faults must be the simulator's truth exactly; the files must be there; money is conserved.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rmc.demo import report
from rmc.demo.run import DemoConfig, play
from rmc.demo.session import default_scenarios
from rmc.trace import read_trace
from rmcfw import proto

SPINS = 8
SEED = 2019


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    run = play(DemoConfig(spins=SPINS, seed=SEED, out=out))
    summary = report.summarize(run)
    files = report.write_report(run, summary)
    return run, summary, files


def test_the_session_has_an_incident_and_a_void():
    assert default_scenarios(SPINS) == ("object@2", "same_dir@5")


def test_results_voids_and_faults_match_the_truth(demo):
    run, s, _ = demo
    truth = run.session
    assert len(run.spins) == SPINS == s.compared
    want = {}
    for r in truth.truth:
        n = r.get("spin")
        if r.get("event") == "void":
            want.setdefault(n, f"void:{r['reason']}")
        elif r.get("event") == "rest" and not r.get("void"):
            want.setdefault(n, f"result:{r['pocket']}")
    got = {
        sp.launch_no: f"result:{sp.result}" if sp.result is not None else f"void:{sp.void}"
        for sp in run.spins
    }
    assert got == want
    assert [sp.spin for sp in run.spins] == list(range(1, SPINS + 1))  # a fresh board
    # by time, through the rig's comparison (frames on the session's clock)
    assert s.agree == s.compared, [c.__dict__ for c in s.comparison.spins if not c.ok]
    assert not [p for c in s.comparison.spins for p in c.problems]
    # faults: every truth fault seen, and each FAULT the firmware raised is the incident's
    assert s.comparison.faults_matched == s.comparison.faults_expected
    inc = [sp for sp in run.spins if sp.void == proto.V_OBJECT]
    assert len(inc) == 1 and inc[0].incident == ["start", "ball_back", "relaunch"]
    assert {(f["code"], f["on"]) for f in run.faults} <= {
        (proto.F_TWO_POCKETS, "1"),
        (proto.F_TWO_POCKETS, "0"),
    }
    assert not run.board_events  # no crash, no IRQ error


def test_files_are_written(demo):
    run, _, files = demo
    trace = read_trace(run.trace_path)
    assert trace.header["source"] == "record" and trace.header["seed"] == SEED
    kinds = {r["kind"] for r in trace.records}
    assert {"frame", "command", "bet", "truth"} <= kinds
    assert all(isinstance(r["t_ms"], float) for r in trace.of_kind("bet"))
    cap = run.capture_path.read_bytes()
    assert b",BOOT," in cap and cap.count(b"\n") >= len(trace.of_kind("frame"))
    # the capture holds the line's bytes exactly as the trace's frames hold them
    assert [ln for ln in cap.split(b"\n") if ln] == [x for x, _ in trace.frame_lines()]
    md, *pngs = files
    assert md.name == "report.md" and "## Players" in md.read_text()
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "spin.mpy" in run.listing and "board_pico.mpy" in run.listing  # mpremote ls


def test_settlement_is_conserved_and_bets_stand_on_a_void(demo):
    run, s, _ = demo
    assert s.conserved, (s.staked, s.paid, s.placed, s.unsettled, s.replay_staked)
    assert s.replay_staked == s.staked and s.replay_paid == s.paid
    assert not s.replay_refused  # every bet before its spin's « rien ne va plus »
    assert s.placed > 0 and s.unsettled == 0
    for i, sp in enumerate(run.spins[:-1]):
        if sp.void is not None:
            nxt = run.spins[i + 1]
            assert nxt.carried == len(sp.bets) > 0
            assert nxt.bets[: nxt.carried] == sp.bets
    settled = [sp for sp in run.spins if sp.statement is not None]
    assert all(sp.statement.result == sp.result for sp in settled)
    assert any(b.exception for sp in settled for b in sp.bets)  # the plaque by exception


def test_trace_checks_clean(demo):
    # Fails on today's firmware: its LAST3 `last` counts session results, while the
    # protocol, the simulator and the checker count spins (voided ones included), so every
    # session with a void before the last three gets `after_last_spin` (reported).
    _, s, _ = demo
    assert s.trace_check.clean, json.dumps(s.trace_check.violations, indent=1)
    assert s.capture_check.clean


def test_cli_refuses_bad_input(tmp_path):
    (tmp_path / "file").write_text("x")
    for args, msg in (
        (["--out", str(tmp_path / "file")], "is not a folder"),
        (["--spins", "3"], "spins must be between"),
        (["--speed", "-1"], "--speed must be >= 0"),
        (["--seed", "-2"], "--seed must be a non-negative"),
    ):
        p = subprocess.run(
            [sys.executable, "-m", "rmc", "demo", "--out", str(tmp_path / "out"), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 2, p.stdout + p.stderr
        assert msg in p.stderr
