"""Settlement: who is paid what for a result, in the order and the words of decree 1-4 and 1-5.

- A winner keeps its stake: it gets back stake × (payout + 1).
- On `0` the chances simples lose half (the partage): half the stake goes back, rounded to the
  table's unit as the table states (`Bet.partage`; what the rounding keeps is reported).
  On `00` and `CMC` they are lost.
- Payments go player by player (in order of first appearance), and for each player in the
  decree's order: colonne, passe, impair, noir, rouge, pair, manque, douzaine, transversale,
  rectangle (sixain), carré, chevaux, plein last. That player's losing bets follow, in
  the same order.

The work per bet is precomputed once (`Book`): each bet's three possible amounts (nothing,
half its stake, stake plus winnings) and its position's outcome per result. Settling a result
is then one look-up per bet, which is what lets a table of bets be settled against all 39
results in milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from rmc.bets import Bet, players_in_order
from rmc.layout import HALF, LOSE, PAYING_RANK, WIN
from rmc.money import EXACT, fmt, fmt_fr, total
from rmcfw import numbers

OUTCOME_NAMES = {WIN: "win", HALF: "half", LOSE: "lose"}
_ZERO = Decimal(0)
_TWO = Decimal(2)


class ResultError(ValueError):
    pass


def result_index(result: object) -> int:
    if not isinstance(result, str) or result not in numbers.INDEX:
        raise ResultError(f"unknown result {result!r}: one of 0, 00, CMC, 1-36")
    return numbers.INDEX[result]


def announce_result(result: str) -> str:
    """The croupier's call of a result with its chances simples (decree 1-4)."""
    result_index(result)
    if result == numbers.ZERO:
        return "Zéro"
    if result == numbers.DOUBLE_ZERO:
        return "Double zéro"
    if result == numbers.CMC:
        return "CMC"
    colour, parity, half = numbers.chances(result)
    return f"{result}, {colour}, {parity} et {half}"


def half_of(bet: Bet) -> Decimal:
    """The exact half of a bet's stake, before the table's rounding."""
    return EXACT.divide(bet.stake, _TWO)


def announce_payment(bet: Bet, outcome: int, winnings: Decimal, returned: Decimal) -> str | None:
    """The croupier's detail of one payment, e.g. "Plein du 17 : 35 fois 10, 350"."""
    name = bet.position.name
    if outcome == WIN:
        return f"{name} : {bet.position.payout} fois {fmt_fr(bet.stake)}, {fmt_fr(winnings)}"
    if outcome == HALF:
        half = half_of(bet)
        said = f"{name} : partage, la moitié de {fmt_fr(bet.stake)}, {fmt_fr(half)}"
        if returned == half or bet.partage is None:
            return said
        kept = EXACT.subtract(half, returned)
        return (
            f"{said}, arrondie à {fmt_fr(returned)} (unité {fmt_fr(bet.partage.unit)}) ; "
            f"l'arrondi garde {fmt_fr(kept)}"
        )
    return None


@dataclass(frozen=True, slots=True)
class Payment:
    bet_index: int  # position of the bet in the input
    bet: Bet
    outcome: int  # WIN, HALF or LOSE
    paid: Decimal  # what goes back to the player: stake + winnings, half the stake, or 0
    winnings: Decimal  # paid less the stake, for a win; 0 otherwise
    announcement: str | None
    # A partage: the exact half less what was given back, kept by the table's rounding to its
    # unit (negative when the table rounds up). 0 for every other outcome.
    kept: Decimal = _ZERO

    @property
    def player(self) -> str:
        return self.bet.player

    def to_json(self) -> dict:
        pos = self.bet.position
        out = {
            "player": self.bet.player,
            "bet_index": self.bet_index,
            "type": pos.type,
            "numbers": list(pos.numbers),
            "stake": fmt(self.bet.stake),
            "chip": self.bet.chip,
            "exception": self.bet.exception,
            "outcome": OUTCOME_NAMES[self.outcome],
            "paid": fmt(self.paid),
            "winnings": fmt(self.winnings),
            "announcement": self.announcement,
        }
        if pos.index is not None:
            out["index"] = pos.index
        if self.outcome == HALF:
            rule = self.bet.partage
            out["partage"] = {
                "half": fmt(half_of(self.bet)),
                "given_back": fmt(self.paid),
                "kept": fmt(self.kept),
                "unit": fmt(rule.unit) if rule else None,
                "rounding": rule.rounding if rule else "exact",
            }
        return out


