# firmware/board_pico.py on a fake `machine` (tests/fw/fakemachine.py): the pin map is
# followed, IRQ handlers allocate nothing, and a whole spin goes from pins to frames on the UART.
import os
import sys

import fakemachine
import micropython
from fwtest import raises, scratch_dir
from wheelsim import spin_events

from rmcfw import channels, frames, numbers, proto
from rmcfw.commands import Commander

# hardware/pico_pins.json as deployed (tests/test_firmware_pins.py checks they are the same)
PINS = {
    "format": "rmc-pins/1",
    "pockets": {
        "spi": 0,
        "sck": 2,
        "miso": 4,
        "latch": 5,
        "latch_active": 0,
        "chips": 5,
        "active": 1,
        "scan_hz": 1000,
    },
    "ball_a": {"pin": 10, "edge": "rising", "pull": "down"},
    "ball_b": {"pin": 11, "edge": "rising", "pull": "down"},
    "rotor_a": {"pin": 12, "edge": "both", "pull": "down"},
    "rotor_b": {"pin": 13, "edge": "both", "pull": "down"},
    "lid": {"pin": 14, "pull": "up", "locked_level": 0},
    "incident": {"pin": 15, "pull": "up", "active_level": 0},
    "uart": {"id": 0, "tx": 0, "rx": 1, "baud": 115200, "de": 3},
    "led": {"pin": 25},
    "watchdog_ms": 2000,
}
WHEEL = numbers.NUMBERS
_PIN_OF = {
    channels.BALL_A: 10,
    channels.BALL_B: 11,
    channels.ROTOR_A: 12,
    channels.ROTOR_B: 13,
}


def make_board(pins=PINS, wheel=WHEEL, watchdog=True):
    clock = fakemachine.Clock()
    clock.us = 1_000_000
    fakemachine.install(clock)  # the UART's line drains on the test's clock
    import board_pico

    board_pico.time = clock  # the board's clock is the test's
    b = board_pico.Board(pins, wheel, scratch_dir("board"), watchdog=watchdog)
    return b, clock


def apply_event(clock, ev):
    """A wheel event (t, channel, value) at the board's pins, the clock set to its time: a
    pocket's bit in the chain, or an edge on its pin (a ball sensor's a short pulse)."""
    t, ch, v = ev
    spi = fakemachine.SPI.last
    clock.us = t
    if ch < channels.POCKETS:
        i = ch >> 3
        bit = 1 << (7 - (ch & 7))
        spi.data[i] = spi.data[i] | bit if v else spi.data[i] & ~bit
    elif ch in _PIN_OF:
        pin = fakemachine.Pin.all[_PIN_OF[ch]]
        pin.trigger(v)
        if ch in (channels.BALL_A, channels.BALL_B):
            pin.trigger(0)  # a short pulse


def lines(b):
    out = bytes(fakemachine.UART.last.out)
    return [frames.decode(x) for x in out.split(b"\n") if x]


def test_pins_are_set_up_from_the_map():
    b, clock = make_board()
    P = fakemachine.Pin
    for pid in (10, 11):
        assert P.all[pid].trig == P.IRQ_RISING and P.all[pid].hard
        assert P.all[pid].pull == P.PULL_DOWN
    for pid in (12, 13):
        assert P.all[pid].trig == P.IRQ_RISING | P.IRQ_FALLING and P.all[pid].hard
    assert P.all[5].mode == P.OUT and P.all[5].level == 1  # latch idle high (active low)
    assert P.all[14].pull == P.PULL_UP and P.all[15].pull == P.PULL_UP
    assert P.all[3].mode == P.OUT and P.all[3].level == 1  # RS-485 DE: BOOT on its way
    assert fakemachine.UART.last.txbuf >= 1024  # frames go into the TX ring, not waited for
    assert fakemachine.WDT.last.timeout == 2000
    for _ in range(50):
        clock.us += 1000
        b.step()
    assert P.all[3].level == 0  # the line idle: DE released, receiving
    first = lines(b)[0]
    assert first.type == proto.T_BOOT and first.fields["reset"] == "power"


