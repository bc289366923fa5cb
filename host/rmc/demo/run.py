"""`rmc demo`'s session, live: the virtual board, the firmware, the frame line, the tapis.

1. Simulate the session (rmc.sim), compile the firmware with mpy-cross and copy it onto a
   virtual board with the real mpremote, give the wheel's sensors their idle levels and power
   the board up: main.py runs the table.
2. Read the frame line through the host's live link (rmc.link.Link, inside the rig's
   FrameReader thread): every line goes to the trace (TraceWriter) and its raw bytes to the
   capture; gaps are asked again (RESEND).
3. Feed the session segment by segment (session.plan), sending OPEN / LAST3 / CLOSE in
   between. When the table opens a betting window (STAT state=bets), the players' bets are
   placed at once and recorded with their time; « rien ne va plus » closes the window.
4. Settle each spin on the result the FIRMWARE sent (RES), never the simulator's; a voided
   spin's bets stay on the tapis for the relaunch.
"""

from __future__ import annotations

import bisect
import queue
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rmc.bets import Bet, bet_to_json
from rmc.demo import bets as demobets
from rmc.demo import deploy as fwdeploy
from rmc.demo.session import Segment, initial_records, plan, simulate
from rmc.frames import Frame, FrameError, decode
from rmc.limits import Table
from rmc.link import Link
from rmc.rig.compare import DEFAULT_LEAD_S
from rmc.rig.link import FrameReader, Received, open_port
from rmc.rig.virtual import VirtualRig
from rmc.settle import Book, Statement
from rmc.sim import Session
from rmc.trace import TraceWriter, make_header
from rmc.vboard import VirtualBoard
from rmcfw import proto

TAIL_US = 4_000_000  # virtual time played after the last edge: the last frames come out
WALL_LIMIT_S = 600.0  # the board's clock must move on within this (it is dead otherwise)


class DemoError(RuntimeError):
    """The demo could not run to its end (board dead, no frames...)."""


@dataclass
class DemoConfig:
    spins: int = 30
    seed: int = 2019
    out: Path = Path("build/demo")
    speed: float = 0.0  # the virtual board's speed (0: as fast as the firmware runs)
    scenarios: tuple[str, ...] | None = None  # None: session.default_scenarios(spins)
    rnvp_lead_s: float = DEFAULT_LEAD_S  # the truth's asked lead: the firmware's default
    table_file: str | None = None  # limits (default host/rmc/data/table.toml)

    def __post_init__(self) -> None:
        if self.speed < 0:
            raise ValueError(f"speed must be >= 0, not {self.speed}")
        self.out = Path(self.out)


@dataclass
class BetRound:
    """The bets placed in one betting window."""

    number: int
    t_ms: float  # host clock, as the frames' rx_ms
    bets: list[Bet]


@dataclass
class SpinPlay:
    """One launch as the firmware reported it, with the bets that rode on it."""

    spin: int  # the firmware's spin number
    launch_no: int  # 1-based order of launches (the simulator's spin number)
    rdir: str = ""
    bdir: str = ""
    bets: list[Bet] = field(default_factory=list)
    carried: int = 0  # of which bets stood from a voided spin
    rnvp_why: str | None = None
    rnvp_lead_ms: int | None = None
    drop_revs: int | None = None
    result: str | None = None
    void: str | None = None
    incident: list[str] = field(default_factory=list)
    statement: Statement | None = None
    truth: str | None = None  # the simulator's outcome ("result:17" / "void:object")


@dataclass
class DemoRun:
    """What the live run leaves for the report."""

    config: DemoConfig
    session: Session
    spins: list[SpinPlay] = field(default_factory=list)
    rounds: list[BetRound] = field(default_factory=list)
    unsettled: list[Bet] = field(default_factory=list)  # on the tapis at the end
    frames: list[Frame] = field(default_factory=list)  # valid frames, arrival order
    timed: list[tuple[float, bytes]] = field(default_factory=list)  # (trace ms, line)
    log: list[str] = field(default_factory=list)  # session events, in French where said
    faults: list[dict[str, str]] = field(default_factory=list)
    board_events: list[dict[str, Any]] = field(default_factory=list)  # crashes, IRQ errors
    link_stats: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per phase
    virtual_s: float = 0.0  # virtual seconds the board ran
    mpy_bytes: int = 0
    listing: str = ""  # the board's files after the deploy (mpremote ls)

    @property
    def trace_path(self) -> Path:
        return self.config.out / "trace.jsonl"

    @property
    def capture_path(self) -> Path:
        return self.config.out / "capture.log"


