""" "Rien ne va plus" on lapgen's data, by a Bayes oracle: what any predictor could reach.

The oracle knows what the firmware's predictor has to learn or guess: the wheel of each file
(its drop period and drag, as `tests/fw/lapgen.py` drew them), the generator's spread of a
spin's drop speed (1.5 % on the period) and of its friction (the last-lap growth range), and
the timing noise. It does not know the spin's own draws. After each pass it weighs a grid of
spins (drop speed x friction x speed at the first pass seen: 15 x 11 x 200) by the Gaussian
likelihood of the passes seen (their common offset fitted out), and calls at the time that
puts the most probability within +-0.5 s of the lead, among those whose chance of coming after
the last pass is at most 0.001 (the firmware's own bound); if the next pass comes first, it
weighs again. The lead counts to the last pass, as `rmc rnvp` counts it; spins of fewer than
4 laps are left out, as in `bench_rnvp.py`.

Not part of `make bench`: about 3 minutes a wheel (25 minutes a noise level, numpy). At 20 ms:
225 of 288 within (78 %, 1 late), DESIGN growth 128 of 142 (90 %). At 10 ms the default grid
is too coarse for a bound (5 late); with 21 x 11 x 500 spins (`--grid 21 11 500`, ~40 minutes
on one core) 233 of 288 (81 %), still 4 late, all on the 0.7 s wheel: 202 of the other
wheels' 252 (80 %).
    .venv/bin/python tests/bench/rnvp_oracle.py 0.02            # lapgen's wheels, 20 ms
    .venv/bin/python tests/bench/rnvp_oracle.py 0.02 --design   # DESIGN.md's growth
    .venv/bin/python tests/bench/rnvp_oracle.py 0.01 --grid 21 11 500
The figures are in docs/firmware.md, "Figures".
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fw"))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

import lapgen  # noqa: E402
from bench_rnvp import DESIGN_WHEELS, LEAD, WHEELS, lapgen_file  # noqa: E402

RISK = 0.001  # as the firmware's _RISK
MIN_LAPS = 4
JITTER = 0.015  # lapgen's spread of the drop period from spin to spin
SIGMA_MIN = 0.003  # s: the grid's own resolution, for exact passes


def cdf(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF (Abramowitz & Stegun 7.1.26: numpy has no erf)."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    e = 1.0 - poly * np.exp(-z * z)
    return 0.5 * (1.0 + np.where(x >= 0, e, -e))


class Grid:
    """The spins a wheel can give: pass times from the first pass seen, and prior weights."""

    def __init__(self, last_lap_s: float, drag: float, growth: tuple, n_tc=15, n_f=11, n_u=200):
        z = np.linspace(-3.0, 3.0, n_tc)
        t_c = last_lap_s * 1.07 * (1.0 + JITTER * z)
        f = 1.0 - 1.0 / np.linspace(growth[0], growth[1], n_f) ** 2
        u_c = np.repeat(1.0 / t_c**2, n_f)
        weight = np.repeat(np.exp(-0.5 * z * z), n_f)
        b = (np.tile(f, n_tc) - drag) * u_c
        # the first pass seen: from the drop speed up to a 0.45 s lap, log-uniform
        frac = np.linspace(0.0, 1.0, n_u)
        top = math.log(1.0 / 0.45**2)
        u = np.exp(np.log(u_c)[:, None] + frac[None, :] * (top - np.log(u_c)[:, None])).ravel()
        u_c = np.repeat(u_c, n_u)
        b = np.repeat(b, n_u)
        self.weight = np.repeat(weight, n_u)
        a = 1.0 - drag
        self.times = np.full((u.size, 61), np.nan)
        self.times[:, 0] = 0.0
        self.last = np.zeros(u.size, dtype=int)  # index of each spin's last pass
        alive = np.ones(u.size, dtype=bool)
        for j in range(1, 61):
            nxt = a * u - b
            alive &= nxt >= u_c
            if not alive.any():
                break
            # lapgen's own lap integral, on the spins still running (numpy arrays pass through)
            lap = lapgen._lap(u[alive], a, b[alive])
            self.times[alive, j] = self.times[alive, j - 1] + lap
            self.last[alive] = j
            u = np.where(alive, nxt, u)

    def call(self, seen: list[float], sigma: float) -> float:
        """The call time (s) after the passes `seen`, from the posterior of the last pass."""
        k = len(seen) - 1
        ok = self.last >= max(k, MIN_LAPS)
        r = np.asarray(seen)[None, :] - self.times[ok, : k + 1]
        offset = r.mean(axis=1)
        ss = ((r - offset[:, None]) ** 2).sum(axis=1)
        s2 = max(sigma, SIGMA_MIN) ** 2
        ll = -ss / (2.0 * s2)
        w = self.weight[ok] * np.exp(ll - ll.max())
        last = self.times[ok][np.arange(ok.sum()), self.last[ok]] + offset
        keep = w > 1e-7 * w.sum()
        w, last = w[keep] / w[keep].sum(), last[keep]
        sd = math.sqrt(s2 * (1.0 + 1.0 / (k + 1)))  # the last pass's own error, and the offset's
        now = seen[-1]
        lo, hi = now, float(last.max()) + 0.05
        for _ in range(30):  # the latest call within the risk bound
            mid = (lo + hi) / 2
            if (w * cdf((mid - last) / sd)).sum() <= RISK:
                lo = mid
            else:
                hi = mid
        xs = np.arange(now, lo + 1e-9, 0.005)
        if xs.size == 0:
            return now
        d = last[None, :] - xs[:, None]
        within = (w * (cdf((LEAD + 0.5 - d) / sd) - cdf((LEAD - 0.5 - d) / sd))).sum(axis=1)
        return float(xs[np.argmax(within)])


def run(
    last_lap_s: float, seed: int, noise: float, growth: tuple, size=(15, 11, 200)
) -> tuple[int, int, int]:
    """(spins, within, late) for one lapgen wheel's file; size: the grid's (drop speeds,
    frictions, first-pass speeds)."""
    drag = lapgen.Wheel(lapgen.Rng(seed), last_lap_s, growth=growth).drag
    grid = Grid(last_lap_s, drag, growth, *size)
    n = within = late = 0
    for laps in lapgen_file(last_lap_s, seed, noise, growth=growth):
        passes = [0.0]
        for lap in laps:
            passes.append(passes[-1] + lap)
        call = None
        for k in range(len(laps)):
            x = grid.call(passes[: k + 1], noise)
            if x < passes[k + 1]:
                call = x
                break
        n += 1
        if call is None:
            late += 1
        else:
            within += abs(passes[-1] - call - LEAD) <= 0.5
    return n, within, late


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("noise", type=float, help="timing noise on each pass (s)")
    ap.add_argument("--design", action="store_true", help="DESIGN.md's last-lap growth")
    ap.add_argument(
        "--grid",
        type=int,
        nargs=3,
        default=(15, 11, 200),
        metavar=("SPEEDS", "FRICTIONS", "FIRST"),
        help="grid size: drop speeds, frictions, first-pass speeds (default 15 11 200)",
    )
    args = ap.parse_args()
    if min(args.grid) < 2:
        ap.error("--grid: at least 2 points on each axis")
    growth, wheels = ((1.28, 1.38), DESIGN_WHEELS) if args.design else ((1.15, 1.22), WHEELS)
    total = [0, 0, 0]
    for last_lap_s, seed in wheels:
        n, within, late = run(last_lap_s, seed, args.noise, growth, tuple(args.grid))
        total = [total[0] + n, total[1] + within, total[2] + late]
        print(f"wheel {last_lap_s} s (seed {seed}): {within}/{n} within, {late} late", flush=True)
    n, within, late = total
    share = 100 * within / n
    print(f"noise {args.noise * 1000:.0f} ms: {within}/{n} within ({share:.0f} %), {late} late")


if __name__ == "__main__":
    main()
