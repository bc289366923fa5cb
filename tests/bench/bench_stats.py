"""`rmc stats`: the core over a million results, and how many spins each bias takes to see.

1. The battery (`rmc.stats.analyse`: pockets, G, binomial + Holm, the sector scan, simple
   chances and runs, zeros, the CUSUM monitor) over 1,000,000 fair results, one core.
2. The `--power` predictions (90 % power at 1 % false alarms, a fixed number of spins).
3. Detection as a casino would watch: biased results drawn (numpy), the tests run after
   every 1,000 (pocket) or 250 (sector) spins until each flags at 1 % (chi-square, pocket
   Holm, scan), and the CUSUM
   monitor fed result by result: spins to detection, median and p90 over RUNS runs. With
   repeated looks the p90 falls below the fixed-n prediction (more chances to flag; and more
   false alarms — a fair wheel's row shows them).
4. The whole battery's false-alarm rate on fair wheels (any flag but the monitor's).

RMC_BENCH_STATS_RUNS=N changes RUNS (default 40: about 4 minutes on two busy cores; the
pockets' 39 exact binomial tests at every look take most of it).
"""

from __future__ import annotations

import os
import time

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy import stats as sps

from rmc.stats import analyse, default_order, sectors
from rmc.stats import power as pw
from rmc.stats.pockets import holm

RUNS = int(os.environ.get("RMC_BENCH_STATS_RUNS", "40"))
ALPHA = 0.01


def core(n: int = 1_000_000) -> tuple[float, float]:
    order = default_order()
    labels = [order.pockets[i] for i in np.random.default_rng(1).integers(0, 39, n)]
    t = time.perf_counter()
    idx = order.indices(labels)
    t_idx = time.perf_counter() - t
    t = time.perf_counter()
    analyse(idx, order)
    return t_idx, time.perf_counter() - t


def detection(p1: np.ndarray, look: int, limit: int, seed: int) -> dict[str, np.ndarray]:
    """Spins to the first look at which each test flags (limit + look: never)."""
    rng = np.random.default_rng([seed, 24])
    looks = np.arange(look, limit + 1, look)
    out = {k: np.full(RUNS, limit + look) for k in ("chi-square", "pocket Holm", "sector scan")}
    for r in range(RUNS):
        x = rng.choice(39, size=limit, p=p1)
        counts = np.stack([np.bincount(x[:n], minlength=39) for n in looks])
        e = looks[:, None] / 39
        chi_p = sps.chi2.sf(((counts - e) ** 2 / e).sum(axis=1), 38)
        hit = np.flatnonzero(chi_p < ALPHA)
        if hit.size:
            out["chi-square"][r] = looks[hit[0]]
        for j, n in enumerate(looks):
            if out["pocket Holm"][r] > limit:
                raw = [sps.binomtest(int(k), int(n), 1 / 39).pvalue for k in counts[j]]
                if holm(np.array(raw)).min() < ALPHA:
                    out["pocket Holm"][r] = n
            if out["sector scan"][r] > limit and sectors.scan(counts[j]).p < ALPHA:
                out["sector scan"][r] = n
            if all(v[r] <= limit for v in out.values()):
                break
    return out


def fmt(d: np.ndarray, limit: int) -> tuple[str, str]:
    def one(v: float) -> str:
        return f"> {limit:,}" if v > limit else f"{int(v):,}"

    return one(np.median(d)), one(np.quantile(d, 0.9))


def main() -> None:
    con = Console()
    t_idx, t_core = core()
    con.print(
        f"core over 1,000,000 results: labels to positions {t_idx:.2f} s, "
        f"the battery {t_core:.2f} s"
    )
    a, b = pw.pocket_bias(), pw.sector_bias()
    t = time.perf_counter()
    rows = pw.power_table(monitor_runs=0)
    con.print(f"--power: {time.perf_counter() - t:.1f} s")
    predicted = {(r.bias, r.test): r.spins for r in rows}
    table = Table(title=f"spins to detect, {RUNS} runs, looks every 1,000 / 250 spins")
    for col in ("bias", "test", "--power (90 %)", "median", "p90"):
        table.add_column(col, justify="left" if col in ("bias", "test") else "right")
    for bias, look, limit in ((a, 1000, 150_000), (b, 250, 30_000)):
        det = detection(bias.probs, look, limit, seed=1 if bias is a else 2)
        for test, d in det.items():
            key = {"chi-square": "chi-square (38 dof)", "pocket Holm": "pocket binomial, Holm",
                   "sector scan": "sector scan"}[test]  # fmt: skip
            pred = predicted.get((bias.what, key))
            table.add_row(bias.what, test, "" if pred is None else f"{pred:,}", *fmt(d, limit))
        delays = pw.monitor_delays(bias.probs, runs=RUNS, limit=limit)
        table.add_row(bias.what, "CUSUM monitor", "", *fmt(delays, limit))
    con.print(table)
    order = default_order()
    rng = np.random.default_rng(99)
    for n in (1000, 10_000):
        flagged = sum(
            bool([f for f in analyse(rng.integers(0, 39, n), order, monitor=False)["flags"]])
            for _ in range(RUNS * 2)
        )
        con.print(
            f"fair wheels of {n:,} results: {flagged} of {RUNS * 2} flagged by the battery "
            f"({flagged / (RUNS * 2):.1%})"
        )


if __name__ == "__main__":
    main()
