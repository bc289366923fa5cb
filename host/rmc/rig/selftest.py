"""Self-test of the rig's wiring before a run: drive each line, read it back through the board.

As MicroPython's own hardware tests check their loopback wiring first, the rig checks that
each harness line it drives arrives at the board input it should, and only there: all lines
at their idle level, then one line at a time to its active level (walking one). A line not
seen is open or stuck; another line moving with it is a short or a swap. The board side is
a Probe: `MpremoteProbe` runs a few lines of MicroPython on the table's board over its REPL
(the firmware is interrupted meanwhile and restarted after); the virtual board has its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rmc.rig.backends import Output, RigError
from rmc.rig.pins import ALL_LINES, POCKET_CHANNELS, PULSE_LINES, SLOW_LINES, Levels
from rmcfw import channels


class Probe(Protocol):
    def read(self) -> dict[str, int]:
        """Electrical level at each of the board's sensor inputs, by line name."""


@dataclass
class LineCheck:
    line: str
    ok: bool
    detail: str = ""


@dataclass
class SelfTestReport:
    checks: list[LineCheck] = field(default_factory=list)
    idle_problems: list[str] = field(default_factory=list)
    reads: int = 0

    @property
    def ok(self) -> bool:
        return not self.idle_problems and all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reads": self.reads,
            "idle_problems": self.idle_problems,
            "lines": [c.__dict__ for c in self.checks],
        }


def selftest(
    routes: dict[str, Output],
    probe: Probe,
    levels: Levels,
    lines: Iterable[str] | None = None,
) -> SelfTestReport:
    """Walk one active line across every line in `lines` (default: every routed sensor line).

    Lines are left at their idle level (logical 0; the lid unlocked) at the end.
    """
    wanted = set(lines or routes)
    order = {ln: i for i, ln in enumerate(ALL_LINES)}  # pockets, pulses, lid, incident
    tested = sorted(
        (ln for ln in wanted if ln in routes and ln != "power"),
        key=lambda ln: (order.get(ln, len(order)), ln),
    )
    idle = {ln: levels.level(ln, 0) for ln in tested}
    rep = SelfTestReport()

    def drive(state: dict[str, int]) -> dict[str, int]:
        outs: list[Output] = []
        for ln, lv in state.items():
            routes[ln].write(ln, lv)
            if routes[ln] not in outs:
                outs.append(routes[ln])
        for o in outs:
            o.flush()
        rep.reads += 1
        got = probe.read()
        missing = [ln for ln in tested if ln not in got]
        if missing:
            raise RigError(f"the probe does not read {', '.join(missing[:5])}")
        return got

    got = drive(idle)
    for ln in tested:
        if got[ln] != idle[ln]:
            rep.idle_problems.append(f"{ln}: reads {got[ln]} with the rig at idle {idle[ln]}")
    for ln in tested:
        state = dict(idle)
        state[ln] = 1 - idle[ln]
        got = drive(state)
        routes[ln].write(ln, idle[ln])  # back to idle before the next line
        routes[ln].flush()
        problems = []
        if got[ln] != state[ln]:
            problems.append(f"not seen: board reads {got[ln]}, rig drives {state[ln]}")
        others = [o for o in tested if o != ln and got[o] != idle[o]]
        if others:
            problems.append(f"also moves {', '.join(others[:6])} (short or swap)")
        rep.checks.append(LineCheck(ln, not problems, "; ".join(problems)))
    return rep


# --- the table board's side, over its REPL ---

_PROBE_MARK = "RIGPROBE"


def probe_code(board: dict[str, Any]) -> tuple[str, str]:
    """(set-up code, read code) of MicroPython for the table board, from its pin map."""
    p = board["pockets"]
    act = int(p["latch_active"])
    direct = [
        (ln, int(board[ln]["pin"]), board[ln].get("pull", "")) for ln in (*PULSE_LINES, *SLOW_LINES)
    ]
    setup = [
        "import binascii, time",
        "from machine import Pin, SPI",
        f"_l = Pin({int(p['latch'])}, Pin.OUT, value={1 - act})",
        f"_s = SPI({int(p['spi'])}, baudrate=1000000, sck=Pin({int(p['sck'])}),"
        f" miso=Pin({int(p['miso'])}))",
    ]
    for ln, pin, pull in direct:
        pv = {"up": "Pin.PULL_UP", "down": "Pin.PULL_DOWN"}.get(pull, "None")
        setup.append(f"_{ln} = Pin({pin}, Pin.IN, {pv})")
    values = "+".join(f"str(_{ln}.value())" for ln, _, _ in direct)
    read = [
        f"_l.value({act}); time.sleep_us(5); _l.value({1 - act})",
        f"print('{_PROBE_MARK}', binascii.hexlify(_s.read({int(p['chips'])})).decode(), {values})",
    ]
    return "\n".join(setup), "\n".join(read)


def parse_probe(out: str, chips: int) -> dict[str, int]:
    """The probe's printed line -> levels by line name (pocket bit order of pico_pins.json)."""
    m = re.search(_PROBE_MARK + r" ([0-9a-f]+) ([01]+)", out)
    if not m or len(m.group(1)) != 2 * chips or len(m.group(2)) != len(PULSE_LINES) + 2:
        raise RigError(f"unexpected probe answer from the board: {out.strip()[:200]!r}")
    data = bytes.fromhex(m.group(1))
    got = {}
    for i in range(channels.POCKETS):
        got[POCKET_CHANNELS[i]] = data[i // 8] >> (7 - i % 8) & 1
    for ln, c in zip((*PULSE_LINES, *SLOW_LINES), m.group(2), strict=True):
        got[ln] = int(c)
    return got


class MpremoteProbe:
    """Reads the board's inputs over its MicroPython REPL (mpremote's serial transport).

    transport: an mpremote SerialTransport (or anything with enter_raw_repl, exec,
    exit_raw_repl). The firmware running on the board is interrupted by the raw REPL.
    """

    def __init__(self, transport: Any, board: dict[str, Any]) -> None:
        self.t = transport
        self.chips = int(board["pockets"]["chips"])
        setup, self._read = probe_code(board)
        self.t.enter_raw_repl(soft_reset=False)
        self.t.exec(setup)

    def read(self) -> dict[str, int]:
        out = self.t.exec(self._read)
        return parse_probe(out.decode(errors="replace"), self.chips)

    def close(self, restart: bool = True) -> None:
        """Leave the raw REPL; restart=True soft-resets so that the firmware runs again."""
        self.t.exit_raw_repl()
        if restart:
            self.t.serial.write(b"\x04")  # Ctrl-D at the friendly REPL: soft reboot, main.py


def open_mpremote_probe(url: str, board: dict[str, Any]) -> MpremoteProbe:
    from mpremote.transport_serial import SerialTransport

    try:
        t = SerialTransport(url, baudrate=115200)
    except Exception as e:  # mpremote raises its own TransportError on a missing device
        raise RigError(f"cannot open the board's REPL at {url}: {e}") from None
    return MpremoteProbe(t, board)
