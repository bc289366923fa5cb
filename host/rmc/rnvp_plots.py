"""`rmc rnvp --plot FILE`: each spin's "rien ne va plus" lead against the one asked, and how
the leads spread, to a PNG or SVG file (by its suffix)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    v = _Leads.of(calls, spins, lead_s, lead_revs, min_laps)
    fig, (ax, hx) = plt.subplots(
        1, 2, figsize=(11, 4.5), dpi=110, gridspec_kw={"width_ratios": [3, 1]}
    )
    _draw_asked(ax, v)
    _draw_called(ax, v)
    _draw_uncalled(ax, v, min_laps)
    _style_leads_axes(ax, hx, v)
    _draw_histogram(hx, ax, v)
    late = sum(c.late and not void for c, void in zip(calls, v.void, strict=True))
    share = f"{100 * v.hit / v.n:.0f} %" if v.n else "–"
    fig.suptitle(
        (title + ": " if title else "") + f"{v.hit} of {v.n} spins {v.aim} ({share}), {late} late",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


@dataclass
class _Leads:
    """What the plot shows of the calls: which are on target, where they are drawn."""

    calls: list[SpinCall]
    lead_s: float
    lead_revs: int
    aim: str  # the target, in words
    void: list[bool]  # per spin: too few laps to call
    ok: list[bool]  # per spin: on target
    x: np.ndarray  # per spin: its place on the x axis (its line)
    called: list[tuple[int, float]]  # (spin's index, lead) of the calls in time
    leads: np.ndarray  # their leads
    top: float  # the y axis' top: a lead above it is drawn there, its value written
    floor: float  # where the late calls and the void lines are drawn

    @property
    def n(self) -> int:
        return len(self.calls)

    @property
    def hit(self) -> int:
        return sum(self.ok)

    @classmethod
    def of(
        cls,
        calls: list[SpinCall],
        spins: list[list[float]],
        lead_s: float,
        lead_revs: int,
        min_laps: int,
    ) -> _Leads:
        void = [len(laps) < min_laps for laps in spins]
        ok = [on_target(c, laps, lead_s, lead_revs) for c, laps in zip(calls, spins, strict=True)]
        if lead_revs:
            aim = f"{lead_revs} revolution{'s' * (lead_revs > 1)} before the last pass"
        else:
            aim = f"within ±{TOLERANCE_S:g} s of {lead_s:g} s"
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
        lows = [c.lead_s for c in calls if c.lead_s is not None]
        floor = min([0.0, *lows]) - 0.3
        x = np.arange(1, len(calls) + 1)
        return cls(calls, lead_s, lead_revs, aim, void, ok, x, called, leads, top, floor)


def _draw_asked(ax: Any, v: _Leads) -> None:
    """The lead asked and its band (none for a lead in revolutions), and zero."""
    if not v.lead_revs:
        ax.axhspan(v.lead_s - TOLERANCE_S, v.lead_s + TOLERANCE_S, color="#e8f5e9", zorder=0)
        ax.axhline(v.lead_s, color=GOOD, lw=1, ls="--", label=f"asked {v.lead_s:g} s")
    ax.axhline(0, color="black", lw=0.8)


def _draw_called(ax: Any, v: _Leads) -> None:
    """The calls in time, on target or not; those above the top written at it."""
    for good, colour, label in ((True, GOOD, v.aim), (False, BAD, "outside")):
        pts = [(v.x[i], min(lead, v.top)) for i, lead in v.called if v.ok[i] == good]
        if pts:
            px, py = zip(*pts, strict=True)
            ax.scatter(px, py, s=14, color=colour, label=f"{label}: {len(pts)}", zorder=3)
    for i, lead in v.called:
        if lead > v.top:
            ax.annotate(
                f"{lead:.1f} s",
                (v.x[i], v.top),
                xytext=(4, -10),
                textcoords="offset points",
                fontsize=7,
                color=BAD,
            )


def _draw_uncalled(ax: Any, v: _Leads, min_laps: int) -> None:
    """The late calls and the void lines, below zero: they have no lead to show."""
    late_x = [v.x[i] for i, c in enumerate(v.calls) if c.late and not v.void[i]]
    void_x = [v.x[i] for i in range(v.n) if v.void[i]]
    for xs, marker, colour, label in (
        (late_x, "x", LATE, "late (after the last pass, or never)"),
        (void_x, "|", VOID, f"void (fewer than {min_laps} laps)"),
    ):
        if xs:
            ax.scatter(
                xs,
                [v.floor] * len(xs),
                marker=marker,
                s=36,
                color=colour,
                zorder=3,
                label=f"{label}: {len(xs)}",
            )


def _style_leads_axes(ax: Any, hx: Any, v: _Leads) -> None:
    ax.set_xlabel("spin (line of the file)")
    ax.set_ylabel("lead: seconds before the last pass")
    ax.set_xlim(0, v.n + 1)
    for axis in (ax.xaxis, hx.xaxis):  # spins are counted whole
        axis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(v.floor - 0.2, v.top + 0.2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")


def _draw_histogram(hx: Any, ax: Any, v: _Leads) -> None:
    """The leads' histogram, on the leads' own y axis."""
    if v.leads.size:
        hx.hist(
            np.minimum(v.leads, v.top),
            bins=np.arange(v.floor, v.top + 0.1, max(0.1, (v.top - v.floor) / 60)),
            orientation="horizontal",
            color="#3d6fb6",
            edgecolor="white",
        )
    hx.set_ylim(ax.get_ylim())
    if not v.lead_revs:
        hx.axhspan(v.lead_s - TOLERANCE_S, v.lead_s + TOLERANCE_S, color="#e8f5e9", zorder=0)
    hx.set_xlabel("spins")
    hx.grid(alpha=0.3)
