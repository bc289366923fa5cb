"""`rmc settle`: settle a table's bets against a result (decree 1-4, 1-5, 1-6)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from rmc import infile
from rmc.bets import BetsError, load_bets
from rmc.console import out_console
from rmc.limits import Table, TableError
from rmc.money import fmt
from rmc.progress import Steps
from rmc.settle import Book, ResultError, Statement, result_index, settle

if TYPE_CHECKING:
    from rmc.settle_recorded import Outcome

EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "settle",
        help="settle bets against a result, or recorded spins, in the decree's paying order",
        description="Settle the bets of BETS.json against a result (exit 2 on any bad input: "
        "nothing is settled then, the bet's index and the reason are on standard error); or "
        "settle the recorded spins of a trace or of the table service's database with the "
        "bets of BETS.jsonl, one bet a line with the spin it is for or the time it was "
        "placed: a bet placed after its spin's « rien ne va plus » or during an incident is "
        "refused, and listed (docs/settlement.md).",
        usage="rmc settle BETS.json --result N [--limits FILE.toml] [--json]\n"
        "       rmc settle (--trace TRACE | --db URL --table ID) --bets BETS.jsonl "
        "[--since T] [--until T] [--limits FILE.toml] [--key-file FILE] [--json]",
    )
    p.add_argument("bets", metavar="BETS.json", nargs="?", help="the bets ('-' for standard input)")
    p.add_argument("--result", help="the number that came out: 0, 00, CMC, 1-36")
    p.add_argument(
        "--table",
        metavar="FILE.toml|ID",
        help="with BETS.json: the table limits file (as --limits); with --db: the table's id",
    )
    p.add_argument(
        "--limits", metavar="FILE.toml", help="table limits (default: rmc/data/table.toml)"
    )
    p.add_argument("--json", action="store_true", help="one JSON object on standard output")
    g = p.add_argument_group("recorded spins")
    g.add_argument(
        "--bets",
        dest="jsonl",
        metavar="BETS.jsonl",
        help="bets, one JSON object a line, each with its 'spin' or 'at' ('-': standard input)",
    )
    g.add_argument("--trace", metavar="TRACE", help="the recording: a trace (rmc record)")
    g.add_argument("--db", metavar="URL", help="the recording: the table service's database")
    g.add_argument("--key-file", metavar="FILE", help="the table's HMAC key (hex) to verify tags")
    g.add_argument(
        "--since", metavar="T", help="the frames received from T (ISO 8601 or epoch seconds)"
    )
    g.add_argument("--until", metavar="T", help="the frames received before T")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.jsonl is not None or args.trace is not None or args.db is not None:
        return run_recorded(args)
    for flag in ("key_file", "since", "until"):
        if getattr(args, flag) is not None:
            return _usage(f"--{flag.replace('_', '-')} goes with --trace or --db")
    if args.bets is None or args.result is None:
        return _usage(
            "give BETS.json and --result N, or --bets BETS.jsonl with --trace TRACE or "
            "--db URL --table ID"
        )
    if args.table is not None and args.limits is not None:
        return _usage("--table and --limits both name the limits file: give one")
    try:
        result_index(args.result)
        table = Table.load(args.limits or args.table)
        text = sys.stdin.read() if args.bets == "-" else infile.read_text(args.bets)
    except (ResultError, TableError) as e:
        print(f"rmc settle: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        print(f"rmc settle: cannot read {args.bets}: {e.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UnicodeDecodeError:
        print(f"rmc settle: {args.bets} is not UTF-8 text", file=sys.stderr)
        return EXIT_BAD_INPUT
    # A bar on stderr for a long run (a terminal only): closed before anything is said there.
    with Steps() as steps:
        steps.step("reading the bets", len(text))
        try:
            bets = load_bets(text, table, steps.update)
        except BetsError as e:
            steps.close()
            for line in e.lines():
                print(f"rmc settle: {line}", file=sys.stderr)
            print("rmc settle: nothing settled", file=sys.stderr)
            return EXIT_BAD_INPUT
        del text  # the bets are read: the file's text is no longer needed (issue 20)
        if args.json:
            # written as it is made, payment by payment (issue 20): the same text as
            # json.dump(settle(bets, result).to_json(), indent=2) would write
            book = Book(bets)
            steps.step("writing the statement", len(bets))
            book.write_json(args.result, sys.stdout.write, steps.update)
            return 0
        steps.step("settling", 1)
        statement = settle(bets, args.result)
    print_statement(statement, table, out_console())
    return 0


def _usage(message: str) -> int:
    print(f"rmc settle: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def print_statement(
    statement: Statement,
    table: Table,
    console: Console,
    labels: Sequence[int] | None = None,
    heading: str | None = None,
) -> None:
    """The readable statement: the call of the result, then each payment as announced.
    Players' names are the bet file's text: printed as Text, never read as markup.
    `labels` names each bet by its number in its file (default: its index, column "bet");
    `heading` replaces the call of the result above the payments."""
    cur = f" {table.currency}" if table.currency else ""
    console.print(Text(heading or f"Résultat : {statement.announcement}", style="bold"))
    grid = RichTable(header_style="bold", box=None, pad_edge=False)
    grid.add_column("player")
    grid.add_column("bet" if labels is None else "line", justify="right")
    grid.add_column("announcement / bet", no_wrap=True)
    grid.add_column("paid", justify="right")
    for p in statement.payments:
        chips = ""
        if p.bet.chip != "couleur":
            chips = f" ({p.bet.chip}{', par exception' if p.bet.exception else ''})"
        if p.announcement:
            style = "green" if p.paid > p.bet.stake else "yellow"
            detail = Text.assemble((p.announcement, style), chips)
        else:
            detail = Text(f"{p.bet.position.name}, {fmt(p.bet.stake)}{chips} : perdu", style="dim")
        label = p.bet_index if labels is None else labels[p.bet_index]
        grid.add_row(Text(p.player), Text(str(label)), detail, Text(fmt(p.paid)))
    console.print(grid)
    console.print(
        f"staked {fmt(statement.staked)}{cur}   paid {fmt(statement.paid)}{cur}   "
        f"house {fmt(statement.house)}{cur}"
    )


class _Usage(Exception):
    """Bad input for `rmc settle`: the one-line reason, exit 2."""


def run_recorded(args: argparse.Namespace) -> int:
    """`rmc settle --trace TRACE | --db URL --table ID --bets BETS.jsonl`: the recorded
    spins settled with the bets of BETS.jsonl (rmc.settle_recorded)."""
    from rmc.settle_recorded import Placer, write_json

    try:
        _check_recorded_options(args)
        key, table, since, until = _recorded_inputs(args)
    except _Usage as e:
        return _usage(str(e))
    with Steps() as steps:
        try:
            rec, source = _recording(args, key, since, until)
            placer = Placer(rec, table)
            _place_bets(args, placer, table, steps)
        except _Usage as e:
            return _usage(str(e))
        outcome = placer.finish()
        if args.json:
            steps.step("writing the statement", outcome.bets)
            write_json(outcome, source, sys.stdout.write, steps.update)
            return 0
    print_recorded(outcome, table, out_console())
    return 0


def _check_recorded_options(args: argparse.Namespace) -> None:
    """_Usage unless the options name one recording and a bets file, and nothing else."""
    if args.bets is not None or args.result is not None:
        raise _Usage(
            "BETS.json and --result settle one result; recorded spins take --bets BETS.jsonl"
        )
    if args.jsonl is None:
        raise _Usage("--bets BETS.jsonl: give the bets to settle on the recorded spins")
    if (args.trace is None) == (args.db is None):
        raise _Usage("give the recording: --trace TRACE, or --db URL --table ID")
    if args.db is not None and args.table is None:
        raise _Usage("--db needs --table ID: the table whose spins to settle")
    if args.trace is not None and args.table is not None:
        raise _Usage(
            "--table ID goes with --db (a trace names its table); the limits file is --limits"
        )


def _recorded_inputs(
    args: argparse.Namespace,
) -> tuple[bytes | None, Table, int | None, int | None]:
    """(the HMAC key, the table's limits, --since and --until in µs), or _Usage."""
    from rmc.keys import read_key
    from rmc.timestamps import parse_instant

    try:
        key = read_key(args.key_file)
        table = Table.load(args.limits)
        since = None if args.since is None else parse_instant(args.since, "--since")
        until = None if args.until is None else parse_instant(args.until, "--until")
    except ValueError as e:  # a bad key file, table file (TableError) or time (InstantError)
        raise _Usage(str(e)) from None
    if since is not None and until is not None and since >= until:
        raise _Usage("--since must come before --until")
    return key, table, since, until


def _recording(
    args: argparse.Namespace, key: bytes | None, since: int | None, until: int | None
) -> tuple[Any, dict[str, Any]]:
    """The recording of the trace or of the database, and the statement's "source"."""
    from rmc.served_db import shown_url
    from rmc.settle_recorded import SourceError, from_db, from_trace

    try:
        if args.trace is not None:
            where = args.trace
            try:
                data = infile.read_bytes(args.trace)
            except OSError as e:
                raise SourceError(f"cannot read it: {e.strerror or e}") from None
            rec = from_trace(data, key, since, until)
            del data
            return rec, {"trace": args.trace}
        where = shown_url(args.db)
        rec = from_db(args.db, args.table, key, since, until)
        return rec, {"db": where, "table": args.table}
    except SourceError as e:
        raise _Usage(f"{where}: {e}") from None


def _place_bets(args: argparse.Namespace, placer: Any, table: Table, steps: Steps) -> None:
    """Every bet of BETS.jsonl placed on its recorded spin, read a line at a time; _Usage
    for a file that cannot be read or a line that is no bet."""
    from rmc.settle_recorded import BetLineError, read_bets

    name = "standard input" if args.jsonl == "-" else args.jsonl
    try:
        stream = sys.stdin.buffer if args.jsonl == "-" else open(args.jsonl, "rb")
    except OSError as e:
        raise _Usage(f"cannot read {name}: {e.strerror or e}") from None
    with stream:
        try:
            size = os.fstat(stream.fileno()).st_size
        except (OSError, ValueError):
            size = 0
        steps.step("reading the bets", size or None)
        try:
            for n, bet, spin, at in read_bets(stream, table, steps.update):
                placer.place(n, bet, spin, at)
        except BetLineError as e:
            steps.close()
            raise _Usage(f"{name} {e}") from None
        except OSError as e:
            steps.close()
            raise _Usage(f"cannot read {name}: {e.strerror or e}") from None


def print_recorded(outcome: Outcome, table: Table, console: Console) -> None:
    """The readable statements of recorded spins: one per spin settled, then the bets
    refused and those left unsettled, with why, then the totals."""
    from rmc.settle_recorded import Totals, recording_json, statements

    cur = f" {table.currency}" if table.currency else ""
    rec = recording_json(outcome.recording)
    console.print(
        Text(
            f"table {rec['table']}: {rec['spins']} spins recorded, {rec['results']} results, "
            f"{rec['rejected']} rejected, {rec['voids']} voids"
        )
    )
    for note in rec["notes"]:
        console.print(Text(note, style="yellow"))
    totals = Totals()
    for g, book, _, _ in statements(outcome, totals):
        s = g.spin
        statement = book.settle(s.result)
        heading = f"Spin {s.number} — {statement.announcement}"
        if g.carried_from:
            heading += f" (with the bets of voided spin {', '.join(map(str, g.carried_from))})"
        console.print()
        print_statement(statement, table, console, list(g.lines), heading)
    for title, items in (("refused", outcome.refused), ("unsettled", outcome.unsettled)):
        if not items:
            continue
        console.print()
        console.print(Text(f"{title} ({len(items)})", style="bold yellow"))
        grid = RichTable(header_style="bold", box=None, pad_edge=False)
        for column in ("line", "spin", "player", "bet", "why"):
            grid.add_column(column, justify="right" if column in ("line", "spin") else "left")
        for x in items:
            grid.add_row(
                Text(str(x.line)),
                Text("" if x.spin is None else str(x.spin)),
                Text(x.bet.player),
                Text(f"{x.bet.position.name}, {fmt(x.bet.stake)}"),
                Text(x.reason),
            )
        console.print(grid)
    t = totals.to_json(outcome)
    console.print()
    console.print(
        f"bets {t['bets']}: settled {t['settled']}, refused {t['refused']}, unsettled "
        f"{t['unsettled']}   staked {t['staked']}{cur}   paid {t['paid']}{cur}   "
        f"house {t['house']}{cur}"
    )
