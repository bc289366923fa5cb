"""The firmware on an emulated Raspberry Pi Pico (issue 27, docs/vpico.md).

MicroPython's own RP2040 build (../shared/rp2/) on rp2040js, the firmware on its LittleFS
flash as `make deploy` puts it, main.py run at power-up. The REPL is reached with the real
mpremote over socket://, the frames are read on the frame UART's socket. The emulated chip
runs at about a fifth of real time: the cases that play a spin or cut the power are marked
`slow`.
"""

from __future__ import annotations

import re

import pytest
from vpico_support import explain, frames_until, image, play

from rmc.vpico import VirtualPico, missing, read_image

WHY = missing()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"no virtual Pico here: {WHY}")


def test_boots_main_py_and_the_repl_answers_mpremote(tmp_path):
    """Power-up runs main.py (its BOOT frame on the frame UART); the real mpremote stops it
    and gets answers; the free heap after a soft reset and after importing the firmware."""
    with VirtualPico(image=image(tmp_path, nowdt=True)) as vp:
        boot = frames_until(vp.uart_url, b"BOOT", timeout=120)
        assert b",BOOT," in boot and b"reset=power" in boot, boot
        p = vp.mpremote("exec", "print(1+1)", timeout=120)
        assert p.stdout.strip() == "2", p.stdout
        p = vp.mpremote(
            "exec",
            "import gc, sys; gc.collect(); a = gc.mem_free(); import board_pico; gc.collect();"
            " print(sys.implementation._machine, a, gc.mem_free())",
            timeout=120,
        )
        m = re.search(r"RP2040 (\d+) (\d+)", p.stdout)
        assert m, p.stdout
        after_boot, after_import = int(m[1]), int(m[2])
        print(f"\nvpico heap: {after_boot} bytes free after boot, {after_import} after import")
        assert 150_000 < after_boot < 264 * 1024 and 0 < after_import < after_boot
        st = vp.status()
        assert st["flash"]["programs"] > 0  # the table's state and journal, saved at boot
        print(f"vpico speed: {st['speed']:.3f} of real time")


@pytest.mark.slow
def test_writes_reach_the_image_and_survive_a_power_cut(tmp_path):
    """LittleFS on the emulated flash: a file written, the power cut (the emulator stopped)
    and restored on the same image: the file is there, and the host reads it too."""
    img = image(tmp_path, nowdt=True)
    with VirtualPico(image=img) as vp:
        assert b"BOOT" in frames_until(vp.uart_url, b"BOOT", timeout=120)  # main.py is running
        vp.mpremote(
            "exec",
            "f = open('note.txt', 'w'); f.write('written on the chip ' * 50); f.close()",
            timeout=120,
        )
        vp.power_cut()
        assert vp.wait_event("power", timeout=30, where=lambda e: e["state"] == "off")
        vp.power_restore()
        assert b"reset=power" in frames_until(vp.uart_url, b"BOOT", timeout=120)
        p = vp.mpremote("exec", "print(len(open('note.txt').read()))", timeout=120)
        assert p.stdout.strip() == "1000", p.stdout
    files = read_image(img)
    assert files["note.txt"] == b"written on the chip " * 50
    assert "state" in " ".join(files) or "journal" in " ".join(files), sorted(files)


@pytest.mark.slow
@pytest.mark.parametrize("flash_timing", [False, True], ids=["instant", "typ"])
def test_one_simulated_spin_gives_the_simulators_result(tmp_path, flash_timing):
    """One normal spin of the simulator played at the chip's pins on its own clock: the
    firmware's RES frame is the simulator's truth and `rmc check` finds the frames clean.
    With the flash chip's typical times (typ) too: each flash erase stops the chip's
    interrupts for 45 ms, and the firmware makes none while the ball's edges are due (its
    journal holds the running ball's routine frames in RAM until the drop); before, the
    ball's two edges came during an erase, were served together in pin order, and the
    spin was voided (same_dir or sensors)."""
    from rmc.rig.scenarios import RigScenario

    p = play(tmp_path, RigScenario("normal", 1000, 1, ()), flash_timing=flash_timing)
    print(f"\nvpico spin: speed {p.status['speed']:.3f} of real time, flash {p.status['flash']}")
    assert not any(b",REV," in ln and b"reversed=" in ln for ln in p.lines), p.lines
    truth = p.truth("rest")
    res = p.frames("RES")
    assert p.result.comparison.ok, explain(p)
    assert len(truth) == 1 and len(res) == 1, res
    assert f"num={truth[0]['pocket']},".encode() in res[0], (truth, res)
    check = p.check()
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr
