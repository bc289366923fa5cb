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
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable


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
    from rmc.checker import check_bytes
    from rmc.commands.check import read_key, unusable
    from rmc.money import fmt
    from rmc.replay import run_core, settle_bets
    from rmc.trace import looks_like_trace, parse_trace

    err = Console(stderr=True)
    try:
        key = read_key(args.key_file)
        data = Path(args.trace).read_bytes()
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
    bets = trace.of_kind("bet")
    if bets:
        try:
            settled = settle_bets(trace, key, args.table)
        except ImportError as e:  # the settlement engine is a separate part of the host
            out["bets"] = {"error": f"settlement engine unavailable: {e}"}
            problems = True
        except ValueError as e:  # a bad table file
            err.print(f"[red]rmc replay: {e}[/red]")
            return 2
        else:
            out["bets"] = {
                "settled": settled.statements,
                "refused": settled.refused,
                "unsettled": settled.unsettled,
                "staked": fmt(settled.staked),
                "paid": fmt(settled.paid),
            }
    core = run_core(trace)
    if core is not None:
        out["core"] = {
            "sensor_events": core.events,
            "power_cuts": core.power_cuts,
            "frames": len(core.lines),
            "check": core.report.to_json(),
            "diff_recorded": core.vs_recorded,
            "diff_truth": core.vs_truth,
        }
        if core.vs_recorded or core.vs_truth or not core.report.clean:
            problems = True
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        show(out, Console())
    return 1 if problems else 0


def show(out: dict, con: Console) -> None:
    from rmc.commands.check import show as show_check

    c = dict(out["check"])
    c.setdefault("input", "trace")
    c["trace_errors"] = out["trace_errors"]
    c["clean"] = c["clean"] and not c["trace_errors"]  # as `rmc check` says it
    show_check(c)
    b = out.get("bets")
    if b:
        if "error" in b:
            con.print(f"[red]bets: {b['error']}[/red]")
        else:
            t = RichTable(title="bets", show_header=True)
            t.add_column("spin", justify="right")
            t.add_column("result")
            t.add_column("bets", justify="right")
            t.add_column("staked", justify="right")
            t.add_column("paid", justify="right")
            for s in b["settled"]:
                tot = s["totals"]
                t.add_row(
                    str(s["spin"]), s["result"], str(len(s["bets"])), tot["staked"], tot["paid"]
                )
            con.print(t)
            for r in b["refused"]:
                con.print(f"[yellow]refused[/yellow] bet {r['bet']}: {r['reason']}")
            for r in b["unsettled"]:
                con.print(f"[yellow]unsettled[/yellow] bet {r['bet']}: {r['reason']}")
            con.print(f"staked {b['staked']}, paid {b['paid']}")
    core = out.get("core")
    if core:
        con.print(
            f"firmware core: {core['sensor_events']} sensor events, {core['power_cuts']} power "
            f"cuts, {core['frames']} frames, results "
            + ", ".join(r["result"] for r in core["check"]["results"])
        )
        for v in core["check"]["violations"]:
            con.print(f"[red]core {v['rule']}[/red]: {v['detail']}")
        for line in core["diff_recorded"]:
            con.print(line, markup=False, highlight=False)
        for d in core["diff_truth"]:
            con.print(f"[red]spin {d['spin']}[/red]: truth {d['truth']}, firmware {d['firmware']}")
        if not core["diff_recorded"] and not core["diff_truth"]:
            con.print("[green]the firmware core agrees[/green]")
