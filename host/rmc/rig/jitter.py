"""Timing of the rig's paths: how late each edge leaves, measured on the path itself.

`square_wave` plays a fixed-period square wave on one line through the player and returns
its lateness (the instant the backend's write returned minus the instant asked for): for
the Blinka path this is the user-space scheduler plus the backend's own write time, i.e.
the software half of the jitter. With a loopback wire on real hardware the electrical edge
is later still by the backend's transport (libgpiod: microseconds; FT232H: a USB frame).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmc.rig.backends import Output
from rmc.rig.edges import Edge
from rmc.rig.pins import Levels
from rmc.rig.player import Clock, Player, PlayStats


@dataclass(frozen=True)
class JitterResult:
    path: str
    line: str
    edges: int
    period_us: int
    lateness: dict[str, float]
    write: dict[str, float]


def square_wave(line: str, edges: int, period_us: int) -> list[Edge]:
    if edges < 1 or period_us < 1:
        raise ValueError("edges and period_us must be >= 1")
    half = period_us // 2 or 1
    return [Edge(half * (i + 1), line, (i + 1) % 2) for i in range(edges)]


def measure(
    out: Output,
    line: str,
    levels: Levels,
    edges: int = 1000,
    period_us: int = 2000,
    spin_us: int = 300,
    path: str = "blinka",
) -> JitterResult:
    player = Player({line: out}, levels, Clock(spin_us=spin_us))
    player.set_initial({line: 0})
    stats: PlayStats = player.play(square_wave(line, edges, period_us))
    return JitterResult(
        path, line, stats.edges, period_us, stats.lateness.summary(), stats.write_us.summary()
    )
