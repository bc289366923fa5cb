"""The firmware's own « rien ne va plus » on simulated spins: its predictor
(`rmcfw.rnvp.Predictor`, as `rmcfw.table` builds it: counted to the drop) fed each spin's
passes at ball sensor A, spin after spin so that it learns the wheel as on the table, with
the table's default configuration (`rmcfw.config`: lead_ms, lead_revs, limit_ms, and
drop_ms from the wheel's geometry).

The call comes at the predictor's deadline when no pass comes first (the table polls every
millisecond), and at the drop when the deadline has not come by then (why=drop): the
attacker then had every pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rmc.edge.observe import SpinObs
from rmcfw import config, rnvp, ticks


@dataclass(frozen=True)
class TableSettings:
    """The firmware settings that place the call."""

    lead_ms: int
    lead_revs: int
    limit_ms: int
    drop_ms: int
    window_ms: int = 0  # lead_window_ms, where the firmware has it

    @classmethod
    def defaults(cls, wheel: dict[str, Any] | None) -> TableSettings:
        drop = config.drop_ms_of(wheel) if wheel else 0
        c = config.Config(None, {"drop_ms": drop} if drop else None)
        return cls(c.lead_ms, c.lead_revs, c.limit_ms, c.drop_ms, getattr(c, "lead_window_ms", 0))

    def with_lead(
        self,
        lead_ms: int | None = None,
        lead_revs: int | None = None,
        window_ms: int | None = None,
    ) -> TableSettings:
        return TableSettings(
            self.lead_ms if lead_ms is None else lead_ms,
            self.lead_revs if lead_revs is None else lead_revs,
            self.limit_ms,
            self.drop_ms,
            self.window_ms if window_ms is None else window_ms,
        )


def _predictor(settings: TableSettings):
    """The table's predictor: rmcfw.lead's (with its lead window) where the firmware has
    it, else rmcfw.rnvp's."""
    try:
        from rmcfw import lead
    except ImportError:
        if settings.window_ms:
            raise ValueError("this firmware has no lead window (rmcfw.lead)") from None
        return rnvp.Predictor(to_drop=True)
    p = lead.Predictor(to_drop=True)
    p.window_ms = settings.window_ms
    return p


def firmware_calls(spins: Sequence[SpinObs], settings: TableSettings) -> dict[int, float]:
    """spin number -> the instant (s, the spins' clock) the firmware calls it."""
    p = _predictor(settings)
    # as rmcfw.spin.Spin.apply_cfg sets it from the table's configuration
    p.lead_s = settings.lead_ms / 1000
    p.lead_revs = settings.lead_revs
    p.limit_s = settings.limit_ms / 1000
    p.set_prior(settings.drop_ms / 1000)
    out: dict[int, float] = {}
    for o in spins:
        if o.passes.size == 0:
            out[o.spin] = o.drop_s
            continue
        t0 = float(o.passes[0])
        us = [round((t - t0) * 1e6) for t in o.passes]
        p.reset(0)
        call: float | None = None
        for k in range(1, len(us)):
            if call is None and us[k] > _due(p):
                call = max(_due(p), us[k - 1]) / 1e6
            p.lap(us[k])
        drop = o.drop_s - t0
        if call is None:
            d = _due(p) / 1e6
            call = max(d, us[-1] / 1e6) if d < drop else drop
        out[o.spin] = t0 + call
        if len(us) >= rnvp.MIN_LAPS + 1:
            p.learn_drop()  # as the table does after a result (a valid spin)
    return out


def _due(p) -> int:
    """The instant (us from the spin's first pass) the table's poll finds the call due: the
    deadline, less the spin's random extra lead for a fitted call (rmcfw.lead)."""
    extra = 1000 * getattr(p, "extra_ms", 0) if p.why == rnvp.WHY_FIT else 0
    return ticks.diff(p.deadline, 0) - extra
