# ruff: noqa: UP031  (MicroPython source: %-formatting kept)
# Simulated `machine` module of the virtual board (MicroPython, runs in the WebAssembly port).
#
# The Node side (host/node/vboard_worker.mjs, module `_vbhw`) owns the virtual clock, the
# sensor schedule, pin levels, the 74HC165 chain, the UART sockets, timers and watchdog.
# This module gives the firmware the rp2 `machine` API on top of it and calls IRQ handlers
# when the clock reaches an edge: hard handlers under micropython.heap_lock(), as on a board
# where an allocating hard handler fails. Edges are delivered inside time/machine calls
# (sleep, ticks, Pin.value, ...), the only places where the firmware can observe time.
import json
import sys

import _vbhw as _hw
import micropython
import uctypes

_CFG = json.loads(_hw.config())
# Bridge functions bound once: each attribute lookup on the JS module would allocate a new
# proxy object, which a hard IRQ handler (heap locked) cannot afford.
_hw_epoch_frac_us = _hw.epoch_frac_us
_hw_epoch_s = _hw.epoch_s
_hw_irq_error = _hw.irq_error
_hw_mask = _hw.mask
_hw_pin_cfg = _hw.pin_cfg
_hw_pin_get = _hw.pin_get
_hw_pin_irq = _hw.pin_irq
_hw_pin_set = _hw.pin_set
_hw_poll = _hw.poll
_hw_reset = _hw.reset
_hw_reset_cause = _hw.reset_cause
_hw_soft_reset = _hw.soft_reset
_hw_spi_byte = _hw.spi_byte
_hw_ticks_ms = _hw.ticks_ms
_hw_ticks_us = _hw.ticks_us
_hw_timer_start = _hw.timer_start
_hw_timer_stop = _hw.timer_stop
_hw_uart_any = _hw.uart_any
_hw_uart_readinto = _hw.uart_readinto
_hw_uart_write = _hw.uart_write
_hw_until = _hw.until
_hw_wait = _hw.wait
_hw_wdt_feed = _hw.wdt_feed
_hw_wdt_start = _hw.wdt_start

PWRON_RESET = 1
HARD_RESET = 2
WDT_RESET = 3
DEEPSLEEP_RESET = 4
SOFT_RESET = 5

_NPINS = 30  # RP2040 GPIO0..29
_handlers = [None] * 32
_hard = [False] * 32
_pinobj = [None] * 32
_timers = [None] * 16
_state = [False, 0]  # [inside an IRQ handler, disable_irq depth]
stats = {"irq_errors": 0, "irqs": 0}


def _call(handler, arg, hard):
    # No allocation here while the heap is locked: the handler's frame is on the pystack.
    _state[0] = True
    if hard:
        micropython.heap_lock()
    try:
        handler(arg)
    except BaseException as e:  # a board prints any exception from an IRQ
        if hard:
            micropython.heap_unlock()
            hard = False
        _state[0] = False
        _irq_failed(handler, arg, e)
    finally:
        if hard:
            micropython.heap_unlock()
        _state[0] = False


def _irq_failed(handler, arg, e):
    # As MicroPython does: report it, then disable that IRQ so it does not fire again.
    stats["irq_errors"] += 1
    print("Uncaught exception in IRQ callback handler")
    sys.print_exception(e)
    if isinstance(e, MemoryError):
        print("(memory allocation failed, heap is locked: a hard IRQ handler must not allocate)")
    if isinstance(arg, Pin):
        arg.irq(None)
    elif isinstance(arg, Timer):
        arg.deinit()
    _hw_irq_error(repr(e))


def _dispatch(ev):
    if ev == -2:
        raise KeyboardInterrupt
    stats["irqs"] += 1
    if ev >= 1000:
        t = _timers[ev - 1000]
        if t is not None and t._cb is not None:
            _call(t._cb, t, t._hard)
        return
    p = ev >> 1
    h = _handlers[p]
    if h is not None:
        _call(h, _pinobj[p], _hard[p])


def _drain():
    """Deliver every edge due by now (and raise KeyboardInterrupt on Ctrl-C)."""
    if _state[0] or _state[1]:
        return
    while True:
        ev = _hw_poll()
        if ev == -1:
            return
        _dispatch(ev)


