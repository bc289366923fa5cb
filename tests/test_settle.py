"""Settlement against the decree: payouts, partage, paying order, chips, limits, exactness."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmc import layout
from rmc.bets import Bet, BetsError, load_bets, parse_bets
from rmc.limits import Table
from rmc.settle import Book, ResultError, announce_result, settle
from rmcfw import numbers

TABLE = Table.load()


def bets(*raw: dict, markers: dict | None = None) -> list[Bet]:
    doc: dict = {"bets": list(raw)}
    if markers is not None:
        doc["markers"] = markers
    return parse_bets(doc, TABLE)


def test_every_position_against_every_result() -> None:
    """Each legal position, stake 10, against all 39 results: exact payouts and expectations."""
    for pos in layout.all_positions():
        bet = Bet("A", pos, Decimal(10))
        back = Decimal(0)
        for result in numbers.NUMBERS:
            (payment,) = settle([bet], result).payments
            if result in pos.numbers:
                assert payment.outcome == layout.WIN
                assert payment.paid == 10 * (pos.payout + 1)
            elif pos.simple and result == "0":
                assert payment.outcome == layout.HALF
                assert payment.paid == 5
            else:
                assert payment.outcome == layout.LOSE
                assert payment.paid == 0
            back += payment.paid
        edge = Fraction(back) / (39 * 10) - 1
        assert edge == (Fraction(-5, 78) if pos.simple else Fraction(-3, 39)), pos.name


def test_payouts_of_decree_1_5() -> None:
    cases = [
        ({"type": "plein", "numbers": ["17"]}, "17", "360"),
        ({"type": "cheval", "numbers": ["17", "20"]}, "20", "180"),
        ({"type": "transversale", "numbers": ["16", "17", "18"]}, "18", "120"),
        ({"type": "carre", "numbers": ["16", "17", "19", "20"]}, "19", "90"),
        ({"type": "sixain", "numbers": ["13", "14", "15", "16", "17", "18"]}, "13", "60"),
        ({"type": "douzaine", "index": 2}, "24", "30"),
        ({"type": "colonne", "index": 3}, "36", "30"),
        ({"type": "rouge"}, "36", "20"),
        ({"type": "noir"}, "17", "20"),
        ({"type": "pair"}, "36", "20"),
        ({"type": "impair"}, "17", "20"),
        ({"type": "manque"}, "18", "20"),
        ({"type": "passe"}, "19", "20"),
    ]
    for fields, result, paid in cases:
        (p,) = settle(bets({"player": "A", "stake": "10", **fields}), result).payments
        assert p.paid == Decimal(paid), fields


@pytest.mark.parametrize("kind", layout.SIMPLES)
def test_partage_on_zero_lost_on_double_zero_and_cmc(kind) -> None:
    placed = bets({"player": "A", "type": kind, "stake": "7"})
    (half,) = settle(placed, "0").payments
    assert half.outcome == layout.HALF and half.paid == Decimal("3.5")
    assert half.announcement == f"{kind.capitalize()} : partage, la moitié de 7, 3,5"
    for green in ("00", "CMC"):
        (lost,) = settle(placed, green).payments
        assert lost.outcome == layout.LOSE and lost.paid == 0 and lost.announcement is None


def test_announcements() -> None:
    assert announce_result("17") == "17, noir, impair et manque"
    assert announce_result("36") == "36, rouge, pair et passe"
    assert announce_result("0") == "Zéro"
    assert announce_result("00") == "Double zéro"
    assert announce_result("CMC") == "CMC"
    placed = bets(
        {"player": "A", "type": "plein", "numbers": ["17"], "stake": "10"},
        {"player": "A", "type": "cheval", "numbers": ["20", "17"], "stake": "2.50"},
        {"player": "A", "type": "douzaine", "index": 2, "stake": "20"},
        {"player": "A", "type": "noir", "stake": "5"},
    )
    said = [p.announcement for p in settle(placed, "17").payments]
    assert said == [
        "Noir : 1 fois 5, 5",
        "Deuxième douzaine : 2 fois 20, 40",
        "Cheval 17-20 : 17 fois 2,50, 42,50",
        "Plein du 17 : 35 fois 10, 350",
    ]


def test_paying_order_of_decree_1_4() -> None:
    """Result 19 makes one bet of every type win; they must come out in the decree's order."""
    raw = [
        {"type": "plein", "numbers": ["19"]},
        {"type": "cheval", "numbers": ["19", "20"]},
        {"type": "carre", "numbers": ["19", "20", "22", "23"]},
        {"type": "sixain", "numbers": ["19", "20", "21", "22", "23", "24"]},
        {"type": "transversale", "numbers": ["19", "20", "21"]},
        {"type": "douzaine", "index": 2},
        {"type": "manque"},  # loses on 19
        {"type": "rouge"},
        {"type": "impair"},
        {"type": "passe"},
        {"type": "colonne", "index": 1},
        {"type": "noir"},  # loses
        {"type": "pair"},  # loses
    ]
    placed = bets(*({"player": "A", "stake": "10", **r} for r in raw))
    order = [p.bet.type for p in settle(placed, "19").payments]
    assert order == [
        "colonne",
        "passe",
        "impair",
        "rouge",
        "douzaine",
        "transversale",
        "sixain",
        "carre",
        "cheval",
        "plein",
        # then the losing bets, also in the decree's order
        "noir",
        "pair",
        "manque",
    ]


