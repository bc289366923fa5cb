"""`rmc check`'s report as a table and one line a finding, for `rmc check` and `rmc replay`.

Frame text, file names and operators' names are printed literally (rmc.console)."""

from __future__ import annotations

import sys

from rich.table import Table
from rich.text import Text

from rmc.console import out_console

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