def _sleep_us(us):
    if us <= 0:
        _drain()
        return
    _hw_wait(us if us < 0x20000000 else float(us))
    if _state[0]:
        # a handler that sleeps: time passes, edges wait for it to return
        _hw_mask(1)
        while _hw_until() != -1:
            pass
        _hw_mask(1 if _state[1] else 0)
        return
    while True:
        ev = _hw_until()
        if ev == -1:
            return
        if ev == -2:
            raise KeyboardInterrupt
        if _state[1]:
            continue
        _dispatch(ev)


# --- the virtual clock, installed into `time` by _vboard_boot ------------------------------


def ticks_us():
    if not _state[0]:
        _drain()
    return _hw_ticks_us()


def ticks_ms():
    if not _state[0]:
        _drain()
    return _hw_ticks_ms()


def sleep_us(us):
    _sleep_us(int(us))


def sleep_ms(ms):
    _sleep_us(int(ms) * 1000)


def sleep(s):
    _sleep_us(int(s * 1000000))


def time():
    return _hw_epoch_s()


def time_ns():
    return _hw_epoch_s() * 1000000000 + _hw_epoch_frac_us() * 1000


# --- machine API ------------------------------------------------------------------------


def _pin_id(pin):
    if isinstance(pin, Pin):
        return pin._id
    if isinstance(pin, str):
        name = pin.upper()
        if name == "LED":
            return _CFG["led"]
        for prefix in ("GPIO", "GP"):
            if name.startswith(prefix) and name[len(prefix) :].isdigit():
                pin = int(name[len(prefix) :])
                break
        else:
            raise ValueError("unknown named pin %r" % (pin,))
    if not isinstance(pin, int) or not 0 <= pin < _NPINS:
        raise ValueError("invalid pin %r" % (pin,))
    return pin


class _PinIRQ:
    def __init__(self, pin):
        self._pin = pin

    def trigger(self, trigger=None):
        return self._pin._trigger

    def flags(self):
        return self._pin._trigger


class Pin:
    IN = 0
    OUT = 1
    OPEN_DRAIN = 2
    ALT = 3
    PULL_UP = 1
    PULL_DOWN = 2
    IRQ_LOW_LEVEL = 1
    IRQ_HIGH_LEVEL = 2
    IRQ_FALLING = 4
    IRQ_RISING = 8

    def __init__(self, id, mode=-1, pull=-1, *, value=None, alt=-1):
        self._id = _pin_id(id)
        self._mode = Pin.IN
        self._pull = 0
        self._trigger = 0
        self.init(mode, pull, value=value)

    def init(self, mode=-1, pull=-1, *, value=None, alt=-1):
        if mode != -1:
            if mode not in (Pin.IN, Pin.OUT, Pin.OPEN_DRAIN, Pin.ALT):
                raise ValueError("invalid pin mode %r" % (mode,))
            self._mode = mode
        if pull != -1:
            if pull not in (None, 0, Pin.PULL_UP, Pin.PULL_DOWN):
                raise ValueError("invalid pull %r" % (pull,))
            self._pull = pull or 0
        if value is not None:
            _hw_pin_set(self._id, 1 if value else 0)
        _hw_pin_cfg(self._id, self._mode, self._pull)

    def value(self, v=None):
        if v is None:
            if not _state[0]:
                _drain()
            return _hw_pin_get(self._id)
        _hw_pin_set(self._id, 1 if v else 0)
        return None

    def __call__(self, v=None):
        return self.value(v)

    def on(self):
        _hw_pin_set(self._id, 1)

    def off(self):
        _hw_pin_set(self._id, 0)

    high = on
    low = off

    def toggle(self):
        _hw_pin_set(self._id, 1 - _hw_pin_get(self._id))

    def mode(self, mode=None):
        if mode is None:
            return self._mode
        self.init(mode)
        return None

    def pull(self, pull=None):
        if pull is None:
            return self._pull
        self.init(-1, pull)
        return None

    def irq(self, handler=None, trigger=IRQ_FALLING | IRQ_RISING, *, hard=False):
        if handler is not None and not callable(handler):
            raise TypeError("IRQ handler must be callable")
        if trigger & ~(Pin.IRQ_FALLING | Pin.IRQ_RISING):
            raise ValueError("only edge triggers are simulated")
        p = self._id
        _handlers[p] = handler
        _hard[p] = bool(hard)
        _pinobj[p] = self if handler is not None else None
        self._trigger = trigger if handler is not None else 0
        _hw_pin_irq(p, self._trigger)
        return _PinIRQ(self)

    def __repr__(self):
        return "Pin(GPIO%d, mode=%s)" % (self._id, ("IN", "OUT", "OPEN_DRAIN", "ALT")[self._mode])


