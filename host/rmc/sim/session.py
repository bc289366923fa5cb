"""A whole table session, spin after spin: sensor edges and ground truth.

Timeline of a session: the lid is unlocked, the chef opens the session, then every spin has
its betting time (the ball sits in the last result's pocket while the croupier announces and
pays, then in his hand), the croupier brakes the rotor and pushes it the other way (decree
1-4), launches the ball against it, the ball runs on the track, drops, comes to rest. The last
three spins are announced before spin N-2; after the last one the rotor is stopped and the lid
locked. Scenarios (`rmc.sim.scenarios`) bend one spin, or the closed table, to a failure case;
one spin's phases are `rmc.sim.spin`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rmc.framegen import SHORT_SESSION
from rmc.sim.builder import (
    MIN_TURNS,
    PAIR_S,
    Builder,
    SpinRecord,
    Timing,
    dir_name,
    pocket_edges,
    to_events,
    under,
    uniform,
)
from rmc.sim.physics import TWO_PI, Hand, Params
from rmc.sim.rotor import Rotor
from rmc.sim.scenarios import (
    NEEDS_PREVIOUS,
    SCENARIOS,
    TABLE_SCENARIOS,
    VOIDING,
    ScenarioSpec,
    has_table_scenario,
    last_three_at,
    place_scenarios,
)
from rmc.sim.spin import simulate_spin
from rmc.sim.wheel import Wheel, load_wheel
from rmc.trace import FORMAT as TRACE_FORMAT
from rmc.trace import TraceWriter
from rmcfw import channels

__all__ = [
    "MIN_TURNS",
    "NEEDS_PREVIOUS",
    "PAIR_S",
    "SCENARIOS",
    "TABLE_SCENARIOS",
    "TRACE_FORMAT",
    "VOIDING",
    "ScenarioSpec",
    "Session",
    "SpinRecord",
    "Timing",
    "dir_name",
    "last_three_at",
    "place_scenarios",
    "simulate_laps",
    "simulate_session",
    "write_laps_csv",
]


@dataclass
class Session:
    """A simulated session: sorted sensor events, truth records, power records."""

    seed: int
    wheel: Wheel
    params: Params
    scenarios: dict[int, str]
    table_scenarios: list[str]
    events: list[tuple[int, int, int]]  # (t_us, channel, value), sorted by time
    truth: list[dict[str, Any]]
    power: list[dict[str, Any]]
    spins: list[SpinRecord]
    duration_us: int
    table: str = "sim"

    def to_trace_records(self) -> Iterator[dict[str, Any]]:
        """The trace as JSON-ready dicts, header first, then every record sorted by t_us."""
        yield {
            "kind": "header",
            "format": TRACE_FORMAT,
            "table": self.table,
            "wheel": self.wheel.raw,
            "firmware": None,
            "source": "sim",
            "seed": self.seed,
            "scenario": self.scenario_names(),
            **({"bias": self.params.bias()} if self.params.bias() else {}),
        }
        recs: list[tuple[int, int, dict[str, Any]]] = []
        # Ties: power first (the cut comes before what the board would see), then sensors,
        # then truth, each in generation order.
        for p in self.power:
            recs.append((p["t_us"], 0, p))
        for t, ch, v in self.events:
            recs.append((t, 1, {"kind": "sensor", "t_us": t, "ch": channels.name(ch), "v": v}))
        for tr in self.truth:
            recs.append((tr["t_us"], 2, tr))
        recs.sort(key=lambda r: (r[0], r[1]))
        for _, _, r in recs:
            yield r

    def scenario_names(self) -> list[str]:
        return [f"{name}@{n}" for n, name in sorted(self.scenarios.items())] + list(
            self.table_scenarios
        )

    def write_trace(self, path: str | Path) -> int:
        """Write the JSON Lines trace, closed by its end record; returns the lines written."""
        header, *records = self.to_trace_records()
        with TraceWriter(path, header, flush=False) as w:
            for rec in records:
                w.write(rec)
        return w.lines + 1

    def valid_spins(self) -> list[SpinRecord]:
        return [s for s in self.spins if s.void is None and s.pocket is not None]


def _plan(
    scenarios: Iterable[ScenarioSpec | str], spins: int, seed: int
) -> tuple[dict[int, str], bool]:
    """The spin scenarios placed (spin -> name) and whether the closed table is tampered
    with; ValueError on a bad request."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
    if not isinstance(spins, int) or spins < 1:
        raise ValueError(f"spins must be a positive integer, not {spins!r}")
    scen_list = list(scenarios)
    plan = place_scenarios(scen_list, spins)
    # An object incident is followed by its relaunch: it cannot be the last spin.
    for k, name in plan.items():
        if name == "object" and k == spins:
            raise ValueError(
                "scenario object cannot fall on the last spin: its relaunch is the next"
            )
        if name == "object" and plan.get(k + 1):
            raise ValueError(f"spin {k + 1} is the relaunch after the object on spin {k}")
    return plan, has_table_scenario(scen_list, "tamper")


