"""`rmc settle`: settle a table's bets against a result (decree 1-4, 1-5, 1-6)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from rmc.bets import BetsError, load_bets
from rmc.console import out_console
from rmc.limits import Table, TableError
from rmc.money import fmt
from rmc.progress import Steps
from rmc.settle import Book, ResultError, Statement, result_index, settle

EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "settle",
        help="settle bets against a result, in the decree's paying order",
        description="Settle the bets of BETS.json against a result. Exit 2 on any bad input "
        "(nothing is settled then), with the bet's index and the reason on standard error.",
    )
    p.add_argument("bets", metavar="BETS.json", help="the bets ('-' for standard input)")
    p.add_argument("--result", required=True, help="the number that came out: 0, 00, CMC, 1-36")
    p.add_argument(
        "--table", metavar="FILE.toml", help="table limits (default: rmc/data/table.toml)"
    )
    p.add_argument("--json", action="store_true", help="one JSON object on standard output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        result_index(args.result)
        table = Table.load(args.table)
        text = sys.stdin.read() if args.bets == "-" else Path(args.bets).read_text("utf-8")
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


def print_statement(statement: Statement, table: Table, console: Console) -> None:
    """The readable statement: the call of the result, then each payment as announced.
    Players' names are the bet file's text: printed as Text, never read as markup."""
    cur = f" {table.currency}" if table.currency else ""
    console.print(Text(f"Résultat : {statement.announcement}", style="bold"))
    grid = RichTable(header_style="bold", box=None, pad_edge=False)
    grid.add_column("player")
    grid.add_column("bet", justify="right")
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
        grid.add_row(Text(p.player), Text(str(p.bet_index)), detail, Text(fmt(p.paid)))
    console.print(grid)
    console.print(
        f"staked {fmt(statement.staked)}{cur}   paid {fmt(statement.paid)}{cur}   "
        f"house {fmt(statement.house)}{cur}"
    )
