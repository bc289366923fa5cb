"""`rmc import-slingshot` as a command: exit statuses, output errors, literal text (issues 19, 20).

Run as a subprocess: the exit status, what reaches stderr and what is left on disk are the
command's contract.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import cli_support

from rmc.cli import main

GOOD = (
    "[2025-09-16 06:45:21.082] Receive >>> *X;3;1042;17;0;268;1\n"
    "[2025-09-16 06:45:30.082] Receive >>> *X;4;1042;17;0;268;1\n"
    "[2025-09-16 06:45:38.082] Receive >>> *X;5;1042;23;0;268;1\n"
)
PREFIX = "rmc import-slingshot: "


def rmc(*args: str, stdout=None) -> subprocess.CompletedProcess:
    return cli_support.rmc(*args, stdout=stdout if stdout is not None else subprocess.PIPE)


def _log(tmp_path: Path, text: str = GOOD, name: str = "wheel.log") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _refused(r: subprocess.CompletedProcess) -> str:
    """The one-line reason of an exit 2, without a traceback."""
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_good_log_exit_0_and_the_trace_checks_clean(tmp_path):
    out = tmp_path / "t.trace"
    r = rmc("import-slingshot", str(_log(tmp_path)), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert rmc("check", str(out)).returncode == 0


def test_damage_exit_1_says_how_many_and_where(tmp_path):
    log = _log(tmp_path, GOOD + "*X;5;1042;2x;0;268;1\n*X;7;1042;23;0;268;1\n")
    out = tmp_path / "t.trace"
    r = rmc("import-slingshot", str(log), "-o", str(out))
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert "line 4: " in r.stderr and "line 5: " in r.stderr
    assert "2 problems" in r.stderr
    # the trace is written and holds the damage: `rmc check` does not call it clean
    check = rmc("check", str(out), "--json")
    assert check.returncode == 1
    assert json.loads(check.stdout)["crc_errors"] == 2


def test_output_into_a_missing_folder(tmp_path):
    out = tmp_path / "no" / "such" / "t.trace"
    _refused(rmc("import-slingshot", str(_log(tmp_path)), "-o", str(out)))
    assert not out.parent.exists()


def test_output_onto_a_folder(tmp_path):
    folder = tmp_path / "dir"
    folder.mkdir()
    _refused(rmc("import-slingshot", str(_log(tmp_path)), "-o", str(folder)))
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_output_onto_a_read_only_file(tmp_path):
    out = tmp_path / "t.trace"
    out.write_text("kept\n")
    out.chmod(0o444)
    _refused(rmc("import-slingshot", str(_log(tmp_path)), "-o", str(out)))
    assert out.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.trace", "wheel.log"]


def test_output_onto_a_full_disk(tmp_path):
    # /dev/full: every write fails with ENOSPC; the device itself must stay a device
    line = _refused(rmc("import-slingshot", str(_log(tmp_path)), "-o", "/dev/full"))
    assert "/dev/full" in line
    assert not Path("/dev/full").is_file()


def test_standard_output_full_exit_2(tmp_path):
    log = _log(tmp_path)
    with open("/dev/full", "w") as full:
        r = rmc("import-slingshot", str(log), stdout=full)
    assert r.returncode == 2, r.stderr
    assert PREFIX in r.stderr and "Traceback" not in r.stderr
    assert "Exception ignored" not in r.stderr


def test_output_naming_the_log_itself_is_refused(tmp_path):
    log = _log(tmp_path)
    link = tmp_path / "link.trace"
    link.symlink_to(log)
    hard = tmp_path / "hard.trace"
    os.link(log, hard)
    for out in (str(log), str(tmp_path / "." / "wheel.log"), str(link), str(hard)):
        line = _refused(rmc("import-slingshot", str(log), "-o", out))
        assert "the log itself" in line
        assert log.read_text() == GOOD
    assert link.is_symlink()


def test_no_partial_file_where_a_good_one_was(tmp_path, monkeypatch):
    # a write that fails half-way leaves the previous trace untouched and no temporary file
    from rmc import trace

    out = tmp_path / "t.trace"
    out.write_text("the previous trace\n")
    real_write = trace.TraceWriter.write
    calls = []

    def failing(self, record):
        calls.append(record)
        if len(calls) == 4:
            raise OSError(28, "No space left on device")
        real_write(self, record)

    monkeypatch.setattr(trace.TraceWriter, "write", failing)
    assert main(["import-slingshot", str(_log(tmp_path)), "-o", str(out)]) == 2
    assert out.read_text() == "the previous trace\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.trace", "wheel.log"]


def test_square_brackets_are_printed_literally(tmp_path):
    name = "[bold]wheel[red].log"  # no "/": a file name
    missing = tmp_path / name
    line = _refused(rmc("import-slingshot", str(missing)))
    assert name in line
    log = _log(tmp_path, GOOD + "*X;5;1042;[red]x[/red];0;268;1\n", name=name)
    r = rmc("import-slingshot", str(log), "-o", str(tmp_path / "t.trace"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "*X;5;1042;[red]x[/red];0;268;1" in r.stderr


def test_standard_output_appending_to_the_log_is_refused(tmp_path):
    log = _log(tmp_path)
    with open(log, "a") as same:
        r = rmc("import-slingshot", str(log), stdout=same)
    _refused(r)
    assert log.read_text() == GOOD