class _CapturePort:
    """The frame port, every byte read also written to the raw capture."""

    def __init__(self, port: Any, capture: IO[bytes]) -> None:
        self.port = port
        self.capture = capture

    def read(self, n: int = 1) -> bytes:
        data = self.port.read(n)
        if data:
            self.capture.write(data)
            self.capture.flush()
        return data

    @property
    def in_waiting(self) -> int:
        return self.port.in_waiting

    def write(self, data: bytes) -> int:
        return self.port.write(data)

    def close(self) -> None:
        self.port.close()


INCIDENT_STEPS = {
    "start": "objet dans le cylindre, « rien ne va plus », le coup est annulé",
    "ball_back": "la bille est remise dans la case du numéro précédent",
    "relaunch": "la bille est relancée (les mises restent sur le tapis)",
    "ignored": "signalé sans bille dans la galerie : rien à arrêter",
}


class _Log:
    """The run's log, each line also shown as it comes."""

    def __init__(self, lines: list[str], show: Callable[[str], None]) -> None:
        self.lines = lines
        self.show = show

    def append(self, text: str) -> None:
        self.lines.append(text)
        self.show(text)


class HostTable:
    """The host's side of the live session: bets, spins, settlement (main thread)."""

    def __init__(
        self,
        run: DemoRun,
        on_spin: Callable[[SpinPlay], None],
        on_event: Callable[[str], None],
    ) -> None:
        self.run = run
        self.on_spin = on_spin
        self.on_event = on_event
        self.window: list[Bet] = []  # placed in the open window, not yet on a launch
        self.carried: list[Bet] = []  # from a voided spin
        self.current: SpinPlay | None = None
        self.truth = truth_outcomes(run.session)

    def bets(self, rnd: BetRound) -> None:
        self.run.rounds.append(rnd)
        self.window.extend(rnd.bets)

    def frame(self, f: Frame) -> None:
        self.run.frames.append(f)
        t = f.type
        if t == proto.T_REV or t == proto.T_STATUS or f.seq == proto.SEQ_NONE:
            return
        fl = f.fields
        log = _Log(self.run.log, self.on_event)
        if t == proto.T_LAUNCH:
            n = int(fl["spin"])
            sp = SpinPlay(n, len(self.run.spins) + 1, fl.get("rdir", ""), fl.get("bdir", ""))
            sp.bets = self.carried + self.window
            sp.carried = len(self.carried)
            sp.truth = self.truth.get(sp.launch_no)
            self.carried, self.window = [], []
            self.run.spins.append(sp)
            self.current = sp
            return
        sp = self.current
        if t == proto.T_RNVP and sp is not None and sp.rnvp_why is None:
            sp.rnvp_why = fl.get("why")
            sp.rnvp_lead_ms = int(fl.get("lead_ms", "0") or 0)
        elif t == proto.T_DROP and sp is not None:
            sp.drop_revs = int(fl.get("revs", "0"))
        elif t == proto.T_INCIDENT and fl.get("step") == proto.INC_IGNORED:
            # a press between spins: on record, of no spin
            log.append(f"Incident ({fl.get('state', '?')}): {INCIDENT_STEPS[proto.INC_IGNORED]}")
        elif t == proto.T_INCIDENT and sp is not None:
            step = fl.get("step", "?")
            sp.incident.append(step)
            log.append(f"Incident, coup {fl.get('spin')}: {INCIDENT_STEPS.get(step, step)}")
        elif t == proto.T_RESULT and sp is not None and int(fl["spin"]) == sp.spin:
            sp.result = fl["num"]
            if sp.bets:
                sp.statement = Book(sp.bets).settle(sp.result)
            self.on_spin(sp)
        elif t == proto.T_VOID and sp is not None and int(fl["spin"]) == sp.spin:
            sp.void = fl.get("reason", "?")
            self.carried = list(sp.bets)  # the spin is played again: the bets stand
            self.on_spin(sp)
        elif t == proto.T_FAULT:
            self.run.faults.append(dict(fl))
            log.append(f"FAULT {fl.get('code')} on={fl.get('on')} {fl.get('detail', '')}".strip())
        elif t == proto.T_BOOT:
            log.append(f"BOOT reset={fl.get('reset')} faults={fl.get('faults') or '-'}")
        elif t == proto.T_SESSION_OPEN:
            log.append(f"Ouverture de la séance {fl.get('session')} (chef {fl.get('chef')})")
        elif t == proto.T_SESSION_CLOSE:
            log.append(f"Clôture de la séance {fl.get('session')}: {fl.get('spins')} coups")
        elif t == proto.T_LAST_THREE:
            left = fl.get("left")
            if left == "3":
                log.append(f"Annonce des trois derniers coups (LAST3 last={fl.get('last')})")
            else:
                log.append(f"Trois derniers coups: reste {left} (LAST3 last={fl.get('last')})")
        elif t == proto.T_LID:
            log.append("Cylindre " + ("fermé à clé" if fl.get("locked") == "1" else "ouvert"))
        elif t == proto.T_TAMPER:
            log.append(f"TAMP {fl.get('what')} {fl.get('n', '')}".strip())

    def finish(self) -> None:
        self.run.unsettled = self.carried + self.window


