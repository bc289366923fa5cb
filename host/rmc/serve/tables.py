"""Every live table of the service, read by ONE thread: ports, links, rules, commands.

A `TableRunner` is one table: its link (`rmc.link.Link`: frames checked with the table's key,
every gap asked again), its rules (`rmc.serve.derive`), its health and its operators'
commands. It starts where the store left the table: the frames stored, the gaps among them
asked again at once, the last command seq.

`Tables` is the thread that drives them all: a selector on the ports' file descriptors (a
serial device's, a `socket://` port's socket), a wake-up pipe for the calls other threads
hand it (operators' commands, tables added, stop) and timers (ports reopened). A thread a
table cost 4-5 times the work itself (GIL hand-overs, polls that read nothing) and starved
the database writer; one thread reads, checks and derives 200 tables at line rate on 0.5-0.7
of a core here, 0.4-0.47 of it the reads and the link's own work (rmc.link, rmc.checker,
rmc.frames: decode, HMAC, integrity), which any design pays.

Its loop: read what the ports have (at most every READ_S, so that a read takes several
frames), and every TICK_S apply the rules to the frames read (`Deriver`, in bulk), let each
link ask for its gaps and probe a quiet table, look for silent tables and unanswered
commands, and hand every row of every table to the writer as one batch.

A port that fails, or cannot be opened, is reopened with a growing delay (0.2 s up to
10 s); the link and its gaps survive it, so the frames sent in between are asked again.
Ports are opened in a short-lived thread each: opening a `socket://` URL may wait seconds
for a host that does not answer, which must not stall the other tables.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import os
import select
import selectors
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rmc.frames import Frame, FrameError
from rmc.link import Link
from rmc.record import PortLost, _lost, open_port
from rmc.serve.derive import Derived, Deriver
from rmc.serve.store import (
    BATCH_LISTS,
    LOST,
    AnswerRow,
    Batch,
    CommandAnswer,
    CommandRow,
    DamageRow,
    EventRow,
    FrameRow,
    Resume,
)
from rmcfw import proto

BACKOFF_S = (0.2, 10.0)  # first and longest wait before reopening a port
READ_S = 0.025  # the ports are read at most this often: a read takes ~3 frames a table at
# line rate (a read is a system call, ~10 µs here: one a frame cost a third of a core)
TICK_S = 0.05  # rules, links, silence, timeouts, and the rows handed to the writer
ANSWER_S = 5.0  # an operator command not answered by then is reported unanswered
SILENT_S = 10.0  # a connected table heard nothing from this long is reported silent
READ_MAX = 65536  # bytes read from a port at once
CLOSE_S = 2.0  # at the end, the ports' closing is waited for this long at most


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass
class TableSpec:
    id: str
    url: str
    key: bytes | None = None


@dataclass
class Order:
    """An operator's command on its way to the table, and its answer when it comes."""

    verb: str
    cmd: str
    fields: tuple
    by: str
    role: str
    done: threading.Event = field(default_factory=threading.Event)
    boot: int = 0
    cseq: int = 0
    line: str = ""
    answer: dict[str, Any] | None = None
    error: str | None = None
    recall: dict[str, str] | None = None  # RECALL's frame, when the verb is recall
    sent: float = 0.0  # monotonic time it went out
    tries: int = 0  # sent again after a refusal that left it undone (stale seq, old boot)

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"command": self.verb, "cmd": self.cmd, "by": self.by}
        out.update({"boot": self.boot, "cseq": self.cseq, "line": self.line})
        if self.error is not None:
            out["error"] = self.error
        if self.answer is not None:
            out.update(self.answer)
        if self.recall is not None:
            out["games"] = self.recall.get("games", "")
        return out


