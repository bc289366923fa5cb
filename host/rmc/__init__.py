"""rmc: the host side of the Roulette Monte-Carlo table (decree 2019-819).

Checks the firmware's frames, records and replays traces, settles bets, simulates a wheel,
drives test rigs. The firmware's portable core (`rmcfw`, in the repository's `firmware/`)
is imported from here, so that the host and the table share one definition of the numbers,
the protocol and the spin logic.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

__version__ = "0.1.0"

# The repository root: host/rmc/__init__.py -> parents[2]. RMC_ROOT overrides it (an
# installed copy run from elsewhere).
ROOT = Path(os.environ.get("RMC_ROOT", Path(__file__).resolve().parents[2]))
FIRMWARE_DIR = ROOT / "firmware"
HARDWARE_DIR = ROOT / "hardware"


def _install_micropython_shim() -> None:
    """Give CPython the few names of MicroPython's `micropython` module the core uses."""
    if "micropython" in sys.modules:
        return
    shim = types.ModuleType("micropython")
    shim.const = lambda value: value  # type: ignore[attr-defined]
    shim.heap_lock = lambda: 0  # type: ignore[attr-defined]
    shim.heap_unlock = lambda: 0  # type: ignore[attr-defined]
    shim.alloc_emergency_exception_buf = lambda size: None  # type: ignore[attr-defined]
    shim.schedule = lambda func, arg: func(arg)  # type: ignore[attr-defined]
    shim.native = shim.viper = lambda f: f  # type: ignore[attr-defined]
    sys.modules["micropython"] = shim


_install_micropython_shim()
if str(FIRMWARE_DIR) not in sys.path:
    sys.path.insert(0, str(FIRMWARE_DIR))
