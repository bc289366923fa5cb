"""Benchmark of the virtual board: virtual clock speed with dense edges, mpremote latency, cp.

Run by `make bench` (or directly: .venv/bin/python tests/bench/bench_vboard.py [copy]).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ideal_board import IdealBoard  # tests/bench/, beside this file
from rich.console import Console
from rich.table import Table

from rmc import ROOT
from rmc.vboard import MPREMOTE, VirtualBoard

SIM_SECONDS = 60

# A board program shaped like the firmware's loop: hard IRQs stamp edges into preallocated
# buffers, the main loop latches and reads the pocket chain, drains, and sleeps 1 ms.
LOOP = f"""
import array, time, machine
P = machine.Pin
buf = array.array('i', [0] * 256)
n = array.array('i', [0])
def isr(pin):
    i = n[0]
    buf[i & 255] = time.ticks_us()
    n[0] = i + 1
for g in (10, 11, 12, 13):
    P(g, P.IN, P.PULL_DOWN).irq(isr, trigger=P.IRQ_RISING | P.IRQ_FALLING, hard=True)
latch = P(5, P.OUT, value=1)
spi = machine.SPI(0, baudrate=1_000_000, sck=P(2), miso=P(4))
chain = bytearray(5)
t0 = time.ticks_ms()
loops = 0
while time.ticks_diff(time.ticks_ms(), t0) < {SIM_SECONDS * 1000}:
    latch.value(0); latch.value(1)
    spi.readinto(chain)
    loops += 1
    time.sleep_ms(1)
