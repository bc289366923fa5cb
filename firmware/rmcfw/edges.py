# Ring buffer of sensor edges, filled by hard IRQ handlers, drained by the main loop.
#
# MicroPython's ISR rules: a hard IRQ handler must not allocate. push() only stores small ints
# into preallocated arrays; a full buffer drops the edge and counts it (never blocks).
from array import array

from micropython import const

_HEAD = const(0)
_TAIL = const(1)
_LOST = const(2)


class Edges:
    def __init__(self, size=256):
        if size < 2 or size & (size - 1):
            raise ValueError("size must be a power of two")
        self._mask = size - 1
        self._t = array("L", [0] * size)  # "L" is 8 bytes on CPython
        self._ch = bytearray(size)
        self._v = bytearray(size)
        self._i = array("L", (0, 0, 0))  # head, tail, edges lost on overflow

    def push(self, t, ch, v):
        """Store one edge (ISR-safe: allocates nothing)."""
        i = self._i
        h = i[_HEAD]
        n = (h + 1) & self._mask
        if n == i[_TAIL]:
            i[_LOST] += 1
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
        """Edges dropped because the buffer was full, since the last call."""
        n = self._i[_LOST]
        self._i[_LOST] = 0
        return n
