"""The whole battery on one sequence of results, and per group (`rmc stats --by`).

Every test is run at the same level, ALPHA = 1 %: each p-value is that test's own (the
pockets' binomial tests corrected together by Holm); `flags` lists the tests below ALPHA.
A fair wheel raises at least one flag more often than 1 % — several tests look at it —
docs/stats.md gives the measured rate of the whole battery.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats as sps

from rmc.stats import sectors
from rmc.stats.chances import chance_tests
from rmc.stats.monitor import Monitor
from rmc.stats.pockets import pocket_tests
from rmc.stats.signature import analyse_signature
from rmc.stats.sources import Result
from rmc.stats.wheel_order import WheelOrder

ALPHA = 0.01
UNKNOWN = "(none on record)"


def analyse(
    idx: np.ndarray,
    order: WheelOrder,
    alpha: float = ALPHA,
    monitor: bool = True,
    history: bool = False,
) -> dict[str, Any]:
    """Every test on results given as wheel positions, in the order played (JSON-ready)."""
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size == 0:
        raise ValueError("no results")
    counts = order.counts(idx)
    pt = pocket_tests(counts)
    sc = sectors.scan(counts)
    ch, zeros = chance_tests(idx, order.pockets)
    flags = _flags(pt, sc, ch, zeros, order, alpha)
    out: dict[str, Any] = {
        "n": pt.n,
        "alpha": alpha,
        "wheel": order.name,
        "pockets": _pockets_json(pt, order),
        "sectors": _sectors_json(sc, order),
        "chances": [_chance_json(c) for c in ch],
        "zeros": {
            "n": zeros.n,
            "k": zeros.k,
            "share": zeros.share,
            "expected": zeros.expected,
            "p": zeros.p,
        },
        "flags": flags,
    }
    if monitor:
        out["monitor"], alarmed = _monitor_json(idx, order, history)
        if alarmed:
            flags.append("monitor")
    return out


def _flags(
    pt: Any, sc: Any, ch: Sequence[Any], zeros: Any, order: WheelOrder, alpha: float
) -> list[str]:
    """The tests below `alpha`, in the report's order."""
    flags: list[str] = []
    if pt.chi2_p < alpha:
        flags.append("chi-square")
    if pt.g_p < alpha:
        flags.append("G-test")
    flags += [f"pocket {order.pockets[i]} (Holm)" for i in pt.flagged(alpha)]
    if sc.p < alpha:
        flags.append("sector scan")
    for c in ch:
        if c.p is not None and c.p < alpha:
            flags.append(f"{c.name} share")
        if c.runs.p is not None and c.runs.p < alpha:
            flags.append(f"{c.name} runs")
    if zeros.p < alpha:
        flags.append("zeros share")
    return flags


def _pockets_json(pt: Any, order: WheelOrder) -> dict[str, Any]:
    return {
        "expected": pt.expected,
        "small_sample": pt.small_sample,
        "chi2": {"statistic": pt.chi2, "dof": pt.dof, "p": pt.chi2_p},
        "g": {"statistic": pt.g, "dof": pt.dof, "p": pt.g_p},
        "correction": "Holm (family-wise); Benjamini-Hochberg (false discovery rate) beside",
        "table": [
            {
                "pocket": order.pockets[i],
                "count": pt.counts[i],
                "p": pt.binom_p[i],
                "p_holm": pt.holm_p[i],
                "p_bh": pt.bh_p[i],
            }
            for i in range(order.size)
        ],
    }


def _sectors_json(sc: Any, order: WheelOrder) -> dict[str, Any]:
    return {
        "z": sc.z,
        "p": sc.p,
        "pockets": order.sector(sc.start, sc.width),
        "width": sc.width,
        "count": sc.count,
        "expected": sc.expected,
        "widths": [min(sectors.WIDTHS), max(sectors.WIDTHS)],
        "null_draws": sc.draws,
    }


def _chance_json(c: Any) -> dict[str, Any]:
    return {
        "name": c.name,
        "first": c.first,
        "n": c.n,
        "k": c.k,
        "share": c.share,
        "p": c.p,
        "runs": {
            "runs": c.runs.runs,
            "expected": c.runs.expected,
            "z": c.runs.z,
            "p": c.runs.p,
        },
    }


def _monitor_json(idx: np.ndarray, order: WheelOrder, history: bool) -> tuple[dict, bool]:
    """The CUSUM monitor run over the results in order, and whether it raised an alarm."""
    m = Monitor(order.pockets, history=history)
    m.feed_positions(idx)
    out: dict[str, Any] = {
        "threshold": m.threshold,
        "false_alarm": m.false_alarm,
        "horizon": m.horizon,
        "alarms": [
            {"spin": a.spin, "detector": a.detector, "statistic": a.statistic} for a in m.alarms
        ],
    }
    if history:
        out["history"] = m.history
    return out, bool(m.alarms)


def group_key(r: Result, by: str) -> str:
    v = getattr(r, by)
    return UNKNOWN if v is None else str(v)


def analyse_groups(
    results: Sequence[Result], order: WheelOrder, by: str, alpha: float = ALPHA
) -> dict[str, Any]:
    """The battery per group (the dealer's signature included), and whether the groups
    share one distribution over the pockets (chi-square test of homogeneity, groups ×
    pockets)."""
    groups: dict[str, list[int]] = {}
    members: dict[str, list[Result]] = {}
    idx = order.indices(r.number for r in results)
    for r, x in zip(results, idx.tolist(), strict=True):
        groups.setdefault(group_key(r, by), []).append(x)
        members.setdefault(group_key(r, by), []).append(r)
    out: dict[str, Any] = {"by": by, "groups": {}}
    for k, xs in groups.items():
        g = analyse(np.asarray(xs), order, alpha)
        g["signature"], flags = analyse_signature(members[k], order, alpha)
        g["flags"] += flags
        out["groups"][k] = g
    table = np.array([order.counts(np.asarray(xs)) for xs in groups.values()])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[0] >= 2 and table.shape[1] >= 2:
        chi2, p, dof, exp = sps.chi2_contingency(table, correction=False)
        out["homogeneity"] = {
            "statistic": float(chi2),
            "dof": int(dof),
            "p": float(p),
            "small_sample": bool((exp < 5).any()),
        }
    else:
        out["homogeneity"] = None
    return out
