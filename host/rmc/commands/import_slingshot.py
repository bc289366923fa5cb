"""`rmc import-slingshot LOG [-o TRACE] [--table ID] [--pockets 37|38]`: a Cammegh SlingShot log
as a trace.

Status lines `*X;state;spin;win;warnings;rotor_rpm×10;direction` (with or without a time
stamp prefix such as `[2025-09-16 06:45:24.582] Receive >>> `) become the frames our
firmware would have sent, so that `rmc check` and the statistics run on those wheels too.

Exit status: 0 every status line read and in agreement; 1 the trace is written but the log
has damage (lines that cannot be read, disagree, or name no pocket of ours), each reported
with its line number and recorded in the trace; 2 unusable input or output, nothing written.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import IO, Any

from rmc import infile, outfile
from rmc.console import err_console, fail

CMD = "import-slingshot"
SHOWN = 20  # damage lines printed on stderr; all of them are in the trace's notes


class Refused(Exception):
    """The output cannot or must not be written: the reason, one line."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        CMD,
        help="turn a Cammegh SlingShot status log into a trace",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("log", metavar="LOG", help="the wheel's log (text)")
    p.add_argument("-o", "--output", metavar="TRACE", help="trace file to write (default: stdout)")
    p.add_argument(
        "--table", default="slingshot", help="table id for the frames (default: slingshot)"
    )
    p.add_argument(
        "--pockets",
        type=int,
        choices=(37, 38),
        default=37,
        help="the wheel's pockets: 37 (European, default) or 38 (American: 00 reported as 37)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmc.slingshot import import_log

    try:
        text = infile.read_bytes(args.log).decode("latin-1")
    except OSError as e:
        return fail(CMD, f"cannot read {args.log}: {e.strerror or e}")
    try:
        if args.output is not None:
            not_the_log(args.log, args.output)
            outfile.check(args.output)
        else:
            stdout_is_not(args.log)
    except (Refused, outfile.OutputError) as e:
        return fail(CMD, str(e))
    try:
        imported = import_log(text, table=args.table, pockets=args.pockets)
    except ValueError as e:  # a table id the frames cannot carry
        return fail(CMD, str(e))
    if not imported.status_lines:
        return fail(CMD, "no SlingShot status line (*X;...) found")
    try:
        if args.output is None:
            write_trace(sys.stdout, imported.records)  # a failed stdout: rmc.cli.main
        else:
            with outfile.replacing(args.output) as tmp, open(tmp, "w", encoding="utf-8") as f:
                write_trace(f, imported.records)
    except outfile.OutputError as e:
        return fail(CMD, str(e))
    err = err_console()
    err.print(
        f"{imported.status_lines} status lines, {imported.spins} spins, "
        f"{len(imported.skipped)} other lines skipped"
        + (f" (first at line {imported.skipped[0]})" if imported.skipped else "")
    )
    if not imported.damage:
        return 0
    for n, why in imported.damage[:SHOWN]:
        err.print(f"line {n}: {why}")
    more = len(imported.damage) - SHOWN
    if more > 0:
        err.print(f"… and {more} more, each in a note of the trace")
    count = len(imported.damage)
    lines = sorted({n for n, _ in imported.damage})
    where = ", ".join(map(str, lines[:10])) + (", …" if len(lines) > 10 else "")
    return fail(
        CMD,
        f"{count} problem{'s' if count > 1 else ''} in the log (line{'s' if len(lines) > 1 else ''}"
        f" {where}): recorded in the trace, which `rmc check` will not call clean",
        code=1,
    )


def not_the_log(log: str, output: str) -> None:
    """Refuse an output that is the log itself, by any name (a symlink, a hard link): the
    log is left as it is."""
    try:
        same = os.path.samefile(log, output)
    except OSError:
        return  # no such output yet: not the log
    if same:
        raise Refused(f"-o {output} is the log itself: refused, the log is left as it is")


def stdout_is_not(log: str) -> None:
    """Refuse a standard output that is the log itself (`>> LOG`): it would grow the log."""
    try:
        out = os.fstat(sys.stdout.fileno())
        st = os.stat(log)
    except (AttributeError, OSError, ValueError):  # no file behind it (a test's capture)
        return
    if stat.S_ISREG(out.st_mode) and (out.st_dev, out.st_ino) == (st.st_dev, st.st_ino):
        raise Refused(f"standard output is the log itself ({log}): refused")


def write_trace(out: IO[str], records: list[dict[str, Any]]) -> None:
    from rmc.trace import TraceWriter

    header, *rest = records
    w = TraceWriter(out, header, flush=False)  # all at once: nothing live to lose
    for r in rest:
        w.write(r)
    w.end()
