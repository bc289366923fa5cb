# Rotor direction and period from the quadrature sensors.
from wheelsim import rotor_edges

from rmcfw import channels, rotor


def feed(r, events):
    for t, ch, v in events:
        r.edge(t, ch == channels.ROTOR_B, v)


def test_direction_and_period_clockwise():
    r = rotor.Rotor(39)
    ev = []
    rotor_edges(0, 9_000_000, 4_000_000, 1, ev)
    feed(r, ev)
    assert r.dir == rotor.CW
    assert abs(r.period_us - 4_000_000) < 40_000, r.period_us
    assert r.errors == 0


def test_direction_counter_clockwise_and_reversal():
    r = rotor.Rotor(39)
    ev = []
    rotor_edges(0, 5_000_000, 3_000_000, -1, ev)
    feed(r, ev)
    assert r.dir == rotor.CCW and abs(r.period_us - 3_000_000) < 40_000
    ev = []
    rotor_edges(8_000_000, 9_000_000, 3_000_000, 1, ev)
    feed(r, ev)  # stopped (3 s without edges), then turning the other way
    assert r.dir == rotor.CW
    assert r.period_us == 0  # not a full turn yet in the new direction


def test_stops_without_edges():
    r = rotor.Rotor(39, stop_ms=1000)
    ev = []
    rotor_edges(0, 5_000_000, 4_000_000, 1, ev)
    feed(r, ev)
    assert r.turning()
    r.poll(ev[-1][0] + 500_000)
    assert r.turning()
    r.poll(ev[-1][0] + 1_500_000)
    assert not r.turning() and r.period_us == 0


def test_missed_edges_are_counted_and_direction_kept():
    r = rotor.Rotor(39)
    ev = []
    rotor_edges(0, 9_000_000, 4_000_000, -1, ev)
    missed = [ev[i] for i in (40, 90, 140)]
    feed(r, [e for e in ev if e not in missed])
    assert r.errors >= 3
    assert r.dir == rotor.CCW
