"""A whole table session, spin after spin: sensor edges and ground truth.

Timeline of a session: the lid is unlocked, the chef opens the session, then every spin has
its betting time (the ball sits in the last result's pocket while the croupier announces and
pays, then in his hand), the croupier brakes the rotor and pushes it the other way (decree
1-4), launches the ball against it, the ball runs on the track, drops, comes to rest. The last
three spins are announced before spin N-2; after the last one the rotor is stopped and the lid
locked. Scenarios (see SCENARIOS) bend one spin, or the closed table, to a failure case.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rmc.framegen import SHORT_SESSION
from rmc.sim.physics import (
    TWO_PI,
    Drift,
    Hand,
    Hop,
    Landing,
    Params,
    SpinSetup,
    Track,
    draw_setup,
    drop_speed,
    land,
    run_track,
)
from rmc.sim.rotor import Rotor
from rmc.sim.wheel import Wheel, load_wheel
from rmc.trace import FORMAT as TRACE_FORMAT
from rmc.trace import TraceWriter
from rmcfw import channels, proto

# Scenario name -> what it does (shown by `rmc sim --list-scenarios`).
SCENARIOS: dict[str, str] = {
    "normal": "a regular spin",
    "same_dir": "ball launched the rotor's way (void same_dir)",
    "not_reversed": "rotor pushed the same way as on the previous spin (void not_reversed)",
    "few_revs": "weak launch: fewer than 4 ball revolutions (void few_revs)",
    "object": "object falls into the cylinder: two pockets held, incident procedure, relaunch",
    "ball_out": "ball jumps out of the wheel at the deflectors: no pocket (void ball_out)",
    "stuck_on": "a pocket sensor stuck at 1 from the betting time to the next pick-up",
    "stuck_off": "the result's pocket sensor dead: touches seen, no rest (void sensors)",
    "tamper": "lid unlocked while the table is closed, after the session",
    "power_cut": "power cut while the ball is on the track, restored before the drop",
}
# Scenarios bound to the closed table rather than to a spin.
TABLE_SCENARIOS = frozenset({"tamper"})
# Spin scenarios whose spin ends in a void: no coup (decree 1-7 counts coups, i.e. results).
VOIDING = frozenset({"same_dir", "not_reversed", "few_revs", "object", "ball_out", "stuck_off"})


def last_three_at(plan: dict[int, str], spins: int) -> int | None:
    """The spin before which « les trois derniers coups » are announced, as the firmware
    counts them (its LAST3: the coups so far plus three): the latest spin after which the
    session still plays exactly three coups. None when it plays fewer."""
    coups = 0
    for n in range(spins, 0, -1):
        coups += plan.get(n, "normal") not in VOIDING
        if coups == 3:
            return n
    return None


# Spin scenarios that need a spin (and a valid result) before them.
NEEDS_PREVIOUS = frozenset({"not_reversed", "object"})

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


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    spin: int | None = None  # None: placed by the simulator

    @classmethod
    def parse(cls, text: str) -> ScenarioSpec:
        """'same_dir' or 'same_dir@5' (on spin 5)."""
        name, _, at = text.partition("@")
        name = name.strip()
        if name not in SCENARIOS:
            raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
        if not at:
            return cls(name)
        try:
            spin = int(at)
        except ValueError:
            raise ValueError(f"bad spin number in scenario {text!r}") from None
        if name in TABLE_SCENARIOS:
            raise ValueError(f"scenario {name!r} is not bound to a spin")
        if spin < 1:
            raise ValueError(f"spin numbers start at 1: {text!r}")
        return cls(name, spin)


def place_scenarios(specs: Iterable[ScenarioSpec | str], spins: int) -> dict[int, str]:
    """Spin number -> scenario name for spin scenarios; raises on clashes or no room."""
    plan: dict[int, str] = {}
    pending: list[str] = []
    for sp in specs:
        spec = ScenarioSpec.parse(sp) if isinstance(sp, str) else sp
        if spec.name in TABLE_SCENARIOS or spec.name == "normal":
            continue
        if spec.spin is None:
            pending.append(spec.name)
            continue
        if spec.spin > spins:
            raise ValueError(f"scenario {spec.name}@{spec.spin}: the session has {spins} spins")
        if spec.name in NEEDS_PREVIOUS and spec.spin < 2:
            raise ValueError(f"scenario {spec.name} needs a spin before it (spin >= 2)")
        if spec.spin in plan:
            raise ValueError(f"two scenarios on spin {spec.spin}")
        plan[spec.spin] = spec.name
    # Placed ones go on every other spin from spin 2, so that each failure is followed by a
    # regular spin (and the object scenario always has a previous result).
    cand = [*range(2, spins + 1, 2), *range(3, spins + 1, 2)]

    def fits(n: int, name: str, spaced: bool) -> bool:
        if n in plan or plan.get(n - 1) == "object":
            return False
        if name == "object" and (n + 1 > spins or n + 1 in plan):
            return False
        return not spaced or (n - 1 not in plan and n + 1 not in plan)

    for name in pending:
        free = [n for n in cand if fits(n, name, True)] or [n for n in cand if fits(n, name, False)]
        if not free:
            raise ValueError(f"not enough spins ({spins}) for the scenarios asked for")
        plan[free[0]] = name
    return plan


def has_table_scenario(specs: Iterable[ScenarioSpec | str], name: str) -> bool:
    for sp in specs:
        spec = ScenarioSpec.parse(sp) if isinstance(sp, str) else sp
        if spec.name == name:
            return True
    return False


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

    @property
    def revs(self) -> int:
        return len(self.lap_periods_s)


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


@dataclass
class _Builder:
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


def _u(rng: np.random.Generator, rng_pair: tuple[float, float]) -> float:
    return float(rng.uniform(*rng_pair))


def _ball_pulses(b: _Builder, track: Track, t_launch: float, t_stop: float) -> None:
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


def _paired_rises(b: _Builder, track: Track) -> list[float]:
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


def _under(b: _Builder, t: float | None) -> str | None:
    """The pocket under ball sensor A at instant t (the rotor's motion laid out by then)."""
    if t is None:
        return None
    w = b.wheel
    return w.pockets[w.pocket_under(b.rotor.phi(t), w.ball_sensors_rad[0])]


def _rotor_reverse(
    b: _Builder,
    rng: np.random.Generator,
    t_start: float,
    new_dir: int,
    period_s: float | None = None,
) -> float:
    """Brake, push the rotor to new_dir (to period_s: a steady hand's; else drawn);
    returns the instant the push ends."""
    tm = b.timing
    b.rotor.coast(t_start)
    t_brake = t_start + _u(rng, tm.brake_s)
    if abs(b.rotor.omega(t_start)) > 1e-9:
        b.rotor.ramp(t_brake, 0.0)
    else:
        b.rotor.coast(t_brake)
    t_push = t_brake + _u(rng, tm.push_s)
    period = _u(rng, b.params.rotor_period_s)
    if period_s is not None:
        period = period_s
    b.rotor.ramp(t_push, new_dir * TWO_PI / period)
    return t_push


def _few_revs_setup(b: _Builder, s: SpinSetup, rng: np.random.Generator) -> SpinSetup:
    """A launch too weak: under 3 turns on the track (1-2 full laps past sensor A)."""
    wc = drop_speed(b.wheel, s)
    turns = _u(rng, (1.5, 2.9))
    w0 = math.sqrt(wc * wc * 1.02 + 2 * (s.beta + s.alpha * wc * wc) * TWO_PI * turns)
    return replace(s, omega0=w0)


def _pocket_at(b: _Builder, theta: float, t: float) -> float:
    """Continuous pocket index under a stator angle at time t (0 = centre of channel 0)."""
    return (theta - b.rotor.phi(t)) / b.wheel.pocket_angle


def _simulate_spin(
    b: _Builder,
    n: int,
    scenario: str,
    t_bets: float,
    prev_dir: int | None,
    prev_result: int | None,
    relaunch: bool,
) -> tuple[float, int, int | None, bool]:
    """Lay out spin n from the start of its betting time; returns (next betting start,
    rotor direction, channel of a valid result or None, next spin is a relaunch)."""
    tm, p, wheel = b.timing, b.params, b.wheel
    rng = b.rng(n)
    b.drift.step(b.rng(n, 1), p)
    # A steady croupier: is this throw his habit's? Its own stream (a regular hand draws
    # nothing from it).
    hand_rng = b.rng(n, 3) if b.hand is not None else None
    throw = b.hand if hand_rng is not None and hand_rng.random() < p.steady_hand else None
    # Betting: the ball is in the croupier's hand; then the rotor is reversed.
    if relaunch:
        t_rev = t_bets + 0.5
    elif n == 1:
        t_rev = t_bets + _u(rng, tm.first_bets_s)
    else:
        t_rev = t_bets + _u(rng, tm.bets_after_pickup_s)
    if prev_dir is None:
        rotor_dir = CW if rng.random() < 0.5 else CCW
    elif scenario == "not_reversed":
        rotor_dir = prev_dir
    else:
        rotor_dir = -prev_dir
    t_push = _rotor_reverse(
        b, rng, t_rev, rotor_dir, None if throw is None else throw.rotor_period_s
    )
    t_launch = t_push + _u(rng, tm.launch_after_push_s)
    b.rotor.coast(t_launch)
    ball_dir = rotor_dir if scenario == "same_dir" else -rotor_dir

    def setup() -> SpinSetup:
        s = draw_setup(rng, wheel, p, b.drift, ball_dir)
        if throw is None:
            return s
        return replace(s, theta0=throw.angle, omega0=TWO_PI / throw.launch_period_s)

    if scenario == "few_revs":
        track = run_track(wheel, _few_revs_setup(b, setup(), rng), p.dt_s)
    else:
        # A croupier's regular launch is never feeble: at least MIN_TURNS turns on the track,
        # so that "fewer than 4 revolutions" never depends on how laps are counted.
        for _ in range(50):
            track = run_track(wheel, setup(), p.dt_s)
            if track.turns >= MIN_TURNS:
                break
        else:
            raise ValueError("parameters give launches too weak for a regular spin")
    w_rotor = b.rotor.omega(t_launch)
    b.say(
        t_launch,
        n,
        "launch",
        rotor_dir=dir_name(rotor_dir),
        ball_dir=dir_name(ball_dir),
        rotor_period_us=round(TWO_PI / abs(w_rotor) * 1e6),
    )
    launch_truth = b.truth[-1][1]
    rises = _paired_rises(b, track)
    if scenario in ("same_dir", "not_reversed"):
        b.say(
            t_launch,
            n,
            "void",
            reason=proto.V_SAME_DIR if scenario == "same_dir" else proto.V_NOT_REVERSED,
        )

    laps_a = track.passes(wheel.ball_sensors_rad[0])
    rec = SpinRecord(
        spin=n,
        scenario=scenario,
        rotor_dir=rotor_dir,
        ball_dir=ball_dir,
        launch_s=t_launch,
        first_pass_s=float(laps_a[0]) if laps_a.size else None,
        lap_periods_s=[float(x) for x in np.diff(laps_a)],
        turns=float(track.turns),
        track_time_s=track.t_drop,
        drop_s=t_launch + track.t_drop,
        rest_s=None,
        pocket=None,
        channel=None,
        scatter=None,
        deflector=None,
        void={"same_dir": proto.V_SAME_DIR, "not_reversed": proto.V_NOT_REVERSED}.get(scenario),
        rotor_period_s=TWO_PI / abs(w_rotor),
    )
    b.spins.append(rec)
    first = t_launch + rises[0] if rises else None

    if scenario == "power_cut":
        t_cut = t_launch + _u(rng, (0.25, 0.45)) * track.t_drop
        t_back = min(t_cut + _u(rng, (1.0, 2.5)), t_launch + track.t_drop - 1.0)
        t_back = max(t_back, t_cut + 0.2)
        b.power += [(t_cut, "cut"), (t_back, "restore")]
        b.say(t_cut, n, "power", what="cut")
        b.say(t_back, n, "power", what="restore")

    if scenario == "object":
        b.unders.append((rec, launch_truth, None, first, None))
        return _object_incident(b, n, rng, track, t_launch, rec, prev_result, rotor_dir)

    t_drop = t_launch + track.t_drop
    _ball_pulses(b, track, t_launch, t_drop)
    if b.rnvp_lead_s is not None:
        # The instant a perfect caller would say "rien ne va plus", for the benches.
        lead = min(b.rnvp_lead_s, track.t_drop)
        b.say(t_drop - lead, n, "rnvp_asked", lead_us=round(lead * 1e6))
    b.say(
        t_drop,
        n,
        "drop",
        revs=rec.revs,
        turns=round(float(track.turns), 3),
        lap_periods_us=[round(x * 1e6) for x in rec.lap_periods_s],
    )
    last = t_launch + rises[-1] if rises else None
    b.unders.append((rec, launch_truth, b.truth[-1][1], first, last))
    if track.turns < 4 and rec.void is None:
        rec.void = proto.V_FEW_REVS
        b.say(t_drop, n, "void", reason=proto.V_FEW_REVS)

    b.rotor.coast(t_drop + 0.001)
    landing = land(rng, wheel, p, track, b.rotor.omega(t_drop))
    t_defl = t_launch + landing.t_deflector
    rec.deflector = landing.deflector
    if scenario == "ball_out":
        rec.void = proto.V_BALL_OUT
        b.say(t_defl, n, "void", reason=proto.V_BALL_OUT, deflector=landing.deflector)
        t_next = t_defl + _u(rng, tm.ball_out_pickup_s)
        return t_next, rotor_dir, None, False

    t_entry = t_launch + landing.t_entry
    b.rotor.coast(t_launch + landing.t_rest + 1.0)
    entry = _pocket_at(b, landing.theta_entry, t_entry)
    entry_ch = round(entry) % wheel.n_pockets
    chans = [(entry_ch + h.offset) % wheel.n_pockets for h in landing.hops]
    if throw is not None and first is not None and hand_rng is not None:
        # his habit's throw ends at his distance from the pocket under sensor A at the
        # first pass, the ball's way over the rotor, within the hand's width
        u1 = wheel.pocket_under(b.rotor.phi(first), wheel.ball_sensors_rad[0])
        j = int(hand_rng.integers(0, p.steady_width)) - (p.steady_width - 1) // 2
        _hop_to(hand_rng, wheel, landing, chans, (u1 + ball_dir * (throw.distance + j)) % 39)
    if p.biased:
        _bias_rest(b, n, landing, chans)
    final = chans[-1]
    impact = _pocket_at(b, landing.theta_deflector, t_defl)
    rec.scatter = round((entry - impact) * landing.rel_dir) + landing.scatter
    if scenario == "stuck_off" and all(c == final for c in chans):
        # Make the dead sensor's case readable: the ball touched a neighbour on its way.
        chans.insert(0, (final - landing.rel_dir) % wheel.n_pockets)
        landing.hops.insert(
            0, type(landing.hops[0])(0, landing.t_entry - 0.06, landing.t_entry - 0.02)
        )
    for ch, hop in zip(chans, landing.hops, strict=True):
        t_out = None if hop.t_out is None else t_launch + hop.t_out
        b.occupy(ch, t_launch + hop.t_in, t_out)
    t_rest = t_launch + landing.t_rest
    t_pick = t_rest + _u(rng, tm.hold_in_pocket_s)
    # Close the open stay: the croupier picks the ball up.
    lst = b.occupied[final]
    lst[-1] = (lst[-1][0], t_pick)
    rec.rest_s, rec.pocket, rec.channel = t_rest, wheel.pockets[final], final
    rest_fields: dict[str, Any] = {
        "pocket": wheel.pockets[final],
        "channel": final,
        "scatter": rec.scatter,
        "deflector": landing.deflector,
        "pickup_us": round(t_pick * 1e6),
    }
    if scenario == "stuck_on":
        banned = {final, prev_result}
        x = int(rng.integers(0, wheel.n_pockets))
        while x in banned:
            x = (x + 7) % wheel.n_pockets
        t_on, t_off = t_bets + 0.5, t_pick + 1.0
        b.stuck.setdefault(x, []).append((t_on, t_off, 1))
        # Seen on the sensors alone: the pocket is held while the ball runs on the track.
        b.say(t_on, n, "fault", code=proto.F_POCKET_STUCK_ON, channel=x, on=1, detectable=True)
        b.say(t_off, n, "fault", code=proto.F_POCKET_STUCK_ON, channel=x, on=0, detectable=True)
    if scenario == "stuck_off":
        t_on, t_off = t_bets + 0.5, t_pick + 1.0
        b.stuck.setdefault(final, []).append((t_on, t_off, 0))
        # Not provable from one spin's sensors (a ball can also leave after bouncing): the
        # firmware learns a dead channel over many results; this is the truth behind the void.
        b.say(
            t_on, n, "fault", code=proto.F_POCKET_STUCK_OFF, channel=final, on=1, detectable=False
        )
        b.say(
            t_off, n, "fault", code=proto.F_POCKET_STUCK_OFF, channel=final, on=0, detectable=False
        )
        rec.void = proto.V_SENSORS
        rest_fields["seen"] = False
        b.say(t_rest, n, "void", reason=proto.V_SENSORS)
    if rec.void:
        rest_fields["void"] = rec.void
    b.say(t_rest, n, "rest", **rest_fields)
    return t_pick, rotor_dir, final if rec.void is None else None, False


def _bias_rest(b: _Builder, n: int, landing: Landing, chans: list[int]) -> None:
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
    _hop_to(rng, wheel, landing, chans, target)


def _hop_to(
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


def _object_incident(
    b: _Builder,
    n: int,
    rng: np.random.Generator,
    track: Track,
    t_launch: float,
    rec: SpinRecord,
    prev_result: int | None,
    rotor_dir: int,
) -> tuple[float, int, int | None, bool]:
    """Decree 1-4: a chip falls across two pockets while the ball runs; "rien ne va plus",
    the croupier stops the game, puts the ball back in the previous result's pocket, and
    the spin is launched again (as the next spin number)."""
    if prev_result is None:
        raise ValueError(f"scenario object on spin {n}: no previous result to put the ball back")
    wheel = b.wheel
    t_obj = t_launch + _u(rng, (0.2, 0.5)) * track.t_drop
    c = int(rng.integers(0, wheel.n_pockets))
    if c in (prev_result, (prev_result - 1) % wheel.n_pockets):
        c = (c + 5) % wheel.n_pockets
    pair = [c, (c + 1) % wheel.n_pockets]
    t_inc = t_obj + _u(rng, (0.6, 1.2))
    t_catch = t_inc + _u(rng, (0.5, 1.0))
    t_catch = min(t_catch, t_launch + track.t_drop - 0.05)
    _ball_pulses(b, track, t_launch, t_catch)
    laps = track.passes(wheel.ball_sensors_rad[0])
    rec.lap_periods_s = [float(x) for x in np.diff(laps[laps + t_launch < t_catch])]
    rec.track_time_s = None
    rec.drop_s = None
    th_catch = float(np.interp(t_catch - t_launch, track.t, track.theta))
    rec.turns = abs(th_catch - float(track.theta[0])) / TWO_PI
    rec.void = proto.V_OBJECT
    # The rotor is braked to a stop while the object is taken out.
    b.rotor.coast(t_catch)
    b.rotor.ramp(t_catch + _u(rng, (1.0, 1.6)), 0.0)
    t_removed = t_catch + _u(rng, (1.5, 2.5))
    for ch in pair:
        b.occupy(ch, t_obj, t_removed)
    t_back = t_removed + _u(rng, (1.0, 2.0))
    t_pick = t_back + _u(rng, (2.5, 4.0))
    b.occupy(prev_result, t_back, t_pick)
    t_release = t_back + _u(rng, (1.0, 1.8))
    b.other += [(t_inc, channels.INCIDENT, 1), (t_release, channels.INCIDENT, 0)]
    b.say(t_obj, n, "incident", step="start", channels=pair)
    b.say(t_obj, n, "void", reason=proto.V_OBJECT, channels=pair)
    b.say(
        t_back,
        n,
        "incident",
        step="ball_back",
        pocket=wheel.pockets[prev_result],
        channel=prev_result,
    )
    return t_pick, rotor_dir, None, True


def _pocket_edges(b: _Builder, end: float) -> list[tuple[float, int, int]]:
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


def _to_events(
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
    tamper = has_table_scenario(scen_list, "tamper")
    p = params or Params()
    w = wheel or load_wheel()
    for label, on in ((p.sticky_pocket, p.sticky_strength), (p.low_sector, p.low_sector_strength)):
        if on:
            w.channel_of(str(label))  # a bias names a pocket of this wheel: ValueError
    tm = timing or Timing()
    if rnvp_lead_s is not None and not 0 <= rnvp_lead_s < 30:
        raise ValueError(f"rnvp_lead_s must be between 0 and 30 s, not {rnvp_lead_s!r}")
    b = _Builder(w, p, tm, seed, Rotor(friction=p.rotor_friction), rnvp_lead_s=rnvp_lead_s)
    rng0 = b.rng(0)
    b.rotor.phi0 = float(rng0.uniform(0, TWO_PI))
    if p.steady_hand:
        b.hand = Hand.draw(b.rng(0, 3), p)
    if p.wheel_spread:
        # another wheel for this session (drawn only when asked: other streams stay as they were)
        b.drift.wheel = math.exp(p.wheel_spread * float(np.clip(rng0.normal(), -2.5, 2.5)))

    t = tm.open_s
    b.say(t, 0, "session_open")
    t += tm.unlock_after_open_s
    b.other.append((t, channels.LID, 0))
    last3 = last_three_at(plan, spins)
    coups = 0
    prev_dir: int | None = None
    prev_result: int | None = None
    relaunch = False
    for n in range(1, spins + 1):
        if n == last3:
            b.say(t, n, "last_three", last=coups + 3, left=3)
        scen = plan.get(n, "normal")
        t, prev_dir, result, relaunch_next = _simulate_spin(
            b, n, scen, t, prev_dir, prev_result, relaunch
        )
        if relaunch:
            b.say(b.spins[-1].launch_s, n - 1, "incident", step="relaunch", relaunch_spin=n)
        relaunch = relaunch_next
        if result is not None:
            prev_result = result
            coups += 1
    # Closing: the rotor is braked, the lid is locked, the chef closes.
    b.rotor.coast(t)
    b.rotor.ramp(t + 2.0, 0.0)
    t_lock = t + _u(rng0, tm.lock_after_s)
    b.other.append((t_lock, channels.LID, 1))
    t_close = t_lock + tm.close_after_lock_s
    if last3 is None and coups:
        # too few coups to announce the last three: the chef closes it, saying why
        b.say(t_close, spins, "session_close", spins=coups, reason=SHORT_SESSION)
    else:
        b.say(t_close, spins, "session_close", spins=coups)
    end = t_close + 2.0
    if tamper:
        t_open = t_close + _u(rng0, (4.0, 8.0))
        t_shut = t_open + _u(rng0, (2.0, 4.0))
        b.other += [(t_open, channels.LID, 0), (t_shut, channels.LID, 1)]
        b.say(t_open, spins, "tamper", what="lid")
        end = t_shut + 2.0
    b.rotor.coast(end)
    for rec, launch_truth, drop_truth, t_first, t_last in b.unders:
        # the rotor's motion is laid out to the end now: name the pockets under sensor A
        rec.under_first, rec.under_drop = _under(b, t_first), _under(b, t_last)
        launch_truth["under"] = rec.under_first
        if drop_truth is not None:
            drop_truth["under"] = rec.under_drop

    raw: list[tuple[float, int, int]] = []
    if edges:
        ts, is_b, vals = b.rotor.quadrature_edges(w.rotor_slots, w.rotor_sensor_rad, w.mark_count)
        raw = [
            (float(t_), channels.ROTOR_B if bb else channels.ROTOR_A, int(v))
            for t_, bb, v in zip(ts.tolist(), is_b.tolist(), vals.tolist(), strict=True)
        ]
        raw += b.other
        raw += _pocket_edges(b, end)
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
    events = _to_events(raw, initial) if edges else []
    truth = []
    for t_, rec in sorted(b.truth, key=lambda x: x[0]):
        truth.append(
            {"kind": "truth", "spin": rec["spin"], "t_us": round(t_ * 1e6)}
            | {k: v for k, v in rec.items() if k not in ("kind", "spin")}
        )
    power = [{"kind": "power", "t_us": round(t_ * 1e6), "event": ev} for t_, ev in sorted(b.power)]
    return Session(
        seed=seed,
        wheel=w,
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
