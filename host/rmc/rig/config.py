"""A rig's configuration file (`--rig RIG.json`, example in hardware/rig_example.json) and
the one place where the hardware it names is opened.

    {"host": "raspberry_pi", "pulses": "pulsegen", "pulsegen_port": "/dev/ttyACM1",
     "board_repl": "/dev/ttyACM0", "frame_port": "/dev/ttyUSB0", "pockets": true}
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass, fields
from pathlib import Path

from rmc import infile
from rmc.rig import edges as edgemod
from rmc.rig import pins as pinmod
from rmc.rig.backends import Output, RigError, open_blinka
from rmc.rig.pulsegen import PulseGen, PulseGenOutput

PULSES = ("pulsegen", "blinka")


@dataclass(frozen=True)
class RigConfig:
    host: str = "raspberry_pi"  # pins.HOSTS
    pulses: str = "pulsegen"  # who drives ball and rotor lines: the generator Pico or Blinka
    pulsegen_port: str | None = None  # pyserial URL of the pulse generator
    board_repl: str | None = None  # the table board's USB REPL (self-test probe)
    frame_port: str | None = None  # the table board's frame line (RS-485 adapter)
    frame_baud: int = 115200
    table: str | None = None  # the board's table id: commands can be sent before its first frame
    pockets: bool = True  # drive the pockets through the MCP23017 expanders
    pins: str | None = None  # rig pin map (default hardware/rig_pins.json)
    board_pins: str | None = None  # board pin map (default hardware/pico_pins.json)

    def __post_init__(self) -> None:
        if self.host not in pinmod.HOSTS:
            raise RigError(f"rig config: host must be one of {', '.join(pinmod.HOSTS)}")
        if self.pulses not in PULSES:
            raise RigError(f"rig config: pulses must be one of {', '.join(PULSES)}")
        if self.pulses == "pulsegen" and not self.pulsegen_port:
            raise RigError("rig config: pulses=pulsegen needs pulsegen_port")


def load_config(path: Path | str) -> RigConfig:
    try:
        data = json.loads(infile.read_text(path))
    except OSError as e:
        raise RigError(f"cannot read rig config {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise RigError(f"rig config {path}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise RigError(f"rig config {path}: a JSON object expected")
    known = {f.name for f in fields(RigConfig)}
    unknown = sorted(set(data) - known - {"comment"})
    if unknown:
        raise RigError(f"rig config {path}: unknown keys {', '.join(unknown)}")
    return RigConfig(**{k: v for k, v in data.items() if k in known})


@dataclass
class OpenRig:
    """The opened hardware of a rig; close() releases every line."""

    config: RigConfig
    pins: pinmod.RigPins
    routes: dict[str, Output]
    pulsegen: PulseGen | None
    stack: ExitStack

    def close(self) -> None:
        self.stack.close()

    def __enter__(self) -> OpenRig:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_rig(cfg: RigConfig, initial: dict[str, int] | None = None) -> OpenRig:
    """Open Blinka (and the pulse generator) as the config says. initial: logical levels."""
    from rmc.rig.link import open_port

    pins = pinmod.load(cfg.host, cfg.pins, cfg.board_pins)
    logical = initial or edgemod.initial_levels([])
    electrical = {ln: pins.levels.level(ln, v) for ln, v in logical.items()}
    stack = ExitStack()
    try:
        out = open_blinka(pins, electrical, pulses=cfg.pulses == "blinka", pockets=cfg.pockets)
        stack.callback(out.close)
        routes: dict[str, Output] = {ln: out for ln in out.channels}
        gen = None
        if cfg.pulses == "pulsegen":
            port = open_port(cfg.pulsegen_port or "", timeout=0.1)
            stack.callback(port.close)
            gen = PulseGen(port)
            gen.hello()
            gen.reset()
            pg_out = PulseGenOutput(gen)
            for ln in pg_out.channels:
                routes[ln] = pg_out
    except BaseException:
        stack.close()
        raise
    return OpenRig(cfg, pins, routes, gen, stack)
