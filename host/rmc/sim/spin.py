"""One spin laid out in time, phase by phase; its scenario's hooks bend it (`scenarios.py`).

Phases: the betting time and the rotor's push (`_bets`), the launch and the ball's run on the
track (`_launch`), the drop (`_drop`), the landing, the pockets (`_pockets`), the rest
(`_rest`). Every draw comes from the spin's own stream in this order, so a session is the same
for a seed whatever a scenario on another spin does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from rmc.sim.builder import (
    CCW,
    CW,
    Builder,
    Spin,
    SpinEnd,
    SpinRecord,
    ball_pulses,
    bias_rest,
    dir_name,
    hop_to,
    paired_rises,
    pocket_at,
    rotor_reverse,
    uniform,
)
from rmc.sim.physics import TWO_PI, Landing, SpinSetup, draw_setup, land, track_irregularity
from rmc.sim.scenarios import HOOKS, SpinHooks
from rmcfw import proto


def simulate_spin(
    b: Builder,
    n: int,
    scenario: str,
    t_bets: float,
    prev_dir: int | None,
    prev_result: int | None,
    relaunch: bool,
) -> SpinEnd:
    """Lay out spin n from the start of its betting time."""
    hooks = HOOKS[scenario]
    rng = b.rng(n)
    b.drift.step(b.rng(n, 1), b.params)
    # A steady croupier: is this throw his habit's? Its own stream (a regular hand draws
    # nothing from it).
    hand_rng = b.rng(n, 3) if b.hand is not None else None
    throw = b.hand if hand_rng is not None and hand_rng.random() < b.params.steady_hand else None
    sp = Spin(n, scenario, rng, t_bets, prev_result, hand_rng, throw)
    _bets(b, sp, hooks, prev_dir, relaunch)
    _launch(b, sp, hooks)
    end = hooks.before_drop(b, sp)
    if end is not None:
        return end
    _drop(b, sp)
    b.rotor.coast(sp.t_drop + 0.001)
    landing = land(rng, b.wheel, b.params, sp.track, b.rotor.omega(sp.t_drop))
    sp.rec.deflector = landing.deflector
    end = hooks.landed(b, sp, landing)
    if end is not None:
        return end
    chans = _pockets(b, sp, landing)
    hooks.before_rest(b, sp, landing, chans)
    rest = _rest(b, sp, landing, chans)
    hooks.after_rest(b, sp, rest)
    rec = sp.rec
    if rec.void:
        rest["void"] = rec.void
    b.say(sp.t_rest, n, "rest", **rest)
    return SpinEnd(sp.t_pick, sp.rotor_dir, sp.final if rec.void is None else None, False)


def _bets(b: Builder, sp: Spin, hooks: SpinHooks, prev_dir: int | None, relaunch: bool) -> None:
    """Betting: the ball is in the croupier's hand; the rotor is reversed, bets go on."""
    tm, rng = b.timing, sp.rng
    if relaunch:
        t_rev = sp.t_bets + 0.5
    elif sp.n == 1:
        t_rev = sp.t_bets + uniform(rng, tm.first_bets_s)
    else:
        t_rev = sp.t_bets + uniform(rng, tm.bets_after_pickup_s)
    if prev_dir is None:
        sp.rotor_dir = CW if rng.random() < 0.5 else CCW
    else:
        sp.rotor_dir = hooks.rotor_dir(prev_dir)
    period = None if sp.throw is None else sp.throw.rotor_period_s
    t_push = rotor_reverse(b, rng, t_rev, sp.rotor_dir, period)
    sp.t_launch = t_push + uniform(rng, tm.launch_after_push_s)
    b.rotor.coast(sp.t_launch)
    sp.ball_dir = hooks.ball_dir(sp.rotor_dir)


