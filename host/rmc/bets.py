"""Bets as placed on the tapis, read from BETS.json and checked against the decree and the table.

A bet names a player, a combination (`type`), where it lies (`numbers` or `index`), a stake,
and the chips it is made of (decree 1-3, 1-6):
- `couleur`: the player's own colour chips, whose value the player chose within the table's
  limits and the chef de table shows with a marker (optional `markers` in BETS.json: a stake in
  colour chips must then be a whole number of chips);
- `valeur`: value chips, and `plaque`: plaques. Both are accepted on the chances simples; on a
  multiple chance only by exception — the exchange for colour chips could not be made before
  "rien ne va plus" — which the bet must say (`"exception": true`) and the statement records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from rmc.layout import MULTIPLES, NUMBERED, LayoutError, Position, position
from rmc.limits import Table
from rmc.money import MoneyError, is_multiple, parse_amount

COULEUR = "couleur"
VALEUR = "valeur"
PLAQUE = "plaque"
CHIPS = (COULEUR, VALEUR, PLAQUE)

_FIELDS = {"player", "type", "numbers", "index", "stake", "chip", "exception"}


@dataclass(frozen=True, slots=True)
class Bet:
    player: str
    position: Position
    stake: Decimal
    chip: str = COULEUR
    exception: bool = False  # value chips or plaques on a multiple chance, by exception (1-6)

    @property
    def type(self) -> str:
        return self.position.type


class BetsError(ValueError):
    """Bets that cannot be settled; `problems` lists (bet index or None, reason)."""

    def __init__(self, problems: list[tuple[int | None, str]]):
        self.problems = problems
        super().__init__("; ".join(_describe(i, r) for i, r in problems))

    def lines(self) -> list[str]:
        return [_describe(i, r) for i, r in self.problems]


def _describe(index: int | None, reason: str) -> str:
    return reason if index is None else f"bet {index}: {reason}"


def parse_bet(raw: object, table: Table, markers: dict[str, Decimal] | None = None) -> Bet:
    """One bet from its JSON object, or ValueError with the reason."""
    if not isinstance(raw, dict):
        raise ValueError(f"a bet is a JSON object, not {type(raw).__name__}")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    player = raw.get("player")
    if not isinstance(player, str) or not player.strip():
        raise ValueError("'player' must be a non-empty string")
    kind = raw.get("type")
    if not isinstance(kind, str):
        raise ValueError("'type' is missing or not a string")
    try:
        pos = position(kind, raw.get("numbers"), raw.get("index"))
    except LayoutError as e:
        raise ValueError(str(e)) from None
    if "stake" not in raw:
        raise ValueError("'stake' is missing")
    try:
        stake = parse_amount(raw["stake"], "stake")
    except MoneyError as e:
        raise ValueError(str(e)) from None
    chip = raw.get("chip", COULEUR)
    if chip not in CHIPS:
        raise ValueError(f"unknown chip {chip!r} (one of {', '.join(CHIPS)})")
    exception = raw.get("exception", False)
    if not isinstance(exception, bool):
        raise ValueError("'exception' must be true or false")
    limit = table.limits[kind]
    if stake < limit.min:
        raise ValueError(f"stake {stake} is below the table minimum {limit.min} for a {kind}")
    if stake > limit.max:
        raise ValueError(f"stake {stake} is above the table maximum {limit.max} for a {kind}")
    if not is_multiple(stake, table.unit):
        raise ValueError(f"stake {stake} is not a whole multiple of the table's unit {table.unit}")
    if chip != COULEUR and kind in MULTIPLES and not exception:
        raise ValueError(
            f"a {chip} is refused on a multiple chance ({kind}) unless the bet is marked "
            '"exception": true (the exchange for colour chips could not be made before '
            '"rien ne va plus", decree 1-6)'
        )
    marker = (markers or {}).get(player)
    if chip == COULEUR and marker is not None and not is_multiple(stake, marker):
        raise ValueError(
            f"stake {stake} in colour chips is not a whole number of {player}'s chips "
            f"(marker {marker})"
        )
    # An exception is only recorded where one was needed: value chips on a multiple chance.
    return Bet(player, pos, stake, chip, exception and chip != COULEUR and kind in MULTIPLES)


def parse_markers(raw: object, table: Table) -> dict[str, Decimal]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BetsError([(None, "'markers' must map each player to a colour-chip value")])
    markers: dict[str, Decimal] = {}
    problems: list[tuple[int | None, str]] = []
    for player, value in raw.items():
        try:
            amount = parse_amount(value, f"marker of {player}")
        except MoneyError as e:
            problems.append((None, str(e)))
            continue
        if not table.marker.min <= amount <= table.marker.max:
            problems.append(
                (
                    None,
                    f"marker of {player} ({amount}) is outside the table's colour-chip limits "
                    f"{table.marker.min}-{table.marker.max}",
                )
            )
        markers[player] = amount
    if problems:
        raise BetsError(problems)
    return markers


def parse_bets(document: object, table: Table) -> list[Bet]:
    """Every bet of a BETS.json document, or BetsError listing every problem found."""
    if not isinstance(document, dict) or not isinstance(document.get("bets"), list):
        raise BetsError([(None, 'the document must be a JSON object {"bets": [...]}')])
    markers = parse_markers(document.get("markers"), table)
    bets: list[Bet] = []
    problems: list[tuple[int | None, str]] = []
    for i, raw in enumerate(document["bets"]):
        try:
            bets.append(parse_bet(raw, table, markers))
        except ValueError as e:
            problems.append((i, str(e)))
    if problems:
        raise BetsError(problems)
    return bets


def load_bets(text: str, table: Table) -> list[Bet]:
    """Parse BETS.json text. Numbers are read as exact decimals, never as floats."""
    try:
        document = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as e:
        raise BetsError([(None, f"not valid JSON: {e}")]) from None
    return parse_bets(document, table)


def bet_to_json(bet: Bet) -> dict:
    """The BETS.json form of a bet (the inverse of parse_bet)."""
    out: dict = {"player": bet.player, "type": bet.type}
    if bet.position.index is not None:
        out["index"] = bet.position.index
    elif bet.type in NUMBERED:
        out["numbers"] = list(bet.position.numbers)
    out["stake"] = format(bet.stake, "f")
    if bet.chip != COULEUR:
        out["chip"] = bet.chip
    if bet.exception:
        out["exception"] = True
    return out


def players_in_order(bets: Iterable[Bet]) -> list[str]:
    return list(dict.fromkeys(b.player for b in bets))
