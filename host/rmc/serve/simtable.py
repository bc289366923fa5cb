"""Simulated tables on loopback sockets, for the table service's benchmark and tests.

Each `SimTable` is a table as the service sees it through `socket://127.0.0.1:PORT`: it
speaks the real wire, the firmware's own code under CPython. Its frames are a scripted
session's (`rmc.framegen.ScriptedTable`: sessions opened, spins played, the last three
announced, sessions closed), made by `rmcfw.frames.Encoder` and sent by `rmcfw.commands.Wire`
through a `rmcfw.journal.Journal`, which also answers the host's commands (RESEND and RECALL
from the journal, STATUS, ACKs with `top`; the other commands are answered busy).

The line is paced: `line_bps` bytes a second (115200 baud = 11,520 bytes/s, the default)
shared by live frames, resent frames and ACKs. Live frames go as fast as the line takes
them (`rate=None`: line rate) or at `rate` frames a second; frames asked again go first.
A table starts talking when its first host connects (`SimSpec.start`; or at once, or
when `SimTables.go()` starts them all together); a second connection replaces the first
(a serial line has one host). `lose` names seqs whose first sending is lost on the line
(journaled, not sent): the host must ask again.

Many tables run in ONE asyncio loop (`SimTables`: in the caller's loop, or in a thread of its
own with `start_thread()`); one timer paces them all. Frames can be made ahead
(`make_frames`, `SimSpec.lines`) so that making them costs nothing while the line runs:
the wire then sends those bytes as its encoder's (the same encoder made them; a frame the
wire makes itself, such as a TAMP for a forged command, shifts the seqs and the rest are
made again as they go). Each live frame's wall time (time.time_ns(), when its bytes were
written to the socket) is recorded: `SimTable.sent_ns()`, (boot, seq) -> t_ns, for latency.

Run as a program (`python -m rmc.serve.simtable --help`), it prints its tables' URLs as a
JSON line (`{"tables": {"B001": "socket://127.0.0.1:PORT", ...}}`), then `{"done": ...}`
once every table has sent its frames (their send times in the `--sent` file), and keeps
answering commands until its stdin closes or SIGTERM; with `--go`, the tables start when
a line "go" comes on its stdin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmc.framegen import ScriptedTable
from rmcfw import frames as fw
from rmcfw import proto
from rmcfw.commands import Wire
from rmcfw.frames import Encoder
from rmcfw.journal import Journal

LINE_BPS = 11_520  # 115200 baud, 8N1: ten bits a byte
TICK_S = 0.01  # the pacing timer: each table's line is written once a tick at most
BURST_S = 0.1  # a late tick sends at most this much line time at once (a stalled loop
# does not turn into a burst no UART could make)
SPINS = 30  # spins per scripted session
CHEF = "chef-1"


@dataclass
class SimSpec:
    id: str
    key: bytes | None = None
    boot: int = 1
    seed: int = 1
    rate: float | None = None  # live frames a second; None: as fast as the line takes them
    line_bps: int = LINE_BPS  # the line's bytes a second
    frames: int | None = None  # live frames to send, then quiet (None: no end)
    duration_s: float | None = None  # ... or send for this long, then quiet
    lines: Sequence[bytes] | None = None  # frames made ahead (make_frames), else made as sent
    lose: frozenset[int] = frozenset()  # seqs whose first sending is lost on the line
    # when the line starts: "host" when its first host connects, "now" at once, "go" when
    # SimTables.go() is called (every table at the same instant, for a bench)
    start: str = "host"


def scripted_frames(
    table: str, boot: int = 1, key: bytes | None = None, seed: int = 1, spins: int = SPINS
) -> Iterator[bytes]:
    """A table's frames, endless: BOOT, then sessions of `spins` spins (numbered 1, 2, ...),
    each line as the firmware's encoder makes it for this table, boot and key, seq 1 on;
    the board's ms clock goes 250 ms a frame (as rmc.framegen's)."""
    enc = Encoder(table, boot, key)
    out: list[bytes] = []
    ms = 0

    def emit(ftype: str, fields: tuple) -> None:
        nonlocal ms
        ms += 250
        out.append(bytes(enc.frame(ftype, fields, ms=ms)))

    t = ScriptedTable(emit, seed=seed)
    t.boot()
    session = 0
    while True:
        session += 1
        # as the firmware: the session opened, then the lid unlocked (ScriptedTable.open
        # unlocks first, an alert once the lid was locked by a session's close)
        emit(proto.T_SESSION_OPEN, ("chef", CHEF, "session", session))
        emit(proto.T_LID, ("locked", 0))
        t.coups = 0
        for i in range(spins):
            if i == spins - 3:
                t.announce_last_three()
            t.play()
            yield from out
            out.clear()
        t.close(CHEF, session)
        yield from out
        out.clear()


CHECKED = 60  # frames of a cached file made again and compared: a changed script is seen


def make_frames(
    table: str,
    count: int,
    boot: int = 1,
    key: bytes | None = None,
    seed: int = 1,
    cache: Path | None = None,
) -> list[bytes]:
    """The first `count` of `scripted_frames(...)`. With `cache`, a folder: kept there as a
    raw capture (one frame line each), one file per table, boot, seed and key, read back
    next time (its first `count` lines; made again, longer, when it holds fewer, or when
    its first lines are not what the script makes now)."""
    src = scripted_frames(table, boot, key, seed)
    if cache is None:
        return [next(src) for _ in range(count)]
    head = [next(src) for _ in range(min(count, CHECKED))]
    fp = hashlib.sha256(key or b"").hexdigest()[:8]
    path = cache / f"{table}-b{boot}-s{seed}-k{fp}.frames"
    with contextlib.suppress(OSError):
        lines = path.read_bytes().splitlines(keepends=True)
        if len(lines) >= count and lines[: len(head)] == head:
            return lines[:count]
    lines = head + [next(src) for _ in range(count - len(head))]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(b"".join(lines))
    tmp.replace(path)  # whole or not at all: a killed run leaves no short file
    return lines


def table_key(secret: bytes, table: str) -> bytes:
    """A table's own 32-byte HMAC key derived from one secret (simulated fleets)."""
    return hashlib.sha256(secret + b":" + table.encode()).digest()


