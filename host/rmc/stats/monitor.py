"""Continuous monitoring: a bank of CUSUMs fed one result at a time.

    from rmc.stats.monitor import Monitor
    m = Monitor()                      # wheel.json's order; 1 % false alarms per 10,000 spins
    for number in results:             # "17", "0", "00", "CMC", ... in the order played
        alarm = m.feed(number)
        if alarm is not None:          # Alarm(spin, detector, statistic, threshold)
            page_the_inspector(alarm)  # the bank restarts from zero after an alarm

Detectors (Page's CUSUM on the log-likelihood ratio of one result, S ← max(0, S + llr)):

- one per pocket, fair (1/39) against that pocket at `pocket_ratio`/39 (default 39/34: the
  pocket comes out 1 in 34 instead of 1 in 39);
- one per sector of `sector_width` neighbouring pockets (default 5, every start on the wheel),
  fair against the sector `sector_ratio` times too frequent (default 1.2), evenly inside it
  (`sector_width=0` leaves them out).

An alarm is raised when the largest statistic exceeds the threshold h. h is chosen so that a
fair wheel raises a false alarm within `horizon` spins (from a start or a reset) with
probability `false_alarm` — calibrated by simulation of fair results (numpy, fixed seed):
`calibrate_threshold`. The thresholds of the usual settings are stored (`THRESHOLDS`, checked
against a fresh calibration by the tests); others are calibrated at construction (a few
seconds, cached for the process).

`Monitor.feed(number) -> Alarm | None` is all a service needs; `feed_many` does the same for
a whole sequence, vectorised, and `history` (when asked) keeps the largest statistic after
each result, for a plot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import log

import numpy as np

POCKETS = 39
CALIBRATION_SEED = 0xC05


@dataclass(frozen=True)
class Design:
    """What the bank looks for."""

    pocket_ratio: float = 39 / 34
    sector_width: int = 5
    sector_ratio: float = 1.2

    def __post_init__(self) -> None:
        if not 1 < self.pocket_ratio < POCKETS:
            raise ValueError("pocket_ratio must be above 1 and below 39")
        if self.sector_width and not (
            2 <= self.sector_width <= 19 and 1 < self.sector_ratio < POCKETS / self.sector_width
        ):
            raise ValueError("sector_width must be 2..19 and sector_ratio above 1, below 39/width")

    def families(self) -> list[tuple[float, float, np.ndarray]]:
        """(llr of a hit, llr of a miss, members) per family of detectors; members[x] lists
        the detectors a result at wheel position x hits."""
        p0 = 1 / POCKETS
        q = self.pocket_ratio * p0
        out = [(log(q / p0), log((1 - q) / (1 - p0)), np.arange(POCKETS)[:, None])]
        w = self.sector_width
        if w:
            p0 = w / POCKETS
            q = self.sector_ratio * p0
            # sector s holds pockets s .. s+w-1: a result at x is in sectors x-w+1 .. x
            mem = (np.arange(POCKETS)[:, None] - np.arange(w)[None, :]) % POCKETS
            out.append((log(self.sector_ratio), log((1 - q) / (1 - p0)), mem))
        return out

    def increments(self) -> np.ndarray:
        """(39, detectors) llr of a result at each wheel position, pockets then sectors."""
        cols = []
        for hit, miss, mem in self.families():
            t = np.full((POCKETS, POCKETS), miss)
            for x in range(POCKETS):
                t[x, mem[x]] = hit
            cols.append(t)
        return np.concatenate(cols, axis=1)


# (design, false_alarm, horizon) -> threshold: calibrate_threshold(..., sessions=20_000)
# with the default seed (about a minute); tests/test_stats.py checks it against a smaller
# calibration and the false-alarm rate on fresh fair draws.
THRESHOLDS: dict[tuple[Design, float, int], float] = {
    (Design(), 0.01, 10_000): 11.160712965859144,
}


def _rises(idx: np.ndarray, design: Design):
    """Per family: for every hit of a detector in sessions given as wheel positions
    (sessions, spins), its session, its spin (1-based) and the CUSUM just after it.

    Between two hits a detector's sum only falls, so its statistic peaks just after a hit,
    risen from a low just before an earlier hit (or from 0): the bank is computed by events
    (6 a spin) rather than by spins × detectors (78)."""
    idx = np.atleast_2d(np.asarray(idx, dtype=np.int64))
    b, h = idx.shape
    for hit, miss, mem in design.families():
        det = mem[idx]  # (b, h, m)
        t = np.broadcast_to(np.arange(1, h + 1)[None, :, None], det.shape).ravel()
        key = (np.arange(b)[:, None, None] * POCKETS + det).ravel()
        # stable: time order kept within a detector (a radix sort for 16-bit keys)
        order = np.argsort(key.astype(np.int16) if b * POCKETS < 2**15 else key, kind="stable")
        key, t = key[order], t[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        sizes = np.diff(np.r_[starts, key.size])
        rank = np.arange(key.size) - np.repeat(starts, sizes) + 1
        up = (hit - miss) * rank + miss * t  # the sum just after the hit (miss < 0)
        low = np.minimum(up - hit, 0.0)  # just before it, and 0 at the start
        # a running minimum within each detector: later detectors shifted far below
        group = np.repeat(np.arange(starts.size), sizes)
        big = 4.0 * (abs(hit) + abs(miss)) * (h + 1)
        runmin = np.minimum.accumulate(low - group * big) + group * big
        yield key // POCKETS, t, up - runmin


def max_statistic(idx: np.ndarray, design: Design) -> np.ndarray:
    """The largest CUSUM statistic of the bank over each session (no reset)."""
    best = np.zeros(np.atleast_2d(idx).shape[0])
    for session, _, rise in _rises(idx, design):
        np.maximum.at(best, session, rise)
    return best


def first_alarm(idx: np.ndarray, design: Design, threshold: float) -> np.ndarray:
    """The spin (1-based) of each session's first alarm; 0 when none."""
    b, h = np.atleast_2d(idx).shape
    first = np.full(b, h + 1)
    for session, t, rise in _rises(idx, design):
        over = rise > threshold
        np.minimum.at(first, session[over], t[over])
    return np.where(first > h, 0, first)


