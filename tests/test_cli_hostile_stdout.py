"""Issue 20: a command whose standard output cannot be written fails (exit 2, one line).

A full disk (`> /dev/full`) and a reader gone (`| head -c1`) both lose the output: the
command must say so, never exit 0, never print a traceback at the interpreter's exit.
The pipe's read end is closed before the command starts, so every write to it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import cli_support
import pytest

BETS = {"bets": [{"player": "A", "type": "plein", "numbers": ["17"], "stake": "10"}]}

COMMANDS = {
    "settle": ["settle", "--result", "17", "bets.json"],
    "settle-json": ["settle", "--result", "17", "--json", "bets.json"],
    "sim": ["sim", "--spins", "2"],
    "sim-scenarios": ["sim", "--list-scenarios"],
    "rnvp": ["rnvp", "laps.csv"],
    "rnvp-json": ["rnvp", "laps.csv", "--json"],
    "check": ["check", "cap.log"],
    "check-json": ["check", "cap.log", "--json"],
}


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "bets.json").write_text(json.dumps(BETS))
    rows = [",".join(f"{0.5 + 0.06 * i + 0.01 * s:.3f}" for i in range(12)) for s in range(4)]
    (tmp_path / "laps.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "cap.log").write_text("$1,T07,3,1,0,BOOT*24e1ddf1\n")  # one valid frame
    return tmp_path


def run_into(args: list[str], cwd: Path, stdout) -> subprocess.CompletedProcess:
    return cli_support.rmc(*args, cwd=cwd, stdout=stdout)


def assert_failed_with_one_line(proc: subprocess.CompletedProcess, command: str) -> None:
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith(f"rmc {command}: "), err
    assert "standard output" in lines[-1], err
    # only the reason; `rmc sim` may say first what it wrote elsewhere (no file here)
    assert len(lines) == 1, err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_full_disk_on_stdout_fails(inputs: Path, name: str) -> None:
    args = COMMANDS[name]
    with open("/dev/full", "w") as full:
        proc = run_into(args, inputs, full)
    assert_failed_with_one_line(proc, args[0])


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_closed_pipe_on_stdout_fails(inputs: Path, name: str) -> None:
    args = COMMANDS[name]
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the command writes anything
    try:
        proc = run_into(args, inputs, w)
    finally:
        os.close(w)
    assert_failed_with_one_line(proc, args[0])


def test_a_good_stdout_still_exits_0(inputs: Path) -> None:
    proc = run_into(COMMANDS["settle-json"], inputs, subprocess.PIPE)
    assert proc.returncode == 0 and json.loads(proc.stdout)["result"] == "17"
