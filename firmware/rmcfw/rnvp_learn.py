# Learning the wheel from a spin that ended: the ball left the track after its last pass.
# Each function reads the spin's passes (rmcfw.rnvp_passes) and updates what the predictor
# knows of the wheel (rmcfw.rnvp_wheel). docs/firmware.md, "Learning the wheel".
# The learning is resumable steps (rmcfw.rnvp_slices): the table runs it in slices after the
# result (rmcfw.rnvp.Predictor.learn_start), everyone else at once (learn_drop).
from math import exp, log, sqrt

from micropython import const

from rmcfw.rnvp_maths import cdf, sd
from rmcfw.rnvp_passes import PASSES
from rmcfw.rnvp_slices import over, run
from rmcfw.rnvp_wheel import A_MIN, A_NEW, SD_A, SD_WHEELS, SPINS, WIDEN

LEARN_LAPS = const(4)  # a spin of that many laps teaches the timing noise...
B_LAPS = const(6)  # ... and of that many the friction
NOISE_MIN = 1e-5  # s^2: pass-time variance assumed at least (3 ms), for the friction's prior
_FORGET = 0.9  # per spin, the weight left to what earlier spins said of the drag
_FORGET_B = 0.875  # per spin, the weight left to what earlier spins said of the friction
_LOSS_SPINS = const(32)  # the loss r is learned over about that many spins
_CHANGES_N = 16  # the changes seen are counted over about that many spins
# a spin was on another wheel when its whole laps make the learned one this unlikely
_CHANGED = 0.01
# The timing noise's kind: an error on each pass time (sensors, video frames: a lap shares its
# errors with its neighbours), or on each lap (laps clocked one by one), where a fit of the pass
# times claims some 3 times too little variance. Whole spins tell which by the likelihood of
# their laps under each (log ratio, laps over passes), summed over the last spins.
_FORGET_LL = 0.9


def learn_drop(wheel, passes, learn_drag=True):
    """The ball left the track after the last pass: learn drag and drop speed from the
    spin. Returns False when the spin is too short to learn from. (learn_drop_steps run to
    its end at once.)"""
    return run(learn_drop_steps(wheel, passes, learn_drag))


def learn_drop_steps(wheel, passes, learn_drag=True):
    """learn_drop() as resumable steps (rmcfw.rnvp_slices): the fits' checkpoints, and one
    before the brackets' estimate. The wheel is half-learned until they end: nothing may
    read it meanwhile (rmcfw.rnvp.Predictor finishes them first)."""
    laps = passes.count - 1
    if laps < 3:
        return False
    # the spin fitted with the drag the earlier spins left: for the change test and the
    # noise's kind (the pass-time fit's covariance and scatter are kept until both ran)
    a = wheel.drag
    f = yield from _spin_fit_steps(wheel, passes, laps)
    rss = passes.rss
    if (wheel.learned or wheel.friction_spins) and laps >= LEARN_LAPS:
        wheel.changes *= 1.0 - 1.0 / _CHANGES_N
        if _changed(wheel, passes, f):
            wheel.changes += 1.0
            wheel.forget()
    yield from _learn_noise_kind_steps(wheel, passes, f, rss, a)
    if learn_drag and laps >= 6:
        yield from _learn_drag_steps(wheel, passes, laps)
    a = wheel.drag
    f = yield from _spin_fit_steps(wheel, passes, laps)
    if f is None:
        return False
    last, b, n = f  # speed^2 at the last pass, friction, laps fitted
    if n >= LEARN_LAPS:
        _learn_noise(wheel, passes.rss / (n - 2))
        if b > 0:
            _learn_friction(wheel, b, passes.cov_bb * passes.rss / (n - 2) / (b * b))
    return (yield from _learn_bracket_steps(wheel, passes, a, last, b, n))


