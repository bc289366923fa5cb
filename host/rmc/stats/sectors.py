"""Sectors: runs of neighbouring pockets on the wheel, of every width 3..19, as a scan.

For a sector of width w (p = w/39 under a fair wheel) holding S of n results, its
standardized excess is z = (S − n·p) / √(n·p·(1−p)). The scan statistic is the largest z over
every sector of every width (39 starts × 17 widths, overlapping, hence strongly
correlated): no textbook law fits it, so its p-value is calibrated by simulating fair wheels
of the same n (multinomial draws, numpy, a fixed seed, cached per n): deterministic, and a
few tens of milliseconds for any n.

p = (1 + #{fair draws with a statistic ≥ the one seen}) / (1 + draws): never 0, resolution
1/(draws + 1).

The widths are a parameter: the dealer's signature (`rmc.stats.signature`) scans the 39
distances of the results from a pocket for a peak of 3 to 9, with the same machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

POCKETS = 39
WIDTHS = tuple(range(3, 20))
NULL_DRAWS = 10_000
NULL_SEED = 0x5EC7  # fixed: the same p-value for the same counts, every run


@dataclass(frozen=True)
class ScanResult:
    n: int
    z: float  # the largest standardized excess
    start: int  # wheel position of the sector's first pocket (clockwise)
    width: int
    count: int  # results in that sector
    expected: float
    p: float  # calibrated by simulation
    draws: int


def scan_z(
    counts: np.ndarray, widths: tuple[int, ...] = WIDTHS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For counts of shape (K, 39) in wheel order: the largest z of each row, and its
    sector's start and width."""
    c = np.atleast_2d(np.asarray(counts, dtype=np.float64))
    k = c.shape[0]
    n = c.sum(axis=1)
    ext = np.concatenate([np.zeros((k, 1)), c, c[:, : max(widths) - 1]], axis=1).cumsum(axis=1)
    best = np.full(k, -np.inf)
    start = np.zeros(k, dtype=np.int64)
    width = np.zeros(k, dtype=np.int64)
    safe_n = np.where(n > 0, n, 1.0)
    for w in widths:
        p = w / POCKETS
        sums = ext[:, w : w + POCKETS] - ext[:, :POCKETS]  # sector s = pockets s .. s+w-1
        z = (sums - safe_n[:, None] * p) / np.sqrt(safe_n[:, None] * p * (1 - p))
        arg = z.argmax(axis=1)
        zmax = z[np.arange(k), arg]
        better = zmax > best
        best = np.where(better, zmax, best)
        start = np.where(better, arg, start)
        width = np.where(better, w, width)
    return best, start, width


@lru_cache(maxsize=64)
def null_distribution(
    n: int, draws: int = NULL_DRAWS, seed: int = NULL_SEED, widths: tuple[int, ...] = WIDTHS
) -> np.ndarray:
    """The scan statistic of `draws` fair wheels of n results, sorted (cached per n)."""
    key = [seed, n] if widths == WIDTHS else [seed, n, *widths]  # (the sectors' stream as it was)
    rng = np.random.default_rng(key)
    out = np.empty(draws)
    chunk = 2500
    for i in range(0, draws, chunk):
        m = min(chunk, draws - i)
        draw = rng.multinomial(n, np.full(POCKETS, 1 / POCKETS), size=m)
        out[i : i + m] = scan_z(draw, widths)[0]
    out.sort()
    out.flags.writeable = False
    return out


def p_value(
    z: float | np.ndarray, n: int, draws: int = NULL_DRAWS, widths: tuple[int, ...] = WIDTHS
) -> np.ndarray:
    """Calibrated p-values of scan statistics of n results."""
    null = null_distribution(n, draws, widths=widths)
    exceed = null.size - np.searchsorted(null, np.asarray(z) - 1e-12, side="left")
    return (1.0 + exceed) / (1.0 + null.size)


def critical_value(
    n: int, alpha: float, draws: int = NULL_DRAWS, widths: tuple[int, ...] = WIDTHS
) -> float:
    """The scan statistic a fair wheel of n results exceeds with probability alpha."""
    null = null_distribution(n, draws, widths=widths)
    return float(np.quantile(null, 1 - alpha))


def scan(
    counts: np.ndarray, draws: int = NULL_DRAWS, widths: tuple[int, ...] = WIDTHS
) -> ScanResult:
    """The scan of one count vector (39, wheel order)."""
    c = np.asarray(counts, dtype=np.int64)
    n = int(c.sum())
    if n == 0:
        raise ValueError("no results")
    z, s, w = (x[0] for x in scan_z(c[None, :], widths))
    s, w = int(s), int(w)
    count = int(sum(c[(s + k) % POCKETS] for k in range(w)))
    return ScanResult(
        n=n,
        z=float(z),
        start=s,
        width=w,
        count=count,
        expected=n * w / POCKETS,
        p=float(p_value(z, n, draws, widths)),
        draws=draws,
    )
