"""Host side of the rig's pulse generator (firmware/pulsegen/, line format in docs/rig.md).

The generator is a second Pico on USB serial. Its schedule is streamed: the host loads what
fits, starts it with GO, then keeps topping it up (`pump`) while it plays; the generator
refuses a line with a gap or a repeat in its event index, so nothing is lost or played twice.
`port` is any pyserial-like object (`write`, `readline` with a timeout), socket:// included.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pulsegen import core

from rmc.rig.backends import RigError
from rmc.rig.edges import Edge

MAX_DT = core.MAX_DT
MAX_LINE = core.MAX_LINE


class PulseGenError(RigError):
    """The pulse generator refused a request, or did not answer it."""


@dataclass(frozen=True)
class Info:
    version: int
    capacity: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Stat:
    state: str
    played: int
    total: int
    queued: int
    free: int
    levels: int
    late_max_us: int
    late_mean_us: float
    starved: int  # times the generator ran dry before END: the host fell behind
    hist: tuple[int, ...]  # lateness buckets: <=10, <=50, <=100, <=500, <=1000, more (us)


def to_events(
    edges: Iterable[Edge], names: Sequence[str], initial: int
) -> tuple[list[tuple[int, int]], int]:
    """Electrical edges on the generator's lines -> ([(dt_us, levels)], last t_us).

    Edges at one instant become one event; gaps longer than MAX_DT get filler events that
    change nothing (the generator's clock wraps: each wait must stay well inside it).
    """
    bit = {n: i for i, n in enumerate(names)}
    events: list[tuple[int, int]] = []
    lv = initial
    t_prev = 0
    pending_t: int | None = None
    for e in edges:
        if e.line not in bit:
            raise PulseGenError(f"line {e.line} is not on the pulse generator")
        if pending_t is not None and e.t_us != pending_t:
            events.extend(_gap(pending_t - t_prev, lv))
            t_prev = pending_t
        if e.t_us < t_prev:
            raise PulseGenError("edges must be sorted by time")
        pending_t = e.t_us
        lv = lv | (1 << bit[e.line]) if e.v else lv & ~(1 << bit[e.line])
    if pending_t is not None:
        events.extend(_gap(pending_t - t_prev, lv))
        t_prev = pending_t
    return _fill(events, initial), t_prev


def _gap(dt: int, lv: int) -> list[tuple[int, int]]:
    out = []
    while dt > MAX_DT:
        out.append((MAX_DT, -1))  # filler: levels filled in by the caller below
        dt -= MAX_DT
    out.append((dt, lv))
    # Fillers keep the levels in force before this event (the previous event's levels).
    return out


def _fill(events: list[tuple[int, int]], initial: int) -> list[tuple[int, int]]:
    out = []
    cur = initial
    for dt, lv in events:
        if lv < 0:
            lv = cur
        out.append((dt, lv))
        cur = lv
    return out


class PulseGen:
    """A pulse generator on a serial port."""

    def __init__(self, port: Any, timeout: float = 2.0) -> None:
        self.port = port
        self.timeout = timeout
        self._seq = 0
        self.info: Info | None = None
        self._events: list[tuple[int, int]] = []
        self._sent = 0
        self._ended = False
        self._free: int | None = None  # the generator's free slots, as last reported
        self.round_trips: list[float] = []  # seconds per request, for the sync estimate

    # --- requests ---

    def request(self, cmd: str, *args: object) -> dict[str, str]:
        """Send one request and return its OK fields; PulseGenError on ERR or no answer."""
        self._seq = self._seq % 999_999_999 + 1
        seq = str(self._seq)
        body = ",".join([">" + seq, cmd, *(str(a) for a in args)]).encode()
        if len(body) + 10 > MAX_LINE:
            raise PulseGenError(f"request too long ({len(body)} bytes)")
        t0 = time.perf_counter()
        self.port.write(core.seal(body))
        deadline = t0 + self.timeout
        while True:
            raw = self.port.readline()
            if raw:
                try:
                    parts = core.unseal(raw, 0x3C)
                except core.LineError:
                    continue  # noise on the line (a REPL banner, a traceback): not a reply
                if parts[0].decode() not in (seq, "-"):
                    continue  # a late reply to an earlier request
                self.round_trips.append(time.perf_counter() - t0)
                words = [p.decode() for p in parts[1:]]
                if words[0] == "OK":
                    return dict(w.split("=", 1) for w in words[1:] if "=" in w)
                raise PulseGenError(f"pulse generator refused {cmd}: {','.join(words[1:])}")
            if time.perf_counter() > deadline:
                raise PulseGenError(f"pulse generator: no answer to {cmd} in {self.timeout} s")

    def hello(self) -> Info:
        f = self.request("HELLO")
        try:
            self.info = Info(int(f["pulsegen"]), int(f["cap"]), tuple(f["lines"].split(";")))
        except (KeyError, ValueError):
            raise PulseGenError(f"pulse generator: bad HELLO answer {f}") from None
        return self.info

    def reset(self) -> None:
        self.request("RESET")
        self._events, self._sent, self._ended, self._free = [], 0, False, None

    def set_levels(self, levels: int) -> None:
        self.request("SET", f"{levels:x}")

    def stop(self) -> None:
        self.request("STOP")

    def stat(self) -> Stat:
        f = self.request("STAT")
        try:
            played = int(f["played"])
            hist = tuple(int(h) for h in f["hist"].split(";"))
            return Stat(
                f["state"],
                played,
                int(f["total"]),
                int(f["queued"]),
                int(f["free"]),
                int(f["lv"], 16),
                int(f["late_max"]),
                int(f["late_sum"]) / played if played else 0.0,
                int(f["starved"]),
                hist,
            )
        except (KeyError, ValueError):
            raise PulseGenError(f"pulse generator: bad STAT answer {f}") from None

    # --- a schedule ---

    def load(self, edges: Iterable[Edge], initial: int) -> int:
        """Reset, set the initial levels and send as much of the schedule as fits.

        edges: electrical levels on the generator's lines, t_us from the start (GO).
        Returns the number of events.
        """
        info = self.info or self.hello()
        self.reset()
        events, _ = to_events(edges, info.lines, initial)
        self._events = events
        self.set_levels(initial)
        while self.pump():
            pass
        return len(self._events)

    def pump(self) -> bool:
        """Send the next line of events if the generator has room (or END once all are
        sent). Returns True when a line was sent and more may follow."""
        if self._ended:
            return False
        if self._sent == len(self._events):
            self.request("END", self._sent)
            self._ended = True
            return False
        if self._free is not None and self._free < min(8, self.pending):
            self._free = self.stat().free  # it has been playing: ask how much room is left
            if self._free < min(8, self.pending):
                return False
        parts: list[str] = []
        size = 30  # ">seq,ADD,idx," and "*crc" with room to spare
        i = self._sent
        while i < len(self._events) and (self._free is None or len(parts) < self._free):
            dt, lv = self._events[i]
            item = f"{dt}.{lv:x}"
            if size + len(item) + 1 > MAX_LINE:
                break
            parts.append(item)
            size += len(item) + 1
            i += 1
        try:
            f = self.request("ADD", self._sent, *parts)
        except PulseGenError as e:
            if ": full,free=" in str(e):
                self._free = int(str(e).rsplit("=", 1)[1])
                return False
            raise
        self._sent = int(f.get("next", i))
        self._free = int(f.get("free", 0))
        return True

    def finish(self, timeout: float, poll_s: float = 0.02) -> Stat:
        """Keep the generator fed until the schedule has played; its final STAT.

        PulseGenError when it has not finished within `timeout` seconds."""
        deadline = time.perf_counter() + timeout
        while True:
            self.pump()
            st = self.stat()
            if st.state in ("done", "stopped", "idle"):
                return st
            if time.perf_counter() > deadline:
                raise PulseGenError(f"pulse generator still {st.state} after {timeout} s")
            time.sleep(poll_s)

    @property
    def pending(self) -> int:
        """Events not yet sent to the generator."""
        return len(self._events) - self._sent

    def go(self, lead_us: int) -> float:
        """Start the schedule lead_us after the GO line arrives; returns the host's estimate
        (time.perf_counter seconds) of the generator's start instant."""
        t0 = time.perf_counter()
        self.request("GO", lead_us)
        t1 = time.perf_counter()
        # The GO line arrived somewhere between sending and the answer: take the middle.
        return (t0 + t1) / 2 + lead_us / 1e6


class PulseGenOutput:
    """The generator's lines as a plain Output (static levels, by SET): for the self-test and
    for the levels before a run. The timed schedule goes through PulseGen.load/go."""

    def __init__(self, gen: PulseGen, initial: int = 0) -> None:
        self.gen = gen
        info = gen.info or gen.hello()
        self._bit = {n: i for i, n in enumerate(info.lines)}
        self.channels = frozenset(info.lines)
        self._lv = initial
        self._dirty = True

    def write(self, line: str, level: int) -> None:
        if line not in self._bit:
            raise RigError(f"line {line} is not on the pulse generator")
        if level not in (0, 1):
            raise ValueError(f"level of {line} must be 0 or 1, got {level!r}")
        b = 1 << self._bit[line]
        self._lv = self._lv | b if level else self._lv & ~b
        self._dirty = True

    @property
    def levels(self) -> int:
        return self._lv

    def flush(self) -> None:
        if self._dirty:
            self.gen.set_levels(self._lv)
            self._dirty = False

    def close(self) -> None:
        pass
