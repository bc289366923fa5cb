"""How irregular is a ball on its track? Residuals of clocked laps around a smooth deceleration.

Each spin's lap periods T_k (oldest first) are fitted by a low-order curve, log T_k = poly(k)
(degree 3 by default: the deceleration's shape, friction then drag, changes along a spin), and
the residuals T_k − fit_k are pooled over the spins: their standard deviation in ms and
relative to the fit, and their lag-1 autocorrelation. Clocking noise on the pass instants
(white) gives lap residuals correlated −0.5 from one lap to the next (a late click lengthens
one lap and shortens the next); an irregular track (a persistent change of speed) gives
positive correlation; the fit itself pulls the figure down by ≈0.3 on spins of 8–25 laps. So
the pair (sd, lag 1), compared with the simulator's laps run through the same fit with a known
clocking noise, is what calibrates `Params.track_noise` (docs/sim.md).

    python -m rmc.sim.lapfit LAPS.csv [--newest-first] [--degree 3] [--min-laps 8]

reads one spin a line (comma-separated periods in seconds; `rmc sim --laps` writes this).
`--newest-first` for files that list a spin's laps from the drop backwards (such files often
hold the same spin several times, cut at different laps: a row that is the start of a longer
row is dropped).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rmc import infile


def read_lap_rows(path: str | Path, newest_first: bool = False) -> list[list[float]]:
    """The rows of a lap file, oldest lap first, rounded to the millisecond."""
    rows: list[list[float]] = []
    for line in infile.read_text(path).splitlines():
        vals = [round(float(x), 3) for x in line.split(",") if x.strip()]
        if vals:
            rows.append(vals[::-1] if newest_first else vals)
    return rows


def distinct_spins(rows: Iterable[Sequence[float]]) -> list[list[float]]:
    """The longest version of each spin: a row that starts another row is left out."""
    out: list[tuple[float, ...]] = []
    for r in sorted({tuple(r) for r in rows}, key=len, reverse=True):
        if not any(g[: len(r)] == r for g in out):
            out.append(r)
    return [list(g) for g in out]


@dataclass(frozen=True)
class LapResiduals:
    """Lap residuals around each spin's smooth fit, pooled over the spins."""

    spins: int
    laps: int
    sd_ms: float
    rel_sd: float  # relative to the fitted period
    lag1: float  # lag-1 autocorrelation of the relative residuals within a spin
    median_lap_s: float


def fit_residuals(laps: Sequence[float], degree: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(residuals, fitted periods) of one spin, log T_k fitted by a polynomial in k."""
    t = np.asarray(laps, float)
    k = np.arange(t.size)
    fit = np.exp(np.polyval(np.polyfit(k, np.log(t), degree), k))
    return t - fit, fit


def lap_residuals(
    spins: Iterable[Sequence[float]], degree: int = 3, min_laps: int = 8
) -> LapResiduals:
    """Pooled residual figures of the spins with at least `min_laps` laps."""
    res, rel, kept = [], [], []
    num = den = 0.0
    for laps in spins:
        if len(laps) < min_laps:
            continue
        r, fit = fit_residuals(laps, degree)
        q = r / fit
        res.append(r)
        rel.append(q)
        kept.append(np.asarray(laps, float))
        num += float(np.sum(q[1:] * q[:-1]))
        den += float(np.sum(q[:-1] ** 2))
    if not res:
        raise ValueError(f"no spin with {min_laps} laps or more")
    r_all, q_all = np.concatenate(res), np.concatenate(rel)
    return LapResiduals(
        spins=len(res),
        laps=int(r_all.size),
        sd_ms=float(1000 * np.sqrt(np.mean(r_all**2))),
        rel_sd=float(np.sqrt(np.mean(q_all**2))),
        lag1=num / den if den else 0.0,
        median_lap_s=float(np.median(np.concatenate(kept))),
    )


def clocked(
    spins: Iterable[Sequence[float]], clock_s: float, tick_s: float, seed: int = 0
) -> list[list[float]]:
    """The spins' laps as a clocker would see them: white noise of `clock_s` on each pass
    instant, then rounded to a `tick_s` clock (0: none)."""
    rng = np.random.default_rng([seed, 0xC10C])
    out = []
    for laps in spins:
        t = np.concatenate([[0.0], np.cumsum(laps)]) + rng.normal(0.0, clock_s, len(laps) + 1)
        if tick_s:
            t = np.round(t / tick_s) * tick_s
        out.append([float(x) for x in np.diff(t)])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rmc.sim.lapfit", description=__doc__)
    ap.add_argument("laps", help="lap file: one spin a line, periods in seconds")
    ap.add_argument("--newest-first", action="store_true", help="rows list the last lap first")
    ap.add_argument("--degree", type=int, default=3, help="degree of the fit of log T (3)")
    ap.add_argument("--min-laps", type=int, default=8, help="shorter spins are left out (8)")
    a = ap.parse_args(argv)
    try:
        spins = distinct_spins(read_lap_rows(a.laps, a.newest_first))
        r = lap_residuals(spins, a.degree, a.min_laps)
    except (OSError, ValueError) as e:
        print(f"lapfit: {e}", file=sys.stderr)
        return 2
    print(
        f"{r.spins} spins, {r.laps} laps (median {r.median_lap_s:.3f} s): residual sd "
        f"{r.sd_ms:.1f} ms, {100 * r.rel_sd:.2f} % of the lap, lag-1 autocorrelation {r.lag1:+.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
