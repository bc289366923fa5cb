"""`rmc check TRACE [--key-file FILE] [--json]`: integrity and decree rules of a recording.

TRACE is a trace file (docs/traces.md) or a raw capture of the line, told apart by content.
Exit status: 0 clean; 1 corruption, forgery, gaps, rule violations, tamper, the lid opened
while closed or a fault left active; 2 unusable input.
"""

from __future__ import annotations

import argparse
import json

from rmc.check_view import read_input, report_json, show
from rmc.console import err_console, unusable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="check a trace or a raw capture: CRC, HMAC, gaps, duplicates, decree rules",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("trace", metavar="TRACE", help="trace file (JSON Lines) or raw capture")
    p.add_argument("--key-file", metavar="FILE", help="the table's HMAC key (hex) to verify tags")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmc.checker import check_bytes

    err = err_console()
    try:
        data, key = read_input(args.trace, args.key_file)
        report, kind, _ = check_bytes(data, key)
    except (OSError, ValueError) as e:
        # TraceError is a ValueError: unusable input, as are a bad key file and a bad path.
        return unusable("check", e, args.json, err)
    out = report_json(report.to_json(), kind, report.trace_errors)
    if args.json:
        print(json.dumps(out))
    else:
        show(out)
    return 0 if out["clean"] else 1