@dataclass
class Health:
    """The link's state, as the API shows it."""

    connected: bool = False
    silent: bool = False  # connected, yet nothing heard for SILENT_S
    since_us: int | None = None  # when it connected or lost the port
    last_rx_us: int | None = None
    reconnects: int = 0
    error: str | None = None
    lines: int = 0
    frames: int = 0
    damaged: int = 0
    duplicates: int = 0


# --- a port, as the tables' thread reads and writes it ---------------------------------------


def _raw_fd(port: Any) -> int | None:
    """The file descriptor whose bytes are the port's own, or None: pyserial's serial devices
    (POSIX) and its socket:// ports. Other ports are read through their `read`."""
    module = type(port).__module__
    if module == "serial.serialposix" or module.endswith("protocol_socket"):
        try:
            return port.fileno()
        except Exception:
            return None
    return None


class Line:
    """An open port: `fd` for the selector (None: polled every READ_S), `read()` what is there
    without waiting, `write()` without waiting for the bytes to leave the host (pyserial's
    flush() on a serial device waits for them to drain, ~10 ms a command: every other table
    would wait too). The port's errors come out as PortLost."""

    def __init__(self, port: Any) -> None:
        self.port = port
        self.fd = _raw_fd(port)
        self._raw = self.fd is not None
        if self.fd is None:
            try:
                self.fd = port.fileno()  # waited for by the selector, read with read()
            except Exception:
                self.fd = None

    def read(self, n: int = READ_MAX) -> bytes:
        try:
            if self._raw:
                try:
                    data = os.read(self.fd, n)  # type: ignore[arg-type]
                except BlockingIOError:
                    return b""
                if not data:
                    raise PortLost("the port closed (end of file)")
                return data
            return self._read_waiting(n)
        except PortLost:
            raise
        except Exception as e:
            lost = _lost(e)
            if lost is None:
                raise
            raise lost from e

    def _read_waiting(self, n: int) -> bytes:
        """What `in_waiting` says is there, and more while it says more (pyserial's
        socket:// says 0 or 1). Never read(n) beyond it: that waits for the port's timeout."""
        data = b""
        while len(data) < n:
            waiting = self.port.in_waiting
            if not waiting:
                break
            data += self.port.read(min(waiting, n - len(data)))
        return data

    def write(self, data: bytes) -> None:
        try:
            self.port.write(data)
        except Exception as e:
            lost = _lost(e)
            if lost is None:
                raise
            raise lost from e

    def close(self) -> None:
        try:
            self.port.close()
        except Exception:
            pass


# --- one table --------------------------------------------------------------------------------


