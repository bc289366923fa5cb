# Rotor direction and period from its two quadrature sensors (ROTOR_A, ROTOR_B).
#
# Direction +1 (CW seen from above) is A leading B. Each edge of either channel is one count;
# a revolution is 4 * slots counts (hardware/wheel.json geometry.rotor_encoder_slots). The
# period is measured over the last full revolution, refreshed every quarter turn, so a reading
# is always a whole turn's average whatever the slot spacing errors.
#
# The rotor's place (which pocket is under ball sensor A: the dealer's signature, issue 24).
# The disc has a reference mark: one slot wider than the others by an eighth of the pitch
# (wheel.json geometry.rotor_mark_deg), so that, turning either way, the step before its
# first state (AB = 10, "00") is short and the step after ("11") long. Seen once (each step's
# length against the same step a pitch before and after: a smooth speed change makes no such
# dip and bump), the count tells the rotor's angle to a quarter slot for as long as no edge is
# missed: a missed edge (an error, or edges lost by the IRQ buffer) puts the place in doubt
# until the mark passes again. A stop keeps it: a standing rotor is where the count says.
from array import array
from math import floor

from micropython import const

from rmcfw import numbers, ticks

CW = const(1)
CCW = const(-1)

# Quadrature step for (previous state << 2 | state), state = A << 1 | B: 1 forward, 2 backward
# (an edge changes one channel, so the other entries never occur).
_STEP = b"\x00\x02\x01\x00\x01\x00\x00\x02\x02\x00\x00\x01\x00\x01\x02\x00"
_QUARTERS = const(4)
_RING = const(11)  # monotone steps looked at around the mark: two pitches and a half
_MID = const(5)  # the middle one of them: the mark's first state
_MASK = const(0x3FFFFFFF)  # the ticks clock's (rmcfw.ticks) ...
_HALF = const(0x20000000)  # ... and half its period
_HIST = const(16)  # recent edges kept, to place an instant a little in the past on the count
_S10 = const(2)  # the quadrature state A=1, B=0 (ab = A << 1 | B)


