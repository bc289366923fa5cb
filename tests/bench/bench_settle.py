"""Settlement throughput: a table of 500 mixed bets settled against all 39 results, one core.

Three figures: the settlement core (each bet's outcome and the amount it returns, plus the
totals), the full statement (paying order and French announcements, what `rmc settle` prints),
and the cost of preparing the book (validation excluded: the bets are already parsed).
"""

from __future__ import annotations

import random
import time
from decimal import Decimal

from rich.console import Console
from rich.table import Table

from rmc import layout
from rmc.bets import Bet
from rmc.money import total
from rmc.settle import Book
from rmcfw import numbers

BETS = 500
PLAYERS = 12


def make_bets(seed: int = 2019) -> list[Bet]:
    rng = random.Random(seed)
    positions = layout.all_positions()
    out = []
    for _ in range(BETS):
        pos = rng.choice(positions)
        stake = Decimal(rng.randrange(500, 15000)).scaleb(-2)
        out.append(Bet(f"P{rng.randrange(PLAYERS)}", pos, stake))
    return out


def best_of(runs: int, func) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    bets = make_bets()
    book = Book(bets)
    indexes = range(numbers.COUNT)

    def core() -> None:
        for i in indexes:
            total(book.paid_amounts(i))

    def full() -> None:
        for label in numbers.NUMBERS:
            book.settle(label)

    settled = BETS * numbers.COUNT
    t_core = best_of(20, core)
    t_full = best_of(5, full)
    t_book = best_of(20, lambda: Book(bets))

    table = Table(title=f"settlement: {BETS} mixed bets x {numbers.COUNT} results, one core")
    table.add_column("what")
    table.add_column("time", justify="right")
    table.add_column("bets settled / s", justify="right")
    table.add_row(
        "core (outcome, amount, totals)", f"{t_core * 1e3:.2f} ms", f"{settled / t_core:,.0f}"
    )
    table.add_row(
        "full statement (order, announcements)",
        f"{t_full * 1e3:.2f} ms",
        f"{settled / t_full:,.0f}",
    )
    table.add_row("book preparation (once per table)", f"{t_book * 1e3:.2f} ms", "")
    Console().print(table)


if __name__ == "__main__":
    main()