def _launch(b: Builder, sp: Spin, hooks: SpinHooks) -> None:
    """The croupier launches; the ball's run on the track; the launch truth and the record."""
    n, t_launch = sp.n, sp.t_launch
    # The track's lap-to-lap irregularity has its own stream (none drawn when it is off).
    p = b.params
    noise_rng = b.rng(n, 4) if p.track_noise or p.track_wobble else None

    def setup() -> SpinSetup:
        s = draw_setup(sp.rng, b.wheel, b.params, b.drift, sp.ball_dir)
        if noise_rng is not None:
            s = track_irregularity(noise_rng, p, s)
        if sp.throw is None:
            return s
        return replace(s, theta0=sp.throw.angle, omega0=TWO_PI / sp.throw.launch_period_s)

    track = sp.track = hooks.run_track(b, sp, setup)
    w_rotor = b.rotor.omega(t_launch)
    b.say(
        t_launch,
        n,
        "launch",
        rotor_dir=dir_name(sp.rotor_dir),
        ball_dir=dir_name(sp.ball_dir),
        rotor_period_us=round(TWO_PI / abs(w_rotor) * 1e6),
    )
    sp.launch_truth = b.truth[-1][1]
    sp.rises = paired_rises(b, track)
    if hooks.launch_void:
        b.say(t_launch, n, "void", reason=hooks.launch_void)
    laps_a = track.passes(b.wheel.ball_sensors_rad[0])
    sp.rec = SpinRecord(
        spin=n,
        scenario=sp.scenario,
        rotor_dir=sp.rotor_dir,
        ball_dir=sp.ball_dir,
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
        void=hooks.launch_void,
        rotor_period_s=TWO_PI / abs(w_rotor),
    )
    b.spins.append(sp.rec)
    sp.first = t_launch + sp.rises[0] if sp.rises else None


def _drop(b: Builder, sp: Spin) -> None:
    """The ball's passes on the track sensors, then the drop truth."""
    n, track, rec, t_drop = sp.n, sp.track, sp.rec, sp.t_drop
    ball_pulses(b, track, sp.t_launch, t_drop)
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
    last = sp.t_launch + sp.rises[-1] if sp.rises else None
    b.unders.append((rec, sp.launch_truth, b.truth[-1][1], sp.first, last))
    if track.turns < 4 and rec.void is None:
        rec.void = proto.V_FEW_REVS
        b.say(t_drop, n, "void", reason=proto.V_FEW_REVS)


def _pockets(b: Builder, sp: Spin, landing: Landing) -> list[int]:
    """The pocket channel of each of the ball's hops (a bias or a steady hand may take its
    last hops on), and the scatter."""
    wheel, t_launch = b.wheel, sp.t_launch
    t_defl = t_launch + landing.t_deflector
    t_entry = t_launch + landing.t_entry
    b.rotor.coast(t_launch + landing.t_rest + 1.0)
    entry = pocket_at(b, landing.theta_entry, t_entry)
    entry_ch = round(entry) % wheel.n_pockets
    chans = [(entry_ch + h.offset) % wheel.n_pockets for h in landing.hops]
    if sp.throw is not None and sp.first is not None and sp.hand_rng is not None:
        # his habit's throw ends at his distance from the pocket under sensor A at the
        # first pass, the ball's way over the rotor, within the hand's width
        p = b.params
        u1 = wheel.pocket_under(b.rotor.phi(sp.first), wheel.ball_sensors_rad[0])
        j = int(sp.hand_rng.integers(0, p.steady_width)) - (p.steady_width - 1) // 2
        target = (u1 + sp.ball_dir * (sp.throw.distance + j)) % 39
        hop_to(sp.hand_rng, wheel, landing, chans, target)
    if b.params.biased:
        bias_rest(b, sp.n, landing, chans)
    impact = pocket_at(b, landing.theta_deflector, t_defl)
    sp.rec.scatter = round((entry - impact) * landing.rel_dir) + landing.scatter
    k = wheel.n_pockets
    at_drop = round(pocket_at(b, sp.track.theta_drop, sp.t_drop)) % k
    sp.rec.drop_offset = ((chans[-1] - at_drop) * sp.ball_dir + k // 2) % k - k // 2
    return chans


def _rest(b: Builder, sp: Spin, landing: Landing, chans: list[int]) -> dict[str, Any]:
    """The hops on the pocket sensors, the rest until the pick-up; the rest truth's fields."""
    wheel, t_launch, rec = b.wheel, sp.t_launch, sp.rec
    final = sp.final = chans[-1]
    for ch, hop in zip(chans, landing.hops, strict=True):
        t_out = None if hop.t_out is None else t_launch + hop.t_out
        b.occupy(ch, t_launch + hop.t_in, t_out)
    sp.t_rest = t_launch + landing.t_rest
    sp.t_pick = sp.t_rest + uniform(sp.rng, b.timing.hold_in_pocket_s)
    # Close the open stay: the croupier picks the ball up.
    lst = b.occupied[final]
    lst[-1] = (lst[-1][0], sp.t_pick)
    rec.rest_s, rec.pocket, rec.channel = sp.t_rest, wheel.pockets[final], final
    return {
        "pocket": wheel.pockets[final],
        "channel": final,
        "scatter": rec.scatter,
        "deflector": landing.deflector,
        "pickup_us": round(sp.t_pick * 1e6),
    }
