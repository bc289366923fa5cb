"""Where `rmc edge` takes its spins from: a simulation (`--sim SEED:SPINS`) or recorded
traces, sensor traces (`rmc sim -o`) or frame traces (`rmc record`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rmc.edge.observe import (
    Geometry,
    ObserveError,
    SpinObs,
    geometry_of,
    spins_from_sensor_records,
    spins_from_session,
)

DEFAULT_SIM_SPINS = 1000
MAX_SIM_SPINS = 100_000


@dataclass
class Source:
    spins: list[SpinObs]
    geo: Geometry
    wheel: dict
    label: str
    simulated: bool  # the firmware's calls can be computed (the true passes are known)
    warnings: list[str] = field(default_factory=list)  # traces read with damage


def parse_sim_spec(text: str) -> tuple[int, int]:
    """'SEED' or 'SEED:SPINS' -> (seed, spins); ValueError with the reason."""
    seed_s, _, spins_s = text.partition(":")
    try:
        seed = int(seed_s)
        spins = int(spins_s) if spins_s else DEFAULT_SIM_SPINS
    except ValueError:
        raise ValueError(f"--sim {text!r}: expected SEED or SEED:SPINS (e.g. 7:1000)") from None
    if seed < 0:
        raise ValueError(f"--sim {text!r}: the seed must be 0 or more")
    if not 1 <= spins <= MAX_SIM_SPINS:
        raise ValueError(f"--sim {text!r}: the spins must be between 1 and {MAX_SIM_SPINS}")
    return seed, spins


def from_sim(seed: int, spins: int, params: object = None) -> Source:
    from rmc.sim import simulate_session

    s = simulate_session(seed, spins, params=params)  # type: ignore[arg-type]
    obs = spins_from_session(s)
    return Source(obs, geometry_of(s.wheel.raw), s.wheel.raw, f"sim {seed}:{spins}", True)


def from_traces(paths: Sequence[str]) -> Source:
    """The valid spins of every trace, in order. ObserveError / TraceError on bad input."""
    from rmc.edge.frames import spins_from_frames
    from rmc.trace import default_wheel, read_trace

    spins: list[SpinObs] = []
    geo: Geometry | None = None
    wheel: dict | None = None
    simulated = True
    warnings: list[str] = []
    for path in paths:
        if Path(path).is_dir():
            raise ObserveError(f"{path} is a folder, not a trace")
        tr = read_trace(path)
        if tr.errors:
            n = len(tr.errors)
            warnings.append(
                f"{path}: read with {n} error{'s' * (n != 1)} (the first: {tr.errors[0]})"
            )
        w = tr.header.get("wheel")
        w = w if isinstance(w, dict) and "pockets" in w else default_wheel()
        g = geometry_of(w)
        if geo is None:
            geo, wheel = g, w
        elif g != geo:
            raise ObserveError(f"{path}: another wheel's geometry than the first trace's")
        sensors = any(r.get("kind") == "sensor" for r in tr.records)
        if sensors:
            got = spins_from_sensor_records(tr.records, w)
        else:
            lines = [line for line, _ in tr.frame_lines()]
            if not lines:
                raise ObserveError(f"{path}: no sensor events and no frames")
            got, revs = spins_from_frames(lines, w, g)
            if not revs:
                raise ObserveError(f"{path}: no REV frames: the trace holds no ball passes")
            simulated = False
        if not got:
            raise ObserveError(f"{path}: no valid spin (launch, passes, result) in the trace")
        spins += got
    if geo is None or wheel is None:
        raise ObserveError("no trace given")
    # one numbering over every trace (the clocks' noise is drawn per spin number)
    spins = [replace(o, spin=i) for i, o in enumerate(spins, 1)]
    label = paths[0] if len(paths) == 1 else f"{len(paths)} traces"
    return Source(spins, geo, wheel, label, simulated, warnings)
