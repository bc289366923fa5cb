"""The physics of one spin: ball on the track, drop, spiral, deflectors, pockets; the rotor.

Track (DESIGN.md): dΩ/dt = −αΩ|Ω| − β·sign(Ω) − (g·sin τ / R)·sin(θ − ψ)
  α  air drag of the ball, from its size and mass (½ρC_dA·R/m);
  β  rolling friction in the groove, μ·g/R;
  τ, ψ  the table's tilt and its direction: gravity's pull along the tilted track.
The ball leaves the rim when R·Ω² < g·tan δ(θ), δ the angle at which the rim groove holds the
ball, steeper on the tilt's low side. See docs/sim.md for why δ is not the 5° cone slope.

After the drop the ball spirals down the cone, meets the deflector ring (it strikes the next
deflector ahead or slips between two), and reaches the pocket ring, where it hops from pocket to
pocket in the rotor's frame until the frets have taken its energy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from rmc.sim.wheel import Wheel

G = 9.81
AIR_DENSITY = 1.2
TWO_PI = 2.0 * math.pi


@dataclass(frozen=True)
class Params:
    """A wheel's physical parameters: centre values and how much they vary.

    `*_spread` are spin-to-spin variations (relative standard deviations unless said);
    `drift_*` are slow session drifts (random walk per spin, pulled back to the centre).
    """

    # Ball (a resin/PTFE ball of 20 mm).
    ball_diameter_m: float = 0.020
    ball_mass_kg: float = 0.0065
    # Drag coefficient: a free sphere has ≈0.45; rolling in the groove, in the wall's boundary
    # layer, the ball sees much less (calibrated on the published lap growth, see docs/sim.md).
    drag_cd: float = 0.05
    # Rim groove: effective holding angle δ (drop when R·Ω² < g·tan δ) and rolling friction μ.
    # δ is a property of the wheel's track (wheel.json geometry.drop_angle_deg, used when this
    # is None); the ball seats a little differently each spin, hence a small spread.
    groove_angle_deg: float | None = None
    groove_tan_spread: float = 0.02  # lognormal σ of tan δ from spin to spin (ball seating)
    # Lognormal σ of tan δ from wheel to wheel, drawn once per session (0: the wheel of
    # wheel.json). Published figures are over many wheels: 0.45 spreads the last lap 0.6-2 s.
    wheel_spread: float = 0.0
    rolling_friction: float = 0.030
    rolling_friction_spread: float = 0.12
    # Lap-to-lap irregularity of the ball on the track (docs/sim.md, "What is random"): the
    # groove's friction is redrawn for every turn of the ball, β·exp(track_noise·z −
    # track_noise²/2), z standard normal (clipped at ±3), from the spin's noise stream; a
    # lasting change of speed. 0 with track_wobble 0: the old deterministic track.
    track_noise: float = 0.05
    # The ball's wobble about its mean motion (rad, σ of a value drawn each turn, smoothly
    # joined): it rides up and down the banked groove, trading speed for height and back, so
    # its passes come early or late without a lasting change of speed. Same stream.
    track_wobble: float = 0.02
    # Table tilt: a level wheel is never quite level.
    tilt_deg: float = 0.12
    tilt_dir_deg: float = 200.0
    # Croupier's launch: period of the ball's first turn (s), uniform in this range.
    launch_period_s: tuple[float, float] = (0.40, 0.60)
    # Rotor: period just after the croupier's push (s), uniform, and its bearing friction.
    rotor_period_s: tuple[float, float] = (3.0, 4.3)
    rotor_friction: float = 0.004  # rad/s² of bearing drag
    # After the drop.
    spiral_time_s: tuple[float, float] = (0.5, 1.1)
    deflector_hit_prob: float = 0.7
    deflector_restitution: tuple[float, float] = (0.25, 0.6)
    deflector_reverse_prob: float = 0.05
    fret_decel: float = 4.5  # rad/s² of relative deceleration while hopping over frets
    pocket_entry_speed: float = 0.55  # fraction of the ball's speed kept when it meets the rotor
    # Session drift: how far (relative) the centre values wander over a session.
    drift_sigma: float = 0.015
    # The drop angle drifts slower (the track warms, dust settles): it is the wheel's own.
    drift_groove_sigma: float = 0.005
    drift_pull: float = 0.05
    # Integration step of the track model (s).
    dt_s: float = 0.004
    # A biased wheel (issue 24), applied at the ball's resting pocket; strength 0 is a fair
    # wheel, and then nothing is drawn: the seed streams stay as they were. A sticky pocket
    # (a loose fret, a worn pocket) holds the ball more often: with probability
    # `sticky_strength` the ball's last hops take it into `sticky_pocket`. A rotor out of
    # level: with probability `low_sector_strength` they carry it down into the low sector,
    # `low_sector_width` pockets centred on `low_sector`, any of them alike. On a fair
    # physics the pocket then comes out (1 − s)/39 + s, a sector pocket (1 − s)/39 + s/width.
    sticky_pocket: str | None = None
    sticky_strength: float = 0.0
    low_sector: str | None = None
    low_sector_width: int = 5
    low_sector_strength: float = 0.0
    # A croupier with a steady launch (issue 24, the dealer's signature). With probability
    # `steady_hand` a throw is his habit's: the rotor pushed to the same period, the ball
    # released at the same place with the same speed, wherever the rotor's pockets are then;
    # such a throw ends where it ended before, `steady_width` pockets wide around his
    # distance from the pocket under ball sensor A at its first pass (the ball's way over
    # the rotor). The physics' spin-to-spin spreads (friction ±12 %, the drop angle, the
    # scatter) stand for varied throws here: a throw repeated exactly would repeat them, so
    # the habit's end is placed as the biases above are, by its last hops. 0: a regular
    # hand, and nothing is drawn: the seed streams stay as they were.
    steady_hand: float = 0.0
    steady_width: int = 5

    def __post_init__(self) -> None:
        checks = {
            "ball_diameter_m": self.ball_diameter_m > 0,
            "ball_mass_kg": self.ball_mass_kg > 0,
            "groove_angle_deg": self.groove_angle_deg is None or 0 < self.groove_angle_deg < 85,
            "spreads": self.groove_tan_spread >= 0 and self.wheel_spread >= 0,
            "rolling_friction": self.rolling_friction > 0,
            "track_noise": 0 <= self.track_noise <= 2 and 0 <= self.track_wobble <= 0.5,
            "launch_period_s": 0 < self.launch_period_s[0] <= self.launch_period_s[1],
            "rotor_period_s": 0 < self.rotor_period_s[0] <= self.rotor_period_s[1],
            "spiral_time_s": 0 < self.spiral_time_s[0] <= self.spiral_time_s[1],
            "deflector_hit_prob": 0 <= self.deflector_hit_prob <= 1,
            "fret_decel": self.fret_decel > 0,
            "dt_s": 0 < self.dt_s <= 0.02,
            "sticky_strength": 0 <= self.sticky_strength <= 1
            and (self.sticky_pocket is not None or not self.sticky_strength),
            "low_sector_strength": 0 <= self.low_sector_strength <= 1
            and self.sticky_strength + self.low_sector_strength <= 1
            and (self.low_sector is not None or not self.low_sector_strength),
            "low_sector_width": 1 <= self.low_sector_width <= 19,
            "steady_hand": 0 <= self.steady_hand <= 1,
            "steady_width": 1 <= self.steady_width <= 39,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"bad simulator parameters: {', '.join(bad)}")

    @property
    def biased(self) -> bool:
        return bool(self.sticky_strength or self.low_sector_strength)

    def bias(self) -> dict[str, object]:
        """The bias as a trace header records it (empty for a fair wheel)."""
        out: dict[str, object] = {}
        if self.sticky_strength:
            out["sticky"] = {"pocket": self.sticky_pocket, "strength": self.sticky_strength}
        if self.low_sector_strength:
            out["low_sector"] = {
                "pocket": self.low_sector,
                "width": self.low_sector_width,
                "strength": self.low_sector_strength,
            }
        if self.steady_hand:
            out["steady_hand"] = {"strength": self.steady_hand, "width": self.steady_width}
        return out

    def with_(self, **changes: object) -> Params:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Hand:
    """A steady croupier's habit, drawn once a session: where he releases the ball, the
    ball's first turn, the rotor's period after his push, and the distance (pockets, the
    ball's way over the rotor) from the pocket under ball sensor A at the ball's first pass
    to where his throw ends."""

    angle: float
    launch_period_s: float
    rotor_period_s: float
    distance: int

    @classmethod
    def draw(cls, rng: np.random.Generator, p: Params) -> Hand:
        return cls(
            angle=float(rng.uniform(0, TWO_PI)),
            launch_period_s=float(rng.uniform(*p.launch_period_s)),
            rotor_period_s=float(rng.uniform(*p.rotor_period_s)),
            distance=int(rng.integers(0, 39)),
        )


@dataclass
class Drift:
    """Multiplicative factors that wander slowly over a session (one step per spin)."""

    groove: float = 1.0
    wheel: float = 1.0  # this session's wheel: tan δ relative to the nominal (fixed)
    friction: float = 1.0
    tilt_dir: float = 0.0  # radians added to the tilt direction

    def step(self, rng: np.random.Generator, p: Params) -> None:
        # Ornstein-Uhlenbeck steps: a warming wheel wanders but does not run away.
        self.groove += -p.drift_pull * (self.groove - 1.0) + p.drift_groove_sigma * rng.normal()
        self.friction += -p.drift_pull * (self.friction - 1.0) + p.drift_sigma * rng.normal()
        self.tilt_dir += -p.drift_pull * self.tilt_dir + 2 * p.drift_sigma * rng.normal()


@dataclass(frozen=True)
class SpinSetup:
    """What one spin starts from: drawn by `draw_setup`, or set by a scenario."""

    ball_dir: int  # +1 clockwise, −1 counter-clockwise
    omega0: float  # ball speed at release (rad/s, magnitude)
    theta0: float  # stator angle of release (rad)
    tan_groove: float
    beta: float
    alpha: float
    tilt: float
    tilt_dir: float
    # Per-turn friction factors (turn k since the release: β·lap_friction[k]); empty: none.
    lap_friction: tuple[float, ...] = ()
    # Per-turn wobble of the ball's angle (rad, turn k since the release); empty: none.
    wobble: tuple[float, ...] = ()


# Turns of the track noise drawn per launch (a spin gives at most ≈30 turns; beyond, the last).
NOISE_TURNS = 64


def track_irregularity(rng: np.random.Generator, p: Params, s: SpinSetup) -> SpinSetup:
    """The spin's setup with its per-turn friction factors (Params.track_noise) and wobble
    (Params.track_wobble) drawn from `rng` (the spin's noise stream)."""
    if p.track_noise:
        # log-normal, mean 1: friction never turns negative, whatever the spread
        z = np.clip(rng.standard_normal(NOISE_TURNS), -3.0, 3.0)
        sig = p.track_noise
        s = replace(s, lap_friction=tuple(float(x) for x in np.exp(sig * z - 0.5 * sig * sig)))
    if p.track_wobble:
        w = p.track_wobble * np.clip(rng.standard_normal(NOISE_TURNS + 1), -3.0, 3.0)
        w[0] = 0.0  # released where the croupier's hand is
        s = replace(s, wobble=tuple(float(x) for x in w))
    return s


def wobbled(theta: np.ndarray, theta0: float, wobble: Sequence[float]) -> np.ndarray:
    """Angles with the ball's wobble added: a value each turn since the release, joined by a
    half cosine (the angle stays monotonic: the wobble changes by far less than a turn)."""
    w = np.asarray(wobble, float)
    u = np.minimum(np.abs(theta - theta0) / TWO_PI, w.size - 1.000001)
    i = u.astype(int)
    s = 0.5 - 0.5 * np.cos(math.pi * (u - i))
    return theta + w[i] * (1.0 - s) + w[i + 1] * s


def draw_setup(
    rng: np.random.Generator, wheel: Wheel, p: Params, drift: Drift, ball_dir: int
) -> SpinSetup:
    angle = wheel.drop_angle_rad if p.groove_angle_deg is None else math.radians(p.groove_angle_deg)
    tan_g = math.tan(angle) * drift.wheel * drift.groove
    tan_g *= math.exp(p.groove_tan_spread * float(np.clip(rng.normal(), -2.5, 2.5)))
    mu = p.rolling_friction * drift.friction
    mu *= 1.0 + p.rolling_friction_spread * float(np.clip(rng.normal(), -2.5, 2.5))
    area = math.pi * (p.ball_diameter_m / 2) ** 2
    alpha = AIR_DENSITY * p.drag_cd * area * wheel.track_radius_m / (2 * p.ball_mass_kg)
    period0 = float(rng.uniform(*p.launch_period_s))
    return SpinSetup(
        ball_dir=ball_dir,
        omega0=TWO_PI / period0,
        theta0=float(rng.uniform(0, TWO_PI)),
        tan_groove=tan_g,
        beta=mu * G / wheel.track_radius_m,
        alpha=alpha,
        tilt=math.radians(p.tilt_deg),
        tilt_dir=math.radians(p.tilt_dir_deg) + drift.tilt_dir,
    )


def drop_speed(wheel: Wheel, s: SpinSetup) -> float:
    """Speed (rad/s) below which a level wheel's rim no longer holds the ball."""
    return math.sqrt(G * s.tan_groove / wheel.track_radius_m)


@dataclass
class Track:
    """The ball's run on the track: angle samples until the drop (times from the release)."""

    t: np.ndarray  # s
    theta: np.ndarray  # rad, unwrapped, signed (clockwise positive)
    omega: np.ndarray  # rad/s, signed
    t_drop: float
    theta_drop: float
    omega_drop: float

    @property
    def turns(self) -> float:
        """Turns the ball made on the track, launch to drop."""
        return abs(self.theta_drop - self.theta[0]) / TWO_PI

    def passes(self, sensor_angle: float) -> np.ndarray:
        """Times (s) at which the ball passes a stator angle, before the drop."""
        th = self.theta
        lo, hi = np.minimum(th[:-1], th[1:]), np.maximum(th[:-1], th[1:])
        k_lo = np.ceil((lo - sensor_angle) / TWO_PI)
        k_hi = np.floor((hi - sensor_angle) / TWO_PI)
        out: list[float] = []
        # The ball never turns back on the track, so each step holds at most one crossing.
        for i in np.nonzero(k_hi >= k_lo)[0]:
            target = sensor_angle + TWO_PI * k_lo[i]
            frac = (target - th[i]) / (th[i + 1] - th[i])
            out.append(float(self.t[i] + frac * (self.t[i + 1] - self.t[i])))
        return np.asarray(out)

    def lap_periods(self, sensor_angle: float) -> np.ndarray:
        return np.diff(self.passes(sensor_angle))


def run_track(wheel: Wheel, s: SpinSetup, dt: float, max_time: float = 120.0) -> Track:
    """Integrate the ball on the track (midpoint rule) until the rim lets it go."""
    r = wheel.track_radius_m
    k_tilt = G * math.sin(s.tilt) / r
    tan_d = math.tan(math.atan(s.tan_groove))
    sec2 = 1.0 + tan_d * tan_d
    g_over_r = G / r

    # The groove's friction for each turn since the release (one value: an even track); a
    # step takes the value of the turn it starts in.
    betas = [s.beta * f for f in s.lap_friction] or [s.beta]
    beta, turn, edge, last = betas[0], 0, TWO_PI, len(betas) - 1

    def accel(th: float, om: float, beta: float) -> float:
        sgn = 1.0 if om > 0 else -1.0
        return -s.alpha * om * om * sgn - beta * sgn - k_tilt * math.sin(th - s.tilt_dir)

    def held(th: float, om: float) -> float:
        # >0 while the rim holds the ball; the tilt steepens the groove on its low side
        # (tan(δ+ε) ≈ tan δ + ε·sec²δ).
        lim = g_over_r * (tan_d + s.tilt * math.cos(th - s.tilt_dir) * sec2)
        return om * om - lim

    th, om, t = s.theta0, s.omega0 * s.ball_dir, 0.0
    ts, ths, oms = [t], [th], [om]
    h_prev = held(th, om)
    if h_prev <= 0:
        raise ValueError("launch speed too low: the ball falls off the rim at once")
    while True:
        if turn < last and abs(th - s.theta0) >= edge:
            turn, edge = turn + 1, edge + TWO_PI
            beta = betas[turn]
        a1 = accel(th, om, beta)
        thm, omm = th + 0.5 * dt * om, om + 0.5 * dt * a1
        a2 = accel(thm, omm, beta)
        th_n, om_n = th + dt * omm, om + dt * a2
        h_n = held(th_n, om_n)
        if h_n <= 0 or om_n * om <= 0:
            # The crossing inside this step, by linear interpolation of the margin.
            frac = h_prev / (h_prev - h_n) if h_prev != h_n else 1.0
            frac = min(max(frac, 0.0), 1.0)
            t_d = t + frac * dt
            th_d = th + frac * (th_n - th)
            om_d = om + frac * (om_n - om)
            ts.append(t_d)
            ths.append(th_d)
            oms.append(om_d)
            theta = np.asarray(ths)
            if s.wobble:
                theta = wobbled(theta, s.theta0, s.wobble)
                th_d = float(theta[-1])
            return Track(np.asarray(ts), theta, np.asarray(oms), t_d, th_d, om_d)
        t, th, om, h_prev = t + dt, th_n, om_n, h_n
        ts.append(t)
        ths.append(th)
        oms.append(om)
        if t > max_time:
            raise ValueError("the ball never leaves the track: check the parameters")


@dataclass(frozen=True)
class Hop:
    """The ball in a pocket between two hops (times from the release, s)."""

    offset: int  # pockets from the entry pocket, in the rotor's frame
    t_in: float
    t_out: float | None  # None: it stays (at rest)


@dataclass
class Landing:
    """From the drop to rest."""

    t_deflector: float  # the ball meets the deflector ring
    theta_deflector: float  # stator angle of that meeting
    deflector: int | None  # index in wheel.json deflectors_deg, or None if it slipped between
    t_entry: float  # first touch of the pocket ring
    theta_entry: float
    rel_dir: int  # direction of the ball's travel over the rotor (+1 cw)
    hops: list[Hop] = field(default_factory=list)

    @property
    def scatter(self) -> int:
        """Pockets from the entry pocket to the final one (signed, ball's way positive)."""
        return self.hops[-1].offset * self.rel_dir

    @property
    def t_rest(self) -> float:
        return self.hops[-1].t_in


def land(
    rng: np.random.Generator,
    wheel: Wheel,
    p: Params,
    track: Track,
    rotor_omega: float,
) -> Landing:
    """The ball's way from the drop to rest (rotor_omega: signed rotor speed at the drop)."""
    d = 1 if track.omega_drop > 0 else -1
    w_drop = abs(track.omega_drop)
    # Spiral: angular momentum is kept as the radius shrinks, friction takes a share.
    t_sp = float(rng.uniform(*p.spiral_time_s))
    w_ring = w_drop * (wheel.track_radius_m / wheel.deflector_radius_m) ** 2 * 0.7
    th = track.theta_drop + d * 0.5 * (w_drop + w_ring) * t_sp
    t = track.t_drop + t_sp
    t, th, deflector, w_after, d_after = _deflect(rng, wheel, p, t, th, d, w_ring)
    # Short fall from the deflector ring to the pockets.
    t_fall = float(rng.uniform(0.12, 0.3))
    w_ball = w_after * (wheel.deflector_radius_m / wheel.pocket_radius_m) * p.pocket_entry_speed
    t_entry = t + t_fall
    th_entry = th + d_after * w_ball * t_fall
    # Over the rotor the ball moves at its own speed minus the rotor's (they are opposed in a
    # regular spin, so the speeds add up).
    w_rel = d_after * w_ball - rotor_omega
    rel_dir = 1 if w_rel > 0 else -1
    w_rel = abs(w_rel)
    # Distance in the rotor frame until the frets have taken the relative speed.
    dist = w_rel * w_rel / (2 * p.fret_decel)
    hops = _hops(rng, t_entry, round(dist / wheel.pocket_angle), rel_dir)
    return Landing(t - 0.0, th, deflector, t_entry, th_entry, rel_dir, hops)


def _deflect(
    rng: np.random.Generator,
    wheel: Wheel,
    p: Params,
    t: float,
    th: float,
    d: int,
    w_ring: float,
) -> tuple[float, float, int | None, float, int]:
    """At the deflector ring: (time, angle, deflector struck or None, speed, direction)."""
    if rng.random() < p.deflector_hit_prob:
        # It strikes the first deflector ahead, unless that one is more than a gap away.
        ahead = [((d * (a - th)) % TWO_PI, i) for i, a in enumerate(wheel.deflectors_rad)]
        gap, idx = min(ahead)
        w_after = w_ring * float(rng.uniform(*p.deflector_restitution))
        # a square hit can throw the ball back
        d_after = -d if rng.random() < p.deflector_reverse_prob else d
        return t + gap / w_ring, th + d * gap, idx, w_after, d_after
    return t, th, None, w_ring * float(rng.uniform(0.6, 0.85)), d


def _hops(rng: np.random.Generator, t_entry: float, total: int, rel_dir: int) -> list[Hop]:
    """The ball's stays in the pockets, `total` pockets on in the rotor's frame, then rest."""
    hops: list[Hop] = []
    t_now, pos, left = t_entry, 0, total
    while left > 0:
        # Sits in the pocket briefly, then hops on: long hops early, short ones late.
        stay = float(rng.uniform(0.03, 0.09))
        hops.append(Hop(pos * rel_dir, t_now, t_now + stay))
        step = max(1, min(left, int(rng.integers(1, 3 + left // 3))))
        pos += step
        left -= step
        t_now += stay + float(rng.uniform(0.10, 0.22)) * math.sqrt(step)
    # The last bounces: sometimes back one pocket and in again, then the rattle before rest.
    if rng.random() < 0.3:
        hops.append(Hop(pos * rel_dir, t_now, t_now + float(rng.uniform(0.02, 0.05))))
        t_now += float(rng.uniform(0.12, 0.25))
        pos -= 1
    for _ in range(int(rng.integers(0, 3))):
        hops.append(Hop(pos * rel_dir, t_now, t_now + float(rng.uniform(0.01, 0.03))))
        t_now += float(rng.uniform(0.02, 0.08))
    hops.append(Hop(pos * rel_dir, t_now, None))
    return hops
