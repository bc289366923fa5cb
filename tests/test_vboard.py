"""The virtual board against the real mpremote: REPL protocol, file system, errno mapping."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmc import ROOT
from rmc.vboard import MPREMOTE, VBOARD_JS, VirtualBoard, VirtualBoardError

SAMPLES = Path(__file__).parent / "vboard_samples"


@pytest.fixture(scope="module")
def vb():
    with VirtualBoard() as board:
        yield board


def run(vb: VirtualBoard, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return vb.mpremote(*args, timeout=timeout, check=False)


def test_exec_prints(vb):
    p = run(vb, "exec", "print(6 * 7); import sys; print(sys.implementation.name)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["42", "micropython"]


def test_exec_error_is_reported(vb):
    p = run(vb, "exec", "raise ValueError('nope')")
    assert p.returncode != 0
    assert "ValueError: nope" in p.stdout + p.stderr


def test_soft_reset_between_commands_clears_ram_keeps_files(vb):
    assert run(vb, "exec", "x = 1\nopen('keep.txt', 'w').write('kept')").returncode == 0
    p = run(vb, "exec", "print('x' in globals(), open('keep.txt').read())")
    assert p.stdout.split() == ["False", "kept"], p.stdout + p.stderr
    p = run(vb, "exec", "y = 2", "soft-reset", "exec", "print('y' in globals())")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[-1] == "False"
    assert run(vb, "rm", ":keep.txt").returncode == 0


def test_run_a_file(vb, tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("import machine\nprint('hello from', machine.freq())\n")
    p = run(vb, "run", str(script))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "hello from 125000000"


def test_cp_r_ls_cat_rm_mkdir(vb, tmp_path):
    src = tmp_path / "pkg"
    (src / "sub").mkdir(parents=True)
    (src / "a.py").write_text("A = 1\n")
    (src / "sub" / "b.txt").write_bytes(bytes(range(256)) * 3)
    p = run(vb, "cp", "-r", str(src), ":")
    assert p.returncode == 0, p.stdout + p.stderr
    p = run(vb, "ls", ":pkg")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert any(line.split() == ["6", "a.py"] for line in lines), lines
    assert any(line.split() == ["0", "sub/"] for line in lines), lines
    p = run(vb, "ls", ":pkg/sub")
    assert any(line.split() == ["768", "b.txt"] for line in p.stdout.splitlines()), p.stdout
    p = run(vb, "cat", ":pkg/a.py")
    assert p.stdout.strip() == "A = 1"
    back = tmp_path / "back.txt"
    assert run(vb, "cp", ":pkg/sub/b.txt", str(back)).returncode == 0
    assert back.read_bytes() == bytes(range(256)) * 3
    p = run(vb, "exec", "import sys; sys.path.insert(0, 'pkg'); import a; print(a.A)")
    assert p.stdout.strip() == "1"
    assert run(vb, "mkdir", ":pkg/new").returncode == 0
    assert run(vb, "rmdir", ":pkg/new").returncode == 0
    assert run(vb, "rm", "-r", ":pkg").returncode == 0
    p = run(vb, "ls")
    assert "pkg" not in p.stdout


def test_root_lists_only_user_files(vb):
    p = run(vb, "ls", ":")
    assert p.returncode == 0
    for hidden in ("dev/", "proc/", "tmp/", "home/", ".vboard"):
        assert hidden not in p.stdout


def test_errno_mapping_as_on_a_board(vb):
    p = run(vb, "ls", ":nonexistent")
    assert p.returncode != 0
    assert "No such file or directory" in p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    code = (
        "import os, errno\n"
        "def err(f, *a):\n"
        "    try:\n"
        "        f(*a)\n"
        "    except OSError as e:\n"
        "        return errno.errorcode.get(e.errno, e.errno)\n"
        "os.mkdir('d')\n"
        "open('d/f', 'w').write('x')\n"
        "print(err(os.stat, 'missing'), err(open, 'missing'), err(os.mkdir, 'd'),\n"
        "      err(open, 'd'), err(os.listdir, 'd/f'), err(os.rmdir, 'd'))\n"
        "print(os.stat('') == os.stat(os.getcwd()), os.stat('d')[6], os.stat('d/f')[6])\n"
        "os.remove('d/f'); os.rmdir('d')\n"
    )
    p = run(vb, "exec", code)
    assert p.returncode == 0, p.stdout + p.stderr
    first, second = p.stdout.splitlines()[:2]
    assert first.split() == ["ENOENT", "ENOENT", "EEXIST", "EISDIR", "20", "39"]
    assert second.split() == ["True", "0", "1"]


def test_mkdir_twice_fails_cleanly(vb):
    assert run(vb, "mkdir", ":twice").returncode == 0
    p = run(vb, "mkdir", ":twice")
    assert p.returncode != 0
    assert "File exists" in p.stdout + p.stderr
    assert run(vb, "rmdir", ":twice").returncode == 0


def test_client_disconnecting_mid_command_does_not_kill_the_board(vb):
    # A raw-mode command cut off half way, then a client that vanishes while output flows.
    s = socket.create_connection(("127.0.0.1", vb.repl_port))
    s.sendall(b"\r\x03\x03\r\x01print('half")
    s.close()
    s = socket.create_connection(("127.0.0.1", vb.repl_port))
    _raw_repl(s)
    s.sendall(b"for i in range(3000): print('x' * 60)\x04")
    _read_until(s.fileno(), b"x" * 60, bytearray())  # output flows
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()  # RST: the board's writes now fail with EPIPE/ECONNRESET
    time.sleep(0.5)
    assert vb.running
    p = run(vb, "exec", "print('still here')")
    assert p.stdout.strip() == "still here", p.stdout + p.stderr


def test_ctrl_c_interrupts_a_running_loop(vb):
    # mpremote's first act is Ctrl-C; a program sleeping in a loop must stop, not be reset.
    s = socket.create_connection(("127.0.0.1", vb.repl_port))
    _raw_repl(s)
    s.sendall(b"import time\nprint('looping')\nwhile True: time.sleep_ms(10)\x04")
    _read_until(s.fileno(), b"looping", bytearray())
    s.close()
    resets = _resets(vb)
    p = run(vb, "exec", "print('back')")
    assert p.stdout.strip() == "back", p.stdout + p.stderr
    assert _resets(vb) == resets


def test_raw_paste_mode_option(tmp_path):
    data = bytes(range(256)) * 20
    (tmp_path / "blob.bin").write_bytes(data)
    with VirtualBoard(raw_paste=True) as board:
        p = board.mpremote("exec", "print(sum(range(10)))")
        assert p.stdout.strip() == "45"
        board.mpremote("cp", str(tmp_path / "blob.bin"), ":blob.bin")
        board.mpremote("cp", ":blob.bin", str(tmp_path / "back.bin"))
        assert (tmp_path / "back.bin").read_bytes() == data


def test_rmc_vboard_rejects_bad_input(tmp_path):
    rmc = [sys.executable, "-m", "rmc"]
    p = subprocess.run(
        [*rmc, "vboard", "--sensors", str(tmp_path / "missing.jsonl")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 2
    assert "no trace file" in p.stderr
    p = subprocess.run([*rmc, "vboard", "--speed", "fast"], capture_output=True, text=True)
    assert p.returncode == 2
    assert "not a speed" in p.stderr
    short = tmp_path / "short.img"
    short.write_bytes(b"not an image\n")
    for args, why in (
        (["--sensors", str(tmp_path / "missing.jsonl")], "no trace file"),
        (["--flash", str(tmp_path / "f.img")], "--pico takes --image FS.img"),
        (["--image", str(tmp_path)], "not a file"),
        (["--image", str(tmp_path / "no" / "f.img")], "no folder"),
        (["--image", str(short)], "13 bytes, not a flash image of 1,441,792"),
    ):  # the virtual Pico's own checks, before any emulator starts
        p = subprocess.run([*rmc, "vboard", "--pico", *args], capture_output=True, text=True)
        assert p.returncode == 2 and why in p.stderr and "Traceback" not in p.stderr, p.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"sensor","t_us":5,"ch":"pocket:99","v":1}\n')
    p = subprocess.run(
        ["node", str(VBOARD_JS), "--sensors", str(bad)], capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 2
    assert "unknown channel" in p.stderr and "record 1" in p.stderr
    bad.write_text("{not json\n")
    p = subprocess.run(
        ["node", str(VBOARD_JS), "--sensors", str(bad)], capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 2
    assert "bad.jsonl:1: not JSON" in p.stderr


def test_feed_rejects_bad_records(vb):
    with pytest.raises(ValueError, match="bad value"):
        vb.feed([{"kind": "sensor", "t_us": 1, "ch": "lid", "v": 2}])
    with pytest.raises(FileNotFoundError):
        vb.feed(ROOT / "no-such-trace.jsonl")
    assert vb.feed([{"kind": "note", "t_us": 1}]) == 0  # other kinds are ignored


def test_stop_leaves_no_process():
    board = VirtualBoard().start()
    proc = board._proc
    board.stop()
    assert proc is not None and proc.poll() is not None
    with pytest.raises(VirtualBoardError):
        board.power_cut()


@pytest.mark.parametrize("speed", [0.0, 1.0])
def test_mpremote_stops_main_py_running_since_power_up(tmp_path, speed):
    # A table boots into its endless main loop (watchdog fed); mpremote's Ctrl-C must stop it.
    flash = tmp_path / "flash"
    flash.mkdir()
    (flash / "main.py").write_text(
        "import machine, time\nw = machine.WDT(timeout=2000)\n"
        "while True:\n    w.feed()\n    time.sleep_ms(1)\n"
    )
    with VirtualBoard(flash=flash, speed=speed) as board:
        p = board.mpremote("exec", "import machine; print('at the REPL', machine.reset_cause())")
        assert p.stdout.strip() == "at the REPL 1"  # stopped by Ctrl-C, not by its watchdog


def test_hung_program_watchdog_and_unheard_ctrl_c(tmp_path):
    # A loop that never calls time/machine: the board's watchdog still resets it, and a
    # Ctrl-C it cannot hear resets it too (the REPL link drops, as on a reset).
    flash = tmp_path / "flash"
    flash.mkdir()
    (flash / "main.py").write_text(
        "import machine\n"
        "if machine.reset_cause() != machine.WDT_RESET:\n"
        "    with open('hung.txt', 'w') as f:\n"
        "        f.write('yes')\n"
        "    with open('last.txt', 'w') as f:\n"  # closed right after the first: kept too
        "        f.write('too')\n"
        "    w = machine.WDT(timeout=1000)\n"
        "    while True:\n"
        "        pass\n"
    )
    with VirtualBoard(flash=flash) as board:
        ev = board.wait_event("reset", timeout=20, where=lambda e: e["kind"] == "wdt")
        assert ev is not None
        p = board.mpremote(
            "exec",
            "import machine; print(machine.reset_cause(), open('hung.txt').read(),"
            " open('last.txt').read())",
        )
        assert p.stdout.split() == ["3", "yes", "too"]
        # The loop is started through the raw REPL once the board says it is in it (a busy
        # machine delays the board, not the test's bytes). Its "OK" stays in the board's
        # output buffer: the loop never yields to let it out. The bytes mpremote sends next
        # queue behind the loop's, on the same input.
        s = socket.create_connection(("127.0.0.1", board.repl_port))
        _raw_repl(s)
        s.sendall(b"while True: pass\x04")
        s.close()
        board.mpremote("exec", "print('x')", check=False, timeout=30)  # Ctrl-C unheard: reset
        assert board.wait_event("reset", timeout=20, where=lambda e: e["kind"] == "reset")
        p = board.mpremote("exec", "print('back')")
        assert p.stdout.strip() == "back"


def test_ctrl_c_right_behind_a_hung_loop_resets_the_board():
    # The Ctrl-C comes in the same write as the loop: the board reads it with the loop's
    # text, before the loop runs, and it waits behind the loop as input. Unheard all the same.
    with VirtualBoard() as board:
        s = socket.create_connection(("127.0.0.1", board.repl_port))
        _raw_repl(s)
        s.sendall(b"while True: pass\x04\r\x03")
        ev = board.wait_event("reset", timeout=30, where=lambda e: e["kind"] != "soft")
        s.close()
        assert ev is not None and ev["kind"] == "reset"
        p = board.mpremote("exec", "print('back')")
        assert p.stdout.strip() == "back"


@pytest.fixture(scope="module")
def ptyboard():
    with VirtualBoard(pty=True) as board:
        yield board


def test_repl_on_a_pty(ptyboard):
    board = ptyboard
    assert board.repl_pty is not None and board.repl_pty.startswith("/dev/")
    p = subprocess.run(
        [str(MPREMOTE), "connect", board.repl_pty, "exec", "print(2 ** 10)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "1024"
    # the socket still serves mpremote while the pty is idle
    assert board.mpremote("exec", "print('socket')").stdout.strip() == "socket"


def test_copies_over_the_pty_and_the_socket_are_byte_exact(ptyboard, tmp_path):
    # Each way on each line, and across: to the board on one, back on the other.
    data = os.urandom(20_000) + bytes(range(256)) * 4
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    lines = {"pty": ptyboard.repl_pty, "socket": ptyboard.repl_url}
    for there, back in (("pty", "pty"), ("socket", "pty"), ("pty", "socket")):
        dest = tmp_path / f"{there}-{back}.bin"
        for url, args in (
            (lines[there], [str(src), ":blob.bin"]),
            (lines[back], [":blob.bin", str(dest)]),
        ):
            p = subprocess.run(
                [str(MPREMOTE), "connect", url, "cp", "-f", *args],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert p.returncode == 0, p.stdout + p.stderr
        assert dest.read_bytes() == data, (there, back)


def _read_until(fd: int, token: bytes, seen: bytearray, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while token not in seen:
        assert time.monotonic() < end, bytes(seen[-200:])
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            seen += os.read(fd, 65536)


def _raw_repl(s: socket.socket) -> None:
    """The board's raw REPL entered through the socket, once it says so (not after a sleep:
    a busy machine delays the board, not the test's bytes)."""
    s.sendall(b"\r\x03\r\x01")
    _read_until(s.fileno(), b"raw REPL; CTRL-B to exit\r\n>", bytearray())


