"""The demo's table session: simulated by rmc.sim, cut into segments at the host's commands.

The virtual board plays sensor edges on its own clock. At speed 0 that clock runs as fast as
the firmware goes (about 20 simulated seconds a wall second), far too fast for a host command
sent "at the right wall-clock instant" to land between the two edges it must fall between
(OPEN before the lid is unlocked, LAST3 before the next launch). So the session is fed in
segments that end at each command's instant: the board plays a segment and then idles (the
ball lies in its pocket, the lid stays as it was) until the host has sent the command and
seen it acknowledged, then gets the next segment. Only the idle moments get longer; every
edge keeps its place relative to its neighbours, so the firmware sees the same spins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmc.rig.compare import DEFAULT_LEAD_S
from rmc.rig.link import Command, commands_from_truth
from rmc.sim import SCENARIOS, Session, simulate_session

# Scenarios the demo shows, the incident first; all are handled by today's firmware
# (docs/rig.md): stuck sensors and power cuts are left out until it handles them.
DEMO_SCENARIOS = ("object", "same_dir", "ball_out", "not_reversed", "few_revs")
MIN_SPINS = 5  # the incident on spin 2, its relaunch, then the last three
MAX_SPINS = 200
CHEF = "demo"


class DemoSessionError(ValueError):
    """A session the demo cannot play (bad spin count, unknown scenario...)."""


def default_scenarios(spins: int) -> tuple[str, ...]:
    """As many of DEMO_SCENARIOS as fit, spread over the session, as `name@spin`.

    Each failure is followed by a regular spin (the object's relaunch is a spin of its own,
    then a regular one), and none falls in the last three spins, which the chef announces."""
    if not MIN_SPINS <= spins <= MAX_SPINS:
        raise DemoSessionError(f"spins must be between {MIN_SPINS} and {MAX_SPINS}, not {spins}")
    last_room = spins - 3  # the last spin a scenario may take
    room = max(0, last_room - 1)
    step = max(3, room // len(DEMO_SCENARIOS))
    out: list[str] = []
    at = 2
    for name in DEMO_SCENARIOS:
        if at > last_room:
            break
        out.append(f"{name}@{at}")
        at += step
    return tuple(out)


def check_scenarios(names: tuple[str, ...]) -> None:
    for n in names:
        base = n.split("@", 1)[0]
        if base not in SCENARIOS:
            raise DemoSessionError(f"unknown scenario {base!r} (one of {', '.join(SCENARIOS)})")


@dataclass
class Segment:
    """Edges from one host command to the next; `records` times count from `t0_us`."""

    t0_us: int  # trace instant where the segment starts
    t1_us: int | None  # where the next one starts (None: the last)
    command: Command | None  # sent (and acknowledged) before the segment is fed
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def span_us(self) -> int:
        if self.t1_us is not None:
            return self.t1_us - self.t0_us
        return self.records[-1]["t_us"] if self.records else 0


def initial_records(session: Session) -> list[dict[str, Any]]:
    """Every line's level at t = 0 (lid locked, no ball): fed before the board powers up."""
    return [r for r in session.to_trace_records() if r.get("kind") == "sensor" and r["t_us"] == 0]


def plan(session: Session, chef: str = CHEF) -> list[Segment]:
    """Cut the session's sensor and power records at the host commands its truth gives."""
    records = [r for r in session.to_trace_records() if r.get("kind") in ("sensor", "power")]
    cmds = commands_from_truth(session.truth, chef)
    cuts = [0, *(c.t_us for c in cmds)]
    segs = [
        Segment(t0, cuts[i + 1] if i + 1 < len(cuts) else None, cmds[i - 1] if i else None)
        for i, t0 in enumerate(cuts)
    ]
    k = 0
    for r in records:
        while segs[k].t1_us is not None and r["t_us"] >= segs[k].t1_us:
            k += 1
        segs[k].records.append({**r, "t_us": r["t_us"] - segs[k].t0_us})
    return segs


def simulate(
    seed: int,
    spins: int,
    scenarios: tuple[str, ...] | None = None,
    rnvp_lead_s: float = DEFAULT_LEAD_S,
) -> Session:
    """The session the demo plays; DemoSessionError for what the simulator refuses."""
    if seed < 0:
        raise DemoSessionError(f"seed must be a non-negative integer, not {seed}")
    if scenarios is None:
        scenarios = default_scenarios(spins)
    elif not MIN_SPINS <= spins <= MAX_SPINS:
        raise DemoSessionError(f"spins must be between {MIN_SPINS} and {MAX_SPINS}, not {spins}")
    check_scenarios(scenarios)
    try:
        return simulate_session(seed, spins, scenarios=scenarios, rnvp_lead_s=rnvp_lead_s)
    except ValueError as e:
        raise DemoSessionError(str(e)) from None
