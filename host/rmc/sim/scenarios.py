"""Scenarios: the failure cases a spin (or the closed table) can be bent to, as hooks.

A spin is laid out in fixed phases (`rmc.sim.spin`): the betting time and the rotor's push,
the launch, the ball on the track, the landing at the deflectors, the pockets, the rest. A
scenario is a `SpinHooks` object that overrides the points of the spin it bends, and nothing
else; a regular spin is the base class. Each hook draws from the spin's stream in the same
order as the timeline always has, so a session is the same for a seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rmc.sim.builder import (
    MIN_TURNS,
    Builder,
    Spin,
    SpinEnd,
    ball_pulses,
    uniform,
)
from rmc.sim.physics import TWO_PI, Hop, Landing, SpinSetup, Track, drop_speed, run_track
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


class SpinHooks:
    """A regular spin. A scenario overrides the points of the spin it bends: the directions
    (at the push and the launch), the launch itself, a void known at the launch, the ball on
    the track (before the drop), the landing, the pockets before the rest, and after the rest.
    A hook that returns a `SpinEnd` ends the spin there."""

    name = "normal"
    launch_void: str | None = None  # a void the launch already shows (proto.V_*)

    def rotor_dir(self, prev_dir: int) -> int:
        return -prev_dir  # the croupier reverses the rotor on every launch

    def ball_dir(self, rotor_dir: int) -> int:
        return -rotor_dir  # the ball against the rotor

    def run_track(self, b: Builder, sp: Spin, setup: Callable[[], SpinSetup]) -> Track:
        # A croupier's regular launch is never feeble: at least MIN_TURNS turns on the track,
        # so that "fewer than 4 revolutions" never depends on how laps are counted.
        for _ in range(50):
            track = run_track(b.wheel, setup(), b.params.dt_s)
            if track.turns >= MIN_TURNS:
                return track
        raise ValueError("parameters give launches too weak for a regular spin")

    def before_drop(self, b: Builder, sp: Spin) -> SpinEnd | None:
        """The ball runs on the track (its launch truth and record are written)."""
        return None

    def landed(self, b: Builder, sp: Spin, landing: Landing) -> SpinEnd | None:
        """The ball has met the deflector ring."""
        return None

    def before_rest(self, b: Builder, sp: Spin, landing: Landing, chans: list[int]) -> None:
        """The ball's pockets are known (`chans`, one per hop), not yet on the sensors."""

    def after_rest(self, b: Builder, sp: Spin, rest: dict[str, Any]) -> None:
        """The ball lies in its pocket until the pick-up; `rest` is its truth record's fields."""


class SameDir(SpinHooks):
    name = "same_dir"
    launch_void = proto.V_SAME_DIR

    def ball_dir(self, rotor_dir: int) -> int:
        return rotor_dir


class NotReversed(SpinHooks):
    name = "not_reversed"
    launch_void = proto.V_NOT_REVERSED

    def rotor_dir(self, prev_dir: int) -> int:
        return prev_dir


class FewRevs(SpinHooks):
    """A launch too weak: under 3 turns on the track (1-2 full laps past sensor A)."""

    name = "few_revs"

    def run_track(self, b: Builder, sp: Spin, setup: Callable[[], SpinSetup]) -> Track:
        s = setup()
        wc = drop_speed(b.wheel, s)
        turns = uniform(sp.rng, (1.5, 2.9))
        w0 = math.sqrt(wc * wc * 1.02 + 2 * (s.beta + s.alpha * wc * wc) * TWO_PI * turns)
        return run_track(b.wheel, replace(s, omega0=w0), b.params.dt_s)


class PowerCut(SpinHooks):
    """The board's power is cut while the ball runs, and restored before the drop."""

    name = "power_cut"

    def before_drop(self, b: Builder, sp: Spin) -> SpinEnd | None:
        t_cut = sp.t_launch + uniform(sp.rng, (0.25, 0.45)) * sp.track.t_drop
        t_back = min(t_cut + uniform(sp.rng, (1.0, 2.5)), sp.t_drop - 1.0)
        t_back = max(t_back, t_cut + 0.2)
        b.power += [(t_cut, "cut"), (t_back, "restore")]
        b.say(t_cut, sp.n, "power", what="cut")
        b.say(t_back, sp.n, "power", what="restore")
        return None


class BallOut(SpinHooks):
    """The ball leaves the wheel at the deflectors: no pocket ever reads 1."""

    name = "ball_out"

    def landed(self, b: Builder, sp: Spin, landing: Landing) -> SpinEnd | None:
        t_defl = sp.t_launch + landing.t_deflector
        sp.rec.void = proto.V_BALL_OUT
        b.say(t_defl, sp.n, "void", reason=proto.V_BALL_OUT, deflector=landing.deflector)
        t_next = t_defl + uniform(sp.rng, b.timing.ball_out_pickup_s)
        return SpinEnd(t_next, sp.rotor_dir, None, False)


class StuckOn(SpinHooks):
    """A pocket sensor (not the result's, not the previous result's) stuck at 1 from early
    in the betting time until after the pick-up."""

    name = "stuck_on"

    def after_rest(self, b: Builder, sp: Spin, rest: dict[str, Any]) -> None:
        banned = {sp.final, sp.prev_result}
        x = int(sp.rng.integers(0, b.wheel.n_pockets))
        while x in banned:
            x = (x + 7) % b.wheel.n_pockets
        t_on, t_off = sp.t_bets + 0.5, sp.t_pick + 1.0
        b.stuck.setdefault(x, []).append((t_on, t_off, 1))
        # Seen on the sensors alone: the pocket is held while the ball runs on the track.
        code = proto.F_POCKET_STUCK_ON
        b.say(t_on, sp.n, "fault", code=code, channel=x, on=1, detectable=True)
        b.say(t_off, sp.n, "fault", code=code, channel=x, on=0, detectable=True)