class TableRunner:
    """One table's link, rules, rows, health and commands. Driven by `Tables` (its thread
    alone touches the link); `command()`, `link_state()` and `table_state()` are for the
    other threads. Its rows go to `out`, the batch `Tables` hands to the writer."""

    def __init__(
        self,
        spec: TableSpec,
        resume: Resume,
        publish: Callable[[dict[str, Any]], None] = lambda ev: None,
        backlog: Iterable[tuple[Frame, int]] = (),
    ) -> None:
        """resume: what the store holds of the table; backlog: its stored frames in (boot,
        seq) order, fed again to the rules (they resume where they were)."""
        self.spec = spec
        self.publish = publish
        self.out = Batch()
        self.tables: Tables | None = None  # set when added
        self.health = Health()
        # from_start: a table first heard mid-boot is asked for the frames before it;
        # keep_frames=False: the store keeps the frames, the link only their last lines
        self.link = Link(
            None,
            key=spec.key,
            table=spec.id,
            on_line=self._line,
            from_start=True,
            keep_frames=False,
        )
        self.link.resume(
            resume.high,
            resume.missing,
            resume.first_boot,
            max(resume.last_cseq.values(), default=0),
        )
        # frames found lost by an earlier run: reported once, never asked for again
        self.link.stats.lost[:0] = [list(r) for r in resume.lost]
        self._lost_told = len(self.link.stats.lost)
        self._lost_n = resume.events.get(LOST, 0)
        self.deriver = Deriver(spec.id, resume.events)
        for f, rx_us in backlog:
            self.deriver.add(f, rx_us)
        self.line: Line | None = None  # the open port
        self.delay = BACKOFF_S[0]  # before the next try to open the port
        self._rx_us = 0  # when the data being handled was read
        self._heard = time.monotonic()  # the last line received
        self._waiting: dict[int, Order] = {}  # cseq -> order awaiting its ACK
        self._recall: Order | None = None  # a RECALL answered, its frame still to come
        # The table sends the RECALL frame before its ACK (the handler emits it, the ACK goes
        # after): the last one heard, and when, for the ACK that follows it.
        self._recalled: tuple[float, dict[str, str]] | None = None
        self._published: dict[str, Any] = {}  # the table's state as last published
        # the rules applied up to the first frame still missing (the backlog's own gaps)
        self._derive(self.deriver.advance(self.link.first_missing()), publish=False)

    # --- the port (Tables' thread) ---

    def connected(self, line: Line) -> None:
        self.line = line
        self.link.port = line
        self._heard = time.monotonic()
        self.delay = BACKOFF_S[0]
        if self.health.since_us is not None:
            self.health.reconnects += 1
        self._state(True, None)

    def cannot_open(self, why: str) -> None:
        self._state(False, why)

    def lost(self, why: str) -> None:
        """The port failed (it is closed by Tables): commands waiting for it fail."""
        self.line = None
        self.link.port = None
        self._state(False, why)
        self.fail_orders(f"port lost: {why}")

    def stopped(self) -> None:
        """The service stops: its port is closed (by Tables), commands under way fail."""
        self.line = None
        self.link.port = None
        self._state(False, "the service has stopped")
        self.fail_orders("the service is stopping")

    def _state(self, connected: bool, error: str | None) -> None:
        h = self.health
        if h.connected != connected or h.error != error:
            h.connected, h.error, h.since_us = connected, error, now_us()
            self.publish({"type": "link", "table": self.spec.id, **self.link_state()})

    # --- lines in (Tables' thread) ---

    def receive(self, data: bytes) -> None:
        """Bytes read from the port: every whole line to the link (and `_line`)."""
        self._rx_us = now_us()  # one time for the lines of one read: they came together
        self._heard = time.monotonic()
        self.link.receive(data)

    def _line(self, line: bytes, f: Frame | None) -> None:
        rx = self._rx_us
        h = self.health
        h.lines += 1
        h.last_rx_us = rx
        b = self.out
        if f is None:
            why = self.link.checker.why
            if why == "duplicate":
                h.duplicates += 1
            elif why != "blank":
                h.damaged += 1
                b.damage.append(DamageRow(self.spec.id, rx, bytes(line), why or "malformed"))
            return
        if f.seq == proto.SEQ_NONE:
            self._answer(f, rx)
            return
        h.frames += 1
        text = ("~" if f.resent else "") + f.line.decode("ascii", "replace")
        b.frames.append(FrameRow(self.spec.id, f.boot, f.seq, f.ms, f.type, text, rx, f.resent))
        self.deriver.add(f, rx)
        if f.type == proto.T_RECALL:
            if self._recall is not None:
                order, self._recall = self._recall, None
                order.recall = _fields(f)
                order.done.set()
            else:
                self._recalled = (time.monotonic(), _fields(f))

    def _answer(self, f: Frame, rx: int) -> None:
        fl = _fields(f)
        cseq = int(fl["cseq"]) if fl.get("cseq", "").isdigit() else None
        ok = fl.get(proto.K_OK) == "1"
        detail = fl.get(proto.K_DETAIL, "")
        line = f.line.decode("ascii", "replace")
        b = self.out
        b.answers.append(
            AnswerRow(self.spec.id, f.boot, cseq, fl.get("cmd", ""), ok, detail, line, rx)
        )
        order = self._waiting.pop(cseq, None) if cseq is not None else None
        if order is None:
            return
        b.answered.append(CommandAnswer(self.spec.id, order.boot, order.cseq, ok, detail, line, rx))
        if not ok and detail in (proto.A_STALE, proto.A_BOOT) and order.tries < 2:
            # Refused unread: our command counter was behind the table's (the service
            # restarted) or the table rebooted. The link has caught up: send it again, once
            # this line is handled.
            order.tries += 1
            self._call(lambda: self.send(order))
            return
        order.answer = {"ok": ok, "detail": detail, "answer": line}
        if order.cmd == proto.C_RECALL and ok:
            heard, self._recalled = self._recalled, None
            if heard is not None and heard[0] >= order.sent:
                order.recall = heard[1]  # its frame came first, as the firmware sends it
                order.done.set()
            else:
                self._recall = order  # done when its RECALL frame comes
        else:
            order.done.set()

    # --- every TICK_S (Tables' thread) ---

    def tick(self, now: float) -> None:
        """The link asks for its gaps (and probes a quiet table); the rules take the frames
        read since the last tick; silence and unanswered commands are reported."""
        if self.line is not None:
            self.link.service()
            # A connected table answers the link's STATUS probes (every 2 s of quiet):
            # silence this long means the board or its line is dead, while the port looks
            # open.
            silent = now - self._heard > SILENT_S
            if silent != self.health.silent:
                self.health.silent = silent
                self.publish({"type": "link", "table": self.spec.id, **self.link_state()})
        self.derive()
        self._lost_rows()
        if self._waiting:
            for cseq, order in list(self._waiting.items()):
                if now - order.sent > ANSWER_S:
                    del self._waiting[cseq]
                    order.error = f"no answer from the table in {ANSWER_S:g} s"
                    order.done.set()

    def _lost_rows(self) -> None:
        """The ranges the link found lost since the last tick, as LOST events: a restarted
        service leaves them out of what it asks for (rmc.serve.store.Store.resume)."""
        lost = self.link.stats.lost
        for boot, first, last in lost[self._lost_told :]:
            data = {"boot": boot, "first": first, "last": last}
            self.out.events.append(EventRow(self.spec.id, LOST, self._lost_n, boot, first, data))
            self._lost_n += 1
        self._lost_told = len(lost)

    def derive(self) -> None:
        """The rules applied to the frames held, up to the first one still missing."""
        if self.deriver.held:
            self._derive(self.deriver.advance(self.link.first_missing()))

    def _derive(self, d: Derived, publish: bool = True) -> None:
        if not d:
            return
        b = self.out
        b.events += d.events
        b.results += d.results
        b.opens += d.opens
        b.closes += d.closes
        if not publish:
            return
        for r in d.results:
            self.publish({"type": "result", "table": self.spec.id, **_result(r)})
        for e in d.events:
            if e.kind not in ("result", "rejected"):
                ev = {"type": e.kind, "table": self.spec.id, "boot": e.boot, "seq": e.seq}
                self.publish({**ev, "data": e.data})
        state = self.table_state()
        if state != self._published and self.deriver.state:
            # a change of state: not every tick's rows (most leave it as it was)
            self._published = state
            self.publish({"type": "state", "table": self.spec.id, **state})

    # --- commands ---

    def command(
        self, verb: str, cmd: str, fields: tuple, by: str, role: str, timeout: float = ANSWER_S + 1
    ) -> dict[str, Any]:
        """Send an operator's command from any thread; returns its answer (or why none)."""
        order = Order(verb, cmd, fields, by, role)
        if not self.health.connected or not self._call(lambda: self.send(order)):
            why = self.health.error or "not opened yet"
            order.error = f"the table is not connected: {why}"
            return order.result()
        if not order.done.wait(timeout):
            order.error = order.error or f"no answer from the table in {timeout:g} s"
        return order.result()

    def _call(self, fn: Callable[[], None]) -> bool:
        """fn on Tables' thread; a port failing there is this table's."""
        return self.tables is not None and self.tables.call(fn, self)

    def send(self, order: Order) -> None:
        """Sign and send an order (Tables' thread); its row goes with the table's rows."""
        if self.line is None:
            order.error = "the table is not connected"
            order.done.set()
            return
        if not self.link.boot and order.cmd != proto.C_STATUS:
            order.error = "the table is not connected: no frame heard from it yet"
            order.done.set()
            return
        try:
            line = self.link.send(order.cmd, order.fields)
        except PortLost as e:
            order.error = f"port lost: {e}"
            order.done.set()
            raise
        order.boot = self.link.boot
        order.cseq = self.link.command_seq
        order.line = line.decode("ascii", "replace").rstrip("\r\n")
        order.sent = time.monotonic()
        self._waiting[order.cseq] = order
        args = [list(order.fields[i : i + 2]) for i in range(0, len(order.fields), 2)]
        row = CommandRow(
            self.spec.id,
            order.boot,
            order.cseq,
            order.cmd,
            args,
            order.by,
            order.role,
            order.line,
            now_us(),
        )
        self.out.commands.append(row)

    def fail_orders(self, why: str) -> None:
        for order in list(self._waiting.values()):
            order.error = why
            order.done.set()
        self._waiting.clear()
        if self._recall is not None:
            self._recall.done.set()
            self._recall = None

    # --- what the API shows ---

    def link_state(self) -> dict[str, Any]:
        h = self.health
        st = self.link.stats
        return {
            "connected": h.connected,
            "silent": h.silent,
            "since_us": h.since_us,
            "last_rx_us": h.last_rx_us,
            "reconnects": h.reconnects,
            "error": h.error,
            "lines": h.lines,
            "frames": h.frames,
            "damaged": h.damaged,
            "duplicates": h.duplicates,
            "missing": sum(b - a + 1 for _, a, b in self.link.missing_ranges()),
            "resends_asked": st.resends_asked,
            "lost": st.lost,
        }

    def table_state(self) -> dict[str, Any]:
        d = self.deriver
        st = d.state
        return {
            "state": st.get("state"),
            "spin": st.get("spin"),
            "lid": st.get("lid"),
            "session": d.session,
            "active_faults": d.active_faults,
        }


