"""`rmc export --db URL --table ID [--since T] [--until T] -o TRACE`: a table's frames from
the table service's database, as a trace that `rmc check` and `rmc replay` read.

The frames received from --since (included) to --until (excluded), in (boot, seq) order as
received, the operators' commands and the board's answers among them by time, then the end
record. T is ISO 8601 with its offset (2024-05-01T21:30:00+02:00, ...Z) or seconds since the
epoch. An existing TRACE is refused unless --force is given; it is replaced only once the
new trace is whole. Exit status: 0 written, 2 bad input (the database cannot be opened, no
such table, no frame in the window, TRACE exists or cannot be written), with a one-line
reason.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rmc import infile


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a table's frames from the service's database as a trace",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--db", required=True, metavar="URL", help="the service's database")
    p.add_argument("--table", required=True, metavar="ID", help="the table's id")
    p.add_argument("--since", metavar="T", help="first receive time (included)")
    p.add_argument("--until", metavar="T", help="last receive time (excluded)")
    p.add_argument("-o", "--output", required=True, metavar="TRACE", help="the trace to write")
    p.add_argument(
        "--force", action="store_true", help="replace TRACE when it exists (refused otherwise)"
    )
    p.add_argument(
        "--wheel",
        metavar="FILE.json",
        help="the wheel definition the board was given (its wheel.json): rmc check then "
        "checks the BOOT frames' wheel id against it (default: not checked, as the service)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from rmc.console import fail, out_console
    from rmc.export import ExportError, export_trace
    from rmc.outfile import OutputError, check, replacing
    from rmc.progress import Steps
    from rmc.serve.store import StoreError
    from rmc.served_db import DatabaseError, open_store, shown_url
    from rmc.timestamps import InstantError, format_instant, parse_instant

    try:
        since = None if args.since is None else parse_instant(args.since, "--since")
        until = None if args.until is None else parse_instant(args.until, "--until")
    except InstantError as e:
        return fail("export", str(e))
    if since is not None and until is not None and since >= until:
        return fail("export", "--since must come before --until")
    try:
        wheel = _wheel(args.wheel)
        check(args.output, args.force)  # before the database is opened
        store = open_store(args.db)
    except (ValueError, OutputError) as e:  # a bad wheel file, DatabaseError
        return fail("export", str(e))
    try:
        with Steps() as steps, replacing(args.output, args.force) as path:
            steps.step("exporting frames", None)
            with open(path, "w", encoding="utf-8") as out:
                done = export_trace(
                    store, args.table, out, since, until, wheel, shown_url(args.db), steps.update
                )
    except (ExportError, OutputError, StoreError, DatabaseError) as e:
        return fail("export", str(e))
    finally:
        store.close()
    if Path(args.output).is_file():  # a device or a pipe gets the trace only
        boots = ", ".join(map(str, done.boots))
        out_console().print(
            Text(
                f"{args.output}: {done.frames} frames (boot {boots}) received from "
                f"{format_instant(done.first_us)} to {format_instant(done.last_us)}, "
                f"{done.commands} commands, {done.answers} answers"
            )
        )
    return 0


def _wheel(path: str | None) -> object:
    """The header's wheel: a wheel.json's content, or "unknown" (not checked)."""
    if path is None:
        return "unknown"
    from rmc.trace import wheel_id

    try:
        wheel = json.loads(infile.read_text(path))
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not a wheel definition (JSON): {e}") from None
    if wheel_id(wheel) is None:
        raise ValueError(f"{path} is not a wheel definition: no 'pockets' list")
    return wheel
