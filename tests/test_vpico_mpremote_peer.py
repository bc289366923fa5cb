"""MicroPython's own mpremote test suite against the virtual Pico (issue 27).

The suite (tools/mpremote/tests of MicroPython: test_*.sh and their .exp) is kept outside the
project, in shared/peer/mpremote-tests beside the work tree, or $RMC_MPREMOTE_TESTS. It is
copied to a temporary folder; each script runs against one emulated RP2040 running
MicroPython's own RPI_PICO build on a fresh, empty LittleFS flash (a Pico as it comes), as
run-mpremote-tests.sh runs it (CR stripped, the temporary folder written ${TMP}), and its
output is compared with its .exp. The chip runs at about a tenth of real time and every
mpremote command starts with a soft reset: the suite takes many minutes (`slow`).

Two changes, the virtual board's (tests/test_vboard_mpremote_peer.py, whose lists this file
reads), and no more (this port has os.VfsFat: ramdisk.py is the suite's own):
- test_resume.sh's last step reconnects by USB auto-detection, and a socket is not a USB
  device: it reconnects by URL instead;
- test_unicode.sh's `eval "repr('日本語')"` expects the text as it is: MicroPython 1.28 (as
  1.27) escapes it, `'\\u65e5\\u672c\\u8a9e'`, and that is the line compared. The suite expects
  a firmware of mpremote's own version, 1.29.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_vboard_mpremote_peer import EXPECTED_CHANGES, PEER, SCRIPT_CHANGES, SCRIPTS

from rmc.vboard import MPREMOTE
from rmc.vpico import VirtualPico, build_image, missing

WHY = missing()
pytestmark = [
    pytest.mark.skipif(WHY is not None, reason=f"no virtual Pico here: {WHY}"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    if not (PEER / "run-mpremote-tests.sh").is_file():
        pytest.fail(f"MicroPython's mpremote tests are not at {PEER} (set RMC_MPREMOTE_TESTS)")
    root = tmp_path_factory.mktemp("peer")
    tests = root / "tests"
    shutil.copytree(PEER, tests)
    # run-mpremote-tests.sh calls ../mpremote.py: the installed mpremote
    wrapper = root / "mpremote.py"
    wrapper.write_text(f'#!/bin/sh\nexec "{MPREMOTE}" "$@"\n')
    wrapper.chmod(0o755)
    for name, old, new in SCRIPT_CHANGES:
        script = tests / name
        text = script.read_text()
        assert old in text, f"{name} changed: {old!r} not found"
        script.write_text(text.replace(old, new))
    return tests


@pytest.fixture(scope="module")
def pico(tmp_path_factory):
    """A Pico as it comes: MicroPython and an empty file system, the REPL idle."""
    image = build_image(tmp_path_factory.mktemp("vpico") / "flash.img")
    with VirtualPico(image=image) as vp:
        assert vp.wait_clock(1_500_000), "the chip did not boot"  # MicroPython is up
        yield vp


@pytest.mark.parametrize("script", SCRIPTS)
def test_peer_script(suite: Path, pico: VirtualPico, script: str, tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # the .exp files were made with buffered output
    env.update(
        MPREMOTE=f"{MPREMOTE} connect {pico.repl_url}",
        TMP=str(tmp_path),
        MPREMOTE_DEVICE=pico.repl_url,
    )
    p = subprocess.run(
        ["bash", str(suite / script)],
        cwd=suite,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=3600,
    )
    out = p.stdout.decode("utf-8", "replace").replace("\r", "").replace(str(tmp_path), "${TMP}")
    assert p.returncode == 0, f"{script} crashed:\n{out}"
    expected = (suite / f"{script}.exp").read_text()
    for name, old, new in EXPECTED_CHANGES:
        if name == script:
            assert old in expected, f"{name}.exp changed: {old!r} not found"
            expected = expected.replace(old, new)
    assert out == expected
