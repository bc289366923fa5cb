# Raspberry Pi Pico (RP2040) binding of the table firmware. Pins come from pins.json
# (hardware/pico_pins.json on the host); the wheel from wheel.json. Only standard MicroPython
# machine APIs: Pin (hard IRQs), SPI.readinto, UART (txbuf, txdone), WDT, Timer, time.ticks_*.
#
# Hard IRQ handlers (ball and rotor sensors) only stamp time.ticks_us() into a preallocated
# ring buffer (rmcfw.edges): no allocation, as MicroPython's ISR rules require. The main loop,
# once every 1/scan_hz (1 ms), on a fixed grid of deadlines: latches and reads the 74HC165
# chain, drains the edges into the table, samples the lid and incident inputs, serves the
# UART, polls the timers, drives the LED and feeds the watchdog. Nothing in it waits for the
# line: frames go into the UART's TX buffer, RESENDs a few frames a pass.
#
# The configuration files (pins.json, wheel.json, key.txt, table.txt) are read and checked
# before any pin is touched and before the watchdog starts: a bad one raises ConfigError,
# which main.py shows (message, LED pattern) without resetting the board over and over.
import json
import os
import sys
import time

import machine
import micropython
from micropython import const

from rmcfw import channels, edges, frames, journal, lead, numbers, proto, recover, store, table

if hasattr(micropython, "alloc_emergency_exception_buf"):  # not in every port (WebAssembly)
    micropython.alloc_emergency_exception_buf(100)  # tracebacks from IRQ handlers

_DEBOUNCE_MS = const(20)  # lid and incident inputs must hold a level that long
_TXBUF = const(2048)  # UART TX ring (rp2 txbuf=): a burst of frames leaves without waiting
_RXBUF = const(1024)  # UART RX ring: commands kept through a slow loop pass
_TX_MARGIN = const(64)  # never fill the ring to the brim: the byte-time model may be off
_TXQ_MAX = const(8192)  # bytes of frames waiting for room in the ring, at most
_RESEND_FILL = const(512)  # resent frames only while less is pending: ~45 ms at 115200
_PUMP_MAX = const(256)  # bytes of resent frames read from the journal per loop pass
# kept off a slice of the predictor's work (rmcfw.rnvp), so that its pass ends within the
# period: what the pass still does after it (the rest of the table's poll, the slow inputs'
# turn, the TX queue, the watchdog: ~0.16 ms on the emulated RP2040), and what a slice runs
# past its budget (it stops at its first checkpoint after it: a piece of 0.1-0.2 ms)
_SLICE_AFTER_US = const(300)
_LED_ERROR = b"\x01\x00\x01\x00\x01\x00\x00\x00\x00\x00"  # 3 flashes a second: config error


class ConfigError(Exception):
    """A configuration file on the board is missing or wrong. Restarting cannot mend it, so
    main.py says so and stays at the REPL instead of resetting the board in a loop."""


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        raise ConfigError("%s: missing or unreadable" % path) from None
    except ValueError as e:
        raise ConfigError("%s: not valid JSON (%s)" % (path, e)) from None


