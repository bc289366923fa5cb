"""Settling recorded spins with the players' own bets: `rmc settle --trace TRACE | --db URL
--table ID --bets BETS.jsonl` (issue 21). `rmc replay` settles the bets a trace holds; this
settles bets kept apart, against a trace or the table service's database.

The spins (`Recording`) come from the frames, checked as `rmc check` checks them: a spin is
settled against its RES frame only when the checker accepted it. A rejected result (a rule
its frame or its launch broke), a spin with two outcomes, a spin whose outcome the recording
lacks: none settles anything, and the bets on it are listed as unsettled with the reason.

A bet names the spin it is for (`"spin": N`), or the time it was placed (`"at"`), or both.
Times are compared with the frames' host receive times (a trace's `rx_ms`, the database's
`rx_us`), in whole microseconds:

- a spin's bets close when its « rien ne va plus » (RNVP) frame was received; when that frame
  is not in the recording, when the first later frame of the spin was (its DROP, INC start,
  RES or VOID: no later than any of these). A bet placed at that instant or later is too
  late for it. A frame resent (lost, asked again, received late) is dated from the frame
  received first-hand before it in its boot, plus the firmware milliseconds between them;
- bets stay closed until the spin's outcome was received: a bet placed in between is
  refused, whatever spin it names. An incident (decree 1-4) closes them from its « rien ne
  va plus » until the outcome of the spin that follows it, its relaunch (or until the
  session is closed instead);
- a bet with a time only is for the first spin whose bets closed after it.

A voided spin's bets stand for the next spin (the ball is launched again), as the decree
and `rmc replay` have it; a session closed before that next spin leaves them unsettled.
The table's maximum holds for a player's total on one position within a spin: every line
of a total above it is refused.

The bets are read one line at a time and kept as `Bet` objects only (800,000 bets: some
130 MB); each spin's statement is made and written in turn.
"""

from __future__ import annotations

import bisect
import json
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import IO, Any

# the strict reader of BETS.json, used line by line (its private parts: one reading of bets)
from rmc.bets import (
    _DECODER,
    MAX_DEPTH,
    Bet,
    _BetReader,
    _has_surrogate,
    _may_hold_surrogate,
    _nesting_depth_ok,
    _Refused,
    bet_to_json,
    positions_over,
)
from rmc.checker import Checker, Report, _Rules
from rmc.frames import Frame, FrameError
from rmc.layout import HALF
from rmc.limits import Table
from rmc.money import EXACT, fmt
from rmc.settle import (
    _json_text,
    _payment_body,
    announce_result,
    half_of,
    payment_key,
    result_index,
)
from rmc.timestamps import InstantError, format_instant, parse_instant
from rmcfw import proto

INF = float("inf")
MAX_LINE_BYTES = 65536  # a bet takes some 100 bytes; no line of a bets file is this long
MAX_SPIN = 10**9


class SourceError(ValueError):
    """A trace or a database that gives no recording to settle against: a one-line reason."""


