"""`rmc import-slingshot LOG [-o TRACE] [--table ID]`: a Cammegh SlingShot log as a trace.

Status lines `*X;state;spin;win;warnings;rotor_rpm×10;direction` (with or without a time
stamp prefix such as `[2025-09-16 06:45:24.582] Receive >>> `) become the frames our
firmware would have sent, so that `rmc check` and the statistics run on those wheels too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-slingshot",
        help="turn a Cammegh SlingShot status log into a trace",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("log", metavar="LOG", help="the wheel's log (text)")
    p.add_argument("-o", "--output", metavar="TRACE", help="trace file to write (default: stdout)")
    p.add_argument(
        "--table", default="slingshot", help="table id for the frames (default: slingshot)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmc.slingshot import import_log
    from rmc.trace import TraceWriter

    err = Console(stderr=True)
    try:
        text = Path(args.log).read_bytes().decode("latin-1")
        imported = import_log(text, table=args.table)
    except OSError as e:
        err.print(f"[red]rmc import-slingshot: {e.strerror or e}: {args.log}[/red]")
        return 2
    except ValueError as e:
        err.print(f"[red]rmc import-slingshot: {e}[/red]")
        return 2
    if not imported.status_lines:
        err.print("[red]rmc import-slingshot: no SlingShot status line (*X;...) found[/red]")
        return 2
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        header, *records = imported.records
        with TraceWriter(out, header) as w:
            for r in records:
                w.write(r)
    finally:
        if args.output:
            out.close()
    err.print(
        f"{imported.status_lines} status lines, {imported.spins} spins, "
        f"{len(imported.skipped)} other lines skipped"
        + (f" (first at line {imported.skipped[0]})" if imported.skipped else "")
    )
    return 0
