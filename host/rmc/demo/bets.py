"""Sample bets for the demo: a few players at the table, each with a style of play.

Decree 1-3 and 1-6, as DESIGN.md reads them: each player plays colour chips whose value the
chef de table shows with a marker (a stake in colour chips is a whole number of chips); value
chips and plaques are taken on the chances simples; on a multiple chance only by exception,
when the exchange for colour chips could not be made before « rien ne va plus » — the demo
places one such plaque in the session, recorded as an exception.

Bets are generated as BETS.json objects (what `rmc settle` reads and what a trace's `bet`
records carry) and parsed by the settlement engine's own `parse_bets`, so a generated bet the
engine would refuse is an error here, not a silent skip.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from rmc.bets import PLAQUE, VALEUR, Bet, parse_bets
from rmc.layout import (
    CARRE,
    CHEVAL,
    COLONNE,
    DOUZAINE,
    PLEIN,
    SIMPLES,
    SIXAIN,
    TRANSVERSALE,
    positions_of,
)
from rmc.limits import Table


@dataclass(frozen=True)
class Player:
    name: str
    marker: Decimal | None  # colour-chip value; None: plays value chips and plaques only
    kinds: tuple[str, ...]  # the combinations this player likes
    max_chips: int = 4  # colour chips per bet at most


# Four players: three with colour chips (markers 2, 5, 10), one with value chips only.
PLAYERS: tuple[Player, ...] = (
    Player("Alice", Decimal(5), (PLEIN, CHEVAL, CARRE, "rouge", "noir")),
    Player("Bruno", Decimal(10), (DOUZAINE, COLONNE, SIXAIN, TRANSVERSALE)),
    Player("Chloé", Decimal(2), (PLEIN, PLEIN, CHEVAL, TRANSVERSALE), max_chips=10),
    Player("Dmitri", None, SIMPLES),
)
VALUE_CHIPS = (Decimal(5), Decimal(10), Decimal(20), Decimal(50), Decimal(100))
PLAQUE_VALUE = Decimal(500)


class DemoBetsError(ValueError):
    """Generated bets the settlement engine refuses (a bug of the generator)."""


def markers(players: tuple[Player, ...] = PLAYERS) -> dict[str, str]:
    """BETS.json `markers`: each colour-chip player's chip value."""
    return {p.name: format(p.marker, "f") for p in players if p.marker is not None}


def _numbered(rng: random.Random, kind: str) -> dict[str, Any]:
    pos = rng.choice(positions_of(kind))
    if pos.index is not None:
        return {"type": kind, "index": pos.index}
    if kind in SIMPLES:
        return {"type": kind}
    return {"type": kind, "numbers": list(pos.numbers)}


def _colour_stake(rng: random.Random, p: Player, kind: str, table: Table) -> Decimal:
    """A whole number of the player's chips within the table's limits for `kind`."""
    assert p.marker is not None
    lim = table.limits[kind]
    lo = max(1, int((lim.min / p.marker).to_integral_value(rounding=ROUND_CEILING)))
    hi = max(lo, min(p.max_chips, int(lim.max // p.marker)))
    return p.marker * rng.randint(lo, hi)


def round_bets(
    seed: int,
    round_no: int,
    table: Table,
    players: tuple[Player, ...] = PLAYERS,
    plaque_round: int | None = 2,
) -> list[dict[str, Any]]:
    """The bets of one betting window, as BETS.json bet objects (deterministic).

    `round_no` counts betting windows from 0; on `plaque_round` one player puts a plaque on
    a multiple chance by exception (decree 1-6)."""
    if round_no < 0:
        raise ValueError(f"round_no must be >= 0, not {round_no}")
    rng = random.Random(f"rmc-demo:{seed}:{round_no}")
    out: list[dict[str, Any]] = []
    for p in players:
        if rng.random() < 0.2:
            continue  # sits this one out
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(p.kinds)
            bet: dict[str, Any] = {"player": p.name, **_numbered(rng, kind)}
            if p.marker is None:
                # value chips on the chances simples (accepted there without exception)
                lim = table.limits[kind]
                stake = rng.choice([v for v in VALUE_CHIPS if lim.min <= v <= lim.max])
                bet["chip"] = VALEUR
            else:
                stake = _colour_stake(rng, p, kind, table)
            bet["stake"] = format(stake, "f")
            out.append(bet)
    if plaque_round is not None and round_no == plaque_round:
        # The exchange for colour chips could not be made in time: a plaque on a douzaine.
        out.append(
            {
                "player": players[-1].name,
                "type": DOUZAINE,
                "index": rng.randint(1, 3),
                "stake": format(PLAQUE_VALUE, "f"),
                "chip": PLAQUE,
                "exception": True,
            }
        )
    return out


def parse_round(
    raw: list[dict[str, Any]], table: Table, players: tuple[Player, ...] = PLAYERS
) -> list[Bet]:
    """The engine's reading of a round's bets (markers checked); DemoBetsError if refused."""
    try:
        return parse_bets({"markers": markers(players), "bets": raw}, table)
    except ValueError as e:
        raise DemoBetsError(f"generated bets refused by the settlement engine: {e}") from None