def mark_of(wheel, slots):
    """(the count of the mark's first state, sensor A's place) from a wheel definition
    (wheel.json as a dict), or None without the geometry: the pocket under the ball sensor
    cannot be told. The count is the quadrature step q = floor((phi - rotor_sensor) / step)
    mod 4 * slots, phi the rotor's angle (the stator angle of pockets[0]'s centre); sensor
    A's place is (ball_sensor_angles_deg[0] - rotor_sensor_deg) in 1/(2 * counts) of a
    pocket (so that the pocket under it is integer arithmetic: pocket_under)."""
    try:
        geo = wheel["geometry"]
        mark = float(geo["rotor_mark_deg"])
        sensor = float(geo["rotor_sensor_deg"])
        ball = float(geo["ball_sensor_angles_deg"][0])
        if int(geo.get("rotor_encoder_slots", slots)) != slots:
            return None
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    counts = 4 * slots
    q10 = (-4 * floor(mark * slots / 360 + 0.5)) % counts  # (floor: an int in both)
    a2 = floor(2 * (ball - sensor) * numbers.COUNT * counts / 360 + 0.5)
    return q10, a2


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
        # the rotor's place: the reference mark (mark_of) and where the count last saw it
        self.mark_q = -1  # the count of the mark's first state on this wheel; -1: no mark
        self.a2 = 0  # ball sensor A's place (mark_of)
        self.known = False  # the mark seen since the count was last in doubt
        self.ref = 0  # pos while the mark's first state was under sensor A
        self.marks = 0  # passes of the mark seen (diagnostics)
        self._cand = None  # a pass that disagrees with ref: the next one decides
        self._rd = array("L", [0] * _RING)  # lengths (us) of the last monotone steps
        self._rs = bytearray(_RING)  # their states
        self._ri = 0
        self._rn = 0  # monotone steps in the ring (saturates at _RING)
        self._ld = 0  # direction of the last step
        self._ht = array("L", [0] * _HIST)  # times of the last edges
        self._hs = bytearray(_HIST)  # their steps + 1 (0 back, 2 forward)
        self._hi = 0
        self._hn = 0

    def seed(self, a, b):
        """The channels' levels as read at power-up, before any edge: the first edge then
        counts the right way instead of being taken for a missed one."""
        self._ab = (2 if a else 0) | (1 if b else 0)

    def edge(self, t, ch_b, level):
        """One edge: ch_b is 0 for channel A, 1 for channel B; level the new pin level."""
        ab = self._ab
        if ch_b:
            level = (ab & 2) | (1 if level else 0)  # (level: the new state, a local less)
        else:
            level = (ab & 1) | (2 if level else 0)
        if level == ab:
            # an edge that leaves its channel's level as it was: the opposite edge was missed
            self.errors += 1
            self.doubt()
            return
        self._ab = level
        self._moved(t, (ab << 2) | level)

    # (edge, _moved, _keep and _step are apart so that each frame stays on the C stack:
    # MicroPython takes a frame over 11 words from the heap at each call, tests/test_fw_frames)

    def _moved(self, t, q):
        """A step at t, q its transition (the state left << 2 | the new one): its length,
        then the count."""
        d = 1 if _STEP[q] == 1 else -1
        t0 = self.t_edge
        if t0 is not None and ticks.diff(t, t0) > self.stop_us:
            self._restart()
        elif t0 is not None and d == self._ld:
            # the step just left (state q >> 2) was entered and left the same way: its
            # length tells the mark
            self._step(ticks.diff(t, t0), q >> 2, d)
        else:
            self._rn = 0
        self._ld = d
        self.t_edge = t
        self._keep(t, d)

    def _keep(self, t, d):
        """The step at t in the recent edges, and the count moved."""
        i = self._hi
        self._ht[i] = t
        self._hs[i] = d + 1
        self._hi = (i + 1) % _HIST
        if self._hn < _HIST:
            self._hn += 1
        self.pos += d
        if self.pos - self._mark >= self._seg or self._mark - self.pos >= self._seg:
            self._quarter(t, 1 if self.pos > self._mark else -1)

    def _step(self, dt, state, d):
        """A step of `state` lasting dt us, crossed in direction d (self.pos still its
        count). The mark: a state 10 whose 00 before it (in count order) is short and whose
        11 after it is long, each against the same state a pitch before and after."""
        i = self._ri
        self._rd[i] = dt
        self._rs[i] = state
        i = (i + 1) % _RING
        self._ri = i
        if self._rn < _RING:
            self._rn += 1
            if self._rn < _RING:
                return
        # i is now the oldest of the last _RING steps; the middle one is _MID after it, and
        # a step k counts away from it (k > 0: higher count) sits at _MID + k*d in time
        if self._rs[(i + _MID) % _RING] == _S10 and self._is_mark(i + _MID, d):
            self._seen(self.pos - (_RING - 1 - _MID) * d)

    def _is_mark(self, m, d):
        """The steps around the 10 at ring place m (mod _RING) make the mark."""
        rd = self._rd
        z = 5 * rd[(m - d) % _RING]  # the 00 before the mark's 10 (count order), short
        if z >= 4 * rd[(m - 5 * d) % _RING] or z >= 4 * rd[(m + 3 * d) % _RING]:
            return False
        z = 4 * rd[(m + d) % _RING]  # the 11 after it, long
        return z > 5 * rd[(m - 3 * d) % _RING] and z > 5 * rd[(m + 5 * d) % _RING]

    def _seen(self, p):
        """The mark's first state was at count p."""
        if self.mark_q < 0:
            return
        n = self.counts
        if self.known and (p - self.ref) % n:
            # disagrees with the place held (a hand's jolt can mimic the mark): taken only
            # when the next pass agrees with it
            c = self._cand
            self._cand = p
            if c is None or (p - c) % n:
                return
        self._cand = None
        self.ref = p
        self.known = True
        self.marks += 1

    def doubt(self):
        """Edges were missed: the count may have slipped, the place is unknown until the
        mark passes again."""
        self.known = False
        self._cand = None
        self._rn = 0

    def pocket_under(self, t):
        """The pocket channel under ball sensor A at instant t (now, or a little before:
        within the last 16 edges), or -1 when the rotor's place is not known. (At each ball
        pass: its frame, and _pos_at's, within 11 words, off the heap: board_pico.Board.step.)"""
        if not self.known:
            return -1
        p = self._pos_at(t)
        if p is None:
            return -1  # t is before the edges kept
        n = self.counts
        q = (p - self.ref + self.mark_q) % n
        # nearest pocket centre to sensor A, the rotor taken mid-step: a2/(2n) - (q + 1/2)/4
        # pockets for 39 slots, in integers
        return ((self.a2 - (2 * q + 1) * numbers.COUNT + n) // (2 * n)) % numbers.COUNT

    def _pos_at(self, t):
        """The rotor's count at instant t, the edges after it undone; None when t is before
        the edges kept."""
        p = self.pos
        ht = self._ht
        i = self._hi
        k = self._hn
        while k:
            i = (i - 1) % _HIST
            if ticks.diff(ht[i], t) <= 0:
                break
            p -= self._hs[i] - 1  # an edge after t: the count before it
            k -= 1
        else:
            if self._hn == _HIST:
                return None
        return p

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
        self._rn = 0  # (the place is kept: a standing rotor is where the count says)

    def poll(self, now):
        """Declare the rotor stopped when no edge came for stop_ms."""
        t = self.t_edge
        if t is not None:
            # ticks.diff(now, t) > stop_us without its call (every pass while it turns)
            d = (now - t) & _MASK
            if d < _HALF and d > self.stop_us:
                self.t_edge = None
                self._restart()

    def turning(self):
        return self.dir != 0
