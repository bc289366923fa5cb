"""Settlement throughput: a table of 500 mixed bets settled against all 39 results, one core.

Three figures: the settlement core (each bet's outcome and the amount it returns, plus the
totals), the full statement (paying order and French announcements, what `rmc settle` prints),
and the cost of preparing the book (validation excluded: the bets are already parsed).

Then a very large file (issue 20): `rmc settle --json` on a BETS.json of LARGE_BETS bets
(about 70 MB), run as a process, its wall time and peak memory (the process's maximum
resident set). The goal is well under 30 s and 500 MB. RMC_BENCH_LARGE_BETS=N changes the
count (0: skip).
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rmc import layout
from rmc.bets import Bet, bet_to_json
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
    large()


LARGE_BETS = int(os.environ.get("RMC_BENCH_LARGE_BETS", "800000"))


def write_large(path: Path, count: int, seed: int = 20) -> None:
    """`count` bets of 5,000 players, every position, stakes of 5 to 25: one line each."""
    rng = random.Random(seed)
    positions = layout.all_positions()
    stakes = [Decimal(x) for x in ("5", "10", "20", "25", "12.50", "7.50")]
    with path.open("w", encoding="utf-8") as f:
        f.write('{"bets": [\n')
        for i in range(count):
            bet = Bet(f"Player {rng.randrange(5000)}", rng.choice(positions), rng.choice(stakes))
            f.write(("," if i else "") + json.dumps(bet_to_json(bet), ensure_ascii=False) + "\n")
        f.write("]}\n")


def large() -> None:
    if LARGE_BETS <= 0:
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bets.json"
        write_large(path, LARGE_BETS)
        size = path.stat().st_size
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "rmc", "settle", "--result", "17", "--json", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        took = time.perf_counter() - start
    if run.returncode != 0:
        Console(stderr=True).print(f"rmc settle failed: {run.stderr[-500:]}", markup=False)
        sys.exit(1)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB on Linux
    table = Table(title=f"rmc settle --json on {LARGE_BETS:,} bets ({size / 1e6:.0f} MB)")
    for col in ("wall time", "peak memory"):
        table.add_column(col, justify="right")
    table.add_row(f"{took:.1f} s", f"{peak_mb:,.0f} MB")
    Console().print(table)


if __name__ == "__main__":
    main()
