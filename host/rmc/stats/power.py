"""How many spins it takes to see a biased wheel (`rmc stats --power`).

Two biases, each at a false-alarm rate `alpha` (1 %) and a power (90 %):

- (a) one pocket coming out 1 in 34 instead of 1 in 39 (the others share the rest evenly);
- (b) a sector of 5 neighbouring pockets 20 % too frequent (evenly inside it; the others
  share the rest evenly);
- (c) a dealer's signature (`rmc.stats.signature`): with probability S a throw ends within
  W neighbouring distances of the pocket under the ball sensor (evenly), otherwise anywhere:
  those distances come out (1 − S)/39 + S/W each (`rmc sim --steady-hand S`), 5 @ 0.1 unless
  asked; tested by the chi-square on the 39 distances and the peak scan (widths 3-9).

Per test: Pearson's chi-square — from the noncentral chi-square law (38 dof, noncentrality
n·Σ(p₁−p₀)²/p₀), exact given the law; the pocket's binomial test at Holm's first step
(α/39, exact binomial tails); the sector scan — by simulation (its critical value from fair
draws, its power from biased ones); the CUSUM monitor — the spins to its alarm, simulated
(median and p90; `power_table(monitor_runs=N)`, tens of seconds: the bench runs it, the
command does not). Simulations use fixed seeds: the figures are the same every run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

from rmc.stats import sectors
from rmc.stats.monitor import Design, first_alarm, threshold_for

POCKETS = 39
ALPHA = 0.01
POWER = 0.90
SEED = 0xB1A5


@dataclass(frozen=True)
class Bias:
    name: str
    probs: np.ndarray  # per wheel position
    what: str


def pocket_bias(ratio: float = 39 / 34, at: int = 0) -> Bias:
    p = np.full(POCKETS, (1 - ratio / POCKETS) / (POCKETS - 1))
    p[at] = ratio / POCKETS
    return Bias("pocket", p, f"one pocket at 1/{POCKETS / ratio:.0f} instead of 1/39")


def sector_bias(width: int = 5, excess: float = 0.2, at: int = 0) -> Bias:
    inside = (1 + excess) / POCKETS
    p = np.full(POCKETS, (1 - width * inside) / (POCKETS - width))
    p[[(at + k) % POCKETS for k in range(width)]] = inside
    return Bias("sector", p, f"a sector of {width} pockets {excess:.0%} too frequent")


def signature_bias(width: int = 5, strength: float = 0.1, at: int = 0) -> Bias:
    """A dealer's signature over the 39 distances: S of the throws within `width` of them."""
    if not (1 <= width <= POCKETS and 0 < strength <= 1):
        raise ValueError("a signature needs a width of 1-39 distances and a strength in (0, 1]")
    p = np.full(POCKETS, (1 - strength) / POCKETS)
    p[[(at + k) % POCKETS for k in range(width)]] += strength / width
    return Bias(
        "signature",
        p,
        f"a dealer's signature: {strength:.0%} of throws within {width} distances",
    )


@dataclass(frozen=True)
class PowerRow:
    bias: str
    test: str
    spins: int  # to reach the power at alpha (fixed n); for the monitor: median delay
    p90: int | None  # the monitor's 90th percentile of delay
    method: str


