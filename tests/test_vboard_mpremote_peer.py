"""MicroPython's own mpremote test suite, run unchanged against the virtual board.

The suite (tools/mpremote/tests of MicroPython: test_*.sh and their .exp) is kept outside
the project, in shared/peer/mpremote-tests beside the work tree (../shared from the
project's root, where CI puts it too), or $RMC_MPREMOTE_TESTS. Each test copies it
to a temporary folder, runs one script against a virtual board as run-mpremote-tests.sh does
(CR stripped, the temporary folder written ${TMP}) and compares with its .exp.

Three scripts need something this port lacks; docs/vboard.md lists them with the reason:
- ramdisk.py makes a FAT RAM disk (os.VfsFat): a stand-in mounts a Python file system over a
  folder of the board's own file system at the same place (vboard_samples/ramdisk_flash.py);
- test_resume.sh's last step reconnects by USB auto-detection: it reconnects by URL instead;
- test_unicode.sh's repr of non-ASCII text: the 1.27 interpreter escapes it (\\uXXXX).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rmc import ROOT
from rmc.vboard import MPREMOTE, VirtualBoard

PEER = Path(
    os.environ.get("RMC_MPREMOTE_TESTS", ROOT.parent / "shared" / "peer" / "mpremote-tests")
)
RAMDISK = Path(__file__).parent / "vboard_samples" / "ramdisk_flash.py"
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
# (script, what the suite's file says, what this port does instead): see the module doc.
SCRIPT_CHANGES = [
    ("test_resume.sh", 'disconnect eval "2+3"', 'disconnect connect "$MPREMOTE_DEVICE" eval "2+3"'),
]
EXPECTED_CHANGES = [
    ("test_unicode.sh", "'日本語'\n", "'\\u65e5\\u672c\\u8a9e'\n"),
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
    shutil.copy(RAMDISK, tests / "ramdisk.py")
    for name, old, new in SCRIPT_CHANGES:
        script = tests / name
        text = script.read_text()
        assert old in text, f"{name} changed: {old!r} not found"
        script.write_text(text.replace(old, new))
    return tests


@pytest.fixture(scope="module")
def board():
    with VirtualBoard() as vb:
        yield vb


@pytest.mark.parametrize("script", SCRIPTS)
def test_peer_script(suite: Path, board: VirtualBoard, script: str, tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # the .exp files were made with buffered output
    env.update(
        MPREMOTE=f"{MPREMOTE} connect {board.repl_url}",
        TMP=str(tmp_path),
        MPREMOTE_DEVICE=board.repl_url,
    )
    p = subprocess.run(
        ["bash", str(suite / script)],
        cwd=suite,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=600,
    )
    out = p.stdout.decode("utf-8", "replace").replace("\r", "").replace(str(tmp_path), "${TMP}")
    assert p.returncode == 0, f"{script} crashed:\n{out}"
    expected = (suite / f"{script}.exp").read_text()
    for name, old, new in EXPECTED_CHANGES:
        if name == script:
            assert old in expected, f"{name}.exp changed: {old!r} not found"
            expected = expected.replace(old, new)
    assert out == expected
