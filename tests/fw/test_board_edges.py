# The IRQ ring buffer: push() allocates nothing (run under micropython.heap_lock()), order is
# kept, and a full buffer drops edges and counts them instead of blocking or corrupting.
import micropython
from fwtest import raises

from rmcfw import edges


def test_push_allocates_nothing_and_drain_keeps_order():
    e = edges.Edges(64)
    e.push(0, 0, 0)  # warm-up
    e.drain(lambda t, c, v: None)
    micropython.heap_lock()
    try:
        for i in range(40):
            e.push(0x3FFFF000 + i * 7, 41 + (i & 1), i & 1)  # ticks_us stays a small int
    finally:
        micropython.heap_unlock()
    got = []
    assert e.pending() == 40
    assert e.drain(lambda t, c, v: got.append((t, c, v)), 100) == 40
    assert got[0] == (0x3FFFF000, 41, 0)
    assert got[-1] == (0x3FFFF000 + 39 * 7, 42, 1)
    assert e.pending() == 0


def test_host_times_are_wrapped_to_the_ticks_clock():
    e = edges.Edges(4)
    e.push((1 << 30) + 5, 41, 1)
    got = []
    e.drain(lambda t, c, v: got.append(t))
    assert got == [5]


def test_full_buffer_drops_and_counts():
    e = edges.Edges(8)
    e.push(0, 41, 1)
    micropython.heap_lock()  # counting a dropped edge allocates nothing either
    try:
        for i in range(1, 12):
            e.push(i, 41, 1)
    finally:
        micropython.heap_unlock()
    assert e.pending() == 7 and e.lost() == 5 and e.lost() == 0
    got = []
    e.drain(lambda t, c, v: got.append(t), 3)
    assert got == [0, 1, 2] and e.pending() == 4


def test_size_must_be_a_power_of_two():
    raises(ValueError, edges.Edges, 100)


class _IrqDuringLost:
    """The buffer's counters, with an overflowing IRQ landing during the loop's lost(): at
    its first read of them, as an interrupt may at any instant (none is ever disabled)."""

    def __init__(self, edges_, cells):
        self.edges = edges_
        self.cells = cells
        self.armed = False

    def __getitem__(self, k):
        v = self.cells[k]
        if self.armed:
            self.armed = False
            self.edges.push(7, 41, 1)  # the buffer is full: this edge is dropped, counted
        return v

    def __setitem__(self, k, v):
        self.cells[k] = v


def test_an_overflow_during_lost_is_not_lost():
    e = edges.Edges(8)
    for i in range(10):
        e.push(i, 41, 1)  # 7 kept, 3 dropped
    cells = _IrqDuringLost(e, e._i)
    e._i = cells
    reported = 0
    for _ in range(3):
        cells.armed = True
        reported += e.lost()
    reported += e.lost()
    assert reported == 3 + 3  # every dropped edge reported once, whenever it came
    assert e.lost() == 0
