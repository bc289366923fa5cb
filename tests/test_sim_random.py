"""What is random in the simulator (issue 26): the track's lap-to-lap irregularity, the lap
residual measure it is calibrated with, and where the ball ends around the pocket under the
drop. Seeds stay deterministic; switching the irregularity off gives back the exact track."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from rmc.cli import main
from rmc.sim import Params, load_wheel, simulate_laps, simulate_session
from rmc.sim.figures import DropOffsets
from rmc.sim.lapfit import clocked, distinct_spins, lap_residuals, read_lap_rows
from rmc.sim.lapfit import main as lapfit_main
from rmc.sim.physics import Drift, draw_setup, run_track, track_irregularity

EXACT = Params(track_noise=0.0, track_wobble=0.0)


def test_same_seed_same_session_with_the_noise_on() -> None:
    a = simulate_session(11, 6, scenarios=["power_cut", "stuck_on"])
    b = simulate_session(11, 6, scenarios=["power_cut", "stuck_on"])
    assert a.events == b.events and a.truth == b.truth
    assert Params().track_noise > 0 and Params().track_wobble > 0


def test_the_noise_has_its_own_stream() -> None:
    # Switching the track's irregularity off changes the ball's run, not what else is drawn:
    # the first launch (before any ball ran) is the same instant with the same rotor.
    noisy, exact = (simulate_session(5, 3, edges=False, params=p) for p in (Params(), EXACT))
    assert noisy.spins[0].launch_s == exact.spins[0].launch_s
    assert noisy.spins[0].rotor_period_s == exact.spins[0].rotor_period_s
    assert noisy.spins[0].lap_periods_s != exact.spins[0].lap_periods_s


def test_exact_track_is_smooth_and_the_noisy_one_is_not() -> None:
    exact = lap_residuals(simulate_laps(21, 60, params=EXACT))
    noisy = lap_residuals(simulate_laps(21, 60, params=Params(track_noise=0.3)))
    # exact: only the model's own curve, which a cubic in the lap number almost follows (its
    # residuals are smooth, lag 1 ≈ +0.5); a lasting change of speed shows, if little
    assert exact.rel_sd < 0.01 and exact.lag1 > 0.3
    assert noisy.rel_sd > 1.5 * exact.rel_sd


def test_friction_factors_and_wobble() -> None:
    wheel, p = load_wheel(), Params(track_noise=0.2, track_wobble=0.1)
    s = draw_setup(np.random.default_rng(3), wheel, p, Drift(), -1)
    s2 = track_irregularity(np.random.default_rng(4), p, s)
    f = np.asarray(s2.lap_friction)
    assert f.min() > 0 and abs(f.mean() - 1) < 0.1  # log-normal, mean 1: never negative
    assert s2.wobble[0] == 0.0 and len(s2.wobble) == len(s2.lap_friction) + 1
    tr = run_track(wheel, s2, p.dt_s)
    # the wobble never makes the ball turn back: every step goes the ball's way
    assert np.all(np.diff(tr.theta) * s.ball_dir > 0)
    assert track_irregularity(np.random.default_rng(4), EXACT, s) == s


def test_lap_residuals_see_clocking_noise() -> None:
    # The measure's signature: white noise on the pass instants gives residuals that swing
    # from one lap to the next (lag 1 well below 0) and grow with the noise.
    laps = simulate_laps(8, 80, params=EXACT)
    r10, r30 = (lap_residuals(clocked(laps, c, 0.0)) for c in (0.010, 0.030))
    assert r10.lag1 < -0.35 and r30.lag1 < -0.35
    assert 2.0 < r30.sd_ms / r10.sd_ms < 4.0
    assert 30 < r30.sd_ms < 50  # σ·√2 ≈ 42 ms, less what the fit takes


def test_lap_file_reading(tmp_path) -> None:
    # A file that lists the last lap first and the same spin cut at different laps.
    f = tmp_path / "laps.csv"
    f.write_text("1.2, 1.0, 0.8, 0.6\n1.0, 0.8, 0.6\n0.9, 0.7, 0.5\n\n", encoding="utf-8")
    rows = read_lap_rows(f, newest_first=True)
    assert rows[0] == [0.6, 0.8, 1.0, 1.2]
    assert sorted(distinct_spins(rows)) == [[0.5, 0.7, 0.9], [0.6, 0.8, 1.0, 1.2]]
    with pytest.raises(ValueError):
        lap_residuals(distinct_spins(rows))  # none has 8 laps


def test_lapfit_command(tmp_path, capsys) -> None:
    f = tmp_path / "laps.csv"
    laps = clocked(simulate_laps(3, 30, params=EXACT), 0.02, 0.008)
    f.write_text("\n".join(",".join(f"{x:.3f}" for x in row) for row in laps), encoding="utf-8")
    assert lapfit_main([str(f)]) == 0
    assert "residual sd" in capsys.readouterr().out
    assert lapfit_main([str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lapfit: ") and err.count("\n") == 1


def test_drop_offset() -> None:
    spins = []
    for seed in range(3):
        spins += simulate_session(300 + seed, 60, edges=False).valid_spins()
    offs = [sp.drop_offset for sp in spins]
    assert all(o is not None and -19 <= o <= 19 for o in offs)
    d = DropOffsets.of(spins)
    assert d.n == len(spins) and len(d.counts) == 39
    # Not flat (a drop known exactly is worth something: 7/39 = 18 %, 19/39 = 49 % if flat),
    # not a point either; the ball travels on over the rotor, so the bulk is ahead (+).
    assert 0.25 < d.best_window(7) < 0.6 and 0.6 < d.best_window(19) < 0.95
    assert d.within9 > 0.45 and sum(d.counts[20:]) > sum(d.counts[:19])
    assert d.best_window(39) == pytest.approx(1.0)
    assert 4 <= d.median_abs <= 12
    assert statistics.pstdev(offs) > 4


def test_drop_offset_on_a_one_pocket_wheel() -> None:
    # A biased wheel whose ball always ends in one pocket: the offsets still wrap into
    # −19..19 and spread, since the pocket under the drop is anywhere.
    p = Params(sticky_pocket="17", sticky_strength=1.0)
    s = simulate_session(4, 20, edges=False, params=p)
    wheel = load_wheel()
    for sp in s.valid_spins():
        assert sp.pocket == "17" and sp.channel == wheel.channel_of("17")
        assert -19 <= sp.drop_offset <= 19
    assert len({sp.drop_offset for sp in s.valid_spins()}) > 8


def test_sim_prints_the_offset_figures(capsys) -> None:
    assert main(["sim", "--seed", "3", "--spins", "8"]) == 0
    out = capsys.readouterr().out
    assert "pocket of rest from the pocket under the drop" in out and "within ±3" in out
