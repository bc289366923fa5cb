"""`rmc rnvp LAPS.csv [--lead SECONDS | --lead-revs N] [--drop-s S | --wheel WHEEL.json]
[--newest-first] [--distinct] [--plot FILE] [--json]`: the firmware's "rien ne va plus"
predictor on ball lap times, one spin per line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rmc import infile


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "rnvp",
        help='run the firmware\'s "rien ne va plus" predictor on ball lap times',
        description=(
            "Replays ball lap times (one spin per line, revolution times in seconds, "
            "comma-separated, oldest first; the last is the last full lap before the drop) "
            "through the firmware's predictor, which learns the wheel from spin to spin."
        ),
    )
    p.add_argument("laps", metavar="LAPS.csv")
    p.add_argument(
        "--lead",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="call this long before the predicted drop (default 1.0)",
    )
    p.add_argument(
        "--lead-revs",
        type=int,
        default=0,
        metavar="N",
        help="call N revolutions before the last pass instead (the table's lead_revs): at the "
        "pass N laps before it, or in the lap that ends there",
    )
    prior = p.add_mutually_exclusive_group()
    prior.add_argument(
        "--drop-s",
        type=float,
        metavar="S",
        help="the wheel's ball period at the drop, as the table's drop_ms (default: none, "
        "learned from the spins)",
    )
    prior.add_argument(
        "--wheel",
        metavar="WHEEL.json",
        help="take --drop-s from a wheel definition's geometry, as the board does at boot",
    )
    p.add_argument(
        "--newest-first",
        action="store_true",
        help="each line holds its laps newest first (the last lap before the drop first), "
        "as some clocking tools write them: read it backwards",
    )
    p.add_argument(
        "--distinct",
        action="store_true",
        help="replay only the spins of their own: leave out the lines that repeat another "
        "spin or are the start of a longer one (cut copies)",
    )
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="draw each spin's lead against the one asked to FILE (.png or .svg)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _drop_prior(args: argparse.Namespace) -> float:
    """The drop period prior (s) the options give, 0 for none; ValueError when bad."""
    from rmcfw import config

    _, most = config.bounds("drop_ms")
    if args.wheel is not None:
        try:
            wheel = json.loads(infile.read_text(args.wheel))
        except OSError as e:
            raise ValueError(f"--wheel: cannot read {args.wheel}: {e.strerror or e}") from None
        except ValueError as e:
            raise ValueError(f"--wheel: {args.wheel} is not JSON: {e}") from None
        ms = config.drop_ms_of(wheel)
        if not ms:
            raise ValueError(
                f"--wheel: {args.wheel} gives no drop period (geometry.drop_angle_deg and "
                "ball_track_radius_m): give --drop-s"
            )
        return ms / 1000
    if args.drop_s is None:
        return 0.0
    if not 0 < args.drop_s <= most / 1000:
        raise ValueError(f"--drop-s must be above 0 and at most {most / 1000:g} seconds")
    return args.drop_s


class _Exit(Exception):
    """The command ends here with this status (what went wrong already said)."""

    def __init__(self, code: int) -> None:
        self.code = code


def run(args: argparse.Namespace) -> int:
    from rmc.console import fail
    from rmc.outfile import OutputError
    from rmc.rnvp import TOLERANCE_S, summary

    try:
        drop_s = _checked_options(args)
        spins = _read_spins(args)
    except _Exit as e:
        return e.code
    numbers, spins = _what_to_replay(spins, args)
    revs = args.lead_revs
    cap = None if revs else _ceiling(spins, args.lead, TOLERANCE_S)
    calls = _replay(spins, numbers, args, drop_s)
    total = summary(calls)
    if args.plot:
        try:
            _plot(calls, spins, args)
        except OutputError as e:
            return fail("rnvp", str(e))
    if args.json:
        # json.dumps in one go: its C encoder; json.dump writes piece by piece in Python
        # (the same text, several times slower on a large file)
        sys.stdout.write(json.dumps({"spins": [c.as_dict() for c in calls], "summary": total}))
        sys.stdout.write("\n")
        return 0
    _show(args, calls, spins, total, drop_s, cap)
    return 0


def _checked_options(args: argparse.Namespace) -> float:
    """The drop period prior (s, 0 for none); _Exit for an option out of bounds or a plot
    path that cannot be written (a bad path costs no replay)."""
    from rmc.console import fail
    from rmc.outfile import OutputError, check

    if not 0 <= args.lead <= 10:
        print("rmc rnvp: --lead must be between 0 and 10 seconds", file=sys.stderr)
        raise _Exit(2)
    if not 0 <= args.lead_revs <= 10:
        print("rmc rnvp: --lead-revs must be between 0 and 10", file=sys.stderr)
        raise _Exit(2)
    try:
        drop_s = _drop_prior(args)
        if args.plot:
            from rmc.rnvp_plots import check_path

            check_path(args.plot)
            check(args.plot)
    except ValueError as e:
        print(f"rmc rnvp: {e}", file=sys.stderr)
        raise _Exit(2) from None
    except OutputError as e:
        raise _Exit(fail("rnvp", str(e))) from None
    return drop_s


def _read_spins(args: argparse.Namespace) -> list[list[float]]:
    """The file's spins, oldest lap first; _Exit when it cannot be read."""
    from rmc.console import fail
    from rmc.rnvp import LapsError, read_laps

    try:
        spins = read_laps(args.laps)
    except OSError as e:
        raise _Exit(fail("rnvp", f"cannot read {args.laps}: {e.strerror or e}")) from None
    except UnicodeDecodeError as e:
        raise _Exit(
            fail("rnvp", f"{args.laps} is not UTF-8 text (byte {e.start + 1} is not)")
        ) from None
    except LapsError as e:
        raise _Exit(fail("rnvp", f"{args.laps}: {e}")) from None
    if args.newest_first:
        spins = [laps[::-1] for laps in spins]
    return spins


