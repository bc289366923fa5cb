# The numbers of the game and their simple chances (decree 1-2, 1-5 B).
from fwtest import raises

from rmcfw import numbers


def test_thirty_nine_distinct_numbers():
    assert len(numbers.NUMBERS) == numbers.COUNT == 39
    assert len(set(numbers.NUMBERS)) == 39
    assert numbers.INDEX["0"] == 0 and numbers.INDEX["36"] == 38


def test_eighteen_red_eighteen_black_three_green():
    colours = [numbers.colour(n) for n in numbers.NUMBERS]
    assert colours.count("rouge") == 18
    assert colours.count("noir") == 18
    assert colours.count("vert") == 3


def test_chances_of_a_number():
    assert numbers.chances("17") == ("noir", "impair", "manque")
    assert numbers.chances("36") == ("rouge", "pair", "passe")
    assert numbers.chances("19") == ("rouge", "impair", "passe")
    assert numbers.chances("18") == ("rouge", "pair", "manque")
    for green in ("0", "00", "CMC"):
        assert numbers.chances(green) is None


def test_grid_rows():
    assert numbers.GRID[0] == ("0", "00", "CMC")
    assert numbers.GRID[1] == ("1", "2", "3")
    assert numbers.GRID[12] == ("34", "35", "36")
    assert len(numbers.GRID) == 13


def test_unknown_label_is_refused():
    raises(ValueError, numbers.value, "37")
    raises(ValueError, numbers.colour, "x")


def test_the_drop_prior_comes_from_the_wheel_geometry():
    from rmcfw import config

    geo = {"drop_angle_deg": 41.0, "ball_track_radius_m": 0.395}
    assert config.drop_ms_of({"geometry": geo}) == 1352
    for bad in ({}, {"geometry": {}}, {"geometry": {"drop_angle_deg": "x"}}, None, []):
        assert config.drop_ms_of(bad) == 0
    assert config.drop_ms_of({"geometry": {"drop_angle_deg": 95, "ball_track_radius_m": 0.4}}) == 0
    c = config.Config({"drop_ms": 1200}, {"drop_ms": 1352})
    assert c.drop_ms == 1200 and c.changed() == {"drop_ms": 1200}  # a SET wins
    c = config.Config(None, {"drop_ms": 1352})
    assert c.drop_ms == 1352 and c.changed() == {}
