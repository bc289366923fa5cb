"""Replaying a trace: re-check its frames, settle its bets, rerun its sensors through the
firmware's own core and show where the outcome differs.

- Bets (`"kind": "bet"` records, `t_ms` on the host clock of the frames' `rx_ms`) belong to
  the first spin whose « rien ne va plus » frame was received after them; a bet placed
  between a spin's « rien ne va plus » and its outcome is refused (decree 1-4). A bet may
  name its `spin`; it is refused as well when placed after that spin's « rien ne va plus ».
  Bets on a voided spin stand for the next spin (the spin is played again). Settlement is
  the settlement engine's (`rmc.settle.settle`), imported only here.
- Sensor events run through `rmcfw.table.Table`, the very code of the board, with a store in
  a temporary folder (power cuts in the trace cut the table: state survives only through
  the store, as on the board); host actions recorded as truth (session open, last three,
  session close) are given to it as the host's commands. Its frames are then checked like
  any other, and compared with the frames recorded in the trace, and with the truth.
"""

from __future__ import annotations

import difflib
import tempfile
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rmc.checker import Checker, Report
from rmc.frames import decode
from rmc.trace import Trace, default_wheel
from rmcfw import channels, proto
from rmcfw.frames import Encoder, FrameError

# Frame types that follow from the sensors (the others answer the host, or tick with time).
# Not HOP: the pockets lit as the ball bounces are paced by the board's loop (at most one per
# rmcfw.spin.HOP_MS), and traces recorded before HOP hold none; the outcome it leads to is.
SENSOR_TYPES = frozenset(
    (
        proto.T_LAUNCH,
        proto.T_REV,
        proto.T_RNVP,
        proto.T_DROP,
        proto.T_RESULT,
        proto.T_VOID,
        proto.T_INCIDENT,
        proto.T_FAULT,
        proto.T_LID,
        # the session as the host's commands made it: opened, announced, closed
        proto.T_SESSION_OPEN,
        proto.T_LAST_THREE,
        proto.T_SESSION_CLOSE,
    )
)
# Fields that depend on the board's clock or on learning, not on what happened (the chef's
# id: the truth of a simulation may not name the one the board was given).
VOLATILE = frozenset(("drop_ms", "lead_ms", "why", "period_us", "detail", "chef"))
POLL_US = 1000  # the board's loop polls the table every millisecond
_BET_KEYS = ("kind", "t_ms", "spin")


@dataclass
class SpinTimes:
    spin: int
    rnvp_ms: float | None = None  # when its bets closed
    outcome_ms: float | None = None
    result: str | None = None
    void: str | None = None
    incident: int | None = None  # the relaunch of this spin's incident: bets closed since


@dataclass
class BetsOutcome:
    statements: list[dict[str, Any]] = field(default_factory=list)  # per spin settled
    refused: list[dict[str, Any]] = field(default_factory=list)
    unsettled: list[dict[str, Any]] = field(default_factory=list)  # no outcome after them
    staked: Decimal = Decimal(0)
    paid: Decimal = Decimal(0)


