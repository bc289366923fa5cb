"""The state a session is laid out in, and the steps every spin shares.

`Builder` collects, in seconds from the trace start, the raw sources of the sensor levels (the
ball's passes, pocket occupancy, sensor overrides, the lid, the incident input), the truth and
the power records; `rmc.sim.session` turns them into sorted integer-microsecond events.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from rmc.sim.physics import TWO_PI, Drift, Hand, Hop, Landing, Params, Track
from rmc.sim.rotor import Rotor
from rmc.sim.wheel import Wheel
from rmcfw import channels

CW, CCW = 1, -1
MIN_TURNS = 5.0  # a regular launch gives at least this many turns on the track
PAIR_S = 0.120  # the firmware's pair window (pair_ms): a pass both ball sensors see


def dir_name(d: int) -> str:
    return "cw" if d > 0 else "ccw"


@dataclass(frozen=True)
class Timing:
    """Croupier's pace (seconds; pairs are uniform ranges)."""

    open_s: float = 1.0  # the chef opens the session (a host command) ...
    unlock_after_open_s: float = 1.0  # ... then unlocks the lid: unlocked before is tamper
    first_bets_s: tuple[float, float] = (2.0, 4.0)
    hold_in_pocket_s: tuple[float, float] = (5.0, 9.0)  # announce and pay, ball in its pocket
    bets_after_pickup_s: tuple[float, float] = (0.5, 1.5)  # then the rotor is reversed
    brake_s: tuple[float, float] = (0.6, 1.0)
    push_s: tuple[float, float] = (0.4, 0.7)
    # Bets go on with the rotor turning the new way (a reader needs a few turns of it).
    launch_after_push_s: tuple[float, float] = (3.0, 6.0)
    lock_after_s: tuple[float, float] = (4.0, 6.0)  # after the last pick-up: lid locked ...
    close_after_lock_s: float = 1.0  # ... then the chef closes (a session closes locked)
    ball_out_pickup_s: tuple[float, float] = (12.0, 18.0)  # it rolled off: fetch and clean


@dataclass
class SpinRecord:
    """One spin's summary (times in seconds from the trace start)."""

    spin: int
    scenario: str
    rotor_dir: int
    ball_dir: int
    launch_s: float
    first_pass_s: float | None  # launch to the ball's first pass at sensor A
    lap_periods_s: list[float]
    turns: float  # turns on the track, launch to drop (or to the catch)
    track_time_s: float | None  # launch to drop (None: caught before the drop)
    drop_s: float | None
    rest_s: float | None
    pocket: str | None  # where the ball came to rest (None: never)
    channel: int | None
    scatter: int | None  # pockets from the deflector impact to rest, ball's way positive
    deflector: int | None
    void: str | None
    rotor_period_s: float
    # The pocket under ball sensor A when the ball reaches it (the rising edge of its pulse)
    # at its first and last passes seen by both sensors (the firmware's LAUNCH and DROP
    # `under`); None when there is no such pass (the last: no drop).
    under_first: str | None = None
    under_drop: str | None = None
    # Pockets from the one under the ball at the drop (the rotor's pocket at the ball's stator
    # angle, at the true drop instant) to the pocket of rest, the ball's way over the rotor
    # positive, in −19..19: how far the spiral, the deflectors and the bounces carry it.
    drop_offset: int | None = None

    @property
    def revs(self) -> int:
        return len(self.lap_periods_s)


@dataclass
class Builder:
    """Mutable state while a session is laid out in time."""

    wheel: Wheel
    params: Params
    timing: Timing
    seed: int
    rotor: Rotor
    drift: Drift = field(default_factory=Drift)
    # Raw sources of pocket levels (seconds): ball or object inside, sensor overrides.
    occupied: dict[int, list[tuple[float, float | None]]] = field(default_factory=dict)
    stuck: dict[int, list[tuple[float, float, int]]] = field(default_factory=dict)
    other: list[tuple[float, int, int]] = field(default_factory=list)  # ball, lid, incident
    truth: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    power: list[tuple[float, str]] = field(default_factory=list)
    spins: list[SpinRecord] = field(default_factory=list)
    rnvp_lead_s: float | None = None
    hand: Hand | None = None  # a steady croupier's habit (Params.steady_hand > 0)
    # Pockets under sensor A to name once the rotor's motion is laid out: (spin record,
    # its launch and drop truth records, the first and last paired passes' instants).
    unders: list[tuple[SpinRecord, dict, dict | None, float | None, float | None]] = field(
        default_factory=list
    )

    def rng(self, *key: int) -> np.random.Generator:
        # One stream per spin (and per use): a scenario on spin 5 leaves spin 6's physics alone.
        return np.random.default_rng([self.seed & 0xFFFFFFFF, self.seed >> 32, *key])

    def occupy(self, ch: int, t_in: float, t_out: float | None) -> None:
        self.occupied.setdefault(ch, []).append((t_in, t_out))

    def say(self, t: float, spin: int, event: str, **fields: Any) -> None:
        self.truth.append((t, {"kind": "truth", "spin": spin, "event": event, **fields}))