class Signal:
    def __init__(self, pin, *args, invert=False, **kw):
        self._pin = pin if isinstance(pin, Pin) else Pin(pin, *args, **kw)
        self._inv = 1 if invert else 0

    def value(self, v=None):
        if v is None:
            return self._pin.value() ^ self._inv
        self._pin.value((1 if v else 0) ^ self._inv)
        return None

    def on(self):
        self.value(1)

    def off(self):
        self.value(0)


class SPI:
    MSB = 0
    LSB = 1
    CONTROLLER = 0

    def __init__(self, id, baudrate=1000000, *, polarity=0, phase=0, bits=8, firstbit=0, **pins):
        if id not in (0, 1):
            raise ValueError("SPI(%r) doesn't exist" % (id,))
        self._id = id
        self.init(baudrate, polarity=polarity, phase=phase, bits=bits, firstbit=firstbit, **pins)

    def init(self, baudrate=1000000, *, polarity=0, phase=0, bits=8, firstbit=0, **pins):
        if bits != 8:
            raise ValueError("only 8-bit SPI is simulated")
        for key, pin in pins.items():
            if key not in ("sck", "mosi", "miso"):
                raise TypeError("unexpected keyword argument %r" % (key,))
            if pin is not None:
                _pin_id(pin)
        self._baud = baudrate

    def deinit(self):
        pass

    def readinto(self, buf, write=0):
        for i in range(len(buf)):
            buf[i] = _hw_spi_byte(self._id)

    def read(self, nbytes, write=0):
        buf = bytearray(nbytes)
        self.readinto(buf, write)
        return bytes(buf)

    def write(self, buf):
        pass

    def write_readinto(self, write_buf, read_buf):
        self.readinto(read_buf)


def _ticks_diff(a, b):
    d = (a - b) & 0x3FFFFFFF
    return d - 0x40000000 if d >= 0x20000000 else d


