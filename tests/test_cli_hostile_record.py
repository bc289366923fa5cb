"""Issue 20: `rmc record` against a hostile line and a hostile command line.

A table that sends only damaged lines gave "0 frames ... exit 0"; the bytes of a line cut
by the port closing were lost; `-o` onto an existing file overwrote it. A socket server in
the test feeds the recorder its bytes (pyserial's socket:// URL).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from pathlib import Path

import cli_support
import pytest

GOOD_FRAME = b"$1,T07,3,1,0,BOOT*24e1ddf1\n"
GAP_FRAME = b"$1,T07,3,3,0,LID,state=1*b93964d4\n"  # seq 3 after 1: the recorder asks for 2
DAMAGED = b"$1,T07,3,1,0,BOOT*00000000\n"  # the BOOT frame, its CRC wrong
PARTIAL = b"$1,T07,3,2,0,BO"  # a line the port's closing cut


class Feeder(threading.Thread):
    """A table on a socket. pyserial empties the line when it opens the port, so what was
    sent before that is lost: the feeder sends `data` again and again, as a live table does,
    until the recorder leaves; or, given a `tail`, until the recorder speaks (it is reading
    then), and then sends `tail` and closes the line."""

    def __init__(self, data: bytes, tail: bytes | None = None) -> None:
        super().__init__(daemon=True)
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.srv.settimeout(60)
        self.url = f"socket://127.0.0.1:{self.srv.getsockname()[1]}"
        self.data = data
        self.tail = tail

    def run(self) -> None:
        try:
            conn, _ = self.srv.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(0.02)
            try:
                while True:
                    conn.sendall(self.data)
                    try:
                        heard = conn.recv(4096)
                    except TimeoutError:
                        continue
                    if heard and self.tail is not None:
                        conn.sendall(self.tail)
                    break  # the recorder spoke (a tail sent), or left
            except OSError:
                pass  # the recorder has gone
        self.srv.close()


def rmc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return cli_support.rmc("record", *args, cwd=cwd, timeout=120)


def frame_lines(path: Path) -> list[str]:
    records = [json.loads(x) for x in path.read_text().splitlines()]
    assert records[-1]["kind"] == "end"
    return [r["line"] for r in records if r["kind"] == "frame"]


def test_only_damaged_lines_is_no_valid_frame(tmp_path: Path) -> None:
    feeder = Feeder(DAMAGED)
    feeder.start()
    proc = rmc(
        "--port", feeder.url, "-o", "r.jsonl", "--duration", "3", "--grace", "0", cwd=tmp_path
    )
    feeder.join(30)
    assert proc.returncode == 1, proc.stderr
    assert "no valid frame" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = frame_lines(tmp_path / "r.jsonl")
    # every line heard is the damaged one, the last perhaps cut by the end of the recording
    assert lines and all(DAMAGED.decode().startswith(x) for x in lines), lines


def test_a_line_cut_by_the_port_closing_is_kept_as_damage(tmp_path: Path) -> None:
    feeder = Feeder(GOOD_FRAME + GAP_FRAME, tail=DAMAGED + PARTIAL)
    feeder.start()
    proc = rmc("--port", feeder.url, "-o", "r.jsonl", "--duration", "60", cwd=tmp_path)
    feeder.join(30)
    assert proc.returncode == 1, proc.stderr  # the port failed on the way
    assert "Traceback" not in proc.stderr
    lines = frame_lines(tmp_path / "r.jsonl")
    assert lines[-2:] == [DAMAGED.decode().strip(), PARTIAL.decode()], lines


def test_output_onto_an_existing_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text("an earlier recording\n")
    proc = rmc("--port", "loop://", "-o", "r.jsonl", "--duration", "0", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "r.jsonl" in lines[0] and "--force" in lines[0], proc.stderr
    assert f.read_text() == "an earlier recording\n"


def test_force_replaces_an_existing_file(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text("an earlier recording\n")
    f.chmod(0o640)
    feeder = Feeder(GOOD_FRAME)
    feeder.start()
    proc = rmc("--port", feeder.url, "-o", "r.jsonl", "--force", "--duration", "1", cwd=tmp_path)
    feeder.join(30)
    assert "Traceback" not in proc.stderr
    assert all(GOOD_FRAME.decode().startswith(x) for x in frame_lines(f))
    assert f.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]


@pytest.mark.parametrize("out", ["no/r.jsonl", "d", "/dev/full"])
def test_output_that_cannot_be_written(tmp_path: Path, out: str) -> None:
    (tmp_path / "d").mkdir()
    proc = rmc("--port", "loop://", "-o", out, "--force", "--duration", "0", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmc record: ") and out in lines[0], proc.stderr


def test_output_name_printed_literally(tmp_path: Path) -> None:
    proc = rmc("--port", "loop://", "-o", "[red]r.jsonl", "--duration", "0", cwd=tmp_path)
    assert "Traceback" not in proc.stderr
    assert "[red]r.jsonl:" in proc.stdout, proc.stdout
    assert frame_lines(tmp_path / "[red]r.jsonl") == []
