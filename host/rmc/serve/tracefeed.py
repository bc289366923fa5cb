"""A recorded trace played as a live table, for `rmc serve --replay TRACE`.

The trace's frame lines are sent as they were received, paced by their reception times
(`rx_ms`, X times faster with `speed`, all at once with 0), on a socket on the loopback: the
service reads it as any table's `socket://` port, so the pages, the API and the database see
the recorded night as it happened. The table does not answer: the service's commands and
requests for gaps are read and dropped (a trace holds only what the table sent). A
connection lost and made again goes on where it stopped.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rmc.frames import FrameError, decode
from rmc.trace import TraceError, read_trace

MAX_PAUSE_S = 10.0  # a longer quiet in the trace (between sessions) is shortened to this
# pyserial's socket:// port empties what has come in when it opens: the feed waits for the
# service's first command (its link probes a quiet table with STATUS within 2 s) before it
# sends, and this long at most
HELLO_S = 5.0


class ReplayError(ValueError):
    """A trace that cannot be replayed (one-line reason)."""


@dataclass
class TraceFeed:
    lines: list[tuple[bytes, float | None]]  # frame lines and their reception times (ms)
    table: str
    speed: float = 1.0
    pos: int = 0  # the next line to send
    done: threading.Event = field(default_factory=threading.Event)  # every line sent
    _server: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _conns: list[socket.socket] = field(default_factory=list)

    @classmethod
    def open(cls, path: str | Path, speed: float = 1.0) -> TraceFeed:
        """The trace's frames, its table (the header's, else its first frame's), and a socket
        bound on 127.0.0.1 for the service to connect to. ReplayError with the reason."""
        if not speed >= 0 or speed == float("inf"):
            raise ReplayError(f"--speed must be 0 (as fast as possible) or more, not {speed}")
        try:
            trace = read_trace(path)
        except TraceError as e:
            raise ReplayError(f"{path}: {e}") from None
        lines = list(trace.frame_lines())
        if not lines:
            raise ReplayError(f"{path}: the trace holds no frame to replay")
        table = str(trace.header.get("table") or "")
        if not table or table == "unknown":
            table = _first_table(lines)
        if not table:
            raise ReplayError(f"{path}: no valid frame names the table")
        feed = cls(lines, table, speed)
        feed._server = socket.create_server(("127.0.0.1", 0))
        return feed

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"socket://127.0.0.1:{self._server.getsockname()[1]}"

    def start(self) -> TraceFeed:
        threading.Thread(target=self._accept, name="replay", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            with contextlib.suppress(OSError):
                c.close()

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._conns.append(conn)
            heard, closed = threading.Event(), threading.Event()
            threading.Thread(target=self._drain, args=(conn, heard, closed), daemon=True).start()
            heard.wait(HELLO_S)
            self._send(conn, closed)  # one connection at a time: the service has one a table

    @staticmethod
    def _drain(conn: socket.socket, heard: threading.Event, closed: threading.Event) -> None:
        """The service's commands (STATUS probes, RESEND): read and dropped."""
        try:
            while conn.recv(65536):
                heard.set()
        except OSError:
            pass
        heard.set()
        closed.set()

    def _send(self, conn: socket.socket, closed: threading.Event) -> None:
        start = time.monotonic()
        base: float | None = None  # the reception time of the first line sent here
        shortened = 0.0  # quiet cut out of the trace so far
        try:
            while self.pos < len(self.lines) and not self._stop.is_set():
                line, rx_ms = self.lines[self.pos]
                if self.speed > 0 and rx_ms is not None:
                    if base is None:
                        base = rx_ms
                    due = (rx_ms - base) / 1000 / self.speed - shortened
                    wait = due - (time.monotonic() - start)
                    if wait > MAX_PAUSE_S:
                        shortened += wait - MAX_PAUSE_S
                        wait = MAX_PAUSE_S
                    if wait > 0 and self._stop.wait(wait):
                        return
                conn.sendall(line.rstrip(b"\r\n") + b"\n")
                self.pos += 1
            self.done.set()
            # the table stays connected, quiet, once the trace is played
            while not closed.is_set() and not self._stop.wait(0.5):
                pass
        except OSError:
            pass  # the service closed its port: it connects again, and the replay goes on
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            with contextlib.suppress(ValueError):
                self._conns.remove(conn)


def _first_table(lines: list[tuple[bytes, float | None]]) -> str:
    for line, _ in lines:
        try:
            return decode(line).table
        except (FrameError, ValueError):
            continue
    return ""
