"""A whole rig run: play a trace into the board, record its frames, compare with the truth.

    rig = Rig(routes, levels, pulsegen=gen)        # backends opened by the caller
    result = rig.run(trace, frame_port, record="build/rig/run.jsonl")
    result.comparison.ok

Lines on the pulse generator (when one is given) are played by it from its own clock; the
others by the player. Frames are read throughout and kept with their arrival times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmc.rig import edges as edgemod
from rmc.rig.backends import Output, RigError
from rmc.rig.compare import Comparison, Tolerances, compare
from rmc.rig.link import FrameReader, commands_from_truth
from rmc.rig.pins import Levels
from rmc.rig.player import Clock, Player, PlayStats
from rmc.rig.pulsegen import PulseGen, Stat
from rmc.trace import Trace, TraceWriter, make_header

GO_LEAD_US = 200_000  # the generator starts this long after GO: room to start the player


@dataclass
class RunResult:
    play: PlayStats
    comparison: Comparison
    lines: list[tuple[float, bytes]]  # (rx_ms from trace t = 0, frame line)
    pulsegen: Stat | None = None
    sync_uncertainty_ms: float = 0.0  # generator start vs host clock, half a round trip
    notes: list[str] = field(default_factory=list)
    commands: list[tuple[float, bytes]] = field(default_factory=list)  # (tx_ms, line) sent


@dataclass
class Rig:
    routes: dict[str, Output]  # line -> backend, for the lines the host plays
    levels: Levels
    pulsegen: PulseGen | None = None
    clock: Clock = field(default_factory=Clock)
    tolerances: Tolerances = field(default_factory=Tolerances)
    tail_s: float = 3.0  # keep reading frames this long after the last edge
    chef: str = "rig"  # the chef de table's id in OPEN and CLOSE
    table: str | None = None  # the board's table id (to address commands before any frame)

    def run(
        self,
        trace: Trace,
        frame_port: Any,
        record: Path | str | None = None,
        start_us: int = 0,
        end_us: int | None = None,
        key: bytes | None = None,
    ) -> RunResult:
        all_edges = edgemod.from_trace(trace)
        initial = edgemod.state_at(all_edges, start_us)
        edges = edgemod.window(all_edges, start_us, end_us)
        gen_lines: frozenset[str] = frozenset()
        if self.pulsegen is not None:
            info = self.pulsegen.info or self.pulsegen.hello()
            gen_lines = frozenset(info.lines)
        gen_edges, host_edges = edgemod.split(edges, gen_lines)
        player = Player(self.routes, self.levels, self.clock)
        player.check(host_edges)
        player.set_initial({k: v for k, v in initial.items() if k in self.routes})
        reader = FrameReader(frame_port, key=key, table=self.table).start()
        reader.hello()
        actions = self._command_actions(trace, reader, start_us, end_us)
        gen_stat: Stat | None = None
        sync = 0.0
        try:
            if self.pulsegen is not None:
                t0, sync, idle = self._start_pulsegen(self.pulsegen, gen_edges, initial)
            else:
                t0, idle = self.clock.now() + 0.05, None
            stats = player.play(host_edges, t0=t0, idle=idle, actions=actions)
            end_t = t0 + (edges[-1].t_us / 1e6 if edges else 0.0)
            gen_stat = self._wait_end(end_t)
        finally:
            received = reader.stop()
        lines = [(r.rx_ms(t0), r.line) for r in received]
        cmp = compare(_shift(trace.records, start_us, end_us), lines, self.tolerances, key=key)
        result = RunResult(stats, cmp, lines, gen_stat, sync)
        result.commands = [((t - t0) * 1000, line) for t, line in reader.sent]
        if reader.error:
            result.notes.append(reader.error)
        if gen_stat is not None and gen_stat.state != "done":
            result.notes.append(f"pulse generator ended {gen_stat.state}")
            cmp.problems.append(f"pulse generator ended {gen_stat.state}, not done")
        if record is not None:
            write_record(record, trace, lines, result, start_us, end_us)
        return result

    def _command_actions(
        self, trace: Trace, reader: FrameReader, start_us: int, end_us: int | None
    ) -> list[tuple[int, Any]]:
        """The chef's commands the truth holds in the window, as the player's actions: (µs
        from the window's start, send it)."""
        commands = [
            c
            for c in commands_from_truth(trace.records, self.chef)
            if c.t_us >= start_us and (end_us is None or c.t_us < end_us)
        ]
        return [(c.t_us - start_us, lambda c=c: reader.send(c.cmd, c.fields)) for c in commands]

    def _start_pulsegen(
        self, gen: PulseGen, gen_edges: list[edgemod.Edge], initial: dict[str, int]
    ) -> tuple[float, float, Any]:
        """Load the generator's edges at their electrical levels and start it: (its start on
        the host clock, the sync uncertainty in ms, the player's idle hook that tops the
        generator up)."""
        lv0 = 0
        for i, ln in enumerate(gen.info.lines if gen.info else ()):
            lv0 |= self.levels.level(ln, initial.get(ln, 0)) << i
        electrical = [
            edgemod.Edge(e.t_us, e.line, self.levels.level(e.line, e.v)) for e in gen_edges
        ]
        gen.load(electrical, lv0)
        rtt0 = len(gen.round_trips)
        t0 = gen.go(GO_LEAD_US)
        sync = gen.round_trips[rtt0] * 500 if len(gen.round_trips) > rtt0 else 0.0
        last_pump = [0.0]

        def idle(left: float) -> None:
            # Top the generator up, at most every 20 ms, when there is time for it.
            now = time.perf_counter()
            if left > 0.005 and now - last_pump[0] > 0.02 and gen.pending:
                gen.pump()
                last_pump[0] = now

        return t0, sync, idle

    def _wait_end(self, end_t: float) -> Stat | None:
        """Until the last edge has played (the generator's schedule ends with it: fed until
        then), then the tail; the generator's last status."""
        gen_stat = None
        if self.pulsegen is not None:
            left = max(0.0, end_t - time.perf_counter())
            gen_stat = self.pulsegen.finish(timeout=left + 2.0)
        while time.perf_counter() < end_t:
            time.sleep(0.01)
        time.sleep(self.tail_s)
        return gen_stat


def _shift(records: list[dict[str, Any]], start_us: int, end_us: int | None) -> list[dict]:
    out = []
    for r in records:
        t = r.get("t_us")
        if isinstance(t, int):
            if t < start_us or (end_us is not None and t >= end_us):
                continue
            r = {**r, "t_us": t - start_us}
        out.append(r)
    return out


def write_record(
    path: Path | str,
    trace: Trace,
    lines: list[tuple[float, bytes]],
    result: RunResult,
    start_us: int = 0,
    end_us: int | None = None,
) -> None:
    """The run as a trace: what was played (sensor, power, truth) and the frames received."""
    header = make_header(
        trace.header.get("table", "rig"),
        "rig",
        trace.header.get("firmware"),
        trace.header.get("wheel"),
        played_from=trace.header.get("source"),
        seed=trace.header.get("seed"),
        scenario=trace.header.get("scenario"),
        window_us=[start_us, end_us],
        rx_clock="rx_ms: milliseconds from the trace's t_us = 0 on the rig's clock",
        rig={
            "lateness": result.play.lateness.summary(),
            "pulsegen": None if result.pulsegen is None else result.pulsegen.__dict__,
            "sync_uncertainty_ms": result.sync_uncertainty_ms,
            "ok": result.comparison.ok,
        },
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    merged: list[tuple[float, int, dict[str, Any]]] = []
    for r in _shift(trace.records, start_us, end_us):
        if r.get("kind") in ("sensor", "power", "truth"):
            merged.append((r["t_us"] / 1000, 0, r))
    for tx, line in result.commands:
        text = line.rstrip(b"\r\n").decode("latin-1")
        merged.append((tx, 1, {"kind": "command", "tx_ms": round(tx, 3), "line": text}))
    for rx, line in lines:
        merged.append(
            (rx, 1, {"kind": "frame", "rx_ms": round(rx, 3), "line": line.decode("latin-1")})
        )
    merged.sort(key=lambda m: (m[0], m[1]))
    with TraceWriter(path, header) as w:
        for _, _, r in merged:
            w.write(r)


def host_routes(outputs: list[Output]) -> dict[str, Output]:
    """line -> output; RigError when two outputs claim one line."""
    routes: dict[str, Output] = {}
    for out in outputs:
        for ln in out.channels:
            if ln in routes:
                raise RigError(f"line {ln} is driven by two backends")
            routes[ln] = out
    return routes
