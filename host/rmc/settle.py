"""Settlement: who is paid what for a result, in the order and the words of decree 1-4 and 1-5.

- A winner keeps its stake: it gets back stake × (payout + 1).
- On `0` the chances simples lose half (the partage): half the stake goes back.
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

from collections.abc import Sequence
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


def announce_payment(bet: Bet, outcome: int, winnings: Decimal, returned: Decimal) -> str | None:
    """The croupier's detail of one payment, e.g. "Plein du 17 : 35 fois 10, 350"."""
    name = bet.position.name
    if outcome == WIN:
        return f"{name} : {bet.position.payout} fois {fmt_fr(bet.stake)}, {fmt_fr(winnings)}"
    if outcome == HALF:
        return f"{name} : partage, la moitié de {fmt_fr(bet.stake)}, {fmt_fr(returned)}"
    return None


@dataclass(frozen=True, slots=True)
class Payment:
    bet_index: int  # position of the bet in the input
    bet: Bet
    outcome: int  # WIN, HALF or LOSE
    paid: Decimal  # what goes back to the player: stake + winnings, half the stake, or 0
    winnings: Decimal  # paid less the stake, for a win; 0 otherwise
    announcement: str | None

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

    def to_json(self) -> dict:
        return {
            "result": self.result,
            "announcement": self.announcement,
            "payments": [p.to_json() for p in self.payments],
            "totals": {
                "staked": fmt(self.staked),
                "paid": fmt(self.paid),
                "house": fmt(self.house),
            },
        }


class Book:
    """A table's bets, prepared to be settled against any result."""

    def __init__(self, bets: Sequence[Bet]):
        self.bets = list(bets)
        # amounts[i][outcome]: what bet i returns for that outcome. Exact: EXACT raises
        # rather than round, and stake x 36 or stake / 2 never need rounding at prec 60.
        self.amounts = [
            (
                _ZERO,
                EXACT.divide(b.stake, _TWO),
                EXACT.multiply(b.stake, Decimal(b.position.payout + 1)),
            )
            for b in self.bets
        ]
        self.outcomes = [b.position.outcomes for b in self.bets]
        self.staked = total(b.stake for b in self.bets)
        # Paying order does not depend on the result except for who wins: precompute the
        # sort key of every bet (player rank, decree rank, input order).
        rank = {p: i for i, p in enumerate(players_in_order(self.bets))}
        self._keys = [(rank[b.player], PAYING_RANK[b.type], i) for i, b in enumerate(self.bets)]

    def outcome_codes(self, index: int) -> list[int]:
        """The outcome of every bet for the result of that index (numbers.INDEX)."""
        return [o[index] for o in self.outcomes]

    def paid_amounts(self, index: int) -> list[Decimal]:
        """What goes back to each bet's player for the result of that index."""
        return [a[o[index]] for a, o in zip(self.amounts, self.outcomes, strict=True)]

    def settle(self, result: str) -> Statement:
        index = result_index(result)
        codes = self.outcome_codes(index)
        order = sorted(
            range(len(self.bets)),
            # Per player: winners (and partages) in decree order, then the losing bets.
            key=lambda i: (self._keys[i][0], codes[i] == LOSE, self._keys[i][1], i),
        )
        payments = []
        for i in order:
            bet, code = self.bets[i], codes[i]
            paid = self.amounts[i][code]
            winnings = EXACT.subtract(paid, bet.stake) if code == WIN else _ZERO
            payments.append(
                Payment(i, bet, code, paid, winnings, announce_payment(bet, code, winnings, paid))
            )
        return Statement(
            result=result,
            announcement=announce_result(result),
            payments=payments,
            staked=self.staked,
            paid=total(p.paid for p in payments),
        )


def settle(bets: Sequence[Bet], result: str) -> Statement:
    """Settle bets against a result: every payment, in paying order, with its announcement."""
    result_index(result)
    return Book(bets).settle(result)
