"""Where the ball ends, counted from the pocket under it at the drop (issue 26).

`SpinRecord.drop_offset`: pockets, in the rotor's frame, from the pocket under the ball when
it leaves the rim to the pocket of rest, the ball's way over the rotor positive. A predictor
that knew the drop exactly would still face this spread: the spiral, the deflectors and the
bounces. Its figures here are what `rmc sim`, the plots and the bench print, and what
docs/sim.md compares with the published ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from rmc.sim.builder import SpinRecord

POCKETS = 39
HALF = POCKETS // 2  # offsets run −19..19


@dataclass(frozen=True)
class DropOffsets:
    """The distribution of `drop_offset` over some spins."""

    counts: tuple[int, ...]  # spins at each offset, −19..19

    @classmethod
    def of(cls, spins: Iterable[SpinRecord]) -> DropOffsets:
        offs = [sp.drop_offset for sp in spins if sp.drop_offset is not None]
        counts = np.bincount(np.asarray(offs, int) + HALF, minlength=POCKETS)
        return cls(tuple(int(c) for c in counts))

    @property
    def n(self) -> int:
        return sum(self.counts)

    def _share(self, within: int) -> float:
        return sum(self.counts[HALF - within : HALF + within + 1]) / max(1, self.n)

    @property
    def median_abs(self) -> float:
        offs = np.repeat(np.arange(-HALF, HALF + 1), self.counts)
        return float(np.median(np.abs(offs))) if offs.size else float("nan")

    @property
    def within3(self) -> float:
        """Share within ±3 pockets of the drop's pocket (7 pockets; 7/39 = 18 % if flat)."""
        return self._share(3)

    @property
    def within9(self) -> float:
        """Share within ±9 pockets (19 pockets; 49 % if flat)."""
        return self._share(9)

    def best_window(self, width: int) -> float:
        """The largest share in `width` neighbouring offsets: what a bettor who knew the drop
        and had learnt this spread would win with `width` pleins (width/39 if flat)."""
        c = np.asarray(self.counts)
        ring = np.concatenate([c, c[: width - 1]])
        return float(np.convolve(ring, np.ones(width, int), "valid").max()) / max(1, self.n)

    def line(self) -> str:
        return (
            f"pocket of rest from the pocket under the drop ({self.n} spins): median "
            f"|offset| {self.median_abs:.0f}, within ±3 {100 * self.within3:.0f} %, ±9 "
            f"{100 * self.within9:.0f} %, best 5 {100 * self.best_window(5):.0f} %, best 9 "
            f"{100 * self.best_window(9):.0f} % (flat: 18, 49, 13, 23 %)"
        )