def test_players_in_order_of_first_appearance() -> None:
    placed = bets(
        {"player": "B", "type": "plein", "numbers": ["1"], "stake": "10"},
        {"player": "A", "type": "rouge", "stake": "10"},
        {"player": "B", "type": "colonne", "index": 1, "stake": "10"},
        {"player": "C", "type": "noir", "stake": "10"},
        {"player": "A", "type": "plein", "numbers": ["1"], "stake": "10"},
    )
    payments = settle(placed, "1").payments
    assert [(p.player, p.bet_index) for p in payments] == [
        ("B", 2),
        ("B", 0),
        ("A", 1),
        ("A", 4),
        ("C", 3),
    ]


def test_chips_and_exception() -> None:
    ok = bets(
        {"player": "A", "type": "rouge", "stake": "100", "chip": "plaque"},
        {"player": "A", "type": "pair", "stake": "100", "chip": "valeur"},
        {
            "player": "A",
            "type": "plein",
            "numbers": ["7"],
            "stake": "10",
            "chip": "plaque",
            "exception": True,
        },
    )
    assert [b.exception for b in ok] == [False, False, True]
    statement = settle(ok, "7").to_json()
    recorded = {p["bet_index"]: p["exception"] for p in statement["payments"]}
    assert recorded == {0: False, 1: False, 2: True}
    for chip in ("plaque", "valeur"):
        with pytest.raises(BetsError, match=r"bet 0: a .* refused on a multiple chance"):
            bets({"player": "A", "type": "douzaine", "index": 1, "stake": "10", "chip": chip})


def test_markers_colour_chips() -> None:
    assert bets(
        {"player": "A", "type": "plein", "numbers": ["7"], "stake": "15"}, markers={"A": "5"}
    )
    with pytest.raises(BetsError, match="whole number of A's chips"):
        bets({"player": "A", "type": "plein", "numbers": ["7"], "stake": "12"}, markers={"A": "5"})
    with pytest.raises(BetsError, match="outside the table's colour-chip limits"):
        bets({"player": "A", "type": "rouge", "stake": "10"}, markers={"A": "1000"})
    # Value chips are not counted in the player's colour chips.
    assert bets(
        {"player": "A", "type": "rouge", "stake": "12", "chip": "plaque"}, markers={"A": "5"}
    )


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (
            {"player": "A", "type": "plein", "numbers": ["17"], "stake": "1"},
            "below the table minimum",
        ),
        (
            {"player": "A", "type": "plein", "numbers": ["17"], "stake": "151"},
            "above the table maximum",
        ),
        (
            {"player": "A", "type": "plein", "numbers": ["17"], "stake": "2.001"},
            "multiple of the table's unit",
        ),
        ({"player": "A", "type": "plein", "numbers": ["17"], "stake": "abc"}, "not a decimal"),
        ({"player": "A", "type": "plein", "numbers": ["17"], "stake": "0"}, "not positive"),
        ({"player": "A", "type": "plein", "numbers": ["17"], "stake": "NaN"}, "not a finite"),
        ({"player": "A", "type": "plein", "numbers": ["17"], "stake": "Infinity"}, "not a finite"),
        ({"player": "A", "type": "plein", "numbers": ["17"], "stake": True}, "decimal string"),
        ({"player": "A", "type": "plein", "numbers": ["17"]}, "'stake' is missing"),
        ({"player": "", "type": "rouge", "stake": "10"}, "'player'"),
        ({"player": "A", "type": "rouge", "stake": "10", "chip": "euro"}, "unknown chip"),
        ({"player": "A", "type": "rouge", "stake": "10", "exception": "yes"}, "true or false"),
        ({"player": "A", "type": "rouge", "stake": "10", "colour": "red"}, "unknown field"),
        ("plein 17", "a bet is a JSON object"),
    ],
)
def test_refusals_name_the_bet(raw, reason) -> None:
    good = {"player": "Z", "type": "rouge", "stake": "10"}
    with pytest.raises(BetsError) as info:
        bets(good, raw)
    (line,) = info.value.lines()
    assert line.startswith("bet 1: ")
    assert reason in line


