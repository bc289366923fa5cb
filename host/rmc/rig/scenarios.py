"""The scenario set the rig plays, on real hardware (`make hil`) and on the virtual board (CI).

One short simulated session per scenario of the simulator (rmc.sim.SCENARIOS), the scenario
on spin 2 so that a regular spin comes before it (and after it), each from its own seed.
Sessions have three spins at least: the last three spins are announced from the first.
The truth asks « rien ne va plus » at the firmware's default lead (`lead_ms` in
rmcfw.config: 5 s before the drop since issue 26).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rmc.rig.compare import DEFAULT_LEAD_S
from rmc.sim import SCENARIOS, simulate_session
from rmc.trace import Trace, read_trace

RNVP_LEAD_S = DEFAULT_LEAD_S  # the firmware's own default, read from rmcfw.config


@dataclass(frozen=True)
class RigScenario:
    name: str
    seed: int
    spins: int
    scenarios: tuple[str, ...]


def scenario_set() -> list[RigScenario]:
    out = []
    for i, name in enumerate(SCENARIOS):
        if name == "normal":
            out.append(RigScenario(name, 1000 + i, 3, ()))
        elif name == "tamper":
            # Three spins at least: the last three are announced as three (decree), and
            # the session must close for the lid opened afterwards to be a tamper.
            out.append(RigScenario(name, 1000 + i, 3, ("tamper",)))
        elif name == "object":
            # The relaunch after the object is spin 3: one more spin after it.
            out.append(RigScenario(name, 1000 + i, 4, ("object@2",)))
        else:
            out.append(RigScenario(name, 1000 + i, 3, (f"{name}@2",)))
    return out


def write_trace(sc: RigScenario, folder: Path | str) -> Trace:
    """Simulate the scenario's session into folder/NAME.jsonl and read it back."""
    path = Path(folder) / f"{sc.name}.jsonl"
    s = simulate_session(sc.seed, sc.spins, sc.scenarios, rnvp_lead_s=RNVP_LEAD_S)
    s.write_trace(path)
    return read_trace(path)
