"""The virtual board used as engineers use mpremote: mount, repl, errno, df, rtc, fast copies."""

from __future__ import annotations

import os
import pty
import select
import socket
import subprocess
import sys
import time

import pytest

from rmc import ROOT
from rmc.vboard import VirtualBoard


@pytest.fixture(scope="module")
def vb():
    with VirtualBoard() as board:
        yield board


def run(vb: VirtualBoard, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return vb.mpremote(*args, timeout=timeout, check=False)


def test_mount_imports_reads_and_writes_host_files(vb, tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def x():\n    print('x from the host')\n")
    (tmp_path / "data.bin").write_bytes(bytes(range(256)) * 4)  # 0x03 and 0x18 bytes too
    code = (
        "import pkg; pkg.x()\n"
        "d = open('data.bin', 'rb').read(); print(len(d), d == bytes(range(256)) * 4)\n"
        "open('out.txt', 'w').write('written on the board')\n"
    )
    p = run(vb, "mount", str(tmp_path), "exec", code, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "x from the host" in p.stdout
    assert "1024 True" in p.stdout
    assert (tmp_path / "out.txt").read_text() == "written on the board"


def _reader(s: socket.socket):
    """until(token): the bytes read from the REPL socket up to `token`, itself included."""
    got = b""

    def until(token: bytes) -> bytes:
        nonlocal got
        while token not in got:
            chunk = s.recv(4096)
            assert chunk, got
            got += chunk
        head, _, got = got.partition(token)
        return head + token

    return until


def test_running_code_reads_stdin_raw_and_blocks_until_bytes_come(vb):
    with socket.create_connection(("127.0.0.1", vb.repl_port), timeout=20) as s:
        until = _reader(s)
        s.sendall(b"\r\x03\r\x01")
        until(b"raw REPL; CTRL-B to exit\r\n>")
        s.sendall(
            b"import sys, micropython\nmicropython.kbd_intr(-1)\nprint('reading')\n"
            b"print(sys.stdin.buffer.read(4))\n\x04"
        )
        until(b"reading")
        s.sendall(b"\x18\x03")  # the program is blocked in read(): it waits for the rest
        s.sendall(b"a\x00")
        assert until(b"\x04")[:-1].strip() == b"b'\\x18\\x03a\\x00'"


def test_make_repl_on_a_socket_url(vb):
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        ["make", "-s", "repl", f"PORT={vb.repl_url}"],
        cwd=ROOT,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    seen = b""

    def until(token: bytes, wait: float = 30) -> bool:
        nonlocal seen
        end = time.monotonic() + wait
        while token not in seen and time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        return token in seen

    try:
        assert until(b"Use Ctrl-] or Ctrl-x to exit this shell"), seen
        # mpremote puts the terminal in raw mode after its banner; Ctrl-B leaves the raw REPL
        # an earlier client may have left the board in
        for _ in range(20):
            os.write(master, b"\x02")
            if until(b">>> ", wait=1):
                break
        os.write(master, b"print(6 * 7)\r")
        assert until(b"42"), seen
        os.write(master, b"\x1d")  # Ctrl-]: leave mpremote
        assert proc.wait(timeout=20) == 0, seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_make_repl_without_a_board_says_so():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens there once closed
    p = subprocess.run(
        ["make", "-s", "repl", f"PORT=socket://127.0.0.1:{port}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode != 0
    assert "no virtual board at socket://127.0.0.1:" in p.stderr


ERROR_FS = """
import os
class ErrorFS:
    def mount(self, *a): pass
    def umount(self): pass
    def chdir(self, *a): pass
    def open(self, path, mode): raise OSError(self.code)
    def mkdir(self, path): raise OSError(self.code)
fs = ErrorFS()
os.mount(fs, '/efs')
for code in (2, 13, 20, 28, 44):
    fs.code = code
    for op in (lambda: open('/efs/x'), lambda: os.mkdir('/efs/d')):
        try:
            op()
        except OSError as e:
            print(e.errno, end=' ')
print()
os.umount('/efs')
try:
    open('/no/such/file')
except OSError as e:
    print('flash', e.errno)
"""


def test_errors_of_a_mounted_file_system_keep_their_numbers(vb):
    # A file system the program mounted (no stat method here) raises its own errno numbers;
    # only the WebAssembly file system's are translated (ENOENT 44 -> 2).
    p = run(vb, "exec", ERROR_FS)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.split("\n")
    assert lines[0].split() == ["2", "2", "13", "13", "20", "20", "28", "28", "44", "44"]
    assert lines[1].strip() == "flash 2"


def test_open_a_folder_still_raises_eisdir(vb):
    code = "import os\nos.mkdir('adir')\ntry:\n open('adir')\nexcept OSError as e:\n print(e.errno)"
    p = run(vb, "exec", code + "\nos.rmdir('adir')")
    assert p.stdout.strip() == "21", p.stdout + p.stderr


def test_df_prints_separate_figures(vb):
    p = run(vb, "df")
    assert p.returncode == 0, p.stderr
    header, row = p.stdout.strip().splitlines()[:2]
    assert header.split() == ["filesystem", "size", "used", "avail", "use%", "mounted", "on"]
    fields = row.split()
    assert len(fields) == 6, row
    size, used, avail = (int(x) for x in fields[1:4])
    assert size == used + avail
    assert fields[5] == "/"


def test_rtc_set_moves_the_clock(vb):
    p = run(
        vb,
        "exec",
        "import machine, time\nmachine.RTC().datetime((2031, 2, 3, 0, 4, 5, 6, 0))\n"
        "print(time.localtime()[:6], machine.RTC().datetime()[:3])",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "(2031, 2, 3, 4, 5, 6) (2031, 2, 3)"
    p = run(vb, "rtc", "--set")
    assert p.returncode == 0, p.stdout + p.stderr


def test_raw_paste_is_served_and_data_acknowledged_at_once(vb):
    # mpremote sleeps 10 ms whenever nothing is there to read; the host's Nagle algorithm
    # holds its end-of-data byte until the board acknowledges the data. The board serves
    # raw-paste mode, grants a window as soon as data came (its ACK rides along), and sends
    # its answer (\x04, output, \x04, \x04, prompt) together.
    with socket.create_connection(("127.0.0.1", vb.repl_port), timeout=20) as s:
        until = _reader(s)
        s.sendall(b"\r\x03\r\x01")
        until(b"raw REPL; CTRL-B to exit\r\n>")
        s.sendall(b"\x05A\x01")
        assert until(b"\x01")[:2] == b"R\x01"
        until(b"\x08")  # window 2048, little-endian: 00 08
        s.sendall(b"print(6 * 7)")
        assert until(b"\x01") == b"\x01"  # before the end of data is sent
        s.sendall(b"\x04")
        assert until(b">") == b"\x0442\n\x04\x04>"


def test_copy_100_kb_both_ways(vb, tmp_path):
    data = os.urandom(100 * 1024)
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    assert run(vb, "cp", str(src), ":blob.bin", timeout=120).returncode == 0
    assert run(vb, "cp", ":blob.bin", str(tmp_path / "back.bin"), timeout=120).returncode == 0
    assert (tmp_path / "back.bin").read_bytes() == data
    assert run(vb, "rm", ":blob.bin").returncode == 0


def test_ptybridge_rejects_bad_urls():
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmc.vboard.ptybridge",
            "/dev/x",
            "mpremote",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 2
    assert "not a socket:// URL" in p.stderr
