"""`rmc replay`: re-check, settle the bets of a trace, rerun its sensors through the core."""

from __future__ import annotations

import json

import pytest

from rmc.cli import main
from rmc.frames import decode
from rmc.replay import run_core
from rmc.trace import TraceWriter, read_trace
from rmcfw import proto
from rmcfw.frames import Encoder


@pytest.fixture(scope="module")
def sim_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("sim") / "sim.jsonl"
    assert main(["sim", "--spins", "4", "--seed", "3", "-o", str(path), "--quiet"]) == 0
    return path


def _with_frames(sim_path, out, bets=(), tamper=None):
    """The sim trace plus the frames its sensors give through the core, received at once."""
    trace = read_trace(sim_path)
    core = run_core(trace)
    assert core is not None
    with TraceWriter(out, trace.header) as w:
        for r in trace.records:
            w.write(r)
        for line in core.lines:
            f = decode(line)
            if tamper is not None and f.type == proto.T_RESULT and f.fields["spin"] == str(tamper):
                enc = Encoder(f.table, f.boot, seq=f.seq - 1)
                fields = dict(f.fields, num="CMC", colour="vert", parity="-", half="-")
                line = bytes(
                    enc.frame(f.type, tuple(x for kv in fields.items() for x in kv), ms=f.ms)
                )
            w.frame(line, float(f.ms))
        for b in bets:
            w.write({"kind": "bet", **b})
    return core


def _times(core):
    out = {}
    for line in core.lines:
        f = decode(line)
        if f.type in (proto.T_RNVP, proto.T_RESULT):
            out[(f.type, int(f.fields["spin"]))] = f.ms
            if f.type == proto.T_RESULT:
                out[("num", int(f.fields["spin"]))] = f.fields["num"]
    return out


