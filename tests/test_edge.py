"""`rmc edge` (issue 26): the attacker is a real one (it wins at a short lead on the
simulator, as the published devices did), it loses at a long lead, it never scores a spin it
learned from, it reads recordings, and bad input gets one line and exit 2."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rmc.cli import main
from rmc.edge.calls import TableSettings, firmware_calls
from rmc.edge.evaluate import WIN, Attacker, Cut, house_edge
from rmc.edge.frames import spins_from_frames
from rmc.edge.observe import geometry_of, spins_from_session
from rmc.edge.report import measure
from rmc.edge.sources import Source, from_sim, from_traces
from rmc.layout import PAYOUT, PLEIN
from rmc.rig.compare import Tolerances
from rmc.sim import simulate_session
from rmcfw import config

SEED, SPINS, TRAIN = 2, 360, 120
DEFAULT_LEAD_S = config.Config().lead_ms / 1000  # the table's default, not a copy


@pytest.fixture(scope="module")
def src() -> Source:
    return from_sim(SEED, SPINS)


@pytest.fixture(scope="module")
def attacker(src: Source) -> Attacker:
    return Attacker(src.spins, src.geo, 10.0, TRAIN)


def test_a_plein_pays_35_to_1_and_blind_pleins_lose_the_house_edge() -> None:
    assert PAYOUT[PLEIN] == 35 and WIN == 36
    assert math.isclose(house_edge(9), -3 / 39)
    assert math.isclose(house_edge(1), -3 / 39)


def test_the_device_sees_the_rotor_where_it_is(src: Source) -> None:
    """The rotor's mark passes, decoded from the quadrature by the firmware's counter, put
    under ball sensor A the pocket the simulator's truth names at the ball's first pass."""
    s = simulate_session(SEED, 40)
    geo = geometry_of(s.wheel.raw)
    near = 0
    for o, sp in zip(spins_from_session(s), s.valid_spins(), strict=True):
        assert o.spin == sp.spin and o.result == sp.channel
        assert np.allclose(np.diff(o.passes), sp.lap_periods_s, atol=0.01)
        j = int(np.searchsorted(o.marks, o.passes[0]))
        frac = (o.passes[0] - o.marks[j - 1]) / (o.marks[j] - o.marks[j - 1])
        phi = geo.mark_rad + o.rotor_dir * 2 * math.pi * frac
        x = ((geo.ball_rad - phi) / geo.pocket_rad) % 39
        want = s.wheel.pockets.index(sp.under_first)
        near += abs((x - want + 19.5) % 39 - 19.5) <= 1.0
    assert near >= 0.9 * len(s.valid_spins())


def test_at_half_a_second_the_attacker_wins(attacker: Attacker) -> None:
    # a real attacker: the published devices returned +18 % or more
    o = attacker.run(Cut("lead", 0.5), 9)
    assert o.test == SPINS - TRAIN and o.mean > 0.15, o
    assert o.hit_rate > 9 / 39 * 1.3


def test_at_a_long_lead_it_loses(src: Source) -> None:
    # 20 ms clocking, bets closed 5-6 s before the drop: some 5 laps ahead, the scatter of
    # a lap's worth of friction is the whole wheel
    a = Attacker(src.spins, src.geo, 20.0, TRAIN)
    r = np.concatenate([a.run(Cut("lead", lead), 9).returns for lead in (5.0, 6.0)])
    assert r.mean() < 0, r.mean()


def test_the_attacker_never_scores_a_spin_it_learned_from(src: Source, attacker) -> None:
    o = attacker.run(Cut("lead", 1.0), 9)
    assert o.test_spins == [x.spin for x in src.spins[TRAIN:]]
    assert not set(o.test_spins) & {x.spin for x in src.spins[:TRAIN]}
    # the held-out spins' outcomes change nothing of its bets: nothing leaks from them
    rng = np.random.default_rng(1)
    shuffled = [
        x if i < TRAIN else type(x)(**{**x.__dict__, "result": int(rng.integers(0, 39))})
        for i, x in enumerate(src.spins)
    ]
    again = Attacker(shuffled, src.geo, 10.0, TRAIN).run(Cut("lead", 1.0), 9)
    assert again.bets == o.bets
    # ... while the training spins' outcomes do change them (the test can fail)
    moved = [
        type(x)(**{**x.__dict__, "result": (x.result + 7) % 39}) if i < TRAIN else x
        for i, x in enumerate(src.spins)
    ]
    other = Attacker(moved, src.geo, 10.0, TRAIN).run(Cut("lead", 1.0), 9)
    assert other.bets != o.bets


def test_the_firmware_calls_at_its_lead(src: Source) -> None:
    spins = src.spins[:60]
    st = TableSettings.defaults(src.wheel)
    assert st.lead_ms == config.Config().lead_ms and st.drop_ms > 0
    calls = firmware_calls(spins, st)
    leads = np.asarray([o.drop_s - calls[o.spin] for o in spins])
    # the median of 60 calls lies within a few hundredths of a second of the asked lead
    assert abs(float(np.median(leads)) - DEFAULT_LEAD_S) < 0.25, np.median(leads)
    assert (leads > 0).mean() > 0.95  # called before the drop
    # and at another lead too: the calls follow lead_ms
    short = firmware_calls(spins, st.with_lead(lead_ms=1000))
    assert 0.8 < np.median([o.drop_s - short[o.spin] for o in spins]) < 1.25
    later = firmware_calls(spins, st.with_lead(lead_ms=3000))
    assert np.median([o.drop_s - later[o.spin] for o in spins]) > 2.5


@pytest.fixture(scope="module")
def long_src() -> Source:
    return from_sim(DEFAULT_SEED, DEFAULT_SPINS)


# The default lead against the attacker: more spins than above, since its return there is
# some 8 to 10 points below 0 and 240 held-out spins leave ±22 points. On 600 held-out spins
# (seeds 1-7) the point estimate was still above 0 on 2 of 14 cuts; on 1,500 (seeds 11-16)
# below 0 on every one (report of this change; about 20 s of CPU).
DEFAULT_SEED, DEFAULT_SPINS, DEFAULT_TRAIN = 11, 1800, 300


def test_the_default_lead_holds_the_attacker_below_zero(long_src: Source) -> None:
    """Issue 26: a 10 ms device loses at the table's default lead, at a fixed lead before
    the drop and at the firmware's own calls, while it wins at 0.5 s on the same spins
    (the test can fail: the attacker is a real one here too)."""
    a = Attacker(long_src.spins, long_src.geo, 10.0, DEFAULT_TRAIN)
    st = TableSettings.defaults(long_src.wheel)
    calls = firmware_calls(long_src.spins, st)
    fixed = a.run(Cut("lead", DEFAULT_LEAD_S), 9)
    table = a.run(Cut("calls"), 9, calls)
    assert fixed.test == table.test == DEFAULT_SPINS - DEFAULT_TRAIN
    assert fixed.mean < 0 and table.mean < 0, (fixed, table)
    assert a.run(Cut("lead", 0.5), 9).mean > 0.15


def test_report_break_even_and_recommendation(src: Source) -> None:
    rep = measure(src.spins, src.geo, "test", leads=(0.5, 3.0, 6.0), noises=(10.0,), train=TRAIN)
    be = rep.break_even[0]
    assert be.point_s is not None and 0.5 < be.point_s <= 6.0
    rec = rep.recommendation
    if rec.lead_s is not None:
        assert rep.outcome(rec.lead_s, 10.0).hi < 0
        assert rep.outcome(0.5, 10.0).hi >= 0


def test_cli_json(capsys) -> None:
    code = main(["edge", "--sim", "5:90", "--lead", "0.5", "4", "--noise", "10", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert set(out) >= {
        "source",
        "spins",
        "train",
        "test",
        "pleins",
        "house_edge",
        "leads_s",
        "noises_ms",
        "table",
        "break_even",
        "calls",
        "defences",
        "recommended",
    }
    assert out["train"] + out["test"] == out["spins"] and out["train"] == 30
    row = out["table"][0]
    assert set(row) >= {"cut", "kind", "value", "noise_ms", "return", "ci95", "lead_s"}
    assert row["ci95"][0] <= row["return"] <= row["ci95"][1]
    assert set(out["recommended"]) == {"noise_ms", "lead_s", "lead_revs", "laps_in_lead", "bound"}


def test_repeated_options_add_up(capsys) -> None:
    # --lead 0.5 --lead 4 measures both, as --lead 0.5 4 does: never only the last one
    code = main(["edge", "--sim", "5:90", "--lead", "0.5", "--lead", "4", "--noise", "10",
                 "--noise", "20", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert sorted({(r["lead_s"], r["noise_ms"]) for r in out["table"]}) == [
        (0.5, 10.0), (0.5, 20.0), (4.0, 10.0), (4.0, 20.0)
    ]  # fmt: skip


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A simulated session's sensor trace, and the frames the firmware core makes of it
    recorded as a table's trace."""
    from rmc.frames import decode
    from rmc.replay import run_core
    from rmc.trace import TraceWriter, read_trace

    d = tmp_path_factory.mktemp("edge")
    s = simulate_session(4, 8)
    s.write_trace(d / "sensors.jsonl")
    tr = read_trace(d / "sensors.jsonl")
    core = run_core(tr)
    header = {**tr.header, "source": "record"}
    with TraceWriter(d / "frames.jsonl", header) as w:
        for line in core.lines:
            w.frame(line, float(decode(line).ms))
    return s, d / "sensors.jsonl", d / "frames.jsonl"


