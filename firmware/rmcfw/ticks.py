# Wrap-around arithmetic on the microsecond tick clock (MicroPython's time.ticks_us).
#
# The core never reads a clock: callers pass time stamps in. Stamps are kept to 30 bits so
# they stay small ints on a 32-bit MCU (no heap), exactly like ticks_us on the RP2040; the host
# masks its own (longer) trace times the same way. Every interval the core measures is far
# below the half period (~537 s), so differences are exact.
from micropython import const

MASK = const(0x3FFFFFFF)
_HALF = const(0x20000000)


def wrap(t):
    return t & MASK


def diff(a, b):
    """a - b on the wrapped clock, as a signed number of microseconds."""
    d = (a - b) & MASK
    if d >= _HALF:
        d = d - MASK - 1  # MASK + 1 would be a long int on the board
    return d


def add(t, d):
    return (t + d) & MASK
