"""Input files given on the command line that never end or are no files.

`rmc check /dev/zero` used to read the device into memory until the machine ran out of it.
A regular file is read whole; a stream (a device, a named pipe) up to rmc.infile.STREAM_MAX
bytes, then refused with one line of reason.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import cli_support
import pytest

from rmc import infile


@pytest.mark.parametrize(
    "args",
    [
        ("check", "/dev/zero"),
        ("replay", "/dev/zero"),
        ("stats", "/dev/zero"),
        ("settle", "--trace", "/dev/zero", "--bets", "/dev/null"),
        ("import-slingshot", "/dev/zero", "-o", "out.jsonl"),
    ],
)
def test_a_device_that_never_ends_is_refused_in_one_line(tmp_path: Path, args):
    proc = cli_support.rmc(*args, cwd=tmp_path)
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, err)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rmc {args[0]}: "), err
    assert "/dev/zero" in lines[0] and "not a regular file" in lines[0], err
    assert not (tmp_path / "out.jsonl").exists()


def test_a_stream_is_read_whole_up_to_the_bound(tmp_path: Path, monkeypatch):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = os.urandom(3000)

    def feed(n: int) -> None:
        with open(fifo, "wb") as f:
            f.write(data[:n])

    monkeypatch.setattr(infile, "STREAM_MAX", 2000)
    writer = threading.Thread(target=feed, args=(2000,))
    writer.start()
    assert infile.read_bytes(fifo) == data[:2000]  # at the bound: read
    writer.join()
    writer = threading.Thread(target=feed, args=(2001,))
    writer.start()
    with pytest.raises(OSError, match="not a regular file"):
        infile.read_bytes(fifo)
    writer.join()
    big = tmp_path / "big"
    big.write_bytes(data)
    assert infile.read_bytes(big) == data  # a regular file: whole, whatever the bound


@pytest.mark.parametrize(
    ("table", "why"), [("/dev/zero", "not a table"), ("binary.toml", "not UTF-8 text")]
)
def test_a_table_file_that_is_none_is_named_in_one_line(tmp_path: Path, table: str, why: str):
    (tmp_path / "bets.json").write_text("[]")
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00table")
    proc = cli_support.rmc("settle", "--table", table, "--result", "17", "bets.json", cwd=tmp_path)
    err = proc.stderr
    assert proc.returncode == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"table file {table}" in lines[0] and why in lines[0], err
