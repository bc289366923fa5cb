# Pocket sensing: scan snapshots in the chain's bit order, one-channel updates, stuck sensors.
from fwtest import raises

from rmcfw import pockets


def snap(*chans):
    buf = bytearray(5)
    for ch in chans:
        buf[ch >> 3] |= 1 << (7 - (ch & 7))
    return buf


def test_bit_order_of_the_chain():
    p = pockets.Pockets()
    assert p.scan(10, snap(0)) == 1
    assert p.count == 1 and p.first == 0 and p.since == 10
    assert p.scan(20, bytes((0, 0, 0, 0, 0x02))) == 1  # byte 4 bit 1: channel 32 + 6 = 38
    assert p.first == 38
    assert p.scan(30, bytes((0, 0, 0, 0, 0x01))) == 1  # the 40th input is not a pocket
    assert p.count == 0 and p.first == -1


def test_unchanged_snapshot_keeps_its_time():
    p = pockets.Pockets()
    p.scan(10, snap(5, 9))
    assert p.scan(20, snap(5, 9)) == 0
    assert p.count == 2 and p.first == 5 and p.since == 10


def test_single_channel_updates_match_snapshots():
    a = pockets.Pockets()
    b = pockets.Pockets()
    for ch in (0, 7, 8, 15, 31, 38):
        a.set(1, ch, 1)
        b.scan(1, snap(ch))
        assert bytes(a.bits) == bytes(b.bits)
        assert a.first == b.first == ch and a.held(ch)
        a.set(2, ch, 0)
        b.scan(2, snap())
    assert a.set(3, 4, 0) == 0  # no change
    raises(ValueError, a.set, 3, 39, 1)
    raises(ValueError, a.set, 3, -1, 1)


def test_fresh_pockets_since_the_launch():
    p = pockets.Pockets()
    p.set(0, 3, 1)
    p.mark()
    assert not p.fresh()  # held before the mark
    p.set(1, 3, 0)
    p.set(2, 3, 1)
    assert p.fresh()  # let go and held again
    p.mark()
    p.set(3, 20, 1)
    assert p.fresh()


def test_stuck_on_channel_is_masked_until_it_lets_go():
    p = pockets.Pockets()
    p.set(0, 12, 1)
    p.mark()
    p.set(5, 30, 1)
    p.set(6, 30, 0)
    assert p.stuck_on(7) == 12
    assert p.masked() == 12
    assert p.count == 0  # channel 12 ignored now
    p.set(8, 20, 1)
    assert p.count == 1 and p.first == 20
    p.set(9, 12, 0)
    assert p.masked() == -1


def test_stuck_off_after_many_results_without_it():
    p = pockets.Pockets(stuck_off_results=50)
    found = -1
    for i in range(60):
        ch = i % 38  # channel 38 never gets the ball
        s = p.result_seen(ch)
        if s >= 0 and found < 0:
            found = s
    assert found == 38
    assert p.stuck_off() == 38
    p.result_seen(38)
    assert p.stuck_off() == -1
