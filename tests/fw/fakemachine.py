# A stand-in for MicroPython's `machine` module, enough for firmware/board_pico.py in tests
# (the virtual board engineer's simulated machine is the full one). Pins hold levels set by the
# test; IRQ handlers are called by the test through Pin.trigger().
import sys


class Pin:
    IN = 0
    OUT = 1
    PULL_UP = 1
    PULL_DOWN = 2
    IRQ_RISING = 4
    IRQ_FALLING = 8
    all = {}  # noqa: RUF012 (pins by id, reset by install())
    levels = {}  # noqa: RUF012 (pid -> the level an input reads at power-up, set by a test)

    def __init__(self, pid, mode=None, pull=None, value=None):
        self.id = pid
        self.mode = mode
        self.pull = pull
        self.level = value if value is not None else (1 if pull == Pin.PULL_UP else 0)
        if value is None and pid in Pin.levels:
            self.level = Pin.levels[pid]
        self.handler = None
        self.trig = 0
        self.hard = False
        self.writes = 0
        Pin.all[pid] = self

    def value(self, v=None):
        if v is None:
            return self.level
        self.level = v
        self.writes += 1

    def irq(self, handler=None, trigger=0, hard=False):
        self.handler = handler
        self.trig = trigger
        self.hard = hard

    def trigger(self, level):
        """The test drives the pin: call the IRQ handler as the hardware would."""
        old = self.level
        self.level = level
        rising = level and not old
        falling = old and not level
        if self.handler and (
            (rising and self.trig & Pin.IRQ_RISING) or (falling and self.trig & Pin.IRQ_FALLING)
        ):
            self.handler(self)


class SPI:
    last = None

    def __init__(self, sid, baudrate=0, polarity=0, phase=0, sck=None, miso=None, mosi=None):
        self.id = sid
        self.data = bytearray(5)
        SPI.last = self

    def readinto(self, buf):
        for i in range(len(buf)):
            buf[i] = self.data[i]


class UART:
    """rp2's UART as the board uses it: a TX ring of txbuf bytes (+ a 32-byte FIFO) that the
    line drains at the baud rate, on the test's clock (install(clock)); txdone() True once
    the last byte is out; write() takes what fits and, as rp2's does, waits for room for
    the rest (the clock moves on: `waited_us` counts it, a board must never make it grow).
    Without a clock, bytes leave at once. `out` is every byte written, in order."""

    last = None
    clock = None

    def __init__(self, uid, baudrate=9600, tx=None, rx=None, txbuf=256, rxbuf=256, **kw):
        self.out = bytearray()
        self.inp = bytearray()
        self.txbuf = txbuf
        self.kw = kw
        self.us_per_byte = 10_000_000 // baudrate  # 8N1
        self.end = 0  # when the last byte written will have left (clock.us)
        self.waited_us = 0
        UART.last = self

    def pending(self):
        c = UART.clock
        if c is None or self.end <= c.us:
            return 0
        return -(-(self.end - c.us) // self.us_per_byte)

    def write(self, data):
        c = UART.clock
        n = len(data)
        if c is not None:
            over = self.pending() + n - (self.txbuf + 32)
            if over > 0:  # no room: wait (busy) until the line has taken enough
                wait = over * self.us_per_byte
                c.us += wait
                self.waited_us += wait
            self.end = max(self.end, c.us) + n * self.us_per_byte
        self.out.extend(data)
        return n

    def txdone(self):
        return self.pending() == 0

    def any(self):
        return len(self.inp)

    def read(self, n=None):
        data = bytes(self.inp)
        self.inp = bytearray()
        return data


class Timer:
    PERIODIC = 1
    ONE_SHOT = 0
    last = None

    def __init__(self, id=-1, mode=1, period=-1, freq=-1, callback=None, hard=True):
        self.period = period
        self.callback = callback
        Timer.last = self

    def fire(self):
        self.callback(self)

    def deinit(self):
        self.callback = None


class WDT:
    last = None

    def __init__(self, id=0, timeout=5000):
        self.timeout = timeout
        self.fed = 0
        WDT.last = self

    def feed(self):
        self.fed += 1


PWRON_RESET = 1
WDT_RESET = 3
_cause = [PWRON_RESET]


def reset_cause():
    return _cause[0]


def reset():
    raise SystemExit("machine.reset")


class Clock:
    """time.ticks_* driven by the test."""

    def __init__(self):
        self.us = 0

    def ticks_us(self):
        return self.us & 0x3FFFFFFF

    def ticks_ms(self):
        return (self.us // 1000) & 0x3FFFFFFF

    def ticks_diff(self, a, b):
        d = (a - b) & 0x3FFFFFFF
        return d - 0x40000000 if d >= 0x20000000 else d

    def ticks_add(self, a, d):
        return (a + d) & 0x3FFFFFFF

    def sleep_ms(self, ms):
        self.us += ms * 1000

    def sleep_us(self, us):
        self.us += us


class _Module:
    pass


def install(clock=None):
    """Put this fake in sys.modules as `machine`; returns it. clock: a Clock that the UART's
    line follows (None: bytes leave at once)."""
    m = _Module()
    for name in (
        "Pin",
        "SPI",
        "UART",
        "Timer",
        "WDT",
        "PWRON_RESET",
        "WDT_RESET",
        "reset_cause",
        "reset",
    ):
        setattr(m, name, globals()[name])
    sys.modules["machine"] = m
    Pin.all = {}
    Pin.levels = {}
    UART.clock = clock
    return m
