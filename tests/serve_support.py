"""Helpers for the table service's tests (not a test module): a virtual board running the
firmware with a key, `rmc serve` as a real process, and a simulated session played on the
board with its commands sent through the service's API, as a chef de table would."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmc.demo import deploy as fwdeploy
from rmc.demo.session import Segment, initial_records, plan
from rmc.serve.client import Client, ClientError
from rmc.sim import Session, simulate_session
from rmc.vboard import VirtualBoard
from rmcfw import proto

TABLE = "T01"  # the firmware's table id when the board has no table.txt
TAIL_US = 4_000_000
KEY_HEX = "00112233445566778899aabbccddeeff0123456789abcdef"


def wait_for(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = cond()
        except ClientError:
            got = None  # the service is starting
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


@dataclass
class Tokens:
    folder: Path
    names: dict[str, str] = field(default_factory=dict)  # role -> token file

    @classmethod
    def make(cls, folder: Path) -> Tokens:
        folder.mkdir(parents=True, exist_ok=True)
        t = cls(folder)
        for role, name in (("chef", "marie"), ("engineer", "paul"), ("display", "screen")):
            path = folder / f"{name}.token"
            path.write_text(secrets.token_hex(16) + "\n")
            t.names[role] = str(path)
        return t

    def operators_toml(self) -> str:
        out = []
        for role, path in self.names.items():
            name = Path(path).stem
            out.append(f'[[operator]]\nname = "{name}"\nrole = "{role}"\ntoken_file = "{path}"\n')
        return "\n".join(out)


@contextlib.contextmanager
def board(folder: Path, fw: Path, key_hex: str | None = KEY_HEX) -> Iterator[VirtualBoard]:
    """A started virtual board with the firmware deployed (and key.txt when key_hex)."""
    extra: tuple[tuple[Path, str], ...] = ()
    if key_hex:
        kf = folder / "key.txt"
        kf.write_text(key_hex + "\n")
        extra = ((kf, "key.txt"),)
    with VirtualBoard(speed=0) as vb:
        fwdeploy.deploy(vb, fw, extra=extra)
        yield vb


def power_up(vb: VirtualBoard, session: Session) -> None:
    vb.feed(initial_records(session))
    vb.power_cut()
    assert vb.wait_event("power", 10, where=lambda e: e.get("state") == "off")
    vb.power_restore()
    assert vb.wait_event("power", 10, where=lambda e: e.get("state") == "on")


class Served:
    """`rmc serve` as a process, restartable on the same database."""

    def __init__(self, folder: Path, uart_url: str, db: str, tokens: Tokens, key: bool) -> None:
        self.folder = folder
        self.db = db
        self.tokens = tokens
        cfg = folder / "serve.toml"
        lines = [f'db = "{db}"', 'http = "127.0.0.1:0"', ""]
        lines += ["[[table]]", f'id = "{TABLE}"', f'url = "{uart_url}"']
        if key:
            (folder / "T01.key").write_text(KEY_HEX + "\n")
            lines.append(f'key_file = "{folder / "T01.key"}"')
        lines += ["", tokens.operators_toml()]
        cfg.write_text("\n".join(lines))
        self.config = cfg
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.log = folder / "serve.log"
        self.starts = 0

    def start(self, timeout: float = 60.0) -> Served:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        err = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rmc", "serve", "--config", str(self.config)],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
        err.close()
        line = _readline(self.proc, timeout)
        if "listening on " not in line:
            self.proc.kill()
            raise AssertionError(f"rmc serve did not start: {line!r}; {self.log.read_text()}")
        self.url = line.rsplit("listening on ", 1)[1].strip()
        self.starts += 1
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def client(self, role: str = "chef") -> Client:
        return Client.from_token_file(self.url, self.tokens.names[role])


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    import selectors

    sel = selectors.DefaultSelector()
    assert proc.stdout is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not sel.select(left):
            break
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
    sel.close()
    return buf.decode(errors="replace")


VERB = {proto.C_OPEN: "open", proto.C_LAST_THREE: "last3", proto.C_CLOSE: "close"}


def answered(out: dict[str, Any]) -> bool:
    """The table did the order; or, for CLOSE, had closed the session itself already (the
    table closes it when the lid is locked after the last coup, and the simulated chef's
    CLOSE comes after that, as in `rmc demo`)."""
    return bool(out.get("ok")) or (
        out.get("cmd") == proto.C_CLOSE and out.get("detail") == "closed"
    )


def order_args(cmd: str, fields: tuple) -> tuple[str, dict[str, Any]]:
    """A rig command (firmware name and fields) as the service's verb and arguments."""
    f = dict(zip(fields[::2], fields[1::2], strict=True))
    args: dict[str, Any] = {}
    if cmd == proto.C_OPEN:
        args["chef"] = f.get("chef", "marie")
    if cmd == proto.C_CLOSE and "reason" in f:
        args["reason"] = f["reason"]
    return VERB[cmd], args


