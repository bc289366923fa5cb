"""The simple chances and the zeros.

The decree's simple chances — rouge/noir, pair/impair, manque (1–18)/passe (19–36) — are
decided on 1–36 only: on `0` they lose half (the partage), on `00` and `CMC` they lose
(DESIGN.md). So their shares and runs are taken over the results in 1–36, the zeros left
out; each side has probability 1/2 there. Per chance:

- the share of its first side, with an exact two-sided binomial test against 1/2;
- the Wald–Wolfowitz runs test on the sequence of sides, in the order played: too few runs
  (streaks) or too many (alternation) against independence, two-sided, normal approximation
  (fine from a few dozen results; with fewer `p` is None).

The zeros (`0`, `00`, `CMC`) together: their share against 3/39, exact binomial.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import sqrt

import numpy as np
from scipy import stats as sps

from rmcfw import numbers

CHANCES = (
    ("rouge/noir", numbers.ROUGE, 0),
    ("pair/impair", numbers.PAIR, 1),
    ("manque/passe", numbers.MANQUE, 2),
)
ZEROS = (numbers.ZERO, numbers.DOUBLE_ZERO, numbers.CMC)
MIN_RUNS_N = 20  # below this many results on 1-36, no runs p-value


@dataclass(frozen=True)
class RunsTest:
    n1: int
    n2: int
    runs: int
    expected: float
    z: float | None
    p: float | None


@dataclass(frozen=True)
class ChanceTest:
    name: str  # "rouge/noir"
    first: str  # "rouge"
    n: int  # results in 1-36
    k: int  # of them on the first side
    share: float | None
    p: float | None  # binomial against 1/2
    runs: RunsTest


@dataclass(frozen=True)
class ZerosTest:
    n: int
    k: int
    share: float
    expected: float  # 3/39
    p: float


def runs_test(x: np.ndarray) -> RunsTest:
    """Wald–Wolfowitz runs test of a 0/1 sequence (two-sided, normal approximation)."""
    x = np.asarray(x, dtype=bool)
    n = x.size
    n1 = int(x.sum())
    n2 = n - n1
    runs = int(1 + np.count_nonzero(x[1:] != x[:-1])) if n else 0
    if n1 == 0 or n2 == 0:
        return RunsTest(n1, n2, runs, float(runs), None, None)
    mean = 2.0 * n1 * n2 / n + 1.0
    var = 2.0 * n1 * n2 * (2.0 * n1 * n2 - n) / (n * n * (n - 1.0))
    if n < MIN_RUNS_N or var <= 0:
        return RunsTest(n1, n2, runs, mean, None, None)
    z = (runs - mean) / sqrt(var)
    return RunsTest(n1, n2, runs, mean, z, float(2.0 * sps.norm.sf(abs(z))))


# Per label: (is rouge, is pair, is manque), None for the zeros.
_SIDES = {lab: numbers.chances(lab) for lab in numbers.NUMBERS}


def side_table(pockets: tuple[str, ...]) -> np.ndarray:
    """For wheel positions: int8 rows (rouge, pair, manque) as 1/0, -1 for a zero."""
    t = np.full((len(pockets), 3), -1, dtype=np.int8)
    for i, lab in enumerate(pockets):
        ch = _SIDES[lab]
        if ch is not None:
            t[i] = [ch[0] == numbers.ROUGE, ch[1] == numbers.PAIR, ch[2] == numbers.MANQUE]
    return t


def chance_tests(idx: np.ndarray, pockets: tuple[str, ...]) -> tuple[list[ChanceTest], ZerosTest]:
    """The tests on results given as wheel positions, in the order played."""
    idx = np.asarray(idx, dtype=np.int64)
    n = idx.size
    if n == 0:
        raise ValueError("no results")
    sides = side_table(pockets)[idx]
    numbered = sides[:, 0] >= 0
    out = []
    m = int(numbered.sum())
    for name, first, col in CHANCES:
        x = sides[numbered, col].astype(bool)
        k = int(x.sum())
        p = float(sps.binomtest(k, m, 0.5).pvalue) if m else None
        out.append(ChanceTest(name, first, m, k, k / m if m else None, p, runs_test(x)))
    kz = n - m
    zeros = ZerosTest(n, kz, kz / n, 3 / 39, float(sps.binomtest(kz, n, 3 / 39).pvalue))
    return out, zeros
