"""Issue 20: output files given on the command line (`rmc sim -o/--laps`, `rmc rnvp --plot`,
`rmc record -o`).

A missing folder, a folder, a file without permission, a full disk: each is one line of
reason and exit 2, never a traceback, never half a file in place of a good one. A disk
that fills mid-file is made with RLIMIT_FSIZE (Python ignores SIGXFSZ: the write fails
with EFBIG); /dev/full is a full disk that is no regular file.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from pathlib import Path

import cli_support
import pytest

GOOD = "a good file, kept\n"


def rmc(*args: str, cwd: Path, fsize: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return cli_support.rmc(*args, cwd=cwd, preexec_fn=limit)


def refused(proc: subprocess.CompletedProcess, command: str, name: str) -> str:
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, err)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rmc {command}: "), err
    assert name in lines[0], err
    return lines[0]


def read_only(path: Path) -> Path:
    """A file this process may not write: mode 444, and immutable when run as root."""
    path.chmod(0o444)
    if os.access(path, os.W_OK):  # root writes anything mode 444
        subprocess.run(["chattr", "+i", str(path)], check=True)
    assert not os.access(path, os.W_OK)
    return path


@pytest.fixture
def cleanup_immutable(tmp_path: Path):
    yield
    if shutil.which("chattr"):
        for p in tmp_path.rglob("*"):
            subprocess.run(["chattr", "-i", str(p)], capture_output=True, check=False)


def only_files(folder: Path) -> list[str]:
    """What a folder holds: no temporary file left behind."""
    return sorted(p.name for p in folder.iterdir())


def laps_csv(path: Path) -> Path:
    rows = [",".join(f"{0.5 + 0.06 * i + 0.01 * s:.3f}" for i in range(12)) for s in range(4)]
    path.write_text("\n".join(rows) + "\n")
    return path


SIM = ("sim", "--spins", "2", "--quiet")


@pytest.mark.parametrize("option", ["-o", "--laps"])
def test_sim_output_in_a_missing_folder(tmp_path: Path, option: str) -> None:
    refused(rmc(*SIM, option, "no/t.out", cwd=tmp_path), "sim", "no/t.out")


@pytest.mark.parametrize("option", ["-o", "--laps"])
def test_sim_output_onto_a_folder(tmp_path: Path, option: str) -> None:
    (tmp_path / "d").mkdir()
    line = refused(rmc(*SIM, option, "d", cwd=tmp_path), "sim", "d")
    assert "folder" in line


@pytest.mark.parametrize("option", ["-o", "--laps"])
def test_sim_output_onto_a_file_without_permission(
    tmp_path: Path, option: str, cleanup_immutable
) -> None:
    f = tmp_path / "t.out"
    f.write_text(GOOD)
    read_only(f)
    refused(rmc(*SIM, option, "t.out", cwd=tmp_path), "sim", "t.out")
    assert f.read_text() == GOOD


@pytest.mark.parametrize("option", ["-o", "--laps"])
def test_sim_output_onto_dev_full(tmp_path: Path, option: str) -> None:
    refused(rmc(*SIM, option, "/dev/full", cwd=tmp_path), "sim", "/dev/full")


@pytest.mark.parametrize("option", ["-o", "--laps"])
def test_sim_disk_full_mid_file_keeps_the_good_one(tmp_path: Path, option: str) -> None:
    f = tmp_path / "t.out"
    f.write_text(GOOD)
    refused(rmc(*SIM, option, "t.out", cwd=tmp_path, fsize=200), "sim", "t.out")
    assert f.read_text() == GOOD
    assert only_files(tmp_path) == ["t.out"]


def test_sim_output_replaces_a_file_whole(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(GOOD)
    f.chmod(0o640)
    proc = rmc(*SIM, "-o", "t.jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f.read_text().startswith('{"kind":"header"')
    assert f.stat().st_mode & 0o777 == 0o640  # the file's mode is kept
    assert only_files(tmp_path) == ["t.jsonl"]


# --- rmc rnvp --plot ---


@pytest.mark.parametrize(
    "plot,name", [("no/p.png", "no/p.png"), ("d.png", "d.png"), ("ro.svg", "ro.svg")]
)
def test_rnvp_plot_refused(tmp_path: Path, plot: str, name: str, cleanup_immutable) -> None:
    laps_csv(tmp_path / "laps.csv")
    (tmp_path / "d.png").mkdir()
    (tmp_path / "ro.svg").write_text(GOOD)
    read_only(tmp_path / "ro.svg")
    refused(rmc("rnvp", "laps.csv", "--plot", plot, cwd=tmp_path), "rnvp", name)
    assert (tmp_path / "ro.svg").read_text() == GOOD


def test_rnvp_plot_disk_full_mid_file_keeps_the_good_one(tmp_path: Path) -> None:
    laps_csv(tmp_path / "laps.csv")
    f = tmp_path / "p.svg"
    f.write_text(GOOD)
    refused(rmc("rnvp", "laps.csv", "--plot", "p.svg", cwd=tmp_path, fsize=2000), "rnvp", "p.svg")
    assert f.read_text() == GOOD
    assert only_files(tmp_path) == ["laps.csv", "p.svg"]
