"""Import of Cammegh SlingShot logs: status lines turned into a trace of our frames.

A SlingShot 2 wheel sends `*X;state;spin;win;warnings;rotor_rpm×10;direction` every 500 ms
(9600 8N1, no checksum), the winning number right-aligned in two characters (`*X;5;011; 4;…`).
Logs often prefix each line with a time stamp, e.g.
`[2025-09-16 06:45:24.582] Receive >>> *X;3;1042;0;0;268;1`.

States: 1 before game, 2 place bets, 3 ball in rim, 4 no more bets, 5 winning number,
6 table closed. Warning flags (hex sum): 1 ball missing, 2 ball turning the rotor's way
(misspin), 4 sensor/motor/encoder fault, 8 launch failed.

Each change of state becomes the frame our firmware would have sent (LAUNCH, RNVP, RES or
VOID, STAT, FAULT), numbered as one boot, untagged, in a trace of source "slingshot"; the
original lines are kept as "slingshot" records. What a SlingShot does not report (ball
revolutions, drop) is left out, and the checker skips the rules that need it.

Nothing is mended (issues 19 and 20): a line holding `*X;` that cannot be read, a bad time
stamp, an unknown state, a number that is not one of our pockets, and lines that disagree
(a spin counter going back or jumping, a state-4 or state-5 line of a spin never seen
launched, a winning number changing) are each a `Damage`: a note saying why and a damaged
frame that `rmc check` counts (crc_errors), so the trace never checks clean. A result is
given to the spin its own line names, never to another.

Assumptions, documented in docs/traces.md: direction "0" is clockwise and "1" anticlockwise
(as seen from above); a launch failure (8) is voided as fewer than 4 revolutions; a 38-pocket
(American) wheel reports 00 as 37.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rmc.framegen import result_fields
from rmc.trace import make_header
from rmcfw import numbers, proto
from rmcfw.frames import Encoder

MARK = "*X;"  # a line holding it is a status line: read, or reported
# Bounded fields: a hostile log cannot make int() slow or fail on a huge number.
_LINE = re.compile(
    r"\s*(?:\[(?P<ts>[^\]]*)\][^*]*)?"
    r"\*X;(?P<state>\d{1,3});(?P<spin>\d{1,9});(?P<win>(?: ?\d|\d\d)?);"
    r"(?P<warn>[0-9A-Fa-f]{1,2});(?P<rpm>\d{1,6});(?P<dir>[0-9A-Za-z]{1,3})\s*"
)
_TS = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - _EPOCH  # one microsecond

W_BALL_MISSING = 1
W_SAME_DIR = 2
W_FAULT = 4
W_LAUNCH_FAILED = 8

_DIRS = {"0": "cw", "c": "cw", "cw": "cw", "1": "ccw", "a": "ccw", "ccw": "ccw"}
_STATES = {
    1: proto.S_OPEN,
    2: proto.S_BETS,
    3: proto.S_TRACK,
    4: proto.S_RNVP,
    5: proto.S_RESULT,
    6: proto.S_CLOSED,
}
POCKETS = (37, 38)  # the wheels a SlingShot is built as: European, American


@dataclass
class Imported:
    records: list[dict[str, Any]]
    lines: int = 0
    status_lines: int = 0  # lines holding "*X;", read or not
    skipped: list[int] = field(default_factory=list)  # line numbers that were not status lines
    spins: int = 0
    damage: list[tuple[int, str]] = field(default_factory=list)  # (line number, why)


def pocket(win: str, pockets: int = 37) -> str | None:
    """Our label for a SlingShot winning number (" 4", "23", "37"), or None when it is not a
    pocket of ours. A 38-pocket wheel reports 00 as 37; "00" or "05" are not the wheel's
    writing (it pads with a space), so they are no number at all."""
    text = win.strip()
    if not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        return None
    n = int(text)
    if n <= 36:
        return str(n)
    if n == 37 and pockets == 38:
        return numbers.DOUBLE_ZERO
    return None


def _epoch_ms(ts: str) -> float:
    """Milliseconds since 1970 (UTC) of a log time stamp; ValueError when it is none."""
    m = _TS.fullmatch(ts)
    if not m:
        raise ValueError("not YYYY-MM-DD hh:mm:ss[.fff]")
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    us = int((m.group(7) or "0").ljust(6, "0"))
    dt = datetime(y, mo, d, h, mi, s, us, tzinfo=UTC)  # ValueError: month 13, hour 25, …
    return (dt - _EPOCH) // _US / 1000


def _show(text: str, limit: int = 60) -> str:
    """A field or line quoted in a reason, cut short: a hostile line may be long."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def import_log(
    text: str, table: str = "slingshot", period_ms: int = 500, pockets: int = 37
) -> Imported:
    """Convert a SlingShot log into trace records (header first). pockets: 37 (European
    wheel) or 38 (American, 00 reported as 37)."""
    if pockets not in POCKETS:
        raise ValueError(f"a SlingShot has {' or '.join(map(str, POCKETS))} pockets")
    imp = _Importer(table, period_ms, pockets)
    for n, raw in enumerate(text.splitlines(), 1):
        imp.line(n, raw)
    return imp.out