def _replay(
    spins: list[list[float]], numbers: list[int], args: argparse.Namespace, drop_s: float
) -> list:
    """The predictor's call on each spin, numbered as its line in the file."""
    from rmc.progress import Steps
    from rmc.rnvp import replay

    # the predictor's work is most of a large file's time: a bar on stderr (a terminal only)
    with Steps() as steps:
        steps.step("replaying the spins", len(spins))
        calls = replay(
            spins, lead_s=args.lead, lead_revs=args.lead_revs, drop_s=drop_s, progress=steps.update
        )
    for c, n in zip(calls, numbers, strict=True):
        c.spin = n  # the line's own spin number, with --distinct too
    return calls


def _plot(calls: list, spins: list[list[float]], args: argparse.Namespace) -> None:
    from rmc.outfile import replacing
    from rmc.rnvp_plots import plot_calls
    from rmcfw.rnvp import MIN_LAPS

    with replacing(args.plot) as tmp:
        plot_calls(calls, spins, tmp, args.lead, args.lead_revs, MIN_LAPS, Path(args.laps).name)


def _show(
    args: argparse.Namespace,
    calls: list,
    spins: list[list[float]],
    total: dict,
    drop_s: float,
    cap: int | None,
) -> None:
    """The calls as a table, then what they add up to."""
    from rmc.console import out_console
    from rmcfw.rnvp import MIN_LAPS  # the decree's fewest revolutions of a valid spin

    # lines too short for a valid spin: void, never called
    void = {c.spin for c, laps in zip(calls, spins, strict=True) if len(laps) < MIN_LAPS}
    con = out_console()
    con.print(_calls_table(args, calls, spins, drop_s, void))
    con.print(_totals_line(args, calls, spins, total, cap))
    if void:
        con.print(
            f"lines of fewer than {MIN_LAPS} laps, taken for void spins (decree: fewer than "
            f"{MIN_LAPS} revolutions) and not called: spin {', '.join(map(str, sorted(void)))}",
        )
    changed = [str(c.spin) for c in calls if c.new_wheel]
    if changed:
        con.print(
            "laps of another wheel, learned afresh from there: spin " + ", ".join(changed),
        )
    if args.plot:
        con.print(f"plot: {args.plot}")
    laps_fitted = [c.spin for c in calls if c.lap_noise]
    if laps_fitted:
        con.print(
            f"timing noise on each lap (laps clocked one by one), lap times fitted: "
            f"{len(laps_fitted)} spins, the first spin {laps_fitted[0]}",
        )


