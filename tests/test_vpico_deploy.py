"""`make deploy PORT=socket://...` onto the virtual Pico (issue 27): the Makefile's own target,
its real mpremote, against an emulated RP2040 whose firmware already runs with its watchdog,
as on a table board being updated. The watchdog cannot be stopped: deploy restarts the chip
without it (`nowdt`), waits for it, copies, and removes `nowdt` again. Afterwards the chip's
flash holds exactly what `make mpy` built, and a power cycle boots it with its watchdog.
"""

from __future__ import annotations

import subprocess

import pytest
from vpico_support import boot_resets, frames_until

from rmc import FIRMWARE_DIR, ROOT
from rmc.vpico import VirtualPico, build_image, firmware_files, missing, read_image

WHY = missing()
pytestmark = [
    pytest.mark.skipif(WHY is not None, reason=f"no virtual Pico here: {WHY}"),
    pytest.mark.slow,
]


def test_make_deploy_onto_the_virtual_pico(tmp_path):
    # the board's firmware, a little older: main.py differs, and a stale source twin of a
    # compiled module lies beside it (it would win at import: deploy removes it)
    fw = firmware_files(tmp_path / "fw")
    (fw / "main.py").write_text((fw / "main.py").read_text() + "# an older main.py\n")
    stale = (FIRMWARE_DIR / "rmcfw" / "ball.py").read_bytes()
    img = build_image(tmp_path / "flash.img", fw, {"rmcfw/ball.py": stale})
    mpy = tmp_path / "mpy"
    with VirtualPico(image=img) as vp:
        assert b",BOOT," in frames_until(vp.uart_url, b",BOOT,", timeout=300)  # it runs
        p = subprocess.run(
            # -o: the venv counts as installed (make setup is not this test's business);
            # MPY_DIR: the build goes to the test's folder, not the work tree's build/
            ["make", "-s", "-o", ".venv/.rmc-installed", "deploy", f"PORT={vp.repl_url}",
             f"MPY_DIR={mpy}"],
            cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False,
        )  # fmt: skip
        print(p.stdout[-3000:], p.stderr[-3000:])
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        files = read_image(img)
        # every file built is on the chip as built; `nowdt` is gone
        built = {
            f.relative_to(mpy).as_posix(): f.read_bytes() for f in mpy.rglob("*") if f.is_file()
        }
        for name, data in built.items():
            assert files.get(name) == data, name
        assert "nowdt" not in files and "rmcfw/ball.py" not in files
        # a power cycle: the deployed firmware boots, with its watchdog
        vp.power_cut()
        assert vp.wait_event("power", timeout=30, where=lambda e: e["state"] == "off")
        vp.power_restore()
        boot = frames_until(vp.uart_url, b",BOOT,", timeout=300)
    assert boot_resets(boot) == ["power"], boot