def test_irq_handlers_allocate_nothing():
    b, clock = make_board()
    pins = fakemachine.Pin.all
    # warm up once outside the lock (first calls may intern names)
    pins[10].trigger(1)
    pins[10].trigger(0)
    b.edges.drain(lambda t, c, v: None)
    micropython.heap_lock()
    try:
        for _ in range(50):
            clock.us += 997
            pins[10].trigger(1)
            pins[10].trigger(0)
            pins[12].trigger(1)
            pins[13].trigger(1)
            pins[12].trigger(0)
            pins[13].trigger(0)
    finally:
        micropython.heap_unlock()
    got = []
    b.edges.drain(lambda t, c, v: got.append((c, v)), 1000)
    assert len(got) == 250
    assert got[:5] == [
        (channels.BALL_A, 1),
        (channels.ROTOR_A, 1),
        (channels.ROTOR_B, 1),
        (channels.ROTOR_A, 0),
        (channels.ROTOR_B, 0),
    ]


def test_the_pocket_chain_is_read_in_bit_order():
    b, _ = make_board()
    spi = fakemachine.SPI.last
    spi.data[1] = 0x20  # byte 1, bit 5: pocket channel 8 + 7 - 5 = 10
    latch = fakemachine.Pin.all[5]
    w = latch.writes
    b.step()
    assert latch.writes == w + 2  # pulsed low then high: the parallel inputs loaded
    assert b.table.pockets.count == 1 and b.table.pockets.first == 10


def test_a_spin_from_pins_to_frames():
    b, clock = make_board()
    pins = fakemachine.Pin.all
    uart = fakemachine.UART.last
    uart.inp.extend(b"garbage line\n")
    assert b.table.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
    pins[14].level = 1  # lid unlocked (locked_level 0)
    for _ in range(30):
        clock.us += 1000
        b.step()
    assert b.table.spin.state == proto.S_BETS
    ev, _, t_end = spin_events(clock.us + 4_000_000, 1, -1, 17)
    for e in ev:
        while clock.us + 2000 < e[0]:
            clock.us += 2000
            b.step()
        apply_event(clock, e)
    while clock.us < t_end:
        clock.us += 2000
        b.step()
    got = lines(b)
    types = [f.type for f in got]
    assert proto.T_LAUNCH in types and proto.T_RNVP in types and proto.T_DROP in types, types
    res = [f for f in got if f.type == proto.T_RESULT]
    assert len(res) == 1 and res[0].fields["num"] == WHEEL[17], res
    assert fakemachine.WDT.last.fed > 1000
    assert pins[3].level == 0  # DE released after each frame
    seqs = [f.seq for f in got]
    assert seqs == list(range(1, len(seqs) + 1))  # numbered without gaps


def test_no_watchdog_when_debugging():
    fakemachine.install()
    fakemachine.WDT.last = None
    import board_pico

    board_pico.time = fakemachine.Clock()
    b = board_pico.Board(PINS, WHEEL, scratch_dir("board"), watchdog=False)
    b.step()
    assert fakemachine.WDT.last is None and b.wdt is None


def test_watchdog_reset_is_reported_at_boot():
    fakemachine._cause[0] = fakemachine.WDT_RESET
    try:
        b, _ = make_board()
    finally:
        fakemachine._cause[0] = fakemachine.PWRON_RESET
    boot = lines(b)[0]
    assert boot.fields["reset"] == "watchdog"
    assert proto.F_WATCHDOG in boot.fields["faults"]


def test_lost_edges_are_a_fault_until_the_next_launch():
    # A ball sensor chattering faster than the loop drains: the 256-edge IRQ buffer fills,
    # the edges beyond it are dropped, and the board says so instead of losing them silently.
    b, clock = make_board()
    pin = fakemachine.Pin.all[12]  # rotor A, both edges
    for i in range(300):
        pin.trigger((i + 1) & 1)  # 300 level changes, from low
    clock.us += 1000
    b.step()
    got = [f for f in lines(b) if f.type == proto.T_FAULT]
    assert [(f.fields["code"], f.fields["on"]) for f in got] == [(proto.F_EDGES, "1")], got
    assert int(got[0].fields["detail"]) == 300 - 255  # the ring holds size - 1 edges
    assert proto.F_EDGES in b.table.st["faults"]
    # the next spin's launch clears it
    b.table.spin._launch(clock.us)
    cleared = [f for f in lines(b) if f.type == proto.T_FAULT and f.fields["on"] == "0"]
    assert [f.fields["code"] for f in cleared] == [proto.F_EDGES], cleared


