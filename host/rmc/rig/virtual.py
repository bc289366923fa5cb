"""The rig against the virtual board (rmc.vboard): same trace, same checks, no hardware.

The virtual board plays sensor edges itself, on its virtual clock, exactly at their instants
(`VirtualBoard.feed`): for it, like the pulse generator on real hardware, the rig sends a
schedule rather than driving lines one by one. Host commands (OPEN, LAST3, CLOSE) go on the
frame UART at the wall-clock instants that map onto their virtual instants (the board runs
at `speed` virtual seconds per wall second; one status round trip anchors the two clocks).
Frames are time-stamped with the firmware's own clock: the boot's virtual instant plus the
frame's `ms`, so the comparison with the truth is exact whatever the host's load.

`VirtualOutput` drives static levels (the self-test); `VirtualProbe` reads the board's
inputs back over the real mpremote, with the same MicroPython code as on the table's board.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmc.frames import FrameError, decode
from rmc.rig import edges as edgemod
from rmc.rig.backends import RigError
from rmc.rig.compare import Tolerances, compare
from rmc.rig.link import FrameReader, commands_from_truth, open_port
from rmc.rig.pins import ALL_LINES, POWER, Levels
from rmc.rig.player import PlayStats
from rmc.rig.run import RunResult, write_record
from rmc.rig.selftest import parse_probe, probe_code
from rmc.trace import Trace


class VirtualOutput:
    """Static levels on the virtual board's inputs (feeds the whole state at t = now)."""

    def __init__(self, vb: Any, levels: Levels, lines: tuple[str, ...] = ALL_LINES) -> None:
        self.vb = vb
        self.levels = levels
        self.channels = frozenset(ln for ln in lines if ln != POWER)
        # Every feed carries every line: the board replaces what it has not played yet by
        # the newest feed, so each one must be a whole state, not only the changes.
        self._state: dict[str, int] = dict.fromkeys(self.channels, 0)

    def write(self, line: str, level: int) -> None:
        if line not in self.channels:
            raise RigError(f"line {line} is not an input of the virtual board")
        if level not in (0, 1):
            raise ValueError(f"level of {line} must be 0 or 1, got {level!r}")
        self._state[line] = self.levels.logical(line, level)

    def flush(self) -> None:
        recs = [
            {"kind": "sensor", "t_us": 0, "ch": ln, "v": v} for ln, v in sorted(self._state.items())
        ]
        self.vb.feed(recs)
        time.sleep(0.05)  # let the board's clock pass the edges before anyone reads them

    def close(self) -> None:
        pass


class VirtualProbe:
    """The virtual board's inputs read over mpremote, as MpremoteProbe does on a real board."""

    def __init__(self, vb: Any, board: dict[str, Any]) -> None:
        self.vb = vb
        self.chips = int(board["pockets"]["chips"])
        setup, read = probe_code(board)
        self._code = setup + "\n" + read

    def read(self) -> dict[str, int]:
        proc = self.vb.mpremote("exec", self._code, check=False, timeout=30)
        if proc.returncode != 0:
            raise RigError(f"probe on the virtual board failed: {proc.stdout}{proc.stderr}")
        return parse_probe(proc.stdout, self.chips)


def initial_records(trace: Trace) -> list[dict[str, Any]]:
    """Sensor records at t = 0 giving every line its level before the trace starts."""
    init = edgemod.initial_levels(edgemod.from_trace(trace))
    return [
        {"kind": "sensor", "t_us": 0, "ch": ln, "v": v} for ln, v in init.items() if ln != POWER
    ]


