"""The dealer's signature (issue 24): is where the ball ends tied to where the rotor was?

The firmware reports, for each spin, the pocket under ball sensor A at the ball's first pass
(LAUNCH's `under`) and at its last pass before the drop (DROP's `under`), from the rotor's
place (`docs/protocol.md`). For each result and each of those pockets, the **distance**: how
many pockets on from it, in the wheel's order, the result lies, counted the way the ball
travels over the rotor — against the rotor's turn: clockwise (up the wheel's order) when the
rotor turns counter-clockwise, counter-clockwise when it turns clockwise — modulo 39. Where
the rotor's direction is not on record, clockwise (`unsigned` counts them).

A fair wheel under a croupier whose throws vary puts the result anywhere whatever pocket was
under the sensor: the 39 distances are equally likely, **whatever the pocket counts say**.
A croupier who throws the same way each time (the same speeds, the same moment) sends the
ball the same way round from the first pass: the distance from it is peaked (a predictable
hand); a wheel whose ball leaves the track and scatters the same way each time peaks the
distance from the drop (a predictable wheel). The pockets' own counts stay flat when the
rotor's place at the release is anywhere.

Two tests per reference pocket, each at 1 %: Pearson's chi-square on the 39 distance counts
(38 dof), and a scan for a peak of 3 to 9 neighbouring distances (the sector scan's
machinery, `rmc.stats.sectors`, calibrated by simulating fair draws of the same n).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from rmc.stats import sectors
from rmc.stats.sources import Result
from rmc.stats.wheel_order import WheelOrder

POCKETS = 39
WIDTHS = tuple(range(3, 10))  # peaks looked for: 3 to 9 neighbouring distances
# reference pocket -> (its Result field, its name in the output)
REFS = {"first": ("under_first", "first pass"), "drop": ("under_drop", "drop")}
MIN_EXPECTED = 5.0  # per distance, for the chi-square law (195 results)


@dataclass(frozen=True)
class Distances:
    """The distances of the results that have a reference pocket, and what was left out."""

    d: np.ndarray  # 0..38
    left_out: int  # results without the pocket on record
    unsigned: int  # results counted clockwise, their rotor's direction not on record


def distances(results: Sequence[Result], order: WheelOrder, ref: str) -> Distances:
    """Each result's distance from its reference pocket ("first" or "drop")."""
    attr = REFS[ref][0]
    out: list[int] = []
    left = unsigned = 0
    for r in results:
        u = getattr(r, attr)
        if u is None:
            left += 1
            continue
        d = order.index(r.number) - order.index(u)
        if r.direction == "cw":
            d = -d  # the ball goes counter-clockwise over a clockwise rotor
        elif r.direction != "ccw":
            unsigned += 1
        out.append(d % POCKETS)
    return Distances(np.asarray(out, dtype=np.int64), left, unsigned)


def distance_tests(d: np.ndarray, alpha: float) -> dict[str, Any]:
    """Chi-square and the peak scan on distances (JSON-ready; n = 0: counts only)."""
    counts = np.bincount(d, minlength=POCKETS)
    n = int(d.size)
    out: dict[str, Any] = {"n": n, "counts": [int(x) for x in counts], "flags": []}
    if n == 0:
        return out
    e = n / POCKETS
    chi2 = float(((counts - e) ** 2).sum() / e)
    chi2_p = float(sps.chi2.sf(chi2, POCKETS - 1))
    sc = sectors.scan(counts, widths=WIDTHS)
    out.update(
        {
            "expected": e,
            "small_sample": e < MIN_EXPECTED,
            "chi2": {"statistic": chi2, "dof": POCKETS - 1, "p": chi2_p},
            "peak": {
                "z": sc.z,
                "p": sc.p,
                "distances": [(sc.start + k) % POCKETS for k in range(sc.width)],
                "width": sc.width,
                "count": sc.count,
                "expected": sc.expected,
                "widths": [min(WIDTHS), max(WIDTHS)],
                "null_draws": sc.draws,
            },
        }
    )
    if chi2_p < alpha:
        out["flags"].append("chi-square")
    if sc.p < alpha:
        out["flags"].append("peak")
    return out


def analyse_signature(
    results: Sequence[Result], order: WheelOrder, alpha: float
) -> tuple[dict[str, Any], list[str]]:
    """The section, and its flags (as the battery names them: "signature from the first
    pass: peak", ...)."""
    out: dict[str, Any] = {"alpha": alpha, "widths": [min(WIDTHS), max(WIDTHS)]}
    flags: list[str] = []
    for ref, (_, name) in REFS.items():
        ds = distances(results, order, ref)
        sec = distance_tests(ds.d, alpha)
        sec["left_out"] = ds.left_out
        sec["unsigned"] = ds.unsigned
        out[ref] = sec
        flags += [f"signature from the {name}: {f}" for f in sec["flags"]]
    return out, flags


def notes(section: dict[str, Any], where: str = "") -> list[str]:
    """One line for each reference that left results out."""
    out = []
    for ref, (_, name) in REFS.items():
        sec = section[ref]
        if sec["left_out"]:
            total = sec["left_out"] + sec["n"]
            out.append(
                f"dealer's signature{where}: {sec['left_out']} of {total} results without the "
                f"pocket under the ball sensor at the {name} (frames without `under`, or "
                "the rotor's place not known), left out"
            )
    return out
