"""Simulated Roulette Monte-Carlo wheel: physics, sensor edges, ground truth (issue 4).

    from rmc.sim import simulate_session, simulate_laps
    s = simulate_session(seed=1, spins=20, scenarios=["same_dir", "object@5"])
    s.events            # [(t_us, channel, value), ...] sorted; channels as in rmcfw.channels
    s.truth             # truth records (dicts), sorted by t_us
    s.write_trace("trace.jsonl")

See docs/sim.md.
"""

from __future__ import annotations

from rmc.sim.physics import Params
from rmc.sim.session import (
    SCENARIOS,
    TRACE_FORMAT,
    ScenarioSpec,
    Session,
    SpinRecord,
    Timing,
    simulate_laps,
    simulate_session,
    write_laps_csv,
)
from rmc.sim.wheel import Wheel, load_wheel

__all__ = [
    "SCENARIOS",
    "TRACE_FORMAT",
    "Params",
    "ScenarioSpec",
    "Session",
    "SpinRecord",
    "Timing",
    "Wheel",
    "load_wheel",
    "simulate_laps",
    "simulate_session",
    "write_laps_csv",
]