def play(
    vb: VirtualBoard,
    segments: list[Segment],
    command: Callable[[str, dict[str, Any]], dict[str, Any]],
    between: Callable[[int], None] = lambda i: None,
    wall_limit_s: float = 600.0,
    playing: Callable[[int], None] = lambda i: None,
) -> list[dict[str, Any]]:
    """Feed the session segment by segment; before each segment's command, wait until the
    board has played the one before (its virtual clock), then send the command through
    `command(verb, args)` and require the table's answer. `between(i)` runs before segment i
    (a test kills the service there); `playing(i)` right after segment i is fed, while the
    board plays it. Returns the answers."""
    answers = []
    end = 0.0
    for i, seg in enumerate(segments):
        between(i)
        if seg.command is not None:
            _wait_clock(vb, end, wall_limit_s)
            verb, args = order_args(seg.command.cmd, seg.command.fields)
            answers.append(command(verb, args))
        n_ev = len(vb.events)
        vb.feed(seg.records)
        base = next(e["base_us"] for e in vb.events[n_ev:] if e.get("event") == "sensors")
        end = float(base) + seg.span_us
        playing(i)
    _wait_clock(vb, end + TAIL_US, wall_limit_s)
    return answers


def _wait_clock(vb: VirtualBoard, until_us: float, limit_s: float) -> None:
    wait_for(lambda: float(vb.status()["t_us"]) >= until_us, limit_s, "the board's clock")


def command_with_retry(served: Served, verb: str, args: dict[str, Any], timeout: float = 120.0):
    """Send an order, waiting for the service to be up and connected (a test restarts it)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            return served.client().command(TABLE, verb, args)
        except ClientError as e:
            last = str(e)
            time.sleep(0.2)
    raise AssertionError(f"{verb}: no answer through the service in {timeout} s: {last}")


def simulate(seed: int, spins: int, scenarios: tuple[str, ...] = ()) -> tuple[Session, list]:
    session = simulate_session(seed, spins, scenarios=scenarios)
    return session, plan(session, chef="marie")


class EventStream:
    """A client of the service's live event stream (Server-Sent Events), in a thread."""

    def __init__(self, server: str, token_file: str, table: str | None = None) -> None:
        import urllib.request

        token = Path(token_file).read_text().strip()
        url = server + "/api/events" + (f"?table={table}" if table else "")
        self.req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        self.events: list[dict[str, Any]] = []
        self.error: str | None = None

    def start(self) -> EventStream:
        import threading

        threading.Thread(target=self._run, daemon=True).start()
        wait_for(lambda: self.events or self.error or self._open, 30, "the event stream")
        return self

    _open = False

    def _run(self) -> None:
        import json
        import urllib.request

        try:
            with urllib.request.urlopen(self.req, timeout=120) as resp:
                assert resp.headers["Content-Type"].startswith("text/event-stream")
                self._open = True
                for raw in resp:
                    line = raw.decode().rstrip("\n")
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[6:]))
        except Exception as e:
            self.error = str(e)

    def of(self, kind: str, at_least: int) -> list[dict[str, Any]] | None:
        found = [e for e in self.events if e.get("type") == kind]
        return found if len(found) >= at_least else None


class Cable:
    """A TCP relay between the service and a table's port, which a test can pull out: the
    connection drops, and new ones are refused (closed at once) until it is put back."""

    def __init__(self, target_url: str) -> None:
        import socket
        import threading

        host, port = target_url.removeprefix("socket://").rsplit(":", 1)
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.server.getsockname()[1]}"
        self.plugged = True
        self.cuts = 0
        self._pairs: list[tuple[Any, Any]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.plugged:
                client.close()
                continue
            try:
                board = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, board))
            for a, b in ((client, board), (board, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: Any, b: Any) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.close()

    def pull(self) -> None:
        import socket

        self.plugged = False
        self.cuts += 1
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()

    def plug(self) -> None:
        self.plugged = True

    def close(self) -> None:
        self.pull()
        self.server.close()


def find_chromium() -> tuple[str, str] | None:
    """Chromium's binary and its WebDriver, or None."""
    binary = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )
    driver = shutil.which("chromedriver") or next(
        (
            p
            for p in ("/usr/lib/chromium/chromedriver", "/usr/bin/chromedriver")
            if os.access(p, os.X_OK)
        ),
        None,
    )
    return (binary, driver) if binary and driver else None
