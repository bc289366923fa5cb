"""The wheel's scatter as the attacker learns it: where the ball came to rest relative to the
pocket it predicted, in the rotor's frame, counted the way the ball travels, over its
training spins only; and the pleins it bets from it.

The reference pocket is the one under the predicted drop point with the rotor taken `tau`
seconds after the drop: from the drop to the pockets the ball travels at a speed that is
about the same every spin (the rim lets it go at the wheel's own speed) while the rotor's
speed varies from spin to spin, so the best reference is at about the instant the ball
reaches the pockets. `tau` is learned as the one that gathers the training spins' offsets
most tightly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

TAUS = tuple(round(0.1 * i, 1) for i in range(31))  # 0 to 3 s
BANDWIDTH = 1.0  # pockets: the kernel's width over the learned offsets


def offsets(refs: np.ndarray, results: np.ndarray, dirs: np.ndarray, n: int = 39) -> np.ndarray:
    """Pockets from the reference to the result, the ball's way, in [0, n)."""
    return ((results - refs) * dirs) % n


def concentration(offs: np.ndarray, n: int = 39) -> float:
    """The mean resultant length of offsets on the circle of n pockets (1: all alike)."""
    offs = offs[np.isfinite(offs)]
    if offs.size == 0:
        return 0.0
    z = np.exp(2j * math.pi * offs / n)
    return float(abs(z.mean()))


@dataclass(frozen=True)
class Scatter:
    tau: float
    offs: np.ndarray  # the training spins' offsets
    n: int = 39

    def density(self) -> np.ndarray:
        """Probability of each offset 0..n−1 (a circular kernel over the learned ones)."""
        grid = np.arange(self.n, dtype=float)
        if self.offs.size == 0:
            return np.full(self.n, 1.0 / self.n)
        d = (grid[:, None] - self.offs[None, :] + self.n / 2) % self.n - self.n / 2
        k = np.exp(-0.5 * (d / BANDWIDTH) ** 2).sum(axis=1)
        return k / k.sum()

    def bets(
        self, ref: float, direction: int, pleins: int, dens: np.ndarray | None = None
    ) -> list[int]:
        """The `pleins` pocket channels most likely, for a reference pocket `ref`."""
        if not math.isfinite(ref):
            return list(range(pleins))  # nothing seen: any pockets (the house's odds)
        dens = self.density() if dens is None else dens
        rel = ((np.arange(self.n) - ref) * direction) % self.n
        # the density at each pocket's own offset, interpolated between whole offsets
        lo = np.floor(rel).astype(int) % self.n
        frac = rel - np.floor(rel)
        p = dens[lo] * (1 - frac) + dens[(lo + 1) % self.n] * frac
        order = np.argsort(-p, kind="stable")
        return [int(x) for x in order[:pleins]]


def learn(
    refs_by_tau: Sequence[np.ndarray], results: np.ndarray, dirs: np.ndarray, n: int = 39
) -> Scatter:
    """The tau whose references gather the training offsets best, and those offsets
    (spins without a prediction left out)."""
    best, best_c = 0, -1.0
    for i, refs in enumerate(refs_by_tau):
        c = concentration(offsets(refs, results, dirs, n), n)
        if c > best_c:
            best, best_c = i, c
    offs = offsets(refs_by_tau[best], results, dirs, n)
    return Scatter(TAUS[best], offs[np.isfinite(offs)], n)
