"""The attacker scored: it learns from the training spins (the first ones), bets N pleins on
each later spin with what it saw before the cut, and its return per unit staked is counted
on those held-out spins only, with a 95 % confidence interval.

A plein pays 35 to 1 (decree 1-5, `rmc.layout.PAYOUT`): staking one unit on each of N
pockets, a spin returns (36·hit − N)/N per unit staked. On a fair guess that is −3/39.

The cut is the instant the attacker must have bet by: a fixed lead before the drop, a lead in
revolutions (the pass that many laps before the last), a random moment in a window before a
lead, or the firmware's own call (rmc.edge.calls).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rmc.edge.attack import Clocked, clock, learn_priors, predict, reference
from rmc.edge.observe import Geometry, SpinObs
from rmc.edge.physics import Priors
from rmc.edge.scatter import TAUS, learn
from rmc.layout import PAYOUT, PLEIN

WIN = PAYOUT[PLEIN] + 1  # a winning plein gives back its stake and 35 more
Z95 = 1.959964


@dataclass(frozen=True)
class Cut:
    """When bets close for the attacker. kind: `lead` (value s before the drop), `revs` (at
    the pass `value` laps before the last), `window` (a moment drawn uniformly from value to
    value + width s before the drop), `calls` (instants given per spin: the firmware's or a
    recording's)."""

    kind: str
    value: float = 0.0
    width: float = 0.0
    name: str = ""

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.kind == "lead":
            return f"{self.value:g} s"
        if self.kind == "revs":
            return f"{self.value:g} rev"
        if self.kind == "window":
            return f"{self.value:g}-{self.value + self.width:g} s"
        return self.kind

    def times(
        self, spins: Sequence[SpinObs], seed: int, calls: Mapping[int, float] | None = None
    ) -> np.ndarray:
        """The cut instant of each spin."""
        if self.kind == "lead":
            return np.asarray([o.drop_s - self.value for o in spins])
        if self.kind == "revs":
            r = int(self.value)
            return np.asarray(
                [o.passes[-1 - r] + 1e-6 if o.passes.size > r else o.launch_s for o in spins]
            )
        if self.kind == "window":
            out = []
            for o in spins:
                u = np.random.default_rng([seed, o.spin, 0x71D]).random()
                out.append(o.drop_s - self.value - u * self.width)
            return np.asarray(out)
        if self.kind == "calls":
            if calls is None:
                raise ValueError("a cut at the calls needs the calls")
            return np.asarray([calls.get(o.spin, o.drop_s) for o in spins])
        raise ValueError(f"unknown cut {self.kind!r}")


@dataclass
class Outcome:
    """The attacker's return at one cut and one clocking noise, over the held-out spins."""

    cut: str
    kind: str  # the Cut's
    value: float
    noise_ms: float
    pleins: int
    train: int
    test: int
    mean: float  # expected return per unit staked
    lo: float  # its 95 % confidence interval
    hi: float
    hit_rate: float
    lead_s: float  # median of drop − cut over the held-out spins
    lead_revs: float  # median laps the ball still ran after the cut
    tau: float
    width: float = 0.0
    test_spins: list[int] = field(default_factory=list, repr=False)
    bets: list[list[int]] = field(default_factory=list, repr=False)
    returns: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def as_dict(self) -> dict:
        return {
            "cut": self.cut,
            "kind": self.kind,
            "value": self.value,
            "width": self.width,
            "noise_ms": self.noise_ms,
            "pleins": self.pleins,
            "train": self.train,
            "test": self.test,
            "return": round(self.mean, 4),
            "ci95": [round(self.lo, 4), round(self.hi, 4)],
            "hit_rate": round(self.hit_rate, 4),
            "lead_s": round(self.lead_s, 3),
            "lead_revs": round(self.lead_revs, 2),
            "tau_s": self.tau,
        }


def interval(returns: np.ndarray) -> tuple[float, float, float]:
    """Mean and normal 95 % interval of per-spin returns."""
    n = returns.size
    m = float(returns.mean())
    if n < 2:
        return m, -math.inf, math.inf
    half = Z95 * float(returns.std(ddof=1)) / math.sqrt(n)
    return m, m - half, m + half


class Attacker:
    """One noise level's clocks and what the training spins taught."""

    def __init__(
        self, spins: Sequence[SpinObs], geo: Geometry, noise_ms: float, train: int, seed: int = 0
    ) -> None:
        if not 0 < train < len(spins):
            raise ValueError(
                f"--train {train}: there are {len(spins)} valid spins; "
                "at least one must be left to test on"
            )
        self.spins = list(spins)
        self.geo = geo
        self.noise_ms = noise_ms
        self.train = train
        self.seed = seed
        self.clocked: list[Clocked] = clock(self.spins, noise_ms, seed)
        self.priors: Priors = learn_priors(self.clocked[:train], geo)

    def run(self, cut: Cut, pleins: int, calls: Mapping[int, float] | None = None) -> Outcome:
        geo, n_tr = self.geo, self.train
        cuts = cut.times(self.spins, self.seed, calls)
        preds = [
            predict(c, float(t), geo, self.priors) for c, t in zip(self.clocked, cuts, strict=True)
        ]
        tr = slice(0, n_tr)
        results = np.asarray([o.result for o in self.spins], dtype=float)
        dirs = np.asarray([o.ball_dir for o in self.spins], dtype=float)
        refs_by_tau = [np.asarray([reference(p, geo, tau) for p in preds[tr]]) for tau in TAUS]
        sc = learn(refs_by_tau, results[tr], dirs[tr], geo.n_pockets)
        dens = sc.density()
        bets, rets, leads, revs = [], [], [], []
        test = self.spins[n_tr:]
        for o, p, t in zip(test, preds[n_tr:], cuts[n_tr:], strict=True):
            b = sc.bets(reference(p, geo, sc.tau), o.ball_dir, pleins, dens)
            bets.append(b)
            rets.append((WIN * (o.result in b) - pleins) / pleins)
            leads.append(o.drop_s - t)
            revs.append(float((o.passes >= t).sum()))
        r = np.asarray(rets)
        m, lo, hi = interval(r)
        return Outcome(
            cut=cut.label,
            kind=cut.kind,
            value=cut.value,
            width=cut.width,
            noise_ms=self.noise_ms,
            pleins=pleins,
            train=n_tr,
            test=len(test),
            mean=m,
            lo=lo,
            hi=hi,
            hit_rate=float(np.mean([o.result in b for o, b in zip(test, bets, strict=True)])),
            lead_s=float(np.median(leads)),
            lead_revs=float(np.median(revs)),
            tau=sc.tau,
            test_spins=[o.spin for o in test],
            bets=bets,
            returns=r,
        )


def house_edge(pleins: int = 9) -> float:
    """The return of pleins bet blind on 39 pockets: −3/39."""
    return (WIN * pleins / 39 - pleins) / pleins


@dataclass(frozen=True)
class BreakEven:
    """Where the attacker's return turns negative as the lead grows, at one noise level.
    `point_s`: where the point estimate crosses 0 for good (linear between the two leads
    around it); `ci_s`: the shortest lead measured whose upper 95 % bound is below 0, the
    point estimate staying below 0 from there (safe_from). None: not within the leads
    measured; `below` True: the point estimate is below 0 from the shortest lead."""

    noise_ms: float
    point_s: float | None
    ci_s: float | None
    below: bool = False

    def as_dict(self) -> dict:
        return {"noise_ms": self.noise_ms, "point_s": _r(self.point_s), "ci_s": _r(self.ci_s)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def break_even(leads: Sequence[float], outs: Sequence[Outcome]) -> BreakEven:
    """leads ascending, outs their outcomes at one noise level."""
    noise = outs[0].noise_ms if outs else 0.0
    means = [o.mean for o in outs]
    his = [o.hi for o in outs]
    above = [i for i, m in enumerate(means) if m >= 0]
    if not above:
        point = leads[0]
    elif above[-1] == len(leads) - 1:
        point = None
    else:
        i = above[-1]
        m0, m1 = means[i], means[i + 1]
        point = leads[i] + (leads[i + 1] - leads[i]) * m0 / (m0 - m1)
    i = safe_from(means, his)
    return BreakEven(noise, point, None if i is None else leads[i], below=not above)


def safe_from(means: Sequence[float], his: Sequence[float]) -> int | None:
    """The first index whose upper bound is below 0 and from which every mean is below 0."""
    for i in range(len(means)):
        if his[i] < 0 and all(m < 0 for m in means[i:]):
            return i
    return None
