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
    from rmc.bets import parse_bet, positions_over
    from rmc.limits import Table
    from rmc.settle import settle

    table = Table.load(table_file)
    times = [s for s in spin_times(trace, key) if s.outcome_ms is not None]
    out = BetsOutcome()
    pending: dict[int, list[tuple[int, Any]]] = {}  # index in times -> bets
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


def run_core(trace: Trace) -> CoreReplay | None:
    """Run the trace's sensor events through the firmware core; None when it has none."""
    sensors = trace.of_kind("sensor")
    if not sensors:
        return None
    from rmcfw import store as fwstore
    from rmcfw import table as fwtable

    wheel = _wheel(trace.header)
    lines: list[bytes] = []
    boot = [0]
    now = [0]
    enc: list[Encoder] = []

    def emit(ftype: str, fields: tuple) -> None:
        lines.append(bytes(enc[0].frame(ftype, fields, ms=now[0] // 1000)))

    folder = tempfile.mkdtemp(prefix="rmc-replay-")
    events: list[tuple[int, int, dict[str, Any]]] = []
    for r in trace.records:
        kind = r.get("kind")
        t = r.get("t_us")
        if kind in ("sensor", "power", "truth") and isinstance(t, int):
            order = {"power": 0, "sensor": 1, "truth": 2}[kind]
            events.append((t, order, r))
    events.sort(key=lambda e: (e[0], e[1]))
    table = None
    cuts = 0
    fed = 0
    refused: list[dict[str, Any]] = []

    def power_up(t: int) -> Any:
        boot[0] += 1
        enc[:] = [Encoder(str(trace.header.get("table") or "replay")[:16] or "replay", boot[0])]
        tb = fwtable.Table(wheel, emit, fwstore.Store(folder))
        tb.start(t, reset="power")
        return tb

    t_last = events[0][0] if events else 0
    table = power_up(t_last)
    for t, _, r in events:
        if table is not None:
            tick = t_last + POLL_US
            while tick < t:
                now[0] = tick
                table.poll(tick)
                tick += POLL_US
        t_last = t
        now[0] = t
        kind = r["kind"]
        if kind == "power":
            if r.get("event") == "cut":
                table = None
                cuts += 1
            elif r.get("event") == "restore" and table is None:
                table = power_up(t)
            continue
        if table is None:
            continue  # the board is off: what the sensors do is not seen
        if kind == "sensor":
            try:
                ch = channels.parse(str(r.get("ch")))
                table.feed(t, ch, int(r.get("v", 0)))
                fed += 1
            except ValueError:
                continue
        else:
            ev = r.get("event")
            cmd: tuple[str, dict[str, str]] | None = None
            if ev == "session_open":
                cmd = (proto.C_OPEN, {"chef": str(r.get("chef", "chef"))})
            elif ev == "last_three":
                cmd = (proto.C_LAST_THREE, {})
            elif ev == "session_close":
                cmd = (proto.C_CLOSE, {"chef": str(r.get("chef", "chef"))})
                if r.get("reason"):
                    cmd[1]["reason"] = str(r["reason"])
            if cmd is not None:
                try:
                    ok, detail = table.handle(*cmd)
                except (KeyError, ValueError) as e:
                    ok, detail = False, f"bad command: {e}"
                # A CLOSE after the table closed the session itself (the lid locked after
                # the last coup) finds it closed: the same end. Any other refusal means the
                # session did not go on the core as the recording says.
                if not ok and not (cmd[0] == proto.C_CLOSE and detail == "closed"):
                    refused.append({"t_us": t, "command": cmd[0], "detail": detail})
    checker = Checker()
    checker.feed_many(lines)
    report = checker.report()
    recorded = [n for n in (_norm(x) for x, _ in trace.frame_lines()) if n is not None]
    replayed = [n for n in (_norm(x) for x in lines) if n is not None]
    diff: list[str] = []
    if recorded:
        diff = list(
            difflib.unified_diff(
                recorded, replayed, "recorded", "replayed (firmware core)", lineterm=""
            )
        )
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
    vs_truth = [
        {"spin": s, "truth": truth.get(s), "firmware": got.get(s)}
        for s in sorted(set(truth) | set(got))
        if truth.get(s) != got.get(s) and not (truth.get(s, "").startswith("void") and s not in got)
    ]
    return CoreReplay(lines, report, diff, vs_truth, fed, cuts, refused)