@dataclass
class VirtualRig:
    """Plays traces into a running VirtualBoard (started by the caller, speed > 0)."""

    vb: Any
    tolerances: Tolerances = field(default_factory=Tolerances)
    chef: str = "rig"
    tail_s: float = 4.0  # virtual seconds of frames kept after the last record
    wall_timeout_s: float = 900.0

    def run(
        self, trace: Trace, record: Path | str | None = None, key: bytes | None = None
    ) -> RunResult:
        vb = self.vb
        speed = float(vb.speed)
        if speed <= 0:
            raise RigError("the virtual board must run at a finite speed (speed > 0)")
        recs = [r for r in trace.records if r.get("kind") in ("sensor", "power")]
        edges = edgemod.from_records(recs)  # validates every record before anything is sent
        end_us = edges[-1].t_us if edges else 0
        port = open_port(vb.uart_url, timeout=0.02)
        reader = FrameReader(port, key=key).start()
        try:
            n_ev = len(vb.events)
            vb.feed(recs)
            base = next(
                (e["base_us"] for e in vb.events[n_ev:] if e.get("event") == "sensors"), None
            )
            if base is None:
                raise RigError("the virtual board did not report the schedule's base")
            w0 = time.perf_counter()
            st = vb.status()
            wall_a = (w0 + time.perf_counter()) / 2
            virt_a = float(st["t_us"])
            t0 = wall_a + (base - virt_a) / 1e6 / speed  # wall instant of trace t = 0
            stats = self._send_commands(trace, reader, base, t0, speed)
            deadline = time.perf_counter() + self.wall_timeout_s
            target = base + end_us + self.tail_s * 1e6
            while vb.status()["t_us"] < target:
                if time.perf_counter() > deadline:
                    raise RigError("the virtual board did not reach the end of the trace")
                time.sleep(0.1)
            time.sleep(0.2)
        finally:
            received = reader.stop()
            port.close()
        lines = self.virtual_times(received, base, t0, speed)
        cmp = compare(trace.records, lines, self.tolerances, key=key)
        result = RunResult(stats, cmp, lines)
        result.commands = list(self._sent)
        if reader.error:
            result.notes.append(reader.error)
        if record is not None:
            write_record(record, trace, lines, result)
        return result

    def _send_commands(
        self, trace: Trace, reader: FrameReader, base: float, t0: float, speed: float
    ) -> PlayStats:
        """Send each session command once the board's own virtual clock has reached its
        instant. The wall-clock estimate only paces the waiting: the board's clock can fall
        behind it when the interpreter is starved of CPU, and a command must never reach
        the board before its instant (an OPEN before the lid unlock, not after it)."""
        stats = PlayStats(t0=t0)
        self._sent: list[tuple[float, bytes]] = []
        for c in commands_from_truth(trace.records, self.chef):
            due = base + c.t_us
            wait = t0 + c.t_us / 1e6 / speed - time.perf_counter() - 0.05
            if wait > 0:
                time.sleep(wait)
            deadline = time.perf_counter() + self.wall_timeout_s
            while (now := float(self.vb.status()["t_us"])) < due:
                if time.perf_counter() > deadline:
                    raise RigError("the virtual board's clock stopped before a command")
                time.sleep(min(0.05, max(0.002, (due - now) / 1e6 / speed / 2)))
            line = reader.send(c.cmd, c.fields)
            self._sent.append(((now - base) / 1000, line))  # its virtual instant, from t = 0
            stats.lateness.add((now - due) / speed)  # wall µs after the virtual instant
            stats.instants += 1
        return stats

    def virtual_times(
        self, received: list[Any], base: float, t0: float, speed: float
    ) -> list[tuple[float, bytes]]:
        """(rx_ms from trace t = 0 on the virtual clock, line) for every line received: a
        frame at its boot's instant plus its `ms` stamp, any other line at its arrival (wall
        time since t0, times the speed). The demo places its frames by the same mapping."""
        boots = [e["t_us"] for e in self.vb.events if e.get("event") == "boot"]
        fw_boots: list[int] = []
        decoded = []
        for r in received:
            try:
                f = decode(r.line)
            except FrameError:
                f = None
            if f is not None and f.boot not in fw_boots:
                fw_boots.append(f.boot)
            decoded.append((r, f))
        # The k-th firmware boot seen is the board's boot at the same place from the end.
        shift = len(boots) - len(fw_boots)
        boot_at = {b: boots[i + shift] for i, b in enumerate(fw_boots) if i + shift >= 0}
        out = []
        for r, f in decoded:
            if f is not None and f.boot in boot_at:
                rx = (boot_at[f.boot] + f.ms * 1000 - base) / 1000
            else:
                rx = (r.t - t0) * speed * 1000
            out.append((rx, r.line))
        return out


def firmware_flash(folder: Path | str) -> Path:
    """A flash image folder for the virtual board: the table firmware as `make deploy` puts
    it on a Pico (main.py, board_pico.py, rmcfw/, pins.json, wheel.json), sources not .mpy."""
    import shutil

    from rmc import FIRMWARE_DIR, HARDWARE_DIR

    dst = Path(folder)
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for name in ("main.py", "board_pico.py"):
        shutil.copy(FIRMWARE_DIR / name, dst / name)
    shutil.copytree(
        FIRMWARE_DIR / "rmcfw", dst / "rmcfw", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(HARDWARE_DIR / "pico_pins.json", dst / "pins.json")
    shutil.copy(HARDWARE_DIR / "wheel.json", dst / "wheel.json")
    return dst


def pulsegen_flash(folder: Path | str) -> Path:
    """A flash image folder that makes a virtual board a pulse generator (firmware/pulsegen/
    as deployed on the rig's second Pico), talking over its frame UART instead of USB."""
    import json
    import shutil

    from rmc import FIRMWARE_DIR, HARDWARE_DIR

    dst = Path(folder)
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    src = FIRMWARE_DIR / "pulsegen"
    shutil.copytree(src, dst / "pulsegen", ignore=shutil.ignore_patterns("__pycache__", "main.py"))
    shutil.copy(src / "main.py", dst / "main.py")
    pins = json.loads((HARDWARE_DIR / "rig_pins.json").read_text())
    pins["pulsegen"]["transport"] = "uart"  # the virtual board serves its UART on a socket
    (dst / "rig_pins.json").write_text(json.dumps(pins))
    return dst
