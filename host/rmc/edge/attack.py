"""The attacker's view of a spin at the moment bets close: its clocks (with their noise), what
it fits, and where it predicts the ball leaves the track relative to the rotor.

The device clocks every ball pass and rotor mark pass with a Gaussian error of `noise_ms`;
at the cut (the instant it must have bet) it has seen only the passes before it. It knows
the ball's and the rotor's directions (it sees them) and when the spin was launched.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rmc.edge.observe import Geometry, SpinObs
from rmc.edge.physics import (
    DRAGS,
    Priors,
    RotorFit,
    drag_rss,
    fit_ball,
    fit_rotor,
    fit_rotor_accel,
)

TWO_PI = 2.0 * math.pi
# Rotor marks before the launch that the device uses: the croupier's push ends 3-6 s before
# it (docs/sim.md), so marks from then on are of the rotor coasting.
ROTOR_BEFORE_S = 3.0
MAX_AHEAD = 40  # laps: a prediction further ahead is no prediction


@dataclass
class Clocked:
    """One spin as the device clocked it at one noise level."""

    obs: SpinObs
    passes: np.ndarray  # s, noisy
    marks: np.ndarray  # s, noisy
    sigma_s: float


def clock(spins: Sequence[SpinObs], noise_ms: float, seed: int = 0) -> list[Clocked]:
    """Each spin's passes with the device's clocking error; the same draws for a spin and a
    noise level whatever the cut, so that leads compare on the same clocks."""
    out = []
    sigma = noise_ms / 1000.0
    for o in spins:
        rng = np.random.default_rng([seed, o.spin, round(noise_ms * 1000), 0xED6E])
        p = o.passes + rng.normal(0.0, sigma, o.passes.size) if sigma else o.passes.copy()
        m = o.marks + rng.normal(0.0, sigma, o.marks.size) if sigma else o.marks.copy()
        out.append(Clocked(o, p, m, sigma))
    return out


@dataclass(frozen=True)
class Prediction:
    """Where the attacker expects the ball to leave the track: the instant, the stator angle,
    and the rotor's fitted motion. None fields: too little seen to say."""

    t_drop: float
    theta_drop: float
    rotor: RotorFit


def seen(c: Clocked, cut: float) -> tuple[np.ndarray, np.ndarray]:
    """The passes and rotor marks that happened before the cut (as the device clocked
    them); rotor marks from ROTOR_BEFORE_S before the launch, or the last two before."""
    o = c.obs
    p = c.passes[o.passes < cut]
    before = o.marks < cut
    m_ok = before & (o.marks >= o.launch_s - ROTOR_BEFORE_S)
    if m_ok.sum() < 2:
        idx = np.nonzero(before)[0][-2:]
        m_ok = np.zeros_like(before)
        m_ok[idx] = True
    return p, c.marks[m_ok]


def predict(c: Clocked, cut: float, geo: Geometry, pri: Priors) -> Prediction | None:
    """The attacker's prediction with what it saw before `cut`; None with too little."""
    passes, marks = seen(c, cut)
    fit = fit_ball(passes, c.sigma_s, pri.a, pri.b, pri.b_sd)
    rot = fit_rotor(marks, geo.mark_rad, c.obs.rotor_dir, pri.rotor_accel)
    if fit is None or rot is None:
        return None
    x_d = fit.x_at(pri.v_c)
    if not x_d < fit.laps + MAX_AHEAD:
        return None  # a fit that sees the ball hardly slowing: no prediction
    x_d = max(x_d, float(fit.laps))
    _, t = fit.times(x_d)
    t_drop = max(float(t[-1]), cut)  # not dropped yet (the device would see it)
    theta = geo.ball_rad + c.obs.ball_dir * TWO_PI * x_d
    return Prediction(t_drop, theta, rot)


def learn_priors(train: Sequence[Clocked], geo: Geometry) -> Priors:
    """The wheel's ball drag, friction and drop speed, and the rotor's coasting drag, from
    whole training spins (every pass to the drop, as clocked)."""
    rss = [r for r in (drag_rss(c.passes, c.sigma_s) for c in train) if r is not None]
    if len(rss) < 3:
        raise ValueError("too few training spins with four laps or more to learn the wheel")
    a = float(DRAGS[int(np.argmin(np.sum(rss, axis=0)))])
    bs, vcs, accels = [], [], []
    for c in train:
        o = c.obs
        fit = fit_ball(c.passes, c.sigma_s, a, 0.0, 1e6) if c.passes.size >= 5 else None
        if fit is not None:
            bs.append(fit.big_b * (1.0 - a))
            x, t = fit.times(fit.laps + 2.0)
            vcs.append(float(fit.v(float(np.interp(o.drop_s, t, x)))))
        m = c.marks[(o.marks >= o.launch_s - ROTOR_BEFORE_S)]
        acc = fit_rotor_accel(m, o.rotor_dir)
        if acc is not None:
            accels.append(acc)
    if len(bs) < 3:
        raise ValueError("too few training spins with four laps or more to learn the wheel")
    b = statistics.median(bs)
    mad = statistics.median(abs(x - b) for x in bs)
    return Priors(
        a=a,
        b=b,
        b_sd=max(1.4826 * mad, 0.02 * abs(b)),
        v_c=statistics.median(vcs),
        rotor_accel=max(0.0, statistics.median(accels)) if accels else 0.0,
    )


def reference(pred: Prediction | None, geo: Geometry, tau: float) -> float:
    """The pocket (a continuous channel index) under the predicted drop point, with the rotor
    where it will be `tau` seconds after the drop; NaN without a prediction."""
    if pred is None:
        return math.nan
    phi = float(pred.rotor.phi(pred.t_drop + tau))
    return ((pred.theta_drop - phi) / geo.pocket_rad) % geo.n_pockets
