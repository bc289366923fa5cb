"""Plots of the simulator's figures against the published ones (docs/sim.md).

python -m rmc.sim.plots [OUT_DIR] [--seed N] [--spins N]    (default docs/img)
rmc sim --plot OUT_DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt
import numpy as np

from rmc import ROOT
from rmc.sim.figures import HALF, POCKETS, DropOffsets
from rmc.sim.session import SpinRecord, simulate_session

PUBLISHED_BAND = "#d9ead3"


def _spins(seed: int, n: int) -> list[SpinRecord]:
    return simulate_session(seed, n, edges=False).valid_spins()


def plot_lap_periods(spins: list[SpinRecord], path: Path, count: int = 6) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for sp in spins[:count]:
        laps = np.asarray(sp.lap_periods_s)
        # Each lap plotted at the instant it completes, from the launch.
        ends = (sp.first_pass_s or 0.0) + np.cumsum(laps)
        (line,) = ax.plot(ends, laps, marker="o", ms=3, lw=1.2, label=f"spin {sp.spin}")
        assert sp.track_time_s is not None
        ax.axvline(sp.track_time_s, color=line.get_color(), lw=0.8, ls=":")
    ax.axhline(1.4, color="grey", lw=0.8, ls="--")
    ax.text(0.3, 1.42, "1.4 s: a commercial wheel's 'no more bets' threshold", fontsize=8)
    ax.axhspan(0.5, 0.7, xmax=0.12, color=PUBLISHED_BAND, zorder=0)
    ax.set_xlabel("time since the launch (s); dotted: the drop")
    ax.set_ylabel("ball revolution period (s)")
    ax.set_title("Ball revolution period on the track (green: published first laps 0.5–0.7 s)")
    ax.set_ylim(0.3, 2.0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_last_lap(spins: list[SpinRecord], path: Path) -> Path:
    last = np.asarray([sp.lap_periods_s[-1] for sp in spins])
    med = float(np.median(last))
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.axvspan(0.6, 2.0, color=PUBLISHED_BAND, zorder=0, label="published range 0.6–2 s")
    ax.hist(last, bins=np.arange(0.5, 2.05, 0.05), color="#3d6fb6", edgecolor="white")
    ax.axvline(1.1, color="green", lw=1.5, ls="--", label="published median ≈1.1 s")
    ax.axvline(med, color="black", lw=1.5, label=f"simulated median {med:.2f} s")
    ax.set_xlabel("last full lap before the drop (s)")
    ax.set_ylabel("spins")
    ax.set_title(f"Last-lap period over {len(last)} simulated spins")
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_scatter(spins: list[SpinRecord], path: Path) -> Path:
    sc = np.asarray([sp.scatter for sp in spins if sp.scatter is not None])
    med = float(np.median(np.abs(sc)))
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.axvspan(8, 20, color=PUBLISHED_BAND, zorder=0, label="published ≈8–20 pockets")
    ax.hist(sc, bins=np.arange(sc.min() - 0.5, sc.max() + 1.5), color="#b6603d", edgecolor="white")
    ax.axvline(med, color="black", lw=1.5, label=f"simulated median |scatter| {med:.0f}")
    ax.set_xlabel("pockets from the deflector impact to rest (in the ball's direction)")
    ax.set_ylabel("spins")
    ax.set_title(f"Scatter over {len(sc)} simulated spins")
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_track(spins: list[SpinRecord], path: Path) -> Path:
    t = np.asarray([sp.track_time_s for sp in spins], float)
    r = np.asarray([sp.revs for sp in spins])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 4), dpi=110)
    a1.axvspan(10, 25, color=PUBLISHED_BAND, zorder=0, label="published 10–25 s")
    a1.hist(t, bins=np.arange(0, 26, 1.0), color="#3d6fb6", edgecolor="white")
    a1.axvline(np.median(t), color="black", label=f"median {np.median(t):.1f} s")
    a1.set_xlabel("time on the track (s)")
    a1.set_ylabel("spins")
    a1.legend(fontsize=8)
    a2.axvspan(10, 20, color=PUBLISHED_BAND, zorder=0, label="published 10–20")
    a2.hist(r, bins=np.arange(r.min() - 0.5, r.max() + 1.5), color="#3d6fb6", edgecolor="white")
    a2.axvline(np.median(r), color="black", label=f"median {np.median(r):.0f}")
    a2.set_xlabel("ball revolutions on the track")
    a2.legend(fontsize=8)
    fig.suptitle(f"Time and revolutions on the track, {len(t)} simulated spins")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_drop_offset(spins: list[SpinRecord], path: Path) -> Path:
    d = DropOffsets.of(spins)
    x = np.arange(-HALF, HALF + 1)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.axvspan(-3.5, 3.5, color=PUBLISHED_BAND, zorder=0, label="±3 pockets")
    ax.bar(x, d.counts, width=0.9, color="#7a5cb6")
    ax.axhline(d.n / POCKETS, color="grey", ls="--", lw=1, label="flat (1/39 each)")
    ax.set_xlabel("pockets from the pocket under the ball at the drop to rest (ball's way +)")
    ax.set_ylabel("spins")
    ax.set_title(
        f"Pocket of rest around the drop's pocket, {d.n} spins: within ±3 "
        f"{100 * d.within3:.0f} %, ±9 {100 * d.within9:.0f} %"
    )
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_plots(out: Path, seed: int = 2019, spins: int = 1000) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    data = _spins(seed, spins)
    return [
        plot_lap_periods(data, out / "sim_lap_periods.png"),
        plot_last_lap(data, out / "sim_last_lap.png"),
        plot_scatter(data, out / "sim_scatter.png"),
        plot_track(data, out / "sim_track.png"),
        plot_drop_offset(data, out / "sim_drop_offset.png"),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "docs" / "img"))
    ap.add_argument("--seed", type=int, default=2019)  # the bench's seed: same figures
    ap.add_argument("--spins", type=int, default=1000)
    a = ap.parse_args(argv)
    for p in write_plots(Path(a.out), a.seed, a.spins):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
