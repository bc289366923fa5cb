"""The checker's rules, run live over one table's frames as they come.

`rmc check` runs the decree's rules (`rmc.checker`) over a whole trace at once. A service
cannot wait for the end: `Deriver` runs the same rules frame by frame, in (boot, seq) order,
as far as the frames are complete (a frame still missing holds back the ones after it, as
the link holds back results), and turns what they find into rows for the store: one event
per finding, numbered within its kind, and the result and session rows the API reads.

The rows are numbered by the order the rules find them, which depends only on the frames in
(boot, seq) order. After a restart the deriver is fed the stored frames again and gives the
same numbers, so `done` (the events stored already, per kind) tells what not to write twice.

Each valid result also feeds the table's wheel-integrity monitor (`rmc.stats.Monitor`, a bank
of CUSUMs with 1 % false alarms per 10,000 spins): an alarm is an `integrity` event, numbered
like the others (the monitor sees the same results in the same order after a restart).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmc.checker import Report, _Rules
from rmc.frames import Frame, FrameError
from rmc.serve.store import EventRow, ResultRow, SessionClose, SessionOpen
from rmc.stats.monitor import Monitor
from rmcfw import proto

# Report lists -> event kinds
_LISTS = (
    ("results", "result"),
    ("rejected", "rejected"),
    ("voids", "void"),
    ("violations", "violation"),
    ("faults", "fault"),
    ("tamper", "tamper"),
    ("alerts", "alert"),
    ("forced_closes", "forced_close"),
    ("settings", "setting"),
)
# frames on record as events of their own (the rules keep no list of them)
_FRAME_KINDS = {
    proto.T_SESSION_OPEN: "session_open",
    proto.T_SESSION_CLOSE: "session_close",
    proto.T_LAST_THREE: "last3",
    proto.T_INCIDENT: "incident",
}
INTEGRITY = "integrity"  # the wheel-integrity monitor's alarms

# frames that end a run of frames fed to the rules together (Deriver): the only ones whose
# findings carry no (boot, seq) (RES: results and rejected results; VOID: voids), and those
# on record as events of their own
_ATTRIBUTED = frozenset({proto.T_RESULT, proto.T_VOID, *_FRAME_KINDS})


@dataclass
class Derived:
    """New rows found since the last call."""

    events: list[EventRow] = field(default_factory=list)
    results: list[ResultRow] = field(default_factory=list)
    opens: list[SessionOpen] = field(default_factory=list)
    closes: list[SessionClose] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.events or self.results or self.opens or self.closes)


class Deriver:
    """One table's rules, fed frames in any order, applied in (boot, seq) order.

    The frames ready at an `advance` go to the rules in runs, and what the rules found is
    read once per run, not once per frame: most frames (REV, STAT) find nothing. A run ends
    at each frame of `_ATTRIBUTED`: the findings without a (boot, seq) of their own (results,
    rejected results, voids) are the frame's that made them, so that frame must end its
    run; session frames end theirs too, as they change the session the results carry."""

    def __init__(self, table: str, done: dict[str, int] | None = None) -> None:
        self.table = table
        self.report = Report(table=table)
        self.rules = _Rules(self.report)
        # the report's lists, read after each run (the rules only ever append to them)
        self._lists = [(getattr(self.report, name), kind) for name, kind in _LISTS]
        self._found = 0  # items in those lists, all kinds: unchanged after most runs
        self.done = dict(done or {})  # kind -> events stored already
        self._seen = {kind: 0 for _, kind in _LISTS}
        self._seen.update({kind: 0 for kind in _FRAME_KINDS.values()})
        self._seen[INTEGRITY] = 0
        self.monitor = Monitor()
        self._held: dict[tuple[int, int], tuple[Frame, int]] = {}
        self.fed: tuple[int, int] = (-1, -1)  # the last frame applied
        self.session: int | None = None  # the open session's number (None: none known)
        self.last: Frame | None = None
        self._stat: Frame | None = None  # the last STAT frame applied
        self._state: tuple[Frame | None, dict[str, str]] = (None, {})  # ... and its fields

    def add(self, f: Frame, rx_us: int) -> None:
        """A new frame; applied once every frame before it is there (`advance`)."""
        if f.seq != proto.SEQ_NONE and (f.boot, f.seq) > self.fed:
            self._held[(f.boot, f.seq)] = (f, rx_us)

    def advance(self, first_missing: tuple[int, int] | None) -> Derived:
        """Apply the held frames below the first missing one (all of them if none is)."""
        out = Derived()
        held = self._held
        if not held:
            return out
        ready = []
        for key in sorted(held):
            if first_missing is not None and key >= first_missing:
                break
            ready.append(held.pop(key))
        if ready:
            self._apply(ready, out)
        return out

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def active_faults(self) -> list[str]:
        return sorted(self.rules.faults_on)

    @property
    def state(self) -> dict[str, str]:
        """The last STAT frame's fields ({} before any), parsed when asked for."""
        f, fields = self._state
        if f is not self._stat:
            try:
                fields = dict(self._stat.fields) if self._stat is not None else {}
            except FrameError:
                pass  # a STAT whose fields do not parse: the state last read stands
            self._state = (self._stat, fields)
        return fields

    def _apply(self, ready: list[tuple[Frame, int]], out: Derived) -> None:
        run: list[Frame] = []
        stat = proto.T_STATUS
        for f, rx_us in ready:
            run.append(f)
            t = f.type
            if t == stat:
                self._stat = f
            elif t in _ATTRIBUTED:
                self._run(run, rx_us, out)
                run = []
        if run:
            self._run(run, ready[-1][1], out)

    def _run(self, run: list[Frame], rx_us: int, out: Derived) -> None:
        """Frames in (boot, seq) order to the rules at once; their findings read after the
        last, which the findings without a (boot, seq) of their own belong to."""
        self.rules.feed(run)
        f = run[-1]
        self.fed = (f.boot, f.seq)
        self.last = f
        found = sum(len(items) for items, _ in self._lists)
        if found != self._found:
            self._found = found
            self._findings(f, rx_us, out)
        kind = _FRAME_KINDS.get(f.type)
        if kind is not None:
            self._frame_event(f, kind, rx_us, out)

    def _findings(self, f: Frame, rx_us: int, out: Derived) -> None:
        """The items the rules added to their lists since the last look, as event rows
        (and result rows), each with its own (boot, seq) or else the frame `f`'s."""
        for items, kind in self._lists:
            seen = self._seen[kind]
            if seen == len(items):
                continue
            for i in range(seen, len(items)):
                item = items[i]
                if self._new(kind, i):
                    boot, seq = item.get("boot", f.boot), item.get("seq", f.seq)
                    out.events.append(EventRow(self.table, kind, i, boot, seq, dict(item)))
                    if kind in ("result", "rejected"):
                        out.results.append(self._result(f, rx_us, valid=kind == "result"))
                if kind == "result":
                    self._watch(item, f, out)
            self._seen[kind] = len(items)

    def _watch(self, item: dict, f: Frame, out: Derived) -> None:
        """A valid result to the integrity monitor; its alarm, if any, as an event."""
        try:
            alarm = self.monitor.feed(str(item.get("result", "")))
        except (KeyError, ValueError):
            return  # not a pocket of this wheel: the rules have said so already
        if alarm is None:
            return
        n = self._seen[INTEGRITY]
        self._seen[INTEGRITY] = n + 1
        if self._new(INTEGRITY, n):
            data = {
                "results": alarm.spin,
                "detector": alarm.detector,
                "statistic": round(alarm.statistic, 3),
                "threshold": round(alarm.threshold, 3),
                "false_alarm": "1 % per 10,000 spins",
            }
            boot, seq = item.get("boot", f.boot), item.get("seq", f.seq)
            out.events.append(EventRow(self.table, INTEGRITY, n, boot, seq, data))

    def _new(self, kind: str, n: int) -> bool:
        return n >= self.done.get(kind, 0)

    def _frame_event(self, f: Frame, kind: str, rx_us: int, out: Derived) -> None:
        n = self._seen[kind]
        self._seen[kind] = n + 1
        try:
            fields = dict(f.fields)
        except FrameError:
            fields = {}
        number = _int(fields.get("session"))
        if f.type == proto.T_SESSION_OPEN:
            self.session = number
        elif f.type == proto.T_SESSION_CLOSE:
            self.session = None
        if not self._new(kind, n):
            return
        out.events.append(EventRow(self.table, kind, n, f.boot, f.seq, fields))
        if f.type == proto.T_SESSION_OPEN:
            chef = fields.get("chef", "")
            out.opens.append(SessionOpen(self.table, number or 0, f.boot, f.seq, chef, rx_us))
        elif f.type == proto.T_SESSION_CLOSE:
            spins, reason = _int(fields.get("spins")), fields.get("reason")
            close = SessionClose(self.table, number or 0, f.boot, f.seq, spins, reason, rx_us)
            out.closes.append(close)

    def _result(self, f: Frame, rx_us: int, valid: bool) -> ResultRow:
        fl = f.fields
        return ResultRow(
            self.table,
            f.boot,
            f.seq,
            _int(fl.get("spin")) or 0,
            fl.get("num", ""),
            fl.get("colour", ""),
            fl.get("parity", ""),
            fl.get("half", ""),
            rx_us,
            valid,
            self.session,
        )


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None