class StuckOff(SpinHooks):
    """The result's pocket sensor dead for the spin: touches seen elsewhere, then nothing."""

    name = "stuck_off"

    def before_rest(self, b: Builder, sp: Spin, landing: Landing, chans: list[int]) -> None:
        final = chans[-1]
        if all(c == final for c in chans):
            # Make the dead sensor's case readable: the ball touched a neighbour on its way.
            chans.insert(0, (final - landing.rel_dir) % b.wheel.n_pockets)
            landing.hops.insert(0, Hop(0, landing.t_entry - 0.06, landing.t_entry - 0.02))

    def after_rest(self, b: Builder, sp: Spin, rest: dict[str, Any]) -> None:
        t_on, t_off = sp.t_bets + 0.5, sp.t_pick + 1.0
        b.stuck.setdefault(sp.final, []).append((t_on, t_off, 0))
        # Not provable from one spin's sensors (a ball can also leave after bouncing): the
        # firmware learns a dead channel over many results; this is the truth behind the void.
        code, ch = proto.F_POCKET_STUCK_OFF, sp.final
        b.say(t_on, sp.n, "fault", code=code, channel=ch, on=1, detectable=False)
        b.say(t_off, sp.n, "fault", code=code, channel=ch, on=0, detectable=False)
        sp.rec.void = proto.V_SENSORS
        rest["seen"] = False
        b.say(sp.t_rest, sp.n, "void", reason=proto.V_SENSORS)


class ObjectIncident(SpinHooks):
    """Decree 1-4: a chip falls across two pockets while the ball runs; the croupier stops
    the game, puts the ball back in the previous result's pocket, and the spin is launched
    again (as the next spin number)."""

    name = "object"

    def before_drop(self, b: Builder, sp: Spin) -> SpinEnd | None:
        b.unders.append((sp.rec, sp.launch_truth, None, sp.first, None))
        if sp.prev_result is None:
            raise ValueError(
                f"scenario object on spin {sp.n}: no previous result to put the ball back"
            )
        t_obj, t_inc, t_catch, pair = self._catch(b, sp)
        return self._put_back(b, sp, t_obj, t_inc, t_catch, pair)

    @staticmethod
    def _catch(b: Builder, sp: Spin) -> tuple[float, float, float, list[int]]:
        """The chip falls, the croupier raises the incident input and catches the ball."""
        rng, track, t_launch, prev = sp.rng, sp.track, sp.t_launch, sp.prev_result
        k = b.wheel.n_pockets
        t_obj = t_launch + uniform(rng, (0.2, 0.5)) * track.t_drop
        c = int(rng.integers(0, k))
        if c in (prev, (int(prev or 0) - 1) % k):
            c = (c + 5) % k
        pair = [c, (c + 1) % k]
        t_inc = t_obj + uniform(rng, (0.6, 1.2))
        t_catch = t_inc + uniform(rng, (0.5, 1.0))
        t_catch = min(t_catch, t_launch + track.t_drop - 0.05)
        ball_pulses(b, track, t_launch, t_catch)
        laps = track.passes(b.wheel.ball_sensors_rad[0])
        rec = sp.rec
        rec.lap_periods_s = [float(x) for x in np.diff(laps[laps + t_launch < t_catch])]
        rec.track_time_s = None
        rec.drop_s = None
        th_catch = float(np.interp(t_catch - t_launch, track.t, track.theta))
        rec.turns = abs(th_catch - float(track.theta[0])) / TWO_PI
        rec.void = proto.V_OBJECT
        return t_obj, t_inc, t_catch, pair

    @staticmethod
    def _put_back(
        b: Builder, sp: Spin, t_obj: float, t_inc: float, t_catch: float, pair: list[int]
    ) -> SpinEnd:
        """The rotor braked, the chip out, the ball in the previous result's pocket."""
        rng, n, prev = sp.rng, sp.n, int(sp.prev_result or 0)
        b.rotor.coast(t_catch)
        b.rotor.ramp(t_catch + uniform(rng, (1.0, 1.6)), 0.0)
        t_removed = t_catch + uniform(rng, (1.5, 2.5))
        for ch in pair:
            b.occupy(ch, t_obj, t_removed)
        t_back = t_removed + uniform(rng, (1.0, 2.0))
        t_pick = t_back + uniform(rng, (2.5, 4.0))
        b.occupy(prev, t_back, t_pick)
        t_release = t_back + uniform(rng, (1.0, 1.8))
        b.other += [(t_inc, channels.INCIDENT, 1), (t_release, channels.INCIDENT, 0)]
        b.say(t_obj, n, "incident", step="start", channels=pair)
        b.say(t_obj, n, "void", reason=proto.V_OBJECT, channels=pair)
        pocket = b.wheel.pockets[prev]
        b.say(t_back, n, "incident", step="ball_back", pocket=pocket, channel=prev)
        return SpinEnd(t_pick, sp.rotor_dir, None, True)


# Spin scenario name -> its hooks (TABLE_SCENARIOS are the session's, not a spin's).
HOOKS: dict[str, SpinHooks] = {
    h.name: h
    for h in (
        SpinHooks(),
        SameDir(),
        NotReversed(),
        FewRevs(),
        PowerCut(),
        BallOut(),
        StuckOn(),
        StuckOff(),
        ObjectIncident(),
    )
}
