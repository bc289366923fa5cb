# Rotor direction and period from its two quadrature sensors (ROTOR_A, ROTOR_B).
#
# Direction +1 (CW seen from above) is A leading B. Each edge of either channel is one count;
# a revolution is 4 * slots counts (hardware/wheel.json geometry.rotor_encoder_slots). The
# period is measured over the last full revolution, refreshed every quarter turn, so a reading
# is always a whole turn's average whatever the slot spacing errors.
from array import array

from micropython import const

from rmcfw import ticks

CW = const(1)
CCW = const(-1)

# Quadrature step for (previous state << 2 | state), state = A << 1 | B: 1 forward, 2 backward
# (an edge changes one channel, so the other entries never occur).
_STEP = b"\x00\x02\x01\x00\x01\x00\x00\x02\x02\x00\x00\x01\x00\x01\x02\x00"
_QUARTERS = const(4)


class Rotor:
    def __init__(self, slots=39, stop_ms=2000):
        self.counts = 4 * slots  # counts per revolution
        self._seg = self.counts // _QUARTERS
        self.stop_us = stop_ms * 1000
        self._ab = 0
        self.pos = 0  # counts since start, signed
        self.dir = 0  # direction of the last full quarter turn; 0 = stopped/unknown
        self.period_us = 0  # last full revolution; 0 = unknown or stopped
        self.errors = 0  # missed edges seen
        self.t_edge = None
        self._mark = 0  # pos at the last quarter mark
        self._qt = array("L", [0] * _QUARTERS)  # times of the last quarter marks
        self._qn = 0  # quarter marks recorded in the current run (saturates)
        self._qi = 0

    def seed(self, a, b):
        """The channels' levels as read at power-up, before any edge: the first edge then
        counts the right way instead of being taken for a missed one."""
        self._ab = (2 if a else 0) | (1 if b else 0)

    def edge(self, t, ch_b, level):
        """One edge: ch_b is 0 for channel A, 1 for channel B; level the new pin level."""
        ab = self._ab
        if ch_b:
            new = (ab & 2) | (1 if level else 0)
        else:
            new = (ab & 1) | (2 if level else 0)
        if new == ab:
            # an edge that leaves its channel's level as it was: the opposite edge was missed
            self.errors += 1
            return
        step = _STEP[(ab << 2) | new]
        self._ab = new
        if self.t_edge is not None and ticks.diff(t, self.t_edge) > self.stop_us:
            self._restart()
        self.t_edge = t
        d = 1 if step == 1 else -1
        self.pos += d
        if self.pos - self._mark >= self._seg or self._mark - self.pos >= self._seg:
            self._quarter(t, 1 if self.pos > self._mark else -1)

    def _quarter(self, t, d):
        self._mark = self.pos
        if d != self.dir:
            self.dir = d  # turned round: the period starts over
            self._qn = 0
            self.period_us = 0
        i = self._qi
        if self._qn >= _QUARTERS:
            self.period_us = ticks.diff(t, self._qt[i])
        else:
            self._qn += 1
        self._qt[i] = t
        self._qi = (i + 1) % _QUARTERS

    def _restart(self):
        self.dir = 0
        self.period_us = 0
        self._qn = 0
        self._mark = self.pos

    def poll(self, now):
        """Declare the rotor stopped when no edge came for stop_ms."""
        if self.t_edge is not None and ticks.diff(now, self.t_edge) > self.stop_us:
            self.t_edge = None
            self._restart()

    def turning(self):
        return self.dir != 0