class _Encoder:
    """The wire's encoder: hands out the frame made ahead when it is the one asked for (the
    next seq, `ready`), makes any other frame now."""

    def __init__(self, enc: Encoder) -> None:
        self.enc = enc
        self.table = enc.table
        self.boot = enc.boot
        self.ready: bytes | None = None

    @property
    def seq(self) -> int:
        return self.enc.seq

    def frame(self, ftype: str, fields: tuple = (), seq: int | None = None, ms: int = 0) -> Any:
        ready, self.ready = self.ready, None
        if ready is not None and seq is None:
            self.enc.seq += 1
            return ready
        return self.enc.frame(ftype, fields, seq=seq, ms=ms)


def _seq_of(line: bytes) -> int:
    return int(line.split(b",", 4)[3])


class SimTable:
    """One simulated table: its journal, its wire, its paced line, its listening socket."""

    def __init__(self, spec: SimSpec, folder: Path) -> None:
        self.spec = spec
        # the last ~8,000 frames kept: a minute of line rate, to answer RESENDs
        self.journal = Journal(str(folder / spec.id), per_segment=512, segments=16)
        self.journal.start()
        self._enc = _Encoder(Encoder(spec.id, spec.boot, spec.key))
        self.wire = Wire(self._enc, self.journal, self._write, key=spec.key, room=self._room)
        if spec.lines is not None:
            self._source: Iterator[bytes] = iter(spec.lines)
        else:
            self._source = scripted_frames(spec.id, spec.boot, spec.key, spec.seed)
        self.port = 0
        self.t0: float | None = None  # monotonic time the line started
        self.t0_ns = 0  # ... its wall time
        self.live = 0  # live frames sent
        self.ended = False  # no more live frames (count or duration reached, lines used up)
        self.commands = 0  # command lines received
        self.connections = 0
        self._sent = array("q")  # live frame seq -> wall time sent (index seq - 1)
        self._unsent: list[int] = []  # live seqs in `_out`, their time set when it is written
        self._out = bytearray()
        self._credit = 0.0  # line bytes free now (negative: the line is still busy)
        self._last = 0.0
        self._live_seq = 0  # the live frame being emitted (its write is that frame)
        self._last_line = b""
        self._transport: asyncio.Transport | None = None

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    # --- the line ---

    def _room(self) -> int:
        return max(0, int(self._credit))

    def _write(self, data: Any) -> None:
        """Everything the wire sends: it takes line time, and goes out at the next flush."""
        self._credit -= len(data)
        if self._live_seq:
            seq, self._live_seq = self._live_seq, 0
            self._unsent.append(seq)
            if seq in self.spec.lose:
                return  # lost on the line: journaled, never seen by the host
        self._out += data

    def _flush(self) -> None:
        if self._unsent:
            t = time.time_ns()
            sent = self._sent
            for seq in self._unsent:
                while len(sent) < seq:
                    sent.append(0)
                sent[seq - 1] = t
            self._unsent.clear()
        if self._out:
            if self._transport is not None and not self._transport.is_closing():
                self._transport.write(bytes(self._out))
            self._out.clear()

    def start(self, now: float) -> None:
        if self.t0 is None:
            self.t0 = self._last = now
            self.t0_ns = time.time_ns()

    def tick(self, now: float) -> None:
        """Send what the line takes since the last tick: frames asked again, then live ones."""
        if self.t0 is None:
            return
        bps = self.spec.line_bps
        self._credit = min(self._credit + (now - self._last) * bps, BURST_S * bps)
        self._last = now
        if self.wire.pending():
            self.wire.pump()
        while self._credit > 0 and not self.ended and not self.wire.pending():
            if not self._due(now):
                break
            self._emit_live()
        self._flush()

    def _due(self, now: float) -> bool:
        s = self.spec
        assert self.t0 is not None
        if (s.frames is not None and self.live >= s.frames) or (
            s.duration_s is not None and now - self.t0 >= s.duration_s
        ):
            self.ended = True
            return False
        return s.rate is None or self.live < (now - self.t0) * s.rate

    def _emit_live(self) -> None:
        line = next(self._source, None)
        if line is None:
            self.ended = True
            return
        seq = self._enc.seq + 1
        self._live_seq = seq
        self._last_line = line
        try:
            if _seq_of(line) == seq:
                self._enc.ready = line  # made ahead by an encoder like the wire's: as is
                self.wire.emit("", ())
            else:  # the wire numbered a frame of its own since: this one is made again
                f = fw.decode(line)
                self.wire.ms = f.ms
                self.wire.emit(f.type, tuple(x for kv in f.fields.items() for x in kv))
        finally:
            self._live_seq = 0
        self.live += 1

    # --- the host's side ---

    def connected(self, transport: asyncio.Transport) -> None:
        if self._transport is not None:
            self._transport.close()  # one host on a line: the new one takes it
        self._transport = transport
        self.connections += 1
        if self.spec.start == "host":
            self.start(time.monotonic())

    def disconnected(self, transport: asyncio.Transport) -> None:
        if self._transport is transport:
            self._transport = None

    def received(self, data: bytes) -> None:
        self.commands += data.count(b"\n")
        if self._last_line:  # the board's clock, for its ACKs: its last frame's
            with contextlib.suppress(ValueError, IndexError):
                self.wire.ms = int(self._last_line.split(b",", 5)[4])
        self.wire.feed(data)
        self._flush()

    # --- what was sent ---

    def sent_ns(self) -> dict[tuple[int, int], int]:
        """(boot, seq) -> wall time (ns) each live frame was written to the socket (lost
        ones: when they would have been)."""
        b = self.spec.boot
        return {(b, i + 1): t for i, t in enumerate(self._sent) if t}

    def sent_times(self) -> array:
        """The live frames' send times, index seq - 1 (0: not sent)."""
        return self._sent