# --- the line: never waited for ------------------------------------------------------


def _out_lines(uart, start=0):
    """(resent, frame) for each line the UART sent from byte `start` on."""
    out = []
    for x in bytes(uart.out[start:]).split(b"\n"):
        if x:
            out.append((x.startswith(b"~"), frames.decode(x.lstrip(b"~"))))
    return out


def test_a_resend_is_served_a_few_frames_a_pass():
    # 200 frames asked again are ~1.5 s of the line: the loop must go on meanwhile (pocket
    # scan, the call, the watchdog: 2 s on an RP2040), never sleeping nor waiting for it.
    b, clock = make_board()
    uart = fakemachine.UART.last
    for i in range(250):
        b.wire.emit(proto.T_REV, ("spin", 1, "n", i + 1, "period_us", 1234567))
        clock.us += 10000
        b.step()
    assert b.tx_dropped == 0 and uart.txdone()
    top = b.encoder.seq
    mark = len(uart.out)
    wdt = fakemachine.WDT.last
    fed = wdt.fed
    uart.inp.extend(Commander("T01").line(proto.C_RESEND, ("boot", 1, "seq", 1), boot=1) + b"\n")
    live_at = None
    steps = 0
    while True:
        t = clock.us
        b.step()
        assert clock.us == t  # the pass slept nor waited for the line
        steps += 1
        if steps == 100:
            live_at = len(uart.out)
            b.table.spin.status()  # a live frame while the RESEND is served
        if any(f.type == proto.T_ACK for _, f in _out_lines(uart, mark)):
            break
        assert steps < 5000
        clock.us += 1000
    assert uart.waited_us == 0  # nor did a write wait for room
    assert wdt.fed - fed == steps  # fed at every pass
    assert steps > 1000  # ~17 kB at 115200 baud: served over many passes
    got = _out_lines(uart, mark)
    resent = [f.seq for r, f in got if r]
    assert resent == list(range(1, 201))  # in order, each once, at most 200
    ack = got[-1][1]
    assert ack.type == proto.T_ACK and ack.fields["n"] == "200" and ack.fields["ok"] == "1"
    live = [(i, f) for i, (r, f) in enumerate(got) if not r and f.type == proto.T_STATUS]
    assert len(live) == 1 and live[0][1].seq == top + 1
    # and promptly: behind at most what was pending then (~45 ms of the line), not behind
    # the rest of the RESEND
    assert 0 <= bytes(uart.out[live_at:]).find(b",STAT,") < 600
    assert live[0][0] < len(got) - 100


def test_frames_go_into_the_uart_without_waiting():
    # A burst of frames beyond the UART's ring: the pass neither sleeps nor blocks on the
    # write; they leave in order as the line takes them, DE held until the last is out.
    b, clock = make_board()
    uart = fakemachine.UART.last
    de = fakemachine.Pin.all[3]
    for _ in range(60):
        clock.us += 1000
        b.step()
    assert de.level == 0
    mark = len(uart.out)
    t = clock.us
    for _ in range(80):  # ~7 kB at once
        b.table.spin.status()
    b.step()
    assert clock.us == t and uart.waited_us == 0
    assert de.level == 1 and len(uart.out) - mark <= uart.txbuf
    released = None
    for i in range(1000):
        clock.us += 1000
        b.step()
        if de.level == 0 and released is None:
            released = i
            assert uart.txdone() and b._txq == []  # the last byte was out
    assert released is not None and uart.waited_us == 0
    seqs = [f.seq for r, f in _out_lines(uart, mark)]
    assert seqs == list(range(seqs[0], seqs[0] + 80))  # all of them, in order