def _learn_bracket_steps(wheel, passes, a, last, b, n):
    """v_c lay between the speed^2 at the last pass and the one the next pass would have
    had: that bracket of log v_c joins the recent spins'. False for a fit that does not
    slow down to a stop."""
    v_next = a * last - b  # the speed^2 at the pass that did not come
    if not 0 < v_next < last:
        return False  # a fit that does not slow down to a stop: nothing to learn
    # each end of the bracket widened by WIDEN of its standard error: the highest of
    # noisy lower ends (the lowest of the upper ones) overshoots v_c by about the noise,
    # which set the centre high, the calls a lap early (lapgen at 20 ms: +0.05 in log v_c)
    pass_var = passes.rss / (n - 2)
    low_se = (
        sd(pass_var * (a * a * passes.cov_ww - 2.0 * a * passes.cov_wb + passes.cov_bb)) / v_next
    )
    high_se = sd(pass_var * passes.cov_ww) / last
    if b > 0 and n >= LEARN_LAPS and (n >= B_LAPS or wheel.loss_spins == 0):
        yield from _learn_loss_steps(wheel, passes, last, b, n)
    i = wheel.learned % SPINS
    wheel.low[i] = log(v_next) - WIDEN * low_se
    wheel.high[i] = log(last) + WIDEN * high_se
    wheel.low_se[i] = low_se
    wheel.high_se[i] = high_se
    wheel.learned += 1
    if over():
        yield
    wheel.estimate(min(wheel.learned, SPINS))
    return True


def _learn_noise(wheel, variance):
    """The pass-time variance of whole spins: the first spins' mean, then a running one."""
    k = 1.0 / (wheel.noise_spins + 1) if wheel.noise_spins < 3 else 0.25
    wheel.noise += k * (variance - wheel.noise)
    wheel.noise_spins += 1


def _spin_fit_steps(wheel, passes, laps):
    """(speed^2 at the last pass, friction, laps fitted): the spin just ended, fitted
    with the wheel's drag over its last laps (up to `recent`), or None. Resumable."""
    a = wheel.drag
    f = yield from passes.state_steps(a)
    if f is None:
        return None
    u, b = f
    n = laps if laps < passes.recent else passes.recent
    f = yield from passes.refine_steps(a, (u + a * u - b) / 2, b, n)
    if f is None:
        return None
    return f[0], f[1], n


def _learn_noise_kind_steps(wheel, passes, f, rss_passes, a):
    """Whether the timing noise is on each pass or on each lap: the spin's likelihood
    under each, both fits having three parameters (speed, friction, and the pass times'
    offset or the first pass). The drag is the one the earlier spins left: this spin's
    own would take in much of a lap noise's drift. A drag off the mark bends the pass
    times as a drift does, and may choose the laps' fit too: it is the safer one then
    (lapgen's wheels at 20 ms: pass noise 0-14 spins of 36, lap noise 11-35, and none
    on its fast wheel, whose spins are short). f: the spin's _spin_fit with drag a, rss_passes
    its sum of squares. Resumable."""
    if f is None or f[2] < B_LAPS:
        return
    last, b, n = f
    if rss_passes < NOISE_MIN * n:
        return  # times too exact to tell
    if (yield from passes.refine_steps(a, last, b, n, 0.0, 0.0, 0.0, True)) is None:
        return
    # the n laps, or the n pass times less the last one (whose own error the others
    # share), are equally many and told the same way: their maximum likelihoods compare
    if passes.rss > 0:
        log_ratio = 0.5 * (n * log(rss_passes / passes.rss) + log(n + 1))
        wheel.laps_log_odds = wheel.laps_log_odds * _FORGET_LL + log_ratio


def _changed(wheel, passes, f):
    """Whether the spin just ended was, beyond doubt, on another wheel than the one
    learned (a ball or wheel changed, a file of several wheels): its friction and the
    bracket of its drop speed, likely on wheels in general, unlikely on this one. f: its
    _spin_fit, just made."""
    a = wheel.drag
    if f is None:
        return False
    last, b, n = f
    v_next = a * last - b
    if not (b > 0 and 0 < v_next < last):
        return False
    lo = log(v_next)
    hi = log(last)
    pass_var = passes.rss / (n - 2)  # the pass-time variance, and the bracket's own error
    var_bracket = pass_var * passes.cov_ww / (last * last)
    c, var_c = wheel.belief()
    sd_same = sd(var_c + var_bracket)
    same = cdf((hi - c) / sd_same) - cdf((lo - c) / sd_same)
    sd_new = sqrt(SD_WHEELS * SD_WHEELS + var_bracket)
    new = cdf((hi - wheel.general) / sd_new) - cdf((lo - wheel.general) / sd_new)
    if wheel.friction_spins:
        log_b = log(b)
        err = passes.cov_bb * pass_var / (b * b)
        b0, sd_b = wheel.friction_prior()
        var_same = sd_b * sd_b + err
        d = log_b - log(b0)
        same *= exp(-0.5 * d * d / var_same) / sqrt(var_same)
        var_new = SD_WHEELS * SD_WHEELS + wheel.loss_belief()[1] + err
        d = log_b - log(wheel.friction_for(wheel.general, a))
        new *= exp(-0.5 * d * d / var_new) / sqrt(var_new)
    p = wheel.p_same_wheel()
    return p * same < _CHANGED * (1.0 - p) * new