def _calls_table(
    args: argparse.Namespace, calls: list, spins: list[list[float]], drop_s: float, void: set
) -> Any:
    """One row a spin: its laps, the call, the predicted drop, the last pass, the lead."""
    from rich.table import Table
    from rich.text import Text

    revs = args.lead_revs
    asked = f"{revs} revolution{'s' * (revs > 1)}" if revs else f"{args.lead:g} s"
    prior = f", the wheel's drop period {drop_s:g} s" if drop_s else ""
    # the file name is the user's: Text, never markup
    t = Table(title=Text(f'"Rien ne va plus" on {args.laps} (lead asked {asked}{prior})'))
    for col in ("spin", "laps", "called at s", "predicted drop s", "last pass s", "lead s", ""):
        t.add_column(col, justify="right")
    for c, laps in zip(calls, spins, strict=True):
        parts = [("LATE", "red") if c.late else (c.why or "", "")]
        if c.spin in void:
            parts.append(("(void)", ""))
        if c.new_wheel:
            parts.append(("new wheel", "yellow"))
        note = Text(" ").join(Text(x, style=st) for x, st in parts if x)
        t.add_row(
            str(c.spin),
            str(len(laps)),
            _f(c.rnvp_s),
            _f(c.predicted_drop_s),
            _f(c.last_pass_s),
            _f(c.lead_s),
            note,
        )
    return t


def _totals_line(
    args: argparse.Namespace, calls: list, spins: list[list[float]], total: dict, cap: int | None
) -> str:
    """The spins called, late, the median lead, and how many hit the lead asked."""
    from rmc.rnvp import TOLERANCE_S, on_target

    revs = args.lead_revs
    aimed = sum(on_target(c, laps, args.lead, revs) for c, laps in zip(calls, spins, strict=True))
    if revs:
        hit = f"{aimed} called {revs} revolution{'s' * (revs > 1)} before the last pass"
    else:
        hit = f"{aimed} within ±{TOLERANCE_S:g} s of the lead asked"
        if cap is not None:
            hit += f" (any predictor: at most {cap})"
    return (
        f"{total['spins']} spins, {total['called']} called, {total['late']} late, "
        f"median lead {_f(total['median_lead_s'])} s, {hit}"
    )


def _ceiling(spins: list[list[float]], lead: float, tolerance: float) -> int | None:
    """The file's bound (rmc.rnvp.ceiling), warned of on stderr when some lines cannot be
    called on time by any predictor; None when it is every line."""
    from rmc.rnvp import ceiling

    cap = ceiling(spins, lead, tolerance)
    if cap == len(spins):
        return None
    print(
        f"rmc rnvp: warning: at most {cap} of {len(spins)} lines can be called within "
        f"±{tolerance:g} s of the lead with none late, by any predictor: lines that share "
        "their first laps get the same call until they part, and one that ends first must "
        "be called before it does",
        file=sys.stderr,
    )
    return cap


def _what_to_replay(spins: list[list[float]], args: argparse.Namespace):
    """(the spins' numbers in the file, the spins) to replay; warns on stderr of a file that
    reads newest lap first or holds copies of spins, which no predictor can be scored on."""
    from rmc.rnvp import copies, distinct, newest_first

    if newest_first(spins):
        again = "without" if args.newest_first else "with"
        print(
            "rmc rnvp: warning: most spins get faster lap after lap, as if each line held its "
            f"laps newest first: try {again} --newest-first",
            file=sys.stderr,
        )
    found = copies(spins)
    if found:
        cut = sum(c.cut > 0 for c in found)
        c = found[0]
        if c.cut:
            e = f"spin {c.spin} is the first {len(spins[c.spin - 1])} laps of spin {c.of}"
        else:
            e = f"spin {c.spin} repeats spin {c.of}"
        why = (
            ": a copy that ends where another line goes on is no spin of its own, and no call "
            "can be on time for both"
            if cut
            else ""
        )
        print(
            f"rmc rnvp: warning: {len(found)} of {len(spins)} lines are copies of another "
            f"spin, {cut} of them cut short ({e}){why}"
            + ("; left out (--distinct)" if args.distinct else "; --distinct leaves them out"),
            file=sys.stderr,
        )
    if args.distinct:
        return distinct(spins, found)
    return list(range(1, len(spins) + 1)), spins


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