def test_a_stuck_line_drops_frames_as_a_fault():
    # Frames beyond the bounded queue are dropped (each is journaled: the host asks for the
    # gap again), and the board says so: a tx_overflow FAULT until the queue drains.
    b, clock = make_board()
    uart = fakemachine.UART.last
    for _ in range(60):
        clock.us += 1000
        b.step()
    mark = len(uart.out)
    for _ in range(200):  # ~17 kB in one pass: more than the ring and the queue hold
        b.table.spin.status()
    assert b.tx_dropped > 0
    top = b.encoder.seq
    for _ in range(3000):
        clock.us += 1000
        b.step()
    got = [f for _, f in _out_lines(uart, mark)]
    faults = [(f.fields["on"], f.fields["detail"]) for f in got if f.type == proto.T_FAULT]
    assert faults == [("1", "%d" % b.tx_dropped), ("0", "%d" % b.tx_dropped)], faults
    assert "tx_overflow" not in b.table.st["faults"]
    seqs = [f.seq for f in got]
    assert len(seqs) == top + 2 - (seqs[0] - 1) - b.tx_dropped  # a gap, nothing reordered
    assert seqs == sorted(seqs)
    # the journal has them all: the host can ask again
    assert len(list(b.journal.frames(1, seqs[0]))) == top + 2 - (seqs[0] - 1)


# --- the loop's pace -------------------------------------------------------------------


class _Stop(Exception):
    pass


def test_the_loop_runs_on_a_grid_of_deadlines():
    pins = dict(PINS)
    pins["pockets"] = dict(PINS["pockets"], scan_hz=500)  # a pass every 2 ms
    b, clock = make_board(pins)
    assert b.period_us == 2000
    starts = []
    takes = [300] * 10 + [7300] + [300] * 5 + [2500] + [300] * 5  # µs each pass takes

    def step():
        if len(starts) == len(takes):
            raise _Stop
        starts.append(clock.us)
        clock.us += takes[len(starts) - 1]

    b.step = step
    try:
        b.run()
    except _Stop:
        pass
    t0 = starts[0]
    # short passes start on the grid: no drift from their own time
    assert [s - t0 for s in starts[:11]] == [2000 * k for k in range(11)]
    # a pass of 7.3 ms: the next starts at once (late), the missed deadlines are skipped
    # and the grid's phase kept
    assert starts[11] == starts[10] + 7300
    assert starts[12] - t0 == 2000 * 14
    assert [(s - t0) % 2000 for s in starts[12:17]] == [0] * 5
    # 2.5 ms: late, not by more than a period: no overrun, caught up on the grid
    assert starts[17] == starts[16] + 2500 and (starts[18] - t0) % 2000 == 0
    assert b.overruns == 1


def test_the_predictors_slices_get_what_is_left_of_the_period():
    """A slice of the predictor's refit or learning runs in what is left of the loop pass's
    period, less what the pass does after it (rmcfw.rnvp: its budget)."""
    b, clock = make_board()
    pred = b.table.pred
    assert pred.clock is not None
    b._due = clock.ticks_us()  # the pass began on its deadline (pace())
    first = pred.budget()
    assert 0 < first < b.period_us  # less what the pass does after the slice
    clock.us += 400  # the pass has run 0.4 ms
    assert pred.budget() == first - 400
    clock.us += b.period_us  # a pass past its period: nothing left (the smallest piece)
    assert pred.budget() < 0


# --- configuration errors ------------------------------------------------------------


def _config_error(**kw):
    fakemachine.install(fakemachine.Clock())
    import board_pico

    fakemachine.WDT.last = None
    e = raises(board_pico.ConfigError, make_board, **kw)
    assert fakemachine.WDT.last is None  # found before the watchdog was started
    return str(e)


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


def test_a_bad_configuration_is_found_before_the_watchdog():
    import json

    assert "pins.json" in _config_error(pins="no/such/pins.json")
    _write("garbled.json", '{"pockets": {"spi": 0,')
    try:
        assert "garbled.json: not valid JSON" in _config_error(pins="garbled.json")
    finally:
        _remove("garbled.json")
    bad = dict(PINS, uart=dict(PINS["uart"], baud="fast"))
    assert "uart.baud" in _config_error(pins=bad)
    bad = dict(PINS)
    del bad["lid"]
    assert "lid" in _config_error(pins=bad)
    assert "wheel.json" in _config_error(wheel=WHEEL[:-1])
    _write("wheel.json", json.dumps({"pockets": list(WHEEL[:-1]) + ["37"]}))
    try:
        assert "wheel.json" in _config_error(wheel="wheel.json")
    finally:
        _remove("wheel.json")
    _write("key.txt", "not hex at all\n")
    try:
        assert "key.txt" in _config_error()
        _write("key.txt", "0011\n")  # too short
        assert "key.txt" in _config_error()
    finally:
        _remove("key.txt")
    _write("table.txt", "table one\n")
    try:
        assert "table.txt" in _config_error()
    finally:
        _remove("table.txt")


