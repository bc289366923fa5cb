"""The board's frame line, read while the rig plays: every line kept with its receive time.

A reader thread does nothing but `readline()` and time-stamp, so a frame's receive time is
not held up by the player (which has its own thread). Arrival times are on the player's
clock (time.perf_counter): `rx_ms(t0)` gives them from the trace's t = 0, as the truth's.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import serial


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


@dataclass
class FrameReader:
    """Reads lines from a port in a thread, each with its arrival time."""

    port: Any
    lines: list[Received] = field(default_factory=list)
    error: str | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._buf = b""

    def start(self) -> FrameReader:
        self._thread = threading.Thread(target=self._run, name="rig-frames", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.port.readline()
            except Exception as e:  # a dead port ends the recording, and is reported
                self.error = f"frame port: {e}"
                return
            if not data:
                continue
            now = time.perf_counter()
            self._buf += data
            if not self._buf.endswith(b"\n"):
                continue  # timeout in the middle of a line: wait for its end
            line, self._buf = self._buf, b""
            with self._lock:
                self.lines.append(Received(now, line.rstrip(b"\r\n")))

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.lines)

    def stop(self) -> list[Received]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._buf:
            self.lines.append(Received(time.perf_counter(), self._buf.rstrip(b"\r\n")))
            self._buf = b""
        return self.snapshot()
