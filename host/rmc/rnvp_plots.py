"""`rmc rnvp --plot FILE`: each spin's "rien ne va plus" lead against the one asked, and how
the leads spread, to a PNG or SVG file (by its suffix)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from rmc.rnvp import TOLERANCE_S, SpinCall, on_target

FORMATS = (".png", ".svg")
GOOD, BAD, LATE, VOID = "#2e7d32", "#c62828", "#b71c1c", "#9e9e9e"


def check_path(path: Path | str) -> Path:
    """The plot's path; ValueError unless it ends in .png or .svg."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ValueError(f"--plot: {p.name}: give a .png or .svg file")
    return p


def plot_calls(
    calls: list[SpinCall],
    spins: list[list[float]],
    path: Path | str,
    lead_s: float,
    lead_revs: int = 0,
    min_laps: int = 4,
    title: str = "",
) -> Path:
    """Left: the lead of each spin's call (s before its last pass), the band of ±0.5 s
    around the lead asked, the late calls (after the last pass, or none) below zero and the
    void lines (fewer than `min_laps` laps) apart. Right: the leads' histogram."""
    path = check_path(path)
    n = len(calls)
    void = [len(laps) < min_laps for laps in spins]
    ok = [on_target(c, laps, lead_s, lead_revs) for c, laps in zip(calls, spins, strict=True)]
    if lead_revs:
        aim = f"{lead_revs} revolution{'s' * (lead_revs > 1)} before the last pass"
    else:
        aim = f"within ±{TOLERANCE_S:g} s of {lead_s:g} s"
    hit = sum(ok)
    late = sum(c.late and not v for c, v in zip(calls, void, strict=True))
    fig, (ax, hx) = plt.subplots(
        1, 2, figsize=(11, 4.5), dpi=110, gridspec_kw={"width_ratios": [3, 1]}
    )
    x = np.arange(1, n + 1)
    if not lead_revs:
        ax.axhspan(lead_s - TOLERANCE_S, lead_s + TOLERANCE_S, color="#e8f5e9", zorder=0)
        ax.axhline(lead_s, color=GOOD, lw=1, ls="--", label=f"asked {lead_s:g} s")
    ax.axhline(0, color="black", lw=0.8)
    called = [
        (i, c.lead_s)
        for i, c in enumerate(calls)
        if c.lead_s is not None and not c.late and not void[i]
    ]
    leads = np.asarray([lead for _, lead in called])
    # a call many laps early would squash the rest: drawn at the top, its lead written
    top = lead_s + 2.0 if not lead_revs else 3.0
    if leads.size:
        top = max(top, min(float(np.percentile(leads, 95)) * 1.2, float(leads.max())) + 0.3)
    for good, colour, label in ((True, GOOD, aim), (False, BAD, "outside")):
        pts = [(x[i], min(lead, top)) for i, lead in called if ok[i] == good]
        if pts:
            px, py = zip(*pts, strict=True)
            ax.scatter(px, py, s=14, color=colour, label=f"{label}: {len(pts)}", zorder=3)
    for i, lead in called:
        if lead > top:
            ax.annotate(
                f"{lead:.1f} s",
                (x[i], top),
                xytext=(4, -10),
                textcoords="offset points",
                fontsize=7,
                color=BAD,
            )
    lows = [c.lead_s for c in calls if c.lead_s is not None]
    floor = min([0.0, *lows]) - 0.3
    late_x = [x[i] for i, c in enumerate(calls) if c.late and not void[i]]
    void_x = [x[i] for i in range(n) if void[i]]
    for xs, marker, colour, label in (
        (late_x, "x", LATE, "late (after the last pass, or never)"),
        (void_x, "|", VOID, f"void (fewer than {min_laps} laps)"),
    ):
        if xs:  # drawn below zero: no lead to show
            ax.scatter(
                xs,
                [floor] * len(xs),
                marker=marker,
                s=36,
                color=colour,
                zorder=3,
                label=f"{label}: {len(xs)}",
            )
    ax.set_xlabel("spin (line of the file)")
    ax.set_ylabel("lead: seconds before the last pass")
    ax.set_xlim(0, n + 1)
    for axis in (ax.xaxis, hx.xaxis):  # spins are counted whole
        axis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(floor - 0.2, top + 0.2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    if leads.size:
        hx.hist(
            np.minimum(leads, top),
            bins=np.arange(floor, top + 0.1, max(0.1, (top - floor) / 60)),
            orientation="horizontal",
            color="#3d6fb6",
            edgecolor="white",
        )
    hx.set_ylim(ax.get_ylim())
    if not lead_revs:
        hx.axhspan(lead_s - TOLERANCE_S, lead_s + TOLERANCE_S, color="#e8f5e9", zorder=0)
    hx.set_xlabel("spins")
    hx.grid(alpha=0.3)
    share = f"{100 * hit / n:.0f} %" if n else "–"
    fig.suptitle(
        (title + ": " if title else "") + f"{hit} of {n} spins {aim} ({share}), {late} late",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