def _run_main():
    """firmware/main.py, run as the board runs it at power-up."""
    import board_pico

    path = board_pico.__file__.replace("\\", "/").rsplit("/", 1)[0] + "/main.py"
    with open(path) as f:
        src = f.read()
    g = {"__name__": "main"}
    exec(src, g)
    return g


def test_main_stays_at_the_repl_on_a_configuration_error():
    import json

    fakemachine.install(fakemachine.Clock())  # (before board_pico: it imports machine)
    import board_pico

    fakemachine.WDT.last = None
    fakemachine.Timer.last = None
    board_pico.time = fakemachine.Clock()
    _write("pins.json", json.dumps(PINS))
    _write("wheel.json", json.dumps({"pockets": list(WHEEL)}))
    _write("key.txt", "zz\n")
    try:
        g = _run_main()  # a reset would raise SystemExit("machine.reset") here
    finally:
        _remove("key.txt")
        _remove("pins.json")
        _remove("wheel.json")
    assert fakemachine.WDT.last is None  # no watchdog: the board stays at the REPL
    timer = fakemachine.Timer.last
    assert timer is not None and g["blinker"] is timer
    led = fakemachine.Pin.all[PINS["led"]["pin"]]
    seen = []
    for _ in range(20):
        timer.fire()
        seen.append(led.level)
    assert seen == [1, 0, 1, 0, 1, 0, 0, 0, 0, 0] * 2  # three flashes a second


def test_main_resets_the_board_after_a_crash():
    fakemachine.install(fakemachine.Clock())
    import board_pico

    class Crashing:
        def __init__(self, watchdog=True):
            pass

        def run(self):
            raise RuntimeError("a bug")

    real = board_pico.Board
    board_pico.Board = Crashing
    shim = not hasattr(sys, "print_exception")  # CPython
    if shim:
        sys.print_exception = lambda e: None
    try:
        e = raises(SystemExit, _run_main)
    finally:
        board_pico.Board = real
        if shim:
            del sys.print_exception
    assert "reset" in str(e)


def test_a_cut_between_a_frame_and_its_save_is_mended_at_power_up():
    # A launch and its result journaled, the power cut before the state was saved: the next
    # boot applies them (rmcfw.recover) before BOOT, so spin 1 is neither launched again
    # under the same number nor lost, and the boot number goes on.
    clock = fakemachine.Clock()
    clock.us = 1_000_000
    fakemachine.install(clock)
    import board_pico

    board_pico.time = clock
    d = scratch_dir("board")
    b = board_pico.Board(PINS, WHEEL, d)
    assert b.table.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
    b.wire.emit(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "ccw"))
    b.wire.emit(proto.T_RESULT, ("spin", 1, "num", "17", "colour", "noir", "parity", "impair"))
    b.journal.close()  # the power goes off: nothing more is saved
    fakemachine.install(clock)
    b2 = board_pico.Board(PINS, WHEEL, d)
    st = b2.table.st
    assert st["spin"] == 1 and st["results"] == [[1, "17"]] and st["run"] is None
    assert st["session"]["spins"] == 1 and st["rdir"] == 1
    boot = lines(b2)[0]
    assert boot.type == proto.T_BOOT and boot.boot == 2


def test_the_rotor_channels_are_read_at_power_up():
    # The rotor stands with both channels high at power-up: its first edge (A falling,
    # turning CW) must count forward, not be taken for a missed edge.
    clock = fakemachine.Clock()
    clock.us = 1_000_000
    fakemachine.install(clock)
    fakemachine.Pin.levels.update({12: 1, 13: 1})
    import board_pico

    board_pico.time = clock
    b = board_pico.Board(PINS, WHEEL, scratch_dir("board"))
    a, bb = fakemachine.Pin.all[12], fakemachine.Pin.all[13]
    for i in range(160):  # CW from (1, 1): A down, B down, A up, B up, ...
        clock.us += 2000
        (a if i % 2 == 0 else bb).trigger(0 if i % 4 < 2 else 1)
        b.step()
    assert b.table.rotor.errors == 0, b.table.rotor.errors
    assert b.table.rotor.dir == 1