def _builder(
    seed: int, p: Params, w: Wheel, tm: Timing, rnvp_lead_s: float | None
) -> tuple[Builder, np.random.Generator]:
    """The session's state, its rotor at rest at a random angle, and its stream 0."""
    for label, on in ((p.sticky_pocket, p.sticky_strength), (p.low_sector, p.low_sector_strength)):
        if on:
            w.channel_of(str(label))  # a bias names a pocket of this wheel: ValueError
    if rnvp_lead_s is not None and not 0 <= rnvp_lead_s < 30:
        raise ValueError(f"rnvp_lead_s must be between 0 and 30 s, not {rnvp_lead_s!r}")
    b = Builder(w, p, tm, seed, Rotor(friction=p.rotor_friction), rnvp_lead_s=rnvp_lead_s)
    rng0 = b.rng(0)
    b.rotor.phi0 = float(rng0.uniform(0, TWO_PI))
    if p.steady_hand:
        b.hand = Hand.draw(b.rng(0, 3), p)
    if p.wheel_spread:
        # another wheel for this session (drawn only when asked: other streams stay as they were)
        b.drift.wheel = math.exp(p.wheel_spread * float(np.clip(rng0.normal(), -2.5, 2.5)))
    return b, rng0


def _play(b: Builder, plan: dict[int, str], spins: int) -> tuple[float, int, int | None]:
    """The session opened and every spin played; returns (the time after the last spin,
    the coups played, the spin before which the last three were announced)."""
    t = b.timing.open_s
    b.say(t, 0, "session_open")
    t += b.timing.unlock_after_open_s
    b.other.append((t, channels.LID, 0))
    last3 = last_three_at(plan, spins)
    coups = 0
    prev_dir: int | None = None
    prev_result: int | None = None
    relaunch = False
    for n in range(1, spins + 1):
        if n == last3:
            b.say(t, n, "last_three", last=coups + 3, left=3)
        end = simulate_spin(b, n, plan.get(n, "normal"), t, prev_dir, prev_result, relaunch)
        t, prev_dir = end.t_next, end.rotor_dir
        if relaunch:
            b.say(b.spins[-1].launch_s, n - 1, "incident", step="relaunch", relaunch_spin=n)
        relaunch = end.relaunch
        if end.result is not None:
            prev_result = end.result
            coups += 1
    return t, coups, last3


def _close(
    b: Builder,
    rng0: np.random.Generator,
    t: float,
    spins: int,
    coups: int,
    short: bool,
    tamper: bool,
) -> float:
    """The rotor braked, the lid locked, the chef closes (and the tamper scenario after);
    returns the trace's end."""
    tm = b.timing
    b.rotor.coast(t)
    b.rotor.ramp(t + 2.0, 0.0)
    t_lock = t + uniform(rng0, tm.lock_after_s)
    b.other.append((t_lock, channels.LID, 1))
    t_close = t_lock + tm.close_after_lock_s
    if short:
        # too few coups to announce the last three: the chef closes it, saying why
        b.say(t_close, spins, "session_close", spins=coups, reason=SHORT_SESSION)
    else:
        b.say(t_close, spins, "session_close", spins=coups)
    end = t_close + 2.0
    if tamper:
        t_open = t_close + uniform(rng0, (4.0, 8.0))
        t_shut = t_open + uniform(rng0, (2.0, 4.0))
        b.other += [(t_open, channels.LID, 0), (t_shut, channels.LID, 1)]
        b.say(t_open, spins, "tamper", what="lid")
        end = t_shut + 2.0
    b.rotor.coast(end)
    for rec, launch_truth, drop_truth, t_first, t_last in b.unders:
        # the rotor's motion is laid out to the end now: name the pockets under sensor A
        rec.under_first, rec.under_drop = under(b, t_first), under(b, t_last)
        launch_truth["under"] = rec.under_first
        if drop_truth is not None:
            drop_truth["under"] = rec.under_drop
    return end


