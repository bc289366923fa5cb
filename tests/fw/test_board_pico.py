# firmware/board_pico.py on a fake `machine` (tests/fw/fakemachine.py): the pin map is
# followed, IRQ handlers allocate nothing, and a whole spin goes from pins to frames on the UART.
import fakemachine
import micropython
from fwtest import scratch_dir
from wheelsim import spin_events

from rmcfw import channels, frames, numbers, proto

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


def make_board():
    fakemachine.install()
    clock = fakemachine.Clock()
    clock.us = 1_000_000
    import board_pico

    board_pico.time = clock  # the board's clock is the test's
    b = board_pico.Board(PINS, WHEEL, scratch_dir("board"))
    return b, clock


def lines(b):
    out = bytes(fakemachine.UART.last.out)
    return [frames.decode(x) for x in out.split(b"\n") if x]


def test_pins_are_set_up_from_the_map():
    b, _ = make_board()
    P = fakemachine.Pin
    for pid in (10, 11):
        assert P.all[pid].trig == P.IRQ_RISING and P.all[pid].hard
        assert P.all[pid].pull == P.PULL_DOWN
    for pid in (12, 13):
        assert P.all[pid].trig == P.IRQ_RISING | P.IRQ_FALLING and P.all[pid].hard
    assert P.all[5].mode == P.OUT and P.all[5].level == 1  # latch idle high (active low)
    assert P.all[14].pull == P.PULL_UP and P.all[15].pull == P.PULL_UP
    assert P.all[3].mode == P.OUT and P.all[3].level == 0  # RS-485 DE idle: receive
    assert fakemachine.WDT.last.timeout == 2000
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
    spi = fakemachine.SPI.last
    uart = fakemachine.UART.last
    uart.inp.extend(b"garbage line\n")
    assert b.table.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
    pins[14].level = 1  # lid unlocked (locked_level 0)
    for _ in range(30):
        clock.us += 1000
        b.step()
    assert b.table.spin.state == proto.S_BETS
    ev, _, t_end = spin_events(clock.us + 4_000_000, 1, -1, 17)
    for t, ch, v in ev:
        while clock.us + 2000 < t:
            clock.us += 2000
            b.step()
        clock.us = t
        if ch < channels.POCKETS:
            i = ch >> 3
            bit = 1 << (7 - (ch & 7))
            spi.data[i] = spi.data[i] | bit if v else spi.data[i] & ~bit
        elif ch in _PIN_OF:
            pin = pins[_PIN_OF[ch]]
            pin.trigger(v)
            if ch in (channels.BALL_A, channels.BALL_B):
                pin.trigger(0)  # a short pulse
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
