# What the predictor learned of the wheel (rmcfw.rnvp_wheel), as plain data for the
# power-safe state (rmcfw.store), and back.
from math import log

from rmcfw.rnvp_wheel import A_MIN, B_OVER_VC, LAPS_LOG_ODDS, SD_A, SPINS


def export(w):
    """The Wheel w's learning as plain data. The keys are the saved state's: kept as they
    are, so that a board's saved state survives an update."""
    n = min(w.learned, SPINS)
    return {
        "a": w.drag,
        "n": w.learned,
        "lo": [w.low[i] for i in range(n)],
        "hi": [w.high[i] for i in range(n)],
        "se": [[w.low_se[i] for i in range(n)], [w.high_se[i] for i in range(n)]],
        "drag": [w.drag_precision, w.drag_spins],
        # friction: log mean, variance, spins, precision
        "b": [w.friction_log, w.friction_var, w.friction_spins, w.friction_weight],
        "noise": [w.noise, w.noise_spins],  # pass-time variance (s^2), spins
        "r": [w.loss_log, w.loss_var, w.loss_spins],  # log r: mean, variance, spins
        "changes": w.changes,  # wheel changes seen lately
        "laps_ll": w.laps_log_odds,  # the timing noise's kind: on each lap, not each pass
    }


def restore(w, data):
    """Back to what export() gave; ignores data that does not fit (older formats too: what
    they lack starts afresh). False when nothing was restored."""
    try:
        v = _read(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    if v is None or not _sound(v):
        return False
    lo, hi, se_lo, se_hi = v[0:4]
    for i in range(len(lo)):
        w.low[i] = lo[i]
        w.high[i] = hi[i]
        w.low_se[i] = se_lo[i]
        w.high_se[i] = se_hi[i]
    (w.drag, w.learned, w.drag_precision, w.drag_spins) = v[4:8]
    (w.friction_log, w.friction_var, w.friction_spins) = v[8:11]
    lbw = v[11]  # older formats: from the spins' count
    w.friction_weight = lbw if lbw > 0 else w.friction_spins / w.friction_variation()
    (w.noise, w.noise_spins, w.loss_log, w.loss_var, w.loss_spins) = v[12:17]
    (w.changes, w.laps_log_odds) = v[17:19]
    w.estimate(min(w.learned, SPINS))
    return True


def _read(data):
    """The saved values in restore()'s order, converted, or None for a bad shape."""
    lo = data["lo"]
    hi = data["hi"]
    if len(lo) > SPINS or len(hi) != len(lo):
        return None
    a = float(data["a"])
    n = int(data["n"])
    pa, ka = data.get("drag", (1.0 / (SD_A * SD_A), 0))
    b = data.get("b", (0.0, 0.0, 0))
    lb, lbv, nb = b[:3]
    lbw = float(b[3]) if len(b) > 3 else 0.0
    noise, nn = data.get("noise", (0.0, 0))
    lr, lrv, nr = data.get("r", (log(B_OVER_VC), 0.0, 0))
    changes = float(data.get("changes", 0.0))
    laps_ll = float(data.get("laps_ll", LAPS_LOG_ODDS))
    # the brackets' standard errors (older formats: none, the centre as the brackets say)
    se_lo, se_hi = data.get("se", ((0.0,) * len(lo), (0.0,) * len(lo)))
    if len(se_lo) != len(lo) or len(se_hi) != len(lo):
        return None
    se_lo = [float(x) for x in se_lo]
    se_hi = [float(x) for x in se_hi]
    return (
        lo, hi, se_lo, se_hi, a, n, float(pa), int(ka), float(lb), float(lbv), int(nb), lbw,
        float(noise), int(nn), float(lr), float(lrv), int(nr), changes, laps_ll,
    )  # fmt: skip


def _sound(v):
    """The values read are within their bounds."""
    se_lo, se_hi, a, n, pa, ka, lb, lbv, nb, lbw, noise, nn, lr, lrv, nr, changes = v[2:18]
    if not (A_MIN <= a <= 1.0 and n >= 0 and 0 < pa < 1e30 and lbv >= 0 and noise >= 0):
        return False
    if ka < 0 or nb < 0 or nn < 0 or not -20 < lb < 20 or not 0 <= lbw < 1e30:
        return False
    if nr < 0 or lrv < 0 or not -20 < lr < 20 or not 0 <= changes < 1e6:
        return False
    if not -1e6 < v[18] < 1e6:
        return False
    for x in se_lo + se_hi:
        if not 0 <= x < 10:
            return False
    return True
