# The call counted to the drop (the table's: the instant the ball leaves the rim, which its
# sensors see): the wheel's model run forward from the fitted pass speed until the speed^2
# falls below the drop speed v_c. docs/firmware.md, "Deciding the call".
from math import exp

from micropython import const

from rmcfw.rnvp_call import MAX_AHEAD

_FEW_LAPS = const(4)  # fewer laps tell little of the slowing: used only near the drop


def drop_call(p, s, u, b, k):
    """Call time (s) for the Predictor p at its pass at s, or None; sets p.drop_s and
    p.revs_left. u, b: the last lap's mean speed^2 and the friction (Passes.state), k:
    the laps to fit."""
    wheel = p.wheel
    passes = p.passes
    a = wheel.drag
    if b <= 0 and a >= 1.0:
        return None  # not slowing down (noise): no prediction yet
    if passes.count <= _FEW_LAPS:
        # 2-3 laps: a fit of their slowing is mostly noise. A ball already within about a
        # lap of the drop speed (a feeble launch) is called at once, any other waits.
        if passes.u(passes.count - 2) < 1.5 * wheel.u_c:
            p.drop_s = s
            p.revs_left = 0
            return s
        return None
    f = passes.refine(a, (u + a * u - b) / 2, b, k)  # the table's sensors: exact passes
    if f is None:
        return None
    v, b = f
    u = (2 * v + b) / (1 + a)  # the last lap's mean, from the refined pass speed
    v_c = exp(wheel.centre + wheel.margin * 0.5)  # the drop instant: an unbiased threshold
    # pass speeds^2 follow the same map: the passes until the speed^2 falls below v_c
    t = s
    n = 0
    while n < MAX_AHEAD:
        nxt = a * v - b
        if nxt < v_c:
            break
        t += 2.0 / (v**0.5 + nxt**0.5)  # a lap with speed^2 linear in the angle
        v = nxt
        n += 1
    if n >= MAX_AHEAD:
        return None
    p.revs_left = n
    if p.lead_revs > 0:
        p.drop_s = t
        # the pass lead_revs laps before the last: the pass n - lead_revs ahead
        if n <= p.lead_revs:
            return s
        return _pass_ahead(a, s, u, b, n - p.lead_revs)
    if v > v_c:
        # the part of the lap until the speed^2, linear in the angle, meets v_c
        nxt = a * v - b
        t += 2.0 * (v**0.5 - v_c**0.5) / (v - nxt)
    p.drop_s = t
    return t - p.lead_s


def _pass_ahead(a, s, u, b, k):
    """Time (s) of the k-th pass after the one at s, from the last lap's mean u."""
    v = (u + a * u - b) / 2
    for _ in range(k):
        nxt = a * v - b
        s += 2.0 / (v**0.5 + nxt**0.5)
        v = nxt
    return s
