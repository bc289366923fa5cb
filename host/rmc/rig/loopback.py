"""The pulse generator's firmware core on a host thread, behind a pyserial-like port.

For tests, benches and dry runs without a second Pico: the very core that runs on the
generator (firmware/pulsegen/core.py) plays the schedule on the host's monotonic clock and
calls `sink(levels, t_us)` for each event. Its lateness figures are those of a CPython
thread, not of an RP2040 (see docs/rig.md for both).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from pulsegen import core

_PERIOD = 1 << 30  # the RP2040's ticks_us period, kept so that wrap-around is exercised too


def _ticks() -> int:
    return (time.perf_counter_ns() // 1000) % _PERIOD


def _add(t: int, d: int) -> int:
    return (t + d) % _PERIOD


def _diff(a: int, b: int) -> int:
    d = (a - b) % _PERIOD
    return d - _PERIOD if d >= _PERIOD // 2 else d


class ThreadGenerator:
    """A pulse generator on a thread. `port` is its serial end: write() requests, readline()
    replies (timeout like pyserial's). sink(levels, t_us) sees each change of the lines."""

    def __init__(
        self,
        names: tuple[str, ...] = ("ball_a", "ball_b", "rotor_a", "rotor_b"),
        sink: Callable[[int, int], None] | None = None,
        capacity: int = 4096,
        guard_us: int = 2000,
        timeout: float = 1.0,
    ) -> None:
        self.changes: list[tuple[int, int]] = []  # (t_us on the generator's clock, levels)
        self._sink = sink

        def write(lv: int) -> None:
            t = _ticks()
            self.changes.append((t, lv))
            if self._sink is not None:
                self._sink(lv, t)

        self.gen = core.Generator(names, write, _ticks, _add, _diff, capacity=capacity)
        self.guard_us = guard_us
        self.timeout = timeout
        self._in: queue.Queue[bytes] = queue.Queue()
        self._out: queue.Queue[bytes] = queue.Queue()
        self._reader = core.LineReader()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pulsegen", daemon=True)
        self._thread.start()

    # pyserial-like port (the host's end)
    def write(self, data: bytes) -> int:
        self._in.put(bytes(data))
        return len(data)

    def readline(self) -> bytes:
        try:
            return self._out.get(timeout=self.timeout)
        except queue.Empty:
            return b""

    def _loop(self) -> None:
        while not self._stop.is_set():
            wait = self.gen.service(self.guard_us)
            timeout = 0.02 if wait < 0 else min(wait / 1e6, 0.02)
            try:
                data = self._in.get(timeout=timeout)
            except queue.Empty:
                continue
            for b in data:
                line = self._reader.feed_byte(b)
                if line is not None:
                    self._out.put(self.gen.handle(line))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def __enter__(self) -> ThreadGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
