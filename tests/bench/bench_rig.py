"""Timing of the rig's paths (docs/rig.md, "Timing").

1. Blinka path (Blinka's mock board on this machine, BLINKA_OS_AGNOSTIC=1): the player's
   lateness per edge, sleep-then-spin (the default) and sleep only, and the write time.
2. Pulse-generator schedule core (firmware/pulsegen/core.py), its own lateness playing a
   1 kHz schedule on the machine's clock: under MicroPython (the WebAssembly port, via node
   host/node/mprun.mjs) and under CPython (one thread, and on a thread fed over its serial
   line while the host pumps, as the rig runs it without a Pico); and the generator's whole
   firmware (board file included) on the virtual board, fed over its UART by the rig's client.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

os.environ.setdefault("BLINKA_OS_AGNOSTIC", "1")

from rich.console import Console
from rich.table import Table

from rmc import FIRMWARE_DIR, ROOT
from rmc.rig import pins as pinmod
from rmc.rig.backends import open_blinka
from rmc.rig.jitter import measure, square_wave
from rmc.rig.loopback import ThreadGenerator
from rmc.rig.pulsegen import PulseGen, core

EDGES = 2000
PERIOD_US = 2000  # a 1 kHz square wave: an edge every millisecond
MPRUN = ROOT / "host" / "node" / "mprun.mjs"

# The generator's service loop on this interpreter's clock: load, GO, play, print STAT.
MP_CODE = """
import time
from pulsegen import core

def main():
    gen = core.Generator(("ball_a", "ball_b", "rotor_a", "rotor_b"), lambda lv: None,
                         time.ticks_us, time.ticks_add, time.ticks_diff, capacity=%(n)d)
    seq = [0]

    def req(body):
        seq[0] += 1
        r = gen.handle(core.seal((">%%d," %% seq[0]).encode() + body))
        assert b",OK" in r, r

    n = %(n)d
    i = 0
    while i < n:
        k = min(20, n - i)
        ev = b",".join(b"%(dt)d.%%x" %% ((i + j) %% 2) for j in range(k))
        req(b"ADD," + str(i).encode() + b"," + ev)
        i += k
    req(b"END," + str(n).encode())
    req(b"GO,20000")
    while gen.service(%(guard)d) != -1:
        pass
    print("STAT", gen.stat())

