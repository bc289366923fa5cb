"""`rmc sim`: files written, summary printed, bad input refused with status 2."""

from __future__ import annotations

import itertools
import json

from rmc.cli import main
from rmc.sim import simulate_session
from rmcfw import channels


def test_trace_and_laps(tmp_path, capsys) -> None:
    trace, laps = tmp_path / "t.jsonl", tmp_path / "laps.csv"
    rc = main(
        [
            "sim",
            "--seed",
            "4",
            "--spins",
            "5",
            "--scenario",
            "few_revs@3",
            "-o",
            str(trace),
            "--laps",
            str(laps),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "few_revs" in out and "valid spins" in out
    recs = [json.loads(x) for x in trace.read_text().splitlines()]
    assert recs[0]["kind"] == "header" and recs[0]["seed"] == 4
    assert recs[0]["scenario"] == ["few_revs@3"]
    # The file holds exactly what the API gives for the same request.
    s = simulate_session(4, 5, scenarios=["few_revs@3"])
    assert recs[:-1] == json.loads(json.dumps(list(s.to_trace_records())))
    assert recs[-1]["kind"] == "end" and recs[-1]["lines"] == len(recs) - 1
    sensors = [r for r in recs if r["kind"] == "sensor"]
    assert [(r["t_us"], channels.parse(r["ch"]), r["v"]) for r in sensors] == s.events
    rows = [[float(x) for x in line.split(",")] for line in laps.read_text().splitlines()]
    valid = s.valid_spins()
    assert len(rows) == len(valid) == 4
    for row, sp in zip(rows, valid, strict=True):
        assert row == [round(x, 6) for x in sp.lap_periods_s]
        assert all(b > a for a, b in itertools.pairwise(row))


def test_unknown_scenario_exit_2(capsys) -> None:
    assert main(["sim", "--scenario", "meteor"]) == 2
    err = capsys.readouterr().err
    assert "unknown scenario 'meteor'" in err and "same_dir" in err


def test_no_room_exit_2(capsys) -> None:
    assert main(["sim", "--spins", "1", "--scenario", "object"]) == 2
    assert "rmc sim:" in capsys.readouterr().err


def test_list_scenarios(capsys) -> None:
    assert main(["sim", "--list-scenarios"]) == 0
    out = capsys.readouterr().out
    for name in ("same_dir", "not_reversed", "few_revs", "object", "ball_out", "stuck_on"):
        assert name in out


def test_unwritable_output(tmp_path, capsys) -> None:
    rc = main(["sim", "--spins", "1", "--quiet", "-o", str(tmp_path / "no" / "t.jsonl")])
    assert rc == 2  # bad input (issue 20): it was 1
    assert "cannot write" in capsys.readouterr().err


def test_plots(tmp_path) -> None:
    from rmc.sim.plots import write_plots

    paths = write_plots(tmp_path, seed=3, spins=60)
    assert [p.name for p in paths] == [
        "sim_lap_periods.png",
        "sim_last_lap.png",
        "sim_scatter.png",
        "sim_track.png",
        "sim_drop_offset.png",
    ]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
