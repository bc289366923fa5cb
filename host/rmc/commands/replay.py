"""`rmc replay TRACE [--key-file FILE] [--table FILE.toml] [--json]`: replay a recording.

Re-checks the trace's frames (as `rmc check`), settles the bets it holds with the
settlement engine (a bet placed after « rien ne va plus » is refused), and, where raw
sensor events are present, runs them through the firmware's own core and shows every
difference from the recorded frames and from the truth a simulator wrote.
Exit status: 0 all clean and the same, 1 problems or differences, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from rmc.console import err_console, fail, out_console

if TYPE_CHECKING:
    from rmc.trace import Trace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="re-check a trace, settle its bets, rerun its sensors through the firmware core",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("trace", metavar="TRACE")
    p.add_argument("--key-file", metavar="FILE", help="the table's HMAC key (hex)")
    p.add_argument("--table", metavar="FILE.toml", help="table limits for the bets")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmc.check_view import read_input
    from rmc.checker import check_bytes
    from rmc.console import unusable
    from rmc.trace import looks_like_trace, parse_trace

    err = err_console()
    try:
        data, key = read_input(args.trace, args.key_file)
        if not looks_like_trace(data[:65536]):
            raise ValueError("not a trace (a raw capture can be checked with rmc check)")
        trace = parse_trace(data)
        report, _, _ = check_bytes(data, key)
    except (OSError, ValueError) as e:
        return unusable("replay", e, args.json, err)
    out: dict = {"check": report.to_json(), "trace_errors": trace.errors}
    problems = not report.clean or bool(trace.errors)
    if report.valid == 0:
        out["check"]["note"] = "no frames in this trace"
        problems = bool(trace.errors)
    if trace.of_kind("bet"):
        try:
            out["bets"] = _bets(trace, key, args.table)
        except ValueError as e:  # a bad table file
            return fail("replay", str(e))
        problems = problems or "error" in out["bets"]
    core = _core(trace)
    if core is not None:
        out["core"] = core
        problems = problems or not core["agrees"] or not core["check"]["clean"]
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        show(out, out_console())
    return 1 if problems else 0


def _bets(trace: Trace, key: bytes | None, table_file: str | None) -> dict:
    """The trace's bets settled, as JSON; {"error": ...} without the settlement engine.
    ValueError: a bad table file."""
    from rmc.money import fmt
    from rmc.replay import settle_bets

    try:
        settled = settle_bets(trace, key, table_file)
    except ImportError as e:  # the settlement engine is a separate part of the host
        return {"error": f"settlement engine unavailable: {e}"}
    return {
        "settled": settled.statements,
        "refused": settled.refused,
        "unsettled": settled.unsettled,
        "staked": fmt(settled.staked),
        "paid": fmt(settled.paid),
    }


def _core(trace: Trace) -> dict | None:
    """The trace's sensor events rerun through the firmware core, as JSON; None without."""
    from rmc.replay import run_core

    core = run_core(trace)
    if core is None:
        return None
    return {
        "sensor_events": core.events,
        "power_cuts": core.power_cuts,
        "frames": len(core.lines),
        "check": core.report.to_json(),
        "diff_recorded": core.vs_recorded,
        "diff_truth": core.vs_truth,
        "refused": core.refused,
        "agrees": core.agrees,
    }


def show(out: dict, con: Console) -> None:
    from rmc.check_view import report_json
    from rmc.check_view import show as show_check

    show_check(report_json(out["check"], "trace", out["trace_errors"]))
    if out.get("bets"):
        _show_bets(out["bets"], con)
    if out.get("core"):
        _show_core(out["core"], con)


def _show_bets(b: dict, con: Console) -> None:
    if "error" in b:
        con.print(Text(f"bets: {b['error']}", "red"))
        return
    t = RichTable(title="bets", show_header=True)
    t.add_column("spin", justify="right")
    t.add_column("result")
    t.add_column("bets", justify="right")
    t.add_column("staked", justify="right")
    t.add_column("paid", justify="right")
    for s in b["settled"]:
        tot = s["totals"]
        t.add_row(
            str(s["spin"]), Text(str(s["result"])), str(len(s["bets"])), tot["staked"], tot["paid"]
        )
    con.print(t)
    for r in b["refused"]:
        con.print(Text.assemble(("refused", "yellow"), f" bet {r['bet']}: {r['reason']}"))
    for r in b["unsettled"]:
        con.print(Text.assemble(("unsettled", "yellow"), f" bet {r['bet']}: {r['reason']}"))
    con.print(f"staked {b['staked']}, paid {b['paid']}")


def _show_core(core: dict, con: Console) -> None:
    con.print(
        f"firmware core: {core['sensor_events']} sensor events, {core['power_cuts']} power "
        f"cuts, {core['frames']} frames, results "
        + ", ".join(r["result"] for r in core["check"]["results"])
    )
    for v in core["check"]["violations"]:
        con.print(Text.assemble((f"core {v['rule']}", "red"), f": {v['detail']}"))
    for c in core["refused"]:
        con.print(
            Text.assemble(
                (f"core refused {c['command']}", "red"),
                f" at {c['t_us'] / 1e6:.3f} s: {c['detail']}",
            )
        )
    for line in core["diff_recorded"]:
        con.print(Text(line))
    for d in core["diff_truth"]:
        con.print(
            Text.assemble(
                (f"spin {d['spin']}", "red"), f": truth {d['truth']}, firmware {d['firmware']}"
            )
        )
    if core["agrees"]:
        con.print(Text("the firmware core agrees", "green"))
    else:
        con.print(Text("the firmware core does not agree with the recording", "red"))
