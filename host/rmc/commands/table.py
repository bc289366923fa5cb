"""`rmc table ID COMMAND`: an operator's command to a live table, through `rmc serve`.

  rmc table ID open --chef NAME     open a session (the chef de table)
  rmc table ID last3                announce « les trois derniers coups »
  rmc table ID close [--reason TEXT]  close the session (with a reason: a forced close)
  rmc table ID recall [N]           the last N results from the table's journal (10 or more)
  rmc table ID set KEY VALUE        change a threshold (engineers)
  rmc table ID status               the table's link, state, session, faults and lead

The command goes to the service at --server (default http://127.0.0.1:8019, or $RMC_SERVER)
with the token in --token-file (or $RMC_TOKEN_FILE); the service signs it with the table's key
and waits for the table's answer. Exit 0 done, 1 refused by the table, 2 refused by the
service (bad token, role, argument) or the service or the table out of reach.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any
from urllib.parse import quote

DEFAULT_SERVER = "http://127.0.0.1:8019"
# what a table's refusal of a SET means, said in the refusal's line
REFUSALS = {"engineer": "a later call of « rien ne va plus » needs an engineer"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "table",
        help="an operator's command to a live table (through rmc serve)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("id", metavar="ID", help="the table")
    # the options go before or after the command: both parsers know them
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--server", metavar="URL", default=argparse.SUPPRESS,
        help=f"the service (default {DEFAULT_SERVER})",
    )  # fmt: skip
    common.add_argument(
        "--token-file", metavar="FILE", default=argparse.SUPPRESS, help="the operator's token"
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="the answer as JSON"
    )
    for action in common._actions:
        p._add_action(action)
    verbs = p.add_subparsers(dest="verb", metavar="COMMAND")
    verbs.required = True
    o = verbs.add_parser("open", help="open a session", parents=[common])
    o.add_argument("--chef", required=True, help="the chef de table's name")
    verbs.add_parser("last3", help="announce the last three coups", parents=[common])
    c = verbs.add_parser("close", help="close the session", parents=[common])
    c.add_argument("--reason", help="a forced close: why")
    r = verbs.add_parser("recall", help="the last N results kept by the table", parents=[common])
    r.add_argument("n", nargs="?", type=int, help="how many (10 or more are sent)")
    s = verbs.add_parser("set", help="change a threshold (engineers)", parents=[common])
    s.add_argument("key")
    s.add_argument("value")
    verbs.add_parser("status", help="the table's link, state, session and faults", parents=[common])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmc.console import fail
    from rmc.serve.client import Client, ClientError

    server = getattr(args, "server", None) or os.environ.get("RMC_SERVER") or DEFAULT_SERVER
    token_file = getattr(args, "token_file", None) or os.environ.get("RMC_TOKEN_FILE")
    args.json = getattr(args, "json", False)
    if not token_file:
        return fail("table", "no token: give --token-file FILE (or set RMC_TOKEN_FILE)")
    try:
        client = Client.from_token_file(server, token_file)
        if args.verb == "status":
            out = client.table(args.id)
            # the lead of « rien ne va plus » in force, as the table's CFG frames left it
            try:
                out["lead"] = client.get(f"/api/tables/{quote(args.id, safe='')}/lead")
            except ClientError:
                pass  # a service without the route: the status all the same
            return _show_status(args, out)
        body: dict[str, Any] = {}
        if args.verb == "open":
            body["chef"] = args.chef
        elif args.verb == "close" and args.reason is not None:
            body["reason"] = args.reason
        elif args.verb == "recall" and args.n is not None:
            body["n"] = args.n
        elif args.verb == "set":
            body = {"key": args.key, "value": args.value}
        out = client.command(args.id, args.verb, body)
    except ClientError as e:
        return fail("table", str(e))
    return _show_answer(args, out)


def _show_answer(args: argparse.Namespace, out: dict[str, Any]) -> int:
    from rich.text import Text

    from rmc.console import out_console

    ok = bool(out.get("ok"))
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0 if ok else 1
    con = out_console()
    what = f"{args.id} {args.verb}"
    if ok:
        line = Text(f"{what}: done", style="green")
        if out.get("games"):
            line.append(f"  games {out['games']}", style="")
    else:
        detail = out.get("detail") or "?"
        why = REFUSALS.get(detail)
        line = Text(f"{what}: refused by the table ({detail}{f': {why}' if why else ''})")
        line.stylize("red")
    con.print(line)
    return 0 if ok else 1


def _show_status(args: argparse.Namespace, out: dict[str, Any]) -> int:
    from rich.text import Text

    from rmc.console import out_console

    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    con = out_console()
    link = out.get("link", {})
    state = "connected" if link.get("connected") else f"not connected ({link.get('error')})"
    con.print(Text(f"table {out.get('id')}  {out.get('url')}  {state}"))
    con.print(
        Text(
            f"state {out.get('state')}  spin {out.get('spin')}  session {out.get('session')}  "
            f"lid {out.get('lid')}  faults {', '.join(out.get('active_faults') or []) or 'none'}"
        )
    )
    con.print(
        Text(
            f"frames {link.get('frames')}  damaged {link.get('damaged')}  "
            f"missing {link.get('missing')}  reconnects {link.get('reconnects')}"
        )
    )
    lead = out.get("lead")
    if isinstance(lead, dict):
        con.print(Text(lead_line(lead)))
    return 0


def lead_line(lead: dict[str, Any]) -> str:
    """« rien ne va plus »'s lead in force in one line: "lead 3 revs + 0-500 ms before the
    drop (lead_revs set by paul, engineer)" or "... (defaults: no CFG frame)"."""
    who = "; ".join(
        f"{k} set by {x.get('by') or '?'}" + (f", {x['role']}" if x.get("role") else "")
        for k, x in sorted((lead.get("set") or {}).items())
    )
    return f"lead {lead.get('text')} before the drop ({who or 'defaults: no CFG frame'})"