@dataclass
class _Status:
    """A status line's fields, read."""

    n: int  # its line number
    t: float  # its time, ms since 1970
    state: int
    spin: int
    win: str
    warn: int
    rpm10: int
    rdir: str


class _Importer:
    """import_log's reading, one log line at a time: the frames, the damage."""

    def __init__(self, table: str, period_ms: int, pockets: int) -> None:
        self.period_ms = period_ms
        self.pockets = pockets
        self.enc = Encoder(table, 1)
        header = make_header(
            table, "slingshot", firmware="cammegh-slingshot", wheel=None, slingshot_pockets=pockets
        )
        header["wheel"] = "unknown"
        self.records: list[dict[str, Any]] = [header]
        self.out = Imported(self.records)
        self.t0: float | None = None
        self.last_t = 0.0
        self.prev_state: int | None = None
        self.counter: int | None = None  # the spin counter of the last line read
        self.spin: int | None = None  # the last spin seen launched (state 3)
        self.outcome: str | None = None  # the win field of that spin's first state-5 line
        self.warn_seen = 0  # warnings seen during the current spin
        self.fault_on = False

    def emit(self, ftype: str, fields: tuple, t: float) -> None:
        ms = int(t - (self.t0 or 0))
        line = bytes(self.enc.frame(ftype, fields, ms=max(ms, 0))).rstrip(b"\n").decode("ascii")
        self.records.append({"kind": "frame", "rx_ms": round(t, 3), "line": line})

    def damage(self, n: int, why: str, t: float) -> None:
        # A note says why; a damaged frame (a "$" line without CRC, holding none of the log's
        # text, so no forged frame can ride in it) makes `rmc check` count it.
        self.out.damage.append((n, why))
        self.records.append(
            {"kind": "note", "t_ms": round(t, 3), "text": f"slingshot line {n}: {why}"}
        )
        self.records.append(
            {"kind": "frame", "rx_ms": round(t, 3), "line": f"$damaged slingshot line {n}"}
        )

    def _keep(self, line: str, t: float) -> None:
        """The original line, as a "slingshot" record."""
        self.records.append({"kind": "slingshot", "t_ms": round(t, 3), "line": line})

    def line(self, n: int, raw: str) -> None:
        out = self.out
        out.lines += 1
        if MARK not in raw:
            if raw.strip():
                out.skipped.append(n)
            return
        out.status_lines += 1
        st = self._read(n, raw)
        if st is None:
            return
        self._count(st)
        self._fault(st)
        changed = st.state != self.prev_state
        self.prev_state = st.state
        if changed:
            self._status(st)
        self._spin_line(st, changed)

    def _status(self, st: _Status) -> None:
        """A STAT frame for a change of state."""
        rotor_ms = 600000 // st.rpm10 if st.rpm10 else 0
        fields = ("state", _STATES[st.state], "spin", st.spin, "rotor_ms", rotor_ms)
        self.emit(proto.T_STATUS, (*fields, "rdir", st.rdir), st.t)

    def _read(self, n: int, raw: str) -> _Status | None:
        """A status line's fields, its original kept; None (and its damage) when it cannot
        be read."""
        line = raw.strip()
        m = _LINE.fullmatch(raw)
        if not m:
            self._keep(line, self.last_t)
            self.damage(n, f"status line that cannot be read: {_show(line)}", self.last_t)
            return None
        ts = m.group("ts")
        if ts is not None:
            try:
                t = _epoch_ms(ts)
            except ValueError:
                self._keep(line, self.last_t)
                self.damage(n, f"bad time stamp {_show(ts)}: line not read", self.last_t)
                return None
        else:
            t = self.last_t + self.period_ms
        self.last_t = t
        if self.t0 is None:
            self.t0 = t
        self._keep(line, t)
        state = int(m.group("state"))
        if state not in _STATES:
            self.damage(n, f"unknown state {state}: line not read", t)
            return None
        rdir = _DIRS.get(m.group("dir").lower())
        if rdir is None:
            self.damage(n, f"unknown rotor direction {_show(m.group('dir'))}: line not read", t)
            return None
        return _Status(
            n,
            t,
            state,
            int(m.group("spin")),
            m.group("win"),
            int(m.group("warn"), 16),
            int(m.group("rpm")),
            rdir,
        )

    def _count(self, st: _Status) -> None:
        """The spin counter only moves forward, by one at a time."""
        counter = self.counter
        if counter is not None and st.spin < counter:
            self.damage(st.n, f"spin counter went back from {counter} to {st.spin}", st.t)
        elif counter is not None and st.spin > counter + 1:
            self.damage(st.n, f"spin counter jumped from {counter} to {st.spin}", st.t)
        self.counter = st.spin

    def _fault(self, st: _Status) -> None:
        """A FAULT frame when warning 4 comes or goes."""
        if bool(st.warn & W_FAULT) != self.fault_on:
            self.fault_on = not self.fault_on
            self.emit(
                proto.T_FAULT,
                ("code", proto.F_ROTOR, "on", int(self.fault_on), "detail", "slingshot warning 4"),
                st.t,
            )

    def _spin_line(self, st: _Status, changed: bool) -> None:
        """Which spin a line belongs to is its own counter: never the spin before or after."""
        if st.state == 3:
            self._launch(st, changed)
        elif st.state in (4, 5) and st.spin != self.spin:
            self.damage(
                st.n, f"state-{st.state} line for spin {st.spin}, never seen launched", st.t
            )
        elif st.state == 4:
            self.warn_seen |= st.warn
            if self.outcome is not None:
                self.damage(st.n, f"no more bets after spin {self.spin}'s winning number", st.t)
            elif changed:
                self.emit(proto.T_RNVP, ("spin", self.spin, "why", "limit"), st.t)
        elif st.state == 5 and self.outcome is not None:
            if st.win.strip() != self.outcome.strip():  # " 4" and "4" are one number
                self.damage(
                    st.n,
                    f"winning number of spin {self.spin} changed from {_show(self.outcome)} to "
                    f"{_show(st.win)}: the first one stands",
                    st.t,
                )
        elif st.state == 5:
            self.warn_seen |= st.warn
            self.outcome = st.win
            self._outcome(st)

    def _launch(self, st: _Status, changed: bool) -> None:
        """A state-3 line: a launch, a relaunch, or the same launch going on."""
        n_spin = st.spin
        if n_spin == self.spin and self.outcome is not None:
            self.damage(st.n, f"spin {n_spin} launched again after its winning number", st.t)
        elif n_spin == self.spin and not changed:
            self.warn_seen |= st.warn
        else:
            if self.spin is not None and n_spin != self.spin and self.outcome is None:
                self.damage(st.n, f"spin {self.spin} ended without a winning number", st.t)
            if n_spin != self.spin:
                self.out.spins += 1
            self.spin, self.outcome, self.warn_seen = n_spin, None, st.warn
            same = bool(st.warn & W_SAME_DIR)
            bdir = st.rdir if same else {"cw": "ccw", "ccw": "cw"}[st.rdir]
            self.emit(proto.T_LAUNCH, ("spin", n_spin, "rdir", st.rdir, "bdir", bdir), st.t)

    def _outcome(self, st: _Status) -> None:
        """The spin's first state-5 line: its void, by the warnings seen, or its result."""
        spin, warn_seen = self.spin, self.warn_seen
        label = pocket(st.win, self.pockets)
        if warn_seen & W_SAME_DIR:
            self.emit(proto.T_VOID, ("spin", spin, "reason", proto.V_SAME_DIR), st.t)
        elif warn_seen & W_BALL_MISSING:
            self.emit(proto.T_VOID, ("spin", spin, "reason", proto.V_BALL_OUT), st.t)
        elif warn_seen & W_LAUNCH_FAILED:
            self.emit(proto.T_VOID, ("spin", spin, "reason", proto.V_FEW_REVS), st.t)
        elif label is None:
            self.damage(
                st.n,
                f"winning number {_show(st.win)} of spin {spin} is not a pocket of a "
                f"{self.pockets}-pocket wheel: no result",
                st.t,
            )
        else:
            self.emit(proto.T_RESULT, result_fields(spin, label), st.t)
