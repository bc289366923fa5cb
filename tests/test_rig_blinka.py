"""The rig's Blinka backend against Blinka's own mock board (BLINKA_OS_AGNOSTIC=1).

Blinka picks its board when `board` is first imported, from the environment: the variable is
set here before that import (no other test imports Blinka), and the CLI test runs in a fresh
process with it. Blinka's mock I2C bus has no devices, so the MCP23017 expanders are register
models on a fake bus; the real adafruit_mcp230xx driver talks to them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

os.environ["BLINKA_OS_AGNOSTIC"] = "1"

import board
import digitalio
import pytest
from adafruit_mcp230xx.mcp23017 import MCP23017

from rmc.rig import pins as pinmod
from rmc.rig.backends import BlinkaOutput, RigError, open_blinka
from rmc.rig.edges import Edge
from rmc.rig.jitter import measure
from rmc.rig.player import Player
from rmc.rig.selftest import selftest

PINS = pinmod.load("os_agnostic")
LEVELS = PINS.levels
DIRECT = ("lid", "incident", "ball_a", "ball_b", "rotor_a", "rotor_b", "power")


class FakeMCP23017:
    """Register model of one MCP23017 (IOCON.BANK = 0, sequential addressing)."""

    def __init__(self) -> None:
        self.reg = bytearray(0x16)
        self.reg[0x00] = self.reg[0x01] = 0xFF  # IODIR: inputs at power-up
        self.ptr = 0
        self.writes = 0

    def write(self, data: bytes) -> None:
        if not data:
            return
        self.ptr = data[0]
        for b in data[1:]:
            self.reg[self.ptr] = b
            self.ptr += 1
        if len(data) > 1:
            self.writes += 1

    def read(self, n: int) -> bytes:
        out = bytes(self.reg[self.ptr : self.ptr + n])
        self.ptr += n
        return out

    @property
    def outputs(self) -> int:
        """Levels on the 16 pins driven as outputs (GPIO latch, where IODIR is 0)."""
        olat = self.reg[0x12] | self.reg[0x13] << 8
        iodir = self.reg[0x00] | self.reg[0x01] << 8
        return olat & ~iodir & 0xFFFF


class FakeI2C:
    """The busio.I2C methods that adafruit_bus_device uses."""

    def __init__(self, devices: dict[int, FakeMCP23017]) -> None:
        self.devices = devices

    def try_lock(self) -> bool:
        return True

    def unlock(self) -> None:
        pass

    def _dev(self, addr: int) -> FakeMCP23017:
        if addr not in self.devices:
            raise OSError(19, "No such device")
        return self.devices[addr]

    def writeto(self, addr, buf, *, start=0, end=None):
        self._dev(addr).write(bytes(buf[start:end]))

    def readfrom_into(self, addr, buf, *, start=0, end=None):
        end = len(buf) if end is None else end
        buf[start:end] = self._dev(addr).read(end - start)

    def writeto_then_readfrom(
        self, addr, out, inb, *, out_start=0, out_end=None, in_start=0, in_end=None
    ):
        self.writeto(addr, out, start=out_start, end=out_end)
        self.readfrom_into(addr, inb, start=in_start, end=in_end)


def _rig(initial=None, lines=DIRECT):
    chips = {a: FakeMCP23017() for a in PINS.expanders}
    init = {ln: LEVELS.level(ln, 0) for ln in pinmod.ALL_LINES}
    init["power"] = 1
    init.update(initial or {})
    out = BlinkaOutput(PINS, board, digitalio, init, lines, i2c=FakeI2C(chips), expander=MCP23017)
    return out, chips


def _level(out: BlinkaOutput, line: str) -> int:
    # The mock pin keeps the last value written (its read() answers a canned value instead).
    return int(out._dio[line]._pin.current_value)


def test_mock_board_is_the_one_in_use():
    from adafruit_blinka.agnostic import board_id

    assert board_id == "OS_AGNOSTIC_BOARD"


def test_direct_lines_start_at_their_initial_level_and_follow_writes():
    out, chips = _rig({"lid": 0, "ball_a": 1})
    try:
        assert _level(out, "lid") == 0 and _level(out, "ball_a") == 1
        assert _level(out, "incident") == 1  # idle = inactive = high (active low input)
        assert _level(out, "power") == 1
        out.write("ball_a", 0)
        out.write("lid", 1)
        assert _level(out, "ball_a") == 0 and _level(out, "lid") == 1
        for m in chips.values():  # expanders set as outputs, all pockets empty
            assert m.reg[0] == m.reg[1] == 0 and m.outputs == 0
    finally:
        out.close()


def test_pockets_go_out_one_i2c_write_per_expander_per_instant():
    out, chips = _rig()
    try:
        before = {a: m.writes for a, m in chips.items()}
        out.write("pocket:0", 1)
        out.write("pocket:17", 1)
        out.write("pocket:38", 1)
        assert all(m.writes == before[a] for a, m in chips.items())  # nothing until flush
        out.flush()
        assert [chips[a].outputs for a in PINS.expanders] == [1, 1 << 1, 1 << 6]
        assert all(m.writes == before[a] + 1 for a, m in chips.items())
        out.write("pocket:0", 0)
        out.flush()
        assert chips[0x20].outputs == 0 and chips[0x21].writes == before[0x21] + 1
        out.flush()  # nothing changed: no bus traffic
        assert chips[0x20].writes == before[0x20] + 2
    finally:
        out.close()
    assert all(m.reg[0] == m.reg[1] == 0xFF for m in chips.values())  # released as inputs


def test_bad_use_is_refused_clearly():
    out, _ = _rig(lines=("lid",))
    try:
        with pytest.raises(RigError, match="ball_a is not driven"):
            out.write("ball_a", 1)
        with pytest.raises(ValueError, match="0 or 1"):
            out.write("lid", 5)
    finally:
        out.close()
    with pytest.raises(RigError, match="no MCP23017 at 0x20"):
        BlinkaOutput(PINS, board, digitalio, {}, ("lid",), i2c=FakeI2C({}), expander=MCP23017)
    bad = pinmod.RigPins(
        "os_agnostic",
        {**PINS.direct, "lid": "D42"},
        PINS.expanders,
        PINS.i2c_frequency,
        PINS.pulsegen_gp,
        LEVELS,
    )
    with pytest.raises(RigError, match="board has no pin D42"):
        BlinkaOutput(bad, board, digitalio, {}, ("lid",))


def test_player_through_blinka_and_the_expanders():
    out, chips = _rig()
    try:
        player = Player({ln: out for ln in out.channels}, LEVELS)
        edges = [
            Edge(0, "lid", 1),
            Edge(1000, "pocket:20", 1),
            Edge(2000, "ball_b", 1),
            Edge(3000, "ball_b", 0),
            Edge(4000, "incident", 1),
        ]
        stats = player.play(edges)
        assert stats.edges == 5
        assert chips[0x21].outputs == 1 << 4
        assert _level(out, "lid") == 0 and _level(out, "incident") == 0
        assert _level(out, "ball_b") == 0
    finally:
        out.close()


def test_selftest_through_blinka_with_a_loopback_probe():
    out, chips = _rig()

    class Loopback:
        """What the board would read: the mock pins' and the expanders' output levels."""

        def read(self):
            got = {ln: _level(out, ln) for ln in DIRECT if ln != "power"}
            for i, ln in enumerate(pinmod.POCKET_CHANNELS):
                k, bit = PINS.expander_of(i)
                got[ln] = chips[PINS.expanders[k]].outputs >> bit & 1
            return got

    try:
        rep = selftest({ln: out for ln in out.channels}, Loopback(), LEVELS)
        assert rep.ok, rep.to_json()
        assert len(rep.checks) == 45
    finally:
        out.close()


def test_jitter_of_the_blinka_path_on_the_mock():
    out, _ = _rig(lines=("ball_a",))
    try:
        r = measure(out, "ball_a", LEVELS, edges=200, period_us=2000)
    finally:
        out.close()
    assert r.edges == 200
    assert r.write["p50_us"] < 200  # a mock write is a Python call: microseconds
    assert r.lateness["p50_us"] < 1000  # sleep then spin: well under a millisecond, typically


def test_open_blinka_on_the_mock_board():
    init = {ln: 0 for ln in pinmod.ALL_LINES}
    out = open_blinka(PINS, init, pulses=True, pockets=False)
    try:
        assert out.channels == frozenset(DIRECT)
    finally:
        out.close()


def test_cli_jitter_runs_blinka_in_a_fresh_process():
    env = {**os.environ, "BLINKA_OS_AGNOSTIC": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "rmc", "rig", "jitter", "--host", "os_agnostic", "--edges", "100",
         "--json"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["path"] == "blinka" and data["edges"] == 100
    assert data["lateness"]["n"] == 100
