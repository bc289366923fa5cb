"""The rig's whole logic against the virtual board: the same scenario set as `make hil`.

The virtual board (rmc.vboard) runs the table firmware on MicroPython's WebAssembly port,
deployed onto it by the real mpremote;
the rig feeds it each scenario's sensor edges through the virtual backend, sends the session
commands on its frame UART, reads the frames back and compares them with the truth. The
self-test reads the board's inputs over the real mpremote transport, as on hardware.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import ClassVar

import pytest

from rmc.demo.deploy import build, deploy
from rmc.rig import pins as pinmod
from rmc.rig.backends import RigError
from rmc.rig.compare import Tolerances
from rmc.rig.jitter import square_wave
from rmc.rig.link import open_port
from rmc.rig.pulsegen import PulseGen
from rmc.rig.scenarios import scenario_set, write_trace
from rmc.rig.selftest import open_mpremote_probe, selftest
from rmc.rig.virtual import (
    VirtualOutput,
    VirtualRig,
    firmware_flash,
    initial_records,
    pulsegen_flash,
)
from rmc.vboard import VirtualBoard

# Virtual seconds per wall second: a 90 s session in about 20 s. Faster, the firmware on the
# WebAssembly port falls behind the virtual clock on a loaded machine and its results change.
SPEED = 5.0
LEVELS = pinmod.load("os_agnostic").levels


@pytest.fixture
def repl_board(tmp_path):
    """A virtual board with the firmware's files but no main.py: its REPL stays free."""
    flash = firmware_flash(tmp_path / "flash")
    os.remove(flash / "main.py")
    with VirtualBoard(flash=flash, speed=1) as vb:
        yield vb


class Miswired(VirtualOutput):
    """The rig's harness with two pocket lines swapped and one ball line open."""

    SWAP: ClassVar[dict[str, str]] = {"pocket:3": "pocket:4", "pocket:4": "pocket:3"}

    def write(self, line, level):
        if line == "ball_b":
            return
        super().write(self.SWAP.get(line, line), level)


class TestBesideTheScenarios:
    """The self-test, the pulse generator and a refusal: a class of its own, so that
    `make test` (--dist loadscope) runs them on another worker than the scenarios."""

    def test_selftest_through_the_virtual_board(self, repl_board):
        probe = open_mpremote_probe(repl_board.repl_url, pinmod.board_pins())
        try:
            out = VirtualOutput(repl_board, LEVELS)
            rep = selftest({ln: out for ln in out.channels}, probe, LEVELS)
            assert rep.ok, rep.to_json()
            assert len(rep.checks) == 45
            bad = Miswired(repl_board, LEVELS)
            rep = selftest({ln: bad for ln in bad.channels}, probe, LEVELS)
            failed = {c.line: c.detail for c in rep.checks if not c.ok}
            assert set(failed) == {"pocket:3", "pocket:4", "ball_b"}, failed
            assert "also moves pocket:4" in failed["pocket:3"]
            assert "not seen" in failed["ball_b"]
        finally:
            probe.close(restart=False)

    def test_pulse_generator_firmware_on_the_virtual_board(self, tmp_path):
        """firmware/pulsegen (board file and main.py included) on a virtual board, fed over its
        UART by the rig's client: a schedule larger than its memory, streamed, all played."""
        with VirtualBoard(flash=pulsegen_flash(tmp_path / "flash"), speed=2) as vb:
            port = open_port(vb.uart_url, timeout=0.1)
            try:
                gen = PulseGen(port, timeout=5)
                info = gen.hello()
                assert info.lines == ("ball_a", "ball_b", "rotor_a", "rotor_b")
                n = info.capacity + 500
                # An edge every 4 ms: the generator reads its line in gaps longer than 3 ms.
                assert gen.load(square_wave("rotor_b", n, 8000), 0) == n
                assert gen.pending > 0  # more than fits: the rest is streamed while it plays
                gen.go(100_000)
                st = gen.finish(timeout=60)
            finally:
                port.close()
        assert st.state == "done" and st.played == n and st.starved == 0
        assert sum(st.hist) == n and st.levels == 0
        # Its lateness (st.hist, st.late_mean_us) is the WebAssembly interpreter's on a shared
        # machine: measured by `make bench` and discussed in docs/rig.md, not asserted here.

    def test_virtual_rig_needs_a_finite_speed(self, tmp_path):
        sc = scenario_set()[0]
        trace = write_trace(sc, tmp_path)
        with VirtualBoard(speed=0) as vb, pytest.raises(RigError, match="finite speed"):
            VirtualRig(vb).run(trace)