class BetLineError(ValueError):
    """A line of the bets file that is no bet: its number and why."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}")


# --- the recording: its spins, their times and outcomes ---


@dataclass
class RecordedSpin:
    number: int
    first_us: int | None = None  # its first frame received
    closed_us: int | None = None  # its bets closed (see the module's docstring)
    outcome_us: int | None = None  # its first outcome received
    result: str | None = None  # the result the checker accepted
    rejected: tuple[str, ...] = ()  # the rules a rejected result broke
    rejected_result: str | None = None
    void: str | None = None  # its void's reason
    outcomes: int = 0  # results and voids (more than one: settles nothing)
    incident: bool = False  # an incident stopped it (decree 1-4)
    session_closed: bool = False  # a session closed after it, before the next spin
    session_closed_us: int | None = None  # when (its SCLOSE received)

    @property
    def settles(self) -> bool:
        return self.outcomes == 1 and self.result is not None


@dataclass
class Recording:
    table: str | None
    spins: list[RecordedSpin]  # in the order of their first frame, (boot, seq)
    report: Report  # the checker's, as `rmc check` gives it
    notes: list[str] = field(default_factory=list)  # what the output should say of it


_SPIN_FRAMES = frozenset(
    (
        proto.T_LAUNCH,
        proto.T_RNVP,
        proto.T_DROP,
        proto.T_INCIDENT,
        proto.T_RESULT,
        proto.T_VOID,
        proto.T_SESSION_CLOSE,
    )
)


def recording(
    lines: Iterable[tuple[bytes, int | None]],
    key: bytes | None = None,
    table: str | None = None,
    wheel: str | None = None,
) -> Recording:
    """The spins of frame lines given as (line, host receive time in µs or None), checked
    by the checker (`rmc.checker.Checker`: the same verdicts as `rmc check`)."""
    checker = Checker(key, table=table, wheel=wheel)
    rx: dict[tuple[int, int], int] = {}
    for line, rx_us in lines:
        f = checker.feed(line)
        if f is not None and f.seq != proto.SEQ_NONE and rx_us is not None:
            rx[(f.boot, f.seq)] = rx_us
    report = checker.report()
    frames = [checker.frames[k] for k in checker.keys()]
    if checker.verifier is None and any(f.tagged for f in frames):
        # as the report has it: where the table tags its frames, an untagged one is forged
        frames = [f for f in frames if f.tagged]
    return Recording(checker.table, _spins(frames, _times(frames, rx)), report)


def _times(frames: list[Frame], rx: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """When each frame was sent, on the host's clock: its receive time; for a frame resent
    (asked again after it was lost, so received late), the time of the frame received
    first-hand before it in its boot plus the firmware milliseconds between them, when
    that is earlier than its own receive time."""
    out: dict[tuple[int, int], int] = {}
    ref: tuple[int, int, int] | None = None  # boot, firmware ms, receive time
    for f in frames:
        key = (f.boot, f.seq)
        t = rx.get(key)
        if t is None:
            continue
        if not f.resent:
            ref = (f.boot, f.ms, t)
        elif ref is not None and ref[0] == f.boot and f.ms >= ref[1]:
            t = min(t, ref[2] + (f.ms - ref[1]) * 1000)
        out[key] = t
    return out


def _spins(frames: list[Frame], rx: dict[tuple[int, int], int]) -> list[RecordedSpin]:
    """Each spin's times and outcome, the checker's rules run over the frames in (boot,
    seq) order: a result counts when they accept it."""
    report = Report()
    rules = _Rules(report)
    spins: dict[int, RecordedSpin] = {}
    current: RecordedSpin | None = None
    waiting: list[Frame] = []  # frames for the rules, fed in runs up to the next outcome
    for f in frames:
        if f.type not in _SPIN_FRAMES:
            waiting.append(f)
            continue
        outcome = f.type in (proto.T_RESULT, proto.T_VOID)
        if outcome:
            rules.feed(waiting)
            waiting = []
            before = _verdicts(report)
            rules.feed((f,))
        else:
            waiting.append(f)
        try:
            fields = f.fields
        except FrameError:
            continue  # the rules report it (bad_field)
        t = rx.get((f.boot, f.seq))
        if f.type == proto.T_SESSION_CLOSE:
            _session_closed(current, t)
            continue
        s = _spin_named(spins, fields, t)
        if s is None:
            continue
        current = s
        if not _closes_bets(f, fields, s):
            continue
        if t is not None and (s.closed_us is None or t < s.closed_us):
            s.closed_us = t  # closed no later than any of these frames was sent
        if outcome:
            _outcome(s, f, fields, t, report, before)
    return list(spins.values())


def _verdicts(report: Report) -> tuple[int, int, int]:
    """How many results, rejected results and voids the rules have given so far."""
    return len(report.results), len(report.rejected), len(report.voids)


def _session_closed(current: RecordedSpin | None, t: int | None) -> None:
    """A session closed after `current`, before any next spin: the first close counts."""
    if current is not None and not current.session_closed:
        current.session_closed = True
        current.session_closed_us = t


def _spin_named(
    spins: dict[int, RecordedSpin], fields: dict[str, str], t: int | None
) -> RecordedSpin | None:
    """The spin a frame's `spin` field names, made at its first frame (received at `t`);
    None for a field that is no spin number."""
    number = fields.get("spin", "")
    if not (number.isascii() and number.isdigit()) or len(number) > 9:
        return None
    s = spins.get(int(number))
    if s is None:
        s = spins[int(number)] = RecordedSpin(int(number), first_us=t)
    return s


def _closes_bets(f: Frame, fields: dict[str, str], s: RecordedSpin) -> bool:
    """Whether the frame closes the spin's bets: every spin frame but its LAUNCH and the
    incident's steps after its start (which marks the spin as stopped by an incident)."""
    if f.type == proto.T_LAUNCH:
        return False
    if f.type == proto.T_INCIDENT:
        if fields.get("step") != proto.INC_START:
            return False
        s.incident = True
    return True


