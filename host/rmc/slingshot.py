"""Import of Cammegh SlingShot logs: status lines turned into a trace of our frames.

A SlingShot 2 wheel sends `*X;state;spin;win;warnings;rotor_rpm×10;direction` every 500 ms
(9600 8N1, no checksum). Logs often prefix each line with a time stamp, e.g.
`[2025-09-16 06:45:24.582] Receive >>> *X;3;1042;0;0;268;1`.

States: 1 before game, 2 place bets, 3 ball in rim, 4 no more bets, 5 winning number,
6 table closed. Warning flags (hex sum): 1 ball missing, 2 ball turning the rotor's way
(misspin), 4 sensor/motor/encoder fault, 8 launch failed.

Each change of state becomes the frame our firmware would have sent (LAUNCH, RNVP, RES or
VOID, STAT, FAULT), numbered as one boot, untagged, in a trace of source "slingshot"; the
original lines are kept as "slingshot" records. What a SlingShot does not report (ball
revolutions, drop) is left out, and the checker skips the rules that need it.

Assumptions, documented in docs/traces.md: direction "0" is clockwise and "1" anticlockwise
(as seen from above); a launch failure (8) is voided as fewer than 4 revolutions.
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

_LINE = re.compile(
    r"^\s*(?:\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\][^*]*)?"
    r"\*X;(?P<state>\d+);(?P<spin>\d+);(?P<win>[0-9A-Za-z]*);(?P<warn>[0-9A-Fa-f]*);"
    r"(?P<rpm>\d*);(?P<dir>[0-9A-Za-z]*)\s*$"
)

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


@dataclass
class Imported:
    records: list[dict[str, Any]]
    lines: int = 0
    status_lines: int = 0
    skipped: list[int] = field(default_factory=list)  # line numbers that were not status lines
    spins: int = 0


def _epoch_ms(ts: str) -> float:
    dt = datetime.fromisoformat(ts.replace(" ", "T")).replace(tzinfo=UTC)
    return dt.timestamp() * 1000


def import_log(text: str, table: str = "slingshot", period_ms: int = 500) -> Imported:
    """Convert a SlingShot log into trace records (header first)."""
    enc = Encoder(table, 1)
    header = make_header(table, "slingshot", firmware="cammegh-slingshot", wheel=None)
    header["wheel"] = "unknown"
    records: list[dict[str, Any]] = [header]
    out = Imported(records)
    t0: float | None = None
    prev_state: int | None = None
    spin: int | None = None
    rdir = "?"
    warn_seen = 0  # warnings seen during the current spin
    fault_on = False
    last_t = 0.0

    def emit(ftype: str, fields: tuple, t: float) -> None:
        ms = int(t - (t0 or 0))
        line = bytes(enc.frame(ftype, fields, ms=max(ms, 0))).rstrip(b"\n").decode("ascii")
        records.append({"kind": "frame", "rx_ms": round(t, 3), "line": line})

    for n, raw in enumerate(text.splitlines(), 1):
        out.lines += 1
        m = _LINE.match(raw)
        if not m:
            if raw.strip():
                out.skipped.append(n)
            continue
        out.status_lines += 1
        ts = m.group("ts")
        try:
            t = _epoch_ms(ts) if ts else last_t + period_ms
        except ValueError:
            t = last_t + period_ms
        last_t = t
        if t0 is None:
            t0 = t
        records.append({"kind": "slingshot", "t_ms": round(t, 3), "line": raw.strip()})
        state = int(m.group("state"))
        n_spin = int(m.group("spin"))
        warn = int(m.group("warn") or "0", 16)
        rpm10 = int(m.group("rpm") or "0")
        rdir = _DIRS.get(m.group("dir").lower(), "?")
        warn_seen |= warn
        if bool(warn & W_FAULT) != fault_on:
            fault_on = not fault_on
            emit(
                proto.T_FAULT,
                ("code", proto.F_ROTOR, "on", int(fault_on), "detail", "slingshot warning 4"),
                t,
            )
        if state == prev_state:
            continue
        prev_state = state
        rotor_ms = 600000 // rpm10 if rpm10 else 0
        emit(
            proto.T_STATUS,
            ("state", _STATES.get(state, "?"), "spin", n_spin, "rotor_ms", rotor_ms, "rdir", rdir),
            t,
        )
        if state == 3:
            spin = n_spin
            warn_seen = warn
            same = bool(warn & W_SAME_DIR)
            bdir = rdir if same else {"cw": "ccw", "ccw": "cw"}.get(rdir, "?")
            emit(proto.T_LAUNCH, ("spin", spin, "rdir", rdir, "bdir", bdir), t)
            out.spins += 1
        elif state == 4 and spin is not None:
            emit(proto.T_RNVP, ("spin", spin, "why", "limit"), t)
        elif state == 5 and spin is not None:
            win = m.group("win")
            if warn_seen & W_SAME_DIR:
                emit(proto.T_VOID, ("spin", spin, "reason", proto.V_SAME_DIR), t)
            elif warn_seen & W_BALL_MISSING:
                emit(proto.T_VOID, ("spin", spin, "reason", proto.V_BALL_OUT), t)
            elif warn_seen & W_LAUNCH_FAILED:
                emit(proto.T_VOID, ("spin", spin, "reason", proto.V_FEW_REVS), t)
            elif win in numbers.INDEX:
                emit(proto.T_RESULT, result_fields(spin, win), t)
            else:
                emit(proto.T_RESULT, ("spin", spin, "num", win), t)  # the checker flags it
            spin = None
    return out
