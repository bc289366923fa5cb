"""MicroPython's own mpremote test suite, run unchanged against the virtual board.

The suite (tools/mpremote/tests of MicroPython: test_*.sh and their .exp) is copied and run
as tests/mpremote_peer_support.py says, one script a test, against one virtual board.

Three scripts need something this port lacks; docs/vboard.md lists them with the reason:
- ramdisk.py makes a FAT RAM disk (os.VfsFat): a stand-in mounts a Python file system over a
  folder of the board's own file system at the same place (vboard_samples/ramdisk_flash.py);
- test_resume.sh's last step reconnects by USB auto-detection: it reconnects by URL instead;
- test_unicode.sh's repr of non-ASCII text: the 1.27 interpreter escapes it (\\uXXXX).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mpremote_peer_support import SCRIPTS, copy_suite, run_script

from rmc.vboard import VirtualBoard

RAMDISK = Path(__file__).parent / "vboard_samples" / "ramdisk_flash.py"


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    return copy_suite(tmp_path_factory.mktemp("peer"), ramdisk=RAMDISK)


@pytest.fixture(scope="module")
def board():
    with VirtualBoard() as vb:
        yield vb


@pytest.mark.parametrize("script", SCRIPTS)
def test_peer_script(suite: Path, board: VirtualBoard, script: str, tmp_path: Path) -> None:
    run_script(suite, script, board.repl_url, tmp_path, timeout=600)