class _Protocol(asyncio.Protocol):
    def __init__(self, table: SimTable) -> None:
        self.table = table
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a line, not a stream
        self.table.connected(transport)

    def data_received(self, data: bytes) -> None:
        self.table.received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.table.disconnected(self.transport)


class SimTables:
    """Many simulated tables in one asyncio loop, paced by one timer.

    In a loop of the caller's: `await start()`, then `await run()` (until `stop()`). Or in a
    thread of its own: `start_thread()` (returns once every table listens), `close()`."""

    def __init__(
        self, specs: Iterable[SimSpec], folder: Path | None = None, tick_s: float = TICK_S
    ) -> None:
        self._tmp = None
        if folder is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="rmc-simtable-")
            folder = Path(self._tmp.name)
        self.tables = {s.id: SimTable(s, folder) for s in specs}
        self.tick_s = tick_s
        self._servers: list[asyncio.AbstractServer] = []
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def table(self, table: str) -> SimTable:
        return self.tables[table]

    def url(self, table: str) -> str:
        return self.tables[table].url

    def urls(self) -> dict[str, str]:
        return {t: s.url for t, s in self.tables.items()}

    @property
    def done(self) -> bool:
        """Every table has sent its live frames (count or duration reached)."""
        return all(t.ended for t in self.tables.values())

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop = asyncio.Event()
        now = time.monotonic()
        for t in self.tables.values():
            srv = await loop.create_server(lambda t=t: _Protocol(t), "127.0.0.1", 0)
            t.port = srv.sockets[0].getsockname()[1]
            self._servers.append(srv)
            if t.spec.start == "now":
                t.start(now)

    async def run(self) -> None:
        """Pace every table's line until stop()."""
        assert self._stop is not None
        tables = list(self.tables.values())
        while not self._stop.is_set():
            now = time.monotonic()
            for t in tables:
                t.tick(now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.tick_s)
        for srv in self._servers:
            srv.close()
        for t in tables:
            if t._transport is not None:
                t._transport.close()
            t.journal.close()

    def sent_ns(self) -> dict[tuple[str, int, int], int]:
        """(table, boot, seq) -> wall time (ns) each live frame was written to its socket.
        From another thread: `call(sim.sent_ns)`."""
        return {(t, b, q): ns for t, s in self.tables.items() for (b, q), ns in s.sent_ns().items()}

    def go(self) -> None:
        """Every table not started yet starts now, all at the same instant."""
        now = time.monotonic()
        for t in self.tables.values():
            t.start(now)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    # --- in a thread of its own ---

    def start_thread(self, timeout: float = 30.0) -> SimTables:
        ready = threading.Event()
        failed: list[BaseException] = []

        async def main() -> None:
            try:
                await self.start()
            except BaseException as e:
                failed.append(e)
                ready.set()
                raise
            ready.set()
            await self.run()

        self._thread = threading.Thread(
            target=lambda: asyncio.run(main()), name="simtables", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("simulated tables did not start")
        if failed:
            raise failed[0]
        return self

    def call(self, fn: Any, *args: Any, timeout: float = 30.0) -> Any:
        """fn(*args) in the tables' loop (their state is that thread's), its result."""
        if self._thread is None or self._loop is None:
            return fn(*args)

        async def go() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(go(), self._loop).result(timeout)

    def close(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self.stop)
            self._thread.join(30)
            self._thread = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> SimTables:
        return self.start_thread()

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- as a program -------------------------------------------------------------------------


def table_ids(count: int, prefix: str = "B") -> list[str]:
    """B001, B002, ..."""
    return [f"{prefix}{i:03d}" for i in range(1, count + 1)]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m rmc.serve.simtable", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--tables", type=int, default=1, help="how many tables (B001, B002, ...)")
    p.add_argument("--prefix", default="B", help="table ids' prefix (default B)")
    p.add_argument("--key", help="HMAC key, hex; with --per-table each table gets its own from it")
    p.add_argument("--per-table", action="store_true", help="each table's key = table_key(KEY, ID)")
    p.add_argument("--rate", type=float, help="live frames/s per table (default: line rate)")
    p.add_argument("--baud", type=int, default=115200, help="the line's baud rate (8N1)")
    p.add_argument("--duration", type=float, help="seconds each table sends, from its start")
    p.add_argument("--frames", type=int, help="live frames each table sends (made ahead)")
    p.add_argument("--cache", type=Path, help="folder keeping frames made ahead")
    p.add_argument(
        "--journal", type=Path, help="folder for the tables' journals (default: temporary)"
    )
    p.add_argument(
        "--sent", type=Path, help="write each live frame's send time here (JSON) when done"
    )
    p.add_argument(
        "--at-once", action="store_true", help="start sending without waiting for a host"
    )
    p.add_argument(
        "--go", action="store_true", help="the tables start when 'go' comes on stdin, together"
    )
    return p.parse_args(argv)