def _outcome(
    s: RecordedSpin,
    f: Frame,
    fields: dict[str, str],
    t: int | None,
    report: Report,
    before: tuple[int, int, int],
) -> None:
    """A RES or VOID of the spin, as the rules took it (their verdicts `before` it)."""
    s.outcomes += 1
    if s.outcomes == 1:
        s.outcome_us = t
    got = _verdicts(report)
    if got[0] > before[0]:
        if s.outcomes == 1:
            s.result = report.results[-1]["result"]
    elif got[1] > before[1]:
        s.rejected = tuple(report.rejected[-1]["rules"])
        s.rejected_result = report.rejected[-1]["result"]
    elif got[2] > before[2]:
        s.void = report.voids[-1]["reason"] or "-"
    elif f.type == proto.T_RESULT:  # a field the rules could not read: no result
        s.rejected = ("bad_field",)
        s.rejected_result = fields.get("num")


def from_trace(
    data: bytes,
    key: bytes | None = None,
    since_us: int | None = None,
    until_us: int | None = None,
) -> Recording:
    """The recording of a trace file's bytes (its frames received in since_us <= rx <
    until_us, when given); SourceError when it does not check: unusable (rmc check exits
    2), or changed after writing (lines lost, added or altered). A trace cut short (no end
    record) is used, with a note: what came after the cut is not in it."""
    from rmc.trace import TraceError, looks_like_trace, parse_trace, wheel_id

    if not looks_like_trace(data[:65536]):
        raise SourceError("not a trace (a raw capture has no receive times to settle by)")
    try:
        trace = parse_trace(data)
    except TraceError as e:
        raise SourceError(str(e)) from None
    notes: list[str] = []
    for error in trace.errors:
        if error.startswith("no end record"):
            notes.append(f"the trace is cut short: {error}")
        else:
            raise SourceError(f"the trace does not check: {error}")
    table = trace.header.get("table")
    table = table if isinstance(table, str) and table != "unknown" else None
    lines = ((line, None if rx is None else round(rx * 1000)) for line, rx in trace.frame_lines())
    if since_us is not None or until_us is not None:
        lines = (
            (line, rx) for line, rx in lines if rx is not None and _within(rx, since_us, until_us)
        )
    rec = recording(lines, key, table, wheel_id(trace.header.get("wheel")))
    rec.notes = notes
    if rec.report.valid == 0:
        raise SourceError("no valid frame in the trace (in that window): no spin to settle against")
    return rec


def from_db(
    url: str,
    table: str,
    key: bytes | None = None,
    since_us: int | None = None,
    until_us: int | None = None,
) -> Recording:
    """The recording of one table of the service's database (its frames received in
    since_us <= rx_us < until_us, when given: a night of a database that holds years);
    SourceError for a database that cannot be opened, or that holds no frame of that
    table (in that window)."""
    from rmc.serve.store import StoreError
    from rmc.served_db import DatabaseError, open_store

    try:
        store = open_store(url)
    except DatabaseError as e:
        raise SourceError(str(e)) from None
    try:
        rows = store.frames(table, since_us, until_us)
        lines = ((r.line.encode("latin-1", "replace"), r.rx_us) for r in rows)
        rec = recording(lines, key, table)
    except StoreError as e:
        raise SourceError(str(e)) from None
    finally:
        store.close()
    if rec.report.lines == 0:
        if since_us is not None or until_us is not None:
            raise SourceError(f"no frame of table {table!r} received in that window")
        raise SourceError(f"no table {table!r} in the database: no frame of it is stored")
    return rec


