"""`rmc check TRACE [--key-file FILE] [--json]`: integrity and decree rules of a recording.

TRACE is a trace file (docs/traces.md) or a raw capture of the line, told apart by content.
Exit status: 0 clean, 1 corruption, forgery, gaps or rule violations found, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table


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


def read_key(path: str | None) -> bytes | None:
    """The key of a key file; ValueError with a clear message when unusable."""
    if path is None:
        return None
    from rmc.frames import load_key

    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read key file {path}: {e}") from None
    return load_key(text)


def unusable(command: str, e: OSError | ValueError, as_json: bool, err: Console) -> int:
    """Report input that cannot be used (exit 2): a JSON error object too when asked."""
    msg = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    if as_json:
        print(json.dumps({"error": msg, "usable": False}))
    err.print(f"[red]rmc {command}: {msg}[/red]")
    return 2


def run(args: argparse.Namespace) -> int:
    from rmc.checker import check_bytes

    err = Console(stderr=True)
    try:
        key = read_key(args.key_file)
        data = Path(args.trace).read_bytes()
        report, kind, _ = check_bytes(data, key)
    except (OSError, ValueError) as e:
        # TraceError is a ValueError: unusable input, as are a bad key file and a bad path.
        return unusable("check", e, args.json, err)
    trace_errors = getattr(report, "trace_errors", [])
    out = report.to_json()
    out["input"] = kind
    out["trace_errors"] = trace_errors
    clean = report.clean and not trace_errors
    out["clean"] = clean
    if args.json:
        print(json.dumps(out))
    else:
        show(out)
    return 0 if clean else 1


def show(out: dict) -> None:
    con = Console()
    t = Table(title=f"rmc check ({out['input']}, table {out['table']})", show_header=False)
    t.add_column("what")
    t.add_column("count", justify="right")
    for k in (
        "frames",
        "valid",
        "crc_errors",
        "malformed",
        "auth_failures",
        "unverified",
        "duplicates",
        "resent",
        "out_of_order",
        "reboots",
        "noise",
        "spins",
    ):
        t.add_row(k, str(out[k]))
    t.add_row("results", str(len(out["results"])))
    t.add_row("voids", str(len(out["voids"])))
    t.add_row("gaps", str(len(out["gaps"])))
    t.add_row("violations", str(len(out["violations"])))
    con.print(t)
    for b, first, last in out["gaps"]:
        con.print(f"[yellow]gap[/yellow] boot {b}: seq {first}..{last} missing")
    for v in out["violations"]:
        con.print(f"[red]{v['rule']}[/red] at {v['boot']}:{v['seq']}: {v['detail']}")
    for e in out["trace_errors"]:
        con.print(f"[red]trace[/red] {e}")
    if out["unverified"]:
        con.print(f"[yellow]{out['unverified']} tagged frames not verified: no --key-file[/yellow]")
    con.print("[green]clean[/green]" if out["clean"] else "[red]problems found[/red]")
    sys.stdout.flush()
