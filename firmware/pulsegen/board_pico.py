# Pulse generator on a Raspberry Pi Pico (RP2040): binds pulsegen.core to pins and a serial line.
#
# The rig's second Pico drives the table's ball and rotor sensor lines. Requests come in on
# the USB serial line (sys.stdin; replies on sys.stdout), or on a UART when rig_pins.json says
# "transport": "uart" (a rig host with a hardware serial port; the virtual board). Between
# events the loop reads the line; within GUARD_US of an event it busy-waits on ticks_us and
# then writes all lines in one store to the RP2040's SIO set/clear registers, so simultaneous
# edges are simultaneous (a port without machine.mem32 writes the pins one by one).
import sys
import time

import machine

from pulsegen import core

NAMES = ("ball_a", "ball_b", "rotor_a", "rotor_b")
DEFAULT_PINS = (2, 3, 4, 5)
GUARD_US = 3000  # longer than reading and handling one request line takes on an RP2040
_SIO_OUT_SET = 0xD0000014
_SIO_OUT_CLR = 0xD0000018


def load_config(path="rig_pins.json"):
    """(GP numbers, transport, uart id, baud) from the deployed rig pin map, else defaults."""
    try:
        import json

        with open(path) as f:
            cfg = json.load(f)["pulsegen"]
        gps = tuple(cfg["lines"][n]["gp"] for n in NAMES)
        return gps, cfg.get("transport", "usb"), cfg.get("uart", 0), cfg.get("baud", 115200)
    except (OSError, KeyError, ValueError):
        return DEFAULT_PINS, "usb", 0, 115200


def make_writer(gps):
    pins = [machine.Pin(gp, machine.Pin.OUT, value=0) for gp in gps]
    mem32 = getattr(machine, "mem32", None)
    if mem32 is None:

        def write_pins(lv):
            for i in range(len(pins)):
                pins[i].value(lv >> i & 1)

        return write_pins
    n = 1 << len(gps)
    set_tab = [0] * n
    clr_tab = [0] * n
    for lv in range(n):
        for i, gp in enumerate(gps):
            if lv >> i & 1:
                set_tab[lv] |= 1 << gp
            else:
                clr_tab[lv] |= 1 << gp

    def write(lv):
        # Two stores: every line changes within a few tens of nanoseconds of the others.
        mem32[_SIO_OUT_CLR] = clr_tab[lv]
        mem32[_SIO_OUT_SET] = set_tab[lv]

    return write


def serve_usb(gen, reader):
    import select

    poll = select.poll()
    poll.register(sys.stdin, select.POLLIN)
    inp = sys.stdin.buffer
    out = sys.stdout.buffer
    while True:
        wait = gen.service(GUARD_US)
        # Wait for input at most until GUARD_US before the next event (1 ms granularity).
        timeout = 50 if wait < 0 else wait // 1000
        if poll.poll(timeout):
            while poll.poll(0):
                line = reader.feed_byte(inp.read(1)[0])
                if line is not None:
                    out.write(gen.handle(line))
                    break  # back to the schedule: the next event may be near


def serve_uart(gen, reader, uart):
    buf = bytearray(64)
    while True:
        wait = gen.service(GUARD_US)
        n = uart.readinto(buf) if uart.any() else 0
        if n:
            for i in range(n):
                line = reader.feed_byte(buf[i])
                if line is not None:
                    uart.write(gen.handle(line))
        elif wait < 0 or wait > 1000:
            time.sleep_ms(1)  # idle: nothing due within the next millisecond


def main():
    gps, transport, uart_id, baud = load_config()
    gen = core.Generator(
        NAMES, make_writer(gps), time.ticks_us, time.ticks_add, time.ticks_diff, capacity=4096
    )
    reader = core.LineReader()
    if transport == "uart":
        serve_uart(gen, reader, machine.UART(uart_id, baudrate=baud, timeout=0))
    else:
        serve_usb(gen, reader)


if __name__ == "__main__":
    main()
