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
from rmc.limits import Table, TableError
from rmc.money import round_to_unit
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
            "has 3 decimals, more than the currency's 2",
        ),
        (
            {"player": "A", "type": "plein", "numbers": ["17"], "stake": "abc"},
            "not a plain decimal",
        ),
        ({"player": "A", "type": "plein", "numbers": ["17"], "stake": "0"}, "not positive"),
        (
            {"player": "A", "type": "plein", "numbers": ["17"], "stake": "NaN"},
            "not a plain decimal",
        ),
        (
            {"player": "A", "type": "plein", "numbers": ["17"], "stake": "Infinity"},
            "not a plain decimal",
        ),
        ({"player": "A", "type": "plein", "numbers": ["17"], "stake": True}, "decimal string"),
        ({"player": "A", "type": "plein", "numbers": ["17"]}, "'stake' is missing"),
        # Already-decoded documents (a trace's bets) are held to the same spelling.
        (
            {"player": "A", "type": "plein", "numbers": ["17"], "stake": Decimal("1E+1")},
            "has an exponent",
        ),
        ({"player": "A", "type": "plein", "numbers": ["17"], "stake": 10.5}, "decimal string"),
        ({"player": "A", "type": "plein", "numbers": [17], "stake": "10"}, "as strings"),
        ({"player": "", "type": "rouge", "stake": "10"}, "'player'"),
        ({"player": "A", "type": "rouge", "stake": "10", "chip": "euro"}, "unknown chip"),
        ({"player": "A", "type": "rouge", "stake": "10", "exception": "yes"}, "true or false"),
        (
            {"player": "A", "type": "rouge", "stake": "10", "colour": "red"},
            "unknown field(s) 'colour'",
        ),
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


# --- issue 19: limits on a player's total per position ------------------------------------


def table_with(tmp_path, **head: str) -> Table:
    """The default table with extra or changed `[table]` settings."""
    text = TABLE_TEXT
    for key, value in head.items():
        line = f'{key} = "{value}"'
        if f"\n{key} = " in text:
            start = text.index(f"\n{key} = ") + 1
            text = text[:start] + line + text[text.index("\n", start) :]
        else:
            text = text.replace("[table]\n", f"[table]\n{line}\n", 1)
    path = tmp_path / "table.toml"
    path.write_text(text)
    return Table.load(path)


def test_three_lines_of_150_on_one_plein_are_refused() -> None:
    line = {"player": "A", "type": "plein", "numbers": ["17"], "stake": "150"}
    with pytest.raises(BetsError) as info:
        bets(line, line, line)
    (reason,) = info.value.lines()
    assert reason == (
        "player A: bets 0, 1, 2 on Plein du 17 total 450, above the table maximum 150 for a plein"
    )


def test_total_at_the_maximum_is_accepted() -> None:
    line = {"player": "A", "type": "plein", "numbers": ["17"], "stake": "75"}
    assert len(bets(line, line)) == 2


@pytest.mark.parametrize(
    ("first", "second", "stake", "name"),
    [
        (
            {"type": "cheval", "numbers": ["17", "20"]},
            {"type": "cheval", "numbers": ["20", "17"]},
            "200",
            "Cheval 17-20",
        ),
        (
            {"type": "transversale", "numbers": ["1", "2", "3"]},
            {"type": "transversale", "numbers": ["3", "1", "2"]},
            "300",
            "Transversale 1-2-3",
        ),
        (
            {"type": "carre", "numbers": ["0", "00", "1", "2"]},
            {"type": "carre", "numbers": ["2", "1", "00", "0"]},
            "400",
            "Carré 0-00-1-2",
        ),
        (
            {"type": "sixain", "numbers": ["1", "2", "3", "4", "5", "6"]},
            {"type": "sixain", "numbers": ["6", "5", "4", "3", "2", "1"]},
            "600",
            "Sixain 1-2-3-4-5-6",
        ),
        (
            {"type": "douzaine", "index": 2},
            {"type": "douzaine", "index": 2},
            "1500",
            "Deuxième douzaine",
        ),
        (
            {"type": "colonne", "index": 3},
            {"type": "colonne", "index": 3},
            "1500",
            "Troisième colonne",
        ),
        ({"type": "rouge"}, {"type": "rouge"}, "3000", "Rouge"),
        ({"type": "manque"}, {"type": "manque"}, "3000", "Manque"),
    ],
)
def test_every_combination_is_limited_per_position(first, second, stake, name) -> None:
    with pytest.raises(BetsError) as info:
        bets(
            {"player": "B", "stake": stake, "chip": "plaque", "exception": True, **first},
            {"player": "C", "type": "rouge", "stake": "5"},
            {"player": "B", "stake": stake, **second},
        )
    (reason,) = info.value.lines()
    kind = first["type"]
    total = Decimal(stake) * 2
    limit = TABLE.limits[kind].max
    assert reason == (
        f"player B: bets 0, 2 on {name} total {total}, above the table maximum {limit} for a {kind}"
    )


def test_positions_and_players_are_counted_apart() -> None:
    assert bets(
        # Same player, overlapping but different positions: each under its own maximum.
        {"player": "A", "type": "plein", "numbers": ["17"], "stake": "150"},
        {"player": "A", "type": "cheval", "numbers": ["17", "20"], "stake": "300"},
        {"player": "A", "type": "cheval", "numbers": ["17", "18"], "stake": "300"},
        {"player": "A", "type": "noir", "stake": "5000"},
        {"player": "A", "type": "impair", "stake": "5000"},
        # Another player on the same plein has a total of its own.
        {"player": "B", "type": "plein", "numbers": ["17"], "stake": "150"},
    )


