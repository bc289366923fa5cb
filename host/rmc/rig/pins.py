"""The rig's pin map (hardware/rig_pins.json) and the table board's input levels.

Traces carry logical values (a pocket line is 1 while the ball is in it, `lid` 1 = locked);
the board's inputs have their own active levels (hardware/pico_pins.json: the lid switch
pulls its input low when locked). The rig drives electrical levels, so the translation is
made once, here, from the same data files the firmware reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmc import HARDWARE_DIR
from rmcfw import channels

RIG_PINS = HARDWARE_DIR / "rig_pins.json"
BOARD_PINS = HARDWARE_DIR / "pico_pins.json"
FORMAT = "rmc-rig-pins/1"
HOSTS = ("raspberry_pi", "ft232h", "os_agnostic")
PULSE_LINES = ("ball_a", "ball_b", "rotor_a", "rotor_b")
SLOW_LINES = ("lid", "incident")
POWER = "power"  # not a sensor: the rig's switch in the board's supply (trace "power" records)
POCKET_CHANNELS = tuple(channels.name(i) for i in range(channels.POCKETS))
ALL_LINES = (*POCKET_CHANNELS, *PULSE_LINES, *SLOW_LINES, POWER)
EXPANDER_BITS = 16


class PinMapError(ValueError):
    """The rig pin map or the board pin map is missing something or inconsistent."""


@dataclass(frozen=True)
class Levels:
    """Logical trace value -> electrical level at the board's input, per line."""

    active: dict[str, int]  # line -> the electrical level of logical 1

    def level(self, line: str, v: int) -> int:
        a = self.active.get(line)
        if a is None:
            raise PinMapError(f"no level known for line {line!r}")
        return a if v else 1 - a

    def logical(self, line: str, level: int) -> int:
        return 1 if level == self.active[line] else 0

    @classmethod
    def from_board(cls, board: dict[str, Any], power_on: int = 1) -> Levels:
        try:
            pocket = int(board["pockets"]["active"])
            active = dict.fromkeys(POCKET_CHANNELS, pocket)
            for line in PULSE_LINES:
                # Ball and rotor sensors pulse high (pull-down inputs, rising edges).
                active[line] = 0 if board[line].get("pull") == "up" else 1
            active["lid"] = int(board["lid"]["locked_level"])
            active["incident"] = int(board["incident"]["active_level"])
        except (KeyError, TypeError, ValueError) as e:
            raise PinMapError(f"board pin map: missing or bad {e}") from None
        active[POWER] = power_on
        return cls(active)


@dataclass(frozen=True)
class RigPins:
    """Where each harness line is driven from (see hardware/rig.md)."""

    host: str
    direct: dict[str, str]  # line -> Blinka board pin name (lid, incident, pulses, power)
    expanders: tuple[int, ...]  # I2C addresses; pocket i on expanders[i // 16], bit i % 16
    i2c_frequency: int
    pulsegen_gp: dict[str, int]  # line -> GP number on the pulse-generator Pico
    levels: Levels
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    def expander_of(self, pocket: int) -> tuple[int, int]:
        """(index in expanders, bit) of a pocket channel."""
        return pocket // EXPANDER_BITS, pocket % EXPANDER_BITS


def load(
    host: str, path: Path | str | None = None, board_path: Path | str | None = None
) -> RigPins:
    """The rig pin map for one rig host, with the board's levels. PinMapError on bad data."""
    if host not in HOSTS:
        raise PinMapError(f"unknown rig host {host!r}; one of {', '.join(HOSTS)}")
    rig = _read_json(Path(path or RIG_PINS))
    board = _read_json(Path(board_path or BOARD_PINS))
    if rig.get("format") != FORMAT:
        raise PinMapError(f"rig pin map: format {rig.get('format')!r}, expected {FORMAT!r}")
    try:
        direct = dict(rig["hosts"][host])
        expanders = tuple(int(a) for a in rig["pockets"]["expanders"])
        freq = int(rig["pockets"].get("i2c_frequency", 100000))
        gp = {k: int(v["gp"]) for k, v in rig["pulsegen"]["lines"].items()}
        power_on = int(rig.get("power", {}).get("on_level", 1))
    except (KeyError, TypeError, ValueError) as e:
        raise PinMapError(f"rig pin map: missing or bad {e}") from None
    missing = [n for n in (*PULSE_LINES, *SLOW_LINES, POWER) if n not in direct]
    if missing:
        raise PinMapError(f"rig pin map, host {host}: no pin for {', '.join(missing)}")
    if len(set(direct.values())) != len(direct):
        raise PinMapError(f"rig pin map, host {host}: one pin drives two lines")
    if len(expanders) * EXPANDER_BITS < channels.POCKETS:
        raise PinMapError(
            f"rig pin map: {len(expanders)} expanders drive {len(expanders) * 16} lines,"
            f" {channels.POCKETS} pockets"
        )
    if len(set(expanders)) != len(expanders) or not all(0x20 <= a <= 0x27 for a in expanders):
        raise PinMapError("rig pin map: MCP23017 addresses must be distinct, 0x20..0x27")
    if sorted(gp) != sorted(PULSE_LINES) or len(set(gp.values())) != len(gp):
        raise PinMapError("rig pin map: the pulse generator needs one distinct GP per pulse line")
    return RigPins(host, direct, expanders, freq, gp, Levels.from_board(board, power_on), rig)


def board_pins(path: Path | str | None = None) -> dict[str, Any]:
    return _read_json(Path(path or BOARD_PINS))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise PinMapError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise PinMapError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise PinMapError(f"{path}: not a JSON object")
    return data