def _learn_friction(wheel, b, err):
    """The friction b of this wheel's spins: its log mean, each spin weighed by how
    sharply it told it (err: its fit's variance of log b), so that short noisy spins move
    it little and the mean's own error is known; and the spin-to-spin variance."""
    log_b = log(b)
    w = 1.0 / (wheel.friction_variation() + err)
    if wheel.friction_spins == 0:
        wheel.friction_log = log_b
        wheel.friction_weight = w
    else:
        d = log_b - wheel.friction_log
        n = wheel.friction_spins
        k = 1.0 / (n + 1) if n < 7 else 0.125
        # d scatters by the variation, this fit's error and the mean's own
        wheel.friction_var += k * (d * d - err - 1.0 / wheel.friction_weight - wheel.friction_var)
        if wheel.friction_var < 0:
            wheel.friction_var = 0.0
        wheel.friction_weight *= _FORGET_B  # a wheel drifts: earlier spins count a little less
        wheel.friction_log += d * w / (wheel.friction_weight + w)
        wheel.friction_weight += w
    wheel.friction_spins += 1


def _learn_loss_steps(wheel, passes, last, b, n):
    """r, the share of v_c a lap from v_c would lose, as a spin on a wheel of its own
    (rmcfw.rnvp_readings) tells it: its drag fitted too, from what wheels in general have.
    v_c lay in (v_next, last], so r in [g + b/last, g + b/v_next). The middle, less the bracket's
    (uniform) and the fit's own variance, leaves the spin-to-spin variation."""
    pass_var = passes.rss / (n - 2)
    if pass_var < NOISE_MIN:
        pass_var = NOISE_MIN
    f = yield from passes.refine_steps(A_NEW, last, b, n, 0.0, 0.0, pass_var / (SD_A * SD_A))
    if f is None:
        return
    last, b = f
    a = passes.drag_fit
    g = 1.0 - a
    v_next = a * last - b
    if not (b > 0 and 0 < v_next < last):
        return
    lo = log(g + b / last)
    hi = log(g + b / v_next)
    d = (lo + hi) / 2 - wheel.loss_log
    slope = b / (g * v_next + b)  # d log r / d log b, about
    err = (
        slope * slope * passes.cov_bb * passes.rss / (n - 2) / (b * b) + (hi - lo) * (hi - lo) / 12
    )
    k = wheel.loss_spins if wheel.loss_spins < _LOSS_SPINS else _LOSS_SPINS
    wheel.loss_log += d / (k + 2)  # the prior weighs as one spin
    wheel.loss_var += (d * d - err - wheel.loss_var) / (k + 1)
    if wheel.loss_var < 0:
        wheel.loss_var = 0.0
    wheel.loss_spins += 1


def _learn_drag_steps(wheel, passes, laps):
    """Drag: fitted with the friction to the whole spin's pass times (the lap times, as
    differences of noisy passes, would bias it), and weighed by how sharply the spin
    tells it, so that short noisy spins move it little."""
    a = wheel.drag
    f = yield from passes.state_steps(a, laps, 1.0)
    if f is None:
        return
    u, b = f
    n = laps if laps < PASSES - 1 else PASSES - 1
    if (yield from passes.refine_steps(a, (u + a * u - b) / 2, b, n, 0.0, 0.0, 1e-12)) is None:
        return
    pass_var = passes.rss / (n - 3)  # the pass-time variance of this spin
    if pass_var < 1e-12:
        pass_var = 1e-12
    var = pass_var * passes.cov_aa
    if not var > 0:
        return
    a_spin = passes.drag_fit
    if a_spin > 1.0 + 5 * var**0.5 or a_spin < A_MIN:
        return  # a fit that makes no physical sense: nothing learned
    prec = 1.0 / var
    # what earlier spins said counts a little less each spin (a wheel drifts)
    wheel.drag_precision *= _FORGET
    wheel.drag = (wheel.drag_precision * wheel.drag + prec * a_spin) / (wheel.drag_precision + prec)
    wheel.drag_precision += prec
    wheel.drag_spins += 1
    if wheel.drag > 1.0:
        wheel.drag = 1.0
    elif wheel.drag < A_MIN:
        wheel.drag = A_MIN
