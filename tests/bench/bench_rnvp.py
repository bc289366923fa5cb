""" "Rien ne va plus" on lap data: how often the call is late, and how often its lead lies
within ±0.5 s of the one asked (1 s), as `rmc rnvp` counts them (lead to the last pass).
Run by `make bench`; the figures are the table in docs/firmware.md, "Figures".

Data sets, every spin counted from the first of each file (the predictor learns the wheel
as it goes), with the figure after the first 4 spins of each file beside it:
- `tests/fw/lapgen.py`: 8 wheels whose last laps are 0.7-1.9 s, 36 spins each, two spins in
  three clocked only over their last 5-10 laps; timing noise 0, 10 and 20 ms per pass; with
  no prior, and with the wheel's drop period known; and 10 and 20 ms on each lap instead
  (laps clocked one by one: the passes drift);
- the same generator with DESIGN.md's last lap ~15 % longer than the one before (lapgen's
  own makes it ~11 %), on 4 wheels of 0.7-1.4 s: their fast wheels' spins are short;
- `rmc.sim` sessions (the calibrated simulator's wheel): 8 × 40 spins, exact passes, 10 ms,
  and 20 ms on the last 8 laps only; and laps clocked from video (passes on 25 fps frames,
  after 15 ms of hand jitter), on the simulator and on lapgen at DESIGN.md's growth.
Then the same lapgen wheels in one file, as a table whose ball or wheel is changed or a file
of several tables would give them: each wheel's spins in turn, and all of them shuffled; and
the simulator's wheels of other drop speeds, one file each and in turn; and each spin in a
file of its own (a predictor that has learned nothing).
Also the predictor's cost per ball pass, under CPython and MicroPython.

Real lap data is not in the project: RMC_REAL_LAPS=FILE adds a table for a LAPS.csv file of
one's own (lines newest lap first are turned round), as given, its spins of 4 laps or more,
and without the lines that copy a spin, whole or cut short (`rmc rnvp --distinct`).
Reported, not gated.
Its rows also give the file's bound (`rmc.rnvp.ceiling`): the most spins any predictor
could call within ±0.5 s with none late, lines that share their first laps being called
alike until they part (every spin on the generated sets, whose lines part before their
calls are due).

Then a very large file (issue 20): `rmc rnvp --json` on LARGE_LINES lines (lapgen's wheels in
turn, 10 ms; about 10.7 laps a line), run as a process, its wall time and peak memory, beside
the predictor's own time on the same spins (rmc.rnvp.replay alone): the rest is the host's.
RMC_BENCH_LARGE_LINES=N changes the count (0: skip).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fw"))

import lapgen  # noqa: E402

from rmc.rnvp import (  # noqa: E402
    LapsError,
    ceiling,
    copies,
    distinct,
    newest_first,
    on_target,
    read_laps,
    replay,
)
from rmc.sim.physics import Params  # noqa: E402
from rmc.sim.session import simulate_laps  # noqa: E402

LEAD = 1.0
WHEELS = ((0.8, 3), (1.1, 5), (1.4, 3), (1.6, 11), (1.1, 11), (1.4, 12), (0.7, 7), (1.9, 2))
WARM = 4
# lapgen with DESIGN.md's last lap ~15 % longer than the one before: the fast wheels' spins
# are then short (4-6 laps)
DESIGN_WHEELS = ((0.7, 7), (0.8, 3), (1.1, 5), (1.4, 3))


def lapgen_file(
    last_lap_s: float,
    seed: int,
    noise_s: float,
    spins: int = 36,
    growth=(1.15, 1.22),
    lap_noise_s: float = 0.0,
) -> list:
    """One wheel's spins; those of fewer than 4 laps are left out (void: decree 1-7).
    noise_s is on each pass, lap_noise_s on each lap (laps clocked one by one)."""
    w = lapgen.Wheel(lapgen.Rng(seed), last_lap_s, growth=growth)
    out = []
    for i in range(spins):
        keep = None if i % 3 else 5 + i % 6  # often only the last 5-10 laps are clocked
        laps = lapgen.laps(w.spin(noise_s=noise_s, keep=keep, lap_noise_s=lap_noise_s))
        if len(laps) >= 4:
            out.append(laps)
    return out


def score(files: list[tuple[list, dict]]) -> tuple[int, int, int, int, int]:
    """(spins, within, late, spins after warm-up, within after warm-up)."""
    n = within = late = n_w = within_w = 0
    for spins, options in files:
        for i, (laps, c) in enumerate(
            zip(spins, replay(spins, lead_s=LEAD, **options), strict=True)
        ):
            ok = on_target(c, laps, LEAD)
            n += 1
            within += ok
            late += c.late
            if i >= WARM:
                n_w += 1
                within_w += ok
    return n, within, late, n_w, within_w


def datasets() -> list[tuple[str, list[tuple[list, dict]]]]:
    out = []
    for noise in (0.0, 0.01, 0.02):
        files = [(lapgen_file(L, s, noise), {}) for L, s in WHEELS]
        out.append((f"lapgen, no prior, {noise * 1000:.0f} ms", files))
        prior = [(sp, {"drop_s": 1.07 * L}) for (sp, _), (L, _) in zip(files, WHEELS, strict=True)]
        out.append((f"lapgen, wheel's prior, {noise * 1000:.0f} ms", prior))
    for noise in (0.01, 0.02):
        files = [(lapgen_file(L, s, 0.0, lap_noise_s=noise), {}) for L, s in WHEELS]
        out.append((f"lapgen, {noise * 1000:.0f} ms on each lap (not pass)", files))
    for noise in (0.0, 0.01, 0.02):
        files = [(lapgen_file(L, s, noise, growth=(1.28, 1.38)), {}) for L, s in DESIGN_WHEELS]
        out.append((f"lapgen, last lap +15 %, {noise * 1000:.0f} ms", files))
    for jitter, last, label in (
        (0.0, None, "exact"),
        (0.01, None, "10 ms"),
        (0.02, 8, "20 ms, last 8 laps"),
    ):
        files = [(simulate_laps(seed, 40, jitter_s=jitter, last=last), {}) for seed in range(8)]
        out.append((f"rmc.sim, no prior, {label}", files))
    # laps clocked from video: every pass on a frame of 1/25 s, plus 15 ms of hand jitter
    rng = random.Random(25)
    sim = [[video(sp, rng) for sp in simulate_laps(seed, 40)] for seed in range(8)]
    out.append(("rmc.sim, video at 25 fps + 15 ms", [(f, {}) for f in sim]))
    design = [lapgen_file(L, s, 0.0, growth=(1.28, 1.38)) for L, s in DESIGN_WHEELS]
    files = [([video(sp, rng) for sp in f], {}) for f in design]
    out.append(("lapgen, last lap +15 %, video 25 fps + 15 ms", files))
    return out


def video(laps: list[float], rng: random.Random, fps: int = 25, jitter_s: float = 0.015) -> list:
    """The laps as clocked from video: each pass timed to the frame it falls in (the
    frames' phase at random), after a hand's jitter; a lap never shorter than a frame."""
    t = [0.0]
    for lap in laps:
        t.append(t[-1] + lap)
    phase = rng.random()
    frames = [round((x + rng.gauss(0.0, jitter_s)) * fps + phase) for x in t]
    return [max(1, frames[i + 1] - frames[i]) / fps for i in range(len(laps))]


def mixed_datasets() -> list[tuple[str, list[tuple[list, dict]]]]:
    out = []
    for growth, wheels, name in (
        ((1.15, 1.22), WHEELS, "8 wheels"),
        ((1.28, 1.38), DESIGN_WHEELS, "4 wheels, last lap +15 %"),
    ):
        for noise in (0.0, 0.01, 0.02):
            spins = [sp for L, s in wheels for sp in lapgen_file(L, s, noise, growth=growth)]
            out.append((f"{name} in turn, {noise * 1000:.0f} ms", [(spins, {})]))
            mixed = list(spins)
            random.Random(1).shuffle(mixed)
            out.append((f"{name} shuffled, {noise * 1000:.0f} ms", [(mixed, {})]))
            out.append((f"{name}, each spin alone, {noise * 1000:.0f} ms", alone(spins)))
    # the simulator's wheels of other drop speeds (tan of the drop angle spread 0.45 from
    # wheel to wheel, last laps 0.8-1.5 s), the same ball friction on all
    params = Params(wheel_spread=0.45)
    for jitter, last, label in ((0.0, None, "exact"), (0.02, 8, "20 ms, last 8 laps")):
        files = [simulate_laps(100 + s, 40, params, jitter_s=jitter, last=last) for s in range(8)]
        out.append((f"rmc.sim, 8 wheels, one file each, {label}", [(f, {}) for f in files]))
        spins = [sp for f in files for sp in f]
        out.append((f"rmc.sim, 8 wheels in turn, {label}", [(spins, {})]))
        out.append((f"rmc.sim, 8 wheels, each spin alone, {label}", alone(spins)))
    return out


def real_datasets(path: str) -> list[tuple[str, list[tuple[list, dict]]]]:
    """A real LAPS.csv file (RMC_REAL_LAPS): as given, its lines of 4 laps or more, and the
    same without the lines that copy a spin (rmc.rnvp.copies); LapsError or OSError for a
    file that cannot be read as lap times."""
    spins = read_laps(path)
    if newest_first(spins):
        spins = [laps[::-1] for laps in spins]
    found = copies(spins)
    _, own = distinct(spins, found)
    return [
        ("every line, as given", [(spins, {})]),
        ("its lines of 4 laps or more", [([sp for sp in spins if len(sp) >= 4], {})]),
        (f"without the {len(found)} copies of spins", [(own, {})]),
        ("without the copies, 4 laps or more", [([sp for sp in own if len(sp) >= 4], {})]),
    ]


def alone(spins: list) -> list[tuple[list, dict]]:
    """Each spin in a file of its own: a predictor that has learned nothing."""
    return [([sp], {}) for sp in spins]


def table(title: str, sets, rows: dict, bound: bool = False) -> tuple[Table, int]:
    """The sets' scores; with bound, each set's ceiling (any predictor) beside them. The
    generated sets' is every spin (each line parts from the others before its call is due)."""
    t = Table(title=title)
    cols = ("data", "spins", "late", "within ±0.5 s", "after 4 spins")
    for col in cols + (("any predictor",) if bound else ()):
        t.add_column(col, justify="right" if col != "data" else "left")
    late_total = 0
    for label, files in sets:
        n, within, late, n_w, within_w = score(files)
        late_total += late
        rows[label] = {"spins": n, "late": late, "within": within, "within_after_warmup": within_w}
        cells = [
            label,
            str(n),
            str(late),
            f"{within} ({100 * within / n:.0f} %)",
            f"{within_w}/{n_w} ({100 * within_w / n_w:.0f} %)" if n_w else "-",
        ]
        if bound:
            # lines sharing their first laps get one call: the most any predictor could have
            cap = sum(ceiling(spins, LEAD) for spins, _ in files)
            rows[label]["ceiling"] = cap
            cells.append(f"{cap} ({100 * cap / n:.0f} %)")
        t.add_row(*cells)
    return t, late_total


def other_leads(rows: dict) -> tuple[Table, int]:
    """Leads other than 1 s, in seconds (within +-0.5 s) and in revolutions (the call at the
    pass that many laps before the last, or in the lap ending there)."""
    sets = (
        ("lapgen, 10 ms", [lapgen_file(L, s, 0.01) for L, s in WHEELS]),
        (
            "lapgen, last lap +15 %, 10 ms",
            [lapgen_file(L, s, 0.01, growth=(1.28, 1.38)) for L, s in DESIGN_WHEELS],
        ),
        ("rmc.sim, exact", [simulate_laps(seed, 40) for seed in range(8)]),
        ("rmc.sim, 10 ms", [simulate_laps(seed, 40, jitter_s=0.01) for seed in range(8)]),
    )
    t = Table(title="Other leads (no prior, every spin counted)")
    for col in ("data", "lead asked", "spins", "late", "aimed"):
        t.add_column(col, justify="right" if col != "data" else "left")
    late_total = 0
    for label, files in sets:
        for lead_s, revs in ((0.5, 0), (2.0, 0), (0.0, 1), (0.0, 2)):
            n = late = hit = 0
            for spins in files:
                for laps, c in zip(
                    spins, replay(spins, lead_s=lead_s, lead_revs=revs), strict=True
                ):
                    n += 1
                    late += c.late
                    hit += on_target(c, laps, lead_s, revs)
            asked = f"{revs} rev" if revs else f"{lead_s:g} s"
            rows[f"{label}, lead {asked}"] = {"spins": n, "late": late, "aimed": hit}
            late_total += late
            t.add_row(label, asked, str(n), str(late), f"{hit} ({100 * hit / n:.0f} %)")
    return t, late_total


# The same measurement under both interpreters: MicroPython runs this text as a script;
# CPython runs it too, with a `time` that has MicroPython's ticks.
MP_SCRIPT = """
import sys, time
sys.path.append('/tests')
import lapgen
from rmcfw import rnvp
w = lapgen.Wheel(lapgen.Rng(5), 1.1)
spins = [w.spin(noise_s=0.01) for _ in range(12)]
p = rnvp.Predictor(lead_s=1.0)
passes = 0
t0 = time.ticks_us()
for t in spins:
    us = [int(x * 1e6) for x in t]
    p.reset(us[0])
    for x in us[1:]:
        p.lap(x)
        passes += 1
    p.learn_drop()
dt = time.ticks_diff(time.ticks_us(), t0)
print('@@' + str(dt / passes))
"""


class _Ticks:
    """MicroPython's time.ticks_us/ticks_diff on CPython."""

    @staticmethod
    def ticks_us() -> int:
        return time.perf_counter_ns() // 1000

    @staticmethod
    def ticks_diff(a: int, b: int) -> int:
        return a - b


def per_pass_cpython() -> float:
    out: list[str] = []
    code = MP_SCRIPT.replace("import sys, time\n", "").replace("print(", "out.append(")
    exec(code, {"time": _Ticks, "sys": sys, "out": out})  # our own text, run as MicroPython does
    return float(out[0][2:])


def per_pass_micropython() -> float | None:
    script = ROOT / "build" / "bench_rnvp_mp.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(MP_SCRIPT)
    cmd = [
        "node",
        str(ROOT / "host" / "node" / "mprun.mjs"),
        "--mount",
        f"{ROOT / 'firmware'}:/fw",
        "--mount",
        f"{ROOT / 'tests' / 'fw'}:/tests",
        "--path",
        "/fw",
        "--script",
        str(script),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    for line in r.stdout.splitlines():
        if line.startswith("@@"):
            return float(line[2:])
    Console(stderr=True).print(f"[red]MicroPython run failed:[/red] {r.stderr[-500:]}")
    return None


def main() -> int:
    real = os.environ.get("RMC_REAL_LAPS")
    real_sets = []
    if real:  # read first: a file that cannot be read stops the bench before its long work
        try:
            real_sets = real_datasets(real)
        except (OSError, LapsError) as e:
            Console(stderr=True).print(f"RMC_REAL_LAPS: {real}: {e}", highlight=False)
            return 2
    rows: dict = {}
    con = Console()
    t, late_total = table(
        f'"Rien ne va plus" on lap data (lead asked {LEAD:g} s, counted to the last pass)',
        datasets(),
        rows,
    )
    con.print(t)
    # reported, not gated: a changed wheel's first short noisy spins can still be late
    t, _ = table(
        "Several wheels in one file (one predictor learning throughout)", mixed_datasets(), rows
    )
    con.print(t)
    t, late_other = other_leads(rows)
    con.print(t)
    late_total += late_other
    if real_sets:
        # reported, not gated: whatever the file holds
        t, _ = table(f"Real lap data: {Path(real).name}", real_sets, rows, bound=True)
        con.print(t)
    cp = per_pass_cpython()
    mp = per_pass_micropython()
    con.print(
        f"predictor per ball pass: {cp:.0f} µs under CPython, "
        + (f"{mp:.0f} µs under MicroPython (WebAssembly)" if mp else "MicroPython run failed")
    )
    large = large_file(con)
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / "bench_rnvp.json").write_text(
        json.dumps(
            {"sets": rows, "us_per_pass": {"cpython": cp, "micropython": mp}, "large": large},
            indent=1,
        )
    )
    return 0 if late_total == 0 and mp is not None else 1


LARGE_LINES = int(os.environ.get("RMC_BENCH_LARGE_LINES", "20000"))


def large_lines(count: int) -> list[list[float]]:
    """lapgen's wheels in turn, 500 spins each, 10 ms; two lines in three only the last 5-10
    laps (as datasets() draws them); laps to the millisecond, as a file holds them."""
    out: list[list[float]] = []
    k = 0
    while len(out) < count:
        last, seed = WHEELS[k % len(WHEELS)]
        w = lapgen.Wheel(lapgen.Rng(seed * 1000 + k), last)
        for i in range(min(500, count - len(out))):
            keep = None if i % 3 else 5 + i % 6
            out.append([round(x, 3) for x in lapgen.laps(w.spin(noise_s=0.01, keep=keep))])
        k += 1
    return out


# `rmc ARGS`, then its own peak memory on stderr (the MicroPython run is a child process too:
# RUSAGE_CHILDREN would give the larger of the two)
_PEAK = (
    "import resource, sys\n"
    "from rmc.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def large_file(con: Console) -> dict | None:
    if LARGE_LINES <= 0:
        return None
    spins = large_lines(LARGE_LINES)
    passes = sum(len(x) for x in spins)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "laps.csv"
        path.write_text("".join(",".join(f"{x:.3f}" for x in laps) + "\n" for laps in spins))
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", _PEAK, "rnvp", "--json", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        took = time.perf_counter() - start
        peak_mb = int(run.stderr.split()[-1]) / 1024  # its own maximum resident set, kB
        start = time.perf_counter()
        replay(read_laps(path))
        predictor = time.perf_counter() - start
    t = Table(title=f"rmc rnvp --json on {LARGE_LINES:,} lines ({passes:,} laps)")
    for col in ("", "wall time", "peak memory", "the predictor alone", "per lap"):
        t.add_column(col, justify="right" if col else "left")
    t.add_row(
        "rmc rnvp --json" + ("" if run.returncode == 0 else f" (exit {run.returncode})"),
        f"{took:.1f} s",
        f"{peak_mb:.0f} MB",
        f"{predictor:.1f} s",
        f"{predictor / passes * 1e6:.0f} µs",
    )
    con.print(t)
    return {
        "lines": LARGE_LINES,
        "laps": passes,
        "s": took,
        "mb": peak_mb,
        "predictor_s": predictor,
    }


if __name__ == "__main__":
    sys.exit(main())
