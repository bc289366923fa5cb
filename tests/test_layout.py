"""The tapis: every legal position of every combination, found independently by geometry."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from rmc import layout
from rmc.layout import LayoutError, position
from rmcfw import numbers

# Coordinates of each number on the 13 x 3 tapis, written out independently of layout.py.
COORD = {"0": (0, 0), "00": (0, 1), "CMC": (0, 2)}
COORD.update({str(n): ((n - 1) // 3 + 1, (n - 1) % 3) for n in range(1, 37)})


def _is_cheval(cells) -> bool:
    (r1, c1), (r2, c2) = (COORD[x] for x in cells)
    return abs(r1 - r2) + abs(c1 - c2) == 1


def _is_carre(cells) -> bool:
    rows = sorted({COORD[x][0] for x in cells})
    cols = sorted({COORD[x][1] for x in cells})
    return len(rows) == 2 == len(cols) and rows[1] - rows[0] == 1 and cols[1] - cols[0] == 1


def _is_transversale(cells) -> bool:
    return len({COORD[x][0] for x in cells}) == 1


def _is_sixain(cells) -> bool:
    rows = sorted({COORD[x][0] for x in cells})
    return len(rows) == 2 and rows[1] - rows[0] == 1


@pytest.mark.parametrize(
    ("kind", "size", "shape"),
    [
        ("plein", 1, lambda c: True),
        ("cheval", 2, _is_cheval),
        ("transversale", 3, _is_transversale),
        ("carre", 4, _is_carre),
    ],
)
def test_every_subset_is_accepted_iff_it_has_the_shape(kind, size, shape) -> None:
    accepted = 0
    for cells in itertools.combinations(numbers.NUMBERS, size):
        legal = shape(cells)
        try:
            pos = position(kind, list(cells))
        except LayoutError:
            assert not legal, f"{kind} {cells} refused"
        else:
            assert legal, f"{kind} {cells} accepted"
            assert set(pos.numbers) == set(cells)
            accepted += 1
    assert accepted == len(layout.positions_of(kind))


def test_sixains_are_pairs_of_adjacent_rows() -> None:
    found = {frozenset(p.numbers) for p in layout.positions_of("sixain")}
    expected = set()
    for r in range(12):
        cells = [x for x, (row, _) in COORD.items() if row in (r, r + 1)]
        assert _is_sixain(cells)
        expected.add(frozenset(cells))
    assert found == expected


@pytest.mark.parametrize(
    ("kind", "count"),
    [
        ("plein", 39),
        ("cheval", 62),
        ("transversale", 13),
        ("carre", 24),
        ("sixain", 12),
        ("douzaine", 3),
        ("colonne", 3),
    ],
)
def test_number_of_positions(kind, count) -> None:
    assert len(layout.positions_of(kind)) == count


def test_six_chances_simples() -> None:
    simples = [p for p in layout.all_positions() if p.simple]
    assert sorted(p.type for p in simples) == sorted(layout.SIMPLES)
    for p in simples:
        assert len(p.numbers) == 18


def test_green_row_positions_of_design() -> None:
    for pair in (["0", "00"], ["00", "CMC"], ["0", "1"], ["00", "2"], ["CMC", "3"]):
        assert position("cheval", pair).type == "cheval"
    for bad in (["0", "CMC"], ["0", "2"], ["CMC", "1"], ["3", "4"]):
        with pytest.raises(LayoutError):
            position("cheval", bad)
    assert position("carre", ["0", "00", "1", "2"]).numbers == ("0", "00", "1", "2")
    assert position("carre", ["CMC", "00", "3", "2"]).numbers == ("00", "CMC", "2", "3")
    assert position("transversale", ["0", "00", "CMC"])
    assert position("sixain", ["0", "00", "CMC", "1", "2", "3"])


def test_douzaines_and_colonnes() -> None:
    assert position("douzaine", index=2).numbers == tuple(str(n) for n in range(13, 25))
    assert position("colonne", index=1).numbers == tuple(str(n) for n in range(1, 37, 3))
    for bad in (0, 4, "1", True, None):
        with pytest.raises(LayoutError):
            position("douzaine", index=bad)


def test_expected_return_is_exact_for_every_position() -> None:
    """Every multiple chance returns 36/39 of its stake, every chance simple 73/78 (DESIGN)."""
    for pos in layout.all_positions():
        back = Fraction(0)
        for code in pos.outcomes:
            back += {layout.WIN: pos.payout + 1, layout.HALF: Fraction(1, 2), layout.LOSE: 0}[code]
        expected = Fraction(73, 78) if pos.simple else Fraction(36, 39)
        assert back / 39 == expected, pos.name
        assert back / 39 - 1 == (Fraction(-5, 78) if pos.simple else Fraction(-3, 39))


def test_outcomes_match_the_numbers_covered() -> None:
    for pos in layout.all_positions():
        for label in numbers.NUMBERS:
            code = pos.outcomes[numbers.INDEX[label]]
            if label in pos.numbers:
                assert code == layout.WIN
            elif pos.simple and label == "0":
                assert code == layout.HALF
            else:
                assert code == layout.LOSE


@pytest.mark.parametrize(
    ("kind", "nums", "index", "message"),
    [
        ("roulette", None, None, "unknown bet type"),
        ("plein", ["37"], None, "not a number"),
        ("plein", [], None, "needs a list"),
        ("plein", "17", None, "needs a list"),
        ("cheval", ["17", "17"], None, "repeated"),
        ("carre", ["1", "2", "4"], None, "covers 4"),
        ("plein", ["17"], 1, "not by an index"),
        ("rouge", ["1"], None, "takes no 'numbers'"),
        ("rouge", None, 1, "takes no 'index'"),
        ("plein", [True], None, "not a number"),
    ],
)
def test_refusals_say_why(kind, nums, index, message) -> None:
    with pytest.raises(LayoutError, match=message):
        position(kind, nums, index)


def test_integer_labels_are_the_same_numbers() -> None:
    assert position("plein", [17]) is position("plein", ["17"])
    assert position("plein", [0]) is position("plein", ["0"])
