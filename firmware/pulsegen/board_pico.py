# Pulse generator on a Raspberry Pi Pico (RP2040): binds pulsegen.core to pins and USB serial.
#
# The rig's second Pico drives the table's ball and rotor sensor lines. Requests come in on
# the USB serial line (sys.stdin), replies go out on sys.stdout. Between events the loop
# reads the line; within GUARD_US of an event it busy-waits on ticks_us and then writes all
# lines in one store to the RP2040's SIO set/clear registers, so simultaneous edges are
# simultaneous. The pins come from rig_pins.json ("pulsegen") when deployed, else defaults.
import select
import sys
import time

import machine

from pulsegen import core

NAMES = ("ball_a", "ball_b", "rotor_a", "rotor_b")
DEFAULT_PINS = (2, 3, 4, 5)
GUARD_US = 3000  # longer than reading and handling one request line takes on an RP2040
_SIO_OUT_SET = 0xD0000014
_SIO_OUT_CLR = 0xD0000018


def load_pins(path="rig_pins.json"):
    try:
        import json

        with open(path) as f:
            lines = json.load(f)["pulsegen"]["lines"]
        return tuple(lines[n]["gp"] for n in NAMES)
    except (OSError, KeyError, ValueError):
        return DEFAULT_PINS


def make_writer(gps):
    for gp in gps:
        machine.Pin(gp, machine.Pin.OUT, value=0)
    n = 1 << len(gps)
    set_tab = [0] * n
    clr_tab = [0] * n
    for lv in range(n):
        for i, gp in enumerate(gps):
            if lv >> i & 1:
                set_tab[lv] |= 1 << gp
            else:
                clr_tab[lv] |= 1 << gp
    mem32 = machine.mem32

    def write(lv):
        # Two stores: every line changes within a few tens of nanoseconds of the others.
        mem32[_SIO_OUT_CLR] = clr_tab[lv]
        mem32[_SIO_OUT_SET] = set_tab[lv]

    return write


def main():
    gps = load_pins()
    gen = core.Generator(
        NAMES, make_writer(gps), time.ticks_us, time.ticks_add, time.ticks_diff, capacity=4096
    )
    reader = core.LineReader()
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


if __name__ == "__main__":
    main()
