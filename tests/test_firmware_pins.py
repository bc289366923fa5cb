"""The pin map the board tests use is hardware/pico_pins.json's, and the board reads no key
that file lacks."""

from __future__ import annotations

import json
import re
import sys

from rmc import FIRMWARE_DIR, HARDWARE_DIR, ROOT

sys.path.insert(0, str(ROOT / "tests" / "fw"))
import test_board_pico


def _subset(small: dict, big: dict, where: str = "") -> None:
    for k, v in small.items():
        assert k in big, f"{where}{k} missing from pico_pins.json"
        if isinstance(v, dict):
            _subset(v, big[k], f"{where}{k}.")
        else:
            assert big[k] == v, f"{where}{k}: test {v!r}, pico_pins.json {big[k]!r}"


def test_board_test_pins_match_the_hardware_file() -> None:
    pins = json.loads((HARDWARE_DIR / "pico_pins.json").read_text())
    _subset(test_board_pico.PINS, pins)


def test_board_reads_only_keys_of_the_pin_map() -> None:
    pins = json.loads((HARDWARE_DIR / "pico_pins.json").read_text())
    src = (FIRMWARE_DIR / "board_pico.py").read_text()
    # the names board_pico.py gives the pin map and its sections
    keys = set(re.findall(r'\b(?:cfg|pk|spec|u|lid|inc)(?:\.get\(|\[)\s*"([a-z_]+)"', src))
    assert {"pockets", "latch_active", "watchdog_ms", "de"} <= keys  # the pattern still works
    known = set(pins)
    for v in pins.values():
        if isinstance(v, dict):
            known |= set(v)
    assert keys <= known, keys - known
