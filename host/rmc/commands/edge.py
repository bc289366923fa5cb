"""`rmc edge [--sim SEED[:SPINS] | TRACE...] [--lead S ...] [--noise MS ...] [--pleins N]
[--train N] [--firmware] [--defences] [--json] [--plot FILE]`: a roulette computer tried on
the wheel, and the lead that leaves it nothing (docs/security.md)."""

from __future__ import annotations

import argparse
import json
import math
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "edge",
        help="measure what a hidden roulette computer wins, and recommend the lead",
        description=(
            "An attacker that clocks the ball's passes and the rotor's mark before bets close "
            "(with clocking noise), fits the ball's deceleration, learns the wheel's scatter "
            "from training spins and bets pleins on the most likely pockets. Its expected "
            "return per unit staked is measured on held-out spins, by lead and noise, with "
            "95 % confidence intervals, and the lead that keeps it below 0 is recommended."
        ),
    )
    p.add_argument("traces", nargs="*", metavar="TRACE", help="recorded traces (sensor or frames)")
    p.add_argument(
        "--sim",
        metavar="SEED[:SPINS]",
        help="simulate the spins instead (rmc.sim; 1000 spins unless SPINS is given)",
    )
    p.add_argument(
        "--lead",
        type=float,
        nargs="+",
        action="extend",  # --lead 1 2 and --lead 1 --lead 2 alike
        metavar="S",
        help="leads to measure: bets close S seconds before the drop "
        "(default 0.5 1 1.5 2 2.5 3 3.5 4 5 6)",
    )
    p.add_argument(
        "--noise",
        type=float,
        nargs="+",
        action="extend",  # --noise 1 2 and --noise 1 --noise 2 alike
        metavar="MS",
        help="the attacker's clocking noise, ms standard deviation (default 10 20)",
    )
    p.add_argument("--pleins", type=int, default=9, metavar="N", help="pleins bet a spin (9)")
    p.add_argument(
        "--train",
        type=int,
        metavar="N",
        help="the first N valid spins train the attacker (default: a third, at most 300); "
        "it is scored on the others",
    )
    p.add_argument(
        "--firmware",
        action="store_true",
        help="also cut at the firmware's own calls (its predictor, lead_ms = each --lead); "
        "simulations and sensor traces",
    )
    p.add_argument(
        "--defences",
        action="store_true",
        help="also measure a lead in revolutions and a call at a random moment in a window",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--plot", metavar="FILE", help="expected return against the lead (.png, .svg)")
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> str | None:
    """The reason the options are refused, or None."""
    from rmc.edge.report import LEADS, NOISES

    if args.sim is not None and args.traces:
        return "give --sim or traces, not both"
    if args.sim is None and not args.traces:
        return "give --sim SEED[:SPINS] or one or more traces"
    args.lead = sorted(set(args.lead or LEADS))
    args.noise = sorted(set(args.noise or NOISES))
    for x in args.lead:
        if not (math.isfinite(x) and 0 <= x <= 30):
            return f"--lead {x:g}: a lead is between 0 and 30 seconds"
    for x in args.noise:
        if not (math.isfinite(x) and 0 <= x <= 500):
            return f"--noise {x:g}: a clocking noise is between 0 and 500 ms"
    if not 1 <= args.pleins <= 38:
        return f"--pleins {args.pleins}: between 1 and 38"
    if args.train is not None and args.train < 3:
        return f"--train {args.train}: at least 3 spins to learn from"
    if args.firmware and any(x > 10 for x in args.lead):
        return "--firmware: the firmware's lead_ms is at most 10 s"
    return None


def run(args: argparse.Namespace) -> int:
    from rmc.console import fail

    why = _check(args)
    if why:
        return fail("edge", why)
    if args.plot:
        from rmc.edge.plots import check_path
        from rmc.outfile import OutputError, check

        try:
            check_path(args.plot)
            check(args.plot)  # a bad path costs no measurement
        except ValueError as e:
            return fail("edge", str(e))
        except OutputError as e:
            return fail("edge", str(e))
    from rmc.edge.observe import ObserveError
    from rmc.edge.sources import from_sim, from_traces, parse_sim_spec
    from rmc.trace import TraceError

    try:
        if args.sim is not None:
            src = from_sim(*parse_sim_spec(args.sim))
        else:
            src = from_traces(args.traces)
    except (ObserveError, TraceError, ValueError) as e:
        return fail("edge", str(e))
    except OSError as e:
        return fail("edge", f"cannot read: {e.strerror or e}")
    for w in src.warnings:
        from rich.text import Text

        from rmc.console import err_console

        err_console().print(Text(f"rmc edge: warning: {w}", style="yellow"))
    n = len(src.spins)
    from rmc.edge.report import default_train

    train = default_train(n) if args.train is None else args.train
    if train >= n:
        return fail(
            "edge",
            f"--train {train}: the input has {n} valid spin{'s' * (n != 1)}; "
            "at least one must be left to test on",
        )
    if n < 4:
        return fail("edge", f"{n} valid spin{'s' * (n != 1)}: too few to learn and test on")
    calls = _calls(args, src)
    from rmc.edge.report import measure

    try:
        rep = measure(
            src.spins,
            src.geo,
            src.label,
            args.lead,
            args.noise,
            args.pleins,
            train,
            calls=calls,
            defences=args.defences,
        )
    except ValueError as e:
        return fail("edge", str(e))
    if args.plot:
        from pathlib import Path

        from rmc.edge.plots import plot_report
        from rmc.outfile import OutputError, replacing

        try:
            with replacing(args.plot) as tmp:
                plot_report(rep, tmp, Path(args.plot).suffix.lower().lstrip("."))
        except OutputError as e:
            return fail("edge", str(e))
    if args.json:
        sys.stdout.write(json.dumps(rep.as_dict()))
        sys.stdout.write("\n")
        return 0
    _show(rep, args.plot)
    return 0


def _calls(args: argparse.Namespace, src) -> dict[str, dict[int, float]]:
    """The call instants to score: the table's own (a frame trace's RNVP), or the firmware's
    at each lead (--firmware)."""
    out: dict[str, dict[int, float]] = {}
    own = {o.spin: o.call_s for o in src.spins if o.call_s is not None}
    if own and len(own) == len(src.spins):
        out["the table's RNVP"] = own
    if args.firmware and src.simulated:
        from rmc.edge.calls import TableSettings, firmware_calls

        base = TableSettings.defaults(src.wheel)
        for lead in args.lead:
            ms = round(lead * 1000)
            out[f"firmware {ms} ms"] = firmware_calls(src.spins, base.with_lead(lead_ms=ms))
    return out


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def return_table(rep, title):
    """The expected return by lead (rows) and clocking noise (columns), with its 95 % CI: a
    rich Table (imported here: rich loads only when a table is shown)."""
    from rich.table import Table

    t = Table(title=title)
    t.add_column("lead s", justify="right")
    t.add_column("laps", justify="right")
    for nz in rep.noises:
        t.add_column(f"{nz:g} ms", justify="right")
        t.add_column("95 % CI", justify="right")
    for lead in rep.leads:
        row = [f"{lead:g}", f"{rep.outcome(lead, rep.noises[0]).lead_revs:g}"]
        for nz in rep.noises:
            o = rep.outcome(lead, nz)
            row += [_pct(o.mean), f"{_pct(o.lo)} .. {_pct(o.hi)}"]
        t.add_row(*row)
    return t


def _show(rep, plot: str | None) -> None:
    from rich.table import Table
    from rich.text import Text

    from rmc.console import out_console
    from rmc.edge.evaluate import house_edge

    con = out_console()
    t = return_table(
        rep,
        Text(
            f"Attacker's expected return per unit staked, {rep.pleins} pleins "
            f"({rep.source}: learned on {rep.train} spins, tested on {rep.spins - rep.train})"
        ),
    )
    con.print(t)
    con.print(f"house edge on a plein: {_pct(house_edge(rep.pleins))}")
    for be in rep.break_even:
        if be.point_s is None:
            pt = "stays above 0 at the longest lead measured"
        else:
            pt = f"crosses 0 at {be.point_s:.2f} s"
        if be.ci_s is None:
            ci = "its upper 95 % bound is below 0 at no lead measured"
        else:
            ci = f"its upper 95 % bound is below 0 from {be.ci_s:g} s (the return below 0 beyond)"
        con.print(f"break-even at {be.noise_ms:g} ms: the return {pt}; {ci}")
    if rep.calls or rep.defences:
        t2 = Table(title=Text("Other cuts"))
        for col in ("cut", "noise ms", "median lead s", "return", "95 % CI"):
            t2.add_column(col, justify="right")
        for o in [*rep.calls, *rep.defences]:
            t2.add_row(
                Text(o.cut),
                f"{o.noise_ms:g}",
                f"{o.lead_s:.2f}",
                _pct(o.mean),
                f"{_pct(o.lo)} .. {_pct(o.hi)}",
            )
        con.print(t2)
    r = rep.recommendation
    if r.lead_s is None:
        con.print(
            f"no lead measured holds the bound ({r.bound}): measure longer leads, or more "
            "spins (the interval narrows as their square root)"
        )
    else:
        revs = "no lead in revolutions measured holds it"
        if r.lead_revs is not None:
            revs = f"or {r.lead_revs} revolution{'s' * (r.lead_revs != 1)} before the last pass"
        con.print(
            f"recommended lead: {r.lead_s:g} s (the ball runs a median {r.laps_in_lead:g} laps "
            f"in it), {revs}; bound: {r.bound}"
        )
    if plot:
        con.print(Text(f"plot: {plot}"))