def _within(t: int, since_us: int | None, until_us: int | None) -> bool:
    return (since_us is None or t >= since_us) and (until_us is None or t < until_us)


# --- the bets file ---


def read_bets(
    stream: IO[bytes], table: Table, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, Bet, int | None, int | None]]:
    """(line number, bet, spin or None, time placed in µs or None) for each bet of a JSONL
    file, read one line at a time; BetLineError for the first line that is no bet. Each
    line is read as strictly as BETS.json (rmc.bets: no duplicated key, amounts in their
    plain spelling, no exponent...); blank lines are skipped."""
    reader = _BetReader(table)
    n = 0
    done = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            break
        n += 1
        done += len(raw)
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise BetLineError(n, f"longer than {MAX_LINE_BYTES} bytes: no bet is")
        if progress is not None and n % 4096 == 0:
            progress(done)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BetLineError(n, "not UTF-8 text") from None
        if text.isspace():
            continue
        try:
            bet, spin, at = _bet_line(text, reader)
        except ValueError as e:
            raise BetLineError(n, str(e)) from None
        yield n, bet, spin, at
    if progress is not None:
        progress(done)


_ABSENT = object()


def _bet_line(text: str, reader: _BetReader) -> tuple[Bet, int | None, int | None]:
    doc = _json_line(text)
    if not isinstance(doc, dict):
        raise ValueError(f"a bet is a JSON object, not {type(doc).__name__}")
    spin = doc.pop("spin", _ABSENT)
    at = doc.pop("at", _ABSENT)
    if spin is _ABSENT and at is _ABSENT:
        raise ValueError("a bet names its 'spin' or the time it was placed ('at'), or both")
    if spin is not _ABSENT:
        if type(spin) is not int or not 1 <= spin <= MAX_SPIN:
            raise ValueError(f"'spin' must be a spin number (a JSON integer from 1), not {spin!r}")
    if at is not _ABSENT:
        at = _instant(at)
    bet = reader.bet(doc)
    return (
        bet,
        None if spin is _ABSENT else spin,  # type: ignore[arg-type]
        None if at is _ABSENT else at,  # type: ignore[arg-type]
    )


def _instant(value: object) -> int:
    """A bet's 'at' in µs; a file repeats its times: the text's last readings are kept."""
    if type(value) is str:
        got = _INSTANTS.get(value)
        if got is None:
            if len(_INSTANTS) > 4096:
                _INSTANTS.clear()
            got = _INSTANTS[value] = _read_instant(value)
        return got
    return _read_instant(value)


def _read_instant(value: object) -> int:
    try:
        return parse_instant(value, "'at'")
    except InstantError as e:
        raise ValueError(str(e)) from None


_INSTANTS: dict[str, int] = {}


def _json_line(text: str) -> object:
    """One JSON line, read by BETS.json's strict decoder (rmc.bets)."""
    if text.count("[") + text.count("{") > MAX_DEPTH and not _nesting_depth_ok(text):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    start = 0 if text[:1] == "{" else len(text) - len(text.lstrip(" \t\r\n"))
    try:
        try:
            doc, end = _SCAN(text, start)  # the decoder's scanner: raw_decode less a frame
        except StopIteration:
            doc, end = _DECODER.raw_decode(text, start)  # raises, saying why and where
    except _Refused as e:
        raise ValueError(str(e)) from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if end < len(text) and text[end:].strip(" \t\r\n"):
        raise ValueError(f"not valid JSON: extra data at column {end + 1}")
    # strict UTF-8 decoding let no surrogate through: only an escape can make one
    if "\\u" in text and _may_hold_surrogate(text) and _has_surrogate(doc):
        raise ValueError("holds a lone surrogate (\\ud800-\\udfff): no text")
    return doc


