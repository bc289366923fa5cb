"""`rmc record --port URL [-o TRACE] [--key-file FILE] [--duration S]`: record a live table.

URL is a serial device (/dev/ttyACM0) or any pyserial URL, `socket://127.0.0.1:PORT`
included. Every line is written to the trace as received; every gap is asked again from the
firmware's journal until it is filled; results are shown in order as they are confirmed.
Exit status: 0 complete, 1 frames still missing at the end, 2 the port cannot be opened.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "record",
        help="record a live table into a trace, asking for resends of every gap",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--port", required=True, metavar="URL", help="serial device or pyserial URL")
    p.add_argument("-o", "--output", metavar="TRACE", help="trace file (default: rmc-<time>.jsonl)")
    p.add_argument("--key-file", metavar="FILE", help="the table's HMAC key (hex)")
    p.add_argument("--table", help="expected table id (default: the first frame's)")
    p.add_argument("--baud", type=int, default=115200)
    p.add_argument(
        "--duration", type=float, metavar="S", help="stop after S seconds (default: Ctrl-C)"
    )
    p.add_argument(
        "--grace", type=float, default=3.0, metavar="S", help="time to fill the last gaps"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmc.commands.check import read_key
    from rmc.record import record

    con = Console()
    err = Console(stderr=True)
    try:
        key = read_key(args.key_file)
    except ValueError as e:
        err.print(f"[red]rmc record: {e}[/red]")
        return 2
    out = args.output or time.strftime("rmc-%Y%m%d-%H%M%S.jsonl")

    def shown(f) -> None:
        con.print(f"spin {f.fields.get('spin')}: [bold]{f.fields.get('num')}[/bold]")

    try:
        link = record(
            args.port,
            out,
            key=key,
            table=args.table,
            duration=args.duration,
            grace=args.grace,
            baud=args.baud,
            on_result=shown,
        )
    except Exception as e:  # pyserial raises its own SerialException (an OSError) or ValueError
        if isinstance(e, (OSError, ValueError)) or type(e).__name__ == "SerialException":
            err.print(f"[red]rmc record: cannot open {args.port}: {e}[/red]")
            return 2
        raise
    r = link.checker.report()
    con.print(
        f"{out}: {r.valid} frames, {len(link.results)} results, {link.stats.resends_asked} "
        f"resend requests, {r.crc_errors} damaged lines"
    )
    missing = link.missing_ranges()
    if missing or link.stats.lost:
        err.print(
            f"[red]still missing: {missing[:10]}; lost from the journal: {link.stats.lost}[/red]"
        )
        return 1
    return 0
