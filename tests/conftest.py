"""Shared pytest set-up: the host package puts the firmware's portable core on sys.path."""

import pytest
from pgserver import db  # noqa: F401  (the fixture: a test on SQLite and on PostgreSQL)

import rmc  # noqa: F401  (side effect: firmware/ on sys.path, `micropython` shim on CPython)

# --- Hardware-in-the-loop rig (docs/rig.md): `make hil PORT=... RIG=...` ---


def pytest_addoption(parser):
    group = parser.getgroup("hil", "hardware-in-the-loop rig (docs/rig.md)")
    group.addoption("--hil-port", metavar="URL", help="the table board's frame line (pyserial URL)")
    group.addoption(
        "--rig", metavar="RIG.json", help="rig configuration (hardware/rig_example.json)"
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "hil: needs a table board on the rig (--rig, --hil-port)")
    config.addinivalue_line(
        "markers", "slow: minutes of wall time, left to `make test-slow` (the emulated RP2040)"
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--rig") and config.getoption("--hil-port"):
        return
    skip = pytest.mark.skip(
        reason="no rig attached: run `make hil PORT=<frame line> RIG=<rig.json>`"
    )
    for item in items:
        if "hil" in item.keywords:
            item.add_marker(skip)