def fair_sessions(rng: np.random.Generator, sessions: int, spins: int) -> np.ndarray:
    return rng.integers(0, POCKETS, size=(sessions, spins), dtype=np.int64)


def calibrate_threshold(
    false_alarm: float = 0.01,
    horizon: int = 10_000,
    design: Design | None = None,
    sessions: int = 4000,
    seed: int = CALIBRATION_SEED,
) -> float:
    """The threshold a fair wheel exceeds within `horizon` spins with probability
    `false_alarm`: that quantile of the bank's largest statistic over simulated sessions."""
    design = design or Design()
    if not 0 < false_alarm < 1 or horizon < 1 or sessions < 10:
        raise ValueError("false_alarm must be in (0, 1), horizon and sessions positive")
    rng = np.random.default_rng([seed, horizon])
    per_batch = max(1, 200_000 // horizon)
    maxima = []
    for i in range(0, sessions, per_batch):
        k = min(per_batch, sessions - i)
        maxima.append(max_statistic(fair_sessions(rng, k, horizon), design))
    return float(np.quantile(np.concatenate(maxima), 1 - false_alarm))


@lru_cache(maxsize=16)
def threshold_for(design: Design, false_alarm: float, horizon: int) -> float:
    h = THRESHOLDS.get((design, false_alarm, horizon))
    return h if h is not None else calibrate_threshold(false_alarm, horizon, design)


@dataclass(frozen=True)
class Alarm:
    spin: int  # results fed so far (1-based index of the result that raised it)
    detector: str  # "pocket 17" or "sector 32-15-19-4-21"
    statistic: float
    threshold: float


class Monitor:
    """A bank of CUSUMs; `feed(number)` after each result (see the module's docstring)."""

    def __init__(
        self,
        pockets: Sequence[str] | None = None,
        design: Design | None = None,
        false_alarm: float = 0.01,
        horizon: int = 10_000,
        threshold: float | None = None,
        history: bool = False,
    ) -> None:
        if pockets is None:
            from rmc.stats.wheel_order import default_order

            pockets = default_order().pockets
        self.pockets = tuple(pockets)
        self._index = {p: i for i, p in enumerate(self.pockets)}
        self.design = design or Design()
        self.false_alarm, self.horizon = false_alarm, horizon
        self.threshold = (
            threshold if threshold is not None else threshold_for(self.design, false_alarm, horizon)
        )
        self._inc = self.design.increments()
        self.names = [f"pocket {p}" for p in self.pockets]
        w = self.design.sector_width
        if w:
            self.names += [
                "sector " + "-".join(self.pockets[(s + k) % POCKETS] for k in range(w))
                for s in range(POCKETS)
            ]
        self.s = np.zeros(len(self.names))
        self.spins = 0
        self.alarms: list[Alarm] = []
        self.history: list[float] | None = [] if history else None

    def reset(self) -> None:
        self.s[:] = 0.0

    def _position(self, number: str) -> int:
        try:
            return self._index[number]
        except KeyError:
            raise ValueError(f"{number!r} is not a pocket of the wheel") from None

    def feed(self, number: str) -> Alarm | None:
        """One result (a pocket label); an Alarm when the bank crosses its threshold (the
        bank then restarts from zero), else None."""
        x = self._position(number)
        s = self.s
        s += self._inc[x]
        np.maximum(s, 0.0, out=s)
        self.spins += 1
        top = int(s.argmax())
        if self.history is not None:
            self.history.append(float(s[top]))
        if s[top] > self.threshold:
            alarm = Alarm(self.spins, self.names[top], float(s[top]), self.threshold)
            self.alarms.append(alarm)
            self.reset()
            return alarm
        return None

    def feed_many(self, numbers: Iterable[str], chunk: int = 20_000) -> list[Alarm]:
        """feed() for each result, vectorised (the same alarms and history)."""
        idx = np.fromiter((self._position(x) for x in numbers), dtype=np.int64)
        return self.feed_positions(idx, chunk)

    def feed_positions(self, idx: np.ndarray, chunk: int = 20_000) -> list[Alarm]:
        new: list[Alarm] = []
        i = 0
        while i < idx.size:
            part = idx[i : i + chunk]
            # S_t = X_t - min(0, min X_k): X the running sum from the current state
            x = np.cumsum(self._inc[part], axis=0) + self.s
            low = np.minimum.accumulate(np.minimum(x, 0.0), axis=0)
            s = x - low
            top = s.max(axis=1)
            over = np.flatnonzero(top > self.threshold)
            end = part.size if over.size == 0 else int(over[0]) + 1
            if self.history is not None:
                self.history.extend(top[:end].tolist())
            self.spins += end
            if over.size:
                j = int(over[0])
                d = int(s[j].argmax())
                alarm = Alarm(self.spins, self.names[d], float(s[j, d]), self.threshold)
                self.alarms.append(alarm)
                new.append(alarm)
                self.reset()
            else:
                self.s = s[-1].copy()
            i += end
        return new
