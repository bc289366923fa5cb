"""Per-pocket tests: are the 39 pockets equally likely (1/39 each)?

- Pearson's chi-square (38 degrees of freedom), its p-value from the chi-square
  distribution (scipy: the exact tail of the asymptotic law, not a table);
- the G-test (log-likelihood ratio), same law;
- each pocket's exact two-sided binomial test against 1/39, the 39 p-values corrected for
  multiplicity by Holm's step-down method (family-wise error) and, for reference, by
  Benjamini-Hochberg (false discovery rate).

The chi-square law is an approximation that wants about 5 expected per pocket (195 results);
below that `small_sample` is set and the output says the p-values are rough.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

P0 = 1.0 / 39.0
MIN_EXPECTED = 5.0


@dataclass(frozen=True)
class PocketTests:
    n: int
    counts: list[int]  # wheel order
    expected: float
    chi2: float
    chi2_p: float
    g: float
    g_p: float
    binom_p: list[float]  # raw two-sided binomial p-values, wheel order
    holm_p: list[float]  # Holm-adjusted
    bh_p: list[float]  # Benjamini-Hochberg-adjusted
    dof: int = 38

    @property
    def small_sample(self) -> bool:
        return self.expected < MIN_EXPECTED

    def flagged(self, alpha: float) -> list[int]:
        """Wheel positions whose Holm-adjusted p is below alpha."""
        return [i for i, p in enumerate(self.holm_p) if p < alpha]


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (monotone, capped at 1)."""
    p = np.asarray(p, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (scipy's false_discovery_control)."""
    p = np.asarray(p, dtype=float)
    return np.asarray(sps.false_discovery_control(p, method="bh")) if p.size else p


def binom_two_sided(counts: np.ndarray, n: int, p0: float = P0) -> np.ndarray:
    """Exact two-sided binomial p-values (scipy.stats.binomtest's rule: the outcomes no
    more likely than the one seen), for each count."""
    return np.array([sps.binomtest(int(k), n, p0).pvalue for k in counts])


def pocket_tests(counts: np.ndarray) -> PocketTests:
    """The tests on a vector of 39 counts (any order; results keep it)."""
    c = np.asarray(counts, dtype=np.int64)
    if c.size != 39:
        raise ValueError(f"need 39 counts, got {c.size}")
    n = int(c.sum())
    if n == 0:
        raise ValueError("no results")
    e = n * P0
    chi2 = float(((c - e) ** 2).sum() / e)
    g = float(2.0 * (c[c > 0] * np.log(c[c > 0] / e)).sum())
    raw = binom_two_sided(c, n)
    return PocketTests(
        n=n,
        counts=[int(x) for x in c],
        expected=e,
        chi2=chi2,
        chi2_p=float(sps.chi2.sf(chi2, 38)),
        g=g,
        g_p=float(sps.chi2.sf(g, 38)),
        binom_p=[float(x) for x in raw],
        holm_p=[float(x) for x in holm(raw)],
        bh_p=[float(x) for x in bh(raw)],
    )
