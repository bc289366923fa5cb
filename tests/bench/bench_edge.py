"""The roulette computer against the table (issue 26, docs/security.md): the attacker's
expected return per unit staked, 9 pleins a spin, at the firmware's default lead (its
`lead_ms`, and its `lead_revs` when set) with its 95 % interval, and the table by lead ×
clocking noise, the break-even leads, the firmware's own calls and the other defences.
Run by `make bench`; its figures are docs/security.md's tables.

A simulated session of RMC_EDGE_SPINS spins (default 2000; the docs' figures: 4000), seed
RMC_EDGE_SEED (2026), the first 300 valid spins to learn from, the others held out.
RMC_EDGE_PLOT=FILE draws the figure (docs/img/edge_return.png). Reported, not gated.
"""

from __future__ import annotations

import os
import sys
import time

from rich.console import Console
from rich.table import Table

from rmc.commands.edge import return_table
from rmc.edge.calls import TableSettings, firmware_calls
from rmc.edge.evaluate import house_edge
from rmc.edge.report import LEADS, REVS, WINDOWS, measure
from rmc.edge.sources import from_sim

SPINS = int(os.environ.get("RMC_EDGE_SPINS", "2000"))
SEED = int(os.environ.get("RMC_EDGE_SEED", "2026"))
NOISES = (0.0, 10.0, 20.0)
TRAIN = 300
FW_LEADS_MS = (1000, 2000, 3000, 4000, 5000, 6000)


def pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def ci(o) -> str:
    return f"{pct(o.lo)} .. {pct(o.hi)}"


def main() -> int:
    con = Console()
    t0 = time.perf_counter()
    src = from_sim(SEED, SPINS)
    t_sim = time.perf_counter() - t0
    n = len(src.spins)
    con.print(
        f"rmc edge: sim {SEED}:{SPINS}, {n} valid spins ({t_sim:.0f} s to simulate and decode); "
        f"learned on {TRAIN}, tested on {n - TRAIN}; 9 pleins; house edge {pct(house_edge(9))}"
    )
    base = TableSettings.defaults(src.wheel)
    t1 = time.perf_counter()
    calls = {
        f"firmware lead_ms={ms}": firmware_calls(src.spins, base.with_lead(lead_ms=ms, lead_revs=0))
        for ms in FW_LEADS_MS
    }
    if base.lead_revs or base.window_ms or base.lead_ms not in FW_LEADS_MS:
        calls["firmware default"] = firmware_calls(src.spins, base)
    t_fw = time.perf_counter() - t1
    rep = measure(
        src.spins, src.geo, src.label, LEADS, NOISES, 9, TRAIN, calls=calls, defences=True
    )
    t_all = time.perf_counter() - t0
    # the default lead
    name = "firmware default" if "firmware default" in calls else f"firmware lead_ms={base.lead_ms}"
    what = f"lead_ms={base.lead_ms}, lead_revs={base.lead_revs}, lead_window_ms={base.window_ms}"
    for o in rep.calls:
        if o.cut == name and o.noise_ms == 10.0:
            con.print(
                f"at the firmware's default lead ({what}; median {o.lead_s:.2f} s, "
                f"{o.lead_revs:g} laps before the drop), 10 ms clocking: {pct(o.mean)} "
                f"(95 % CI {ci(o)})"
            )
    t = return_table(rep, "expected return by lead (s before the drop) and clocking noise")
    con.print(t)
    for be in rep.break_even:
        con.print(
            f"break-even at {be.noise_ms:g} ms: point estimate crosses 0 at "
            f"{'not reached' if be.point_s is None else f'{be.point_s:.2f} s'}; "
            f"upper bound below 0 from {'not reached' if be.ci_s is None else f'{be.ci_s:g} s'}"
        )
    t2 = Table(title="the firmware's own calls (its predictor, counted to the drop)")
    for col in ("setting", "median lead s", *[f"{nz:g} ms" for nz in rep.noises]):
        t2.add_column(col, justify="right")
    for key in calls:
        outs = {o.noise_ms: o for o in rep.calls if o.cut == key}
        first = outs[rep.noises[0]]
        t2.add_row(
            key.removeprefix("firmware "),
            f"{first.lead_s:.2f}",
            *[f"{pct(outs[nz].mean)} ({ci(outs[nz])})" for nz in rep.noises],
        )
    con.print(t2)
    t3 = Table(title="other defences, 10 ms clocking")
    for col in ("cut", "median lead s", "return", "95 % CI"):
        t3.add_column(col, justify="right")
    for o in rep.defences:
        t3.add_row(o.cut, f"{o.lead_s:.2f}", pct(o.mean), ci(o))
    con.print(t3)
    r = rep.recommendation
    con.print(
        f"recommended: {r.lead_s} s (median {r.laps_in_lead} laps), or {r.lead_revs} "
        f"revolutions; bound: {r.bound}"
    )
    con.print(
        f"time: {t_all:.0f} s in all, the firmware's calls {t_fw:.0f} s "
        f"({len(FW_LEADS_MS)} settings); revs {REVS}, windows {WINDOWS}"
    )
    plot = os.environ.get("RMC_EDGE_PLOT")
    if plot:
        from rmc.edge.plots import plot_report

        plot_report(rep, plot)
        con.print(f"plot: {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
