"""A pseudo-terminal bridged to the virtual board's REPL socket.

mpremote's `repl` needs a serial device with a file descriptor: over `socket://` it fails
(pyserial's socket port has none). A pty works, and mpremote reads a pty without its 10 ms
polling, so commands go faster through it too. `make repl PORT=socket://127.0.0.1:N` runs

    python -m rmc.vboard.ptybridge socket://127.0.0.1:N mpremote repl

which opens a pty, bridges it to the socket, and runs `mpremote connect <pty> repl`.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
from pathlib import Path


class PtyBridge:
    """A pty whose other end is a TCP socket, connected only while the pty is used.

    The REPL socket takes one client at a time: connecting when bytes come from the pty side
    keeps an idle pty from pushing a `socket://` client off the line.
    """

    def __init__(self, host: str, port: int) -> None:
        import pty  # not on Windows: the caller reports the ImportError
        import tty

        self.host, self.port = host, port
        self._master, self._slave = pty.openpty()
        tty.setraw(self._slave)  # bytes as they are: no echo, no CR/LF translation
        self.path = os.ttyname(self._slave)
        self._open = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._open = False
        for fd in (self._master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def _connect(self) -> socket.socket | None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=5)
        except OSError:
            return None  # board down: dropped, as bytes on an unplugged line
        sock.setblocking(True)
        # Small writes leave at once: without it a command's end waits for the board's ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _run(self) -> None:
        master = self._master
        sock: socket.socket | None = None
        while self._open:
            fds = [master] + ([sock] if sock is not None else [])
            try:
                ready, _, _ = select.select(fds, [], [], 0.5)
            except (OSError, ValueError):
                break
            if master in ready:
                try:
                    data = os.read(master, 4096)
                except OSError:
                    break
                if sock is None:
                    sock = self._connect()
                if sock is not None:
                    try:
                        sock.sendall(data)
                    except OSError:
                        sock.close()
                        sock = None
            if sock is not None and sock in ready:
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if not data:  # the board reset or another client took the line
                    sock.close()
                    sock = None
                    continue
                try:
                    os.write(master, data)
                except OSError:
                    break
        if sock is not None:
            sock.close()


def parse_socket_url(url: str) -> tuple[str, int]:
    """("127.0.0.1", 40123) from "socket://127.0.0.1:40123"; ValueError otherwise."""
    if not url.startswith("socket://"):
        raise ValueError(f"not a socket:// URL: {url}")
    host, sep, port = url[len("socket://") :].rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a socket://HOST:PORT URL: {url}")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print(
            "usage: python -m rmc.vboard.ptybridge socket://HOST:PORT MPREMOTE [ARGS...]",
            file=sys.stderr,
        )
        return 2
    try:
        host, port = parse_socket_url(args[0])
    except ValueError as e:
        print(f"rmc vboard: {e}", file=sys.stderr)
        return 2
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as e:
        print(f"rmc vboard: no virtual board at {args[0]}: {e.strerror or e}", file=sys.stderr)
        return 1
    try:
        bridge = PtyBridge(host, port)
    except ImportError as e:
        print(f"rmc vboard: no pseudo-terminals here: {e}", file=sys.stderr)
        return 1
    mpremote = args[1]
    if os.sep not in mpremote:
        local = Path(sys.executable).with_name(mpremote)
        mpremote = str(local) if local.exists() else mpremote
    try:
        return subprocess.call([mpremote, "connect", bridge.path, *args[2:]])
    except KeyboardInterrupt:
        return 130
    finally:
        bridge.close()


if __name__ == "__main__":
    sys.exit(main())