def truth_outcomes(session: Session) -> dict[int, str]:
    """spin -> "result:N" or "void:REASON", from the simulator's truth."""
    out: dict[int, str] = {}
    for r in session.truth:
        n = r.get("spin")
        if r.get("event") == "void" and n not in out:
            out[n] = f"void:{r['reason']}"
        elif r.get("event") == "rest" and not r.get("void") and n not in out:
            out[n] = f"result:{r['pocket']}"
    return out


def play(
    cfg: DemoConfig,
    on_spin: Callable[[SpinPlay], None] = lambda sp: None,
    on_phase: Callable[[str], None] = lambda s: None,
    on_event: Callable[[str], None] = lambda s: None,
) -> DemoRun:
    """Run the whole session; returns what happened (files written under cfg.out)."""
    t_start = time.perf_counter()
    session = simulate(cfg.seed, cfg.spins, cfg.scenarios, cfg.rnvp_lead_s)
    limits = Table.load(cfg.table_file)
    cfg.out.mkdir(parents=True, exist_ok=True)
    run = DemoRun(cfg, session)
    host = HostTable(run, on_spin, on_event)
    on_phase("mpy-cross")
    t = time.perf_counter()
    fw = fwdeploy.build(cfg.out / "firmware" / "mpy")
    run.mpy_bytes = fwdeploy.mpy_bytes(fw)
    run.timings["build"] = time.perf_counter() - t
    with VirtualBoard(speed=cfg.speed) as vb:
        on_phase("mpremote cp")
        t = time.perf_counter()
        run.listing = fwdeploy.deploy(vb, fw)
        run.timings["deploy"] = time.perf_counter() - t
        _power_cut(vb, session)
        reader, received, bases = _record_session(vb, run, host, limits, on_phase)
        run.virtual_s = float(vb.status()["t_us"]) / 1e6
        run.timed = _trace_times(vb, received, bases, launch_edges(session))
        run.board_events = [
            e for e in vb.events if e.get("event") in ("irq_error", "boot_error", "crash")
        ]
    run.link_stats = {
        "commands": reader.link.stats.commands,
        "resends_asked": reader.link.stats.resends_asked,
        "refused": reader.link.stats.refused,
        "lost": reader.link.stats.lost,
        "reader_error": reader.error,
    }
    run.timings["total"] = time.perf_counter() - t_start
    return run


def _power_cut(vb: VirtualBoard, session: Session) -> None:
    """Power-up as on a table, first half: the sensors at rest (lid locked), the supply
    off."""
    vb.feed(initial_records(session))
    vb.power_cut()
    # A restore sent before the board has taken the cut is lost: wait for "off".
    if vb.wait_event("power", 10, where=lambda e: e.get("state") == "off") is None:
        raise DemoError("the virtual board did not power off: " + vb.stderr_text())


def _record_session(
    vb: VirtualBoard,
    run: DemoRun,
    host: HostTable,
    limits: Table,
    on_phase: Callable[[str], None],
) -> tuple[FrameReader, list[Received], list[tuple[int, float]]]:
    """Power the board on and play the session, every line read going to the trace and
    its bytes to the capture, then the simulator's truth after them: (the reader, the
    lines it received, each segment's (trace t0_us, virtual base_us))."""
    cfg, session = run.config, run.session
    with (
        open(run.capture_path, "wb") as capture,
        TraceWriter(run.trace_path, _trace_header(cfg, vb, session)) as writer,
    ):
        port = _CapturePort(open_port(vb.uart_url, timeout=0.02), capture)
        reader = FrameReader(port)
        inbox: queue.Queue = queue.Queue()
        wire(reader.link, writer, inbox, cfg.seed, limits)
        reader.start()
        try:
            vb.power_restore()
            if vb.wait_event("power", 10, where=lambda e: e.get("state") == "on") is None:
                raise DemoError("the virtual board did not power on: " + vb.stderr_text())
            on_phase("table")
            t = time.perf_counter()
            bases = _feed_session(vb, reader, plan(session), inbox, host)
            run.timings["session"] = time.perf_counter() - t
        finally:
            received = reader.stop()
            port.close()
        drain(inbox, host)
        host.finish()
        for r in session.truth:  # the ground truth, on the simulator's clock (t_us)
            writer.write(r)
    return reader, received, bases