@dataclass(frozen=True, slots=True)
class Statement:
    result: str
    announcement: str
    payments: list[Payment]  # in paying order
    staked: Decimal
    paid: Decimal

    @property
    def house(self) -> Decimal:
        return EXACT.subtract(self.staked, self.paid)

    @property
    def partage_kept(self) -> Decimal:
        """What the rounding of partages kept for the table (part of `house`)."""
        return total(p.kept for p in self.payments)

    def to_json(self) -> dict:
        return {
            "result": self.result,
            "announcement": self.announcement,
            "payments": [p.to_json() for p in self.payments],
            "totals": {
                "staked": fmt(self.staked),
                "paid": fmt(self.paid),
                "house": fmt(self.house),
                "partage_kept": fmt(self.partage_kept),
            },
        }


class Book:
    """A table's bets, prepared to be settled against any result.

    Lean for very large tables (issue 20): what a bet returns is computed once per stake,
    payout and partage rule and shared, and the paying order is one sort of integers."""

    def __init__(self, bets: Sequence[Bet]):
        self.bets = list(bets)
        # amounts[i][outcome]: what bet i returns for that outcome. Exact: EXACT raises
        # rather than round, and stake x 36 or stake / 2 never need rounding at prec 60. The
        # partage alone is rounded, to the table's unit, by the rule the bet carries.
        shared: dict[tuple, tuple[Decimal, Decimal, Decimal]] = {}
        amounts = []
        for b in self.bets:
            # the stake's spelling is part of the key: Decimal("10") == Decimal("10.0")
            rule = b.partage
            key = (str(b.stake), b.position.payout, rule and (str(rule.unit), rule.rounding))
            got = shared.get(key)
            if got is None:
                got = shared[key] = (
                    _ZERO,
                    rule.give_back(b.stake) if rule else EXACT.divide(b.stake, _TWO),
                    EXACT.multiply(b.stake, Decimal(b.position.payout + 1)),
                )
            amounts.append(got)
        self.amounts = amounts
        self.outcomes = [b.position.outcomes for b in self.bets]
        self.staked = total(b.stake for b in self.bets)
        # Paying order does not depend on the result except for who wins: precompute each
        # bet's player rank and decree rank; settle() sorts on one integer per bet.
        rank = {p: i for i, p in enumerate(players_in_order(self.bets))}
        self._player_rank = [rank[b.player] for b in self.bets]
        self._decree_rank = [PAYING_RANK[b.type] for b in self.bets]

    def outcome_codes(self, index: int) -> list[int]:
        """The outcome of every bet for the result of that index (numbers.INDEX)."""
        return [o[index] for o in self.outcomes]

    def paid_amounts(self, index: int) -> list[Decimal]:
        """What goes back to each bet's player for the result of that index."""
        return [a[o[index]] for a, o in zip(self.amounts, self.outcomes, strict=True)]

    def paying_order(self, codes: list[int]) -> list[int]:
        """The bets' indices in paying order: per player, winners (and partages) in decree
        order, then the losing bets; input order last. One integer key per bet, built from
        (player rank, lost, decree rank, index), is far quicker to sort than tuples."""
        n = len(self.bets)
        ranks = len(PAYING_RANK)
        keys = [
            ((p * 2 + (c == LOSE)) * ranks + d) * n + i
            for i, (p, c, d) in enumerate(
                zip(self._player_rank, codes, self._decree_rank, strict=True)
            )
        ]
        keys.sort()
        return [k % n for k in keys] if n else []

    def settle(self, result: str) -> Statement:
        index = result_index(result)
        codes = self.outcome_codes(index)
        payments = []
        for i in self.paying_order(codes):
            bet, code = self.bets[i], codes[i]
            paid = self.amounts[i][code]
            winnings = EXACT.subtract(paid, bet.stake) if code == WIN else _ZERO
            kept = EXACT.subtract(half_of(bet), paid) if code == HALF else _ZERO
            said = announce_payment(bet, code, winnings, paid)
            payments.append(Payment(i, bet, code, paid, winnings, said, kept))
        return Statement(
            result=result,
            announcement=announce_result(result),
            payments=payments,
            staked=self.staked,
            paid=total(p.paid for p in payments),
        )

    def write_json(
        self,
        result: str,
        write: Callable[[str], object],
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """The statement's JSON, as json.dump(self.settle(result).to_json(), indent=2,
        ensure_ascii=False) writes it, character for character, written piece by piece:
        no Payment and no dict is built per bet, and a payment's text after its player and
        index is made once for all the bets alike (issue 20). `progress` is told how many
        payments are written, now and then."""
        codes = self.outcome_codes(result_index(result))
        order = self.paying_order(codes)
        write(
            "{\n"
            f'  "result": {_json_text(result)},\n'
            f'  "announcement": {_json_text(announce_result(result))},\n'
        )
        write('  "payments": [\n' if order else '  "payments": [],\n')
        paid, kept = self._write_payments(codes, order, write, progress)
        write(f'  "totals": {self._totals_text(paid, kept)}\n}}\n')
        if progress is not None:
            progress(len(order))

    def _write_payments(
        self,
        codes: list[int],
        order: list[int],
        write: Callable[[str], object],
        progress: Callable[[int], None] | None,
    ) -> tuple[Decimal, Decimal]:
        """The payments' array items in paying order, _CHUNK at a time, and its closing
        bracket; returns the total paid and the total the partages' rounding kept."""
        players: dict[str, str] = {}
        bodies: dict[tuple, str] = {}
        paid_total = kept_total = _ZERO
        chunk: list[str] = []
        for n, i in enumerate(order):
            bet, code = self.bets[i], codes[i]
            paid = self.amounts[i][code]
            key = payment_key(bet, code)
            body = bodies.get(key)
            if body is None:
                body = bodies[key] = _payment_body(bet, code, paid)
            paid_total = EXACT.add(paid_total, paid)
            if code == HALF:
                kept_total = EXACT.add(kept_total, EXACT.subtract(half_of(bet), paid))
            name = players.get(bet.player)
            if name is None:
                name = players[bet.player] = _json_text(bet.player)
            chunk.append(
                f'{_BETWEEN if n else ""}    {{\n      "player": {name},\n'
                f'      "bet_index": {i},\n{body}\n    }}'
            )
            if len(chunk) == _CHUNK:
                write("".join(chunk))
                chunk = []
                if progress is not None:
                    progress(n + 1)
        if order:
            write("".join(chunk) + "\n  ],\n")
        return paid_total, kept_total

    def _totals_text(self, paid: Decimal, kept: Decimal) -> str:
        """The statement's "totals" object, indented as its place in the statement wants."""
        totals = {
            "staked": fmt(self.staked),
            "paid": fmt(paid),
            "house": fmt(EXACT.subtract(self.staked, paid)),
            "partage_kept": fmt(kept),
        }
        return json.dumps(totals, ensure_ascii=False, indent=2).replace("\n", "\n  ")


_CHUNK = 2000  # payments written at once
_BETWEEN = ",\n"  # between two payments


def payment_key(bet: Bet, code: int) -> tuple:
    """All that a payment's text after its player and index depends on (the amounts follow
    from the stake, the payout and the rule): bets alike share one text."""
    rule = bet.partage
    return (
        bet.position,
        str(bet.stake),
        bet.chip,
        bet.exception,
        rule and (str(rule.unit), rule.rounding),
        code,
    )


def _json_text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _payment_body(bet: Bet, code: int, paid: Decimal) -> str:
    """A payment's JSON lines after "player" and "bet_index", indented as in the statement
    (three levels: 6 spaces), without the braces; json.dumps makes them, so that they are
    what json.dump writes for the whole statement."""
    winnings = EXACT.subtract(paid, bet.stake) if code == WIN else _ZERO
    kept = EXACT.subtract(half_of(bet), paid) if code == HALF else _ZERO
    said = announce_payment(bet, code, winnings, paid)
    whole = Payment(0, bet, code, paid, winnings, said, kept).to_json()
    del whole["player"], whole["bet_index"]
    lines = json.dumps(whole, ensure_ascii=False, indent=2).split("\n")[1:-1]
    return "\n".join("    " + line for line in lines)


def settle(bets: Sequence[Bet], result: str) -> Statement:
    """Settle bets against a result: every payment, in paying order, with its announcement."""
    result_index(result)
    return Book(bets).settle(result)
