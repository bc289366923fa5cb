# Ring buffer of sensor edges, filled by hard IRQ handlers, drained by the main loop.
#
# MicroPython's ISR rules: a hard IRQ handler must not allocate. push() only stores small ints
# into preallocated arrays; a full buffer drops the edge and counts it (never blocks).
#
# No interrupt is ever disabled: each shared cell has a single writer. The ISR writes the head
# and the running total of edges lost; the loop writes the tail and what of that total it has
# already reported.
from array import array

from micropython import const

_HEAD = const(0)
_TAIL = const(1)
_LOST = const(2)
_WRAP = const(0x3FFFFFFF)  # counts stay small ints: reading them in the ISR allocates nothing


class Edges:
    def __init__(self, size=256):
        if size < 2 or size & (size - 1):
            raise ValueError("size must be a power of two")
        self._mask = size - 1
        self._t = array("L", [0] * size)  # "L" is 8 bytes on CPython
        self._ch = bytearray(size)
        self._v = bytearray(size)
        self._i = array("L", (0, 0, 0))  # head (ISR), tail (loop), edges lost in all (ISR)
        self._reported = 0  # of the edges lost in all, those lost() has returned (loop)

    def push(self, t, ch, v):
        """Store one edge (ISR-safe: allocates nothing)."""
        i = self._i
        h = i[_HEAD]
        n = (h + 1) & self._mask
        if n == i[_TAIL]:
            i[_LOST] = (i[_LOST] + 1) & _WRAP  # only ever increased here, never cleared
            return
        self._t[h] = t & 0x3FFFFFFF
        self._ch[h] = ch
        self._v[h] = v
        i[_HEAD] = n

    def drain(self, sink, limit=64):
        """Call sink(t, ch, v) for up to `limit` stored edges, oldest first; returns how many."""
        i = self._i
        n = 0
        while n < limit:
            tail = i[_TAIL]
            if tail == i[_HEAD]:
                break
            sink(self._t[tail], self._ch[tail], self._v[tail])
            i[_TAIL] = (tail + 1) & self._mask
            n += 1
        return n

    def pending(self):
        return (self._i[_HEAD] - self._i[_TAIL]) & self._mask

    def lost(self):
        """Edges dropped because the buffer was full, since the last call.

        Not read-then-clear: an overflow counted by the ISR between the two would be lost.
        The total is read once; what is new since the last call is the difference."""
        total = self._i[_LOST]
        n = (total - self._reported) & _WRAP
        self._reported = total
        return n
