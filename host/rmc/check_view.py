"""`rmc check`'s report as a table and one line a finding, for `rmc check` and `rmc replay`.

Frame text, file names and operators' names are printed literally (rmc.console)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from rich.table import Table
from rich.text import Text

from rmc import infile
from rmc.console import out_console

_LINK_COMMANDS = ("RESEND", "STATUS")


def read_input(trace: str, key_file: str | None) -> tuple[bytes, bytes | None]:
    """A recording's bytes and the table's key, for `rmc check` and `rmc replay`. A path that
    cannot be read is a ValueError naming it; a bad key file is the key's own ValueError."""
    from rmc.keys import read_key

    key = read_key(key_file)
    try:
        return infile.read_bytes(trace), key
    except OSError as e:
        raise ValueError(f"cannot read {trace}: {e.strerror or e}") from None


def report_json(report: dict, kind: str, trace_errors: list[str]) -> dict:
    """`rmc check`'s JSON object, which show() prints: the checker's report (its to_json()),
    the input's kind ("trace" or "capture") and a trace's own errors, clean only without
    them. `rmc check` prints it, `rmc replay` shows its own check with it."""
    out = dict(report)
    out["input"] = kind
    out["trace_errors"] = trace_errors
    out["clean"] = out["clean"] and not trace_errors
    return out


_COUNTS = (
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
)
_LISTED = (  # (row, key): the lists of the report counted in the table
    ("results", "results"),
    ("results rejected", "rejected"),
    ("voids", "voids"),
    ("gaps", "gaps"),
    ("violations", "violations"),
    ("alerts", "alerts"),
)


def show(out: dict) -> None:
    con = out_console()
    con.print(_counts_table(out))

    def line(label: str, style: str, text: str) -> None:
        con.print(Text.assemble((label, style), " ", text))  # frame text printed literally

    for label, style, text in _findings(out):
        line(label, style, text)
    for c in out.get("commands", []):
        if c["cmd"] not in _LINK_COMMANDS:  # the recorder's own (gaps asked, probes): counted
            line("command", *_command_line(c))
    for e in out["trace_errors"]:
        line("trace", "red", str(e))
    if out["unverified"]:
        con.print(Text(f"{out['unverified']} tagged frames not verified: no --key-file", "yellow"))
    con.print(Text("clean", "green") if out["clean"] else Text("problems found", "red"))
    sys.stdout.flush()


def _counts_table(out: dict) -> Table:
    t = Table(title=f"rmc check ({out['input']}, table {out['table']})", show_header=False)
    t.add_column("what")
    t.add_column("count", justify="right")
    for k in _COUNTS:
        t.add_row(k, str(out[k]))
    for row, k in _LISTED:
        t.add_row(row, str(len(out[k])))
    t.add_row("commands", str(len(out.get("commands", []))))
    return t


def _findings(out: dict) -> Iterator[tuple[str, str, str]]:
    """(label, style, text) of each gap, violation, rejected result, alert, threshold
    changed and session closed by force, in that order."""
    for b, first, last in out["gaps"]:
        yield "gap", "yellow", f"boot {b}: seq {first}..{last} missing"
    for v in out["violations"]:
        yield v["rule"], "red", f"at {v['boot']}:{v['seq']}: {v['detail']}"
    for x in out["rejected"]:
        yield "rejected", "red", f"spin {x['spin']}: {x['result']} ({', '.join(x['rules'])})"
    for a in out["alerts"]:
        yield a["what"], "red", f"at {a['boot']}:{a['seq']}: {a['detail']}"
    for c in out["settings"]:
        yield (
            "threshold",
            "yellow",
            f"at {c['boot']}:{c['seq']}: {c['key']} {c['old']} -> {c['new']} by {c['by']}",
        )
    for c in out["forced_closes"]:
        yield (
            "forced close",
            "yellow",
            f"at {c['boot']}:{c['seq']}, {c['coups']} coup(s): {c['reason']}",
        )


def _command_line(c: dict) -> tuple[str, str]:
    """(style, text) of an operator's command and its answer."""
    who = f" by {c['by']}" if c.get("by") else ""
    if c["ok"] is None:
        answer, style = "no answer", "yellow"
    else:
        answer, style = ("done", "") if c["ok"] else (f"refused: {c['detail']}", "yellow")
    return style, f"{c['cmd']} ({c['boot']}:{c['cseq']}){who}: {answer}"