def chi2_spins(p1: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> int:
    """Spins for Pearson's chi-square to reach `power` at `alpha` (noncentral chi-square)."""
    p0 = 1 / POCKETS
    delta = float(((p1 - p0) ** 2 / p0).sum())
    crit = sps.chi2.isf(alpha, POCKETS - 1)
    lam = optimize.brentq(lambda x: sps.ncx2.sf(crit, POCKETS - 1, x) - power, 1e-6, 1e4)
    return int(np.ceil(lam / delta))


def binom_spins(q: float, alpha: float = ALPHA / POCKETS, power: float = POWER) -> int:
    """Spins for one pocket's two-sided exact binomial test at `alpha` (Holm's first step)
    to reach `power` when the pocket's probability is q > 1/39."""
    p0 = 1 / POCKETS

    def pw(n: int) -> float:
        k = sps.binom.isf(alpha / 2, n, p0)  # reject at k+1 or more (upper tail)
        return float(sps.binom.sf(k, n, q))

    lo, hi = 10, 10
    while pw(hi) < power:
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # the power wobbles with n's lattice: the first n that reaches it
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if pw(mid) < power else (lo, mid)
    return hi


def scan_power(
    p1: np.ndarray,
    n: int,
    alpha: float = ALPHA,
    draws: int = 1000,
    widths: tuple[int, ...] = sectors.WIDTHS,
) -> float:
    crit = sectors.critical_value(n, alpha, widths=widths)
    rng = np.random.default_rng([SEED, n])
    z = sectors.scan_z(rng.multinomial(n, p1, size=draws), widths)[0]
    return float((z > crit).mean())


def scan_spins(
    p1: np.ndarray,
    alpha: float = ALPHA,
    power: float = POWER,
    widths: tuple[int, ...] = sectors.WIDTHS,
    start: int = 100,
) -> int:
    """Spins for the sector scan (or the signature's peak scan: `widths`) to reach `power`
    at `alpha`, by simulation (to ~3 %), looking from `start` spins up."""
    lo, hi = start, 2 * start
    while scan_power(p1, hi, alpha, widths=widths) < power:
        lo, hi = hi, hi * 2
        if hi > 10_000_000:
            raise ValueError("the scan does not reach that power below 10 million spins")
    while hi / lo > 1.03:
        mid = round((lo * hi) ** 0.5)
        lo, hi = (mid, hi) if scan_power(p1, mid, alpha, widths=widths) < power else (lo, mid)
    return hi


def monitor_delays(p1: np.ndarray, runs: int = 100, limit: int = 150_000) -> np.ndarray:
    """Spins to the monitor's first alarm on a wheel with these probabilities (wheel order),
    at its default threshold; `limit` + 1 for a run that never alarmed."""
    design = Design()
    h = threshold_for(design, 0.01, 10_000)
    rng = np.random.default_rng([SEED, 7])
    out = []
    per = max(1, 2_000_000 // limit)
    for i in range(0, runs, per):
        k = min(per, runs - i)
        first = first_alarm(rng.choice(POCKETS, size=(k, limit), p=p1), design, h)
        out.append(np.where(first == 0, limit + 1, first))
    return np.concatenate(out)


def power_table(monitor_runs: int = 0, signature: tuple[int, float] = (5, 0.1)) -> list[PowerRow]:
    """The rows of `rmc stats --power`; `signature`: the dealer signature's (width, S)."""
    from rmc.stats.signature import WIDTHS as PEAKS

    a, b, c = pocket_bias(), sector_bias(), signature_bias(*signature)
    rows = [
        PowerRow(a.what, "chi-square (38 dof)", chi2_spins(a.probs), None, "noncentral chi-square"),
        PowerRow(
            a.what,
            "pocket binomial, Holm",
            binom_spins(float(a.probs[0])),
            None,
            "exact binomial at 1%/39",
        ),
        PowerRow(b.what, "chi-square (38 dof)", chi2_spins(b.probs), None, "noncentral chi-square"),
        PowerRow(b.what, "sector scan", scan_spins(b.probs), None, "simulation"),
        PowerRow(
            c.what,
            "signature chi-square (38 dof)",
            chi2_spins(c.probs),
            None,
            "noncentral chi-square",
        ),
        PowerRow(
            c.what,
            "signature peak scan (3-9)",
            scan_spins(c.probs, widths=PEAKS, start=10),
            None,
            "simulation",
        ),
    ]
    if monitor_runs:
        for bias in (a, b):
            d = monitor_delays(bias.probs, monitor_runs)
            rows.append(
                PowerRow(
                    bias.what,
                    "CUSUM monitor (median delay)",
                    int(np.median(d)),
                    int(np.quantile(d, 0.9)),
                    f"simulation, {monitor_runs} runs",
                )
            )
    return rows