# --- the one thread ---------------------------------------------------------------------------


class Tables:
    """The thread that reads every table (see the module's docstring). `add`, `call`,
    `flush` and `stop` may be called from any thread; the rest runs on its own."""

    def __init__(
        self, write: Callable[[Batch], None], opener: Callable[[str], Any] = open_port
    ) -> None:
        """write: takes each batch of rows (the writer's `put`); opener: URL -> port."""
        self.write = write
        self.opener = opener
        self.runners: list[TableRunner] = []
        self.batch = Batch()  # every table's rows since the last tick
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        # calls from other threads, with the table whose port they may fail (or None)
        self._calls: collections.deque[tuple[Callable[[], None], TableRunner | None]] = (
            collections.deque()
        )
        self._timers: list[tuple[float, int, Callable[[], None]]] = []  # a heap
        self._order = itertools.count()  # ties between timers
        self._polled: list[TableRunner] = []  # ports without a file descriptor
        self._closing: list[threading.Thread] = []  # ports being closed
        self._next_tick = 0.0  # monotonic
        self._stopping = False
        self._ended = False  # the thread has ended: calls are refused
        self._thread = threading.Thread(target=self._run, name="tables", daemon=True)

    def start(self) -> Tables:
        self._thread.start()
        return self

    # --- from any thread ---

    def call(self, fn: Callable[[], None], runner: TableRunner | None = None) -> bool:
        """Run fn on the tables' thread, soon; False when it has stopped. A PortLost it
        raises is `runner`'s port lost."""
        if self._ended:
            return False
        self._calls.append((fn, runner))
        try:
            os.write(self._wake_w, b"w")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (it is awake already) or closed (stopped)
        return True

    def add(self, runner: TableRunner) -> None:
        """A table to read: its port is opened at once, then kept open."""
        self.call(lambda: self._add(runner))

    def remove(self, runner: TableRunner) -> None:
        """A table not to read any more (its lease lost): its port closed, its commands
        failed; its rows read so far still go to the writer."""
        self.call(lambda: self._remove(runner))

    def flush(self, timeout: float = 10.0) -> bool:
        """The rows read so far handed to the writer now (rules applied first)."""
        done = threading.Event()

        def now() -> None:
            for r in self.runners:
                r.derive()
            self._flush()
            done.set()

        return self.call(now) and done.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop reading: every port closed, commands under way failed, every row read (and
        derived) handed to the writer."""
        self.call(self._stop)
        if self._thread.is_alive():
            self._thread.join(timeout)
        elif not self._ended:  # never started
            self._shutdown()

    # --- the thread ---

    def _run(self) -> None:
        try:
            self._next_tick = time.monotonic()
            while not self._stopping:
                try:
                    self._once()
                except Exception:  # a bug: said, and the tables are read on
                    traceback.print_exc(file=sys.stderr)
                    time.sleep(0.1)
        finally:
            self._shutdown()

    def _once(self) -> None:
        """One turn: the tick when due, the timers due, then a wait for the ports (or a
        call, or the next tick or timer) and a read of those that have something."""
        now = time.monotonic()
        if now >= self._next_tick:
            self._tick(now)
            self._next_tick = now + TICK_S
        self._timers_due(now)
        if self._polled:
            self._read_polled()
        timeout = self._next_tick - time.monotonic()
        if self._timers:
            timeout = min(timeout, self._timers[0][0] - time.monotonic())
        if self._polled:
            timeout = min(timeout, READ_S)
        ready = self._sel.select(max(0.0, timeout))
        read_at = time.monotonic()
        read = False
        for key, _ in ready:
            if key.data is None:
                self._wake()
            else:
                read = True
                self._read(key.data)
        if read:
            # the next read no sooner than READ_S after this one: a read then takes a few
            # frames a table, not a byte or a line (a call still wakes the thread up)
            rest = read_at + READ_S - time.monotonic()
            if rest > 0:
                select.select([self._wake_r], [], [], rest)

    def _wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        while self._calls:
            fn, runner = self._calls.popleft()
            self._guarded(fn, runner)

    def _guarded(self, fn: Callable[[], None], runner: TableRunner | None) -> None:
        """fn, its failure kept from ending the thread: a port's error is its table's port
        lost; any other is a bug, printed, and the tables go on."""
        try:
            fn()
        except PortLost as e:
            if runner is not None:
                self._lost(runner, str(e))
        except Exception as e:
            if runner is not None:
                self._lost(runner, f"{type(e).__name__}: {e}")
            else:
                traceback.print_exc(file=sys.stderr)

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        """fn on this thread after `delay` seconds (from this thread only)."""
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._order), fn))

    def _timers_due(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            _, _, fn = heapq.heappop(self._timers)
            self._guarded(fn, None)

    def _tick(self, now: float) -> None:
        for r in self.runners:
            self._guarded(lambda r=r: r.tick(now), r)
        self._flush()

    def _flush(self) -> None:
        if len(self.batch):
            batch, self.batch = self.batch, Batch()
            for r in self.runners:
                r.out = self.batch
            self.write(batch)

    # --- ports ---

    def _add(self, runner: TableRunner) -> None:
        runner.tables = self
        # the rows it derived on its own (from the stored frames) go first
        own, runner.out = runner.out, self.batch
        for name in BATCH_LISTS:
            getattr(self.batch, name).extend(getattr(own, name))
        self.runners.append(runner)
        self._open(runner)

    def _remove(self, runner: TableRunner) -> None:
        if runner in self.runners:
            self._close(runner)
            runner.lost("no longer served here")
            self.runners.remove(runner)

    def _open(self, runner: TableRunner) -> None:
        """Open the port in a thread of its own; `_opened` takes it up here."""
        if runner not in self.runners:
            return  # removed meanwhile

        def opening() -> None:
            try:
                port, why = self.opener(runner.spec.url), None
            except Exception as e:
                port, why = None, f"cannot open {runner.spec.url}: {_one_line(e)}"
            if not self.call(lambda: self._opened(runner, port, why)) and port is not None:
                Line(port).close()  # stopped meanwhile

        if not self._stopping:
            threading.Thread(target=opening, name="port-open", daemon=True).start()

    def _opened(self, runner: TableRunner, port: Any, why: str | None) -> None:
        if port is None:
            runner.cannot_open(why or "cannot open")
            self._retry(runner)
            return
        line = Line(port)
        if self._stopping or runner not in self.runners:
            self._close_later(line)
            return
        if line.fd is not None:
            self._sel.register(line.fd, selectors.EVENT_READ, runner)
        else:
            self._polled.append(runner)
        runner.connected(line)

    def _retry(self, runner: TableRunner) -> None:
        delay = runner.delay
        runner.delay = min(delay * 2, BACKOFF_S[1])
        self.later(delay, lambda: self._open(runner))

    def _read(self, runner: TableRunner) -> None:
        line = runner.line
        if line is None:
            return
        try:
            data = line.read()
            if data:
                runner.receive(data)
        except PortLost as e:
            self._lost(runner, str(e))
        except Exception as e:
            self._lost(runner, f"{type(e).__name__}: {e}")

    def _read_polled(self) -> None:
        for r in list(self._polled):
            self._read(r)

    def _lost(self, runner: TableRunner, why: str) -> None:
        """The port failed (or the table's code did): closed, and opened again later. A
        table whose port is not open has its reopening under way already."""
        was_open = runner.line is not None
        self._close(runner)
        runner.lost(why)
        if was_open:
            self._retry(runner)

    def _close(self, runner: TableRunner) -> None:
        line = runner.line
        if line is None:
            return
        if line.fd is not None:
            try:
                self._sel.unregister(line.fd)
            except (KeyError, ValueError):
                pass
        if runner in self._polled:
            self._polled.remove(runner)
        runner.line = None
        runner.link.port = None
        self._close_later(line)

    def _close_later(self, line: Line) -> None:
        """Closed in a thread of its own: pyserial's socket:// close() sleeps 0.3 s ("give
        the server some time"), which every other table would wait for."""
        closing = threading.Thread(target=line.close, name="port-close", daemon=True)
        closing.start()
        self._closing = [t for t in self._closing if t.is_alive()]
        self._closing.append(closing)

    # --- stopping ---

    def _stop(self) -> None:
        self._stopping = True

    def _shutdown(self) -> None:
        self._ended = True
        try:
            self._wake()  # calls handed over before the end
        finally:
            for r in self.runners:
                self._close(r)
                r.stopped()
                try:
                    r.derive()
                except Exception:
                    pass  # the rows read are written all the same
            self._flush()
            self._sel.close()
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            deadline = time.monotonic() + CLOSE_S
            for closing in self._closing:  # the ports closed (together) before the end
                closing.join(max(0.0, deadline - time.monotonic()))


def _fields(f: Frame) -> dict[str, str]:
    try:
        return dict(f.fields)
    except FrameError:
        return {}


def _result(r: Any) -> dict[str, Any]:
    return {
        "spin": r.spin,
        "result": r.result,
        "colour": r.colour,
        "parity": r.parity,
        "half": r.half,
        "at_us": r.rx_us,
        "valid": r.valid,
        "boot": r.boot,
        "seq": r.seq,
    }


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