class UART:
    # As rp2's: a TX ring of `txbuf` bytes (default 256) and the UART's 32-byte FIFO, which
    # the line drains at the baud rate, here on the virtual clock. write() puts what fits
    # and waits (busy: virtual time passes, IRQs are served) for room for the rest, then
    # returns the count; txdone() is True once the last bit is out. Bytes reach the socket
    # when written: only the sender's view of the line is timed.
    def __init__(self, id, baudrate=115200, bits=8, parity=None, stop=1, **kw):
        if id not in (0, 1):
            raise ValueError("UART(%r) doesn't exist" % (id,))
        self._id = id
        self._end = 0  # virtual ticks_us when the last byte written is out
        self._busy = False
        self.init(baudrate, bits, parity, stop, **kw)

    def init(self, baudrate=115200, bits=8, parity=None, stop=1, **kw):
        for key in kw:
            if key not in (
                "tx",
                "rx",
                "txbuf",
                "rxbuf",
                "timeout",
                "timeout_char",
                "invert",
                "flow",
                "cts",
                "rts",
            ):
                raise TypeError("unexpected keyword argument %r" % (key,))
        if baudrate <= 0:
            raise ValueError("bad baudrate")
        for key in ("txbuf", "rxbuf"):
            if kw.get(key, 0) > 32766:
                raise ValueError("%s too large" % key)
        self._baud = baudrate
        self._timeout = kw.get("timeout", 0)
        self._cap = max(32, kw.get("txbuf", 0) or 256) + 32  # the ring and the FIFO
        # one character on the line (start, data, parity, stop bits), in ns, rounded up
        nbits = 1 + bits + (0 if parity is None else 1) + stop
        self._char_ns = (nbits * 1000000000 + baudrate - 1) // baudrate

    def deinit(self):
        pass

    def any(self):
        return _hw_uart_any(self._id)

    def _pending(self, now):
        left = _ticks_diff(self._end, now) if self._busy else 0
        if left <= 0 or left > self._cap * self._char_ns // 1000 + 1:
            self._busy = False  # (out long ago: a ticks difference wraps after ~9 min)
            return 0
        return (left * 1000 + self._char_ns - 1) // self._char_ns

    def write(self, buf):
        if isinstance(buf, str):
            buf = buf.encode()
        n = len(buf)
        if not n:
            return 0
        now = _hw_ticks_us()
        over = self._pending(now) + n - self._cap
        if over > 0:  # no room for it all: rp2's write waits for the line to take enough
            _sleep_us((over * self._char_ns + 999) // 1000)
            now = _hw_ticks_us()
        _hw_uart_write(self._id, uctypes.addressof(buf), n)
        start = self._end if self._pending(now) else now
        self._end = (start + (n * self._char_ns + 999) // 1000) & 0x3FFFFFFF
        self._busy = True
        return n

    def _wait(self):
        # timeout (ms) on the virtual clock: data from the host arrives on the wall clock
        waited = 0
        while not _hw_uart_any(self._id) and waited < self._timeout:
            _sleep_us(1000)
            waited += 1

    def readinto(self, buf, nbytes=-1):
        if nbytes < 0 or nbytes > len(buf):
            nbytes = len(buf)
        if self._timeout:
            self._wait()
        n = _hw_uart_readinto(self._id, uctypes.addressof(buf), nbytes) if nbytes else 0
        return n or None

    def read(self, nbytes=-1):
        if self._timeout:
            self._wait()
        avail = _hw_uart_any(self._id)
        if nbytes < 0 or nbytes > avail:
            nbytes = avail
        if not nbytes:
            return None
        buf = bytearray(nbytes)
        _hw_uart_readinto(self._id, uctypes.addressof(buf), nbytes)
        return bytes(buf)

    def readline(self):
        out = bytearray()
        while _hw_uart_any(self._id):
            b = self.read(1)
            out += b
            if b == b"\n":
                break
        return bytes(out) if out else None

    def flush(self):
        if self._busy:
            left = _ticks_diff(self._end, _hw_ticks_us())
            if left > 0:
                _sleep_us(left)

    def txdone(self):
        return self._pending(_hw_ticks_us()) == 0

    def sendbreak(self):
        pass


class Timer:
    ONE_SHOT = 0
    PERIODIC = 1

    def __init__(self, id=-1, **kw):
        self._slot = -1
        self._cb = None
        self._hard = False
        if kw:
            self.init(**kw)

    def init(self, *, mode=PERIODIC, freq=-1, period=-1, tick_hz=1000, callback=None, hard=False):
        self.deinit()
        if freq > 0:
            us = int(1000000 / freq)
        elif period >= 0:
            us = int(period * 1000000 // tick_hz)
        else:
            raise ValueError("need a period or a freq")
        if mode not in (Timer.ONE_SHOT, Timer.PERIODIC):
            raise ValueError("invalid mode")
        for i in range(len(_timers)):
            if _timers[i] is None:
                self._slot = i
                break
        else:
            raise OSError(12)  # ENOMEM: out of timers
        self._cb = callback
        self._hard = bool(hard)
        _timers[self._slot] = self
        _hw_timer_start(self._slot, max(1, us), 1 if mode == Timer.ONE_SHOT else 0)

    def deinit(self):
        if self._slot >= 0:
            _hw_timer_stop(self._slot)
            _timers[self._slot] = None
            self._slot = -1


class WDT:
    def __init__(self, id=0, timeout=5000):
        if not 1 <= timeout <= 8388:  # the RP2040 watchdog's range, in ms
            raise ValueError("WDT timeout out of range (1..8388 ms)")
        _hw_wdt_start(timeout * 1000)

    def feed(self):
        _hw_wdt_feed()


class RTC:
    """The RTC runs on the virtual clock; setting it moves time.time() and time.localtime()."""

    def datetime(self, dt=None):
        import time as _t

        if dt is not None:
            if len(dt) != 8:
                raise ValueError("requested length 8 but object has length %d" % len(dt))
            y, mo, d, _wd, h, mi, s, _sub = dt
            _hw.rtc_set(_t.mktime((y, mo, d, h, mi, s, 0, 0)), 0)
            return None
        y, mo, d, h, mi, s, wd, _ = _t.localtime()
        return (y, mo, d, wd, h, mi, s, 0)


def reset():
    _hw_reset()


def soft_reset():
    _hw_soft_reset()


def reset_cause():
    return _hw_reset_cause()


def unique_id():
    return b"\xe6\x61\x38\x83\x4f\x2a\x2b\x01"


def freq(hz=None):
    if hz is None:
        return _CFG["freq"]
    _CFG["freq"] = hz
    return None


def idle():
    _sleep_us(1000)


def lightsleep(ms=None):
    _sleep_us(1000 * (ms if ms is not None else 1000))


def disable_irq():
    state = _state[1]
    _state[1] = state + 1
    _hw_mask(1)
    return state


def enable_irq(state=0):
    _state[1] = state
    if not state:
        _hw_mask(0)
        _drain()


def time_pulse_us(pin, pulse_level, timeout_us=1000000):
    raise OSError(95)  # EOPNOTSUPP: not simulated
