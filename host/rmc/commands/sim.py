"""`rmc sim`: simulate a table session and write its sensor trace with the ground truth."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rich import box
from rich.table import Table

from rmc.sim import (
    SCENARIOS,
    Params,
    ScenarioSpec,
    Session,
    simulate_session,
    write_laps_csv,
)
from rmc.sim.figures import DropOffsets

EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim",
        help="simulate a wheel: sensor edges and ground truth as a trace",
        description="Simulate a Roulette Monte-Carlo table session with a physical model of "
        "the wheel and write its raw sensor edges and ground truth as a JSON Lines trace. "
        "Deterministic for a seed. Scenarios: NAME (placed by the simulator) or NAME@SPIN.",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--spins", type=int, default=10, help="launches in the session (default 10)")
    p.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME[@SPIN]",
        help="add a scenario (repeatable); see --list-scenarios",
    )
    p.add_argument("--list-scenarios", action="store_true", help="list scenarios and exit")
    p.add_argument("-o", "--output", metavar="TRACE.jsonl", help="write the trace here")
    p.add_argument("--laps", metavar="LAPS.csv", help="write the ball lap times (rmc rnvp input)")
    p.add_argument("--plot", metavar="DIR", help="write the figure plots (PNG) into DIR")
    p.add_argument("--table", default="sim", help="table id in the trace header")
    p.add_argument(
        "--rnvp-lead",
        type=float,
        metavar="S",
        help="add an 'rnvp_asked' truth record S seconds before each true drop",
    )
    p.add_argument(
        "--sticky",
        metavar="POCKET@S",
        help="a biased wheel: POCKET holds the ball more often (probability S, 0-1, that the "
        "ball's last hops take it there: 1/39 becomes (1-S)/39+S)",
    )
    p.add_argument(
        "--low-sector",
        metavar="POCKET@S",
        help="a biased wheel: the rotor out of level, its low side the 5 pockets centred on "
        "POCKET (probability S that the ball's last hops carry it into them)",
    )
    p.add_argument(
        "--steady-hand",
        metavar="S",
        help="a croupier with a steady launch (the dealer's signature): with probability S "
        "(0-1) a throw is his habit's and ends at his distance from the pocket under the ball "
        "sensor at the first pass, within --steady-width pockets",
    )
    p.add_argument(
        "--steady-width",
        metavar="W",
        help="the steady hand's spread, in pockets (1-39, default 5)",
    )
    p.add_argument("--quiet", action="store_true", help="no summary table")
    p.set_defaults(func=run)


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "–" if x is None else format(x, spec)


def summary_table(s: Session) -> Table:
    t = Table(
        title=f"rmc sim — seed {s.seed}, {len(s.spins)} spins",
        caption="track: launch to drop (s); last: last full lap (s); scatter: pockets from "
        "the deflector impact to rest",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    t.add_column("#", justify="right")
    t.add_column("scenario", no_wrap=True)
    t.add_column("rotor/ball", no_wrap=True)
    for col in ("track", "revs", "last", "scatter", "result", "ch"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("void", no_wrap=True)
    for sp in s.spins:
        t.add_row(
            str(sp.spin),
            sp.scenario,
            f"{'cw' if sp.rotor_dir > 0 else 'ccw'}/{'cw' if sp.ball_dir > 0 else 'ccw'}",
            _fmt(sp.track_time_s, ".1f"),
            str(sp.revs),
            _fmt(sp.lap_periods_s[-1] if sp.lap_periods_s else None, ".3f"),
            "–" if sp.scatter is None else str(sp.scatter),
            sp.pocket or "–",
            "–" if sp.channel is None else str(sp.channel),
            sp.void or "",
        )
    return t


def figures_line(s: Session) -> str:
    ok = [sp for sp in s.valid_spins() if sp.track_time_s is not None]
    if not ok:
        return "no valid spin"
    med = statistics.median
    return (
        f"{len(ok)} valid spins — median: track {med(sp.track_time_s for sp in ok):.1f} s, "
        f"{med(sp.revs for sp in ok):.0f} revs, last lap "
        f"{med(sp.lap_periods_s[-1] for sp in ok):.3f} s, "
        f"scatter {med(abs(sp.scatter or 0) for sp in ok):.0f} pockets\n"
        + DropOffsets.of(ok).line()
    )


def _bias(option: str, text: str) -> tuple[str, float]:
    """'17@0.2' -> ('17', 0.2); ValueError with the option's name."""
    label, at, strength = text.partition("@")
    try:
        s = float(strength) if at else float("nan")
    except ValueError:
        s = float("nan")
    if not label or not 0 <= s <= 1:
        raise ValueError(f"{option} {text!r}: give POCKET@S, S a probability from 0 to 1")
    return label, s


