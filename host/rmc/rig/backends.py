"""Pin backends: what turns "line X to level L now" into a driven wire.

An Output drives some lines at once when told (`write` then `flush`: writes to one MCP23017
port made at the same instant go out in one I2C transaction). The player owns the timing.
Hardware objects (Blinka's `board` module, `digitalio`, the I2C bus, the expander class) are
passed in; `open_blinka` is the one place that imports Blinka, for the CLI.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rmc.rig.pins import POCKET_CHANNELS, PULSE_LINES, RigPins
from rmcfw import channels


class RigError(RuntimeError):
    """The rig cannot do what it was asked (missing hardware, bad wiring, bad reply)."""


class Output(Protocol):
    """Drives some harness lines with electrical levels."""

    channels: frozenset[str]

    def write(self, line: str, level: int) -> None:
        """Set a line's level; it reaches the wire at the latest on flush()."""

    def flush(self) -> None:
        """Push every level written since the last flush to the wires."""

    def close(self) -> None:
        """Leave the lines released (inputs) where the backend can."""


def _check_level(line: str, level: int) -> None:
    if level not in (0, 1):
        raise ValueError(f"level of {line} must be 0 or 1, got {level!r}")


@dataclass
class RecordingOutput:
    """An Output that only records what it was told (dry runs, tests): (line, level, flushes)."""

    channels: frozenset[str]
    log: list[tuple[str, int, int]] = field(default_factory=list)
    levels: dict[str, int] = field(default_factory=dict)
    flushes: int = 0

    def write(self, line: str, level: int) -> None:
        if line not in self.channels:
            raise RigError(f"line {line} is not driven by this output")
        _check_level(line, level)
        self.levels[line] = level
        self.log.append((line, level, self.flushes))

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        pass


class BlinkaOutput:
    """Blinka `digitalio` pins for the direct lines, MCP23017 expanders for the pockets.

    board: Blinka's `board` module (pins looked up by the names in rig_pins.json);
    digitalio: Blinka's `digitalio` module; i2c: a `busio.I2C` (None: no pockets driven);
    expander: the expander class (adafruit_mcp230xx.mcp23017.MCP23017) taking (i2c, address).
    lines: the direct lines to drive (the pulse lines are left out when a pulse generator
    drives them). initial: electrical level of each line before the first write.
    """

    def __init__(
        self,
        pins: RigPins,
        board: Any,
        digitalio: Any,
        initial: dict[str, int],
        lines: Iterable[str],
        i2c: Any = None,
        expander: Callable[..., Any] | None = None,
    ) -> None:
        self._dio: dict[str, Any] = {}
        self._mcp: list[Any] = []
        self._shadow: list[int] = []
        self._dirty: set[int] = set()
        driven = set(lines)
        try:
            for line in sorted(driven):
                name = pins.direct.get(line)
                if name is None:
                    raise RigError(f"no rig pin for line {line} on host {pins.host}")
                pin = getattr(board, name, None)
                if pin is None:
                    raise RigError(f"board has no pin {name} (line {line}, host {pins.host})")
                d = digitalio.DigitalInOut(pin)
                d.switch_to_output(value=bool(initial.get(line, 0)))
                self._dio[line] = d
            if i2c is not None:
                if expander is None:
                    raise RigError("an I2C bus was given without an expander class")
                for k, addr in enumerate(pins.expanders):
                    try:
                        mcp = expander(i2c, address=addr)
                    except (OSError, ValueError) as e:
                        raise RigError(f"no MCP23017 at 0x{addr:02x}: {e}") from None
                    word = 0
                    for bit in range(16):
                        ch = k * 16 + bit
                        if ch < channels.POCKETS and initial.get(POCKET_CHANNELS[ch], 0):
                            word |= 1 << bit
                    mcp.gpio = word  # output latch first, then direction: no glitch
                    mcp.iodir = 0x0000
                    self._mcp.append(mcp)
                    self._shadow.append(word)
                driven |= set(POCKET_CHANNELS)
        except BaseException:
            self.close()
            raise
        self._pins = pins
        self.channels = frozenset(driven)

    def write(self, line: str, level: int) -> None:
        _check_level(line, level)
        d = self._dio.get(line)
        if d is not None:
            d.value = bool(level)
            return
        if self._mcp and line.startswith("pocket:"):
            k, bit = self._pins.expander_of(channels.parse(line))
            old = self._shadow[k]
            new = old | (1 << bit) if level else old & ~(1 << bit)
            if new != old:
                self._shadow[k] = new
                self._dirty.add(k)
            return
        raise RigError(f"line {line} is not driven by this output")

    def flush(self) -> None:
        for k in sorted(self._dirty):
            self._mcp[k].gpio = self._shadow[k]
        self._dirty.clear()

    def close(self) -> None:
        for d in self._dio.values():
            try:
                d.switch_to_input()  # release the line: the board's pull sets it
                d.deinit()
            except Exception:  # closing must release every other line even if one fails
                pass
        self._dio.clear()
        for mcp in self._mcp:
            try:
                mcp.iodir = 0xFFFF
            except Exception:
                pass
        self._mcp.clear()


def open_blinka(
    pins: RigPins, initial: dict[str, int], pulses: bool, pockets: bool = True
) -> BlinkaOutput:
    """Import Blinka for the configured host and open the rig's outputs.

    pulses: drive the ball and rotor lines from Blinka too (no pulse generator).
    pockets: open the I2C bus and the expanders (the mock board has no I2C device).
    """
    if pins.host == "ft232h":
        os.environ.setdefault("BLINKA_FT232H", "1")
    elif pins.host == "os_agnostic":
        os.environ.setdefault("BLINKA_OS_AGNOSTIC", "1")
    try:
        import board
        import digitalio
    except (ImportError, RuntimeError, NotImplementedError) as e:
        raise RigError(f"Blinka cannot open host {pins.host}: {e}") from None
    lines = [ln for ln in pins.direct if pulses or ln not in PULSE_LINES]
    i2c = expander = None
    if pockets:
        try:
            import busio
            from adafruit_mcp230xx.mcp23017 import MCP23017

            i2c = busio.I2C(board.SCL, board.SDA, frequency=pins.i2c_frequency)
        except (ImportError, RuntimeError, NotImplementedError, ValueError, AttributeError) as e:
            raise RigError(f"Blinka cannot open the I2C bus on host {pins.host}: {e}") from None
        expander = MCP23017
    return BlinkaOutput(pins, board, digitalio, initial, lines, i2c=i2c, expander=expander)
