"""`rmc stats --plot FILE`: the counts around the wheel, and the monitor over time.

Left: a polar bar chart, one bar per pocket in the wheel's order (clockwise from the top, as
wheel.json lists them), its height the count, coloured as the pocket; the ring of the
expected count n/39 and the band a fair pocket stays in at 99 % (binomial quantiles, each
pocket on its own). Right (when monitored): the monitor's largest CUSUM after each result,
its threshold and its alarms. PNG or SVG by the suffix; matplotlib's Agg back end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rmcfw import numbers

FORMATS = (".png", ".svg")
COLOURS = {numbers.ROUGE: "#c62828", numbers.NOIR: "#212121", numbers.VERT: "#2e7d32"}
MAX_POINTS = 20_000  # the monitor's curve is thinned to this many points (its maxima kept)


def check_path(path: Path | str) -> Path:
    """The plot's path; ValueError unless it ends in .png or .svg."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ValueError(f"--plot: {p.name}: give a .png or .svg file")
    return p


def _thin(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most MAX_POINTS points, each the largest of its stretch (an alarm stays seen)."""
    if y.size <= MAX_POINTS:
        return np.arange(1, y.size + 1), y
    k = -(-y.size // MAX_POINTS)
    pad = np.full(k * MAX_POINTS - y.size, -np.inf)
    yy = np.concatenate([y, pad]).reshape(MAX_POINTS, k).max(axis=1)
    return np.arange(1, MAX_POINTS + 1) * k, yy


def plot_stats(report: dict[str, Any], path: Path | str, title: str = "") -> Path:
    """Draw `rmc.stats.analyse`'s report (with the monitor's history when it has one)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    path = check_path(path)
    mon = report.get("monitor")
    history = None if mon is None else mon.get("history")
    fig = plt.figure(figsize=(13 if history else 7, 6.5), dpi=110)
    ax = fig.add_subplot(1, 2 if history else 1, 1, projection="polar")
    _draw_wheel(ax, report)
    if history:
        _draw_monitor(fig.add_subplot(1, 2, 2), mon, history)  # type: ignore[arg-type]
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format=path.suffix.lower()[1:])
    plt.close(fig)
    return path


def _draw_wheel(ax: Any, report: dict[str, Any]) -> None:
    """The counts around the wheel, the expected count, the fair pockets' band, the scan."""
    rows = report["pockets"]["table"]
    labels = [r["pocket"] for r in rows]
    counts = np.array([r["count"] for r in rows], dtype=float)
    n = int(report["n"])
    k = len(labels)
    theta = np.arange(k) * 2 * np.pi / k
    ax.set_theta_zero_location("N")
    ax.set_theta_direction(-1)  # clockwise, as wheel.json's order
    ax.bar(
        theta,
        counts,
        width=2 * np.pi / k * 0.9,
        color=[COLOURS[numbers.colour(x)] for x in labels],
        edgecolor="white",
        linewidth=0.5,
        zorder=2,
    )
    _draw_fair(ax, n, k)
    ax.set_xticks(theta)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_yticklabels([])
    sec = report["sectors"]
    ax.set_title(
        f"{n} results; scan: {'-'.join(sec['pockets'])} z={sec['z']:.2f} p={sec['p']:.3g}",
        fontsize=9,
    )
    ax.legend(loc="lower left", bbox_to_anchor=(-0.15, -0.12), fontsize=8, frameon=False)


def _draw_fair(ax: Any, n: int, k: int) -> None:
    """The ring of the expected count n/k and the band a fair pocket stays in at 99 %."""
    from scipy import stats as sps

    ring = np.linspace(0, 2 * np.pi, 400)
    lo, hi = sps.binom.ppf(0.005, n, 1 / k), sps.binom.isf(0.005, n, 1 / k)
    ax.fill_between(ring, lo, hi, color="#ffb300", alpha=0.25, zorder=0, label="fair pocket, 99 %")
    ax.plot(
        ring,
        np.full_like(ring, n / k),
        color="#ff6f00",
        lw=1.2,
        zorder=3,
        label=f"expected {n / k:.1f}",
    )


def _draw_monitor(hx: Any, mon: dict[str, Any], history: list[float]) -> None:
    """The monitor's largest CUSUM after each result, its threshold and its alarms."""
    x, y = _thin(np.asarray(history, dtype=float))
    hx.plot(x, y, color="#1565c0", lw=0.8, label="largest CUSUM")
    hx.axhline(
        mon["threshold"],
        color="#c62828",
        ls="--",
        lw=1,
        label=f"threshold {mon['threshold']:.2f} "
        f"({mon['false_alarm']:.0%} per {mon['horizon']:,} spins)",
    )
    for a in mon["alarms"]:
        hx.axvline(a["spin"], color="#c62828", lw=0.6, alpha=0.6)
    hx.set_xlabel("result")
    hx.set_ylabel("CUSUM (log-likelihood ratio)")
    hx.set_title(f"monitor: {len(mon['alarms'])} alarm(s)", fontsize=9)
    hx.legend(fontsize=8, loc="upper left")