main()
"""


def pulsegen_micropython(n: int, dt: int, guard: int = 2000) -> dict[str, str]:
    code = MP_CODE % {"n": n, "dt": dt, "guard": guard}
    proc = subprocess.run(
        ["node", str(MPRUN), "--heap", "4M", "--mount", f"{FIRMWARE_DIR}:/fw", "--path", "/fw",
         "--code", code],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    for line in proc.stdout.splitlines():
        if line.startswith("STAT "):
            return dict(kv.split("=", 1) for kv in line[5:].split(",")[1:])
    raise RuntimeError(f"MicroPython run failed:\n{proc.stdout}\n{proc.stderr}")


def pulsegen_cpython(n: int, dt: int, guard: int = 2000) -> dict[str, str]:
    period = 1 << 30

    def ticks() -> int:
        return (time.perf_counter_ns() // 1000) % period

    def add(a: int, d: int) -> int:
        return (a + d) % period

    def diff(a: int, b: int) -> int:
        d = (a - b) % period
        return d - period if d >= period // 2 else d

    gen = core.Generator(("ball_a",), lambda lv: None, ticks, add, diff, capacity=n)
    seq = 0

    def req(body: str) -> None:
        nonlocal seq
        seq += 1
        r = gen.handle(core.seal(f">{seq},{body}".encode()))
        assert b",OK" in r, r

    for i in range(0, n, 20):
        k = min(20, n - i)
        req(f"ADD,{i}," + ",".join(f"{dt}.{(i + j) % 2:x}" for j in range(k)))
    req(f"END,{n}")
    req("GO,20000")
    while gen.service(guard) != -1:
        pass
    return dict(kv.split("=", 1) for kv in gen.stat().split(",")[1:])


def pulsegen_thread(n: int, period_us: int) -> dict[str, object]:
    with ThreadGenerator(capacity=256) as tg:
        gen = PulseGen(tg)
        gen.load(square_wave("ball_a", n, period_us), 0)
        gen.go(50_000)
        return gen.finish(timeout=n * period_us / 2e6 + 30).__dict__


def pulsegen_vboard(n: int, period_us: int) -> dict[str, object]:
    """firmware/pulsegen on the virtual board at real-time speed, fed over its UART."""
    import tempfile

    from rmc.rig.link import open_port
    from rmc.rig.virtual import pulsegen_flash
    from rmc.vboard import VirtualBoard

    with tempfile.TemporaryDirectory() as tmp:
        with VirtualBoard(flash=pulsegen_flash(f"{tmp}/flash"), speed=1) as vb:
            port = open_port(vb.uart_url, timeout=0.1)
            try:
                gen = PulseGen(port, timeout=5)
                gen.load(square_wave("ball_a", n, period_us), 0)
                gen.go(100_000)
                return gen.finish(timeout=n * period_us / 2e6 + 60).__dict__
            finally:
                port.close()


def _hist_p(h: list[int]) -> str:
    total = sum(h) or 1
    labels = ("≤10", "≤50", "≤100", "≤500", "≤1000", ">1000")
    return " ".join(f"{lab}:{100 * c / total:.1f}%" for lab, c in zip(labels, h, strict=True))


def main() -> None:
    con = Console()
    pins = pinmod.load("os_agnostic")
    init = {ln: pins.levels.level(ln, 0) for ln in pinmod.ALL_LINES}
    rows = []
    for spin in (300, 0):
        out = open_blinka(pins, init, pulses=True, pockets=False)
        try:
            r = measure(out, "ball_a", pins.levels, EDGES, PERIOD_US, spin_us=spin)
        finally:
            out.close()
        how = "sleep + spin 300 µs" if spin else "sleep only"
        rows.append((f"Blinka mock, player lateness ({how})", r.lateness))
        if spin:
            rows.append(("Blinka mock, write call", r.write))
    t = Table(title=f"rig timing: {EDGES} edges, one per {PERIOD_US // 2} µs", title_justify="left")
    for col in ("path", "n", "median µs", "p90 µs", "p99 µs", "max µs"):
        t.add_column(col, justify="right" if col != "path" else "left")
    for name, s in rows:
        cells = [f"{s[k]:.1f}" for k in ("p50_us", "p90_us", "p99_us", "max_us")]
        t.add_row(name, f"{s['n']:.0f}", *cells)
    con.print(t)

    g = Table(
        title="pulse-generator core: lateness per event (its own clock)", title_justify="left"
    )
    for col in ("interpreter", "events", "mean µs", "max µs", "histogram (µs)"):
        g.add_column(col)
    n = EDGES
    mp = pulsegen_micropython(n, PERIOD_US // 2)
    cp = pulsegen_cpython(n, PERIOD_US // 2)
    th = pulsegen_thread(n, PERIOD_US)
    vbd = pulsegen_vboard(n, 8000)  # an edge every 4 ms: room to read its line between
    for name, st in (("MicroPython (WebAssembly, node)", mp), ("CPython, one thread", cp)):
        played = int(st["played"])
        hist = [int(x) for x in st["hist"].split(";")]
        mean = int(st["late_sum"]) / max(played, 1)
        g.add_row(name, str(played), f"{mean:.1f}", st["late_max"], _hist_p(hist))
    g.add_row(
        "CPython thread, streamed over its line",
        str(th["played"]),
        f"{th['late_mean_us']:.1f}",
        str(th["late_max_us"]),
        _hist_p(list(th["hist"])),
    )
    g.add_row(
        "firmware/pulsegen on the virtual board (real time, UART, edge every 4 ms)",
        str(vbd["played"]),
        f"{vbd['late_mean_us']:.1f}",
        str(vbd["late_max_us"]),
        _hist_p(list(vbd["hist"])),
    )
    con.print(g)
    con.print(
        "Expected on hardware (docs/rig.md): an RP2040 generator busy-waits on ticks_us and "
        "writes the SIO registers, a few µs; a Raspberry Pi's user-space GPIO is "
        "sub-millisecond typically with multi-millisecond outliers; an FT232H's GPIO goes "
        "through USB transfers (about 1 ms per USB frame / 125 µs microframe)."
    )
    if os.environ.get("RMC_BENCH_JSON"):
        data = {"blinka": rows, "pulsegen_mp": mp, "pulsegen_cp": cp, "thread": th, "vboard": vbd}
        print(json.dumps(data, default=str))


if __name__ == "__main__":
    main()