def _read_text(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def _int(section, key, lo, hi, where="", default=None):
    v = section.get(key, default)
    if not isinstance(v, int) or not lo <= v <= hi:
        raise ConfigError(
            "pins.json: %s%s is %r, not an integer %d..%d"
            % (where + "." if where else "", key, v, lo, hi)
        )
    return v


def _check_pins(cfg):
    """Each key of the pin map the board reads: present, and in its range."""
    if not isinstance(cfg, dict):
        raise ConfigError("pins.json: an object expected")
    for name in ("pockets", "ball_a", "ball_b", "rotor_a", "rotor_b", "lid", "incident"):
        if not isinstance(cfg.get(name), dict):
            raise ConfigError("pins.json: section %s missing" % name)
    for name in ("uart", "led"):
        if not isinstance(cfg.get(name), dict):
            raise ConfigError("pins.json: section %s missing" % name)
    pk = cfg["pockets"]
    _int(pk, "spi", 0, 1, "pockets")
    for key in ("sck", "miso", "latch"):
        _int(pk, key, 0, 29, "pockets")
    _int(pk, "latch_active", 0, 1, "pockets")
    _int(pk, "chips", 5, 8, "pockets")  # 39 pocket inputs: 5 chips at least
    _int(pk, "active", 0, 1, "pockets", 1)
    _int(pk, "scan_hz", 100, 10000, "pockets", 1000)
    for name in ("ball_a", "ball_b", "rotor_a", "rotor_b", "lid", "incident"):
        spec = cfg[name]
        _int(spec, "pin", 0, 29, name)
        if spec.get("pull") not in (None, "up", "down"):
            raise ConfigError("pins.json: %s.pull is %r: up, down or none" % (name, spec["pull"]))
        if spec.get("edge") not in (None, "rising", "both"):
            raise ConfigError("pins.json: %s.edge is %r: rising or both" % (name, spec["edge"]))
    _int(cfg["lid"], "locked_level", 0, 1, "lid")
    _int(cfg["incident"], "active_level", 0, 1, "incident")
    u = cfg["uart"]
    _int(u, "id", 0, 1, "uart")
    for key in ("tx", "rx", "de"):
        _int(u, key, 0, 29, "uart")
    _int(u, "baud", 1200, 1000000, "uart")
    _int(cfg["led"], "pin", 0, 29, "led")
    _int(cfg, "watchdog_ms", 1, 8388)  # the RP2040 watchdog's range


def _check_wheel(wheel):
    """The 39 labels in pocket channel order: each number of the wheel exactly once."""
    labels = wheel.get("pockets") if isinstance(wheel, dict) else wheel
    if (
        not isinstance(labels, (list, tuple))
        or len(labels) != len(numbers.NUMBERS)
        or not all(isinstance(x, str) for x in labels)
        or sorted(labels) != sorted(numbers.NUMBERS)
    ):
        raise ConfigError("wheel.json: pockets must list the 39 numbers once each")


def load_config(pins="pins.json", wheel="wheel.json"):
    """Read and check every configuration file: returns (pin map, wheel). Raises ConfigError
    naming the file and what is wrong with it."""
    cfg = _load(pins) if isinstance(pins, str) else pins
    _check_pins(cfg)
    wheel = _load(wheel) if isinstance(wheel, str) else wheel
    _check_wheel(wheel)
    key_text = _read_text("key.txt")
    try:
        if key_text:
            frames.load_key(key_text)
    except ValueError as e:
        raise ConfigError("key.txt: %s" % e) from None
    try:
        frames.Encoder(_read_text("table.txt", "T01"), 1)
    except ValueError as e:
        raise ConfigError("table.txt: %s" % e) from None
    return cfg, wheel


def show_config_error(err, pins="pins.json"):
    """Say what is wrong (on the REPL, which mpremote shows) and blink the status LED three
    times a second (steady, slow or fast blinking are the running table's); returns the
    Timer that blinks it, or None when the LED's pin is not known."""
    print("rmc: CONFIGURATION ERROR: %s" % err)
    print("rmc: the table is not started; fix the file and reset (the board stays at the REPL)")
    led = None
    try:
        cfg = pins if isinstance(pins, dict) else _load(pins)
        led = machine.Pin(cfg["led"]["pin"], machine.Pin.OUT, value=0)
    except Exception:  # the pin map is what is wrong: the board's own LED, if it has one
        try:
            led = machine.Pin("LED", machine.Pin.OUT, value=0)
        except Exception:
            return None
    step = [0]
    pattern = _LED_ERROR

    def blink(timer):  # may be a hard IRQ (rp2's default): allocates nothing
        i = step[0]
        led.value(pattern[i])
        step[0] = i + 1 if i + 1 < len(pattern) else 0

    return machine.Timer(mode=machine.Timer.PERIODIC, period=100, callback=blink)


class Input:
    """A slow level input (lid, incident), debounced in the main loop."""

    def __init__(self, pin, channel, active_level):
        self.pin = pin
        self.channel = channel
        self.active = active_level
        self.level = None  # reported level (1 = active), None before the first report
        self._since = 0

    def sample(self, now_ms):
        """The new debounced level (0/1), or None when nothing changed."""
        v = 1 if self.pin.value() == self.active else 0
        if v == self.level:
            self._since = now_ms
            return None
        if self.level is not None and time.ticks_diff(now_ms, self._since) < _DEBOUNCE_MS:
            return None
        self.level = v
        self._since = now_ms
        return v


class Board:
    def _hardware(self, cfg):
        Pin = machine.Pin
        pk = cfg["pockets"]
        self.chain = bytearray(pk["chips"])
        self._chain_seen = None  # the chain as the table last saw it
        self.spi = machine.SPI(
            pk["spi"],
            baudrate=1_000_000,
            polarity=0,
            phase=0,
            sck=Pin(pk["sck"]),
            miso=Pin(pk["miso"]),
        )
        self._latch_on = pk["latch_active"]
        self.latch = Pin(pk["latch"], Pin.OUT, value=1 - self._latch_on)
        self._invert = 0 if pk.get("active", 1) else 0xFF
        self.edges = edges.Edges(256)
        self._irq_pins = []
        for name, ch in (
            ("ball_a", channels.BALL_A),
            ("ball_b", channels.BALL_B),
            ("rotor_a", channels.ROTOR_A),
            ("rotor_b", channels.ROTOR_B),
        ):
            self._irq_pins.append(self._edge_pin(cfg[name], ch))
        # the rotor's channels as its IRQs start: the edges queued from now on (through the
        # recovery at boot) replay on top of these levels
        self._rotor_levels = (self._irq_pins[2].value(), self._irq_pins[3].value())
        lid = cfg["lid"]
        self.lid = Input(Pin(lid["pin"], Pin.IN, _pull(lid)), channels.LID, lid["locked_level"])
        inc = cfg["incident"]
        self.incident = Input(
            Pin(inc["pin"], Pin.IN, _pull(inc)), channels.INCIDENT, inc["active_level"]
        )
        self._inputs = (self.lid, self.incident)
        u = cfg["uart"]
        # timeout=0: a write never waits for room (the board only writes what fits)
        self.uart = machine.UART(
            u["id"],
            baudrate=u["baud"],
            tx=Pin(u["tx"]),
            rx=Pin(u["rx"]),
            txbuf=_TXBUF,
            rxbuf=_RXBUF,
            timeout=0,
        )
        self.de = Pin(u["de"], Pin.OUT, value=0)
        self._de = 0
        # A byte's time on the line (8N1: 10 bits), rounded up: the model of what the UART
        # still holds lags the UART, never leads it.
        self._us_per_byte = (10_000_000 + u["baud"] - 1) // u["baud"]
        self._tx_end = time.ticks_us()  # when the bytes given to the UART will all be out
        self._txq = []  # frames waiting for room in the UART's ring, oldest first
        self._txq_bytes = 0
        self.tx_dropped = 0  # frames a full queue refused (journaled: the host asks again)
        self._tx_told = 0  # of those, how many a FAULT frame has reported
        self.led_pin = Pin(cfg["led"]["pin"], Pin.OUT, value=0)
        self._led = 0
        self._turn = 0  # which slow input or output this pass serves (step)

    def __init__(self, pins="pins.json", wheel="wheel.json", folder="", watchdog=True):
        """watchdog=False for debugging at the REPL: an RP2040 watchdog, once started, cannot
        be stopped, and would reset the board 2 s after the loop stops. Raises ConfigError
        for a bad configuration file, before the watchdog is started."""
        cfg, wheel = load_config(pins, wheel)
        self.pins = cfg
        try:
            self._hardware(cfg)
        except (ValueError, TypeError) as e:  # a pin map this board refuses (pin, UART)
            raise ConfigError("pins.json: the board refuses it: %s" % e) from None
        # the loop's pace: one pass every 1/scan_hz, on a fixed grid of deadlines
        self.period_us = 1_000_000 // cfg["pockets"].get("scan_hz", 1000)
        self.overruns = 0  # passes started more than a period after their deadline
        self._due = time.ticks_us()
        self.reset = "watchdog" if machine.reset_cause() == machine.WDT_RESET else "power"
        self.wdt = machine.WDT(timeout=cfg["watchdog_ms"]) if watchdog else None

        # the table, its power-safe state and the wire (docs/protocol.md)
        self.store = store.Store(folder)
        # the lead window's random source (rmcfw.lead): on a Pico its ROSC bits mixed in;
        # elsewhere (the virtual board's WebAssembly port) the seeded sequence, reproducible
        self.rand = lead.Hardware(os.urandom) if sys.platform == "rp2" else lead.Seeded()
        self.table = table.Table(wheel, self._no_emit, self.store, board=self)
        # the predictor's refit and learning in slices (rmcfw.rnvp), each of what is left of
        # the loop's period (bound once: a bound method is a heap object)
        self.table.pred.clock = time.ticks_us
        self.table.pred.budget = self._slice_us
        key_text = _read_text("key.txt")
        key = frames.load_key(key_text) if key_text else None
        # routine frames (STAT and RECALL always, a running ball's REV and RNVP too) wait in
        # RAM for the next frame recovery needs: no flash erase (interrupts off ~45 ms) a
        # STATUS poll while the rotor turns or the ball runs; never saved ahead of the state
        self.journal = journal.Journal((folder + "/" if folder else "") + "journal", hold=True)
        self.store.before_save = self.journal.flush
        # state and journal read back, then the journal, the wire and BOOT (rmcfw.recover)
        self.encoder, self.wire = recover.power_up(
            tb=self.table,
            jr=self.journal,
            table_id=_read_text("table.txt", "T01"),
            key=key,
            send=self.send,
            now_us=time.ticks_us,
            now_ms=time.ticks_ms,
            reset=self.reset,
            rotor_levels=self._rotor_levels,
            tick=self._feed,
        )

        self.wire.room = self._tx_room  # RESENDs served as far as the line takes them
        # a ball pass's REV built, journaled and sent in the loop's next three passes, a
        # step each, not in its own (rmcfw.commands.Wire.owe), its place among the frames kept
        self.wire.defer = True
        self._off = None  # the deadline of the last pass that did such work (_slice_us)
        self._sink = self.table.sink  # bound once: a bound method is a heap object
        if self.table.spin.resumed:
            # a ball resumed on the track after a cut: its routine frames held in RAM as
            # after its LAUNCH, not a flash erase each (IRQs off 45 ms) while its edges are due
            self.journal.resume_run()

    def _feed(self):
        if self.wdt is not None:
            self.wdt.feed()

    def _no_emit(self, ftype, fields):
        raise RuntimeError("frame before the wire is up")

    def _edge_pin(self, spec, ch):
        Pin = machine.Pin
        pin = Pin(spec["pin"], Pin.IN, _pull(spec))
        if spec.get("edge") == "both":
            trigger = Pin.IRQ_RISING | Pin.IRQ_FALLING
            handler = self._level_handler(ch)
        else:
            trigger = Pin.IRQ_RISING
            handler = self._pulse_handler(ch)
        pin.irq(handler, trigger=trigger, hard=True)
        return pin

    def _pulse_handler(self, ch):
        push = self.edges.push
        ticks_us = time.ticks_us

        def isr(pin):  # hard IRQ: allocates nothing
            push(ticks_us(), ch, 1)

        return isr

    def _level_handler(self, ch):
        push = self.edges.push
        ticks_us = time.ticks_us

        def isr(pin):  # hard IRQ: allocates nothing
            push(ticks_us(), ch, pin.value())

        return isr

    # --- the RS-485 line, never waited for ---------------------------------------------
    #
    # The UART sends from its TX ring by itself; the board models what the ring still holds
    # from the bytes given and the baud rate (rp2's UART tells only when all is out:
    # txdone), writes only what fits, and queues the rest in order. DE is driven while
    # bytes are out, and released in a later pass once the last one has left.

    def _pending(self, now):
        """Bytes the UART still holds, by the model."""
        left = time.ticks_diff(self._tx_end, now)
        if left <= 0 or left > (_TXBUF + _TX_MARGIN) * self._us_per_byte:
            return 0  # (all out long ago: a ticks difference wraps after ~9 min)
        return (left + self._us_per_byte - 1) // self._us_per_byte

    def _tx_write(self, data, now):
        if not self._de:
            self.de.value(1)  # before the first start bit
            self._de = 1
        n = self.uart.write(data) or 0  # None: nothing taken
        if not self._pending(now):
            self._tx_end = now
        self._tx_end = time.ticks_add(self._tx_end, n * self._us_per_byte)
        if n < len(data):  # the ring had less room than the model says: it is full now
            full = time.ticks_add(now, _TXBUF * self._us_per_byte)
            if time.ticks_diff(full, self._tx_end) > 0:
                self._tx_end = full
        return n

    def send(self, data):
        """A frame (or ACK) to the line, never waiting: into the UART's TX ring when it has
        room and nothing waits before it, else into the queue, in order."""
        if not self._txq:
            now = time.ticks_us()
            if len(data) <= _TXBUF - _TX_MARGIN - self._pending(now):
                n = self._tx_write(data, now)
                if n == len(data):
                    return
                data = data[n:]
        if self._txq_bytes + len(data) > _TXQ_MAX:
            # The line is stuck or far too slow: dropped, counted, reported as a fault
            # (step). The frame is in the journal: the host sees the gap and asks again.
            self.tx_dropped += 1
            return
        self._txq.append(bytes(data))  # a copy: the encoder reuses its buffer
        self._txq_bytes += len(data)

    def _tx_flush(self, now):
        q = self._txq
        while q:
            data = q[0]
            if len(data) > _TXBUF - _TX_MARGIN - self._pending(now):
                return
            n = self._tx_write(data, now)
            self._txq_bytes -= n
            if n < len(data):
                q[0] = data[n:]
                return
            q.pop(0)

    def _tx_room(self):
        """Bytes of resent frames the line takes now (the wire's room): none while frames
        wait, and only while little is pending, so that a live frame never waits behind
        more than ~45 ms of resent ones; a bounded journal read per pass."""
        if self._txq:
            return 0
        room = _RESEND_FILL - self._pending(time.ticks_us())
        return 0 if room < 0 else (room if room < _PUMP_MAX else _PUMP_MAX)

    def _tx_release(self, now):
        # txdone() may turn True while the last byte still shifts out (rp2): the model's
        # end, a full byte time after it, must have passed too
        if self._de and not self._txq and not self._pending(now):
            if self.uart.txdone():
                self.de.value(0)
                self._de = 0

    def _tx_faults(self):
        faults = self.table.st["faults"]
        if self.tx_dropped != self._tx_told:
            if self._txq_bytes < _TXQ_MAX // 2:  # room for the FAULT frame itself
                self._tx_told = self.tx_dropped
                self.table.spin.fault(proto.F_TX_OVERFLOW, 1, "%d" % self.tx_dropped)
        elif proto.F_TX_OVERFLOW in faults and not self._txq:
            self.table.spin.fault(proto.F_TX_OVERFLOW, 0)  # the line keeps up again

    # --- the loop ---------------------------------------------------------------------

    def scan(self, now_us):
        """Latch the 39 pocket inputs and shift them in; the table sees them only when they
        changed since the last pass (an unchanged picture changes nothing in it)."""
        self.latch.value(self._latch_on)
        self.latch.value(1 - self._latch_on)
        buf = self.chain
        self.spi.readinto(buf)
        if self._invert:
            for i in range(len(buf)):
                buf[i] ^= self._invert
        if buf != self._chain_seen:
            self._chain_seen = bytes(buf)
            self.table.scan(now_us, buf)

    def step(self):
        """One pass of the main loop. What must be seen every millisecond is: the edges, the
        pockets, the commands, the table's timers and the frames' way out. The slow inputs
        and outputs take turns, one a pass (each every 4 ms): the lid and incident inputs
        (debounced over 20 ms), the LED (blinking at 2.5 Hz at most) and the tx_overflow
        fault. An idle pass then allocates nothing (no collection, no pause).

        Each function a pass calls keeps its frame within 11 words (locals and stack): a
        bigger one MicroPython takes from the heap at each call (py/objfun.c,
        VM_MAX_STATE_ON_STACK), and a multi-block allocation scans the heap's table past
        every fragment: up to ~1 ms a call on a fragmented heap (docs/vpico.md, "Measured").
        Hence the helpers below, each called only when it has work."""
        now = time.ticks_us()
        ms = time.ticks_ms()
        if self.wire.owed:
            self._owed()
        self.wire.ms = ms  # the frames' time stamp
        if self.edges.drain(self._sink):
            self._lost()
        self.scan(now)
        if self.uart.any():
            self._rx()
        self.table.poll(now)
        self._turns(now, ms)
        if self._txq:
            self._tx_flush(now)
        if self.wire.pending():
            self.wire.pump()  # resent frames, after the live ones
        if self._de:
            self._tx_release(now)
        if self.wdt is not None:
            self.wdt.feed()

    def _owed(self):
        """A step of the frame a ball pass put off (its REV): no slice of the predictor's
        work in this pass then (_slice_us), so that the pass keeps to its period."""
        self.wire.work()
        self._off = self._due

    def _lost(self):
        lost = self.edges.lost()  # (a full buffer has edges to drain: seen after a drain)
        if lost:
            self.table.edges_lost(lost)

    def _rx(self):
        data = self.uart.read()
        if data:
            self.wire.feed(data)

    def _turns(self, now, ms):
        """The slow inputs and outputs, one a pass: lid, incident, LED, tx_overflow."""
        turn = self._turn
        self._turn = (turn + 1) & 3
        if turn < 2:
            inp = self._inputs[turn]
            v = inp.sample(ms)
            if v is not None:
                self.table.feed(now, inp.channel, v)
        elif turn == 2:
            v = self.table.led()
            if v != self._led:
                self.led_pin.value(v)
                self._led = v
        else:
            self._tx_faults()

    def _slice_us(self):
        """The time (us) a slice of the predictor's work may take in this pass: what is left
        of the pass's period (its deadline, pace()), less what the pass does after it. Less
        than nothing in a late pass: the slice then does its smallest piece (rmcfw.rnvp).
        None, no slice, in a ball pass on the track and the three passes after it, which
        build, journal and send its REV frame (_owed)."""
        if self.wire.owed or self._off == self._due:
            return None
        left = time.ticks_diff(self._due, time.ticks_us())
        return left + self.period_us - _SLICE_AFTER_US

    def pace(self):
        """Wait for the next pass's deadline, one period after the last one's: the grid does
        not drift with the passes' own time; a late pass does not wait at all, and one more
        than a period late counts an overrun and skips the deadlines missed (no burst of
        passes to catch up)."""
        period = self.period_us
        due = time.ticks_add(self._due, period)
        late = time.ticks_diff(time.ticks_us(), due)
        if late < 0:
            time.sleep_us(-late)
        elif late > period:
            self.overruns += 1
            due = time.ticks_add(due, late // period * period)
        self._due = due

    def run(self):
        self._due = time.ticks_us()
        while True:
            self.step()
            self.pace()


def _pull(spec):
    p = spec.get("pull")
    if p == "up":
        return machine.Pin.PULL_UP
    if p == "down":
        return machine.Pin.PULL_DOWN
    return None
