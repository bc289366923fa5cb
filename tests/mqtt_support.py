"""A throwaway Mosquitto broker for tests (not a test module), and a subscriber that keeps
what it hears.

`Mosquitto` runs Debian's `mosquitto` (`apt-get install mosquitto`) with its own config file in
a temporary folder, on 127.0.0.1 and a free port; `stop()` then `start()` restarts it on the
same port, with persistence on (saved at a clean stop), so that a persistent session and its
queued messages, and the retained messages, survive the restart. `mosquitto` is a pytest
fixture; it skips, with the reason, when the broker is not installed.

`Heard` is a paho client with a persistent session (QoS 1) that keeps every message it hears.

`ServeProcess` is `rmc serve --config FILE` as a real process (with a broker, a lease name,
standby tables, operators, as given), on tables given by URL (simulated tables,
`rmc.serve.simtable`), restartable on the same database: `start()`,
`kill()` (SIGKILL), `stop()` (SIGTERM), `health()` (its /api/health, no token needed).
`SubscribeProcess` is `rmc subscribe URL -o DIR/{table}.jsonl` as a process, with a session
of its own name; `trace_frames(path)` reads the frame lines a trace holds so far.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from serve_support import _readline

START_TIMEOUT_S = 30.0


def find_mosquitto() -> str | None:
    return shutil.which("mosquitto") or next(
        (p for p in ("/usr/sbin/mosquitto", "/usr/bin/mosquitto") if Path(p).exists()), None
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mosquitto:
    """A Mosquitto broker in a temporary folder; a context manager."""

    def __init__(self) -> None:
        self.binary = find_mosquitto()
        self.folder = Path(tempfile.mkdtemp(prefix="rmc-mosquitto-"))
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.conf = self.folder / "mosquitto.conf"
        self.log = self.folder / "mosquitto.log"
        self.conf.write_text(
            "\n".join(
                [
                    f"listener {self.port} 127.0.0.1",
                    "allow_anonymous true",
                    "persistence true",
                    f"persistence_location {self.folder}/",
                    "persistence_file mosquitto.db",
                    # the default keeps 1000 messages a subscriber at most: a test's backlog
                    # would be cut
                    "max_queued_messages 0",
                    "max_inflight_messages 0",
                    "user root",  # as root it would switch to `mosquitto`, who cannot write here
                    f"log_dest file {self.log}",
                    "log_type error",
                    "log_type warning",
                    "log_type notice",
                    "",
                ]
            )
        )

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> Mosquitto:
        assert self.binary is not None
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(self.conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited {self.proc.returncode}: {_tail(self.log)}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mosquitto did not listen: {_tail(self.log)}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """A clean stop: it saves its persistence file (sessions, queues, retained)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Mosquitto:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(name="mosquitto")
def mosquitto_fixture():
    """A running Mosquitto of the test's own; skipped, with the reason, where it is not
    installed."""
    if find_mosquitto() is None:
        pytest.skip("mosquitto not installed (Debian: apt-get install -y mosquitto)")
    with Mosquitto() as broker:
        yield broker


@dataclass
class Message:
    topic: str
    payload: bytes
    retain: bool


