"""`rmc check TRACE [--key-file FILE] [--json]`: integrity and decree rules of a recording.

TRACE is a trace file (docs/traces.md) or a raw capture of the line, told apart by content.
Exit status: 0 clean; 1 corruption, forgery, gaps, rule violations, tamper, the lid opened
while closed or a fault left active; 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rmc.console import err_console, out_console


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
    err.print(Text(f"rmc {command}: {msg}", style="red"))
    return 2


def run(args: argparse.Namespace) -> int:
    from rmc.checker import check_bytes

    err = err_console()
    try:
        key = read_key(args.key_file)
        try:
            data = Path(args.trace).read_bytes()
        except OSError as e:
            raise ValueError(f"cannot read {args.trace}: {e.strerror or e}") from None
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


_LINK_COMMANDS = ("RESEND", "STATUS")


def show(out: dict) -> None:
    con = out_console()
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
    t.add_row("results rejected", str(len(out["rejected"])))
    t.add_row("voids", str(len(out["voids"])))
    t.add_row("gaps", str(len(out["gaps"])))
    t.add_row("violations", str(len(out["violations"])))
    t.add_row("alerts", str(len(out["alerts"])))
    t.add_row("commands", str(len(out.get("commands", []))))
    con.print(t)

    def line(label: str, style: str, text: str) -> None:
        con.print(Text.assemble((label, style), " ", text))  # frame text printed literally

    for b, first, last in out["gaps"]:
        line("gap", "yellow", f"boot {b}: seq {first}..{last} missing")
    for v in out["violations"]:
        line(v["rule"], "red", f"at {v['boot']}:{v['seq']}: {v['detail']}")
    for x in out["rejected"]:
        line("rejected", "red", f"spin {x['spin']}: {x['result']} ({', '.join(x['rules'])})")
    for a in out["alerts"]:
        line(a["what"], "red", f"at {a['boot']}:{a['seq']}: {a['detail']}")
    for c in out["settings"]:
        line(
            "threshold",
            "yellow",
            f"at {c['boot']}:{c['seq']}: {c['key']} {c['old']} -> {c['new']} by {c['by']}",
        )
    for c in out["forced_closes"]:
        line(
            "forced close",
            "yellow",
            f"at {c['boot']}:{c['seq']}, {c['coups']} coup(s): {c['reason']}",
        )
    for c in out.get("commands", []):
        if c["cmd"] in _LINK_COMMANDS:
            continue  # the recorder's own (gaps asked again, probes): counted above
        who = f" by {c['by']}" if c.get("by") else ""
        if c["ok"] is None:
            answer, style = "no answer", "yellow"
        else:
            answer, style = ("done", "") if c["ok"] else (f"refused: {c['detail']}", "yellow")
        line("command", style, f"{c['cmd']} ({c['boot']}:{c['cseq']}){who}: {answer}")
    for e in out["trace_errors"]:
        line("trace", "red", str(e))
    if out["unverified"]:
        con.print(Text(f"{out['unverified']} tagged frames not verified: no --key-file", "yellow"))
    con.print(Text("clean", "green") if out["clean"] else Text("problems found", "red"))
    sys.stdout.flush()