# Issue 6 asks the « rien ne va plus » lead within ±0.5 s on nine spins out of ten: a share
# over many spins, so each scenario is checked without it (late calls still fail at once)
# and the share is checked over the whole set by the last test.
PER_RUN = Tolerances(rnvp_within_fraction=0.0)
WAIT_S = 1800.0  # a scenario run by another worker is waited for this long at most


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory) -> Path:
    """Where the scenarios' runs are kept for every worker of this pytest run: each scenario
    is a test class of its own, so that `make test` (--dist loadscope) spreads the set over
    its workers, and the last test reads every run whichever worker made it. (Under xdist
    each worker's temporary folder is in the run's own, which pytest clears in time.)"""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "rig-virtual"
    folder.mkdir(exist_ok=True)
    return folder


def _play(sc, folder: Path) -> dict:
    """One scenario on a fresh virtual board; what the tests check, as JSON."""
    trace = write_trace(sc, folder)
    init = folder / "initial.jsonl"
    init.write_text("\n".join(json.dumps(r) for r in [trace.header, *initial_records(trace)]))
    # As on a table: an empty board, the firmware compiled with mpy-cross and copied with
    # the real mpremote (as `make deploy`), then a reset runs its main.py.
    built = build(folder / "mpy")
    with VirtualBoard(speed=SPEED, sensors=init) as vb:
        deploy(vb, built)
        vb.skip_events()
        vb.mpremote("exec", "import machine; machine.reset()", check=False, timeout=30)
        assert vb.wait_event("boot", timeout=30) is not None, "main.py did not start"
        result = VirtualRig(vb, tolerances=PER_RUN).run(trace, record=folder / "run.jsonl")
    cmp = result.comparison
    detail = json.dumps(
        {"problems": cmp.problems, "spins": [s.__dict__ for s in cmp.spins if not s.ok],
         "violations": cmp.checker.get("violations", [])[:5], "notes": result.notes},
        indent=1, default=str,
    )  # fmt: skip
    return {
        "ok": cmp.ok,
        "detail": detail,
        "spins": len(cmp.spins),
        "rnvp_within": cmp.rnvp_within,
        "rnvp_asked": cmp.rnvp_asked,
    }


def run_scenario(sc, shared: Path) -> dict:
    """The scenario's run: played here if no worker has taken it yet (an O_EXCL claim),
    else waited for. A run that raised is kept as its error, so nobody waits in vain."""
    done = shared / f"{sc.name}.json"
    try:
        os.close(os.open(shared / f"{sc.name}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        deadline = time.monotonic() + WAIT_S
        while not done.exists():
            assert time.monotonic() < deadline, f"{sc.name}: no run from another worker"
            time.sleep(0.5)
    else:
        folder = shared / sc.name
        folder.mkdir(exist_ok=True)
        try:
            out = _play(sc, folder)
        except BaseException as e:
            out = {"error": f"{type(e).__name__}: {e}"}
            raise
        finally:
            part = done.with_suffix(".part")
            part.write_text(json.dumps(out))
            part.replace(done)
    out = json.loads(done.read_text())
    assert "error" not in out, f"{sc.name}: {out.get('error')}"
    return out


def _scenario_class(sc) -> type:
    def test_on_the_virtual_board(self, shared_runs):
        out = run_scenario(sc, shared_runs)
        assert out["ok"], out["detail"]
        assert out["spins"] == sc.spins

    return type(
        f"TestScenario_{sc.name}", (), {"test_on_the_virtual_board": test_on_the_virtual_board}
    )


for _sc in scenario_set():
    globals()[f"TestScenario_{_sc.name}"] = _scenario_class(_sc)


class TestOverTheSet:
    def test_rnvp_lead_over_the_scenario_set(self, shared_runs):
        within = asked = 0
        for sc in scenario_set():
            out = run_scenario(sc, shared_runs)
            within += out["rnvp_within"]
            asked += out["rnvp_asked"]
        assert asked >= 20
        assert within >= Tolerances().rnvp_within_fraction * asked, (
            f"« rien ne va plus » within {Tolerances().rnvp_window_text()} of the asked instant on"
            f" {within}/{asked} spins"
        )
