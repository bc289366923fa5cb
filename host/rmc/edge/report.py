"""The attacker measured over leads and clocking noises, the break-even leads, the other
defences, and the lead the table should call with.

The recommended lead: the shortest lead measured at which, at the bound's clocking noise
(10 ms by default), the upper 95 % bound of the attacker's expected return is below 0, and
from which its point estimate stays below 0 at every longer lead measured. (Asking the upper
bound to stay below 0 at every longer lead too would fail by chance: where the attacker
knows nothing its return is the house edge, −7.7 %, and the bound of a few thousand spins
lies only some 2 points above it.) The same rule on a lead counted in revolutions gives
the recommendation in revolutions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rmc.edge.evaluate import Attacker, BreakEven, Cut, Outcome, break_even, house_edge
from rmc.edge.observe import Geometry, SpinObs

LEADS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0)
NOISES = (10.0, 20.0)
BOUND_NOISE_MS = 10.0
REVS = (1, 2, 3, 4, 5, 6)
# random calls in a window before a lead: (lead, width) s
WINDOWS = ((1.0, 1.0), (1.0, 2.0), (2.0, 2.0))


def default_train(n: int) -> int:
    """A few hundred spins to learn from, at most a third of them: the rest are tested."""
    return max(3, min(300, n // 3))


@dataclass(frozen=True)
class Recommendation:
    noise_ms: float
    lead_s: float | None  # None: no lead measured holds the bound
    lead_revs: int | None
    laps_in_lead: float | None  # median laps the ball still runs in lead_s
    bound: str

    def as_dict(self) -> dict:
        return {
            "noise_ms": self.noise_ms,
            "lead_s": self.lead_s,
            "lead_revs": self.lead_revs,
            "laps_in_lead": self.laps_in_lead,
            "bound": self.bound,
        }


@dataclass
class EdgeReport:
    source: str
    spins: int
    train: int
    pleins: int
    leads: list[float]
    noises: list[float]
    table: list[Outcome]  # lead × noise
    break_even: list[BreakEven]
    recommendation: Recommendation
    calls: list[Outcome] = field(default_factory=list)  # the firmware's or the table's calls
    defences: list[Outcome] = field(default_factory=list)

    def outcome(self, lead: float, noise: float) -> Outcome:
        for o in self.table:
            if o.kind == "lead" and o.value == lead and o.noise_ms == noise:
                return o
        raise KeyError((lead, noise))

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "spins": self.spins,
            "train": self.train,
            "test": self.spins - self.train,
            "pleins": self.pleins,
            "house_edge": round(house_edge(self.pleins), 4),
            "leads_s": self.leads,
            "noises_ms": self.noises,
            "table": [o.as_dict() for o in self.table],
            "break_even": [b.as_dict() for b in self.break_even],
            "calls": [o.as_dict() for o in self.calls],
            "defences": [o.as_dict() for o in self.defences],
            "recommended": self.recommendation.as_dict(),
        }


def first_safe(values: Sequence[float], outs: Sequence[Outcome]) -> float | None:
    """The smallest value whose outcome's upper bound is below 0 and from which every
    outcome's point estimate is below 0; None when there is none."""
    from rmc.edge.evaluate import safe_from

    i = safe_from([o.mean for o in outs], [o.hi for o in outs])
    return None if i is None else values[i]


def measure(
    spins: Sequence[SpinObs],
    geo: Geometry,
    source: str,
    leads: Sequence[float] = LEADS,
    noises: Sequence[float] = NOISES,
    pleins: int = 9,
    train: int | None = None,
    seed: int = 0,
    calls: Mapping[str, Mapping[int, float]] | None = None,
    defences: bool = False,
    bound_noise_ms: float = BOUND_NOISE_MS,
) -> EdgeReport:
    """Every figure of `rmc edge`. `calls`: named call instants per spin (the firmware's at
    a setting, or a recording's own RNVP), each scored at every noise."""
    leads = sorted(set(leads))
    noises = sorted(set(noises))
    n_train = default_train(len(spins)) if train is None else train
    attackers = {nz: Attacker(spins, geo, nz, n_train, seed) for nz in noises}
    if bound_noise_ms not in attackers:
        attackers[bound_noise_ms] = Attacker(spins, geo, bound_noise_ms, n_train, seed)
    table, bes = _lead_table(attackers, leads, noises, pleins)
    bound = attackers[bound_noise_ms]
    revs_out = [bound.run(Cut("revs", r), pleins) for r in REVS]
    rec = _recommend(bound, table, leads, revs_out, pleins, bound_noise_ms)
    call_outs: list[Outcome] = []
    for name, per_spin in (calls or {}).items():
        for nz in noises:
            call_outs.append(attackers[nz].run(Cut("calls", name=name), pleins, per_spin))
    extra: list[Outcome] = []
    if defences:
        extra += revs_out
        extra += [bound.run(Cut("window", lead, width), pleins) for lead, width in WINDOWS]
    return EdgeReport(
        source=source,
        spins=len(spins),
        train=n_train,
        pleins=pleins,
        leads=list(leads),
        noises=list(noises),
        table=table,
        break_even=bes,
        recommendation=rec,
        calls=call_outs,
        defences=extra,
    )


def _lead_table(
    attackers: Mapping[float, Attacker],
    leads: Sequence[float],
    noises: Sequence[float],
    pleins: int,
) -> tuple[list[Outcome], list[BreakEven]]:
    """The outcomes by noise (outer) and lead (inner), and each noise's break-even leads."""
    table: list[Outcome] = []
    bes: list[BreakEven] = []
    for nz in noises:
        outs = [attackers[nz].run(Cut("lead", lead), pleins) for lead in leads]
        table += outs
        bes.append(break_even(leads, outs))
    return table, bes


def _recommend(
    bound: Attacker,
    table: Sequence[Outcome],
    leads: Sequence[float],
    revs_out: Sequence[Outcome],
    pleins: int,
    bound_noise_ms: float,
) -> Recommendation:
    """The lead, in seconds and in revolutions (revs_out: the REVS cuts at the bound's
    noise), that holds the bound at the bound's noise; the table's leads at that noise
    are measured there if the table has none."""
    at_bound = [o for o in table if o.noise_ms == bound_noise_ms] or [
        bound.run(Cut("lead", lead), pleins) for lead in leads
    ]
    lead_s = first_safe(leads, at_bound)
    laps = None
    if lead_s is not None:
        laps = next(o.lead_revs for o in at_bound if o.value == lead_s)
    safe_r = first_safe(list(REVS), revs_out)
    return Recommendation(
        noise_ms=bound_noise_ms,
        lead_s=lead_s,
        lead_revs=None if safe_r is None else int(safe_r),
        laps_in_lead=laps,
        bound=f"upper 95 % bound of the return below 0 at {bound_noise_ms:g} ms clocking",
    )
