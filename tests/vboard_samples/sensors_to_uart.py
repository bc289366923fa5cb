# ruff: noqa: UP031  (MicroPython source: %-formatting kept)
# Sample board program for the virtual board tests (not the table firmware): a hard IRQ on
# the ball sensor stamps edges into a preallocated buffer; the main loop latches and reads
# the 74HC165 pocket chain over SPI and reports on the UART, one line per event:
#   "B <ms>"        ball sensor pulse (ms since start, from the IRQ's time stamp)
#   "P <ch> <v>"    pocket channel ch changed to v
#   "L <v>"         lid input level changed
#   "END <ms>"      after RUN_MS of virtual time
import array
import json
import time

import machine

RUN_MS = 1000

with open("pins.json") as f:
    PINS = json.load(f)
pk = PINS["pockets"]

stamps = array.array("i", [0] * 32)  # preallocated: the IRQ handler allocates nothing
count = array.array("i", [0])
t0 = time.ticks_us()


def on_ball(pin):
    n = count[0]
    if n < len(stamps):
        stamps[n] = time.ticks_diff(time.ticks_us(), t0)
        count[0] = n + 1


ball = machine.Pin(PINS["ball_a"]["pin"], machine.Pin.IN, machine.Pin.PULL_DOWN)
ball.irq(on_ball, trigger=machine.Pin.IRQ_RISING, hard=True)
lid = machine.Pin(PINS["lid"]["pin"], machine.Pin.IN, machine.Pin.PULL_UP)
latch = machine.Pin(pk["latch"], machine.Pin.OUT, value=1 - pk["latch_active"])
spi = machine.SPI(
    pk["spi"], baudrate=1_000_000, sck=machine.Pin(pk["sck"]), miso=machine.Pin(pk["miso"])
)
uart = machine.UART(PINS["uart"]["id"], baudrate=PINS["uart"]["baud"])
chain = bytearray(pk["chips"])
last = bytearray(pk["chips"])
sent = 0
last_lid = lid.value()
uart.write("L %d\n" % last_lid)
start_ms = time.ticks_ms()
while time.ticks_diff(time.ticks_ms(), start_ms) < RUN_MS:
    latch.value(pk["latch_active"])
    latch.value(1 - pk["latch_active"])
    spi.readinto(chain)
    for ch in range(39):
        byte, bit = ch // 8, 0x80 >> (ch % 8)
        if (chain[byte] ^ last[byte]) & bit:
            uart.write("P %d %d\n" % (ch, 1 if chain[byte] & bit else 0))
    last[:] = chain
    while sent < count[0]:
        uart.write("B %d\n" % ((stamps[sent] + 500) // 1000))
        sent += 1
    v = lid.value()
    if v != last_lid:
        uart.write("L %d\n" % v)
        last_lid = v
    time.sleep_ms(1)
uart.write("END %d\n" % time.ticks_diff(time.ticks_ms(), start_ms))
