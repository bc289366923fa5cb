"""The host's end of a live link: read frames, check them, ask again for every gap.

`Link` reads bytes from a port (anything with `read(n)` and `write(data)`: a pyserial port,
`serial.serial_for_url("socket://127.0.0.1:PORT")`, an in-process test channel), splits them
into lines, feeds the checker (`rmc.checker.Checker`) and the trace writer, and keeps asking
the firmware to RESEND every missing (boot, seq) range until it arrives, one RESEND at a
time (the firmware serves one at a time: a new one cuts short the one it is serving).
Results are released to `on_result` in (boot, seq) order, each exactly once, and only when
no frame before them is still missing: the result list it gives is complete and in order.

A frame lost at the very end of the stream leaves no later frame to show the gap, so a quiet
link is probed with STATUS: the firmware's ACK carries the next seq, which shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rmc.checker import Checker
from rmc.frames import Frame
from rmc.trace import TraceWriter
from rmcfw import frames as fwframes
from rmcfw import proto
from rmcfw.commands import Commander, format_ranges
from rmcfw.journal import FRAMES_KEPT

MAX_RANGE = 200  # frames asked per RESEND (the firmware answers at most 200)
MAX_LINE = fwframes.MAX_LINE + 16
MAX_RANGES = 32  # ranges in one RESEND (the firmware takes up to 40)
# Frames asked for at most behind the newest one heard of a boot: 16 times what a board's
# journal keeps. Older ones cannot be there; they are reported lost at once rather than
# listed one by one (a boot joined at seq 10,000,000 would be a list of ten million).
ASK_BACK = 16 * FRAMES_KEPT
MAX_RANGES_TEXT = 60  # characters of a RESEND's `only` list: the command fits in a line


def _ranges(seqs: list[int], max_text: int = MAX_RANGES_TEXT) -> list[tuple[int, int]]:
    """Sorted seqs -> the first ranges of them, at most MAX_RANGE frames, text bounded."""
    out: list[tuple[int, int]] = []
    count = 0
    size = 0
    for s in seqs:
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            size += len(str(s)) * 2 + 2
            if out and (size > max_text or len(out) >= MAX_RANGES):
                break
            out.append((s, s))
        count += 1
        if count >= MAX_RANGE:
            break
    return out


@dataclass
class LinkStats:
    commands: int = 0
    resends_asked: int = 0
    refused: int = 0  # commands the firmware refused (ACK ok=0)
    refusals: dict[str, int] = field(default_factory=dict)  # ... by the ACK's detail (A_*)
    lost: list[list[int]] = field(default_factory=list)  # ranges the journal no longer holds


class Link:
    def __init__(
        self,
        port,
        key: bytes | None = None,
        table: str | None = None,
        writer: TraceWriter | None = None,
        on_result: Callable[[Frame], None] | None = None,
        on_frame: Callable[[Frame], None] | None = None,
        on_line: Callable[[bytes, Frame | None], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry_s: float = 0.5,
        idle_s: float = 2.0,
        min_interval_s: float = 0.05,
        answer_s: float = 0.15,
        from_start: bool = False,
        keep_frames: bool = True,
    ) -> None:
        """from_start: a boot first heard mid-stream is asked for its frames from seq 1 (a
        service keeps all the journal holds); else the link starts where it joined.
        keep_frames=False: for a reader that keeps the frames itself: the checker keeps
        their last lines only (`Checker(keep=False)`, no report); `results` stays empty."""
        self.port = port
        self.from_start = from_start
        self.key = key
        self.checker = Checker(key, table, keep=keep_frames)
        self.writer = writer
        self.on_result = on_result
        self.on_frame = on_frame
        self.on_line = on_line  # every line as received, with its frame (None: not a new one)
        self.clock = clock
        self.retry_s = retry_s
        self.idle_s = idle_s
        self.min_interval_s = min_interval_s
        # One RESEND at a time; it is taken as lost after answer_s without a sign of its
        # answer (a resent frame, its ACK). Counted from the last sign, not guessed from the
        # frames asked and a line rate the link does not know: the answer shows itself frame
        # by frame (200 frames: ~1.5 s at 115200 baud, longer behind live frames). Its first
        # frame comes within a round trip (the command's ~10 ms at 115200, a loop pass, at
        # most ~45 ms of frames queued before it, the adapter's latency); replacing an answer
        # not started yet costs only a busy ACK, while each damaged command (no answer at
        # all) costs the whole wait.
        self.answer_s = answer_s
        self.stats = LinkStats()
        self._buf = bytearray()
        self._commander: Commander | None = None
        self._boot = 0  # newest firmware boot seen
        self._high: dict[int, int] = {}
        self._missing: dict[int, set[int]] = {}
        self._asked: dict[tuple[int, int], float] = {}  # (boot, seq) -> when last asked
        self._last_resend = -1e18
        # RESENDs awaiting their ACK: command seq -> boot, seqs asked (one in flight, older
        # ones only when their ACK was lost; a later ACK clears them)
        self._resends: dict[int, tuple[int, list[int]]] = {}
        self._inflight_t = -1e18  # when the last was sent, or a frame of its answer last came
        self._pending: dict[tuple[int, int], Frame] = {}  # results not released yet
        self._released = 0
        self._last_rx = clock()
        self._last_probe = -1e18
        self._first_boot: int | None = None
        self.results: list[Frame] = []

    def resume(
        self,
        high: dict[int, int],
        missing: dict[int, list[int]],
        first_boot: int | None,
        last_cseq: int = 0,
    ) -> None:
        """Take up a table where a store left it: the frames it holds, the gaps among them
        (asked again at once), and the last command seq used (the firmware refuses a seq it
        has seen in this boot)."""
        for boot, top in high.items():
            self._high[boot] = top
            self._missing.setdefault(boot, set()).update(missing.get(boot, ()))
        if high:
            self._boot = max(high)
            self._first_boot = first_boot if first_boot is not None else min(high)
        if self.checker.table is not None:
            self._commander = Commander(self.checker.table, self.key)
            self._commander.seq = last_cseq

    @property
    def boot(self) -> int:
        """The newest firmware boot heard (0: none yet): commands are addressed to it."""
        return self._boot

    @property
    def command_seq(self) -> int:
        """The seq of the last command sent."""
        return self._commander.seq if self._commander is not None else 0

    # --- input ---

    def poll(self, max_bytes: int = 4096) -> int:
        """Read what is there, handle complete lines, then ask for what is missing."""
        data = self.port.read(max_bytes)
        if data:
            self.receive(data)
        self.service()
        return len(data or b"")

    def receive(self, data: bytes) -> None:
        buf = self._buf
        buf.extend(data)
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                if len(buf) > MAX_LINE:
                    self._line(bytes(buf))  # a line too long to be a frame: counted, dropped
                    buf.clear()
                return
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            self._line(line)

    def _line(self, line: bytes) -> None:
        now = self.clock()
        if self.writer is not None and line.strip():
            self.writer.frame(line)
        f = self.checker.feed(line, now * 1000)
        if self.on_line is not None:
            self.on_line(line, f)
        if f is None:
            return
        self._last_rx = now
        if f.resent and self._resends:
            self._inflight_t = now  # the RESEND is being served: not lost
        self._track(f)
        if f.type == proto.T_ACK:
            self._ack(f)
        if f.type == proto.T_RESULT:
            self._pending[f.key] = f
        if self.on_frame is not None:
            self.on_frame(f)
        self._release()

    def _track(self, f: Frame) -> None:
        boot, seq = f.boot, f.seq
        if seq == proto.SEQ_NONE:
            top = f.fields.get(proto.K_TOP, "")
            if top.isdigit() and boot in self._high and int(top) > self._high[boot]:
                self._want(boot, self._high[boot] + 1, int(top))
                self._high[boot] = int(top)
            return
        if self._first_boot is None:
            self._first_boot = boot
        if boot > self._boot:
            self._boot = boot
        high = self._high.get(boot)
        missing = self._missing.setdefault(boot, set())
        if high is None:
            # A boot after the first starts at seq 1; the first may have begun before us.
            high = seq - 1 if boot == self._first_boot and not self.from_start else 0
        if seq > high + 1:
            self._want(boot, high + 1, seq - 1)
        if seq > high:
            self._high[boot] = seq
        missing.discard(seq)
        self._asked.pop((boot, seq), None)
        if f.type == proto.T_BOOT and seq == 1:
            b, _, s = f.fields.get(proto.K_PREV, "-").partition(":")
            if b.isdigit() and s.isdigit() and int(b) in self._high:
                pb, ps = int(b), int(s)
                if ps > self._high[pb]:
                    self._want(pb, self._high[pb] + 1, ps)
                    self._high[pb] = ps

    def _want(self, boot: int, first: int, last: int) -> None:
        """Seqs first..last of a boot are missing: asked for, but for those more than
        ASK_BACK behind last, which no journal holds any more: reported lost at once."""
        keep = max(first, last - ASK_BACK + 1)
        if keep > first:
            self.stats.lost.append([boot, first, keep - 1])
        self._missing.setdefault(boot, set()).update(range(keep, last + 1))

    def _ack(self, f: Frame) -> None:
        text = f.fields.get(proto.K_CSEQ, "")
        cseq = int(text) if text.isdigit() else None
        # answered (ok, busy, refused): the next RESEND may go
        asked = self._resends.pop(cseq, None) if cseq is not None else None
        if asked is not None:
            # the table answers in order: a RESEND sent before this one whose ACK has not come
            # lost it on the way (what it asked is asked again after retry_s)
            for old in [k for k in self._resends if k < cseq]:
                del self._resends[old]
        if f.fields.get(proto.K_OK) == "1":
            n = f.fields.get(proto.K_COUNT, "")
            if asked is not None and n.isdigit():
                boot, wanted = asked
                absent = len(wanted) - int(n)
                if absent > 0:
                    # The journal drops its oldest frames first: the first `absent` frames
                    # asked are gone for good. Stop asking; the checker still shows the gap.
                    miss = self._missing.get(boot, set())
                    gone = [s for s in wanted[:absent] if s in miss]
                    if gone:
                        miss.difference_update(gone)
                        self.stats.lost.append([boot, gone[0], gone[-1]])
                        self._release()
            return
        self.stats.refused += 1
        why = f.fields.get(proto.K_DETAIL) or "?"
        self.stats.refusals[why] = self.stats.refusals.get(why, 0) + 1
        nxt = f.fields.get(proto.K_NEXT)
        if nxt is not None and nxt.isdigit() and self._commander is not None:
            # Our command counter is behind the firmware's (we restarted): catch up.
            self._commander.seq = max(self._commander.seq, int(nxt) - 1)

    def _release(self) -> None:
        if not self._pending:
            return
        low = self.first_missing()
        for key in sorted(self._pending):
            if low is not None and key > low:
                break
            f = self._pending.pop(key)
            if self.checker.keep:
                self.results.append(f)
            self._released += 1
            if self.on_result is not None:
                self.on_result(f)

    def first_missing(self) -> tuple[int, int] | None:
        best = None
        for boot, miss in self._missing.items():
            if miss:
                k = (boot, min(miss))
                if best is None or k < best:
                    best = k
        return best

    def missing_ranges(self) -> list[list[int]]:
        out = []
        for boot in sorted(self._missing):
            seqs = sorted(self._missing[boot])
            i = 0
            while i < len(seqs):
                j = i
                while j + 1 < len(seqs) and seqs[j + 1] == seqs[j] + 1 and j - i + 1 < MAX_RANGE:
                    j += 1
                out.append([boot, seqs[i], seqs[j]])
                i = j + 1
        return out

    # --- output ---

    def send(self, cmd: str, fields: tuple = ()) -> bytes:
        table = self.checker.table
        if table is None:
            raise RuntimeError("no frame received yet: table unknown")
        if self._commander is None:
            self._commander = Commander(table, self.key)
        boot = self._boot if cmd != proto.C_STATUS or self._boot else 0
        line = self._commander.line(cmd, fields, boot=boot, ms=int(self.clock() * 1000))
        self.port.write(line)
        self.stats.commands += 1
        if self.writer is not None:
            self.writer.command(line)
        return line

    def service(self) -> None:
        """Ask for missing frames; probe a quiet link.

        Each call sends at most one RESEND, for the first missing frames not asked in the
        last retry_s (a few ranges, so the command stays short enough to cross a bad line).
        One RESEND at a time: the next goes once the last one's ACK has come, or once its
        answer has been silent for answer_s.
        """
        if self.checker.table is None:
            return
        now = self.clock()
        # Silence for answer_s: the command, the rest of its answer or its ACK was lost; the
        # next RESEND asks for the frames still missing and not asked in the last retry_s.
        waiting = bool(self._resends) and now - self._inflight_t < self.answer_s
        if not waiting and now - self._last_resend >= self.min_interval_s:
            first = self.first_missing()
            if first is not None:
                boot = first[0]
                asked = self._asked
                due = [
                    s
                    for s in sorted(self._missing[boot])
                    if now - asked.get((boot, s), -1e18) >= self.retry_s
                ]
                if due:
                    ranges = _ranges(due)
                    text = format_ranges(ranges)
                    a, b = ranges[0][0], ranges[-1][1]
                    self.send(
                        proto.C_RESEND,
                        ("boot", boot, "seq", a, proto.K_LAST, b, proto.K_ONLY, text),
                    )
                    self.stats.resends_asked += 1
                    self._last_resend = now
                    wanted = [s for x, y in ranges for s in range(x, y + 1)]
                    for s in wanted:
                        asked[(boot, s)] = now
                    cseq = self._commander.seq  # type: ignore[union-attr]
                    self._resends[cseq] = (boot, wanted)
                    self._inflight_t = now
        if now - self._last_rx >= self.idle_s and now - self._last_probe >= self.idle_s:
            self._last_probe = now
            self.send(proto.C_STATUS)

    def complete(self) -> bool:
        return self.first_missing() is None and not self._pending
