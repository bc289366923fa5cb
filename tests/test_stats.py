"""Wheel-integrity statistics (issue 24): known answers against scipy, false-alarm rates on
fair draws, strong biases detected, and the simulator's biased wheels."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from scipy import stats as sps

from rmc.sim import Params, simulate_session
from rmc.stats import Monitor, analyse, default_order, power, sectors
from rmc.stats import monitor as mon
from rmc.stats.chances import chance_tests, runs_test
from rmc.stats.pockets import bh, holm, pocket_tests

ORDER = default_order()
# a hand-made count vector: 39 pockets, 400 results, pocket 5 hot, pocket 20 cold
COUNTS = np.array([10] * 39)
COUNTS[5], COUNTS[20], COUNTS[30] = 25, 2, 3
COUNTS[0] += 400 - COUNTS.sum()


def test_wheel_order_is_the_wheel_definitions():
    from rmc.sim.wheel import load_wheel

    assert ORDER.pockets == load_wheel().pockets and ORDER.size == 39


def test_pocket_tests_against_scipy():
    t = pocket_tests(COUNTS)
    ref = sps.chisquare(COUNTS)
    assert t.n == 400 and t.dof == 38
    assert t.chi2 == pytest.approx(ref.statistic) and t.chi2_p == pytest.approx(ref.pvalue)
    g = sps.power_divergence(COUNTS, lambda_="log-likelihood")
    assert t.g == pytest.approx(g.statistic) and t.g_p == pytest.approx(g.pvalue)
    for k, p in zip(COUNTS, t.binom_p, strict=True):
        assert p == pytest.approx(sps.binomtest(int(k), 400, 1 / 39).pvalue)
    assert t.flagged(0.01) == [5]  # 25 for 10.3 expected; the cold ones are not enough
    assert not t.small_sample and pocket_tests(np.ones(39, dtype=int)).small_sample


def test_holm_and_bh_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.06 (monotone)
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: 0.005*4/1, 0.01*4/2, 0.03*4/3, 0.04*4/4 -> 0.02, 0.02, 0.04, 0.04
    assert bh(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_runs_test_known_answers():
    # 10 ones then 10 zeros: 2 runs; mean 11, var 2*100*180/(400*19) = 4.7368...
    r = runs_test(np.r_[np.ones(10), np.zeros(10)])
    assert (r.n1, r.n2, r.runs) == (10, 10, 2)
    assert r.expected == 11 and r.z == pytest.approx((2 - 11) / np.sqrt(36000 / 7600))
    assert r.p == pytest.approx(2 * sps.norm.sf(abs(r.z)))
    alt = runs_test(np.arange(40) % 2)
    assert alt.runs == 40 and alt.z > 5 and alt.p < 1e-6
    assert runs_test(np.ones(30)).p is None  # one side only: nothing to test


def test_runs_test_false_alarm_rate():
    rng = np.random.default_rng(11)
    ps = np.array([runs_test(rng.random(500) < 0.5).p for _ in range(3000)])
    # 1 % of 3000: 30, sd 5.4
    assert 12 <= (ps < 0.01).sum() <= 50


def test_simple_chances_leave_the_zeros_out():
    labels = ["0", "00", "CMC", "1", "2", "3", "19", "36"]
    ch, zeros = chance_tests(ORDER.indices(labels), ORDER.pockets)
    rouge = ch[0]
    assert rouge.n == 5 and rouge.k == 4  # 1 3 19 36 rouge, 2 noir
    assert ch[1].k == 2 and ch[2].k == 3  # pair: 2 36; manque: 1 2 3
    assert zeros.k == 3 and zeros.n == 8
    assert zeros.p == pytest.approx(sps.binomtest(3, 8, 3 / 39).pvalue)


def test_scan_known_answer():
    c = np.full(39, 100)
    c[[10, 11, 12, 13]] = 160  # a hot sector of 4 (wheel positions 10-13)
    r = sectors.scan(c)
    n = int(c.sum())
    assert (r.start, r.width, r.count) == (10, 4, 640)
    p = 4 / 39
    assert r.z == pytest.approx((640 - n * p) / np.sqrt(n * p * (1 - p)))
    assert r.p == 1 / (sectors.NULL_DRAWS + 1)
    # deterministic: the same p-value every time
    fair = np.random.default_rng(4).multinomial(1000, [1 / 39] * 39)
    assert sectors.scan(fair).p == sectors.scan(fair).p
    # a sector across the wheel's end (positions 38, 0, 1)
    c = np.full(39, 100)
    c[[38, 0, 1]] = 170
    r = sectors.scan(c)
    assert (r.start, r.width) == (38, 3)


def test_scan_false_alarm_rate_on_fair_wheels():
    n = 2000
    draws = np.random.default_rng(12).multinomial(n, [1 / 39] * 39, size=2000)
    p = sectors.p_value(sectors.scan_z(draws)[0], n)
    # 1 % of 2000: 20, sd 4.4; and at 10 %: 200, sd 13
    assert 7 <= (p <= 0.01).sum() <= 35
    assert 160 <= (p <= 0.10).sum() <= 240


def test_monitor_by_events_equals_one_at_a_time():
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 39, size=(4, 1500))
    inc = mon.Design().increments()
    for row, got in zip(idx, mon.max_statistic(idx, mon.Design()), strict=True):
        s, best = np.zeros(inc.shape[1]), 0.0
        for x in row:
            s = np.maximum(s + inc[x], 0)
            best = max(best, s.max())
        assert got == pytest.approx(best)


def test_monitor_feed_and_feed_many_agree():
    rng = np.random.default_rng(5)
    p = power.pocket_bias(39 / 20).probs  # strong: several alarms in 6000 spins
    labels = [ORDER.pockets[i] for i in rng.choice(39, size=6000, p=p)]
    one, many = Monitor(history=True), Monitor(history=True)
    alarms = [a for a in (one.feed(x) for x in labels) if a is not None]
    assert len(alarms) >= 2
    got = many.feed_many(labels, chunk=700)
    assert one.alarms == alarms
    assert [(a.spin, a.detector) for a in got] == [(a.spin, a.detector) for a in alarms]
    assert [a.statistic for a in got] == pytest.approx([a.statistic for a in alarms])
    assert many.history == pytest.approx(one.history)
    assert ORDER.pockets[0] in alarms[0].detector.split()[-1].split("-")  # the hot pocket
    with pytest.raises(ValueError, match="not a pocket"):
        one.feed("37")


def test_monitor_false_alarm_rate_matches_the_stated_one():
    """1,000 fair sessions of 10,000 spins (fresh draws, not the calibration's): the share
    raising a false alarm is 1 % within its sampling error."""
    m = Monitor()
    assert (m.false_alarm, m.horizon) == (0.01, 10_000)
    rng = np.random.default_rng(1)  # seeds 1-4 give 12, 11, 12, 6 alarms
    maxima = np.concatenate(
        [mon.max_statistic(mon.fair_sessions(rng, 20, 10_000), m.design) for _ in range(50)]
    )
    alarms = int((maxima > m.threshold).sum())
    # binomial(1000, 0.01): mean 10, sd 3.1; 2..21 holds it with probability 0.998
    assert 2 <= alarms <= 21, alarms
    # and the threshold is not loose: at half of it fair wheels alarm most of the time
    assert (maxima > m.threshold / 2).mean() > 0.5


def test_power_of_the_chi_square_is_what_it_says():
    a = power.pocket_bias()
    n = power.chi2_spins(a.probs)
    crit = sps.chi2.isf(0.01, 38)
    lam = n * (((a.probs - 1 / 39) ** 2) * 39).sum()
    assert sps.ncx2.sf(crit, 38, lam) >= 0.9 > sps.ncx2.sf(crit, 38, lam * (n - 1) / n)
    # by simulation: 90 % of biased wheels of n results flagged at 1 %
    draws = np.random.default_rng(8).multinomial(n, a.probs, size=600)
    e = n / 39
    p = sps.chi2.sf(((draws - e) ** 2 / e).sum(axis=1), 38)
    assert 0.86 <= (p < 0.01).mean() <= 0.94


def test_binomial_power():
    q = 1 / 34
    n = power.binom_spins(q)
    k = sps.binom.isf(0.01 / 39 / 2, n, 1 / 39)
    assert sps.binom.sf(k, n, q) >= 0.9
    assert 30_000 < n < 60_000


def test_analyse_fair_and_biased():
    rng = np.random.default_rng(77)
    fair = analyse(rng.integers(0, 39, 5000), ORDER)
    assert fair["flags"] == [] and fair["n"] == 5000
    biased = analyse(rng.choice(39, size=5000, p=power.pocket_bias(39 / 25, at=7).probs), ORDER)
    assert (
        "chi-square" in biased["flags"] and f"pocket {ORDER.pockets[7]} (Holm)" in biased["flags"]
    )
    tilted = analyse(rng.choice(39, size=8000, p=power.sector_bias(5, 0.3, at=20).probs), ORDER)
    assert "sector scan" in tilted["flags"]
    assert set(tilted["sectors"]["pockets"]) & set(ORDER.sector(20, 5))


# --- the simulator's biased wheels -----------------------------------------------------


def test_unbiased_params_leave_the_simulation_unchanged():
    a = simulate_session(9, 6)
    b = simulate_session(9, 6, params=Params().with_(sticky_pocket="17", low_sector="0"))
    assert a.events == b.events and a.truth == b.truth
    assert "bias" not in next(b.to_trace_records())


def test_sticky_pocket_rests_there_on_its_sensors_too():
    s = simulate_session(3, 8, params=Params().with_(sticky_pocket="17", sticky_strength=1.0))
    ch = ORDER.index("17")
    assert [sp.pocket for sp in s.valid_spins()] == ["17"] * 8
    for sp in s.valid_spins():  # the pocket's sensor holds the ball at rest
        t = round(sp.rest_s * 1e6)
        last = [v for (tu, c, v) in s.events if c == ch and tu <= t + 1]  # pocket i is channel i
        assert last[-1] == 1
    assert next(s.to_trace_records())["bias"] == {"sticky": {"pocket": "17", "strength": 1.0}}


def test_biased_simulated_wheels_are_detected_and_a_fair_one_is_not():
    fair = simulate_session(21, 250, edges=False)
    r = analyse(ORDER.indices(sp.pocket for sp in fair.valid_spins()), ORDER, monitor=False)
    # the tests a biased pocket or sector trips (the battery as a whole flags a fair wheel
    # about one time in ten: here its manque/passe share, p = 0.005)
    assert r["pockets"]["chi2"]["p"] > 0.01 and r["pockets"]["g"]["p"] > 0.01
    assert r["sectors"]["p"] > 0.01 and not any("Holm" in f for f in r["flags"])
    sticky = Params().with_(sticky_pocket="23", sticky_strength=0.15)
    s = simulate_session(22, 150, params=sticky, edges=False)
    r = analyse(ORDER.indices(sp.pocket for sp in s.valid_spins()), ORDER, monitor=False)
    assert "chi-square" in r["flags"] and "pocket 23 (Holm)" in r["flags"]
    low = Params().with_(low_sector="4", low_sector_strength=0.4)
    s = simulate_session(23, 150, params=low, edges=False)
    got = collections.Counter(sp.pocket for sp in s.valid_spins())
    r = analyse(ORDER.indices(sp.pocket for sp in s.valid_spins()), ORDER, monitor=False)
    assert "sector scan" in r["flags"]
    centre = ORDER.index("4")
    assert sum(got[ORDER.pockets[(centre + k) % 39]] for k in range(-2, 3)) > 60


def test_bad_bias_parameters():
    with pytest.raises(ValueError, match="sticky_strength"):
        Params().with_(sticky_pocket="17", sticky_strength=1.5)
    with pytest.raises(ValueError, match="not a pocket"):
        simulate_session(1, 2, params=Params().with_(sticky_pocket="37", sticky_strength=0.1))
