"""Recording a live table: the serial line (any pyserial URL) into a trace, gaps filled.

`record()` opens the port, runs a `rmc.link.Link` over it (every line written to the trace
as received, every gap asked again from the firmware's journal) and returns the link when
the duration is over, after a short grace period spent filling the last gaps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmc.frames import Frame
from rmc.link import Link
from rmc.trace import TraceWriter, make_header


def open_port(url: str, baud: int = 115200, timeout: float = 0.05) -> Any:
    """A pyserial port for a device path or any pyserial URL (socket://host:port, loop://)."""
    import serial

    return serial.serial_for_url(url, baudrate=baud, timeout=timeout)


class _Port:
    """read(n) returning what is there (waiting at most the port's timeout)."""

    def __init__(self, port: Any) -> None:
        self.port = port

    def read(self, n: int) -> bytes:
        waiting = getattr(self.port, "in_waiting", 0)
        return self.port.read(min(max(waiting, 1), n))

    def write(self, data: bytes) -> None:
        self.port.write(data)
        self.port.flush()


def record(
    url: str,
    out: Path | str,
    key: bytes | None = None,
    table: str | None = None,
    duration: float | None = None,
    grace: float = 3.0,
    baud: int = 115200,
    on_result: Callable[[Frame], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Link:
    port = open_port(url, baud)
    try:
        header = make_header(table or "unknown", "record", firmware=None, url=url)
        with TraceWriter(out, header) as writer:
            link = Link(_Port(port), key=key, table=table, writer=writer, on_result=on_result)
            t0 = time.monotonic()
            end = None if duration is None else t0 + duration
            try:
                while end is None or time.monotonic() < end:
                    if stop is not None and stop():
                        break
                    link.poll()
            except KeyboardInterrupt:
                pass
            # Fill what is still missing before closing the trace.
            t1 = time.monotonic()
            while not link.complete() and time.monotonic() - t1 < grace:
                link.poll()
            return link
    finally:
        port.close()