def test_recorded_frames_give_the_passes_the_rotor_and_the_calls(traces) -> None:
    from rmc.trace import read_trace

    s, _, frames = traces
    tr = read_trace(frames)
    geo = geometry_of(tr.header["wheel"])
    got, revs = spins_from_frames([x for x, _ in tr.frame_lines()], tr.header["wheel"], geo)
    truth = {o.spin: o for o in spins_from_session(s)}
    assert revs > 0 and len(got) >= 6
    leads = []
    for o in got:
        t = truth[o.spin]
        assert o.result == t.result
        assert len(o.passes) == len(t.passes)
        assert np.abs(o.passes - t.passes).max() < 0.02  # the LAUNCH's ms, then periods
        # the table's RNVP at its default lead_ms: before the drop, and never far earlier
        # than asked (over 1,000 spins at 5 s: 2.3 to 6.1 s, docs/rig.md)
        leads.append(t.drop_s - o.call_s)
        assert 0.3 < leads[-1] < DEFAULT_LEAD_S + 1.5, leads
        inside = o.marks[(o.marks > o.launch_s) & (o.marks < t.drop_s)]
        assert np.all([np.abs(t.marks - m).min() < 0.1 for m in inside])
    # where it was asked, as the rig holds the board to it (rmc.rig.compare)
    window = Tolerances().rnvp_window_s(DEFAULT_LEAD_S)
    assert abs(float(np.median(leads)) - DEFAULT_LEAD_S) < window, leads


