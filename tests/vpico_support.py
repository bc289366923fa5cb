"""What the virtual Pico's tests share: a flash image with the firmware, the frame line read
raw, and one simulated session played at the chip's pins (tests/test_vpico*.py)."""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli_support import rmc as run_rmc

from rmc.vpico import VirtualPico, build_image, firmware_files


def frames_until(url: str, until: bytes, timeout: float, count: int = 1) -> bytes:
    """Bytes from the frame UART's socket until `count` whole lines holding `until` were
    seen (or the timeout). A raw socket: nothing is flushed at the open, as pyserial does."""
    host, port = url.removeprefix("socket://").split(":")
    got = b""
    pattern = re.escape(until) + rb"[^\n]*\n"
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.settimeout(0.2)
        while len(re.findall(pattern, got)) < count and time.monotonic() < deadline:
            try:
                got += s.recv(4096)
            except TimeoutError:
                pass
    return got


def boot_resets(lines: bytes) -> list[str]:
    """The `reset` field of every BOOT frame in these bytes, in order."""
    return [m.decode() for m in re.findall(rb",BOOT,[^\n]*?reset=(\w+)", lines)]


def image(tmp_path: Path, nowdt: bool, table: str | None = None, name: str = "flash.img") -> Path:
    """The firmware as `make deploy` puts it, on a fresh LittleFS image."""
    fw = firmware_files(tmp_path / "fw")
    extra = {}
    if nowdt:
        # main.py starts the table without its watchdog (docs/operating.md, "Deploy"), so that
        # mpremote's Ctrl-C leaves the chip at its REPL instead of being reset 2 s later
        extra["nowdt"] = b""
    if table:
        extra["table.txt"] = table.encode()
    return build_image(tmp_path / name, fw, extra)


@dataclass
class Played:
    """One session played on the virtual Pico, and what its tests look at."""

    trace: Any  # rmc.trace.Trace
    result: Any  # rmc.rig.run.RunResult
    status: dict[str, Any]
    events: list[dict[str, Any]]
    record: Path
    image: Path

    @property
    def lines(self) -> list[bytes]:
        return [ln for _t, ln in self.result.lines]

    def truth(self, event: str) -> list[dict[str, Any]]:
        return [
            r for r in self.trace.records if r.get("kind") == "truth" and r.get("event") == event
        ]

    def frames(self, ftype: str) -> list[bytes]:
        return [ln for ln in self.lines if f",{ftype},".encode() in ln]

    def check(self) -> Any:
        """`rmc check` on the run's record."""
        return run_rmc("check", str(self.record))


def play(tmp_path: Path, scenario: Any, flash_timing: bool = True) -> Played:
    """The scenario's simulated session played at the chip's pins, on its own clock, into
    the firmware as deployed (with its watchdog), and compared with the simulator's truth."""
    from rmc.rig.compare import Tolerances
    from rmc.rig.scenarios import write_trace
    from rmc.rig.virtual import VirtualRig, initial_records

    trace = write_trace(scenario, tmp_path)
    init = tmp_path / "initial.jsonl"
    init.write_text("\n".join(json.dumps(r) for r in [trace.header, *initial_records(trace)]))
    # the board answers as the trace's table, so that `rmc check` reads the run as one table
    img = image(tmp_path, nowdt=False, table=trace.header["table"])
    record = tmp_path / "run.jsonl"
    # speed: an upper bound of the chip's (~0.1-0.25 of real time), which only paces the
    # rig's waits: it then polls the chip's own clock and sends each command at its instant
    # (a bound below the chip's speed would send them late, after the trace's lid events)
    with VirtualPico(image=img, sensors=init, speed=1.0, flash_timing=flash_timing) as vp:
        assert vp.wait_event("boot", timeout=30)
        # « rien ne va plus » within ±0.5 s is a share over many spins (issue 6): each run
        # is checked without it, late calls still failing at once (tests/test_rig_virtual)
        # wall_timeout_s: the rig's longest wait for the chip's clock, from one command to
        # the next (75 s of the chip's time between OPEN and CLOSE: 20+ minutes of wall
        # time at 0.06 of real time, with other jobs on the machine)
        rig = VirtualRig(vp, tolerances=Tolerances(rnvp_within_fraction=0.0), wall_timeout_s=3600.0)
        result = rig.run(trace, record=record)
        st = vp.status()
        events = list(vp.events)
    return Played(trace, result, st, events, record, img)


def explain(p: Played) -> str:
    """Why a comparison failed, for the assertion's message."""
    cmp = p.result.comparison
    return json.dumps(
        {
            "problems": cmp.problems,
            "spins": [s.__dict__ for s in cmp.spins if not s.ok],
            "violations": cmp.checker.get("violations", [])[:5],
            "notes": p.result.notes,
        },
        indent=1,
        default=str,
    )