def _trace_header(cfg: DemoConfig, vb: VirtualBoard, session: Session) -> dict[str, Any]:
    return make_header(
        "unknown",
        "record",
        url=vb.uart_url,
        seed=cfg.seed,
        scenario=list(session.scenarios.items()),
        spins=cfg.spins,
        speed=cfg.speed,
        markers=demobets.markers(),
        note="rmc demo: virtual board, firmware deployed with mpremote",
    )


def wire(link: Link, writer: TraceWriter, inbox: queue.Queue, seed: int, limits: Table) -> None:
    """Hook the trace writer and the players' bets into the host's live Link (the reader's
    thread): frames, and the bets as rounds, go to `inbox` in the order they happened."""
    link.writer = writer
    state = {"open": False, "rounds": 0}

    def on_frame(f: Frame) -> None:
        # Runs in the reader thread as each frame arrives: the bets of a window are placed
        # and recorded before any later frame (its « rien ne va plus ») is even read.
        if f.type == proto.T_STATUS and f.seq and f.fields.get("state") == proto.S_BETS:
            if not state["open"]:
                state["open"] = True
                raw = demobets.round_bets(seed, state["rounds"], limits)
                parsed = demobets.parse_round(raw, limits)
                now = time.time() * 1000
                for b in parsed:
                    writer.write({"kind": "bet", "t_ms": round(now, 3), **bet_to_json(b)})
                inbox.put(BetRound(state["rounds"], now, parsed))
                state["rounds"] += 1
        elif f.type == proto.T_LAUNCH:
            state["open"] = False
        inbox.put(f)

    link.on_frame = on_frame


def drain(inbox: queue.Queue, host: HostTable) -> None:
    while True:
        try:
            item = inbox.get_nowait()
        except queue.Empty:
            return
        if isinstance(item, BetRound):
            host.bets(item)
        else:
            host.frame(item)


def _wait_clock(
    vb: VirtualBoard, until_us: float, inbox: queue.Queue, host: HostTable, reader: FrameReader
) -> None:
    """Serve the table until the board's virtual clock reaches `until_us`."""
    last, moved = -1.0, time.perf_counter()
    while True:
        drain(inbox, host)
        if reader.error:
            raise DemoError(reader.error)
        now = float(vb.status()["t_us"])
        if now >= until_us:
            return
        if now != last:
            last, moved = now, time.perf_counter()
        elif time.perf_counter() - moved > WALL_LIMIT_S:
            raise DemoError(f"the virtual board's clock stopped at {now / 1e6:.3f} s")
        time.sleep(0.02)


def _feed_session(
    vb: VirtualBoard,
    reader: FrameReader,
    segments: list[Segment],
    inbox: queue.Queue,
    host: HostTable,
) -> list[tuple[int, float]]:
    """Play every segment; returns (trace t0_us, virtual base_us) per segment."""
    deadline = time.perf_counter() + 30
    while reader.link.checker.table is None:  # the BOOT frame names the table
        if time.perf_counter() > deadline:
            raise DemoError("no frame from the board 30 s after power-up: " + vb.stderr_text())
        time.sleep(0.02)
    bases: list[tuple[int, float]] = []
    end = 0.0
    for seg in segments:
        if seg.command is not None:
            _wait_clock(vb, end, inbox, host, reader)
            _command(reader, seg.command.cmd, seg.command.fields, inbox, host)
        n_ev = len(vb.events)
        vb.feed(seg.records)
        base = next((e["base_us"] for e in vb.events[n_ev:] if e.get("event") == "sensors"), None)
        if base is None:
            raise DemoError("the virtual board did not report where it placed the edges")
        bases.append((seg.t0_us, float(base)))
        end = base + seg.span_us
    _wait_clock(vb, end + TAIL_US, inbox, host, reader)
    deadline = time.perf_counter() + 5
    while not reader.link.complete() and time.perf_counter() < deadline:
        time.sleep(0.05)  # frames still asked again
    return bases


def _command(
    reader: FrameReader, cmd: str, fields: tuple, inbox: queue.Queue, host: HostTable
) -> None:
    """Send a session command and wait for the firmware's answer (ACK of that command)."""
    n0 = len(host.run.frames)
    line = reader.send(cmd, fields)
    cseq = line.split(b",")[3].decode()
    deadline = time.perf_counter() + 10
    while time.perf_counter() < deadline:
        drain(inbox, host)
        for f in host.run.frames[n0:]:
            if f.type == proto.T_ACK and f.fields.get(proto.K_CSEQ) == cseq:
                detail = f.fields.get("detail", "?")
                if f.fields.get(proto.K_OK) != "1":
                    if cmd == proto.C_CLOSE and detail == "closed":
                        detail = "séance déjà close au verrouillage du cylindre"
                    _Log(host.run.log, host.on_event).append(f"{cmd}: la table répond {detail}")
                return
        time.sleep(0.01)
    raise DemoError(f"no answer from the table to {cmd} within 10 s")