def _resets(board: VirtualBoard) -> int:
    """Hard resets so far (mpremote soft-resets the board each time it connects)."""
    return sum(1 for e in board.events if e.get("event") == "reset" and e["kind"] != "soft")


def test_an_answer_the_pty_cannot_hold_arrives_whole_and_in_order(ptyboard):
    # A pty holds a few KB: the rest of a long answer waits on the board's side while its
    # reader does not read, and must come out whole and in order once it does. The program
    # tells the UART when it has printed everything: only then is the pty read.
    n = 6000  # 6000 lines of 52 bytes: ~300 KB
    code = (
        "import machine\n"
        f"for i in range({n}): print('line %05d ' % i + 'x' * 40)\n"
        "machine.UART(0).write(b'done')\n"
    )
    uart = socket.create_connection(("127.0.0.1", ptyboard.uart_port), timeout=120)
    fd = os.open(ptyboard.repl_pty, os.O_RDWR | os.O_NOCTTY)
    try:
        seen = bytearray()
        os.write(fd, b"\r\x03\r\x01")
        _read_until(fd, b"raw REPL; CTRL-B to exit\r\n>", seen)
        seen.clear()
        os.write(fd, code.encode() + b"\x04")
        got = b""
        while b"done" not in got:
            chunk = uart.recv(100)
            assert chunk, got
            got += chunk
        _read_until(fd, b"\x04\x04>", seen)
        out = bytes(seen)
        assert out.startswith(b"OK") and out.endswith(b"\x04\x04>"), out[:50] + out[-50:]
        lines = out[2:-3].replace(b"\r", b"").split(b"\n")
        assert lines == [b"line %05d " % i + b"x" * 40 for i in range(n)] + [b""]
        os.write(fd, b"\r\x02")  # leave the raw REPL as found
    finally:
        os.close(fd)
        uart.close()


