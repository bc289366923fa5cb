"""Real-time playback of edges through pin backends, with the scheduler's own lateness.

Linux user space cannot promise when a thread runs: the player sleeps until shortly before
each instant and spins for the rest (`spin_us`), then writes every edge of that instant and
flushes each backend once. It measures its lateness (the instant the writes returned minus
the instant asked for): the software half of the Blinka path's jitter (docs/rig.md).
A pulse generator, when given, plays its own lines from its own clock: the player starts it
first and times the other lines from the generator's estimated start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from rmc.rig.backends import Output, RigError
from rmc.rig.edges import Edge
from rmc.rig.pins import Levels


@dataclass
class Lateness:
    """Lateness samples in microseconds, summarised."""

    samples: list[float] = field(default_factory=list)

    def add(self, us: float) -> None:
        self.samples.append(us)

    def summary(self) -> dict[str, float]:
        s = sorted(self.samples)
        if not s:
            return {"n": 0, "mean_us": 0.0, "p50_us": 0.0, "p90_us": 0.0, "p99_us": 0.0,
                    "max_us": 0.0}  # fmt: skip
        return {
            "n": len(s),
            "mean_us": sum(s) / len(s),
            "p50_us": _pct(s, 50),
            "p90_us": _pct(s, 90),
            "p99_us": _pct(s, 99),
            "max_us": s[-1],
        }


def _pct(s: list[float], p: float) -> float:
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


class Clock:
    """Monotonic seconds with a sleep-then-spin wait (the default, real time)."""

    def __init__(self, spin_us: int = 300) -> None:
        self.spin_s = spin_us / 1e6

    def now(self) -> float:
        return time.perf_counter()

    def wait_until(self, t: float, idle: Callable[[float], None] | None = None) -> None:
        while True:
            left = t - time.perf_counter()
            if left <= self.spin_s:
                break
            if idle is not None:
                idle(left - self.spin_s)  # may use the time (pump the pulse generator)
                left = t - time.perf_counter()
                if left <= self.spin_s:
                    break
            time.sleep(min(left - self.spin_s, 0.05))
        while time.perf_counter() < t:
            pass


@dataclass
class PlayStats:
    edges: int = 0
    instants: int = 0
    lateness: Lateness = field(default_factory=Lateness)
    write_us: Lateness = field(default_factory=Lateness)  # time spent in write+flush
    t0: float = 0.0  # clock time of the trace's t_us = 0
    duration_s: float = 0.0
    stopped: bool = False


class Player:
    """Plays edges onto outputs. routes: line -> the Output that drives it."""

    def __init__(
        self,
        routes: dict[str, Output],
        levels: Levels,
        clock: Clock | None = None,
        speed: float = 1.0,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.routes = routes
        self.levels = levels
        self.clock = clock or Clock()
        self.speed = speed
        self.stop_event = threading.Event()

    def check(self, edges: Iterable[Edge]) -> None:
        missing = sorted({e.line for e in edges} - set(self.routes))
        if missing:
            raise RigError(f"no backend drives {', '.join(missing[:8])}")

    def set_initial(self, initial: dict[str, int]) -> None:
        outs: list[Output] = []
        for line, v in initial.items():
            out = self.routes.get(line)
            if out is not None:
                out.write(line, self.levels.level(line, v))
                if out not in outs:
                    outs.append(out)
        for out in outs:
            out.flush()

    def play(
        self,
        edges: Sequence[Edge],
        t0: float | None = None,
        idle: Callable[[float], None] | None = None,
        actions: Sequence[tuple[int, Callable[[], object]]] = (),
    ) -> PlayStats:
        """Play edges (sorted by t_us) from t0 (clock seconds; default: now + 10 ms).

        actions: (t_us, fn) called at their instants too (host commands to the board); an
        action runs after the edges of its instant. They are not counted in the lateness.
        """
        self.check(edges)
        stats = PlayStats()
        clock = self.clock
        stats.t0 = t0 if t0 is not None else clock.now() + 0.01
        scale = 1e-6 / self.speed
        todo = sorted(actions, key=lambda a: a[0])
        k = 0
        groups = [(t, list(g)) for t, g in groupby(edges, key=lambda e: e.t_us)]
        groups.append((None, []))  # sentinel: actions after the last edge
        for t_us, group in groups:
            while k < len(todo) and (t_us is None or todo[k][0] < t_us):
                if self.stop_event.is_set():
                    break
                clock.wait_until(stats.t0 + todo[k][0] * scale, idle)
                todo[k][1]()
                k += 1
            if t_us is None:
                break
            if self.stop_event.is_set():
                stats.stopped = True
                break
            due = stats.t0 + t_us * scale
            clock.wait_until(due, idle)
            t_write = clock.now()
            outs: list[Output] = []
            for e in group:
                out = self.routes[e.line]
                out.write(e.line, self.levels.level(e.line, e.v))
                if out not in outs:
                    outs.append(out)
                stats.edges += 1
            for out in outs:
                out.flush()
            t_done = clock.now()
            stats.instants += 1
            stats.lateness.add((t_done - due) * 1e6)
            stats.write_us.add((t_done - t_write) * 1e6)
        stats.duration_s = clock.now() - stats.t0
        return stats
