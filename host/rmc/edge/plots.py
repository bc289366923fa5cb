"""`rmc edge --plot FILE`: the attacker's expected return against the lead, one line and its
95 % band per clocking noise, to a PNG or SVG file (by its suffix)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt

from rmc.edge.evaluate import house_edge
from rmc.edge.report import EdgeReport

FORMATS = (".png", ".svg")


def check_path(path: Path | str) -> Path:
    """The plot's path; ValueError unless it ends in .png or .svg."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ValueError(f"--plot: {p.name}: give a .png or .svg file")
    return p


def plot_report(rep: EdgeReport, path: Path | str, fmt: str | None = None) -> Path:
    """Draw the report to `path` (fmt: png or svg; by default the path's suffix)."""
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for nz in rep.noises:
        outs = [o for o in rep.table if o.noise_ms == nz and o.kind == "lead"]
        x = [o.value for o in outs]
        (line,) = ax.plot(x, [100 * o.mean for o in outs], marker="o", label=f"{nz:g} ms clocking")
        ax.fill_between(
            x,
            [100 * o.lo for o in outs],
            [100 * o.hi for o in outs],
            color=line.get_color(),
            alpha=0.18,
        )
        fw = [o for o in rep.calls if o.noise_ms == nz]
        if fw:
            ax.errorbar(
                [o.lead_s for o in fw],
                [100 * o.mean for o in fw],
                yerr=[[100 * (o.mean - o.lo) for o in fw], [100 * (o.hi - o.mean) for o in fw]],
                fmt="s",
                color=line.get_color(),
                mfc="white",
                capsize=3,
                label=f"its own calls, {nz:g} ms",
            )
    ax.axhline(0, color="black", lw=0.8)
    ax.axhline(100 * house_edge(rep.pleins), color="grey", ls="--", lw=0.8, label="house edge")
    rec = rep.recommendation
    if rec.lead_s is not None:
        ax.axvline(rec.lead_s, color="#c62828", ls=":", label=f"recommended {rec.lead_s:g} s")
    ax.set_xlabel("lead: bets close this long before the drop (s)")
    ax.set_ylabel("attacker's expected return per unit staked (%)")
    ax.set_title(
        f"{rep.pleins} pleins, learned on {rep.train} spins, tested on "
        f"{rep.spins - rep.train} ({rep.source})",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format=fmt or Path(path).suffix.lower().lstrip(".") or "png")
    plt.close(fig)
    return Path(path)
