"""The rotor's motion as constant-acceleration segments, and its quadrature edges.

The croupier brakes the rotor and pushes it the other way before each launch; in between it
coasts on its bearing, slowing by a few per cent a spin. Segments never cross a stop, so the
angle is monotonic inside each one and the encoder edges can be solved for in closed form.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

TWO_PI = 2.0 * math.pi
# The encoder disc's reference: its wide slot opens this many quarter-slot steps early (an
# eighth of the slot pitch; wheel.json geometry.rotor_mark_deg says which slot).
MARK_WIDEN = 0.5


@dataclass(frozen=True)
class Segment:
    t0: float
    t1: float
    phi0: float  # rad, clockwise positive, unwrapped
    w0: float  # rad/s, signed
    a: float  # rad/s², signed

    def phi(self, t: float) -> float:
        tau = t - self.t0
        return self.phi0 + self.w0 * tau + 0.5 * self.a * tau * tau

    def w(self, t: float) -> float:
        return self.w0 + self.a * (t - self.t0)


@dataclass
class Rotor:
    """Builds the rotor's motion forward in time; queries angle and speed at any instant."""

    friction: float  # rad/s² of bearing drag while coasting
    phi0: float = 0.0
    segments: list[Segment] = field(default_factory=list)
    _starts: list[float] = field(default_factory=list)

    @property
    def t_end(self) -> float:
        return self.segments[-1].t1 if self.segments else 0.0

    def _state(self) -> tuple[float, float]:
        if not self.segments:
            return self.phi0, 0.0
        s = self.segments[-1]
        return s.phi(s.t1), s.w(s.t1)

    def _add(self, t1: float, a: float, stop: bool) -> None:
        t0 = self.t_end
        if t1 <= t0:
            return
        phi, w = self._state()
        # Split at a stop so that every segment is monotonic in angle.
        if a != 0 and w != 0 and (w > 0) != (a > 0):
            t_stop = t0 - w / a
            if t0 < t_stop < t1:
                self.segments.append(Segment(t0, t_stop, phi, w, a))
                self._starts.append(t0)
                phi = self.segments[-1].phi(t_stop)
                # Friction stops the rotor there; a hand goes on pushing the other way.
                self.segments.append(Segment(t_stop, t1, phi, 0.0, 0.0 if stop else a))
                self._starts.append(t_stop)
                return
        self.segments.append(Segment(t0, t1, phi, w, a))
        self._starts.append(t0)

    def coast(self, t1: float) -> None:
        """Free run on the bearing until t1 (stops if friction wins)."""
        _, w = self._state()
        self._add(t1, -math.copysign(self.friction, w) if w else 0.0, stop=True)

    def ramp(self, t1: float, w_target: float) -> None:
        """The croupier's hand: change speed linearly to w_target by t1 (brake or push)."""
        t0 = self.t_end
        _, w = self._state()
        if t1 <= t0:
            raise ValueError("rotor ramp must go forward in time")
        self._add(t1, (w_target - w) / (t1 - t0), stop=False)

    def _seg(self, t: float) -> Segment:
        if not self.segments or t < self.segments[0].t0:
            return Segment(t, t, self.phi0, 0.0, 0.0)
        i = bisect.bisect_right(self._starts, t) - 1
        return self.segments[i]

    def phi(self, t: float) -> float:
        s = self._seg(t)
        return s.phi(min(t, s.t1)) if t <= s.t1 else s.phi(s.t1) + s.w(s.t1) * (t - s.t1)

    def omega(self, t: float) -> float:
        s = self._seg(t)
        return s.w(min(t, s.t1))

    def quadrature_edges(
        self, slots: int, sensor: float = 0.0, mark: int | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(times s, is_b bool, value) of every edge of the two encoder channels.

        Quarter-slot state q = floor((φ − sensor) / Δ), Δ = 2π/(4·slots); A = 1 for q mod 4
        in {0, 1}, B = 1 for q mod 4 in {1, 2}: turning clockwise, A leads B by a quarter
        slot. `mark`: the count of the wide slot's first state (`Wheel.mark_count`): that
        slot is an eighth of a pitch wider, so the two boundaries that open it (counts mark
        and mark + 1) come Δ/2 early (`boundaries`).
        """
        delta = TWO_PI / (4 * slots)
        ts: list[np.ndarray] = []
        ks: list[np.ndarray] = []
        ups: list[np.ndarray] = []
        for s in self.segments:
            p0, p1 = s.phi0, s.phi(s.t1)
            if p1 == p0:
                continue
            up = p1 > p0
            lo, hi = (p0, p1) if up else (p1, p0)
            k = np.arange(
                math.floor((lo - sensor) / delta) - 1, math.floor((hi - sensor) / delta) + 2
            )
            b = boundaries(k, slots, sensor, mark)
            if up:
                keep = (b > p0) & (b <= p1)
            else:
                # Boundaries crossed going down: φ passes b_k from above, k descending.
                keep = (b < p0) & (b >= p1)
                k, b = k[::-1], b[::-1]
                keep = keep[::-1]
            k, b = k[keep], b[keep]
            if k.size == 0:
                continue
            sg = 1.0 if up else -1.0
            x = sg * (b - p0)
            v0 = sg * s.w0
            acc = sg * s.a
            disc = np.maximum(v0 * v0 + 2 * acc * x, 0.0)
            tau = 2 * x / np.maximum(v0 + np.sqrt(disc), 1e-12)
            ts.append(s.t0 + np.minimum(tau, s.t1 - s.t0))
            ks.append(k)
            ups.append(np.full(k.size, up))
        if not ts:
            empty = np.zeros(0)
            return empty, empty.astype(bool), empty.astype(int)
        t = np.concatenate(ts)
        k = np.concatenate(ks)
        up = np.concatenate(ups)
        m = np.mod(k, 4)
        is_b = (m == 1) | (m == 3)
        rises = (m == 0) | (m == 1)
        value = np.where(up, rises, ~rises).astype(int)
        return t, is_b, value

    @staticmethod
    def count_at(phi: float, slots: int, sensor: float = 0.0, mark: int | None = None) -> int:
        """The quadrature count q (unwrapped) with the rotor at φ: the last boundary passed."""
        delta = TWO_PI / (4 * slots)
        q = math.floor((phi - sensor) / delta)
        if float(boundaries(np.asarray([q + 1]), slots, sensor, mark)[0]) <= phi:
            q += 1
        return q

    @staticmethod
    def levels_at(
        phi: float, slots: int, sensor: float = 0.0, mark: int | None = None
    ) -> tuple[int, int]:
        q = Rotor.count_at(phi, slots, sensor, mark) % 4
        return int(q in (0, 1)), int(q in (1, 2))


def boundaries(k: np.ndarray, slots: int, sensor: float, mark: int | None) -> np.ndarray:
    """Rotor angles φ at which the count enters k (from k − 1, turning clockwise): k·Δ past
    the sensor, and Δ/2 early for the two that open the wide slot."""
    delta = TWO_PI / (4 * slots)
    b = sensor + k * delta
    if mark is not None:
        r = np.mod(k, 4 * slots)
        b = b - np.where((r == mark) | (r == (mark + 1) % (4 * slots)), MARK_WIDEN * delta, 0.0)
    return b