def test_the_watchdog_runs_on_at_the_prompt_and_through_a_soft_reset(tmp_path):
    # An RP2040's watchdog cannot be stopped: once a program has started it, the board resets
    # when nothing feeds it, at the prompt after a Ctrl-C or after a soft reset alike (so a
    # table's firmware must be started with `nowdt` on the board before working at its REPL).
    flash = tmp_path / "flash"
    flash.mkdir()
    (flash / "main.py").write_text(
        "import machine, os\n"
        "if 'armed' not in os.listdir():\n"
        "    open('armed', 'w').close()\n"
        "    w = machine.WDT(timeout=1000)\n"
        "    machine.soft_reset()\n"
    )
    with VirtualBoard(flash=flash, speed=1.0) as board:
        # armed, soft reset, main.py does nothing more: the prompt idles, the watchdog fires
        ev = board.wait_event("reset", timeout=10, where=lambda e: e["kind"] == "wdt")
        assert ev is not None
        resets = [e["kind"] for e in board.events if e.get("event") == "reset"]
        assert resets == ["soft", "wdt"], resets  # it ran on through the soft reset
        time.sleep(0.3)
        p = board.mpremote("exec", "import machine; print(machine.reset_cause())")
        assert p.stdout.strip() == "3"
        # after that hard reset no watchdog runs: the prompt stays
        p = board.mpremote("exec", "import time; time.sleep_ms(1500); print('still here')")
        assert p.stdout.strip() == "still here"
