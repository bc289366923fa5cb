# The predictor's work as resumable steps (docs/firmware.md, "The predictor": in slices).
#
# A refit takes tens of ms on the chip: too long for one pass of the 1 ms main loop. Its parts
# are generators, chained with `yield from`, that return their result at the end. At each
# checkpoint (inside each row of a fit, at each iteration) they ask over(), and yield only
# when the slice's time is up: one resumption of the chain a slice, not one a checkpoint
# (each costs a call per generator in the chain). The table's predictor runs them a slice at
# a time (rmcfw.rnvp.Predictor.work); everyone else runs them to the end at once with run(),
# which gives exactly what the same steps give in slices.
from micropython import const

SLICE_US = const(500)  # a slice stops at its first checkpoint after this long, at most
_MASK = const(0x3FFFFFFF)  # the ticks clock's (rmcfw.ticks)

_clock = None  # the slice under way: its clock (None: no slicing) ...
_start = 0  # ... when it began ...
_budget = SLICE_US  # ... and how long it may run (µs)


def begin(clock, budget=SLICE_US):
    """A slice begins now, on clock (a ticks_us function), or none when clock is None. It
    stops at its first checkpoint after budget µs (SLICE_US at most; 0 or less: at its
    first checkpoint, so that each slice gets on)."""
    global _clock, _start, _budget
    _clock = clock
    _budget = budget if budget < SLICE_US else SLICE_US
    if clock is not None:
        _start = clock()


def over():
    """The slice's time is up (never without a clock): a checkpoint yields."""
    clock = _clock
    return clock is not None and (clock() - _start) & _MASK >= _budget


def step(steps, clock, budget=SLICE_US):
    """One slice of steps on clock (all of them without one), of budget µs (begin()): True
    once they have ended."""
    begin(clock, budget)
    for _ in steps:
        return False  # the steps yield only when the slice's time is up
    return True


def run(steps):
    """Run resumable steps to their end at once, unsliced: their result."""
    begin(None)
    while True:
        try:
            next(steps)
        except StopIteration as e:
            return e.value