def spin_times(trace: Trace, key: bytes | None = None) -> list[SpinTimes]:
    """Per spin, when its « rien ne va plus » and its outcome were received (host ms)."""
    spins: dict[int, SpinTimes] = {}
    incidents: dict[int, float] = {}  # spin -> when its incident stopped the game
    seen: set[tuple[int, int]] = set()
    verifier = None
    if key:
        from rmc.frames import Verifier

        verifier = Verifier(key)
    for line, rx in trace.frame_lines():
        start = line.find(b"$")
        if start < 0 or rx is None:
            continue
        try:
            f = decode(line[start:], verifier)
            if f.key in seen or f.seq == 0:
                continue
            seen.add(f.key)
            if f.type == proto.T_INCIDENT and f.fields.get("step") == proto.INC_START:
                incidents.setdefault(f.int("spin"), rx)
                continue
            if f.type not in (proto.T_RNVP, proto.T_RESULT, proto.T_VOID):
                continue
            s = spins.setdefault(f.int("spin"), SpinTimes(f.int("spin")))
        except FrameError:
            continue
        if f.type == proto.T_RNVP and s.rnvp_ms is None:
            s.rnvp_ms = rx
        elif s.outcome_ms is None:
            s.outcome_ms = rx
            if f.type == proto.T_RESULT:
                s.result = f.fields.get("num")
            else:
                s.void = f.fields.get("reason")
    # Decree 1-4: an incident's « rien ne va plus » stops the game; the ball is launched
    # again as the next spin with the bets as they stood: none is taken in between.
    for n, t in incidents.items():
        stopped = spins[n].rnvp_ms if n in spins and spins[n].rnvp_ms is not None else t
        relaunch = spins.setdefault(n + 1, SpinTimes(n + 1))
        relaunch.incident = n
        if relaunch.rnvp_ms is None or stopped < relaunch.rnvp_ms:
            relaunch.rnvp_ms = stopped
    return sorted(spins.values(), key=lambda s: (s.outcome_ms or float("inf"), s.spin))


def settle_bets(trace: Trace, key: bytes | None = None, table_file: str | None = None):
    """Settle the trace's bets spin by spin. Raises ImportError without the engine."""
    from rmc.bets import positions_over
    from rmc.limits import Table
    from rmc.settle import settle

    table = Table.load(table_file)
    times = [s for s in spin_times(trace, key) if s.outcome_ms is not None]
    out = BetsOutcome()
    pending = _place_bets(trace, table, times, out)
    carried: list[tuple[int, Any]] = []
    for i, s in enumerate(times):
        bets = carried + pending.get(i, [])
        carried = []
        if not bets:
            continue
        if s.result is None:
            carried = bets  # void: the spin is played again, the bets stand
            continue
        # the table's maximum holds for a player's total on a position, not each line
        over = positions_over([b for _, b in bets], table, [n for n, _ in bets])
        for ns, why in over:
            out.refused.extend({"bet": bets[i][0], "spin": s.spin, "reason": why} for i in ns)
        dropped = {i for ns, _ in over for i in ns}
        bets = [b for i, b in enumerate(bets) if i not in dropped]
        if not bets:
            continue
        st = settle([b for _, b in bets], s.result)
        out.staked += st.staked
        out.paid += st.paid
        out.statements.append({"spin": s.spin, "bets": [n for n, _ in bets], **st.to_json()})
    for n, _ in carried:
        out.unsettled.append({"bet": n, "reason": "its spin was voided and not played again"})
    return out


def _place_bets(
    trace: Trace, table: Any, times: list[SpinTimes], out: BetsOutcome
) -> dict[int, list[tuple[int, Any]]]:
    """Each bet of the trace given to the spin it was placed for: {index in times: [(bet's
    number, bet)]}. A bet placed too late, or not understood, goes to out.refused; one with
    no spin outcome after it to out.unsettled."""
    from rmc.bets import parse_bet

    pending: dict[int, list[tuple[int, Any]]] = {}
    for n, rec in enumerate(trace.of_kind("bet")):
        raw = {k: v for k, v in rec.items() if k not in _BET_KEYS}
        t = rec.get("t_ms")
        where = {"bet": n, **raw}
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            out.refused.append({**where, "reason": "no t_ms: when it was placed is unknown"})
            continue
        try:
            bet = parse_bet(raw, table)
        except ValueError as e:
            out.refused.append({**where, "reason": str(e)})
            continue
        target = None
        for i, s in enumerate(times):
            if "spin" in rec and s.spin != rec["spin"]:
                continue
            if s.rnvp_ms is None or t < s.rnvp_ms:
                target = i
                break
            if t < s.outcome_ms or "spin" in rec:  # type: ignore[operator]
                why = "placed after « rien ne va plus »"
                if s.incident is not None:
                    why += f" (the incident of spin {s.incident}, before its relaunch)"
                out.refused.append({**where, "spin": s.spin, "reason": why})
                target = -1
                break
        if target is None:
            out.unsettled.append({**where, "reason": "no spin outcome after it in the trace"})
        elif target >= 0:
            pending.setdefault(target, []).append((n, bet))
    return pending


