"""The virtual board's simulated machine: sensor schedule, IRQs, SPI chain, UART, clock, resets."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

import pytest
import serial

from rmc import ROOT
from rmc.vboard import VirtualBoard

SAMPLES = Path(__file__).parent / "vboard_samples"
PINS = ROOT / "hardware" / "pico_pins.json"
EDGE_CHS = ("ball_a", "ball_b", "rotor_a", "rotor_b")


def sensor(t_us: int, ch: str, v: int) -> dict:
    return {"kind": "sensor", "t_us": t_us, "ch": ch, "v": v}


def read_until(sock: socket.socket, marker: bytes, timeout: float = 20.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while marker not in data:
        if time.monotonic() > deadline:
            raise AssertionError(f"no {marker!r} on the UART; got {data!r}")
        chunk = sock.recv(4096)
        if not chunk:
            raise AssertionError(f"UART closed; got {data!r}")
        data += chunk
    return data


@pytest.fixture(scope="module")
def vb():
    with VirtualBoard() as board:
        board.mpremote("cp", str(PINS), ":pins.json")
        yield board


def exec_out(vb: VirtualBoard, code: str, timeout: float = 60) -> str:
    p = vb.mpremote("exec", code, timeout=timeout, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_schedule_drives_irq_spi_chain_and_uart(vb):
    trace = [
        sensor(100_000, "ball_a", 1),
        sensor(100_500, "ball_a", 0),
        sensor(250_000, "ball_a", 1),
        sensor(250_500, "ball_a", 0),
        sensor(500_000, "pocket:12", 1),
        sensor(700_000, "pocket:12", 0),
        sensor(720_000, "pocket:38", 1),
        sensor(800_000, "lid", 1),  # locked: the lid input reads its locked_level, 0
    ]
    uart = socket.create_connection(("127.0.0.1", vb.uart_port))
    try:
        assert vb.feed(trace) == len(trace)
        p = vb.mpremote("run", str(SAMPLES / "sensors_to_uart.py"), check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        data = read_until(uart, b"END")
        data += read_until(uart, b"\n", timeout=5) if not data.endswith(b"\n") else b""
    finally:
        uart.close()
    assert "Uncaught exception" not in p.stdout
    lines = data.decode().splitlines()
    assert lines[:-1] == ["L 1", "B 100", "B 250", "P 12 1", "P 12 0", "P 38 1", "L 0"]
    assert lines[-1].startswith("END ") and 1000 <= int(lines[-1].split()[1]) <= 1002


def test_host_bytes_arrive_in_uart_read(vb):
    # through pyserial's socket:// URL, as `rmc record --port` opens a real table's line
    line = serial.serial_for_url(vb.uart_url, timeout=5)
    try:
        line.write(b"ping\n")
        # the board waits for the 5 bytes (they cross a socket and a thread to reach it)
        out = exec_out(
            vb,
            "import machine, time\n"
            "u = machine.UART(0, baudrate=115200)\n"
            "while u.any() < 5:\n    time.sleep_ms(1)\n"
            "buf = bytearray(16)\n"
            "n = u.readinto(buf)\n"
            "print(n, bytes(buf[:n]), u.any(), u.read())\n"
            "u.write(b'pong:' + bytes(buf[:n]))\n",
        )
        assert out.strip() == "5 b'ping\\n' 0 None"
        assert line.read_until(b"\n") == b"pong:ping\n"
    finally:
        line.close()


def test_virtual_clock_runs_faster_than_real_time(vb):
    t = time.monotonic()
    out = exec_out(
        vb,
        "import time\n"
        "t0 = time.ticks_ms(); s0 = time.time()\n"
        "time.sleep(120)\n"
        "print(time.ticks_diff(time.ticks_ms(), t0), time.time() - s0)\n",
    )
    wall = time.monotonic() - t
    ms, secs = (int(x) for x in out.split())
    assert 120_000 <= ms <= 120_002
    assert secs in (120, 121)
    assert wall < 10, f"120 virtual seconds took {wall:.1f} s"


def test_busy_wait_on_ticks_ends(vb):
    out = exec_out(
        vb,
        "import time\n"
        "t = time.ticks_us()\n"
        "while time.ticks_diff(time.ticks_us(), t) < 5000: pass\n"
        "print('done')\n",
    )
    assert out.strip() == "done"


def test_real_time_speed():
    with VirtualBoard(speed=1.0) as board:
        bases = []
        for _ in range(2):
            t = time.monotonic()
            board.mpremote("exec", "pass")
            bases.append(time.monotonic() - t)
        t = time.monotonic()
        board.mpremote("exec", "import time; time.sleep_ms(3000)")
        slept = time.monotonic() - t - min(bases)
    assert 2.6 <= slept <= 5.0, f"3 s at real-time speed took {slept:.2f} s more"


def test_hard_irq_that_allocates_is_caught(vb):
    vb.skip_events()
    vb.feed([sensor(10_000, "ball_a", 1), sensor(10_100, "ball_a", 0)])
    p = vb.mpremote("run", str(SAMPLES / "alloc_in_irq.py"), check=False)
    out = p.stdout + p.stderr
    assert "Uncaught exception in IRQ callback handler" in out
    assert "MemoryError" in out
    assert "hits 0 irq_errors 1" in out
    assert vb.wait_event("irq_error", timeout=5) is not None


def test_soft_irq_may_allocate_and_timer_fires(vb):
    vb.feed([sensor(10_000 * i, "ball_b", i % 2) for i in range(1, 21)])
    out = exec_out(
        vb,
        "import machine, time\n"
        "seen = []\n"
        "p = machine.Pin(11, machine.Pin.IN, machine.Pin.PULL_DOWN)\n"
        "p.irq(lambda pin: seen.append(pin.value()), trigger=machine.Pin.IRQ_RISING)\n"
        "ticks = []\n"
        "t = machine.Timer(period=10, callback=lambda t: ticks.append(1))\n"
        "time.sleep_ms(205)\n"
        "t.deinit()\n"
        "print(len(seen), set(seen), len(ticks))\n",
    )
    assert out.split() == ["10", "{1}", "20"]


def test_watchdog_reset_and_reset_cause(vb):
    vb.skip_events()
    p = vb.mpremote(
        "exec",
        "import machine, time\nw = machine.WDT(timeout=100)\nfor i in range(3):\n"
        "    time.sleep_ms(50); w.feed()\ntime.sleep_ms(500)\nprint('not reset')\n",
        timeout=30,
        check=False,
    )
    assert "not reset" not in p.stdout
    ev = vb.wait_event("reset", timeout=10, where=lambda e: e["kind"] != "soft")
    assert ev is not None and ev["kind"] == "wdt"
    assert exec_out(vb, "import machine; print(machine.reset_cause())").strip() == "3"
    vb.mpremote("exec", "import machine; machine.reset()", check=False, timeout=30)
    assert exec_out(vb, "import machine; print(machine.reset_cause() == machine.WDT_RESET)") == (
        "True\n"
    )


def test_pin_map_and_machine_api(vb):
    vb.feed([sensor(0, "lid", 0), sensor(0, "incident", 0), sensor(0, "ball_a", 0)])
    out = exec_out(
        vb,
        "import machine, json\n"
        "P = machine.Pin\n"
        "lid = P(14, P.IN, P.PULL_UP); inc = P(15, P.IN, P.PULL_UP); b = P(10, P.IN, None)\n"
        "led = P('LED', P.OUT, value=1)\n"
        "print(lid.value(), inc.value(), b.value(), led.value(), len(machine.unique_id()))\n"
        "for bad in (30, 'GP99', 'XYZ'):\n"
        "    try:\n"
        "        P(bad)\n"
        "    except ValueError as e:\n"
        "        print('E')\n"
        "try:\n"
        "    machine.WDT(timeout=9000)\n"
        "except ValueError:\n"
        "    print('E')\n",
    )
    assert out.split() == ["1", "1", "0", "1", "8", "E", "E", "E", "E"]


def test_power_cut_keeps_flash_and_runs_main_on_power_up(tmp_path):
    flash = tmp_path / "flash"
    flash.mkdir()
    (flash / "main.py").write_text(
        "try:\n    n = int(open('boots.txt').read())\nexcept OSError:\n    n = 0\n"
        "open('boots.txt', 'w').write(str(n + 1))\n"
    )
    with VirtualBoard(flash=flash) as board:
        assert board.wait_event("boot", timeout=10) is not None
        time.sleep(0.3)
        p = board.mpremote("exec", "print(open('boots.txt').read())")
        assert p.stdout.strip() == "1"
        board.feed(
            [
                {"kind": "power", "t_us": 1000, "event": "cut"},
                {"kind": "power", "t_us": 50_000, "event": "restore"},
            ]
        )
        board.mpremote("exec", "import time; time.sleep(1)", check=False, timeout=30)
        off = board.wait_event("power", timeout=10)
        on = board.wait_event("power", timeout=10)
        assert off is not None and off["state"] == "off"
        assert on is not None and on["state"] == "on"
        assert on["t_us"] - off["t_us"] >= 49_000
        time.sleep(0.3)
        p = board.mpremote(
            "exec", "import machine; print(open('boots.txt').read(), machine.reset_cause())"
        )
        assert p.stdout.split() == ["2", "1"]
    assert (flash / "boots.txt").read_text() == "2"
    # Power cycle: a new run on the same flash image boots again from it.
    with VirtualBoard(flash=flash) as board:
        time.sleep(0.3)
        p = board.mpremote("exec", "print(open('boots.txt').read())")
        assert p.stdout.strip() == "3"


def test_power_cut_between_write_and_rename():
    """File system writes take virtual time: a cut can fall between two of them."""
    with VirtualBoard(flash_op_us=500) as board:
        board.mpremote("exec", "open('s', 'w').write('1')")
        board.feed(
            [
                {"kind": "power", "t_us": 700, "event": "cut"},  # during the rename's 500 us
                {"kind": "power", "t_us": 5_000, "event": "restore"},
            ]
        )
        p = board.mpremote(
            "exec",
            "import os\nf = open('s.new', 'w')\nf.write('2')\nf.close()\n"
            "os.rename('s.new', 's')\nprint('renamed')\n",
            check=False,
        )
        assert "renamed" not in p.stdout
        assert board.wait_event("power", where=lambda e: e["state"] == "on") is not None
        time.sleep(0.3)
        p = board.mpremote("exec", "print(open('s').read(), open('s.new').read())")
        assert p.stdout.split() == ["1", "2"]


def test_power_cut_on_command_and_restore(tmp_path):
    with VirtualBoard() as board:
        board.mpremote("exec", "open('x.txt', 'w').write('before')")
        board.power_cut()
        ev = board.wait_event("power", timeout=10)
        assert ev is not None and ev["state"] == "off"
        board.power_restore()
        ev = board.wait_event("power", timeout=10)
        assert ev is not None and ev["state"] == "on"
        p = board.mpremote("exec", "print(open('x.txt').read())")
        assert p.stdout.strip() == "before"


def test_restore_right_after_cut_is_not_lost():
    """A restore sent before the board has finished going off still powers it up again."""
    with VirtualBoard() as board:
        board.mpremote("exec", "open('y.txt', 'w').write('kept')")
        for _ in range(3):
            board.power_cut()
            board.power_restore()  # no wait for the "off" event in between
            off = board.wait_event("power", timeout=10)
            on = board.wait_event("power", timeout=10)
            assert off is not None and off["state"] == "off"
            assert on is not None and on["state"] == "on", "the restore was lost"
        p = board.mpremote("exec", "print(open('y.txt').read())")
        assert p.stdout.strip() == "kept"


def test_team_firmware_boots_on_the_virtual_machine(tmp_path):
    """firmware/board_pico.py on the simulated machine: it boots and sends its BOOT frame."""
    flash = tmp_path / "flash"
    shutil.copytree(
        ROOT / "firmware",
        flash,
        ignore=shutil.ignore_patterns("__pycache__", "main.py", "pulsegen", "*.md"),
    )
    shutil.copy(PINS, flash / "pins.json")
    shutil.copy(ROOT / "hardware" / "wheel.json", flash / "wheel.json")
    json.loads((flash / "pins.json").read_text())
    with VirtualBoard(flash=flash) as board:
        uart = socket.create_connection(("127.0.0.1", board.uart_port))
        try:
            time.sleep(0.2)
            # edges on every hard-IRQ input: its handlers must run without allocating
            board.feed(
                [sensor(10_000 + 20_000 * i, ch, i % 2) for i in range(1, 20) for ch in EDGE_CHS]
            )
            p = board.mpremote(
                "exec",
                "import time, board_pico\nb = board_pico.Board()\n"
                "for i in range(500):\n    b.step(); time.sleep_ms(1)\nprint('stepped')\n",
                check=False,
                timeout=120,
            )
            assert p.stdout.strip().endswith("stepped"), p.stdout + p.stderr
            assert b",BOOT," in read_until(uart, b",BOOT,", timeout=10)
            assert "Uncaught exception" not in p.stdout
            assert not [e for e in board.events if e.get("event") == "irq_error"]
        finally:
            uart.close()


def test_disable_irq_defers_edges_and_hard_timer_must_not_allocate(vb):
    vb.skip_events()
    vb.feed([sensor(5_000, "ball_b", 1), sensor(6_000, "ball_b", 0)])
    out = exec_out(
        vb,
        "import machine, time, array\n"
        "at = array.array('i', [0, 0])\n"
        "def isr(pin):\n"
        "    at[0] = time.ticks_us(); at[1] += 1\n"
        "p = machine.Pin(11, machine.Pin.IN)\n"
        "p.irq(isr, trigger=machine.Pin.IRQ_RISING, hard=True)\n"
        "t0 = time.ticks_us()\n"
        "s = machine.disable_irq()\n"
        "time.sleep_ms(20)\n"
        "print(at[1])\n"
        "machine.enable_irq(s)\n"
        "print(at[1], time.ticks_diff(at[0], t0) >= 20000)\n"
        "t = machine.Timer(period=5, callback=lambda t: [t], hard=True)\n"
        "time.sleep_ms(20)\n"
        "print(machine.stats['irq_errors'] >= 1)\n",
    )
    lines = out.splitlines()
    assert lines[:3] == ["0", "1 True", "Uncaught exception in IRQ callback handler"], out
    assert "MemoryError" in out
    assert lines[-1] == "True"
    assert vb.wait_event("irq_error", timeout=5) is not None


def test_uart_tx_ring_drains_at_the_baud_rate(vb):
    """As rp2's UART: a write that fits in the TX ring returns at once, txdone() turns True
    when the line has sent it all (virtual clock), and a write beyond the ring's room waits
    for the line; txbuf beyond 32766 is refused."""
    out = exec_out(
        vb,
        "import machine, time\n"
        "u = machine.UART(0, baudrate=115200, txbuf=1024, timeout=0)\n"
        "t0 = time.ticks_us()\n"
        "n1 = u.write(b'x' * 1000)\n"
        "t1 = time.ticks_us()\n"
        "d1 = u.txdone()\n"
        "n2 = u.write(b'y' * 500)\n"
        "t2 = time.ticks_us()\n"
        "u.flush()\n"
        "t3 = time.ticks_us()\n"
        "print(n1, n2, d1, u.txdone(), time.ticks_diff(t1, t0), time.ticks_diff(t2, t1),\n"
        "      time.ticks_diff(t3, t0))\n"
        "try:\n"
        "    machine.UART(0, txbuf=40000)\n"
        "except ValueError:\n"
        "    print('E')\n",
    )
    n1, n2, d1, d3, w1, w2, w3, e = out.split()
    assert (n1, n2, d1, d3, e) == ("1000", "500", "False", "True", "E")
    char_us = 10e6 / 115200  # 8N1
    assert int(w1) < 100  # into the ring: no wait
    # 1500 bytes for 1024 + 32 of room: the second write waited for the line to take 444
    assert abs(int(w2) - 444 * char_us) < 100
    assert abs(int(w3) - 1500 * char_us) < 100  # all out after 1500 byte times


def test_team_firmware_with_a_bad_key_stays_at_the_repl(tmp_path):
    """main.py with a bad key.txt: says so and stays at the REPL, no watchdog started (an
    exception in Board() used to reset the board in a loop before any frame went out)."""
    flash = tmp_path / "flash"
    shutil.copytree(
        ROOT / "firmware", flash, ignore=shutil.ignore_patterns("__pycache__", "pulsegen", "*.md")
    )
    shutil.copy(PINS, flash / "pins.json")
    shutil.copy(ROOT / "hardware" / "wheel.json", flash / "wheel.json")
    (flash / "key.txt").write_text("not a key\n")
    with VirtualBoard(flash=flash, speed=10) as board:
        assert board.wait_event("boot", timeout=10) is not None
        p = board.mpremote("exec", "import main", check=False, timeout=60)
        assert "CONFIGURATION ERROR: key.txt" in p.stdout, p.stdout + p.stderr
        # no watchdog runs: 3 s (virtual, 10 times real time) at the prompt, no reset
        p = board.mpremote("exec", "import time; time.sleep(3); print('alive')", timeout=60)
        assert p.stdout.strip() == "alive"
        assert not [e for e in board.events if e.get("event") == "reset" and e["kind"] == "wdt"]