class SpinEnd(NamedTuple):
    """How a spin ends: when the next betting time starts, the rotor's direction, the channel
    of a valid result (None: no coup), and whether the next spin is a relaunch."""

    t_next: float
    rotor_dir: int
    result: int | None
    relaunch: bool


@dataclass
class Spin:
    """One spin while it is laid out (times in seconds from the trace start); the phases of
    `rmc.sim.spin` fill it in, the scenario hooks read it."""

    n: int
    scenario: str
    rng: np.random.Generator  # the spin's own stream
    t_bets: float  # its betting time starts
    prev_result: int | None  # the channel of the previous valid result
    hand_rng: np.random.Generator | None  # a steady hand's stream (None: a regular hand)
    throw: Hand | None  # his habit's throw, or None
    rotor_dir: int = CW
    ball_dir: int = CCW
    t_launch: float = 0.0
    track: Track = field(init=False)
    rec: SpinRecord = field(init=False)
    launch_truth: dict[str, Any] = field(init=False)
    rises: list[float] = field(default_factory=list)  # paired passes, s from the release
    first: float | None = None  # the first paired pass (trace time)
    t_rest: float = 0.0
    t_pick: float = 0.0
    final: int = 0  # channel of the pocket of rest

    @property
    def t_drop(self) -> float:
        return self.t_launch + self.track.t_drop


def uniform(rng: np.random.Generator, rng_pair: tuple[float, float]) -> float:
    return float(rng.uniform(*rng_pair))


def ball_pulses(b: Builder, track: Track, t_launch: float, t_stop: float) -> None:
    """Short pulses on ball_a/ball_b each time the ball passes them (before t_stop)."""
    r = b.wheel.track_radius_m
    sensors = zip((channels.BALL_A, channels.BALL_B), b.wheel.ball_sensors_rad, strict=True)
    for ch, ang in sensors:
        for tp in track.passes(ang):
            t = t_launch + tp
            if t >= t_stop:
                break
            w = abs(float(np.interp(tp, track.t, track.omega)))
            half = 0.5 * b.params.ball_diameter_m / (r * max(w, 0.5))
            b.other.append((t - half, ch, 1))
            b.other.append((t + half, ch, 0))


def paired_rises(b: Builder, track: Track) -> list[float]:
    """Instants (s from the release) at which the ball reaches sensor A on the passes both
    sensors see: the rising edge of A's pulse, B's within the firmware's pair window (a
    release or a drop between the two sensors leaves a pass one of them alone sees)."""
    r = b.wheel.track_radius_m

    def rises(angle: float) -> np.ndarray:
        tp = track.passes(angle)
        if tp.size == 0:
            return tp
        w = np.maximum(np.abs(np.interp(tp, track.t, track.omega)), 0.5)
        return tp - 0.5 * b.params.ball_diameter_m / (r * w)

    ra, rb = (rises(a) for a in b.wheel.ball_sensors_rad)
    if ra.size == 0 or rb.size == 0:
        return []
    near = np.abs(ra[:, None] - rb[None, :]).min(axis=1) <= PAIR_S
    return [float(x) for x in ra[near]]


def under(b: Builder, t: float | None) -> str | None:
    """The pocket under ball sensor A at instant t (the rotor's motion laid out by then)."""
    if t is None:
        return None
    w = b.wheel
    return w.pockets[w.pocket_under(b.rotor.phi(t), w.ball_sensors_rad[0])]


def rotor_reverse(
    b: Builder,
    rng: np.random.Generator,
    t_start: float,
    new_dir: int,
    period_s: float | None = None,
) -> float:
    """Brake, push the rotor to new_dir (to period_s: a steady hand's; else drawn);
    returns the instant the push ends."""
    tm = b.timing
    b.rotor.coast(t_start)
    t_brake = t_start + uniform(rng, tm.brake_s)
    if abs(b.rotor.omega(t_start)) > 1e-9:
        b.rotor.ramp(t_brake, 0.0)
    else:
        b.rotor.coast(t_brake)
    t_push = t_brake + uniform(rng, tm.push_s)
    period = uniform(rng, b.params.rotor_period_s)
    if period_s is not None:
        period = period_s
    b.rotor.ramp(t_push, new_dir * TWO_PI / period)
    return t_push


