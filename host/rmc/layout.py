"""The tapis (betting layout) of the Roulette Monte-Carlo, and every legal position on it.

The decree (1-5) lists the combinations; DESIGN.md records our reading of the tapis: 1-36 on
12 rows of 3 with a green row `0`, `00`, `CMC` above 1, 2, 3. Every multiple chance is then a
geometric shape on that 13 x 3 grid (`rmcfw.numbers.GRID`, shared with the firmware):

- plein: one cell;  cheval: two cells side by side or one above the other;
- transversale (pleine): one row of three;  carré: a 2 x 2 block;
- sixain (transversale simple, the decree's "rectangle"): two adjacent rows;
- douzaine: 1-12, 13-24, 25-36;  colonne: one column of 1-36.

The chances simples (rouge/noir, pair/impair, manque/passe) cover 18 numbers each.

Positions are enumerated once; for each one the module precomputes what it returns on each of
the 39 results, so settling a bet is a table look-up, not a membership test.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmcfw import numbers

# Combination types, as named in BETS.json.
PLEIN = "plein"
CHEVAL = "cheval"
TRANSVERSALE = "transversale"
CARRE = "carre"
SIXAIN = "sixain"
DOUZAINE = "douzaine"
COLONNE = "colonne"
ROUGE = "rouge"
NOIR = "noir"
PAIR = "pair"
IMPAIR = "impair"
MANQUE = "manque"
PASSE = "passe"

# Winnings per unit staked (decree 1-5); a winner also keeps its stake.
PAYOUT: dict[str, int] = {
    PLEIN: 35,
    CHEVAL: 17,
    TRANSVERSALE: 11,
    CARRE: 8,
    SIXAIN: 5,
    DOUZAINE: 2,
    COLONNE: 2,
    ROUGE: 1,
    NOIR: 1,
    PAIR: 1,
    IMPAIR: 1,
    MANQUE: 1,
    PASSE: 1,
}

NUMBERED = (PLEIN, CHEVAL, TRANSVERSALE, CARRE, SIXAIN)  # given by "numbers"
INDEXED = (DOUZAINE, COLONNE)  # given by "index" 1-3
SIMPLES = (ROUGE, NOIR, PAIR, IMPAIR, MANQUE, PASSE)  # chances simples: nothing more
MULTIPLES = NUMBERED + INDEXED  # chances multiples
TYPES = MULTIPLES + SIMPLES

# Decree 1-4: "colonne, passe, impair, noir, rouge, pair, manque, douzaine, transversale,
# rectangle, carré, chevaux et, en dernier lieu, le numéro plein". Rectangle = sixain.
PAYING_ORDER = (
    COLONNE,
    PASSE,
    IMPAIR,
    NOIR,
    ROUGE,
    PAIR,
    MANQUE,
    DOUZAINE,
    TRANSVERSALE,
    SIXAIN,
    CARRE,
    CHEVAL,
    PLEIN,
)
PAYING_RANK = {t: i for i, t in enumerate(PAYING_ORDER)}

# Outcome codes of a position for one result.
LOSE = 0
HALF = 1  # partage: a simple chance when 0 comes out loses half, the other half goes back
WIN = 2

# How many cells each numbered combination covers.
_SIZE = {PLEIN: 1, CHEVAL: 2, TRANSVERSALE: 3, CARRE: 4, SIXAIN: 6}

_ORDINAL = ("première", "deuxième", "troisième")


class LayoutError(ValueError):
    """A set of numbers or an index that is no legal position of a combination."""


@dataclass(frozen=True, slots=True)
class Position:
    """One legal place to bet: a combination and the numbers it covers."""

    type: str
    numbers: tuple[str, ...]  # in tapis order (numbers.NUMBERS order)
    index: int | None  # 1-3 for douzaine and colonne
    name: str  # as the croupier says it, e.g. "Cheval 17-20", "Deuxième douzaine"
    outcomes: bytes  # outcomes[numbers.INDEX[result]] in (LOSE, HALF, WIN)

    @property
    def payout(self) -> int:
        return PAYOUT[self.type]

    @property
    def simple(self) -> bool:
        return self.type in SIMPLES


def _canonical(labels) -> tuple[str, ...]:
    return tuple(sorted(labels, key=numbers.INDEX.__getitem__))


def _cells() -> dict[str, tuple[int, int]]:
    return {label: (r, c) for r, row in enumerate(numbers.GRID) for c, label in enumerate(row)}


def _numbered_shapes() -> dict[str, list[tuple[str, ...]]]:
    grid = numbers.GRID
    rows, cols = len(grid), len(grid[0])
    shapes: dict[str, list[tuple[str, ...]]] = {t: [] for t in NUMBERED}
    for r in range(rows):
        for c in range(cols):
            shapes[PLEIN].append((grid[r][c],))
            if c + 1 < cols:
                shapes[CHEVAL].append((grid[r][c], grid[r][c + 1]))
            if r + 1 < rows:
                shapes[CHEVAL].append((grid[r][c], grid[r + 1][c]))
            if r + 1 < rows and c + 1 < cols:
                block = (grid[r][c], grid[r][c + 1], grid[r + 1][c], grid[r + 1][c + 1])
                shapes[CARRE].append(block)
        shapes[TRANSVERSALE].append(tuple(grid[r]))
        if r + 1 < rows:
            shapes[SIXAIN].append(tuple(grid[r]) + tuple(grid[r + 1]))
    return shapes


def _dash(labels: tuple[str, ...]) -> str:
    return "-".join(labels)


def _numbered_name(kind: str, labels: tuple[str, ...]) -> str:
    if kind == PLEIN:
        return f"Plein du {labels[0]}"
    if kind == CHEVAL:
        return f"Cheval {_dash(labels)}"
    if kind == TRANSVERSALE:
        return f"Transversale {_dash(labels)}"
    if kind == CARRE:
        return f"Carré {_dash(labels)}"
    return f"Sixain {_dash(labels)}"


def _outcomes(winners: set[str], simple: bool) -> bytes:
    out = bytearray(numbers.COUNT)
    for i, label in enumerate(numbers.NUMBERS):
        if label in winners:
            out[i] = WIN
        elif simple and label == numbers.ZERO:
            out[i] = HALF
    return bytes(out)


def _build() -> tuple[dict[tuple[str, tuple[str, ...]], Position], dict[tuple[str, int], Position]]:
    by_numbers: dict[tuple[str, tuple[str, ...]], Position] = {}
    for kind, shapes in _numbered_shapes().items():
        for shape in shapes:
            labels = _canonical(shape)
            by_numbers[(kind, labels)] = Position(
                kind, labels, None, _numbered_name(kind, labels), _outcomes(set(labels), False)
            )
    by_index: dict[tuple[str, int], Position] = {}
    ones = [str(n) for n in range(1, 37)]
    for i in (1, 2, 3):
        dozen = tuple(ones[12 * (i - 1) : 12 * i])
        column = tuple(ones[i - 1 :: 3])
        by_index[(DOUZAINE, i)] = Position(
            DOUZAINE,
            dozen,
            i,
            f"{_ORDINAL[i - 1].capitalize()} douzaine",
            _outcomes(set(dozen), False),
        )
        by_index[(COLONNE, i)] = Position(
            COLONNE,
            column,
            i,
            f"{_ORDINAL[i - 1].capitalize()} colonne",
            _outcomes(set(column), False),
        )
    simple_tests = {
        ROUGE: lambda c: c[0] == numbers.ROUGE,
        NOIR: lambda c: c[0] == numbers.NOIR,
        PAIR: lambda c: c[1] == numbers.PAIR,
        IMPAIR: lambda c: c[1] == numbers.IMPAIR,
        MANQUE: lambda c: c[2] == numbers.MANQUE,
        PASSE: lambda c: c[2] == numbers.PASSE,
    }
    for kind, test in simple_tests.items():
        covered = tuple(n for n in ones if test(numbers.chances(n)))
        by_index[(kind, 0)] = Position(
            kind, covered, None, kind.capitalize(), _outcomes(set(covered), True)
        )
    return by_numbers, by_index


_BY_NUMBERS, _BY_INDEX = _build()


def all_positions() -> list[Position]:
    """Every legal position, multiple chances then simple chances."""
    return list(_BY_NUMBERS.values()) + list(_BY_INDEX.values())


def positions_of(kind: str) -> list[Position]:
    return [p for p in all_positions() if p.type == kind]


def _label(value: object) -> str:
    # Labels are strings; plain JSON integers 1-36 (and 0) are accepted as the same numbers.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise LayoutError(f"{value!r} is not a number of the tapis")
    label = str(value)
    if label not in numbers.INDEX:
        raise LayoutError(f"{value!r} is not a number of the tapis (0, 00, CMC, 1-36)")
    return label


def position(kind: str, numbers_: object = None, index: object = None) -> Position:
    """The position of a bet, or LayoutError saying why there is none."""
    if kind not in PAYOUT:
        raise LayoutError(f"unknown bet type {kind!r} (one of {', '.join(TYPES)})")
    if kind in NUMBERED:
        if index is not None:
            raise LayoutError(f"a {kind} is given by its numbers, not by an index")
        if not isinstance(numbers_, list | tuple) or not numbers_:
            raise LayoutError(f"a {kind} needs a list of {_SIZE[kind]} number(s) in 'numbers'")
        labels = [_label(v) for v in numbers_]
        if len(set(labels)) != len(labels):
            raise LayoutError(f"{kind}: a number is repeated in {labels}")
        if len(labels) != _SIZE[kind]:
            raise LayoutError(f"a {kind} covers {_SIZE[kind]} number(s), not {len(labels)}")
        found = _BY_NUMBERS.get((kind, _canonical(labels)))
        if found is None:
            raise LayoutError(
                f"{'-'.join(labels)} is not a {kind} of the tapis: {_shape_hint(kind)}"
            )
        return found
    if numbers_ is not None:
        raise LayoutError(f"a {kind} takes no 'numbers'")
    if kind in INDEXED:
        if isinstance(index, bool) or not isinstance(index, int) or index not in (1, 2, 3):
            raise LayoutError(f"a {kind} needs 'index' 1, 2 or 3, not {index!r}")
        return _BY_INDEX[(kind, index)]
    if index is not None:
        raise LayoutError(f"a chance simple ({kind}) takes no 'index'")
    return _BY_INDEX[(kind, 0)]


def _shape_hint(kind: str) -> str:
    return {
        PLEIN: "one number",
        CHEVAL: "two numbers side by side or one above the other on the tapis",
        TRANSVERSALE: "one row of three (0-00-CMC, 1-2-3 ... 34-35-36)",
        CARRE: "a block of 2 x 2 numbers (0-00-1-2, 00-CMC-2-3, 1-2-4-5 ...)",
        SIXAIN: "two adjacent rows (0-00-CMC-1-2-3, 1-2-3-4-5-6 ...)",
    }[kind]
