"""The attacker's physics: the ball's deceleration fitted on its clocked passes, the rotor's
phase fitted on its clocked mark passes, and where the ball leaves the track.

Ball (docs/sim.md): dΩ/dt = −αΩ² − β, which makes the speed² a simple function of the angle
(fit_ball). The drag is the ball's and the wheel's, the same every spin: it is learned from
the training spins, with the spread of the friction; each spin's friction and speed are
fitted on its own passes. The ball leaves the rim at a speed that is the wheel's own, also
learned from the training spins: the predicted drop is where the fitted speed falls to it.
The rotor coasts: a line through its mark passes, with its small bearing deceleration
learned from the training spins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

TWO_PI = 2.0 * math.pi
MIN_SIGMA_S = 0.001  # a clock is never better than a millisecond (weights stay finite)


@dataclass(frozen=True)
class Priors:
    """What the training spins taught of the wheel."""

    a: float  # the drag's factor per lap on the speed² (fit_ball)
    b: float  # the friction's loss of speed² per lap, (rev/s)² (median)
    b_sd: float  # its spread from spin to spin
    v_c: float  # (rev/s)², the ball's speed² when the rim lets it go
    rotor_accel: float  # rad/s², the rotor's deceleration while coasting (≥ 0)


@dataclass(frozen=True)
class BallFit:
    """The ball's speed² at lap position x (laps from its first clocked pass, a float),
    v(x) = A·a^x − B in (rev/s)², and the instant of the pass at x = 0 (`t0`)."""

    big_a: float
    a: float
    big_b: float
    t0: float
    laps: int  # the whole laps clocked

    def v(self, x: np.ndarray | float) -> np.ndarray | float:
        return self.big_a * self.a**x - self.big_b

    def x_at(self, v: float) -> float:
        """The lap position where the speed² falls to v (inf: never, on this fit)."""
        r = (v + self.big_b) / self.big_a
        if r <= 0 or (self.a >= 1.0 and r >= 1.0):
            return math.inf
        return math.log(r) / math.log(self.a) if self.a != 1.0 else math.inf

    def times(self, x_end: float, steps: int = 24) -> tuple[np.ndarray, np.ndarray]:
        """(x, t) on a grid from 0 to x_end: t(x) = t0 + ∫ dx/√v."""
        n = max(2, math.ceil(x_end * steps) + 1)
        x = np.linspace(0.0, x_end, n)
        v = np.maximum(np.asarray(self.v(x)), 1e-4)
        inv = 1.0 / np.sqrt(v)
        t = np.concatenate([[0.0], np.cumsum(0.5 * (inv[1:] + inv[:-1]) * np.diff(x))])
        return x, self.t0 + t


def fit_ball(
    passes: np.ndarray, sigma_s: float, a: float, b0: float, b_sd: float
) -> BallFit | None:
    """Fit the spin's clocked passes; None with fewer than two.

    With v = W² and the angle, dv/dθ = −2αv − 2β is linear, so the lap means u_n = 1/T_n²
    (rev/s)² follow u_(n+1) = a·u_n − b (rmcfw.rnvp): u_n = a^n·u_0 − b·(1 − a^n)/(1 − a),
    linear in (u_0, b) once the drag a is known (learned over the training spins). Each lap
    is weighted by its error (δu = 2·δT/T³), b has a prior from the training spins. The
    instant of the first pass is then placed by every pass (their mean residual)."""
    if passes.size < 2:
        return None
    laps = np.diff(passes)
    if np.any(laps <= 0):
        laps = np.maximum(laps, 1e-3)
    u = 1.0 / laps**2
    n = np.arange(laps.size, dtype=float)
    an = a**n
    cn = n if a == 1.0 else (1.0 - an) / (1.0 - a)
    sig = max(sigma_s, MIN_SIGMA_S)
    w = laps**6 / (8.0 * sig * sig)
    m = np.stack([an, -cn], axis=1)
    ata = m.T @ (m * w[:, None])
    atb = m.T @ (u * w)
    pw = 1.0 / max(b_sd, 1e-6) ** 2
    ata[1, 1] += pw
    atb[1] += pw * b0
    try:
        u0, b = np.linalg.solve(ata, atb)
    except np.linalg.LinAlgError:
        return None
    # u_n is the lap's mean: v at its middle, x = n + 1/2
    big_b = b / (1.0 - a) if a != 1.0 else 0.0
    if a == 1.0:
        return None
    big_a = (u0 + big_b) / a**0.5
    fit = BallFit(float(big_a), a, float(big_b), 0.0, int(laps.size))
    x, t = fit.times(float(laps.size))
    k = np.arange(passes.size, dtype=float)
    tk = np.interp(k, x, t)
    t0 = float(np.mean(passes - tk))
    return BallFit(float(big_a), a, float(big_b), t0, int(laps.size))


DRAGS = np.linspace(0.95, 0.9999, 200)  # the drag factors per lap tried (wheels: 0.95-1)


def drag_rss(passes: np.ndarray, sigma_s: float) -> np.ndarray | None:
    """For each drag factor of DRAGS, the weighted residual of one whole spin's lap means
    fitted as fit_ball does (u_0 and b free); None with fewer than four laps. Summed over
    the training spins, its least is the wheel's drag: the lap index is exact, so the
    clocking noise does not bias it (a regression of u_(n+1) on u_n would)."""
    laps = np.diff(passes)
    if laps.size < 4 or np.any(laps <= 0):
        return None
    u = 1.0 / laps**2
    sig = max(sigma_s, MIN_SIGMA_S)
    w = laps**6 / (8.0 * sig * sig)
    n = np.arange(laps.size, dtype=float)
    an = DRAGS[:, None] ** n[None, :]
    cn = (1.0 - an) / (1.0 - DRAGS[:, None])
    # 2x2 weighted normal equations for each drag, in closed form
    s11 = (an * an * w).sum(1)
    s12 = -(an * cn * w).sum(1)
    s22 = (cn * cn * w).sum(1)
    r1 = (an * u * w).sum(1)
    r2 = -(cn * u * w).sum(1)
    det = s11 * s22 - s12 * s12
    det = np.where(np.abs(det) < 1e-300, 1e-300, det)
    u0 = (s22 * r1 - s12 * r2) / det
    b = (s11 * r2 - s12 * r1) / det
    res = u[None, :] - (an * u0[:, None] - cn * b[:, None])
    return (res * res * w).sum(1)


@dataclass(frozen=True)
class RotorFit:
    """The rotor angle φ(t) (the stator angle of pockets[0]'s centre), unwrapped."""

    t_ref: float
    phi0: float
    omega: float
    accel: float

    def phi(self, t: float | np.ndarray) -> float | np.ndarray:
        x = t - self.t_ref
        return self.phi0 + self.omega * x + 0.5 * self.accel * x * x


def fit_rotor(marks: np.ndarray, mark_rad: float, direction: int, accel: float) -> RotorFit | None:
    """A line (plus the known coasting deceleration) through the mark passes; None with
    fewer than two."""
    if marks.size < 2:
        return None
    t_ref = float(marks[-1])
    x = marks - t_ref
    # one turn between marks, the last one at mark_rad
    phi = mark_rad + direction * TWO_PI * (np.arange(marks.size, dtype=float) - (marks.size - 1))
    a = -direction * accel  # the bearing slows it: against its direction
    y = phi - 0.5 * a * x * x
    if marks.size == 2:
        w = (y[1] - y[0]) / (x[1] - x[0])
        return RotorFit(t_ref, float(y[1]), float(w), a)
    w, p0 = np.polyfit(x, y, 1)
    return RotorFit(t_ref, float(p0), float(w), a)


def fit_rotor_accel(marks: np.ndarray, direction: int) -> float | None:
    """The rotor's coasting deceleration (rad/s², ≥ 0 when slowing) from a whole spin's mark
    passes; None with fewer than four."""
    if marks.size < 4:
        return None
    x = marks - marks[-1]
    phi = direction * TWO_PI * np.arange(marks.size, dtype=float)
    c2 = np.polyfit(x, phi, 2)[0]
    return float(-2.0 * c2 * direction)