def test_every_problem_is_listed_and_nothing_is_settled() -> None:
    with pytest.raises(BetsError) as info:
        bets(
            {"player": "A", "type": "plein", "numbers": ["99"], "stake": "10"},
            {"player": "A", "type": "rouge", "stake": "10"},
            {"player": "A", "type": "rouge", "stake": "-10"},
        )
    assert [i for i, _ in info.value.problems] == [0, 2]


def test_json_numbers_are_exact_and_broken_json_is_refused() -> None:
    (bet,) = load_bets('{"bets": [{"player": "A", "type": "rouge", "stake": 10.10}]}', TABLE)
    assert bet.stake == Decimal("10.10")
    with pytest.raises(BetsError, match="not valid JSON"):
        load_bets('{"bets": [', TABLE)
    with pytest.raises(BetsError, match='"bets"'):
        load_bets('[{"player": "A"}]', TABLE)


def test_unknown_result() -> None:
    with pytest.raises(ResultError):
        settle([], "37")
    with pytest.raises(ResultError):
        settle([], "O")


def test_half_cents_stay_exact(tmp_path) -> None:
    custom = tmp_path / "t.toml"
    text = TABLE_TEXT.replace('min = "5"', 'min = "0.01"')
    custom.write_text(text)
    table = Table.load(custom)
    (bet,) = parse_bets({"bets": [{"player": "A", "type": "rouge", "stake": "0.03"}]}, table)
    (p,) = settle([bet], "0").payments
    assert p.paid == Decimal("0.015")
    assert settle([bet], "0").to_json()["totals"] == {
        "staked": "0.03",
        "paid": "0.015",
        "house": "0.015",
    }


TABLE_TEXT = (Table.load.__globals__["resources"].files("rmc") / "data/table.toml").read_text()


# --- properties over random bet sets -------------------------------------------------------

POSITIONS = layout.all_positions()
stakes = st.integers(min_value=500, max_value=15000).map(lambda c: Decimal(c).scaleb(-2))
random_bets = st.lists(
    st.builds(
        lambda player, pos, stake: Bet(player, pos, stake),
        st.sampled_from(["A", "B", "C", "D"]),
        st.sampled_from(POSITIONS),
        stakes,
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(random_bets, st.sampled_from(numbers.NUMBERS))
def test_conservation_and_order(placed, result) -> None:
    statement = settle(placed, result)
    assert statement.staked == sum((b.stake for b in placed), Decimal(0))
    assert statement.paid == sum((p.paid for p in statement.payments), Decimal(0))
    assert statement.staked == statement.paid + statement.house
    assert sorted(p.bet_index for p in statement.payments) == list(range(len(placed)))
    # Players in order of first appearance, each in one block.
    first_seen = list(dict.fromkeys(b.player for b in placed))
    assert list(dict.fromkeys(p.player for p in statement.payments)) == first_seen
    for player in first_seen:
        mine = [p for p in statement.payments if p.player == player]
        outcomes = [p.outcome != layout.LOSE for p in mine]
        assert outcomes == sorted(outcomes, reverse=True), "a loser before a winner"
        for won in (True, False):
            ranks = [
                layout.PAYING_RANK[p.bet.type] for p in mine if (p.outcome != layout.LOSE) == won
            ]
            assert ranks == sorted(ranks)
    # Round trip through JSON: amounts are decimal strings.
    doc = json.loads(json.dumps(statement.to_json()))
    assert Decimal(doc["totals"]["staked"]) == statement.staked
    assert Decimal(doc["totals"]["house"]) == statement.house


@settings(max_examples=100, deadline=None)
@given(random_bets)
def test_book_matches_bet_by_bet_membership(placed) -> None:
    """The precomputed book agrees with the plain rule applied bet by bet."""
    book = Book(placed)
    for result in numbers.NUMBERS:
        paid = book.paid_amounts(numbers.INDEX[result])
        for bet, amount in zip(placed, paid, strict=True):
            if result in bet.position.numbers:
                assert amount == bet.stake * (bet.position.payout + 1)
            elif bet.position.simple and result == "0":
                assert amount == bet.stake / 2
            else:
                assert amount == 0
