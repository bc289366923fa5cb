"""The reset cause on the emulated RP2040 (issue 27): the firmware's BOOT frame says
`reset=watchdog` when `machine.reset_cause()` is `WDT_RESET`, else `reset=power`.

On an RP2040, MicroPython's `reset_cause()` is `WDT_RESET` when the watchdog's REASON register
is not zero (pico-sdk `watchdog_caused_reboot()`): after the watchdog ran out (REASON TIMER)
and after `machine.reset()`, which reboots through the watchdog (REASON FORCE). A power-on
clears it. A soft reset (Ctrl-D) restarts the interpreter, not the chip: the register keeps
what the last chip reset left. rp2040js models REASON; vpico.mjs starts a fresh chip at each
watchdog reset and hands it the old chip's REASON and scratch registers, as the chip's
watchdog leaves them, and a fresh chip with REASON 0 at a power-up.
"""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest
from vpico_support import boot_resets, image

from rmc.vpico import VirtualPico, missing

WHY = missing()
pytestmark = [
    pytest.mark.skipif(WHY is not None, reason=f"no virtual Pico here: {WHY}"),
    pytest.mark.slow,
]
WAIT = 240.0  # wall seconds for a few emulated ones: the chip runs at ~0.1 of real time


class Line:
    """A socket read on a thread: every byte kept, waited on by pattern."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("socket://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.sock.settimeout(0.2)
        self.data = b""
        self._stop = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop:
            try:
                got = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not got:
                return  # closed by the board (a reset drops the USB client)
            self.data += got

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def wait(self, pattern: bytes, count: int = 1, timeout: float = WAIT) -> bytes:
        deadline = time.monotonic() + timeout
        while len(re.findall(pattern, self.data)) < count:
            assert time.monotonic() < deadline, (pattern, count, self.data[-2000:])
            assert self._thread.is_alive() or pattern in self.data, self.data[-2000:]
            time.sleep(0.1)
        return self.data

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        self._thread.join(timeout=5)


BOOT = rb",BOOT,[^\n]*\n"


def _repl(vp: VirtualPico) -> Line:
    """The REPL, the firmware stopped with Ctrl-C: a prompt."""
    repl = Line(vp.repl_url)
    repl.send(b"\r\x03")
    repl.wait(rb">>> ")
    return repl


def test_reset_cause_after_power_on_soft_reset_machine_reset_and_watchdog(tmp_path):
    with VirtualPico(image=image(tmp_path, nowdt=True)) as vp:
        uart = Line(vp.uart_url)
        try:
            uart.wait(BOOT, 1)  # power-on: REASON 0
            # a soft reset: the interpreter starts again, main.py runs, the chip does not
            repl = _repl(vp)
            repl.send(b"\x04")
            uart.wait(BOOT, 2)
            repl.close()
            # machine.reset(): the port reboots through the watchdog (REASON FORCE)
            repl = _repl(vp)
            repl.send(b"import machine; machine.reset()\r")
            uart.wait(BOOT, 3)
            repl.close()
            # a soft reset after it: REASON still holds the watchdog's FORCE
            repl = _repl(vp)
            repl.send(b"import machine; print('cause', machine.reset_cause())\r")
            repl.wait(rb"cause 3")
            repl.send(b"\x04")
            uart.wait(BOOT, 4)
            repl.close()
            # the watchdog runs out: without `nowdt` the firmware starts it (2 s); Ctrl-C
            # leaves the chip at the REPL, where nothing feeds it (REASON TIMER)
            repl = _repl(vp)
            repl.send(b"import os, machine; os.remove('nowdt'); machine.reset()\r")
            uart.wait(BOOT, 5)
            repl.close()
            repl = _repl(vp)  # the firmware, its watchdog running, stopped
            uart.wait(BOOT, 6)
            repl.close()
            # the power cut and restored: a power-on, REASON 0
            vp.power_cut()
            assert vp.wait_event("power", timeout=30, where=lambda e: e["state"] == "off")
            vp.power_restore()
            uart.wait(BOOT, 7)
        finally:
            uart.close()
        resets = [(e["reason"]) for e in vp.events if e.get("event") == "reset"]
    assert boot_resets(uart.data) == [
        "power",  # power-on
        "power",  # soft reset: REASON 0 kept
        "watchdog",  # machine.reset()
        "watchdog",  # soft reset: REASON FORCE kept
        "watchdog",  # machine.reset() again
        "watchdog",  # the watchdog ran out
        "power",  # power cut and restored
    ], uart.data.decode(errors="replace")
    assert resets == [2, 2, 1], resets  # FORCE, FORCE, TIMER (RP2040 datasheet 4.7.7)