def _events(b: Builder, end: float, edges: bool) -> list[tuple[int, int, int]]:
    """Every sensor's level changes (integer µs, sorted), initial levels first."""
    w = b.wheel
    raw: list[tuple[float, int, int]] = []
    if edges:
        ts, is_b, vals = b.rotor.quadrature_edges(w.rotor_slots, w.rotor_sensor_rad, w.mark_count)
        raw = [
            (float(t_), channels.ROTOR_B if bb else channels.ROTOR_A, int(v))
            for t_, bb, v in zip(ts.tolist(), is_b.tolist(), vals.tolist(), strict=True)
        ]
        raw += b.other
        raw += pocket_edges(b, end)
    a0, b0 = Rotor.levels_at(b.rotor.phi0, w.rotor_slots, w.rotor_sensor_rad, w.mark_count)
    initial = {ch: 0 for ch in range(channels.POCKETS)}
    initial.update(
        {
            channels.ROTOR_A: a0,
            channels.ROTOR_B: b0,
            channels.BALL_A: 0,
            channels.BALL_B: 0,
            channels.LID: 1,
            channels.INCIDENT: 0,
        }
    )
    return to_events(raw, initial) if edges else []


def simulate_session(
    seed: int,
    spins: int,
    scenarios: Iterable[ScenarioSpec | str] = (),
    params: Params | None = None,
    wheel: Wheel | None = None,
    timing: Timing | None = None,
    table: str = "sim",
    edges: bool = True,
    rnvp_lead_s: float | None = None,
) -> Session:
    """Simulate a table session of `spins` launches (a relaunch after an incident counts as
    a spin). Deterministic for a seed. Raises ValueError on a bad request.

    edges=False skips the sensor edges (Session.events is empty): for statistics only.
    rnvp_lead_s: also write, for each spin that drops, an "rnvp_asked" truth record that many
    seconds before the true drop (the call a perfect predictor would make)."""
    plan, tamper = _plan(scenarios, spins, seed)
    p = params or Params()
    b, rng0 = _builder(seed, p, wheel or load_wheel(), timing or Timing(), rnvp_lead_s)
    t, coups, last3 = _play(b, plan, spins)
    end = _close(b, rng0, t, spins, coups, last3 is None and bool(coups), tamper)
    events = _events(b, end, edges)
    truth = [
        {"kind": "truth", "spin": rec["spin"], "t_us": round(t_ * 1e6)}
        | {k: v for k, v in rec.items() if k not in ("kind", "spin")}
        for t_, rec in sorted(b.truth, key=lambda x: x[0])
    ]
    power = [{"kind": "power", "t_us": round(t_ * 1e6), "event": ev} for t_, ev in sorted(b.power)]
    return Session(
        seed=seed,
        wheel=b.wheel,
        params=p,
        scenarios=plan,
        table_scenarios=["tamper"] if tamper else [],
        events=events,
        truth=truth,
        power=power,
        spins=b.spins,
        duration_us=round(end * 1e6),
        table=table,
    )


def simulate_laps(
    seed: int,
    spins: int,
    params: Params | None = None,
    wheel: Wheel | None = None,
    jitter_s: float = 0.0,
    last: int | None = None,
) -> list[list[float]]:
    """Ball lap periods (s, at sensor A, oldest first) of `spins` regular spins, for the
    predictor: the last one is the last full lap before the ball left the track.

    jitter_s: standard deviation of a timing error added to every pass (hand-clocked video
    laps are noisy by tens of ms); last: keep only the last N laps (often all that is clocked).
    Spins the physics voids (fewer than 4 laps) are left out."""
    if jitter_s < 0 or (last is not None and last < 1):
        raise ValueError("jitter_s must be >= 0 and last >= 1")
    s = simulate_session(seed, spins, params=params, wheel=wheel, edges=False)
    rng = np.random.default_rng([seed & 0xFFFFFFFF, seed >> 32, 0x1A95])
    out: list[list[float]] = []
    for sp in s.valid_spins():
        passes = np.concatenate([[0.0], np.cumsum(sp.lap_periods_s)])
        if jitter_s:
            passes = passes + rng.normal(0.0, jitter_s, passes.size)
        laps = np.diff(passes)
        if last is not None:
            laps = laps[-last:]
        out.append([float(x) for x in laps])
    return out


def write_laps_csv(path: str | Path, laps: Iterable[Iterable[float]]) -> int:
    """`rmc rnvp` input: one spin per line, lap times in seconds, comma-separated."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for row in laps:
            f.write(",".join(f"{x:.6f}" for x in row))
            f.write("\n")
            n += 1
    return n