_SCAN = _DECODER.scan_once


# --- placing the bets on the recorded spins ---


@dataclass(slots=True)
class Left:
    """A bet not settled: refused (late, in an incident, over the table's maximum) or
    unsettled (its spin has no result the checker accepted)."""

    line: int
    spin: int | None
    bet: Bet
    reason: str


@dataclass
class Group:
    """The bets that stand on one spin: its own and those carried from voided spins."""

    spin: RecordedSpin
    lines: array = field(default_factory=lambda: array("q"))
    bets: list[Bet] = field(default_factory=list)
    carried_from: list[int] = field(default_factory=list)
    paid: Decimal = Decimal(0)  # once settled (`statements`)
    kept: Decimal = Decimal(0)  # by the partages' rounding

    def add(self, line: int, bet: Bet) -> None:
        self.lines.append(line)
        self.bets.append(bet)


@dataclass
class Outcome:
    recording: Recording
    settled: list[Group]  # spins with bets settled, in the recording's order
    refused: list[Left]
    unsettled: list[Left]
    bets: int  # read


@dataclass
class _Window:
    start: int
    end: float  # INF: not reopened in the recording
    spin: RecordedSpin
    incident: bool
    known_end: bool  # the outcome that reopened bets is in the recording


class Placer:
    """Places each bet on its recorded spin as it is read (`place`), then settles (`finish`)."""

    def __init__(self, rec: Recording, table: Table) -> None:
        self.rec = rec
        self.table = table
        self.groups: dict[int, Group] = {s.number: Group(s) for s in rec.spins}
        self.refused: list[Left] = []
        self.unsettled: list[Left] = []
        self.count = 0
        self._reasons: dict[tuple, str] = {}  # one text per reason, however many bets
        spins = rec.spins
        # the spins by the time their bets closed, for bets given by time
        timed = sorted((s for s in spins if s.closed_us is not None), key=lambda s: s.closed_us)
        self._closes = [s.closed_us for s in timed]
        self._timed = timed
        self._untimed_tail = spins[len(spins) - _trailing_untimed(spins) :]
        # when bets were closed: a spin's call to its outcome; an incident's to the outcome
        # of the spin after it (its relaunch)
        windows: list[_Window] = []
        for i, s in enumerate(spins):
            if s.closed_us is None:
                continue
            end: float
            if s.incident and s.session_closed and s.session_closed_us is not None:
                known, end = True, s.session_closed_us  # the chef closed the session instead
            elif s.incident:
                nxt = spins[i + 1] if i + 1 < len(spins) else None
                known = nxt is not None and nxt.outcome_us is not None
                end = nxt.outcome_us if known else INF  # type: ignore[union-attr]
            else:
                known = s.outcome_us is not None
                if known:
                    end = s.outcome_us  # type: ignore[assignment]
                else:  # reopened when? the next spin's first frame at the latest
                    nxt = spins[i + 1] if i + 1 < len(spins) else None
                    end = nxt.first_us if nxt is not None and nxt.first_us is not None else INF
            windows.append(_Window(s.closed_us, end, s, s.incident, known))
        # incidents apart: their windows span others (windows of one kind do not overlap)
        self._lookup: list[tuple[list[int], list[_Window]]] = []
        for incident in (True, False):
            ws = sorted((w for w in windows if w.incident == incident), key=lambda w: w.start)
            self._lookup.append(([w.start for w in ws], ws))

    def _reason(self, kind: str, s: RecordedSpin, *more: object) -> str:
        key = (kind, s.number, *more)
        text = self._reasons.get(key)
        if text is None:
            text = self._reasons[key] = _REASONS[kind](s, *more)
        return text

    def place(self, line: int, bet: Bet, spin: int | None, at: int | None) -> None:
        """One bet: for its spin, or for the first spin whose bets closed after it."""
        self.count += 1
        w = None if at is None else self._closed_at(at)
        if spin is not None:
            g = self.groups.get(spin)
            if g is None:
                why = f"spin {spin} is not in the recording"
                self.unsettled.append(Left(line, spin, bet, why))
                return
            s = g.spin
            if w is not None and w.incident:
                self._closed(line, spin, bet, w)
            elif at is not None and s.closed_us is not None and at >= s.closed_us:
                self.refused.append(Left(line, spin, bet, self._reason("late", s)))
            elif w is not None:
                self._closed(line, spin, bet, w)
            else:
                g.add(line, bet)
            return
        assert at is not None
        if w is not None:
            self._closed(line, w.spin.number, bet, w)
            return
        i = bisect.bisect_right(self._closes, at)
        if i < len(self._timed):
            self.groups[self._timed[i].number].add(line, bet)
        elif self._untimed_tail:
            self.groups[self._untimed_tail[0].number].add(line, bet)
        else:
            self.unsettled.append(Left(line, None, bet, "no spin after it in the recording"))

    def _closed(self, line: int, spin: int, bet: Bet, w: _Window) -> None:
        """A bet placed while bets were closed: refused, or unsettled when the recording
        does not tell when they opened again."""
        kind = "incident" if w.incident else ("closed" if w.known_end else "unknown_end")
        left = Left(line, spin, bet, self._reason(kind, w.spin))
        (self.unsettled if kind == "unknown_end" else self.refused).append(left)

    def _closed_at(self, at: int) -> _Window | None:
        """The window of closed bets `at` falls in, if any: an incident's first (it spans
        its relaunch's own)."""
        for starts, windows in self._lookup:
            i = bisect.bisect_right(starts, at) - 1
            if i >= 0 and at < windows[i].end:
                return windows[i]
        return None

    def finish(self) -> Outcome:
        """Each spin's bets, voided spins' carried to the next, settled or left with why."""
        settled: list[Group] = []
        carried: Group | None = None  # the bets of voided spins, waiting for the next spin
        for s in self.rec.spins:
            g = self.groups[s.number]
            if carried is not None:
                g.lines = carried.lines + g.lines
                g.bets = carried.bets + g.bets
                g.carried_from = carried.carried_from
                carried = None
            if not g.bets:
                continue
            if s.outcomes == 1 and s.void is not None:
                if s.session_closed:
                    self._leave(g, self.unsettled, self._reason("closed_after_void", s))
                    continue
                g.carried_from = [*g.carried_from, s.number]
                carried = Group(s, g.lines, g.bets, g.carried_from)
                continue
            if not s.settles:
                self._leave(g, self.unsettled, self._reason(_why_not(s), s))
                continue
            over = positions_over(g.bets, self.table, list(g.lines))
            if over:
                dropped: set[int] = set()
                for ns, why in over:
                    dropped.update(ns)
                    for k in ns:
                        self.refused.append(Left(g.lines[k], s.number, g.bets[k], why))
                keep = [k for k in range(len(g.bets)) if k not in dropped]
                g.lines = array("q", (g.lines[k] for k in keep))
                g.bets = [g.bets[k] for k in keep]
                if not g.bets:
                    continue
            settled.append(g)
        if carried is not None:
            last = carried.spin
            self._leave(carried, self.unsettled, self._reason("void_not_replayed", last))
        self.refused.sort(key=lambda x: x.line)
        self.unsettled.sort(key=lambda x: x.line)
        return Outcome(self.rec, settled, self.refused, self.unsettled, self.count)

    @staticmethod
    def _leave(g: Group, into: list[Left], why: str) -> None:
        n = g.spin.number
        into.extend(Left(line, n, bet, why) for line, bet in zip(g.lines, g.bets, strict=True))


