# When « rien ne va plus » comes (issue 26): `lead_ms` (or `lead_revs`) before the predicted
# drop, the safe lead, plus each spin a random extra lead drawn uniformly in 0..lead_window_ms.
# A device clocking the ball cannot know how long it has: the call comes earlier than the
# safe lead by a chance amount, never later.
#
# The extra is drawn when a spin starts (Predictor.reset) and taken off the predictor's call
# (due()): the same for a lead in seconds or in revolutions. The safety limit's call (a lap
# too long) is not moved: it is the fallback, already as early as a lap allows.
#
# The random source is passed in (the board's): on the Pico the ROSC's random bits
# (os.urandom), nothing to learn from the calls; under CPython and the virtual board a seeded
# generator, so that tests and replays draw the same extras.
#
# A SET that can make the call later (later()) needs role=engineer in the command: every path
# to the firmware's wire (the service, a script with the table's key, the rig, the virtual
# board's UART) is held to it, and the CFG frame says who asked and as what.
from micropython import const

from rmcfw import rnvp, ticks

SEED = const(0x2545F491)  # the seeded source's default seed (a small int on the board)
_M32 = 0xFFFFFFFF  # (not const: a long int on the board)
_WARM = const(8)  # outputs dropped after seeding
_MASK = const(0x3FFFFFFF)  # the ticks clock's (rmcfw.ticks) ...
_HALF = const(0x20000000)  # ... and half its period
_TRIES = const(16)  # rejected draws at most (each is rejected less than half the time)
ROLE = "engineer"  # the role a later call needs (the SET's `role`)
A_ENGINEER = "engineer"  # ACK detail of a SET refused for want of it
KEYS = ("lead_ms", "lead_revs", "lead_window_ms")  # the settings of the lead


class Seeded:
    """A reproducible source: xorshift32 (Marsaglia 2003). Not alone on a real table: the
    calls it times could be learned; the Pico mixes in its hardware bits (Hardware)."""

    def __init__(self, seed=SEED):
        self.x = (seed & _M32) or SEED  # 0 is xorshift's one fixed point
        for _ in range(_WARM):
            self.bits32()  # a small seed's first outputs are small too

    def bits32(self):
        x = self.x
        x ^= (x << 13) & _M32
        x ^= x >> 17
        x ^= (x << 5) & _M32
        self.x = x
        return x

    def upto(self, n):
        """An int uniform in 0..n (0 <= n < 65536)."""
        return _upto(self.bits16, n)

    def bits16(self):
        return self.bits32() >> 16


class Hardware(Seeded):
    """Hardware random bytes (on the Pico os.urandom: the ROSC's random bit), mixed with the
    seeded sequence: a port whose bits are all 0 (an emulator without a ROSC) still draws."""

    def __init__(self, urandom, seed=SEED):
        super().__init__(seed)
        self.urandom = urandom

    def bits16(self):
        b = self.urandom(2)
        return (b[0] | (b[1] << 8)) ^ (self.bits32() >> 16)


def _upto(bits16, n):
    m = n + 1
    top = 65536 - 65536 % m  # rejection: no value favoured
    for _ in range(_TRIES):
        x = bits16()
        if x < top:
            return x % m
    return x % m  # a source stuck high: a draw all the same, never a hang


def source(board=None):
    """The board's random source (its `rand`), or a seeded one."""
    r = getattr(board, "rand", None) if board is not None else None
    return r if r is not None else Seeded()


class Predictor(rnvp.Predictor):
    """The predictor with the lead window: window_ms (set from lead_window_ms by
    Spin.apply_cfg) and, for the spin under way, extra_ms drawn at reset()."""

    def __init__(self, rand=None, **kw):
        self.rand = rand if rand is not None else Seeded()
        self.window_ms = 0
        self.extra_ms = 0
        self._extra_us = 0
        super().__init__(**kw)  # (calls reset())

    def reset(self, t0):
        super().reset(t0)
        w = self.window_ms
        self.extra_ms = self.rand.upto(w) if w > 0 else 0
        self._extra_us = self.extra_ms * 1000

    def due(self, now):
        # the fitted call comes extra_ms earlier: due that much ahead of its deadline
        if self._extra_us and self.why == rnvp.WHY_FIT:
            now = ticks.add(now, self._extra_us)
        # ticks.diff(now, deadline) >= 0 without its call (each pass while the ball runs)
        return (now - self.deadline) & _MASK < _HALF


def later(cfg, key, new):
    """Whether setting key to new could bring the call later than now: a lead or its window
    lowered, or the lead switched between seconds and revolutions (not comparable)."""
    if key == "lead_revs":
        old = cfg.lead_revs
        return new < old or (old == 0 and new > 0)
    if key == "lead_ms" or key == "lead_window_ms":
        return new < getattr(cfg, key)
    return False


def describe(lead_ms, lead_revs, window_ms):
    """The lead in force in a few words: "1000 ms", "3 revs", "1000 ms + 0-500 ms"."""
    text = "%d revs" % lead_revs if lead_revs > 0 else "%d ms" % lead_ms
    if window_ms > 0:
        text += " + 0-%d ms" % window_ms
    return text
