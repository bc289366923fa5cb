# The table's thresholds (rmcfw.config): ranges, and what each range must respect.
from fwtest import raises

from rmcfw import config, ticks

_HALF_US = (ticks.MASK + 1) // 2  # the tick clock tells intervals only below this


def test_every_time_threshold_fits_the_tick_clock():
    # A threshold of the half period or more can never be reached by ticks.diff: its timer
    # would never fire (incident_ms once allowed 600 s, and the incident never ended).
    names = [k for k in config.keys() if k.endswith("_ms")]
    assert "incident_ms" in names and len(names) >= 10, names
    for k in names:
        lo, hi = config.bounds(k)
        assert 0 <= lo <= hi, k
        assert hi * 1000 < _HALF_US, (k, hi)


def test_out_of_range_and_unknown_keys_are_refused():
    c = config.Config()
    lo, hi = config.bounds("incident_ms")
    raises(ValueError, c.set, "incident_ms", hi + 1)
    raises(ValueError, c.set, "incident_ms", lo - 1)
    raises(ValueError, c.set, "no_such_ms", 10)
    raises(KeyError, config.bounds, "no_such_ms")
    c.set("incident_ms", hi)
    assert c.incident_ms == hi and c.by_hand("incident_ms")


def test_a_saved_value_out_of_range_falls_back_to_the_default():
    # a state saved by a firmware that allowed more (600 s) is taken, that key at default
    c = config.Config({"incident_ms": 600000, "settle_ms": 2000})
    assert c.incident_ms == 30000 and not c.by_hand("incident_ms")
    assert c.settle_ms == 2000


def test_min_revs_never_goes_below_the_four_revolutions_of_the_rules():
    # DESIGN.md and the regulators: a ball with fewer than 4 revolutions is no spin. The
    # threshold may be raised (stricter), never lowered below 4.
    c = config.Config()
    assert config.bounds("min_revs")[0] == 4
    for v in ("3", "1", 3, 0):
        raises(ValueError, c.set, "min_revs", v)
    assert c.min_revs == 4 and not c.by_hand("min_revs")
    c.set("min_revs", "5")
    assert c.min_revs == 5
    # a state saved by a firmware that allowed 1..20 comes back at the rules' minimum
    assert config.Config({"min_revs": 2}).min_revs == 4


def test_a_value_is_read_in_its_one_spelling_only():
    # The wire's one spelling of a number: ASCII digits, no sign, no leading zero. int()
    # would read every one of these (or raise something else): none may set a threshold.
    c = config.Config()
    bad = ("+5", "05", " 5", "5 ", "5_0", "\u0665", "-0", "", "5.0", "1e1", "0x10", "00", "٥٠")
    for v in bad:
        raises(ValueError, c.set, "lone_max", v)
        raises(ValueError, config.number, v)
    raises(ValueError, c.set, "lone_max", b"05")
    raises(ValueError, c.set, "lone_max", 5.0)
    raises(ValueError, c.set, "lone_max", None)
    raises(ValueError, c.set, "incident_ms", "12345678901")  # longer than a protocol number
    assert c.lone_max == 1 and not c.by_hand("lone_max")
    c.set("lone_max", "0")
    assert c.lone_max == 0
    c.set("lone_max", b"50")
    assert c.lone_max == 50
    c.set("lone_max", 7)  # an int, as a saved state gives it
    assert c.lone_max == 7
    assert config.number("10") == 10 and config.number("0") == 0