def _trailing_untimed(spins: list[RecordedSpin]) -> int:
    """How many spins at the end of the recording have no time their bets closed (a launch
    the recording ends after)."""
    n = 0
    for s in reversed(spins):
        if s.closed_us is not None:
            break
        n += 1
    return n


def _why_not(s: RecordedSpin) -> str:
    if s.outcomes > 1:
        return "two_outcomes"
    if s.rejected:
        return "rejected"
    return "no_outcome"


def _at(us: int | None) -> str:
    return format_instant(us) or "?"


_REASONS: dict[str, Callable[..., str]] = {
    "late": lambda s: (
        f"placed after « rien ne va plus » of spin {s.number} (received {_at(s.closed_us)})"
    ),
    "closed": lambda s: (
        f"placed while bets were closed: after « rien ne va plus » of spin {s.number} "
        f"(received {_at(s.closed_us)}), before its outcome (received {_at(s.outcome_us)})"
    ),
    "incident": lambda s: (
        f"placed during the incident of spin {s.number} (decree 1-4: bets closed from its "
        f"« rien ne va plus », received {_at(s.closed_us)}, to its relaunch's outcome)"
    ),
    "unknown_end": lambda s: (
        f"placed after « rien ne va plus » of spin {s.number} (received {_at(s.closed_us)}), "
        "whose outcome is not in the recording: whether bets were open again is unknown"
    ),
    "rejected": lambda s: (
        f"spin {s.number}: its result {s.rejected_result} was rejected by the checker "
        f"({', '.join(s.rejected)}): it settles nothing"
    ),
    "two_outcomes": lambda s: (
        f"spin {s.number} has {s.outcomes} outcomes in the recording: it settles nothing"
    ),
    "no_outcome": lambda s: f"spin {s.number} has no outcome in the recording",
    "closed_after_void": lambda s: (
        f"spin {s.number} was voided ({s.void}) and the session closed before another spin: "
        "the bets were not played again"
    ),
    "void_not_replayed": lambda s: (
        f"spin {s.number} was voided ({s.void}) and no spin follows it in the recording"
    ),
}


