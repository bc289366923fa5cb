# Raspberry Pi Pico (RP2040) binding of the table firmware. Pins come from pins.json
# (hardware/pico_pins.json on the host); the wheel from wheel.json. Only standard MicroPython
# machine APIs: Pin (hard IRQs), SPI.readinto, UART, WDT, time.ticks_*.
#
# Hard IRQ handlers (ball and rotor sensors) only stamp time.ticks_us() into a preallocated
# ring buffer (rmcfw.edges): no allocation, as MicroPython's ISR rules require. The main loop,
# about once a millisecond: latches and reads the 74HC165 chain, drains the edges into the
# table, samples the lid and incident inputs, serves the UART, polls the timers, drives the
# LED and feeds the watchdog.
import json
import time

import machine
import micropython

from rmcfw import channels, commands, edges, frames, journal, store, table

if hasattr(micropython, "alloc_emergency_exception_buf"):  # not in every port (WebAssembly)
    micropython.alloc_emergency_exception_buf(100)  # tracebacks from IRQ handlers

_DEBOUNCE_MS = 20  # lid and incident inputs must hold a level that long


def _load(path):
    with open(path) as f:
        return json.load(f)


def _read_text(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


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
    def __init__(self, pins="pins.json", wheel="wheel.json", folder="", watchdog=True):
        """watchdog=False for debugging at the REPL: an RP2040 watchdog, once started, cannot
        be stopped, and would reset the board 2 s after the loop stops."""
        cfg = _load(pins) if isinstance(pins, str) else pins
        self.pins = cfg
        # the wheel definition (its pockets, its geometry for the predictor's prior)
        wheel = _load(wheel) if isinstance(wheel, str) else wheel
        Pin = machine.Pin
        pk = cfg["pockets"]
        self.chain = bytearray(pk["chips"])
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
        lid = cfg["lid"]
        self.lid = Input(Pin(lid["pin"], Pin.IN, _pull(lid)), channels.LID, lid["locked_level"])
        inc = cfg["incident"]
        self.incident = Input(
            Pin(inc["pin"], Pin.IN, _pull(inc)), channels.INCIDENT, inc["active_level"]
        )
        u = cfg["uart"]
        self.uart = machine.UART(u["id"], baudrate=u["baud"], tx=Pin(u["tx"]), rx=Pin(u["rx"]))
        self.de = Pin(u["de"], Pin.OUT, value=0)
        self._us_per_byte = 10_000_000 // u["baud"]  # 8N1: 10 bits a byte
        self.led_pin = Pin(cfg["led"]["pin"], Pin.OUT, value=0)
        self.reset = "watchdog" if machine.reset_cause() == machine.WDT_RESET else "power"
        self.wdt = machine.WDT(timeout=cfg["watchdog_ms"]) if watchdog else None

        # the table, its power-safe state and the wire (docs/protocol.md)
        self.store = store.Store(folder)
        self.table = table.Table(wheel, self._no_emit, self.store, board=self)
        boot = self.table.st["boot"] + 1  # what start() will make it
        key_text = _read_text("key.txt")
        key = frames.load_key(key_text) if key_text else None
        self.journal = journal.Journal((folder + "/" if folder else "") + "journal")
        prev = self.journal.last()
        self.journal.start()
        self.encoder = frames.Encoder(_read_text("table.txt", "T01"), boot, key)
        self.wire = commands.Wire(
            self.encoder, self.journal, self.send, handler=self.table.handle, key=key
        )
        self.wire.ms = time.ticks_ms()
        self.table.emit = self.wire.emit
        self.table.seq = self._seq
        self.table.start(
            time.ticks_us(),
            self.reset,
            lambda fw, wh, rs, faults: self.wire.boot(fw, wh, rs, faults, prev),
        )

    def _no_emit(self, ftype, fields):
        raise RuntimeError("frame before the wire is up")

    def _seq(self):
        return self.encoder.seq

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

    # --- the loop ---------------------------------------------------------------------

    def send(self, data):
        """A frame to the RS-485 line: drive DE while the bytes leave the UART."""
        self.de.value(1)
        self.uart.write(data)
        time.sleep_ms(len(data) * self._us_per_byte // 1000 + 1)
        self.de.value(0)

    def scan(self, now_us):
        """Latch the 39 pocket inputs and shift them in."""
        self.latch.value(self._latch_on)
        self.latch.value(1 - self._latch_on)
        buf = self.chain
        self.spi.readinto(buf)
        if self._invert:
            for i in range(len(buf)):
                buf[i] ^= self._invert
        self.table.scan(now_us, buf)

    def step(self):
        """One pass of the main loop."""
        now = time.ticks_us()
        ms = time.ticks_ms()
        self.wire.ms = ms  # the frames' time stamp
        tb = self.table
        self.edges.drain(tb.sink)
        lost = self.edges.lost()
        if lost:
            tb.edges_lost(lost)
        self.scan(now)
        for inp in (self.lid, self.incident):
            v = inp.sample(ms)
            if v is not None:
                tb.feed(now, inp.channel, v)
        if self.uart.any():
            data = self.uart.read()
            if data:
                self.wire.feed(data)
        tb.poll(now)
        self.led_pin.value(tb.led())
        if self.wdt is not None:
            self.wdt.feed()

    def run(self):
        while True:
            self.step()
            time.sleep_ms(1)


def _pull(spec):
    p = spec.get("pull")
    if p == "up":
        return machine.Pin.PULL_UP
    if p == "down":
        return machine.Pin.PULL_DOWN
    return None