def _number(option: str, text: str, kind: type, lo: float, hi: float, what: str) -> float:
    """An option's number within [lo, hi]; ValueError with a one-line reason."""
    try:
        x = kind(text)
    except ValueError:
        x = None
    if x is None or not lo <= x <= hi:  # (nan too)
        raise ValueError(f"{option} {text!r}: give {what}")
    return x


def _bias_params(
    sticky: str | None,
    low: str | None,
    steady: str | None = None,
    steady_width: str | None = None,
) -> Params | None:
    """The physics with the biases asked for (None: the default, fair wheel)."""
    if sticky is None and low is None and steady is None and steady_width is None:
        return None
    changes: dict[str, object] = {}
    if sticky is not None:
        changes["sticky_pocket"], changes["sticky_strength"] = _bias("--sticky", sticky)
    if low is not None:
        changes["low_sector"], changes["low_sector_strength"] = _bias("--low-sector", low)
    if steady is not None:
        what = "S, a probability from 0 to 1"
        changes["steady_hand"] = _number("--steady-hand", steady, float, 0, 1, what)
    if steady_width is not None:
        what = "W, a whole number of pockets from 1 to 39"
        changes["steady_width"] = _number("--steady-width", steady_width, int, 1, 39, what)
    return Params().with_(**changes)


def run(args: argparse.Namespace) -> int:
    from rmc.console import err_console, fail, out_console
    from rmc.outfile import OutputError, check, replacing

    err = err_console()
    if args.list_scenarios:
        t = Table("scenario", "what it does", title="rmc sim scenarios", title_justify="left")
        for name, what in SCENARIOS.items():
            t.add_row(name, what)
        out_console().print(t)
        return 0
    try:
        # the outputs are checked before the simulation: a bad path costs no waiting
        for path in (args.output, args.laps):
            if path:
                check(path)
        specs = [ScenarioSpec.parse(x) for x in args.scenario]
        params = _bias_params(args.sticky, args.low_sector, args.steady_hand, args.steady_width)
        with err.status("simulating…"):
            s = simulate_session(
                args.seed,
                args.spins,
                scenarios=specs,
                params=params,
                table=args.table,
                rnvp_lead_s=args.rnvp_lead,
            )
    except OutputError as e:
        return fail("sim", str(e))
    except ValueError as e:
        return fail("sim", str(e), EXIT_BAD_INPUT)
    try:
        if args.output:
            with replacing(args.output) as tmp:
                n = s.write_trace(tmp)
            err.print(f"trace: {n} records → {args.output}")
        if args.laps:
            rows = [sp.lap_periods_s for sp in s.valid_spins()]
            with replacing(args.laps) as tmp:
                write_laps_csv(tmp, rows)
            err.print(f"laps: {len(rows)} spins → {args.laps}")
        if args.plot:
            from rmc.sim.plots import write_plots

            for path in write_plots(Path(args.plot), seed=args.seed):
                err.print(f"plot: {path}")
    except OutputError as e:
        return fail("sim", str(e), EXIT_BAD_INPUT)
    except OSError as e:  # the plots' folder
        return fail("sim", f"cannot write the plots into {args.plot}: {e.strerror or e}")
    if not args.quiet:
        out = out_console()
        if out.width < 110:
            out = out_console(width=110)  # the table's columns are short: one line a spin
        out.print(summary_table(s))
        out.print(figures_line(s))
    return 0
