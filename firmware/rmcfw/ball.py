# The ball on the track: passes, direction, revolution periods and count from the two
# ball-track sensors BALL_A and BALL_B, a few degrees apart (wheel.json ball_sensor_angles_deg).
#
# The ball trips both sensors in a short gap each lap; which one comes first gives its
# direction (+1 = CW = A then B). A pass is stamped with A's time whatever the direction, so
# periods are measured on one sensor. An edge left without its partner within pair_us is a
# "lone" edge (a sensor missed the ball): the pass still counts, at A's time estimated from the
# last gap, and the disagreement is counted so the spin can be voided for faulty sensors.
#
# Two edges closer together than a ball can make them were not stamped as it passed: the core
# had its interrupts off (an RP2040's flash erase, 45 ms) and served both IRQs back to back
# after, in pin order (A first), with the time of serving. Their order says nothing: the pass
# counts, both sensors saw it, but its direction is unknown (dir 0), neither reversed nor lone.
from micropython import const

from rmcfw import ticks

_NONE = const(-1)
# The closest two edges of one pass can be: the sensors are 6 degrees apart (wheel.json
# ball_sensor_angles_deg) and the fastest lap is the launch's, 0.4 s at the quickest
# (rmc sim's launch_period_s: 0.40-0.60 s), so 6.7 ms; at twice that speed still 3.3 ms. Edges
# held by interrupts off are served tens of microseconds apart. 1 ms lies well between.
_TOGETHER_US = const(1000)


class Ball:
    def __init__(self, pair_ms=120):
        self.pair_us = pair_ms * 1000
        self.reset()

    def reset(self):
        """A new spin: forget passes (the direction of the last spin is kept in the spin)."""
        self.count = 0  # passes (revolutions) since reset
        self.t_pass = 0  # time of the last pass (A's clock)
        self.period_us = 0  # last revolution
        self.dir = 0  # direction of the last paired pass (0: its edges came together)
        self.lone = 0  # edges without partner since reset
        self.together = 0  # passes whose two edges came together: direction unknown
        self.reversed = 0  # paired passes against the first pass's direction
        self.first_dir = 0
        self._pend = _NONE  # channel (0 A, 1 B) of an edge waiting for its partner
        self._pend_t = 0
        self._gap = 0  # last A-to-B gap (signed), to place a lone B edge on A's clock
        self.paired = False  # the last pass was seen by both sensors

    def restart(self):
        """The pass just recorded launches a spin: count from it."""
        self.count = 1
        self.period_us = 0
        self.lone = 0
        self.reversed = 0
        self.together = 0
        # (0 when that pass's edges came together: the spin waits for a pass with a direction)
        self.first_dir = self.dir if self.paired else 0

    def edge(self, t, ch_b):
        """An edge of A (ch_b 0) or B (ch_b 1). Returns 1 when a pass was recorded."""
        p = self._pend
        if p != _NONE:
            dt = ticks.diff(t, self._pend_t)
            if p != ch_b and dt <= self.pair_us:
                self._pend = _NONE
                if dt < _TOGETHER_US:  # served together: seen by both, order unknown
                    self.together += 1
                    self._pass(self._pend_t, 0, True)
                elif p == 0:  # A then B
                    self._gap = dt
                    self._pass(self._pend_t, 1)
                else:
                    self._gap = -dt
                    self._pass(t, -1)
                return 1
            # the waiting edge never got its partner
            self._lone()
            self._pend = ch_b
            self._pend_t = t
            return 1
        self._pend = ch_b
        self._pend_t = t
        return 0

    def poll(self, now):
        """Close a waiting edge whose partner did not come in time. Returns 1 on a pass."""
        if self._pend != _NONE and ticks.diff(now, self._pend_t) > self.pair_us:
            self._lone()
            return 1
        return 0

    def _lone(self):
        self.lone += 1
        t = self._pend_t
        if self._pend == 1:
            t = ticks.add(t, -self._gap)
        self._pend = _NONE
        self._pass(t, 0, False)

    def _pass(self, t, d, both=True):
        """A pass at A's time t, direction d (0: unknown), seen by both sensors or not."""
        self.paired = both
        if both:
            self.dir = d
        if self.count:
            self.period_us = ticks.diff(t, self.t_pass)
        self.count += 1
        self.t_pass = t
        if d:
            if not self.first_dir:
                self.first_dir = d
            elif d != self.first_dir:
                self.reversed += 1
