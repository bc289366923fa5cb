"""MicroPython's own mpremote test suite against the virtual Pico (issue 27).

The suite (tools/mpremote/tests of MicroPython: test_*.sh and their .exp) is kept outside the
project, in shared/peer/mpremote-tests beside the work tree, or $RMC_MPREMOTE_TESTS. It is
copied to a temporary folder; each script runs against one emulated RP2040 running
MicroPython's own RPI_PICO build on a fresh, empty LittleFS flash (a Pico as it comes), as
run-mpremote-tests.sh runs it (CR stripped, the temporary folder written ${TMP}), and its
output is compared with its .exp. The chip runs at about a tenth of real time and every
mpremote command starts with a soft reset: the suite takes many minutes (`slow`).

Two changes, the virtual board's (tests/mpremote_peer_support.py), and no more (this port
has os.VfsFat: ramdisk.py is the suite's own):
- test_resume.sh's last step reconnects by USB auto-detection, and a socket is not a USB
  device: it reconnects by URL instead;
- test_unicode.sh's `eval "repr('日本語')"` expects the text as it is: MicroPython 1.28 (as
  1.27) escapes it, `'\\u65e5\\u672c\\u8a9e'`, and that is the line compared. The suite expects
  a firmware of mpremote's own version, 1.29.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mpremote_peer_support import SCRIPTS, copy_suite, run_script

from rmc.vpico import VirtualPico, build_image, missing

WHY = missing()
pytestmark = [
    pytest.mark.skipif(WHY is not None, reason=f"no virtual Pico here: {WHY}"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    return copy_suite(tmp_path_factory.mktemp("peer"))


@pytest.fixture(scope="module")
def pico(tmp_path_factory):
    """A Pico as it comes: MicroPython and an empty file system, the REPL idle."""
    image = build_image(tmp_path_factory.mktemp("vpico") / "flash.img")
    with VirtualPico(image=image) as vp:
        assert vp.wait_clock(1_500_000), "the chip did not boot"  # MicroPython is up
        yield vp


@pytest.mark.parametrize("script", SCRIPTS)
def test_peer_script(suite: Path, pico: VirtualPico, script: str, tmp_path: Path) -> None:
    run_script(suite, script, pico.repl_url, tmp_path, timeout=3600)