def test_sim_trace_core_agrees_with_truth(sim_trace, capsys):
    assert main(["replay", str(sim_trace), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    core = out["core"]
    assert core["diff_truth"] == [] and core["frames"] > 0
    assert len(core["check"]["results"]) == 4
    assert core["check"]["violations"] == []


def test_a_voided_spin_agrees_with_its_void_truth(tmp_path, capsys):
    """The simulator records where a voided spin's ball came to rest too: still a void."""
    path = tmp_path / "void.jsonl"
    argv = ["sim", "--spins", "5", "--seed", "7", "--scenario", "same_dir@3", "-o", str(path)]
    assert main([*argv, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["replay", str(path), "--json"]) == 0
    core = json.loads(capsys.readouterr().out)["core"]
    assert core["diff_truth"] == []
    assert [v["reason"] for v in core["check"]["voids"]] == ["same_dir"]


def test_bets_settled_and_late_bet_refused(sim_trace, tmp_path, capsys):
    probe = run_core(read_trace(sim_trace))
    t = _times(probe)
    n1 = t[("num", 1)]
    bets = [
        {
            "t_ms": t[(proto.T_RNVP, 1)] - 500,
            "player": "A",
            "type": "plein",
            "numbers": [n1],
            "stake": "10",
        },
        {"t_ms": t[(proto.T_RNVP, 2)] + 1, "player": "B", "type": "rouge", "stake": "10"},
        {"t_ms": 0, "spin": 3, "player": "C", "type": "douzaine", "index": 1, "stake": "5"},
        {"t_ms": t[(proto.T_RESULT, 4)] + 10, "player": "D", "type": "noir", "stake": "5"},
        {"t_ms": 0, "player": "E", "type": "plein", "numbers": ["99"], "stake": "5"},
    ]
    path = tmp_path / "t.jsonl"
    _with_frames(sim_trace, path, bets)
    assert main(["replay", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["check"]["clean"] and out["core"]["diff_recorded"] == []
    b = out["bets"]
    by_spin = {s["spin"]: s for s in b["settled"]}
    assert by_spin[1]["bets"] == [0] and by_spin[1]["totals"]["paid"] == "360"
    assert 3 in by_spin and by_spin[3]["bets"] == [2]
    assert [(r["bet"], r["spin"]) for r in b["refused"] if "spin" in r] == [(1, 2)]
    assert any(r["bet"] == 4 for r in b["refused"])  # not a number of the wheel
    assert [r["bet"] for r in b["unsettled"]] == [3]  # after the last spin


def test_recorded_frames_differing_from_the_core_are_shown(sim_trace, tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    _with_frames(sim_trace, path, tamper=2)
    assert main(["replay", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    diff = out["core"]["diff_recorded"]
    assert any(line.startswith("-RES") and "num=CMC" in line for line in diff)
    assert any(line.startswith("+RES") and "spin=2" in line for line in diff)
    assert main(["replay", str(path)]) == 1  # readable output, same verdict
    capsys.readouterr()


def test_replay_unusable(tmp_path, capsys):
    raw = tmp_path / "cap.log"
    raw.write_bytes(b"$1,T01,1,1,0,LID,locked=1*00000000\n")
    assert main(["replay", str(raw)]) == 2
    assert main(["replay", str(tmp_path / "none")]) == 2
    capsys.readouterr()


# --- issue 19: replay refuses what the decree forbids, and says when the core disagrees ---


def test_a_bet_placed_during_an_incident_is_refused(tmp_path, capsys):
    """Decree 1-4: after the incident's « rien ne va plus » the ball is put back and
    launched again; no bet is taken until the relaunched spin's outcome."""
    sim = tmp_path / "object.jsonl"
    argv = ["sim", "--spins", "4", "--seed", "11", "--scenario", "object@2", "-o", str(sim)]
    assert main([*argv, "--quiet"]) == 0
    probe = run_core(read_trace(sim))
    assert probe is not None and probe.vs_truth == []
    inc = rnvp3 = None
    for line in probe.lines:
        f = decode(line)
        if f.type == proto.T_INCIDENT and f.fields["step"] == proto.INC_START:
            inc = f.ms
        if f.type == proto.T_RNVP and f.fields["spin"] == "3":
            rnvp3 = f.ms
    assert inc is not None and rnvp3 is not None and inc < rnvp3
    bets = [
        {"t_ms": inc + 5, "player": "A", "type": "rouge", "stake": "10"},  # during
        {"t_ms": (inc + rnvp3) // 2, "player": "B", "type": "noir", "stake": "10"},  # during
        {"t_ms": 100, "player": "C", "type": "pair", "stake": "10"},  # before spin 1's call
    ]
    path = tmp_path / "t.jsonl"
    _with_frames(sim, path, bets)
    capsys.readouterr()
    assert main(["replay", str(path), "--json"]) == 0
    b = json.loads(capsys.readouterr().out)["bets"]
    refused = {r["bet"]: r for r in b["refused"]}
    assert set(refused) == {0, 1}
    assert all("incident of spin 2" in r["reason"] for r in refused.values())
    assert [s["bets"] for s in b["settled"]] == [[2]]


def test_a_player_total_on_one_position_is_limited_in_replay(sim_trace, tmp_path, capsys):
    probe = run_core(read_trace(sim_trace))
    t = _times(probe)[(proto.T_RNVP, 1)] - 500
    line = {"t_ms": t, "player": "A", "type": "plein", "numbers": ["17"], "stake": "150"}
    other = {"t_ms": t, "player": "B", "type": "plein", "numbers": ["17"], "stake": "150"}
    path = tmp_path / "t.jsonl"
    _with_frames(sim_trace, path, [line, line, line, other])
    capsys.readouterr()
    assert main(["replay", str(path), "--json"]) == 0
    b = json.loads(capsys.readouterr().out)["bets"]
    assert sorted(r["bet"] for r in b["refused"]) == [0, 1, 2]
    assert "total 450" in b["refused"][0]["reason"]
    assert [s["bets"] for s in b["settled"]] == [[3]]


def test_the_core_refusing_a_command_is_no_agreement(sim_trace, tmp_path, capsys):
    """A truth whose session the firmware cannot play (here: no last three announced, so
    the chef's CLOSE is refused) is not called an agreement, whatever the frames say."""
    trace = read_trace(sim_trace)
    path = tmp_path / "no_last3.jsonl"
    with TraceWriter(path, trace.header) as w:
        for r in trace.records:
            if not (r["kind"] == "truth" and r.get("event") == "last_three"):
                w.write(r)
    assert main(["replay", str(path), "--json"]) == 1
    core = json.loads(capsys.readouterr().out)["core"]
    assert not core["agrees"]
    assert [(c["command"], c["detail"]) for c in core["refused"]] == [("CLOSE", "last3")]
    assert main(["replay", str(path)]) == 1
    text = capsys.readouterr().out
    assert "core refused CLOSE" in text and "the firmware core agrees" not in text


def test_malformed_sensor_power_and_truth_records_are_trace_errors(sim_trace, tmp_path, capsys):
    trace = read_trace(sim_trace)
    bad = [
        {"kind": "sensor", "t_us": "5", "ch": "ball_a", "v": 1},
        {"kind": "sensor", "t_us": 5, "ch": "pocket:+5", "v": 1},
        {"kind": "sensor", "t_us": 5, "ch": "ball_a", "v": 2},
        {"kind": "power", "t_us": 5, "event": "flicker"},
        {"kind": "truth", "t_us": -1, "event": "rest"},
        {"kind": "truth", "t_us": 5},
    ]
    for rec in bad:
        path = tmp_path / "bad.jsonl"
        with TraceWriter(path, trace.header) as w:
            for r in trace.records[:50]:
                w.write(r)
            w.write(rec)
        for cmd in ("check", "replay"):
            assert main([cmd, str(path), "--json"]) == 1, (cmd, rec)
            out = json.loads(capsys.readouterr().out)
            assert len(out["trace_errors"]) == 1 and "line 52" in out["trace_errors"][0], out


def test_the_simulator_counts_coups_as_the_firmware_does(tmp_path, capsys):
    """Voids among the last three, and sessions too short for them: the simulator's chef
    announces and closes as the firmware counts coups, so the core takes every command."""
    for spins, scen in ((6, "same_dir@5"), (6, "few_revs@6"), (2, None), (3, "ball_out@2")):
        path = tmp_path / f"s{spins}.jsonl"
        argv = ["sim", "--spins", str(spins), "--seed", "4", "-o", str(path), "--quiet"]
        assert main(argv + (["--scenario", scen] if scen else [])) == 0
        trace = read_trace(path)
        core = run_core(trace)
        assert core is not None and core.refused == [], (spins, scen, core.refused)
        assert core.report.violations == [] and core.vs_truth == [], (spins, scen)
        closes = [decode(x) for x in core.lines if b",SCLOSE," in x]
        assert len(closes) == 1
        coups = len(core.report.results)
        assert closes[0].int("spins") == coups
        assert ("reason" in closes[0].fields) == (coups < 3), (spins, scen)
    capsys.readouterr()
