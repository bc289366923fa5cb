"""1,000 simulated spins through the firmware's core (issue 4's figures).

Twenty simulated sessions of 50 normal spins, each replayed through the very code that runs
on the board (rmc.replay.run_core): the "rien ne va plus" lead against the one asked for
(median, 10th and 90th percentile, late calls), the share of calls within ±0.5 s of the
asked lead (issue 6's, set for a 1 s lead) and within the rig's window for the lead asked
(rmc.rig.compare.Tolerances: it grows with the lead, docs/rig.md), and the firmware's results
and voids against the simulator's ground truth. The lead asked is the firmware's default.
The virtual board's own speed (simulated seconds per wall second) is in bench_vboard.py.
"""

from __future__ import annotations

import statistics
import time

from rich.console import Console
from rich.progress import track
from rich.table import Table

from rmc.frames import decode
from rmc.replay import run_core
from rmc.rig.compare import Tolerances
from rmc.sim import simulate_session
from rmc.trace import Trace
from rmcfw import config, proto

SESSIONS = 20
SPINS = 50
ASKED_S = config.Config().lead_ms / 1000  # the firmware's default lead


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    leads: list[float] = []
    late = spins = agree = 0
    table_s = 0.0
    started = time.perf_counter()
    for seed in track(range(SESSIONS), description="sessions through the core"):
        session = simulate_session(1000 + seed, SPINS)
        records = list(session.to_trace_records())
        core = run_core(Trace(records[0], records[1:]))
        assert core is not None
        truth_drop = {
            r["spin"]: r["t_us"] / 1e6
            for r in records
            if r.get("kind") == "truth" and r.get("event") == "drop"
        }
        truth_out = {}
        for r in records:
            if r.get("kind") == "truth" and r.get("event") == "rest":
                truth_out[r["spin"]] = "void:" + r["void"] if r.get("void") else r["pocket"]
        got: dict[int, str] = {}
        for line in core.lines:
            f = decode(line)
            n = int(f.fields.get("spin", 0) or 0)
            if f.type == proto.T_RNVP and n in truth_drop:
                lead = truth_drop[n] - f.ms / 1000
                leads.append(lead)
                late += lead < 0 or f.fields.get("why") == "drop"
            elif f.type == proto.T_RESULT:
                got[n] = f.fields["num"]
            elif f.type == proto.T_VOID:
                got.setdefault(n, "void:" + f.fields["reason"])
        spins += len(truth_out)
        agree += sum(got.get(n) == want for n, want in truth_out.items())
        table_s += max(r.get("t_us", 0) for r in records[1:]) / 1e6
    wall = time.perf_counter() - started

    within = sum(abs(x - ASKED_S) <= 0.5 for x in leads)
    window = Tolerances().rnvp_window_s(ASKED_S)
    in_window = sum(abs(x - ASKED_S) <= window for x in leads)
    out = Table(
        title=f"{spins} simulated spins through the firmware core (lead asked {ASKED_S:.1f} s)"
    )
    out.add_column("figure")
    out.add_column("value", justify="right")
    out.add_row("calls", str(len(leads)))
    out.add_row(
        "lead p10 / median / p90",
        " / ".join(f"{quantile(leads, q):.2f} s" for q in (0.1, 0.5, 0.9)),
    )
    out.add_row("late calls (after the drop)", str(late))
    out.add_row(
        "within ±0.5 s of the asked lead", f"{within} ({100 * within / max(1, len(leads)):.0f} %)"
    )
    out.add_row(
        f"within the rig's ±{window:g} s",
        f"{in_window} ({100 * in_window / max(1, len(leads)):.1f} %)",
    )
    out.add_row(
        "results and voids = truth", f"{agree} / {spins} ({100 * agree / max(1, spins):.1f} %)"
    )
    out.add_row("mean lead", f"{statistics.fmean(leads):.2f} s")
    out.add_row("table time replayed per wall second (sim + core)", f"{table_s / wall:,.0f} s/s")
    Console().print(out)


if __name__ == "__main__":
    main()
