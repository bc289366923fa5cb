"""`make deploy` onto a table whose firmware runs with its watchdog (issue 6, the board).

An RP2040's watchdog cannot be stopped: once the firmware has started it, the board resets
watchdog_ms (2 s) after mpremote stops the firmware. The virtual board models that, so a copy
that takes longer than that is cut short here as it would be on a Pico; `make deploy` first
restarts the board without its watchdog (`nowdt`), and removes `nowdt` when done.
"""

from __future__ import annotations

import subprocess

from rmc import ROOT
from rmc.demo.deploy import build
from rmc.vboard import VirtualBoard


def _mpremote_slow(vb) -> subprocess.CompletedProcess:
    """A command that keeps the firmware stopped for 3 s, longer than its watchdog."""
    return vb.mpremote(
        "exec", "import time; time.sleep_ms(3000); print('survived')", check=False, timeout=60
    )


def test_make_deploy_onto_a_running_table(tmp_path):
    flash = build(tmp_path / "flash")  # the firmware already on the board, running
    with VirtualBoard(flash=flash, speed=1.0) as vb:
        assert vb.wait_event("boot", timeout=30) is not None
        assert vb.wait_event("watchdog", timeout=60) is not None  # armed by the firmware
        # stopped by mpremote, its watchdog resets it before 3 s are over
        p = _mpremote_slow(vb)
        assert "survived" not in p.stdout
        assert vb.wait_event("reset", timeout=10, where=lambda e: e["kind"] == "wdt")
        assert vb.wait_event("watchdog", timeout=60) is not None  # running again
        port = f"socket://127.0.0.1:{vb.repl_port}"
        p = subprocess.run(
            ["make", "-C", str(ROOT), "deploy", f"PORT={port}"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        assert "rm :nowdt" in p.stdout and "main.py" in p.stdout
        # `nowdt` is gone: after a reset the firmware runs with its watchdog again
        listing = vb.mpremote("ls", ":", timeout=60).stdout
        assert "nowdt" not in listing, listing
        vb.skip_events()
        vb.mpremote("exec", "import machine; machine.reset()", check=False, timeout=30)
        assert vb.wait_event("boot", timeout=30) is not None
        assert vb.wait_event("watchdog", timeout=60) is not None
        assert "survived" not in _mpremote_slow(vb).stdout
        assert vb.wait_event("reset", timeout=10, where=lambda e: e["kind"] == "wdt")
