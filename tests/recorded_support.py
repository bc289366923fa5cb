"""Helpers for the tests of `rmc settle` on recorded spins and `rmc export` (not a test
module): a scripted table whose frames carry host receive times we choose, written as a trace
or stored as the table service stores them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rmc.framegen import ScriptedTable, result_fields
from rmc.frames import decode
from rmc.timestamps import format_instant
from rmc.trace import TraceWriter, make_header
from rmcfw import proto
from rmcfw.frames import Encoder

TABLE = "T01"
BASE_MS = 1_714_591_800_000  # 2024-05-01T19:30:00Z: the first frame comes 250 ms after
STEP_MS = 250


@dataclass
class Table:
    """A table whose every frame is received STEP_MS after the one before."""

    table: str = TABLE
    boot: int = 1
    key: bytes | None = None
    lines: list[tuple[bytes, float]] = field(default_factory=list)  # (line, rx_ms)

    def __post_init__(self) -> None:
        self.enc = Encoder(self.table, self.boot, self.key)
        self.t = BASE_MS
        self.st = ScriptedTable(self.emit, seed=5, revs=6, status_every=0)

    def emit(self, ftype: str, fields: tuple) -> None:
        self.t += STEP_MS
        line = bytes(self.enc.frame(ftype, fields, ms=self.t - BASE_MS)).rstrip(b"\n")
        self.lines.append((line, float(self.t)))

    # --- spins ---

    def start(self) -> None:
        self.st.boot()
        self.st.open()

    def play(self, void: str | None = None) -> int:
        self.st.play(void)
        return self.st.spin

    def result_of(self, spin: int) -> str:
        return dict(self.st.results)[spin]

    def incident(self) -> int:
        """A spin stopped by an object in the cylinder (decree 1-4): its « rien ne va
        plus », its void, the ball put back in the previous coup's pocket, the relaunch. The
        next `play()` is the relaunched spin."""
        st = self.st
        st.spin += 1
        n = st.spin
        st.rdir = "cw" if st.rdir == "ccw" else "ccw"
        bdir = "ccw" if st.rdir == "cw" else "cw"
        self.emit(proto.T_LAUNCH, ("spin", n, "rdir", st.rdir, "bdir", bdir))
        self.emit(proto.T_REV, ("spin", n, "n", 1, "period_us", 500000))
        self.emit(proto.T_RNVP, ("spin", n, "drop_ms", 1500, "lead_ms", 0, "why", "incident"))
        self.emit(proto.T_VOID, ("spin", n, "reason", proto.V_OBJECT))
        self.emit(proto.T_INCIDENT, ("spin", n, "step", proto.INC_START))
        previous = st.results[-1][1]
        self.emit(proto.T_INCIDENT, ("spin", n, "step", proto.INC_BACK, "num", previous))
        self.emit(proto.T_INCIDENT, ("spin", n, "step", proto.INC_RELAUNCH))
        st.voids.append((n, proto.V_OBJECT))
        return n

    def with_the_rotor(self, num: str = "5") -> int:
        """A spin whose ball was launched the rotor's way: its result is rejected."""
        st = self.st
        st.spin += 1
        n = st.spin
        st.rdir = "cw" if st.rdir == "ccw" else "ccw"
        self.emit(proto.T_LAUNCH, ("spin", n, "rdir", st.rdir, "bdir", st.rdir))
        for i in range(1, 7):
            self.emit(proto.T_REV, ("spin", n, "n", i, "period_us", 500000))
        self.emit(proto.T_RNVP, ("spin", n, "drop_ms", 1500, "lead_ms", 1200, "why", "fit"))
        self.emit(proto.T_DROP, ("spin", n, "revs", 6))
        self.emit(proto.T_RESULT, result_fields(n, num))
        st.coups += 1
        return n

    def last_three(self) -> None:
        self.st.announce_last_three()

    def close(self, reason: str | None = None) -> None:
        self.st.close(reason=reason)

    # --- times ---

    def rx(self, ftype: str, spin: int, step: str | None = None) -> float:
        """When the frame of that type (and INC step) of that spin was received (ms)."""
        for line, rx in self.lines:
            f = decode(line)
            if f.type == ftype and f.fields.get("spin") == str(spin):
                if step is None or f.fields.get("step") == step:
                    return rx
        raise LookupError(f"no {ftype} of spin {spin}")

    # --- as a trace, as the service's rows ---

    def trace(self, path: Path, end: bool = True) -> Path:
        w = TraceWriter(path, make_header(self.table, "record"))
        for line, rx in self.lines:
            w.frame(line, rx)
        if end:
            w.close()
        else:
            w.out.close()
        return path

    def rows(self) -> list:
        """The frames as `rmc serve` stores them (rmc.serve.store.FrameRow)."""
        from rmc.serve.store import FrameRow

        out = []
        for line, rx in self.lines:
            f = decode(line)
            text = ("~" if f.resent else "") + f.line.decode("ascii")
            out.append(
                FrameRow(self.table, f.boot, f.seq, f.ms, f.type, text, round(rx * 1000), f.resent)
            )
        return out


def iso(ms: float) -> str:
    """An instant given in host ms, as ISO 8601 text (UTC)."""
    return format_instant(round(ms * 1000))  # type: ignore[return-value]