def pocket_at(b: Builder, theta: float, t: float) -> float:
    """Continuous pocket index under a stator angle at time t (0 = centre of channel 0)."""
    return (theta - b.rotor.phi(t)) / b.wheel.pocket_angle


def bias_rest(b: Builder, n: int, landing: Landing, chans: list[int]) -> None:
    """A biased wheel (Params.sticky_*, low_sector_*): with its probability, the ball's
    last hops take it on, the shorter way round, into the favoured pocket. Its own random
    stream: a fair wheel's spins draw nothing here."""
    p, wheel = b.params, b.wheel
    rng = b.rng(n, 2)
    u = float(rng.random())
    if u < p.sticky_strength:
        target = wheel.channel_of(str(p.sticky_pocket))
    elif u < p.sticky_strength + p.low_sector_strength:
        first = wheel.channel_of(str(p.low_sector)) - p.low_sector_width // 2
        target = (first + int(rng.integers(0, p.low_sector_width))) % wheel.n_pockets
    else:
        return
    hop_to(rng, wheel, landing, chans, target)


def hop_to(
    rng: np.random.Generator, wheel: Wheel, landing: Landing, chans: list[int], target: int
) -> None:
    """The ball's last hops take it on, the shorter way round, into pocket channel
    `target` (the sensors see those hops)."""
    k = wheel.n_pockets
    way = (target - chans[-1]) % k
    if way == 0:
        return  # there already
    step = 1 if way <= k // 2 else -1
    left = way if step > 0 else k - way
    last = landing.hops[-1]
    t = last.t_in + float(rng.uniform(0.03, 0.09))
    landing.hops[-1] = Hop(last.offset, last.t_in, t)
    offset = last.offset
    while left > 0:
        hop = min(left, int(rng.integers(1, 4)))
        left -= hop
        offset += step * hop
        t += float(rng.uniform(0.10, 0.22)) * math.sqrt(hop)
        stay = None if left == 0 else t + float(rng.uniform(0.03, 0.09))
        landing.hops.append(Hop(offset, t, stay))
        chans.append((chans[0] + offset - landing.hops[0].offset) % k)
        if stay is not None:
            t = stay


def pocket_edges(b: Builder, end: float) -> list[tuple[float, int, int]]:
    """Level changes of each pocket channel from its occupancy and sensor overrides."""
    out: list[tuple[float, int, int]] = []
    for ch in set(b.occupied) | set(b.stuck):
        marks: list[tuple[float, int, str, int]] = []
        for i, (t_in, t_out) in enumerate(b.occupied.get(ch, [])):
            marks.append((t_in, 1, "occ", i))
            marks.append((end if t_out is None else t_out, 0, "occ", i))
        for t_on, t_off, level in b.stuck.get(ch, []):
            marks.append((t_on, 1, "on" if level else "off", 0))
            marks.append((t_off, 0, "on" if level else "off", 0))
        marks.sort(key=lambda m: (m[0], m[1]))
        count, on, off, level = 0, 0, 0, 0
        for t, start, kind, _ in marks:
            d = 1 if start else -1
            if kind == "occ":
                count += d
            elif kind == "on":
                on += d
            else:
                off += d
            new = 1 if on > 0 else 0 if off > 0 else int(count > 0)
            if new != level:
                out.append((t, ch, new))
                level = new
    return out


def to_events(
    raw: Iterable[tuple[float, int, int]], initial: Mapping[int, int]
) -> list[tuple[int, int, int]]:
    """Integer microseconds, one level change per record, sorted; zero-width glitches dropped."""
    per_ch: dict[int, list[tuple[int, int, int]]] = {}
    for i, (t, ch, v) in enumerate(raw):
        per_ch.setdefault(ch, []).append((round(t * 1e6), i, v))
    events: list[tuple[int, int, int]] = [(0, ch, v) for ch, v in sorted(initial.items())]
    for ch, lst in per_ch.items():
        lst.sort()
        level = initial.get(ch, 0)
        kept: list[tuple[int, int]] = []
        for t_us, _, v in lst:
            if t_us < 1:
                t_us = 1
            if kept and kept[-1][0] == t_us:
                # Two changes in one microsecond: the pulse is too short to be seen.
                kept.pop()
                level = kept[-1][1] if kept else initial.get(ch, 0)
            if v != level:
                kept.append((t_us, v))
                level = v
        events.extend((t, ch, v) for t, v in kept)
    events.sort()
    return events
