"""A table's recorded frames as an attacker's clocks (a casino measuring its own wheel).

- The ball's passes: the LAUNCH frame is sent at the first pass (its `ms`, the firmware's
  clock), each REV gives the lap that just ended (`period_us`): pass k is the launch plus
  the first k periods.
- The rotor: the LAUNCH frame's `under` is the pocket under ball sensor A at that first pass
  (the rotor's phase to half a pocket); the spin's STAT frames (`rotor_ms`, each the mean
  period of the turn before it) its speed and how it slows, a line through them. The rotor's
  mark passes follow.
- The call: the RNVP frame's `ms`. The result: RES `num`. A spin with a VOID is left out.
- The drop instant is not in the frames (DROP comes when the table has seen it, up to a lap
  and a half later): it is taken half a lap (of the last lap's length) after the last pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from rmc.edge.observe import TWO_PI, Geometry, ObserveError, SpinObs
from rmc.frames import Frame, FrameError, decode

DROP_AFTER_LAST = 0.5  # the drop, in laps (the last one's length) after the last pass


def spins_from_frames(
    lines: Sequence[bytes], wheel: dict[str, Any], geo: Geometry
) -> tuple[list[SpinObs], int]:
    """(the valid spins of a recording's frame lines, how many REV frames it held)."""
    pockets = [str(x) for x in wheel["pockets"]]
    spins, revs = _spin_records(lines)
    if not spins and not revs:
        raise ObserveError("no LAUNCH or REV frames: the trace holds no ball passes")
    out: list[SpinObs] = []
    for (_, n), s in spins.items():
        o = _spin_obs(n, s, pockets, geo)
        if o is not None:
            out.append(o)
    return out, revs


def _frames(lines: Sequence[bytes]) -> Iterator[tuple[Frame, dict[str, str]]]:
    """(frame, its fields) for each frame the lines decode to, each (boot, seq) once;
    lines that do not decode or whose fields do not read, and sequence 0, are left out."""
    seen: set[tuple[int, int]] = set()
    for line in lines:
        try:
            f = decode(line[line.find(b"$") :] if b"$" in line else line)
            fields = f.fields  # parsed at each use: read once
        except (FrameError, ValueError):
            continue
        if f.seq == 0 or (f.boot, f.seq) in seen:
            continue
        seen.add((f.boot, f.seq))
        yield f, fields


def _spin_records(lines: Sequence[bytes]) -> tuple[dict[tuple[int, int], dict[str, Any]], int]:
    """Each spin's record by (boot, spin), from the frames that name their spin, and how
    many REV frames the spins held."""
    spins: dict[tuple[int, int], dict[str, Any]] = {}
    revs = 0
    for f, fields in _frames(lines):
        spin = fields.get("spin")
        if spin is None or not spin.isdigit():
            continue
        key = (f.boot, int(spin))
        if f.type == "LAUNCH":
            spins[key] = _launch_record(f.ms, fields)
        elif key in spins:
            revs += _add_frame(spins[key], f.type, f.ms, fields)
    return spins, revs


def _launch_record(ms: int, fields: dict[str, str]) -> dict[str, Any]:
    """A spin's record as its LAUNCH frame (sent at ms) opens it."""
    return {
        "launch_ms": ms,
        "bdir": fields.get("bdir"),
        "rdir": fields.get("rdir"),
        "under": fields.get("under"),
        "stats": [],
        "periods": [],
        "void": "void" in fields,
    }


def _add_frame(s: dict[str, Any], ftype: str, ms: int, fields: dict[str, str]) -> int:
    """A later frame of the spin s (its type, ms and fields) into its record; 1 for a REV
    frame, else 0."""
    if ftype == "STAT":
        rotor = fields.get("rotor_ms", "")
        if rotor.isdigit() and int(rotor) > 0:
            s["stats"].append((ms / 1000.0, int(rotor) / 1000.0))
    elif ftype == "REV":
        try:
            s["periods"].append(int(fields["period_us"]))
        except (KeyError, ValueError):
            s["void"] = True
        return 1
    elif ftype == "RNVP":
        s.setdefault("call_ms", ms)
    elif ftype == "VOID":
        s["void"] = True
    elif ftype == "RES":
        s["num"] = fields.get("num")
    return 0


def _spin_obs(n: int, s: dict[str, Any], pockets: list[str], geo: Geometry) -> SpinObs | None:
    """Spin n's observations from its record, or None for a spin left out: void, without
    a known result or direction, or without its rotor periods or two laps."""
    if s["void"] or s.get("num") not in pockets or s["under"] not in pockets:
        return None
    if s["bdir"] not in ("cw", "ccw") or s["rdir"] not in ("cw", "ccw"):
        return None
    if not s["stats"] or len(s["periods"]) < 2:
        return None
    t0 = s["launch_ms"] / 1000.0
    passes = t0 + np.concatenate([[0.0], np.cumsum(s["periods"]) / 1e6])
    last = s["periods"][-1] / 1e6
    drop = float(passes[-1]) + DROP_AFTER_LAST * last
    rdir = 1 if s["rdir"] == "cw" else -1
    # the rotor at the first pass: the pocket under sensor A, to half a pocket
    phi0 = geo.ball_rad - pockets.index(s["under"]) * geo.pocket_rad
    return SpinObs(
        spin=n,
        ball_dir=1 if s["bdir"] == "cw" else -1,
        rotor_dir=rdir,
        launch_s=t0,
        passes=passes,
        marks=_marks(s["stats"], t0, drop, phi0, geo.mark_rad, rdir),
        drop_s=drop,
        result=pockets.index(s["num"]),
        call_s=s["call_ms"] / 1000.0 if "call_ms" in s else None,
    )


def _marks(
    stats: list[tuple[float, float]],
    t0: float,
    end: float,
    phi0: float,
    mark_rad: float,
    rdir: int,
) -> np.ndarray:
    """The rotor's mark passes from 8 s before t0 to `end`: its angle phi0 at t0, its speed
    a line through the STAT frames' periods (each the mean of the turn before it)."""
    t = np.asarray([ts - p / 2 for ts, p in stats])
    w = np.asarray([TWO_PI / p for _, p in stats])
    if t.size >= 2 and np.ptp(t) > 0.5:
        w1, w0 = np.polyfit(t - t0, w, 1)
    else:
        w1, w0 = 0.0, float(w.mean())
    first = ((mark_rad - phi0) * rdir) % TWO_PI
    ks = np.arange(-math.ceil(8.0 * w0 / TWO_PI) - 1, math.ceil((end - t0) * w0 / TWO_PI) + 2)
    psi = first + TWO_PI * ks  # the angle turned from t0 at each pass
    if abs(w1) < 1e-9:
        tau = psi / w0
    else:
        disc = w0 * w0 + 2.0 * w1 * psi
        ok = disc >= 0
        psi, disc = psi[ok], disc[ok]
        tau = (-w0 + np.sqrt(disc)) / w1
    out = t0 + tau
    return np.sort(out[(out >= t0 - 8.0) & (out < end)])
