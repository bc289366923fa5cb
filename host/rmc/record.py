"""Recording a live table: the serial line (any pyserial URL) into a trace, gaps filled.

`record()` opens the port, runs a `rmc.link.Link` over it (every line written to the trace
as received, every gap asked again from the firmware's journal) and returns a `Recording`
(the link, and how it stopped) when the duration is over or it is asked to stop, after a
short grace period spent filling the last gaps; the trace ends with its end record.
"""

from __future__ import annotations

import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rmc.frames import Frame
from rmc.link import Link
from rmc.outfile import OutputError, check, reason, replacing
from rmc.trace import TraceWriter, make_header


def open_port(url: str, baud: int = 115200, timeout: float = 0.05) -> Any:
    """A pyserial port for a device path or any pyserial URL (socket://host:port, loop://)."""
    import serial

    return serial.serial_for_url(url, baudrate=baud, timeout=timeout)


class PortError(Exception):
    """The port could not be opened (`record` raises it), or failed on the way (`PortLost`)."""


class PortLost(PortError):
    pass


class _Port:
    """read(n) returning what is there (waiting at most the port's timeout); the port's own
    errors come out as PortLost, told apart from the trace file's."""

    def __init__(self, port: Any) -> None:
        self.port = port
        # pyserial's socket:// port says 0 or 1 for in_waiting, and its read(n) waits for n
        # bytes or its timeout: read byte by byte, a frame cost a poll a byte. It is read
        # without a timeout once its socket shows data, waited for here.
        self._fd: int | None = None
        if type(port).__module__.endswith("protocol_socket"):
            self._wait = port.timeout if port.timeout else 0.05
            port.timeout = 0
            self._fd = port.fileno()

    def read(self, n: int) -> bytes:
        try:
            if self._fd is not None:
                if not select.select([self._fd], [], [], self._wait)[0]:
                    return b""
                return self.port.read(n)
            waiting = getattr(self.port, "in_waiting", 0)
            return self.port.read(min(max(waiting, 1), n))
        except Exception as e:
            lost = _lost(e)
            if lost is None:
                raise
            raise lost from e

    def write(self, data: bytes) -> None:
        try:
            self.port.write(data)
            self.port.flush()
        except Exception as e:
            lost = _lost(e)
            if lost is None:
                raise
            raise lost from e


def _lost(e: Exception) -> PortLost | None:
    # pyserial's SerialException is an OSError subclass on some versions only
    if isinstance(e, OSError) or type(e).__name__ in ("SerialException", "PortNotOpenError"):
        return PortLost(f"{type(e).__name__}: {e}")
    return None


@dataclass
class Recording:
    """What `record()` leaves: the link (checker, results, stats) and how it stopped."""

    link: Link
    port_lost: str | None = None  # the port's error, when the line went away mid-recording


def record(
    url: str,
    out: Path | str,
    key: bytes | None = None,
    force: bool = False,
    table: str | None = None,
    duration: float | None = None,
    grace: float = 3.0,
    baud: int = 115200,
    on_result: Callable[[Frame], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Recording:
    """Record until `duration`, `stop()`, Ctrl-C or SIGTERM (a service being stopped), then
    spend up to `grace` seconds filling the last gaps (a second signal skips that) and end
    the trace. A port that fails on the way (a cable pulled) ends it at once, with a note;
    the line it cut is kept, as a damaged line.
    Raises PortError when the port cannot be opened, OutputError (rmc.outfile) when the trace
    cannot be written, or `out` exists and `force` is not given (before the port is opened)."""
    check(out, force)
    try:
        port = open_port(url, baud)
    except Exception as e:  # pyserial: SerialException, ValueError for a bad URL
        if isinstance(e, (OSError, ValueError)) or type(e).__name__ == "SerialException":
            raise PortError(f"cannot open {url}: {e}") from e
        raise
    try:
        header = make_header(table or "unknown", "record", firmware=None, url=url)
        with (
            _trace_file(out) as stream,
            TraceWriter(stream, header) as writer,
            _stop_signals() as signals,
        ):
            link = Link(_Port(port), key=key, table=table, writer=writer, on_result=on_result)
            rec = Recording(link)
            t0 = time.monotonic()
            end = None if duration is None else t0 + duration
            try:
                while end is None or time.monotonic() < end:
                    if signals or (stop is not None and stop()):
                        break
                    link.poll()
                # Fill what is still missing before closing the trace.
                t1 = time.monotonic()
                while not link.complete() and time.monotonic() - t1 < grace:
                    if len(signals) > 1:
                        break
                    link.poll()
            except PortLost as e:
                _cut_line(link)
                rec.port_lost = str(e)
                writer.write(
                    {
                        "kind": "note",
                        "t_ms": round(time.time() * 1000, 3),
                        "text": f"port lost, recording stopped: {rec.port_lost}",
                    }
                )
            return rec
    finally:
        port.close()


@contextmanager
def _trace_file(out: Path | str) -> Iterator[IO[str]]:
    """The trace's stream. A new file is written in place, line by line, so that a
    recording cut short is a trace there; an existing one (--force) is replaced only once
    the new trace is ended (rmc.outfile), never left half-written. OutputError for a path
    that cannot be written, a full disk included."""
    p = Path(out)
    try:
        if p.is_file():
            with replacing(p) as tmp, open(tmp, "w", encoding="utf-8") as f:
                yield f
        else:
            # "x": a file made since check() is not overwritten; /dev/full and the like are
            # written in place
            with open(p, "w" if p.exists() else "x", encoding="utf-8") as f:
                yield f
    except OSError as e:
        raise OutputError(reason(out, e)) from None


def _cut_line(link: Link) -> None:
    """The port closed in the middle of a line: its bytes go to the trace and the checker
    as a damaged line, rather than being dropped."""
    rest = bytes(link._buf)  # the bytes after the last newline
    if rest:
        link._buf.clear()
        link._line(rest)


@contextmanager
def _stop_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM ask the recording to stop, between two lines: a signal raised as
    an exception could land inside a trace write, and leave its end record wrong."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got  # signals go to the main thread only; there the caller's stop() serves
        return

    def ask(signum: int, frame: object) -> None:
        got.append(signum)

    old = {sig: signal.signal(sig, ask) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
