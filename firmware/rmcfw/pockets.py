# The 39 pocket sensors, read as scan snapshots from the 74HC165 chain (>= 1 kHz), or one
# channel at a time when a host replays a trace.
#
# A snapshot is 5 bytes: pocket channel i is bit (7 - i % 8) of byte i // 8 (hardware/
# pico_pins.json, "bit_order"), 1 = ball (or something) in the pocket. This module only keeps
# the picture and its timing: how many pockets are held, which one, since when. What that means
# (rest, object, ball out) depends on the spin and is decided in spin.py.
#
# Channels found stuck on are masked (ignored) until they are seen off again; a channel never
# seen on over many results is reported stuck off.
from array import array

from micropython import const

from rmcfw import channels

NBYTES = const(5)
_LAST_BITS = const(0xFE)  # byte 4 holds channels 32..38 in its top 7 bits
_KEEP = bytes((0xFF, 0xFF, 0xFF, 0xFF, _LAST_BITS))  # the pocket bits of each byte


def _count(buf):
    n = 0
    for b in buf:
        while b:
            b &= b - 1
            n += 1
    return n


def _first(buf):
    for i in range(NBYTES):
        if buf[i]:
            return 8 * i + 7 - _first_bit(buf[i])
    return -1


class Pockets:
    def __init__(self, stuck_off_results=300):
        self.raw = bytearray(NBYTES)  # as read
        self.mask = bytearray(NBYTES)  # channels ignored (stuck on)
        self.bits = bytearray(NBYTES)  # raw & ~mask: what the spin sees
        self._mark = bytearray(NBYTES)  # channels held at mark()
        self._fell = bytearray(NBYTES)  # channels seen off since mark()
        self.count = 0  # channels held in bits
        self.first = -1  # lowest held channel, -1 none
        self.since = 0  # time bits last changed
        self.stuck_off_results = stuck_off_results
        self.unseen = array("H", bytes(2 * channels.POCKETS))  # results since each was last on

    # --- input ---

    def scan(self, t, buf):
        """A snapshot of the chain (5 bytes, see above). Returns 1 if an input changed."""
        # (few locals: a frame over 11 words is taken from the heap at each call)
        changed = 0
        i = 0
        while i < NBYTES:
            b = buf[i] & _KEEP[i]  # the chain's 40th input is not a pocket
            if b != self.raw[i]:
                self._fell[i] |= self.raw[i] & ~b
                self.raw[i] = b
                changed = 1
            i += 1
        if changed:
            self._update(t)
        return changed

    def set(self, t, ch, level):
        """One channel's level (trace replay). Returns 1 if it changed."""
        if not 0 <= ch < channels.POCKETS:
            raise ValueError("no pocket channel %d" % ch)
        i = ch >> 3
        bit = 1 << (7 - (ch & 7))
        old = self.raw[i]
        new = old | bit if level else old & ~bit
        if new == old:
            return 0
        self._fell[i] |= old & ~new
        self.raw[i] = new
        self._update(t)
        return 1

    def _update(self, t):
        changed = 0
        for i in range(NBYTES):
            if self.mask[i] & self._fell[i]:
                self.mask[i] &= ~self._fell[i]  # a stuck channel seen off: trusted again
            b = self.raw[i] & ~self.mask[i]
            if b != self.bits[i]:
                self.bits[i] = b
                changed = 1
        if changed:
            self.count = _count(self.bits)
            self.first = _first(self.bits)
            self.since = t
        return changed

    # --- queries ---

    def held(self, ch):
        return (self.bits[ch >> 3] >> (7 - (ch & 7))) & 1

    def mark(self):
        """Remember what is held now (at a launch) to find channels held throughout."""
        for i in range(NBYTES):
            self._mark[i] = self.raw[i]
            self._fell[i] = 0

    def fresh(self):
        """1 when a channel is held that was not held at mark(), or was let go since."""
        for i in range(NBYTES):
            if self.bits[i] & (~self._mark[i] | self._fell[i]):
                return 1
        return 0

    def fresh_count(self):
        """How many channels are held that were not held at mark(), or were let go since."""
        n = 0
        for i in range(NBYTES):
            b = self.bits[i] & (~self._mark[i] | self._fell[i])
            while b:
                b &= b - 1
                n += 1
        return n

    def mask_held(self, t):
        """Mask every channel held now (found stuck on); the lowest, or -1 when none."""
        found = _first(self.bits)
        if found >= 0:
            for i in range(NBYTES):
                self.mask[i] |= self.bits[i]
                self._fell[i] &= ~self.bits[i]  # an older release must not unmask it at once
            self._update(t)
        return found

    def stuck_on(self, t):
        """Channels held since mark() without a break: mask them. Returns the lowest, or -1."""
        found = -1
        for i in range(NBYTES):
            s = self._mark[i] & ~self._fell[i] & self.raw[i] & ~self.mask[i]
            if s:
                self.mask[i] |= s
                if found < 0:
                    found = 8 * i + 7 - _first_bit(s)
        if found >= 0:
            self._update(t)
        return found

    def masked(self):
        """Lowest masked (stuck on) channel, -1 when none."""
        return _first(self.mask)

    def result_seen(self, ch):
        """A result in channel ch. Returns the first channel unseen for too many results, or -1."""
        u = self.unseen
        stuck = -1
        for i in range(channels.POCKETS):
            if i == ch:
                u[i] = 0
            elif u[i] < 0xFFFF:
                u[i] += 1
                if u[i] == self.stuck_off_results and stuck < 0:
                    stuck = i
        return stuck

    def stuck_off(self):
        """Lowest channel unseen for stuck_off_results results, or -1."""
        for i in range(channels.POCKETS):
            if self.unseen[i] >= self.stuck_off_results:
                return i
        return -1


def _first_bit(b):
    bit = 7
    while not b & (1 << bit):
        bit -= 1
    return bit
