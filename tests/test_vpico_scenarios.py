"""The simulator's scenario set on the virtual Pico (issue 27): MicroPython's own RP2040 build
on an emulated RP2040, the firmware on its LittleFS flash with its watchdog, each scenario's
sensor edges at the chip's pins on its own clock, the session commands on its frame UART.
The firmware's results, voids and faults must be the simulator's truth, and `rmc check` must
call its frames clean. The normal spin is tests/test_vpico.py's.

Sessions are as short as each scenario allows (the chip runs at about a tenth to a fifth of
real time): 60-75 s of emulated time, 5-15 minutes of wall time each, so all are `slow`.
"""

from __future__ import annotations

import pytest
from vpico_support import boot_resets, explain, play

from rmc.frames import FrameError, decode
from rmc.rig.scenarios import RigScenario
from rmc.vpico import missing, read_image

WHY = missing()
pytestmark = [
    pytest.mark.skipif(WHY is not None, reason=f"no virtual Pico here: {WHY}"),
    pytest.mark.slow,
]


def _decoded(lines: list[bytes]) -> list:
    """The frames received, each once (a frame resent on RESEND is the same boot and seq)."""
    out, seen = [], set()
    for ln in lines:
        try:
            f = decode(ln)
        except FrameError:
            continue
        if (f.boot, f.seq) not in seen:
            seen.add((f.boot, f.seq))
            out.append(f)
    return out


def _of(p, ftype: str) -> list:
    return [f for f in _decoded(p.lines) if f.type == ftype]


def _assert_clean(p) -> None:
    cmp = p.result.comparison
    assert cmp.ok, explain(p)
    check = p.check()
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr


def test_object_incident(tmp_path):
    """Spin 2: an object falls into the cylinder; the firmware voids the spin (`object`),
    runs the incident procedure, and the relaunch (spin 3) gives the simulator's result."""
    p = play(tmp_path, RigScenario("object", 1004, 3, ("object@2",)))
    _assert_clean(p)
    assert [v["reason"] for v in p.truth("void")] == ["object"]
    voids = _of(p, "VOID")
    assert [v.fields["reason"] for v in voids] == ["object"], voids
    assert _of(p, "INC"), "no incident frames"
    rests = [r["pocket"] for r in p.truth("rest")]
    res = [f.fields["num"] for f in _of(p, "RES")]
    assert res == rests and len(res) == 2, (rests, res)


def test_rotor_not_reversed(tmp_path):
    """Spin 2: the croupier pushes the rotor the same way as on spin 1: the firmware voids
    it (`not_reversed`), spin 1's result stands."""
    p = play(tmp_path, RigScenario("not_reversed", 1002, 2, ("not_reversed@2",)))
    _assert_clean(p)
    assert [v["reason"] for v in p.truth("void")] == ["not_reversed"]
    voids = _of(p, "VOID")
    assert [v.fields["reason"] for v in voids] == ["not_reversed"], voids
    res = [f.fields["num"] for f in _of(p, "RES")]
    assert res[:1] == [p.truth("rest")[0]["pocket"]], res


def test_power_cut_recovers_from_the_flash_journal(tmp_path):
    """The power is cut while the ball runs and restored before the drop: the emulator's chip
    is dropped and a fresh one boots on the same flash image (RAM, peripherals and clock
    start over, as on an RP2040). The firmware reads its state and journal back from
    LittleFS, resumes the spin launched before the cut, and gives the simulator's result
    under the same spin number."""
    p = play(tmp_path, RigScenario("power_cut", 1009, 1, ("power_cut@1",)))
    power = [e["state"] for e in p.events if e.get("event") == "power"]
    assert power == ["off", "on"], power
    assert p.status["boots"] == 2
    _assert_clean(p)
    frames = _decoded(p.lines)
    boots = sorted({f.boot for f in frames})
    assert len(boots) == 2, boots  # the firmware's own boot count went up after the cut
    assert boot_resets(b"\n".join(p.lines))[-1:] == ["power"]
    launch = [f for f in frames if f.type == "LAUNCH"]
    res = [f for f in frames if f.type == "RES"]
    assert len(launch) == 1 and launch[0].boot == boots[0], launch
    assert len(res) == 1 and res[0].boot == boots[1], res
    # the spin number came back from the flash, not from a fresh count
    assert res[0].fields["spin"] == launch[0].fields["spin"]
    assert res[0].fields["num"] == p.truth("rest")[0]["pocket"]
    files = read_image(p.image)
    assert any("journal" in n for n in files) and any("state" in n for n in files), sorted(files)