# --- the statement ---

_FIRST, _NEXT = "\n", ",\n"  # before a spin's first payment, and before the others


@dataclass
class Totals:
    staked: Decimal = Decimal(0)
    paid: Decimal = Decimal(0)
    partage_kept: Decimal = Decimal(0)
    settled: int = 0

    def to_json(self, out: Outcome) -> dict[str, Any]:
        return {
            "bets": out.bets,
            "settled": self.settled,
            "refused": len(out.refused),
            "unsettled": len(out.unsettled),
            "staked": fmt(self.staked),
            "paid": fmt(self.paid),
            "house": fmt(EXACT.subtract(self.staked, self.paid)),
            "partage_kept": fmt(self.partage_kept),
        }


def statements(out: Outcome, totals: Totals) -> Iterator[tuple[Group, Any, list[int], list[int]]]:
    """(group, its Book, the outcome codes, the paying order) for each spin settled, in
    the recording's order; `totals` grows as they go."""
    from rmc.settle import Book

    for g in out.settled:
        book = Book(g.bets)
        codes = book.outcome_codes(result_index(g.spin.result))
        order = book.paying_order(codes)
        paid = kept = Decimal(0)
        for i in order:
            amount = book.amounts[i][codes[i]]
            paid = EXACT.add(paid, amount)
            if codes[i] == HALF:
                kept = EXACT.add(kept, EXACT.subtract(half_of(g.bets[i]), amount))
        g.paid, g.kept = paid, kept
        totals.staked = EXACT.add(totals.staked, book.staked)
        totals.paid = EXACT.add(totals.paid, paid)
        totals.partage_kept = EXACT.add(totals.partage_kept, kept)
        totals.settled += len(g.bets)
        yield g, book, codes, order


def recording_json(rec: Recording) -> dict[str, Any]:
    r = rec.report
    return {
        "table": rec.table,
        "spins": len(rec.spins),
        "results": len(r.results),
        "rejected": len(r.rejected),
        "voids": len(r.voids),
        "clean": r.clean,
        "notes": rec.notes,
    }


def left_json(x: Left) -> dict[str, Any]:
    return {"line": x.line, "spin": x.spin, **bet_to_json(x.bet), "reason": x.reason}


def write_json(
    out: Outcome,
    source: dict[str, Any],
    write: Callable[[str], object],
    progress: Callable[[int], None] | None = None,
) -> None:
    """The whole outcome as one JSON object (indented as `rmc settle --json` writes its
    statement), written spin by spin and payment by payment: 800,000 bets are never one
    document in memory, and each spin's bets are let go once written (the outcome is
    written once). `progress` is told how many bets are written, now and then."""
    totals = Totals()
    head = {"source": source, "recording": recording_json(out.recording)}
    text = json.dumps(head, ensure_ascii=False, indent=2)
    write(text[: text.rstrip().rfind("}")].rstrip() + ',\n  "spins": [')
    bodies: dict[tuple, str] = {}  # a payment's text after its player and line, once
    done = 0
    for k, (g, book, codes, order) in enumerate(statements(out, totals)):
        write(("," if k else "") + _spin_head_text(g))
        write(',\n      "payments": [')
        _write_payments(g, book, codes, order, bodies, write, _counted(progress, done))
        done += len(order)
        write(f'      "totals": {_spin_totals_text(g, book)}\n    }}')
        g.bets, g.lines = [], array("q")  # written: their memory goes back
    write("\n  ]" if out.settled else "]")
    _write_left(out, write)
    text = json.dumps(totals.to_json(out), ensure_ascii=False, indent=2).replace("\n", "\n  ")
    write(f',\n  "totals": {text}\n}}\n')
    if progress is not None:
        progress(done)


def _counted(progress: Callable[[int], None] | None, done: int) -> Callable[[int], None] | None:
    """`progress` told the bets written before this spin as well as the spin's own."""
    if progress is None:
        return None
    return lambda n: progress(done + n)


def _spin_head_text(g: Group) -> str:
    """A settled spin's object up to its payments: its number, result and times."""
    s = g.spin
    spin_head = {
        "spin": s.number,
        "result": s.result,
        "announcement": announce_result(s.result),  # type: ignore[arg-type]
        "bets_closed_at": format_instant(s.closed_us),
        "result_at": format_instant(s.outcome_us),
        "carried_from": g.carried_from,
    }
    lines = json.dumps(spin_head, ensure_ascii=False, indent=2).split("\n")[1:-1]
    return "\n    {\n" + "\n".join("    " + x for x in lines)


def _write_payments(
    g: Group,
    book: Any,
    codes: list[int],
    order: list[int],
    bodies: dict[tuple, str],
    write: Callable[[str], object],
    progress: Callable[[int], None] | None,
) -> None:
    """A spin's payments in paying order, 2,000 at a time, and the array's end."""
    players: dict[str, str] = {}
    chunk: list[str] = []
    for n, i in enumerate(order):
        bet, code = g.bets[i], codes[i]
        key = payment_key(bet, code)
        body = bodies.get(key)
        if body is None:
            text = _payment_body(bet, code, book.amounts[i][code])
            body = bodies[key] = "\n".join("    " + x for x in text.split("\n"))
        name = players.get(bet.player)
        if name is None:
            name = players[bet.player] = _json_text(bet.player)
        chunk.append(
            f'{_NEXT if n else _FIRST}        {{\n          "player": {name},\n'
            f'          "line": {g.lines[i]},\n{body}\n        }}'
        )
        if len(chunk) == 2000:
            write("".join(chunk))
            chunk = []
            if progress is not None:
                progress(n + 1)
    write("".join(chunk) + ("\n      ],\n" if order else "],\n"))


def _spin_totals_text(g: Group, book: Any) -> str:
    """A settled spin's "totals" object, indented as its place in the spin wants."""
    spin_totals = {
        "staked": fmt(book.staked),
        "paid": fmt(g.paid),
        "house": fmt(EXACT.subtract(book.staked, g.paid)),
        "partage_kept": fmt(g.kept),
    }
    return json.dumps(spin_totals, ensure_ascii=False, indent=2).replace("\n", "\n      ")


def _write_left(out: Outcome, write: Callable[[str], object]) -> None:
    """The "refused" and "unsettled" arrays, one bet a line."""
    for name, items in (("refused", out.refused), ("unsettled", out.unsettled)):
        write(f',\n  "{name}": [')
        for n, x in enumerate(items):
            item = json.dumps(left_json(x), ensure_ascii=False)
            write(("," if n else "") + "\n    " + item)
        write("\n  ]" if items else "]")
