"""A board that answers mpremote at once: the ceiling of `mpremote cp` for any board.

It serves MicroPython's raw REPL and raw-paste mode (window 2048) and runs each command with
CPython in a folder of its own, answering with the acknowledgement, the output, both `\\x04` and
the prompt in one write. Over TCP it also sends a `\\x01` as soon as a command's data came: that
byte carries the TCP acknowledgement without which mpremote's end-of-data byte waits 40 ms
(Nagle's algorithm), as any board on a socket must. What is left of a copy's time is
mpremote's: its start, its 10 ms sleep each time it polls a port that has nothing yet
(socket://, serial devices; a pty is read blocking), and its reading of the answers one byte
at a time.

    with IdealBoard.pty() as board:       # or IdealBoard.tcp(): board.url is socket://...
        subprocess.run(["mpremote", "connect", board.url, "cp", "-f", "x.bin", ":"])
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import select
import socket
import struct
import tempfile
import threading
import traceback
from collections.abc import Callable

WINDOW = 2048
BANNER = b"raw REPL; CTRL-B to exit\r\n>"


class IdealBoard:
    """One client at a time, on a pty or a loopback TCP port; stop() ends it."""

    def __init__(
        self,
        url: str,
        recv: Callable[[], bytes],
        send: Callable[[bytes], None],
        close: Callable[[], None],
        early_window: bool,
    ) -> None:
        self.url = url
        self._recv, self._send, self._close = recv, send, close
        self._early_window = early_window
        self._dir = tempfile.TemporaryDirectory()
        self._open = True
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @classmethod
    def pty(cls) -> IdealBoard:
        import pty
        import tty

        master, slave = pty.openpty()
        tty.setraw(slave)

        def recv() -> bytes:
            ready, _, _ = select.select([master], [], [], 0.2)
            return os.read(master, 65536) if ready else b""

        def close() -> None:
            for fd in (master, slave):
                with contextlib.suppress(OSError):
                    os.close(fd)

        return cls(os.ttyname(slave), recv, lambda b: os.write(master, b), close, False)

    @classmethod
    def tcp(cls) -> IdealBoard:
        server = socket.create_server(("127.0.0.1", 0))
        server.settimeout(0.2)
        conn: list[socket.socket] = []

        def recv() -> bytes:
            if not conn:
                try:
                    c, _ = server.accept()
                except OSError:  # timeout: nobody yet
                    return b""
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                c.settimeout(0.2)
                conn.append(c)
            try:
                data = conn[0].recv(65536)
            except TimeoutError:
                return b""
            except OSError:
                data = b""
            if not data:  # the client left: wait for the next one
                conn.pop().close()
            return data

        def send(b: bytes) -> None:
            if conn:
                conn[0].sendall(b)

        def close() -> None:
            for s in (*conn, server):
                s.close()

        url = f"socket://127.0.0.1:{server.getsockname()[1]}"
        return cls(url, recv, send, close, True)

    def __enter__(self) -> IdealBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._open = False
        self._thread.join(timeout=2)
        self._close()
        self._dir.cleanup()

    # --- the REPL ---------------------------------------------------------------------------

    def _run(self, code: bytes, scope: dict) -> tuple[bytes, bytes]:
        out = io.StringIO()
        err = b""
        cwd = os.getcwd()
        os.chdir(self._dir.name)  # the board's flash; the bench runs one board at a time
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, "<stdin>", "exec"), scope)
        except OSError as e:  # as MicroPython words it: mpremote maps it back to an errno
            name = errno.errorcode.get(e.errno, str(e.errno))
            err = f"Traceback (most recent call last):\r\nOSError: [Errno {e.errno}] {name}\r\n"
            err = err.encode()
        except Exception:
            err = traceback.format_exc().replace("\n", "\r\n").encode()
        finally:
            os.chdir(cwd)
        return out.getvalue().replace("\n", "\r\n").encode("utf8"), err

    def _serve(self) -> None:
        buf = b""
        state = "friendly"  # "raw", "paste" (collecting a command up to its \x04)
        scope: dict = {}
        while self._open:
            data = self._recv()
            if not data:
                continue
            buf += data
            while buf:
                if state == "friendly":
                    i = buf.find(b"\x01")
                    buf = buf[i + 1 :] if i >= 0 else b""
                    if i >= 0:
                        state = "raw"
                        self._send(b"\r\n" + BANNER)
                elif state == "paste":
                    end = buf.find(b"\x04")
                    if end < 0:
                        if self._early_window:  # one more window: the TCP ACK rides along
                            self._send(b"\x01")
                        break  # the rest of the command is on its way
                    body, buf = buf[:end], buf[end + 1 :]
                    state = "raw"
                    out, err = self._run(body, scope)
                    self._send(b"\x04" + out + b"\x04" + err + b"\x04>")
                elif buf.startswith(b"\x05"):
                    if len(buf) < 3:
                        break
                    buf = buf[3:]  # \x05 A \x01: raw-paste mode, with a window wide enough
                    state = "paste"
                    self._send(b"R\x01" + struct.pack("<H", WINDOW))
                elif buf[:1] == b"\x04":  # Ctrl-D on an empty line: soft reset
                    buf = buf[1:]
                    scope = {}
                    self._send(b"OK\r\nMPY: soft reboot\r\n" + BANNER)
                elif buf[:1] == b"\x02":
                    buf = buf[1:]
                    state = "friendly"
                else:
                    buf = buf[1:]  # \r, \x03, \x01 again: nothing to run
