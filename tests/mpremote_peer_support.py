"""MicroPython's own mpremote test suite, as the virtual board's and the virtual Pico's tests
run it: one copy of the suite per module, each script run as run-mpremote-tests.sh does (CR
stripped, the temporary folder written ${TMP}) and its output compared with its .exp.

The suite is kept outside the project, in shared/peer/mpremote-tests beside the work tree
(../shared from the project's root, where CI puts it too), or $RMC_MPREMOTE_TESTS.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rmc import ROOT
from rmc.vboard import MPREMOTE

PEER = Path(
    os.environ.get("RMC_MPREMOTE_TESTS", ROOT.parent / "shared" / "peer" / "mpremote-tests")
)
SCRIPTS = [
    "test_errno.sh",
    "test_eval_exec_run.sh",
    "test_filesystem.sh",
    "test_fs_tree.sh",
    "test_mip_local_install.sh",
    "test_mount.sh",
    "test_recursive_cp.sh",
    "test_resume.sh",
    "test_unicode.sh",
]
# (script, what the suite's file says, what both ports do instead): test_resume.sh's last
# step reconnects by USB auto-detection, and a socket is not a USB device.
SCRIPT_CHANGES = [
    ("test_resume.sh", 'disconnect eval "2+3"', 'disconnect connect "$MPREMOTE_DEVICE" eval "2+3"'),
]
# MicroPython 1.27 and 1.28 escape non-ASCII text in a repr; the suite expects mpremote's own
# version, 1.29, which does not.
EXPECTED_CHANGES = [
    ("test_unicode.sh", "'日本語'\n", "'\\u65e5\\u672c\\u8a9e'\n"),
]


def copy_suite(root: Path, ramdisk: Path | None = None) -> Path:
    """The suite copied under root, with the installed mpremote as its ../mpremote.py, the
    script changes above made (each checked to still apply), and ramdisk.py replaced when
    the port needs a stand-in."""
    if not (PEER / "run-mpremote-tests.sh").is_file():
        pytest.fail(f"MicroPython's mpremote tests are not at {PEER} (set RMC_MPREMOTE_TESTS)")
    tests = root / "tests"
    shutil.copytree(PEER, tests)
    wrapper = root / "mpremote.py"
    wrapper.write_text(f'#!/bin/sh\nexec "{MPREMOTE}" "$@"\n')
    wrapper.chmod(0o755)
    if ramdisk is not None:
        shutil.copy(ramdisk, tests / "ramdisk.py")
    for name, old, new in SCRIPT_CHANGES:
        script = tests / name
        text = script.read_text()
        assert old in text, f"{name} changed: {old!r} not found"
        script.write_text(text.replace(old, new))
    return tests


def run_script(suite: Path, script: str, url: str, tmp_path: Path, timeout: float) -> None:
    """Run one script against the board at url and compare its output with its .exp."""
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # the .exp files were made with buffered output
    env.update(MPREMOTE=f"{MPREMOTE} connect {url}", TMP=str(tmp_path), MPREMOTE_DEVICE=url)
    p = subprocess.run(
        ["bash", str(suite / script)],
        cwd=suite,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
    )
    out = p.stdout.decode("utf-8", "replace").replace("\r", "").replace(str(tmp_path), "${TMP}")
    assert p.returncode == 0, f"{script} crashed:\n{out}"
    expected = (suite / f"{script}.exp").read_text()
    for name, old, new in EXPECTED_CHANGES:
        if name == script:
            assert old in expected, f"{name}.exp changed: {old!r} not found"
            expected = expected.replace(old, new)
    assert out == expected
