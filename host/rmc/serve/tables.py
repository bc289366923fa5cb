"""One live table in the service: its port, its link, its rules, its operators' commands.

A `TableRunner` is a thread. It opens the table's port (a serial device or a pyserial URL
such as the virtual board's `socket://`), runs the host's link over it (`rmc.link.Link`:
frames checked with the table's key, every gap asked again), and hands every line it
receives to the store, with what the checker's rules derive from the frames
(`rmc.serve.derive`). It starts where the store left the table: the frames stored, the gaps
among them asked again at once, the last command seq.

A port that fails, or cannot be opened, is reopened with a growing delay (0.2 s up to
10 s); the link and its gaps survive it, so the frames sent in between are asked again.
Operator commands come from other threads (`command()`); this thread alone touches the link.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rmc.frames import Frame, FrameError
from rmc.link import Link
from rmc.record import PortLost, _Port, open_port
from rmc.serve.derive import Derived, Deriver
from rmc.serve.store import (
    AnswerRow,
    Batch,
    CommandAnswer,
    CommandRow,
    DamageRow,
    FrameRow,
    Resume,
)
from rmcfw import proto

BACKOFF_S = (0.2, 10.0)  # first and longest wait before reopening a port
FLUSH_S = 0.05  # rows are handed to the store at least this often
FLUSH_ROWS = 500  # ... or as soon as this many are waiting
ANSWER_S = 5.0  # an operator command not answered by then is reported unanswered
SILENT_S = 10.0  # a connected table heard nothing from this long is reported silent


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


class TableRunner:
    def __init__(
        self,
        spec: TableSpec,
        resume: Resume,
        write: Callable[[Batch], None],
        publish: Callable[[dict[str, Any]], None] = lambda ev: None,
        opener: Callable[[str], Any] = open_port,
        backlog: Iterable[tuple[Frame, int]] = (),
    ) -> None:
        """resume: what the store holds of the table; backlog: its stored frames in (boot,
        seq) order, fed again to the rules (they resume where they were)."""
        self.spec = spec
        self.write = write
        self.publish = publish
        self.opener = opener
        self.health = Health()
        self.link = Link(
            None,
            key=spec.key,
            table=spec.id,
            on_line=self._line,
            on_frame=None,
        )
        self.link.resume(
            resume.high,
            resume.missing,
            resume.first_boot,
            max(resume.last_cseq.values(), default=0),
        )
        self.deriver = Deriver(spec.id, resume.events)
        for f, rx_us in backlog:
            self.deriver.add(f, rx_us)
        self._batch = Batch()
        self._flushed = time.monotonic()
        self._orders: queue.Queue[Order] = queue.Queue()
        self._waiting: dict[int, Order] = {}  # cseq -> order awaiting its ACK
        self._recall: Order | None = None  # a RECALL answered, its frame still to come
        self._stop = threading.Event()
        self._heard = time.monotonic()  # the last line received
        self._thread: threading.Thread | None = None
        self._port: Any = None
        # the rules applied up to the first frame still missing (the backlog's own gaps)
        self._derive(self.deriver.advance(self.link.first_missing()), publish=False)

    # --- thread ---

    def start(self) -> TableRunner:
        self._thread = threading.Thread(target=self._run, name=f"table-{self.spec.id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._close()
        self._flush()

    def _run(self) -> None:
        delay = BACKOFF_S[0]
        while not self._stop.is_set():
            if self._port is None and not self._open():
                self._flush()
                self._stop.wait(delay)
                delay = min(delay * 2, BACKOFF_S[1])
                continue
            delay = BACKOFF_S[0]
            try:
                self._orders_out()
                self.link.poll()
                self._after_poll()
            except PortLost as e:
                self._lost(str(e))
            except Exception as e:
                self._lost(f"{type(e).__name__}: {e}")
        self._fail_orders("the service is stopping")

    def _open(self) -> bool:
        try:
            port = self.opener(self.spec.url)
        except Exception as e:
            self._state(False, f"cannot open {self.spec.url}: {_one_line(e)}")
            return False
        self._port = _Port(port)
        self.link.port = self._port
        self._heard = time.monotonic()
        if self.health.since_us is not None:
            self.health.reconnects += 1
        self._state(True, None)
        return True

    def _lost(self, why: str) -> None:
        self._close()
        self._state(False, why)
        self._fail_orders(f"port lost: {why}")

    def _close(self) -> None:
        port, self._port = self._port, None
        if port is not None:
            try:
                port.port.close()
            except Exception:
                pass

    def _state(self, connected: bool, error: str | None) -> None:
        h = self.health
        if h.connected != connected or h.error != error:
            h.connected, h.error, h.since_us = connected, error, now_us()
            self.publish({"type": "link", "table": self.spec.id, **self.link_state()})

    # --- lines in ---

    def _line(self, line: bytes, f: Frame | None) -> None:
        rx = now_us()
        self._heard = time.monotonic()
        h = self.health
        h.lines += 1
        h.last_rx_us = rx
        b = self._batch
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
        if f.type == proto.T_RECALL and self._recall is not None:
            order, self._recall = self._recall, None
            order.recall = _fields(f)
            order.done.set()

    def _answer(self, f: Frame, rx: int) -> None:
        fl = _fields(f)
        cseq = int(fl["cseq"]) if fl.get("cseq", "").isdigit() else None
        ok = fl.get(proto.K_OK) == "1"
        detail = fl.get(proto.K_DETAIL, "")
        line = f.line.decode("ascii", "replace")
        b = self._batch
        b.answers.append(
            AnswerRow(self.spec.id, f.boot, cseq, fl.get("cmd", ""), ok, detail, line, rx)
        )
        order = self._waiting.pop(cseq, None) if cseq is not None else None
        if order is None:
            return
        b.answered.append(CommandAnswer(self.spec.id, order.boot, order.cseq, ok, detail, line, rx))
        if not ok and detail in (proto.A_STALE, proto.A_BOOT) and order.tries < 2:
            # Refused unread: our command counter was behind the table's (the service
            # restarted) or the table rebooted. The link has caught up: send it again.
            order.tries += 1
            self._orders.put(order)
            return
        order.answer = {"ok": ok, "detail": detail, "answer": line}
        if order.cmd == proto.C_RECALL and ok:
            self._recall = order  # done when its RECALL frame comes
        else:
            order.done.set()

    def _after_poll(self) -> None:
        self._derive(self.deriver.advance(self.link.first_missing()))
        now = time.monotonic()
        # A connected table answers the link's STATUS probes (every 2 s of quiet): silence
        # this long means the board or its line is dead, while the port looks open.
        silent = now - self._heard > SILENT_S
        if silent != self.health.silent:
            self.health.silent = silent
            self.publish({"type": "link", "table": self.spec.id, **self.link_state()})
        for cseq, order in list(self._waiting.items()):
            if now - order.sent > ANSWER_S:
                del self._waiting[cseq]
                order.error = f"no answer from the table in {ANSWER_S:g} s"
                order.done.set()
        if len(self._batch) >= FLUSH_ROWS or now - self._flushed >= FLUSH_S:
            self._flush()

    def _derive(self, d: Derived, publish: bool = True) -> None:
        if not d:
            return
        b = self._batch
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
        if self.deriver.state:
            self.publish({"type": "state", "table": self.spec.id, **self.table_state()})

    def _flush(self) -> None:
        self._flushed = time.monotonic()
        if len(self._batch):
            batch, self._batch = self._batch, Batch()
            self.write(batch)

    # --- commands ---

    def command(
        self, verb: str, cmd: str, fields: tuple, by: str, role: str, timeout: float = ANSWER_S + 1
    ) -> dict[str, Any]:
        """Send an operator's command from any thread; returns its answer (or why none)."""
        order = Order(verb, cmd, fields, by, role)
        if not self.health.connected:
            order.error = f"the table is not connected: {self.health.error or 'not opened yet'}"
            return order.result()
        self._orders.put(order)
        if not order.done.wait(timeout):
            order.error = order.error or f"no answer from the table in {timeout:g} s"
        return order.result()

    def _orders_out(self) -> None:
        while True:
            try:
                order = self._orders.get_nowait()
            except queue.Empty:
                return
            if self._port is None:
                order.error = "the table is not connected"
                order.done.set()
                continue
            if not self.link.boot and order.cmd != proto.C_STATUS:
                order.error = "the table is not connected: no frame heard from it yet"
                order.done.set()
                continue
            line = self.link.send(order.cmd, order.fields)
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
            self._batch.commands.append(row)

    def _fail_orders(self, why: str) -> None:
        for order in list(self._waiting.values()):
            order.error = why
            order.done.set()
        self._waiting.clear()
        if self._recall is not None:
            self._recall.done.set()
            self._recall = None
        while True:
            try:
                order = self._orders.get_nowait()
            except queue.Empty:
                return
            order.error = why
            order.done.set()

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
