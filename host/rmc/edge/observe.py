"""What a device at the table sees of each spin: the ball's passes at one point of the track
and the rotor's reference mark passing a point of the stator, in seconds; and, for scoring
only, when the ball really left the track and where it came to rest.

Read from sensor events (a simulated session, or a trace's `sensor` records): the ball's
passes are the rising edges of ball sensor A (the ball reaching it), the rotor's place comes
from its quadrature edges, decoded by the firmware's own counter (`rmcfw.rotor`, which finds
the disc's reference mark), and the spins are cut out by the truth records (launch, drop,
rest). Frame traces (`rmc record`) are read in `rmc.edge.frames`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rmcfw import channels
from rmcfw import rotor as fwrotor

TWO_PI = 2.0 * math.pi
N_POCKETS = 39


class ObserveError(ValueError):
    """The input holds no spin an attacker could clock."""


@dataclass(frozen=True)
class Geometry:
    """Where the device clocks: the ball at `ball_rad` (a stator angle), and the rotor angle
    (the stator angle of pockets[0]'s centre) `mark_rad` at each pass of its mark."""

    ball_rad: float
    mark_rad: float
    n_pockets: int = N_POCKETS

    @property
    def pocket_rad(self) -> float:
        return TWO_PI / self.n_pockets


@dataclass
class SpinObs:
    """One spin as the device's clocks see it (times in seconds on one clock).

    `passes`, `marks`: the true instants; clocking noise is added by the attacker's own
    observer (rmc.edge.attack), so that one decoding serves every noise level. `drop_s`,
    `result` (a pocket channel) are the truth, used to cut and to score, never to predict.
    `call_s`: the table's own « rien ne va plus », when a recording has it."""

    spin: int
    ball_dir: int  # +1 clockwise seen from above
    rotor_dir: int
    launch_s: float
    passes: np.ndarray
    marks: np.ndarray
    drop_s: float
    result: int
    call_s: float | None = None


def geometry_of(wheel: dict[str, Any]) -> Geometry:
    """The clocking points of a wheel definition (wheel.json as a dict)."""
    try:
        geo = wheel["geometry"]
        ball = math.radians(float(geo["ball_sensor_angles_deg"][0]))
        slots = int(geo["rotor_encoder_slots"])
        sensor = math.radians(float(geo.get("rotor_sensor_deg", 0.0)))
        n = len(wheel["pockets"])
    except (KeyError, TypeError, ValueError, IndexError):
        raise ObserveError(
            "the wheel definition has no ball sensor angle or rotor encoder geometry"
        ) from None
    if n != N_POCKETS:
        raise ObserveError(f"the wheel has {n} pockets, not {N_POCKETS}")
    mark = fwrotor.mark_of(wheel, slots)
    if mark is None:
        raise ObserveError("the wheel definition has no rotor reference mark (rotor_mark_deg)")
    counts = 4 * slots
    # the device's mark: the count boundary half a turn from the disc's wide slot (an
    # ordinary one, at its nominal angle)
    c = (mark[0] + counts // 2) % counts
    return Geometry(ball, (sensor + c * TWO_PI / counts) % TWO_PI, n)


def rotor_marks(events: Iterable[tuple[int, int, int]], wheel: dict[str, Any]) -> np.ndarray:
    """Instants (s) at which the rotor angle crosses Geometry.mark_rad, either way, from the
    rotor's quadrature edges, counted by the firmware's decoder from its reference mark."""
    geo = wheel["geometry"]
    slots = int(geo["rotor_encoder_slots"])
    mark = fwrotor.mark_of(wheel, slots)
    if mark is None:
        raise ObserveError("the wheel definition has no rotor reference mark (rotor_mark_deg)")
    counts = 4 * slots
    c = (mark[0] + counts // 2) % counts
    r = fwrotor.Rotor(slots)
    r.mark_q, r.a2 = mark
    r.stop_us = 1 << 29  # a standing rotor keeps its place anyway; no restarts needed here
    out: list[float] = []
    seeded = False
    a = b = 0
    for t, ch, v in events:
        if ch == channels.ROTOR_A:
            if not seeded and t == 0:
                a = v
                continue
            bch = 0
        elif ch == channels.ROTOR_B:
            if not seeded and t == 0:
                b = v
                continue
            bch = 1
        else:
            continue
        if not seeded:
            r.seed(a, b)
            seeded = True
        before = r.pos
        r.edge(t, bch, v)
        if not r.known or r.pos == before:
            continue
        q = (r.pos - r.ref + r.mark_q) % counts
        # crossing boundary c: entering c turning up, entering c - 1 turning down
        if (r.pos > before and q == c) or (r.pos < before and q == (c - 1) % counts):
            out.append(t / 1e6)
    return np.asarray(out)


def spins_from_events(
    events: Sequence[tuple[int, int, int]],
    truth: Iterable[dict[str, Any]],
    wheel: dict[str, Any],
) -> list[SpinObs]:
    """Every valid spin (a launch, a drop, a rest without void) of a session's sensor events
    and truth records. Passes are ball sensor A's rising edges from the launch to the drop."""
    by_spin: dict[int, dict[str, dict[str, Any]]] = {}
    voided: set[int] = set()
    for r in truth:
        ev = r.get("event")
        n = r.get("spin")
        if not isinstance(n, int):
            continue
        if ev == "void":
            voided.add(n)
        elif ev in ("launch", "drop", "rest"):
            by_spin.setdefault(n, {})[ev] = r
    rises = (
        np.asarray([t for t, ch, v in events if ch == channels.BALL_A and v == 1], dtype=float)
        / 1e6
    )
    marks = rotor_marks(events, wheel)
    out: list[SpinObs] = []
    for n in sorted(by_spin):
        rec = by_spin[n]
        if n in voided or not {"launch", "drop", "rest"} <= rec.keys():
            continue
        rest = rec["rest"]
        if rest.get("void") or not isinstance(rest.get("channel"), int):
            continue
        t0 = rec["launch"]["t_us"] / 1e6
        td = rec["drop"]["t_us"] / 1e6
        # (a ball released at the sensor: its pulse rises a few ms before the release)
        p = rises[(rises >= t0 - 0.02) & (rises < td)]
        out.append(
            SpinObs(
                spin=n,
                ball_dir=1 if rec["launch"].get("ball_dir") == "cw" else -1,
                rotor_dir=1 if rec["launch"].get("rotor_dir") == "cw" else -1,
                launch_s=t0,
                passes=p,
                marks=marks[(marks >= t0 - 8.0) & (marks < td)],
                drop_s=td,
                result=int(rest["channel"]),
            )
        )
    return out


def spins_from_session(session: Any) -> list[SpinObs]:
    """The valid spins of an `rmc.sim` session simulated with its edges."""
    if not session.events:
        raise ObserveError("the session was simulated without its sensor edges")
    return spins_from_events(session.events, session.truth, session.wheel.raw)


def spins_from_sensor_records(records: Iterable[dict[str, Any]], wheel: Any) -> list[SpinObs]:
    """The valid spins of a trace's sensor and truth records (a `rmc sim -o` trace)."""
    if not isinstance(wheel, dict) or "pockets" not in wheel:
        raise ObserveError("the trace's header holds no wheel definition")
    events: list[tuple[int, int, int]] = []
    truth: list[dict[str, Any]] = []
    for r in records:
        kind = r.get("kind")
        if kind == "sensor":
            try:
                ch = channels.parse(str(r.get("ch")))
            except ValueError:
                continue
            t, v = r.get("t_us"), r.get("v")
            if isinstance(t, int) and v in (0, 1):
                events.append((t, ch, int(v)))
        elif kind == "truth":
            truth.append(r)
    events.sort()
    return spins_from_events(events, truth, wheel)