@dataclass
class CoreReplay:
    lines: list[bytes]
    report: Report
    vs_recorded: list[str]  # unified diff lines, empty when the same
    vs_truth: list[dict[str, Any]]  # spins whose outcome differs from the truth
    events: int = 0
    power_cuts: int = 0
    refused: list[dict[str, Any]] = field(default_factory=list)  # commands the core refused

    @property
    def agrees(self) -> bool:
        """The core took every command and gave the recorded frames and the truth."""
        return not (self.vs_recorded or self.vs_truth or self.refused)


def _wheel(header: dict[str, Any]) -> dict[str, Any]:
    """The trace's wheel definition (as the board has it in wheel.json: pockets and geometry),
    or the project's default wheel when the trace has none."""
    wheel = header.get("wheel")
    if isinstance(wheel, dict) and isinstance(wheel.get("pockets"), list):
        return {**wheel, "pockets": [str(x) for x in wheel["pockets"]]}
    return default_wheel()


def _norm(line: bytes) -> str | None:
    try:
        f = decode(line[line.find(b"$") :])
    except (FrameError, ValueError):
        return None
    if f.type not in SENSOR_TYPES or f.seq == 0:
        return None
    try:
        fields = f.fields
    except FrameError:
        return None
    return (
        f.type + " " + " ".join(f"{k}={v}" for k, v in sorted(fields.items()) if k not in VOLATILE)
    )


def _events(trace: Trace) -> list[tuple[int, int, dict[str, Any]]]:
    """(t_us, order, record) of the trace's power, sensor and truth records, in time order;
    at one instant, power first and truth last."""
    events: list[tuple[int, int, dict[str, Any]]] = []
    for r in trace.records:
        kind = r.get("kind")
        t = r.get("t_us")
        if kind in ("sensor", "power", "truth") and isinstance(t, int):
            order = {"power": 0, "sensor": 1, "truth": 2}[kind]
            events.append((t, order, r))
    events.sort(key=lambda e: (e[0], e[1]))
    return events


