"""Wheel-integrity statistics (issue 24): is the wheel fair?

    from rmc.stats import analyse, default_order, Monitor
    order = default_order()                       # hardware/wheel.json's pocket order
    report = analyse(order.indices(["17", "0", ...]), order)   # JSON-ready dict
    m = Monitor(); m.feed("17")                   # -> Alarm | None, one result at a time

Modules: `pockets` (chi-square, G-test, binomial + Holm), `sectors` (the scan over runs of
neighbouring pockets, calibrated by simulation), `chances` (simple chances and zeros, runs
tests), `monitor` (CUSUM bank), `power` (spins needed), `sources` (traces, the database),
`report` (the battery, per group), `plots`. See docs/stats.md.
"""

from __future__ import annotations

import importlib

# Imported when first asked for: the table service needs only the monitor (numpy), not the
# tests' scipy, which takes a second to import.
_WHERE = {
    "ALPHA": "report",
    "Alarm": "monitor",
    "Design": "monitor",
    "Monitor": "monitor",
    "WheelOrder": "wheel_order",
    "analyse": "report",
    "analyse_groups": "report",
    "default_order": "wheel_order",
}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'rmc.stats' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rmc.stats.{_WHERE[name]}"), name)


__all__ = [
    "ALPHA",
    "Alarm",
    "Design",
    "Monitor",
    "WheelOrder",
    "analyse",
    "analyse_groups",
    "default_order",
]
