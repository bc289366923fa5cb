"""The wheel definition (hardware/wheel.json) as the simulator reads it.

Angles follow wheel.json: clockwise seen from above is positive, 0 is the stator's reference
(ball sensor A sits at geometry.ball_sensor_angles_deg[0]). Pocket i of the list sits at rotor
angle i * 360/39 degrees, clockwise, from the rotor's own zero.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmc import HARDWARE_DIR, infile
from rmcfw import numbers

WHEEL_JSON = HARDWARE_DIR / "wheel.json"
# For a wheel file without geometry.drop_angle_deg: the calibrated default (docs/sim.md).
DEFAULT_DROP_ANGLE_DEG = 41.0


@dataclass(frozen=True)
class Wheel:
    """Geometry and pocket order of one wheel, in SI units and radians."""

    raw: dict[str, Any]  # the file's content, copied verbatim into trace headers
    pockets: tuple[str, ...]
    deflectors_rad: tuple[float, ...]
    track_radius_m: float
    track_incline_rad: float
    drop_angle_rad: float  # the rim lets the ball go when R·Ω² < g·tan(this)
    pocket_radius_m: float
    deflector_radius_m: float
    ball_sensors_rad: tuple[float, float]
    rotor_slots: int
    # The rotor's place (geometry.rotor_sensor_deg, rotor_mark_deg): rotor sensor A's stator
    # angle, and the rotor angle of the encoder disc's wide slot (None: a disc without one).
    rotor_sensor_rad: float = 0.0
    rotor_mark_rad: float | None = None

    @property
    def n_pockets(self) -> int:
        return len(self.pockets)

    @property
    def mark_count(self) -> int | None:
        """The quadrature count (0 .. 4·slots − 1, as rmcfw.rotor numbers it: floor((φ −
        rotor_sensor)/step)) of the wide slot's first state; None without a mark."""
        if self.rotor_mark_rad is None:
            return None
        k = round(self.rotor_mark_rad * self.rotor_slots / (2.0 * math.pi))
        return (-4 * k) % (4 * self.rotor_slots)

    def pocket_under(self, phi: float, angle: float) -> int:
        """Pocket channel whose centre is nearest the stator angle `angle` with the rotor at
        `phi` (pocket i's centre sits at φ + i·pitch)."""
        return round((angle - phi) / self.pocket_angle) % self.n_pockets

    @property
    def pocket_angle(self) -> float:
        """Angle one pocket spans on the rotor (radians)."""
        return 2.0 * math.pi / len(self.pockets)

    def channel_of(self, label: str) -> int:
        """Pocket channel (sensor index) of a number's pocket."""
        try:
            return self.pockets.index(label)
        except ValueError:
            raise ValueError(
                f"{label!r} is not a pocket of wheel {self.raw.get('name')!r}"
            ) from None


def load_wheel(path: str | Path | None = None) -> Wheel:
    """Read and check a wheel definition; ValueError says what is wrong with it."""
    p = Path(path) if path is not None else WHEEL_JSON
    try:
        raw = json.loads(infile.read_text(p))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read wheel definition {p}: {exc}") from exc
    try:
        pockets = tuple(str(x) for x in raw["pockets"])
        geo = raw["geometry"]
        deflectors = tuple(math.radians(float(d)) for d in raw["deflectors_deg"])
        sensors = tuple(math.radians(float(a)) for a in geo["ball_sensor_angles_deg"])
        wheel = Wheel(
            raw=raw,
            pockets=pockets,
            deflectors_rad=deflectors,
            track_radius_m=float(geo["ball_track_radius_m"]),
            track_incline_rad=math.radians(float(geo["track_incline_deg"])),
            drop_angle_rad=math.radians(float(geo.get("drop_angle_deg", DEFAULT_DROP_ANGLE_DEG))),
            pocket_radius_m=float(geo["pocket_ring_radius_m"]),
            deflector_radius_m=float(geo["deflector_ring_radius_m"]),
            ball_sensors_rad=(sensors[0], sensors[1]),
            rotor_slots=int(geo["rotor_encoder_slots"]),
            rotor_sensor_rad=math.radians(float(geo.get("rotor_sensor_deg", 0.0))),
            rotor_mark_rad=None
            if geo.get("rotor_mark_deg") is None
            else math.radians(float(geo["rotor_mark_deg"])),
        )
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise ValueError(f"bad wheel definition {p}: {exc!r}") from exc
    if sorted(pockets) != sorted(numbers.NUMBERS):
        raise ValueError(f"{p}: pockets must hold each of the 39 numbers once")
    if len(deflectors) < 7:
        raise ValueError(f"{p}: decree 1-2 asks for at least 7 deflectors, found {len(deflectors)}")
    if len(sensors) != 2 or not 0 < (sensors[1] - sensors[0]) < math.pi:
        raise ValueError(f"{p}: need two ball sensors, B a little clockwise of A")
    if not (wheel.pocket_radius_m < wheel.deflector_radius_m < wheel.track_radius_m):
        raise ValueError(f"{p}: radii must grow pockets < deflectors < track")
    if not 0 < wheel.drop_angle_rad < math.radians(85):
        raise ValueError(f"{p}: drop_angle_deg must be between 0 and 85")
    if wheel.rotor_slots < 1:
        raise ValueError(f"{p}: rotor_encoder_slots must be positive")
    if wheel.rotor_mark_rad is not None:
        k = wheel.rotor_mark_rad * wheel.rotor_slots / (2.0 * math.pi)
        if abs(k - round(k)) > 1e-3:
            raise ValueError(f"{p}: rotor_mark_deg must be a multiple of 360/rotor_encoder_slots")
    return wheel
