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
