"""`rmc record --port URL [-o TRACE] [--key-file FILE] [--duration S]`: record a live table.

URL is a serial device (/dev/ttyACM0) or any pyserial URL, `socket://127.0.0.1:PORT`
included. Every line is written to the trace as received; every gap is asked again from the
firmware's journal until it is filled; results are shown in order as they are confirmed.
Ctrl-C or SIGTERM stops it between two lines, after up to --grace seconds filling the last
gaps (a second signal skips that); the trace then gets its end record.
An existing TRACE is refused unless --force is given; it is then replaced only once the new
trace is ended. A line cut by the port closing is kept in the trace, as a damaged line.
Exit status: 0 complete, 1 frames still missing at the end, lines that failed their
authentication (the key is not the table's), no valid frame heard (nothing, or damaged
lines only), or the port failed on the way (the trace is ended there, with a note), 2 the
port cannot be opened, or the trace exists or cannot be written.
"""

from __future__ import annotations

import argparse
import time

from rich.text import Text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "record",
        help="record a live table into a trace, asking for resends of every gap",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--port", required=True, metavar="URL", help="serial device or pyserial URL")
    p.add_argument("-o", "--output", metavar="TRACE", help="trace file (default: rmc-<time>.jsonl)")
    p.add_argument(
        "--force", action="store_true", help="replace TRACE when it exists (refused otherwise)"
    )
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
    from rmc.console import err_console, fail, out_console
    from rmc.keys import read_key
    from rmc.outfile import OutputError
    from rmc.record import PortError, record

    con = out_console()
    try:
        key = read_key(args.key_file)
    except ValueError as e:
        return fail("record", str(e))
    out = args.output or time.strftime("rmc-%Y%m%d-%H%M%S.jsonl")

    def shown(f) -> None:
        con.print(
            Text.assemble(f"spin {f.fields.get('spin')}: ", (str(f.fields.get("num")), "bold"))
        )

    try:
        rec = record(
            args.port,
            out,
            key=key,
            force=args.force,
            table=args.table,
            duration=args.duration,
            grace=args.grace,
            baud=args.baud,
            on_result=shown,
        )
    except (PortError, OutputError) as e:
        return fail("record", str(e))
    link = rec.link
    r = link.checker.report()
    con.print(
        f"{out}: {r.valid} frames, {len(link.results)} results, {link.stats.resends_asked} "
        f"resend requests, {r.crc_errors} damaged lines"
    )
    if r.unverified:
        con.print(
            Text(
                f"{r.unverified} tagged frames taken unverified: give --key-file to check them",
                style="yellow",
            )
        )
    problems = _problems(r, link.stats, key is not None)
    if rec.port_lost:
        problems.insert(0, f"the port failed, recording stopped: {rec.port_lost}")
    for text in problems:
        fail("record", text)
    missing = link.missing_ranges()
    if missing or link.stats.lost:
        err_console().print(
            Text(
                f"still missing: {missing[:10]}; lost from the journal: {link.stats.lost}",
                style="red",
            )
        )
        return 1
    return 1 if problems else 0


def _problems(r, stats, keyed: bool) -> list[str]:
    """Why a recording cannot be trusted whole, in words, beyond missing frames."""
    from rmcfw import proto  # (commands import lazily: `rmc` starts fast)

    # what the table's refusals mean for the engineer at the port (its ACK's detail)
    refused = {
        proto.A_AUTH: "it takes only commands tagged with its key: give the table's --key-file",
        proto.A_TABLE: "they were addressed to another table: check --table",
        proto.A_STALE: "their sequence numbers were behind the table's (another host on the line?)",
    }
    out = []
    if r.frames == 0:
        out.append("no frame heard from the table (wiring, baud rate, or nothing sending)")
    elif r.valid == 0:
        # damaged lines only: a wrong baud rate, a noisy line; nothing in the trace stands
        out.append(
            f"no valid frame: the {r.frames} lines heard were all damaged "
            "(baud rate, wiring or noise)"
        )
    if r.auth_failures:
        why = "the key is not the table's" if keyed else "the table sends tagged frames only"
        out.append(f"{r.auth_failures} lines failed their authentication ({why})")
    for detail, n in sorted(stats.refusals.items()):
        if detail in refused:
            out.append(f"the table refused {n} commands ({detail}): {refused[detail]}")
    return out