def _command(r: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
    """The host's command a truth record stands for (a session opened, the last three
    announced, a session closed), or None."""
    ev = r.get("event")
    if ev == "session_open":
        return (proto.C_OPEN, {"chef": str(r.get("chef", "chef"))})
    if ev == "last_three":
        return (proto.C_LAST_THREE, {})
    if ev == "session_close":
        cmd = (proto.C_CLOSE, {"chef": str(r.get("chef", "chef"))})
        if r.get("reason"):
            cmd[1]["reason"] = str(r["reason"])
        return cmd
    return None


class _Board:
    """The firmware core as a board runs it: a table over a store in a folder that outlives
    its power cuts, polled every millisecond, its frames kept."""

    def __init__(self, trace: Trace) -> None:
        self.wheel = _wheel(trace.header)
        self.table_id = str(trace.header.get("table") or "replay")[:16] or "replay"
        self.lines: list[bytes] = []
        self.boot = 0
        self.now = 0  # us: the clock of the frames' ms
        self.enc: Encoder | None = None
        self.folder = tempfile.mkdtemp(prefix="rmc-replay-")
        self.table: Any = None  # None: the power is off
        self.cuts = 0
        self.fed = 0
        self.refused: list[dict[str, Any]] = []  # commands the core refused

    def emit(self, ftype: str, fields: tuple) -> None:
        assert self.enc is not None
        self.lines.append(bytes(self.enc.frame(ftype, fields, ms=self.now // 1000)))

    def power_up(self, t: int) -> None:
        from rmcfw import store as fwstore
        from rmcfw import table as fwtable

        self.boot += 1
        self.enc = Encoder(self.table_id, self.boot)
        self.table = fwtable.Table(self.wheel, self.emit, fwstore.Store(self.folder))
        self.table.start(t, reset="power")

    def run(self, t_last: int, t: int, r: dict[str, Any]) -> None:
        """The time from t_last to t polled, then the record at t."""
        if self.table is not None:
            tick = t_last + POLL_US
            while tick < t:
                self.now = tick
                self.table.poll(tick)
                tick += POLL_US
        self.now = t
        if r["kind"] == "power":
            if r.get("event") == "cut":
                self.table = None
                self.cuts += 1
            elif r.get("event") == "restore" and self.table is None:
                self.power_up(t)
        elif self.table is None:
            pass  # the board is off: what the sensors do is not seen
        elif r["kind"] == "sensor":
            try:
                ch = channels.parse(str(r.get("ch")))
                self.table.feed(t, ch, int(r.get("v", 0)))
                self.fed += 1
            except ValueError:
                pass
        else:
            self.command(t, _command(r))

    def command(self, t: int, cmd: tuple[str, dict[str, str]] | None) -> None:
        if cmd is None:
            return
        try:
            ok, detail = self.table.handle(*cmd)
        except (KeyError, ValueError) as e:
            ok, detail = False, f"bad command: {e}"
        # A CLOSE after the table closed the session itself (the lid locked after the last
        # coup) finds it closed: the same end. Any other refusal means the session did not
        # go on the core as the recording says.
        if not ok and not (cmd[0] == proto.C_CLOSE and detail == "closed"):
            self.refused.append({"t_us": t, "command": cmd[0], "detail": detail})


def run_core(trace: Trace) -> CoreReplay | None:
    """Run the trace's sensor events through the firmware core; None when it has none."""
    if not trace.of_kind("sensor"):
        return None
    board = _Board(trace)
    events = _events(trace)
    t_last = events[0][0] if events else 0
    board.power_up(t_last)
    for t, _, r in events:
        board.run(t_last, t, r)
        t_last = t
    checker = Checker()
    checker.feed_many(board.lines)
    report = checker.report()
    diff = _diff_recorded(trace, board.lines)
    vs_truth = _diff_truth(trace, report)
    return CoreReplay(board.lines, report, diff, vs_truth, board.fed, board.cuts, board.refused)


def _diff_recorded(trace: Trace, lines: list[bytes]) -> list[str]:
    """The unified diff of the recorded frames and the core's (what follows from the
    sensors, without what depends on the clock); empty when the same, or none recorded."""
    recorded = [n for n in (_norm(x) for x, _ in trace.frame_lines()) if n is not None]
    replayed = [n for n in (_norm(x) for x in lines) if n is not None]
    if not recorded:
        return []
    return list(
        difflib.unified_diff(
            recorded, replayed, "recorded", "replayed (firmware core)", lineterm=""
        )
    )


def _diff_truth(trace: Trace, report: Report) -> list[dict[str, Any]]:
    """The spins whose outcome in the core's frames differs from the truth's."""
    truth: dict[int, str] = {}
    for r in trace.of_kind("truth"):
        if r.get("event") == "rest" and isinstance(r.get("spin"), int):
            # A voided spin's ball still comes to rest somewhere: its outcome stays the void.
            if not r.get("void"):
                truth[r["spin"]] = str(r.get("pocket"))
        elif r.get("event") == "void" and isinstance(r.get("spin"), int):
            truth[r["spin"]] = "void:" + str(r.get("reason"))
    got: dict[int, str] = {x["spin"]: x["result"] for x in report.results}
    got.update({x["spin"]: "void:" + x["reason"] for x in report.voids if x["spin"] not in got})
    return [
        {"spin": s, "truth": truth.get(s), "firmware": got.get(s)}
        for s in sorted(set(truth) | set(got))
        if truth.get(s) != got.get(s) and not (truth.get(s, "").startswith("void") and s not in got)
    ]
