"""Benchmark of the wire: frames decoded and checked per second on one core, frame sizes.

Run by `make bench`. A clean session of frames made by the firmware's own encoder is fed
through the host's checker (CRC, HMAC when keyed, gaps, duplicates, decree rules), timed
on one core, with and without HMAC-SHA256 tags.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "host"))

from rich.console import Console
from rich.table import Table

from rmc.checker import Checker
from rmc.framegen import session_lines
from rmc.frames import Verifier, decode
from rmcfw.frames import Encoder

KEY = bytes(range(32))
SPINS = 3000  # about 100,000 frames


def best_of(n: int, func) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return min(times)


def run(key: bytes | None) -> dict:
    lines, _ = session_lines(SPINS, key=key)
    sizes = [len(x) for x in lines]  # with the newline: bytes on the wire
    # As `rmc check` sees them: a capture split at its newlines, or a trace's "line" fields.
    lines = [x.rstrip(b"\n") for x in lines]
    verifier = Verifier(key) if key else None

    def check() -> None:
        c = Checker(key)
        c.feed_many(lines)
        r = c.report()
        assert r.clean and r.valid == len(lines), r.to_json()

    def decode_only() -> None:
        for line in lines:
            decode(line, verifier)

    def encode() -> None:
        enc = Encoder("T01", 1, key)
        for _ in range(len(lines) // 10):
            enc.frame("REV", ("spin", 12, "n", 7, "period_us", 812345), ms=123456)

    t_check = best_of(5, check)
    t_dec = best_of(5, decode_only)
    t_enc = best_of(3, encode)
    return {
        "frames": len(lines),
        "check": len(lines) / t_check,
        "decode": len(lines) / t_dec,
        "encode": (len(lines) // 10) / t_enc,
        "mean": statistics.mean(sizes),
        "min": min(sizes),
        "max": max(sizes),
    }


def main() -> None:
    con = Console()
    plain = run(None)
    keyed = run(KEY)
    t = Table(title=f"rmc wire — one core, CPython {sys.version_info[0]}.{sys.version_info[1]}")
    t.add_column("")
    t.add_column("no HMAC", justify="right")
    t.add_column("HMAC-SHA256/64", justify="right")
    t.add_row("frames in the stream", f"{plain['frames']:,}", f"{keyed['frames']:,}")
    t.add_row(
        "decoded + checked / s (rmc check)", f"{plain['check']:,.0f}", f"{keyed['check']:,.0f}"
    )
    t.add_row("decoded only / s", f"{plain['decode']:,.0f}", f"{keyed['decode']:,.0f}")
    t.add_row(
        "encoded / s (firmware encoder, CPython)",
        f"{plain['encode']:,.0f}",
        f"{keyed['encode']:,.0f}",
    )
    t.add_row(
        "frame size, bytes (mean / min / max)",
        f"{plain['mean']:.1f} / {plain['min']} / {plain['max']}",
        f"{keyed['mean']:.1f} / {keyed['min']} / {keyed['max']}",
    )
    con.print(t)
    goal = 300_000
    verdict = "met" if plain["check"] >= goal else "NOT met"
    con.print(f"goal {goal:,} frames/s decoded + checked without HMAC: {verdict}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    con.print(
        f"(best of 5 runs; load average {load:.2f} on {os.cpu_count()} cores while measuring:"
        " other work on the machine lowers these figures)"
    )


if __name__ == "__main__":
    main()