def write_sent(path: Path, tables: SimTables) -> int:
    """{"TABLE": {"boot": B, "t_ns": [t of seq 1, t of seq 2, ...]}} (0: not sent)."""
    out = {
        t: {"boot": s.spec.boot, "t_ns": s.sent_times().tolist()} for t, s in tables.tables.items()
    }
    path.write_text(json.dumps(out))
    return sum(s.live for s in tables.tables.values())


def main(argv: list[str] | None = None) -> int:
    a = _parse(argv)
    if a.tables < 1 or (a.duration is None and a.frames is None):
        print("simtable: give --tables N (1 or more) and --duration or --frames", file=sys.stderr)
        return 2
    try:
        key = fw.load_key(a.key) if a.key else None
    except ValueError as e:
        print(f"simtable: --key: {e}", file=sys.stderr)
        return 2
    specs = []
    for tid in table_ids(a.tables, a.prefix):
        k = table_key(key, tid) if key and a.per_table else key
        lines = make_frames(tid, a.frames, key=k, cache=a.cache) if a.frames else None
        specs.append(
            SimSpec(
                tid,
                k,
                rate=a.rate,
                line_bps=a.baud // 10,
                frames=a.frames,
                duration_s=a.duration,
                lines=lines,
                start="now" if a.at_once else "go" if a.go else "host",
            )
        )
    if a.journal is not None:
        a.journal.mkdir(parents=True, exist_ok=True)
    sim = SimTables(specs, a.journal)
    try:
        asyncio.run(_serve(sim, a.sent))
    finally:
        sim.close()  # its temporary journals
    return 0


async def _serve(sim: SimTables, sent: Path | None) -> None:
    loop = asyncio.get_running_loop()
    await sim.start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, sim.stop)

    def stdin() -> None:
        data = os.read(0, 4096)
        if b"go" in data:
            sim.go()
        if not data:
            loop.remove_reader(0)
            sim.stop()

    with contextlib.suppress(OSError, ValueError, NotImplementedError):
        loop.add_reader(0, stdin)
    print(json.dumps({"tables": sim.urls()}), flush=True)
    t0 = os.times()  # the CPU the lines cost, not the frames made ahead

    async def watch() -> None:
        while not sim.done:
            await asyncio.sleep(0.1)
        live = (
            write_sent(sent, sim) if sent is not None else sum(t.live for t in sim.tables.values())
        )
        t = os.times()
        cpu = t.user + t.system - t0.user - t0.system
        print(json.dumps({"done": True, "frames": live, "cpu_s": round(cpu, 3)}), flush=True)

    task = asyncio.create_task(watch())
    await sim.run()
    task.cancel()


if __name__ == "__main__":
    sys.exit(main())
