"""Well-formed frame streams for tests, benchmarks and demonstrations of the checker.

A scripted table that follows the decree: a session opened by a chef de table, spins whose
rotor alternates and whose ball is launched against it, revolutions, « rien ne va plus »,
drop, result, the last three spins announced, the session closed and the lid locked. It
uses the firmware's own encoder (`rmcfw.frames.Encoder`), so the frames are exactly those
a table sends. Not a physics simulation (that is `rmc.sim`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from rmc.trace import wheel_id
from rmcfw import numbers, proto
from rmcfw.frames import Encoder

Emit = Callable[[str, tuple], object]


def result_fields(spin: int, num: str) -> tuple:
    ch = numbers.chances(num) or (numbers.VERT, "-", "-")
    return ("spin", spin, "num", num, "colour", ch[0], "parity", ch[1], "half", ch[2])


SHORT_SESSION = "fewer than three coups to announce"  # as the simulator's chef says it


class ScriptedTable:
    """Emits frames through `emit(type, fields)`: an Encoder's frame or a Wire's emit."""

    def __init__(self, emit: Emit, seed: int = 1, revs: int = 12, status_every: int = 4):
        self.emit = emit
        self.rng = random.Random(seed)
        # the pockets under the ball sensor (LAUNCH's and DROP's `under`): a stream of their
        # own, so that the results of a seed are those they were before these fields
        self.under_rng = random.Random(f"under-{seed}")
        self.spin = 0
        self.rdir = "ccw"
        self.revs = revs
        self.status_every = status_every
        self.results: list[tuple[int, str]] = []
        self.voids: list[tuple[int, str]] = []
        self.coups = 0  # results in the open session (SCLOSE's spins, as the firmware counts)

    def boot(self, fw: str = "0.1.0", wheel: str | None = None, prev: str = "-") -> None:
        if wheel is None:
            wheel = wheel_id() or ""  # hardware/wheel.json's, as a deployed board's
        self.emit(
            proto.T_BOOT, ("fw", fw, "wheel", wheel, "reset", "power", "faults", "", "prev", prev)
        )

    def open(self, chef: str = "chef-1", session: int = 1) -> None:
        self.emit(proto.T_LID, ("locked", 0))
        self.emit(proto.T_SESSION_OPEN, ("chef", chef, "session", session))
        self.coups = 0

    def play(self, void: str | None = None) -> None:
        self.spin += 1
        n = self.spin
        self.rdir = "cw" if self.rdir == "ccw" else "ccw"
        bdir = "ccw" if self.rdir == "cw" else "cw"
        under = self.under_rng.choice(numbers.NUMBERS)
        self.emit(proto.T_LAUNCH, ("spin", n, "rdir", self.rdir, "bdir", bdir, "under", under))
        for i in range(1, self.revs + 1):
            self.emit(proto.T_REV, ("spin", n, "n", i, "period_us", 500000 + 40000 * i))
            if self.status_every and i % self.status_every == 0:
                self.emit(
                    proto.T_STATUS,
                    (
                        "state",
                        proto.S_TRACK,
                        "spin",
                        n,
                        "rotor_ms",
                        3800,
                        "rdir",
                        self.rdir,
                        "lid",
                        0,
                    ),
                )
        self.emit(proto.T_RNVP, ("spin", n, "drop_ms", 1500, "lead_ms", 1200, "why", "fit"))
        under = self.under_rng.choice(numbers.NUMBERS)
        self.emit(proto.T_DROP, ("spin", n, "revs", self.revs, "under", under))
        if void:
            self.emit(proto.T_VOID, ("spin", n, "reason", void))
            self.voids.append((n, void))
            return
        num = self.rng.choice(numbers.NUMBERS)
        self.emit(proto.T_RESULT, result_fields(n, num))
        self.results.append((n, num))
        self.coups += 1

    def announce_last_three(self) -> None:
        # as the firmware counts: the session's coups so far, plus the three
        self.emit(proto.T_LAST_THREE, ("last", self.coups + 3, "left", 3))

    def close(self, chef: str = "chef-1", session: int = 1, reason: str | None = None) -> None:
        fields = ("chef", chef, "session", session, "spins", self.coups)
        self.emit(proto.T_SESSION_CLOSE, (*fields, "reason", reason) if reason else fields)
        self.emit(proto.T_LID, ("locked", 1))

    def session(self, spins: int, chef: str = "chef-1") -> None:
        """A whole session: open, `spins` spins (last three announced), close, lid locked."""
        self.open(chef)
        for i in range(spins):
            if i == spins - 3:
                self.announce_last_three()
            self.play()
        # fewer than three coups: nothing to announce, the chef closes it saying why
        self.close(chef, reason=SHORT_SESSION if spins < 3 else None)


def session_lines(
    spins: int = 20,
    table: str = "T01",
    boot: int = 1,
    key: bytes | None = None,
    seed: int = 1,
    revs: int = 12,
    first_spin: int = 1,
    prev: str = "-",
) -> tuple[list[bytes], ScriptedTable]:
    """A whole clean session as frame lines (each with its newline). A later boot goes on
    from spin `first_spin`, its BOOT naming the previous boot's last frame (`prev`)."""
    enc = Encoder(table, boot, key)
    lines: list[bytes] = []
    ms = [0]

    def emit(ftype: str, fields: tuple) -> None:
        ms[0] += 250
        lines.append(bytes(enc.frame(ftype, fields, ms=ms[0])))

    t = ScriptedTable(emit, seed=seed, revs=revs)
    t.spin = first_spin - 1
    if t.spin % 2:  # the rotor goes on alternating from the spins before
        t.rdir = "cw" if t.rdir == "ccw" else "ccw"
    t.boot(prev=prev)
    t.session(spins)
    return lines, t


def iter_lines(lines: list[bytes]) -> Iterator[bytes]:
    yield from lines