def test_a_sensor_trace_reads_as_the_simulation(traces) -> None:
    s, sensors, _ = traces
    src = from_traces([str(sensors)])
    want = spins_from_session(s)
    assert [o.result for o in src.spins] == [o.result for o in want]
    assert all(np.allclose(a.passes, b.passes) for a, b in zip(src.spins, want, strict=True))


def test_cli_on_traces(traces, capsys) -> None:
    _, sensors, frames = traces
    code = main(["edge", str(sensors), "--train", "3", "--lead", "1", "--noise", "10", "--json"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["spins"] == 8
    code = main(["edge", str(frames), "--train", "3", "--lead", "1", "--noise", "10", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["calls"] and out["calls"][0]["cut"] == "the table's RNVP"


def _fails(capsys, *args: str) -> str:
    code = main(["edge", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmc edge: "), err
    assert "Traceback" not in err
    return lines[0]


def test_hostile_inputs(tmp_path, capsys, traces) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert "empty" in _fails(capsys, str(empty))
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_bytes(b"\x00\xff[not json\n{]\n")
    _fails(capsys, str(garbled))
    _fails(capsys, str(tmp_path / "missing.jsonl"))
    _fails(capsys, str(tmp_path))
    # a trace of frames with no REV: no ball passes
    from rmc.trace import TraceWriter, make_header

    no_rev = tmp_path / "norev.jsonl"
    with TraceWriter(no_rev, make_header("T01", source="record")) as w:
        w.frame(b"$1,T01,3,1,5,BOOT,fw=x,wheel=-,reset=power,faults=-,prev=-*00000000")
    assert "REV" in _fails(capsys, str(no_rev))
    _, sensors, _ = traces
    assert "--train" in _fails(capsys, str(sensors), "--train", "8")
    assert "--train" in _fails(capsys, str(sensors), "--train", "50")
    assert "--lead" in _fails(capsys, "--sim", "1:30", "--lead", "-1")
    assert "--lead" in _fails(capsys, "--sim", "1:30", "--lead", "nan")
    assert "--noise" in _fails(capsys, "--sim", "1:30", "--noise", "-5")
    assert "--pleins" in _fails(capsys, "--sim", "1:30", "--pleins", "0")
    assert "--sim" in _fails(capsys, "--sim", "x:y")
    assert "--sim" in _fails(capsys, "--sim=-3:10")
    assert "not both" in _fails(capsys, "--sim", "1:30", str(sensors))
    _fails(capsys)
    assert "--plot" in _fails(capsys, "--sim", "1:30", "--plot", str(tmp_path / "x.txt"))
    _fails(capsys, "--sim", "1:30", "--plot", str(tmp_path / "no" / "x.png"))


def test_plot(tmp_path, capsys) -> None:
    out = tmp_path / "edge [1].png"
    code = main(
        ["edge", "--sim", "6:60", "--lead", "0.5", "3", "--noise", "10", "--plot", str(out)]
    )
    text = capsys.readouterr().out
    assert code == 0 and out.stat().st_size > 1000
    assert f"plot: {out}" in text  # the name printed literally, brackets and all


def test_the_safe_lead_rule() -> None:
    from rmc.edge.evaluate import safe_from

    # the upper bound below 0 at the second lead, but the attacker wins again later: not safe
    assert safe_from([0.3, -0.05, 0.01, -0.1], [0.4, -0.01, 0.06, -0.03]) == 3
    # a longer lead's bound above 0 by chance, its point estimate below: safe from the second
    assert safe_from([0.3, -0.08, -0.02], [0.4, -0.03, 0.03]) == 1
    assert safe_from([0.3, 0.1], [0.4, 0.2]) is None


def test_a_cut_trace_is_read_with_a_warning(traces, tmp_path, capsys) -> None:
    _, sensors, _ = traces
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(sensors.read_text().splitlines(keepends=True)[:-1]))  # no end record
    code = main(["edge", str(cut), "--train", "3", "--lead", "1", "--noise", "10", "--json"])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["spins"] == 8
    assert "warning" in captured.err and "end record" in captured.err