def _trace_times(
    vb: VirtualBoard,
    received: list[Received],
    bases: list[tuple[int, float]],
    launch_edges: list[int],
) -> list[tuple[float, bytes]]:
    """Each line's instant on the simulated session's clock (ms from its t = 0).

    Two clocks: the board's (a frame's virtual instant is its boot's instant plus its `ms`
    stamp, the rig's own mapping `VirtualRig.virtual_times`) and the session's (the
    simulator's truth, t_us). The segment fed last before a frame maps the one onto the
    other by the `base_us` the board reports for the feed (frames during an idle wait take
    the next command's instant). That base is off by however far the feed's edges played
    from it, an amount constant within a feed but not from feed to feed nor run to run, so
    each segment is set right by the events both clocks see: the launches (_launch_shifts).
    Segments without a launch keep their reported base."""
    virtual = VirtualRig(vb).virtual_times(received, 0.0, 0.0, 0.0)
    placed = _placed(virtual, bases)
    shift = _launch_shifts(placed, launch_edges)
    out = []
    for k, t_us, line in placed:
        t_us -= shift.get(k, 0.0)
        if 0 <= k < len(bases) - 1:
            t_us = min(t_us, bases[k + 1][0])
        out.append((t_us / 1000, line))
    return out


def _placed(
    virtual: list[tuple[float, bytes]], bases: list[tuple[int, float]]
) -> list[tuple[int, float, bytes]]:
    """(segment, session µs, line) of each (virtual ms, line): the segment is the last fed
    before it (-1: before the first), its base taken as the session's t0 of the segment."""
    placed: list[tuple[int, float, bytes]] = []
    for v_ms, line in virtual:
        v_us = v_ms * 1000
        k, t_us = -1, v_us - bases[0][1] if bases else v_us
        for i, (t0, base) in enumerate(bases):
            if v_us >= base:
                k, t_us = i, t0 + (v_us - base)
        placed.append((k, t_us, line))
    return placed


def _launch_shifts(
    placed: list[tuple[int, float, bytes]], launch_edges: list[int]
) -> dict[int, float]:
    """Per segment, how far (µs) its frames stand from the session's clock, fitted on the
    launches: the firmware sends LAUNCH at the ball's first pass after the release, the
    instant `launch_edges` gives from the simulator's edges, and both clocks see the
    launches in the same order, so the n-th LAUNCH frame sent (in board time) is the n-th
    launch of the session. A segment's shift is the median of its LAUNCH frames' distances
    to their own launches; a LAUNCH frame beyond the session's launches is no launch of it
    and is not counted. No bound, no constant: the pairing is by identity, not nearness."""
    # a frame received twice (asked again) is one launch: same frame, same board time
    seen = {(t_us, line.lstrip(b"~")): k for k, t_us, line in placed if _is_launch(line)}
    launches = sorted((t_us, k) for (t_us, _), k in seen.items())
    offsets: dict[int, list[float]] = {}
    for (t_us, k), edge in zip(launches, sorted(launch_edges), strict=False):
        offsets.setdefault(k, []).append(t_us - edge)
    return {k: statistics.median(v) for k, v in offsets.items()}


def _is_launch(line: bytes) -> bool:
    """A LAUNCH frame that reads (a damaged line has no board time to place it by)."""
    if b",LAUNCH," not in line:
        return False
    try:
        return decode(line).type == proto.T_LAUNCH
    except FrameError:
        return False


def launch_edges(session: Session) -> list[int]:
    """The ball's first pass (a ball sensor edge) after each launch and before the next,
    session µs; a launch the ball never passed the sensor after has none (nor a LAUNCH)."""
    edges = [
        r["t_us"]
        for r in session.to_trace_records()
        if r.get("kind") == "sensor" and r["ch"] in ("ball_a", "ball_b") and r["v"] == 1
    ]
    starts = sorted(r["t_us"] for r in session.truth if r.get("event") == "launch")
    out = []
    for start, following in zip(starts, [*starts[1:], None], strict=True):
        i = bisect.bisect_left(edges, start)
        if i < len(edges) and (following is None or edges[i] < following):
            out.append(edges[i])
    return out
