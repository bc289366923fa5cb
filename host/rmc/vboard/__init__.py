"""The virtual board: the firmware on MicroPython's WebAssembly port, served like a real table.

`VirtualBoard` starts `node host/node/vboard.mjs` and talks to it over its stdin/stdout
(JSON lines). The board's REPL is at `repl_url` (give it to mpremote: `mpremote connect
socket://127.0.0.1:PORT ...`), its frame UART at `uart_url` (give it to pyserial or
`rmc record --port`).

    with VirtualBoard(speed=0) as vb:
        vb.mpremote("cp", "-r", "firmware/.", ":")
        vb.feed("trace.jsonl")         # sensor edges, times from now on the virtual clock
        vb.power_cut(); vb.power_restore()

See docs/vboard.md.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmc import ROOT

VBOARD_JS = ROOT / "host" / "node" / "vboard.mjs"
MPREMOTE = Path(sys.executable).with_name("mpremote")


class VirtualBoardError(RuntimeError):
    """The virtual board could not start, or did not answer."""


@dataclass
class VirtualBoard:
    """A running virtual board (a node process); use as a context manager or start()/stop()."""

    sensors: Path | str | None = None  # JSON Lines trace played from power-up
    speed: float = 0.0  # 0: as fast as possible; 1: real time; X: X times real time
    flash: Path | str | None = None  # host folder holding the board's flash between runs
    repl_port: int = 0  # 0: chosen by the system
    uart_port: int = 0
    pins: Path | str | None = None  # pin map, hardware/pico_pins.json by default
    heap: str = "2M"
    raw_paste: bool = True  # serve mpremote's raw-paste mode (False: answer R\x00, unsupported)
    flash_op_us: int | None = None  # virtual time of one file system write (default 500)
    pty: bool = False  # also serve the REPL on a pseudo-terminal (`repl_pty`), where available
    repl_pty: str | None = field(default=None, init=False)
    node: str = "node"
    start_timeout: float = 20.0
    events: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _queue: queue.Queue = field(default_factory=queue.Queue, init=False, repr=False)
    _stderr: list[str] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _pty_slave: int | None = field(default=None, init=False, repr=False)

    # --- life cycle -----------------------------------------------------------------------

    def command(self) -> list[str]:
        """The node command line this board runs."""
        if shutil.which(self.node) is None:
            raise VirtualBoardError(f"{self.node} not found: run `make setup`")
        cmd = [self.node, str(VBOARD_JS), "--control", "--heap", self.heap]
        cmd += ["--repl-port", str(self.repl_port), "--uart-port", str(self.uart_port)]
        cmd += ["--speed", repr(float(self.speed))]
        if self.sensors is not None:
            cmd += ["--sensors", str(self.sensors)]
        if self.flash is not None:
            cmd += ["--flash", str(self.flash)]
        if self.pins is not None:
            cmd += ["--pins", str(self.pins)]
        if not self.raw_paste:
            cmd.append("--no-raw-paste")
        if self.flash_op_us is not None:
            cmd += ["--flash-op-us", str(int(self.flash_op_us))]
        return cmd

    def _open_pty(self) -> int | None:
        """With `pty`, a pseudo-terminal whose master side node serves; its master fd."""
        if not self.pty:
            return None
        try:
            import pty  # not on Windows
            import tty
        except ImportError as e:
            raise VirtualBoardError(f"no pseudo-terminals here: {e}") from None
        master, slave = pty.openpty()
        tty.setraw(slave)  # bytes as they are: no echo, no CR/LF translation, no signals
        # node writes to it without blocking: a reader that stops must not freeze the board
        os.set_blocking(master, False)
        # Held open for the board's life: with no process on the slave side, node's reads
        # of the master would fail (EIO) between two mpremote runs.
        self._pty_slave = slave
        self.repl_pty = os.ttyname(slave)
        return master

    def start(self) -> VirtualBoard:
        if self._proc is not None:
            raise VirtualBoardError("already started")
        if self.speed < 0:
            raise ValueError(f"speed must be >= 0, not {self.speed}")
        cmd = self.command()
        master = self._open_pty()
        if master is not None:
            cmd += ["--pty-fd", str(master)]
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
                pass_fds=() if master is None else (master,),
            )
        except OSError:
            self._close_pty()
            raise
        finally:
            if master is not None:
                os.close(master)  # node has its own copy
        threading.Thread(target=self._read_events, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        ready = self.wait_event("ready", timeout=self.start_timeout)
        if ready is None:
            self.stop()
            raise VirtualBoardError("virtual board did not start: " + self.stderr_text())
        self.repl_port = ready["repl_port"]
        self.uart_port = ready["uart_port"]
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Save the flash (if any), end the node process; never leaves it running."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.stdin.write('{"cmd":"quit"}\n')
                proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        self._close_pty()

    def _close_pty(self) -> None:
        if self._pty_slave is not None:
            try:
                os.close(self._pty_slave)
            except OSError:
                pass
            self._pty_slave = None

    def __enter__(self) -> VirtualBoard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def repl_url(self) -> str:
        return f"socket://127.0.0.1:{self.repl_port}"

    @property
    def uart_url(self) -> str:
        return f"socket://127.0.0.1:{self.uart_port}"

    # --- control --------------------------------------------------------------------------

    def _send(self, cmd: dict[str, Any]) -> None:
        if not self.running:
            raise VirtualBoardError("virtual board is not running: " + self.stderr_text())
        with self._lock:
            self._proc.stdin.write(json.dumps(cmd) + "\n")
            self._proc.stdin.flush()

    def feed(self, trace: Path | str | list[dict[str, Any]], timeout: float = 10.0) -> int:
        """Play sensor edges from now on the virtual clock (replacing what was left to play).

        `trace` is a JSON Lines file or a list of records {"kind":"sensor","t_us":..,"ch":..,
        "v":0|1} / {"kind":"power","t_us":..,"event":"cut"|"restore"}; t_us counts from now.
        Returns how many edges were scheduled.
        """
        if isinstance(trace, (str, Path)):
            path = Path(trace)
            if not path.is_file():
                raise FileNotFoundError(f"no trace file {path}")
            cmd: dict[str, Any] = {"cmd": "sensors", "path": str(path.resolve())}
        else:
            cmd = {"cmd": "sensors", "records": list(trace)}
        self._send(cmd)
        ev = self.wait_event(("sensors", "error"), timeout=timeout)
        if ev is None:
            raise VirtualBoardError("no answer to the sensor trace")
        if ev["event"] == "error":
            raise ValueError(ev["message"])
        return int(ev["n"])

    def power_cut(self) -> None:
        """Cut the power now: RAM is lost, the flash keeps what was written up to this instant."""
        self._send({"cmd": "power", "event": "cut"})

    def power_restore(self) -> None:
        self._send({"cmd": "power", "event": "restore"})

    def uart_send(self, data: bytes) -> None:
        """Bytes to the board's frame UART (as if sent on the line)."""
        self._send({"cmd": "uart", "hex": data.hex()})

    def save_flash(self, timeout: float = 5.0) -> bool:
        self._send({"cmd": "save"})
        ev = self.wait_event("saved", timeout=timeout)
        return bool(ev and ev.get("ok"))

    def status(self, timeout: float = 5.0) -> dict[str, Any]:
        self._send({"cmd": "status"})
        ev = self.wait_event("status", timeout=timeout)
        if ev is None:
            raise VirtualBoardError("no status")
        return ev

    def mpremote(
        self, *args: str, timeout: float = 60.0, check: bool = True
    ) -> subprocess.CompletedProcess:
        """Run the real mpremote against this board."""
        exe = str(MPREMOTE) if MPREMOTE.exists() else "mpremote"
        proc = subprocess.run(
            [exe, "connect", self.repl_url, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise VirtualBoardError(
                f"mpremote {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
            )
        return proc

    # --- events ---------------------------------------------------------------------------

    def wait_event(
        self,
        name: str | tuple[str, ...],
        timeout: float = 10.0,
        where: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict | None:
        """The next unread event of that name (and matching `where`), or None on timeout.

        Events are read in order; the ones skipped stay in `events` (the full history).
        """
        names = (name,) if isinstance(name, str) else name
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                ev = self._queue.get(timeout=remaining)
            except queue.Empty:
                return None
            if ev is None:
                return None  # the process ended
            if ev.get("event") in names and (where is None or where(ev)):
                return ev

    def skip_events(self) -> None:
        """Forget the unread events: the next wait_event() sees only what happens from now."""
        while True:
            try:
                if self._queue.get_nowait() is None:
                    self._queue.put(None)
                    return
            except queue.Empty:
                return

    def _read_events(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            self.events.append(ev)
            self._queue.put(ev)
        self._queue.put(None)

    def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        for line in proc.stderr:
            self._stderr.append(line)
            if os.environ.get("RMC_VBOARD_DEBUG"):
                sys.stderr.write(line)

    def stderr_text(self) -> str:
        return "".join(self._stderr[-50:])
