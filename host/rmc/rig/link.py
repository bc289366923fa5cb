"""The board's frame line, read while the rig plays: every line kept with its arrival time.

A reader thread reads the port and time-stamps each line as its end arrives, so receive
times are not held up by the player. The bytes also go through the wire's `rmc.link.Link`,
which checks the frames, asks the firmware to RESEND any gap, and sends the host commands
the session needs (OPEN, LAST3, CLOSE at the instants the trace's truth gives). Arrival
times are on the player's clock (time.perf_counter): `rx_ms(t0)` counts from trace t = 0.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import serial

from rmc.link import Link
from rmcfw import proto


def open_port(url: str, baud: int = 115200, timeout: float = 0.05) -> Any:
    """Any pyserial URL: /dev/ttyUSB0, socket://127.0.0.1:PORT, loop://, rfc2217://..."""
    try:
        return serial.serial_for_url(url, baudrate=baud, timeout=timeout)
    except (serial.SerialException, ValueError) as e:
        raise OSError(f"cannot open {url}: {e}") from None


@dataclass
class Received:
    t: float  # time.perf_counter() when the line's end arrived
    line: bytes

    def rx_ms(self, t0: float) -> float:
        return (self.t - t0) * 1000


@dataclass(frozen=True)
class Command:
    t_us: int  # trace time at which to send it
    cmd: str
    fields: tuple = ()


def commands_from_truth(records: Iterable[dict[str, Any]], chef: str = "rig") -> list[Command]:
    """The host commands of a simulated session, at the instants its truth records give."""
    out = []
    for r in records:
        if r.get("kind") != "truth" or not isinstance(r.get("t_us"), int):
            continue
        ev = r.get("event")
        if ev == "session_open":
            out.append(Command(r["t_us"], proto.C_OPEN, ("chef", chef)))
        elif ev == "last_three":
            out.append(Command(r["t_us"], proto.C_LAST_THREE))
        elif ev == "session_close":
            # with a reason: the chef's forced close (too few coups for the last three)
            why = ("reason", str(r["reason"])) if r.get("reason") else ()
            out.append(Command(r["t_us"], proto.C_CLOSE, ("chef", chef, *why)))
    out.sort(key=lambda c: c.t_us)
    return out


class _Tap:
    """The port as the Link sees it; every chunk read is also time-stamped into lines."""

    def __init__(self, port: Any, reader: FrameReader) -> None:
        self.port = port
        self.reader = reader

    def read(self, n: int) -> bytes:
        data = self.port.read(1)  # blocks up to the port's timeout for the first byte
        if data:
            waiting = getattr(self.port, "in_waiting", 0)
            if waiting:
                data += self.port.read(min(n, waiting))
            self.reader._chunk(data, time.perf_counter())
        return data

    def write(self, data: bytes) -> int:
        return self.port.write(data)


@dataclass
class FrameReader:
    """Reads the frame port in a thread; `send` issues a host command through the Link."""

    port: Any
    key: bytes | None = None
    table: str | None = None  # the board's table id, when known before its first frame
    lines: list[Received] = field(default_factory=list)
    sent: list[tuple[float, bytes]] = field(default_factory=list)
    error: str | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._buf = b""
        self.link = Link(
            _Tap(self.port, self), key=self.key, table=self.table, clock=time.perf_counter
        )

    def start(self) -> FrameReader:
        self._thread = threading.Thread(target=self._run, name="rig-frames", daemon=True)
        self._thread.start()
        return self

    def _chunk(self, data: bytes, now: float) -> None:
        buf = self._buf + data
        *complete, self._buf = buf.split(b"\n")
        for line in complete:
            self.lines.append(Received(now, line.rstrip(b"\r")))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._lock:
                    self.link.poll()
            except Exception as e:  # a dead port ends the recording, and is reported
                self.error = f"frame port: {e}"
                return

    def send(self, cmd: str, fields: tuple = (), wait_s: float = 5.0) -> bytes:
        """Send a command (waits up to wait_s for a first frame: the table id comes from it)."""
        deadline = time.perf_counter() + wait_s
        while self.link.checker.table is None:
            if time.perf_counter() > deadline:
                raise OSError(f"no frame from the board in {wait_s} s: cannot address {cmd}")
            time.sleep(0.01)
        with self._lock:
            line = self.link.send(cmd, fields)
        self.sent.append((time.perf_counter(), line))
        return line

    def hello(self, wait_s: float = 2.0) -> bool:
        """Make sure the board's table and boot are known before commands are due: with a
        table id (config) and no frame yet, ask STATUS (valid for any boot) and wait."""
        if self.lines:
            return True
        if self.link.checker.table is None:
            return False  # nothing to ask with: the first frame will tell (send() waits)
        try:
            self.send(proto.C_STATUS)
        except OSError:
            return False
        deadline = time.perf_counter() + wait_s
        while not self.lines and time.perf_counter() < deadline:
            time.sleep(0.01)
        return bool(self.lines)

    def snapshot(self) -> list[Received]:
        return list(self.lines)

    def stop(self) -> list[Received]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        # A line still unfinished was cut by our stopping, not damaged on the wire: the
        # board may be sending a STAT at that instant. Left out, not counted as a bad frame.
        self._buf = b""
        return self.snapshot()
