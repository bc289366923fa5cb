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

from rmc.stats.monitor import Alarm, Design, Monitor
from rmc.stats.report import ALPHA, analyse, analyse_groups
from rmc.stats.wheel_order import WheelOrder, default_order

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