def test_the_minimum_applies_to_each_line() -> None:
    """The decree's minimum is for a chip laid: two lines of 1 do not make one stake of 2."""
    line = {"player": "A", "type": "plein", "numbers": ["17"], "stake": "1"}
    with pytest.raises(BetsError) as info:
        bets(line, line)
    assert [i for i, _ in info.value.problems] == [0, 1]
    assert "below the table minimum 2 for a plein" in info.value.lines()[0]


# --- issue 19: the partage on 0, rounded to the table's unit -------------------------------


def test_a_stake_must_be_a_multiple_of_the_unit(tmp_path) -> None:
    table = table_with(tmp_path, unit="0.05")
    with pytest.raises(BetsError, match=r"2\.01 is not a whole multiple of the table's unit 0\.05"):
        parse_bets(
            {"bets": [{"player": "A", "type": "plein", "numbers": ["1"], "stake": "2.01"}]}, table
        )


def test_default_table_states_its_partage_rounding() -> None:
    assert TABLE.unit == Decimal("0.01")
    assert TABLE.decimals == 2
    assert TABLE.partage_rounding == "down"


@pytest.mark.parametrize(
    ("rounding", "given", "kept"),
    [
        ("down", "2", "0.5"),
        ("up", "3", "-0.5"),
        ("half-even", "2", "0.5"),
        ("half-up", "3", "-0.5"),
    ],
)
def test_partage_is_rounded_to_the_unit(tmp_path, rounding, given, kept) -> None:
    table = table_with(tmp_path, unit="1", partage_rounding=rounding)
    (bet,) = parse_bets({"bets": [{"player": "A", "type": "rouge", "stake": "5"}]}, table)
    statement = settle([bet], "0")
    (p,) = statement.payments
    assert p.outcome == layout.HALF
    assert (p.paid, p.kept) == (Decimal(given), Decimal(kept))
    doc = statement.to_json()
    assert doc["payments"][0]["partage"] == {
        "half": "2.5",
        "given_back": given,
        "kept": kept,
        "unit": "1",
        "rounding": rounding,
    }
    assert doc["totals"]["paid"] == given
    assert doc["totals"]["partage_kept"] == kept
    assert doc["totals"]["house"] == str(Decimal(5) - Decimal(given))
    assert p.announcement == (
        f"Rouge : partage, la moitié de 5, 2,5, arrondie à {given} (unité 1) ; "
        f"l'arrondi garde {kept.replace('.', ',')}"
    )


def test_half_cents_are_rounded_down_to_the_cent(tmp_path) -> None:
    custom = tmp_path / "cents.toml"
    custom.write_text(TABLE_TEXT.replace('min = "5"', 'min = "0.01"'))
    table = Table.load(custom)
    (bet,) = parse_bets({"bets": [{"player": "A", "type": "rouge", "stake": "0.03"}]}, table)
    (p,) = settle([bet], "0").payments
    assert (p.paid, p.kept) == (Decimal("0.01"), Decimal("0.005"))
    assert settle([bet], "0").to_json()["totals"] == {
        "staked": "0.03",
        "paid": "0.01",
        "house": "0.02",
        "partage_kept": "0.005",
    }


def test_exact_partage_says_nothing_was_kept() -> None:
    placed = bets({"player": "A", "type": "pair", "stake": "7"})
    (p,) = settle(placed, "0").payments
    assert (p.paid, p.kept) == (Decimal("3.5"), Decimal(0))
    assert p.announcement == "Pair : partage, la moitié de 7, 3,5"
    doc = settle(placed, "0").to_json()
    assert doc["payments"][0]["partage"]["kept"] == "0"
    assert doc["totals"]["partage_kept"] == "0"
    # Only a partage carries the detail.
    assert "partage" not in settle(placed, "2").to_json()["payments"][0]


@pytest.mark.parametrize(
    ("head", "needle"),
    [
        ({"partage_rounding": "sideways"}, "partage_rounding"),
        ({"unit": "0.001"}, "finer than the currency's 2 decimals"),
        ({"decimals": "two"}, "decimals"),
        # A misspelt setting must not fall back to the default in silence.
        ({"partage_roundin": "up"}, "unknown setting"),
    ],
)
def test_bad_rounding_settings_are_refused(tmp_path, head, needle) -> None:
    with pytest.raises(TableError, match=needle):
        table_with(tmp_path, **head)


@pytest.mark.parametrize(
    ("amount", "unit", "down", "up", "half_even", "half_up"),
    [
        ("7.5", "5", "5", "10", "10", "10"),
        ("12.5", "5", "10", "15", "10", "15"),
        ("0.015", "0.01", "0.01", "0.02", "0.02", "0.02"),
        ("0.025", "0.01", "0.02", "0.03", "0.02", "0.03"),
        ("3.5", "0.01", "3.5", "3.5", "3.5", "3.5"),
    ],
)
def test_round_to_unit(amount, unit, down, up, half_even, half_up) -> None:
    got = [
        str(round_to_unit(Decimal(amount), Decimal(unit), rule))
        for rule in ("down", "up", "half-even", "half-up")
    ]
    assert got == [down, up, half_even, half_up]