class Heard:
    """A subscriber that keeps every message (persistent session, QoS 1)."""

    def __init__(self, port: int, topics: list[str], client_id: str) -> None:
        import paho.mqtt.client as mqtt

        self.messages: list[Message] = []
        self.lock = threading.Lock()
        self.connects = 0
        self.topics = topics
        self.c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=False,
            protocol=mqtt.MQTTv311,
        )
        self.c.reconnect_delay_set(1, 2)
        self.c.on_connect = self._on_connect
        self.c.on_message = self._on_message
        self.c.connect_async("127.0.0.1", port, keepalive=30)
        self.c.loop_start()

    def _on_connect(self, c: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self.connects += 1
        c.subscribe([(t, 1) for t in self.topics])

    def _on_message(self, c: Any, userdata: Any, msg: Any) -> None:
        with self.lock:
            self.messages.append(Message(msg.topic, bytes(msg.payload), bool(msg.retain)))

    def where(self, cond: Callable[[Message], bool]) -> list[Message]:
        with self.lock:
            return [m for m in self.messages if cond(m)]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.c.disconnect()
        self.c.loop_stop()


# --- rmc serve and rmc subscribe as processes ---------------------------------------------


class ServeProcess:
    """`rmc serve` as a process, restartable on the same database (a config file of its own
    in `folder`: the tables, their keys, the database, the broker, port 0 for the API)."""

    def __init__(self, folder: Path, tables: dict[str, str], keys: dict[str, bytes], db: str,
                 mqtt: str | None = None, prefix: str | None = None, name: str = "serve",
                 lease: str | None = None, standby: set[str] | frozenset[str] = frozenset(),
                 operators: str = "") -> None:  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.db = db
        lines = [f'db = "{db}"', 'http = "127.0.0.1:0"']
        if mqtt is not None:
            lines += [f'mqtt = "{mqtt}"', f'mqtt_prefix = "{prefix}"']
        if lease is not None:
            lines.append(f'lease = "{lease}"')
        lines.append("")
        for t, url in tables.items():
            lines += ["[[table]]", f'id = "{t}"', f'url = "{url}"']
            if t in standby:
                lines.append("standby = true")
            if t in keys:
                kf = folder / f"{t}.key"
                kf.write_text(keys[t].hex() + "\n")
                lines.append(f'key_file = "{kf}"')
            lines.append("")
        lines.append(operators)
        self.config = folder / f"{name}.toml"
        self.config.write_text("\n".join(lines))
        self.log = folder / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.starts = 0

    def argv(self) -> list[str]:
        """The command that starts the service (a bench may start it otherwise)."""
        return [sys.executable, "-m", "rmc", "serve", "--config", str(self.config)]

    def start(self, timeout: float = 60.0) -> ServeProcess:
        err = open(self.log, "ab")
        self.proc = subprocess.Popen(
            self.argv(),
            stdout=subprocess.PIPE, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        err.close()
        line = _readline(self.proc, timeout)
        if "listening on " not in line:
            self.proc.kill()
            raise AssertionError(f"rmc serve did not start: {line!r}; {_tail(self.log, 20)}")
        self.url = line.rsplit("listening on ", 1)[1].strip()
        self.starts += 1
        return self

    def health(self) -> dict[str, Any] | None:
        """Its /api/health, or None while it cannot answer."""
        import urllib.request

        try:
            with urllib.request.urlopen(self.url + "/api/health", timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL: nothing flushed, nothing closed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


class SubscribeProcess:
    """`rmc subscribe URL/PREFIX -o DIR/{table}.jsonl --client-id ID --json` as a process,
    with the tables' keys; `stop()` ends it with SIGTERM and gives (exit status, summary)."""

    def __init__(self, folder: Path, url: str, prefix: str, keys: dict[str, bytes],
                 client_id: str) -> None:  # fmt: skip
        self.out = folder / "traces"
        self.out.mkdir(parents=True, exist_ok=True)
        args = []
        for t, k in keys.items():
            kf = folder / f"sub-{t}.key"
            kf.write_text(k.hex() + "\n")
            args += ["--key-file", f"{t}={kf}"]
        self.log = folder / "subscribe.log"
        self.stdout = folder / "subscribe.json"
        with open(self.log, "wb") as err, open(self.stdout, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rmc", "subscribe", f"{url}/{prefix}", *args,
                 "-o", str(self.out / "{table}.jsonl"), "--client-id", client_id, "--json"],
                stdout=out, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def trace(self, table: str) -> Path:
        return self.out / f"{table}.jsonl"

    def stop(self, timeout: float = 60.0) -> tuple[int, dict[str, Any]]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        try:
            summary = json.loads(self.stdout.read_text())
        except ValueError:
            summary = {}
        return code, summary

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def trace_frames(path: Path) -> list[str]:
    """The frame lines a trace holds so far (it is written as it goes)."""
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for raw in text.splitlines():
        try:
            r = json.loads(raw)
        except ValueError:
            continue  # a line being written
        if r.get("kind") == "frame":
            out.append(r["line"])
    return out


def wait_until(cond, what: str, timeout: float, state=None, every: float = 0.05):
    """cond()'s value once it is true; an AssertionError after `timeout` seconds saying what
    was awaited (and `state()`, when given)."""
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        if time.monotonic() > deadline:
            seen = f": {state()}" if state is not None else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{seen}")
        time.sleep(every)
    return got
