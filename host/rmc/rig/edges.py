"""What the rig plays: a trace's raw sensor edges and power records, as timed line changes.

Edges are logical (trace values); `pins.Levels` turns them into electrical levels. A line's
level before its first edge is the opposite of that edge (a trace records changes), unless
the edge comes at t = 0, which then is the initial level itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rmc.rig.pins import ALL_LINES, POWER
from rmc.trace import Trace


class EdgeError(ValueError):
    """A trace record the rig cannot play."""


@dataclass(frozen=True, slots=True, order=True)
class Edge:
    t_us: int  # from the trace's start
    line: str  # a trace channel name ("pocket:12", "ball_a", ...) or "power"
    v: int  # logical value after the edge


def from_records(records: Iterable[dict[str, Any]]) -> list[Edge]:
    """Sensor and power records -> edges sorted by time (stable: same-instant order kept)."""
    out: list[Edge] = []
    for n, r in enumerate(records, 1):
        kind = r.get("kind")
        if kind == "sensor":
            line, v = r.get("ch"), r.get("v")
            if line not in ALL_LINES or line == POWER:
                raise EdgeError(f"record {n}: unknown sensor channel {line!r}")
            if v not in (0, 1) or isinstance(v, bool):
                raise EdgeError(f"record {n}: sensor value must be 0 or 1, got {v!r}")
        elif kind == "power":
            ev = r.get("event")
            if ev not in ("cut", "restore"):
                raise EdgeError(f"record {n}: power event must be cut or restore, got {ev!r}")
            line, v = POWER, 1 if ev == "restore" else 0
        else:
            continue
        t = r.get("t_us")
        if not isinstance(t, int) or isinstance(t, bool) or t < 0:
            raise EdgeError(f"record {n}: t_us must be an integer >= 0, got {t!r}")
        out.append(Edge(t, line, v))
    out.sort(key=lambda e: e.t_us)
    return out


def from_trace(trace: Trace) -> list[Edge]:
    return from_records(trace.records)


def initial_levels(edges: Iterable[Edge], lines: Iterable[str] = ALL_LINES) -> dict[str, int]:
    """Logical level of every line before playback starts (power on, others 0 by default)."""
    init = {line: 0 for line in lines}
    init[POWER] = 1
    seen: set[str] = set()
    for e in edges:
        if e.line in seen:
            continue
        seen.add(e.line)
        init[e.line] = e.v if e.t_us == 0 else 1 - e.v
    return init


def state_at(edges: list[Edge], t_us: int) -> dict[str, int]:
    """Logical level of every line just before t_us (the initial levels for t_us = 0)."""
    state = initial_levels(edges)
    for e in edges:
        if e.t_us >= t_us:
            break
        state[e.line] = e.v
    return state


def split(edges: Iterable[Edge], lines: set[str] | frozenset[str]) -> tuple[list[Edge], list[Edge]]:
    """(edges on `lines`, the others), order kept."""
    inside: list[Edge] = []
    rest: list[Edge] = []
    for e in edges:
        (inside if e.line in lines else rest).append(e)
    return inside, rest


def window(edges: list[Edge], start_us: int = 0, end_us: int | None = None) -> list[Edge]:
    """Edges in [start_us, end_us), re-timed from start_us (to play a part of a long trace)."""
    return [
        Edge(e.t_us - start_us, e.line, e.v)
        for e in edges
        if e.t_us >= start_us and (end_us is None or e.t_us < end_us)
    ]
