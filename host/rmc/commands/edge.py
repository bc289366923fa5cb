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

    why = _check(args) or _check_plot(args.plot)
    if why:
        return fail("edge", why)
    src, why = _read_source(args)
    if why:
        return fail("edge", why)
    _warn(src.warnings)
    train, why = _train(args.train, len(src.spins))
    if why:
        return fail("edge", why)
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
        why = _plot(rep, args.plot)
        if why:
            return fail("edge", why)
    if args.json:
        sys.stdout.write(json.dumps(rep.as_dict()))
        sys.stdout.write("\n")
        return 0
    _show(rep, args.plot)
    return 0


def _check_plot(path: str | None) -> str | None:
    """The reason the plot's path is refused, or None: a bad path costs no measurement."""
    if not path:
        return None
    from rmc.edge.plots import check_path
    from rmc.outfile import OutputError, check

    try:
        check_path(path)
        check(path)
    except (ValueError, OutputError) as e:
        return str(e)
    return None


def _read_source(args: argparse.Namespace):
    """(the spins to measure, None), or (None, the reason they cannot be read)."""
    from rmc.edge.observe import ObserveError
    from rmc.edge.sources import from_sim, from_traces, parse_sim_spec
    from rmc.trace import TraceError

    try:
        if args.sim is not None:
            return from_sim(*parse_sim_spec(args.sim)), None
        return from_traces(args.traces), None
    except (ObserveError, TraceError, ValueError) as e:
        return None, str(e)
    except OSError as e:
        return None, f"cannot read: {e.strerror or e}"


def _warn(warnings: list[str]) -> None:
    """The source's warnings, on stderr, printed literally."""
    if not warnings:
        return
    from rich.text import Text

    from rmc.console import err_console

    for w in warnings:
        err_console().print(Text(f"rmc edge: warning: {w}", style="yellow"))


def _train(asked: int | None, n: int) -> tuple[int, str | None]:
    """(the spins to learn from, None), or (that count, the reason n spins cannot be split
    so)."""
    from rmc.edge.report import default_train

    train = default_train(n) if asked is None else asked
    if train >= n:
        return train, (
            f"--train {train}: the input has {n} valid spin{'s' * (n != 1)}; "
            "at least one must be left to test on"
        )
    if n < 4:
        return train, f"{n} valid spin{'s' * (n != 1)}: too few to learn and test on"
    return train, None


def _plot(rep, path: str) -> str | None:
    """Draw the report's figure into path (replaced whole); the reason it failed, or None."""
    from pathlib import Path

    from rmc.edge.plots import plot_report
    from rmc.outfile import OutputError, replacing

    try:
        with replacing(path) as tmp:
            plot_report(rep, tmp, Path(path).suffix.lower().lstrip("."))
    except OutputError as e:
        return str(e)
    return None


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
        con.print(_break_even_line(be))
    if rep.calls or rep.defences:
        con.print(_other_cuts_table([*rep.calls, *rep.defences]))
    con.print(_recommendation_line(rep.recommendation))
    if plot:
        con.print(Text(f"plot: {plot}"))


def _break_even_line(be) -> str:
    """Where the return crosses 0 at one noise, and where its upper bound is below 0."""
    if be.point_s is None:
        pt = "stays above 0 at the longest lead measured"
    else:
        pt = f"crosses 0 at {be.point_s:.2f} s"
    if be.ci_s is None:
        ci = "its upper 95 % bound is below 0 at no lead measured"
    else:
        ci = f"its upper 95 % bound is below 0 from {be.ci_s:g} s (the return below 0 beyond)"
    return f"break-even at {be.noise_ms:g} ms: the return {pt}; {ci}"


def _other_cuts_table(outcomes):
    """The calls' and the defences' outcomes: a rich Table (cut names printed literally)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text("Other cuts"))
    for col in ("cut", "noise ms", "median lead s", "return", "95 % CI"):
        t.add_column(col, justify="right")
    for o in outcomes:
        t.add_row(
            Text(o.cut),
            f"{o.noise_ms:g}",
            f"{o.lead_s:.2f}",
            _pct(o.mean),
            f"{_pct(o.lo)} .. {_pct(o.hi)}",
        )
    return t


def _recommendation_line(r) -> str:
    """The lead recommended, in seconds and revolutions, or why there is none."""
    if r.lead_s is None:
        return (
            f"no lead measured holds the bound ({r.bound}): measure longer leads, or more "
            "spins (the interval narrows as their square root)"
        )
    revs = "no lead in revolutions measured holds it"
    if r.lead_revs is not None:
        revs = f"or {r.lead_revs} revolution{'s' * (r.lead_revs != 1)} before the last pass"
    return (
        f"recommended lead: {r.lead_s:g} s (the ball runs a median {r.laps_in_lead:g} laps "
        f"in it), {revs}; bound: {r.bound}"
    )