print(n[0], loops)
"""


@dataclass
class Figure:
    what: str
    value: str
    note: str


def dense_trace(seconds: int) -> list[dict]:
    """Rotor quadrature 2 x 500 edges/s, ball pulses 2 x 200/s, a pocket change every 50 ms."""
    recs: list[dict] = []
    for i in range(seconds * 500):
        t = i * 2000
        recs.append({"kind": "sensor", "t_us": t, "ch": "rotor_a", "v": i % 2})
        recs.append({"kind": "sensor", "t_us": t + 1000, "ch": "rotor_b", "v": i % 2})
    for i in range(seconds * 200):
        t = i * 5000 + 300
        recs.append({"kind": "sensor", "t_us": t, "ch": "ball_a" if i % 2 else "ball_b", "v": 1})
        recs.append(
            {"kind": "sensor", "t_us": t + 200, "ch": "ball_a" if i % 2 else "ball_b", "v": 0}
        )
    for i in range(seconds * 20):
        recs.append({"kind": "sensor", "t_us": i * 50_000 + 700, "ch": f"pocket:{i % 39}", "v": 1})
        recs.append(
            {"kind": "sensor", "t_us": i * 50_000 + 40_700, "ch": f"pocket:{i % 39}", "v": 0}
        )
    return recs


def bench_clock(vb: VirtualBoard, overhead: float) -> list[Figure]:
    trace = dense_trace(SIM_SECONDS + 1)
    edges = vb.feed(trace)
    t = time.monotonic()
    p = vb.mpremote("exec", LOOP, timeout=600)
    wall = time.monotonic() - t - overhead
    irqs, loops = (int(x) for x in p.stdout.split())
    return [
        Figure(
            "simulated s per wall s (dense edges)",
            f"{SIM_SECONDS / wall:.1f}",
            f"{SIM_SECONDS} s simulated in {wall:.1f} s wall (mpremote's start deducted); "
            f"{edges} edges scheduled, "
            f"{irqs} hard IRQs, {loops} main-loop passes ({irqs / wall:,.0f} IRQs/s wall)",
        )
    ]


def bench_firmware(vb_flash: Path, overhead: float) -> list[Figure]:
    """The team's firmware loop (board_pico.Board.step + pace, as Board.run) on the same
    board: simulated seconds per wall second, and the passes that started late."""
    fw = ROOT / "firmware"
    if not (fw / "board_pico.py").exists():
        return [Figure("firmware loop", "n/a", "firmware/board_pico.py not there yet")]
    shutil.copytree(
        fw, vb_flash, ignore=shutil.ignore_patterns("__pycache__", "main.py", "pulsegen", "*.md")
    )
    shutil.copy(ROOT / "hardware" / "pico_pins.json", vb_flash / "pins.json")
    shutil.copy(ROOT / "hardware" / "wheel.json", vb_flash / "wheel.json")
    code = (
        "import time, board_pico\nb = board_pico.Board()\nt0 = time.ticks_ms()\nn = 0\n"
        "b._due = time.ticks_us()\n"
        f"while time.ticks_diff(time.ticks_ms(), t0) < {SIM_SECONDS * 1000}:\n"
        "    b.step(); b.pace(); n += 1\nprint('ok', n, b.overruns)\n"
    )
    with VirtualBoard(flash=vb_flash) as vb:
        vb.feed(dense_trace(SIM_SECONDS + 1))
        t = time.monotonic()
        p = vb.mpremote("exec", code, timeout=600, check=False)
        wall = time.monotonic() - t - overhead
    if "ok" not in p.stdout:
        return [Figure("firmware loop", "failed", (p.stdout + p.stderr).strip()[-200:])]
    passes, overruns = p.stdout.split("ok", 1)[1].split()[:2]
    return [
        Figure(
            "simulated s per wall s (team firmware loop)",
            f"{SIM_SECONDS / wall:.1f}",
            f"board_pico.Board() step + pace (Board.run), dense edges, {wall:.1f} s wall",
        ),
        Figure(
            "loop passes, and passes started late (overruns)",
            f"{passes}, {overruns}",
            f"{SIM_SECONDS} simulated s at scan_hz 1000 (pins.json): {SIM_SECONDS * 1000} due",
        ),
    ]


def bench_latency(vb: VirtualBoard) -> tuple[list[Figure], float]:
    whole = []
    for _ in range(5):
        t = time.monotonic()
        vb.mpremote("exec", "pass")
        whole.append(time.monotonic() - t)
    n = 20
    t = time.monotonic()
    vb.mpremote(*(["exec", "pass"] * (n + 1)))
    chained = time.monotonic() - t
    per = (chained - statistics.median(whole)) / n
    return (
        [
            Figure(
                "mpremote exec, whole command",
                f"{statistics.median(whole) * 1000:.0f} ms",
                "median of 5: process start, connect, soft reset, exec",
            ),
            Figure(
                "mpremote exec round trip",
                f"{per * 1000:.0f} ms",
                f"extra cost of each of {n} chained execs (mpremote polls every 10 ms)",
            ),
        ],
        statistics.median(whole),
    )


# Best of N: the machine may be shared. socket:// copies are mostly mpremote's fixed sleeps.
COPY_RUNS = {"pty": 5, "socket://": 3}


def _cp(url: str, *args: str) -> float:
    t = time.monotonic()
    subprocess.run(
        [str(MPREMOTE), "connect", url, "cp", "-f", *args],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return time.monotonic() - t


def bench_copy(tmp: Path) -> list[Figure]:
    """mpremote cp of 100 KB to and from the board, over the pty and socket://, best of N.

    `cp -f`: without it mpremote skips a copy to the board whose file is already there (it
    compares hashes first). Beside each figure, the same copy with a board that answers at
    once (ideal_board.py): the ceiling mpremote itself sets. Runs alternate between the two.
    """
    data = bytes(range(256)) * 400  # 100 KB; its repr, which mpremote reads, is ~2.9 times
    src, back = tmp / "blob.bin", tmp / "back.bin"
    src.write_bytes(data)
    figures = []
    with VirtualBoard(pty=True) as vb, IdealBoard.pty() as ipty, IdealBoard.tcp() as itcp:
        boards = {"pty": (vb.repl_pty, ipty.url), "socket://": (vb.repl_url, itcp.url)}
        for label, (ours, ideal) in boards.items():
            for way, args in (
                ("to", (str(src), ":blob.bin")),
                ("from", (":blob.bin", str(back))),
            ):
                times: dict[str, list[float]] = {"ours": [], "ideal": []}
                for _ in range(COPY_RUNS[label]):
                    for who, url in (("ours", ours), ("ideal", ideal)):
                        back.unlink(missing_ok=True)
                        times[who].append(_cp(url, *args))
                        if way == "from" and back.read_bytes() != data:
                            raise SystemExit(f"mpremote cp from {url}: the copy differs")
                mine = times["ours"]
                figures.append(
                    Figure(
                        f"mpremote cp 100 KB {way} the board, {label}",
                        f"{min(mine):.2f} s",
                        f"best of {len(mine)} ({min(mine):.2f}-{max(mine):.2f} s), whole "
                        f"command; a board answering at once: {min(times['ideal']):.2f} s",
                    )
                )
    return figures


def main(argv: list[str]) -> None:
    """All figures; `copy` as the only argument: the mpremote cp figures only."""
    console = Console(width=max(Console().width, 110))
    figures: list[Figure] = []
    with console.status("virtual board benchmarks..."):
        if argv != ["copy"]:
            with VirtualBoard() as vb:
                lat, overhead = bench_latency(vb)
                figures += lat
                figures += bench_clock(vb, overhead)
            with tempfile.TemporaryDirectory() as tmp:
                figures += bench_firmware(Path(tmp) / "flash", overhead)
        with tempfile.TemporaryDirectory() as tmp:
            figures += bench_copy(Path(tmp))
    table = Table(title="Virtual board (MicroPython WebAssembly + simulated machine)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("how")
    for f in figures:
        table.add_row(f.what, f.value, f.note)
    console.print(table)


if __name__ == "__main__":
    main(sys.argv[1:])
