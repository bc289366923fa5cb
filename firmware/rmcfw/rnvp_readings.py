# Readings of a spin for a call counted to the last pass: the spin is on the wheel learned, or
# on another one. Each reading is a fit of this spin's passes with its own prior, a belief of
# where the ball leaves, and a weight. docs/firmware.md, "Deciding the call".
from math import exp, log, sqrt

from micropython import const

from rmcfw.rnvp_learn import B_LAPS, NOISE_MIN
from rmcfw.rnvp_maths import cdf, quad, sd
from rmcfw.rnvp_slices import run
from rmcfw.rnvp_wheel import A_NEW, SD_A, SD_WHEELS

_NOISE_DOF = 6  # the noise seen in whole spins weighs as that many laps of this one
# A fit (fit()): a tuple, read by these indices
FIT_W = const(0)  # the speed^2 at the current pass
FIT_B = const(1)  # the friction
FIT_A = const(2)  # the drag
FIT_NOISE = const(3)  # the pass-time (or lap-time) variance
FIT_COV = const(4)  # 4-9: the covariance factors ww, wb, bb, wa, ba, aa (times the noise)
FIT_SEEN = const(10)  # the ball was seen slowing


class Reading:
    """One reading of the spin, and where it stands as it is followed pass by pass ahead:
    the speed^2 v at the pass, its gradient (grad_w, grad_b, grad_a) by the fit's (w, b, a), the
    probability that the pass is reached, and that of the current pass (given the spin)."""

    def __init__(self, fit, centre, own, variance, weight):
        self.fit = fit
        self.centre = centre  # log v_c (or, on a wheel of its own, log r): centre...
        self.own = own  # a wheel of its own: the ball leaves by the loss r, not by v_c
        self.variance = variance  # ... and variance
        self.weight = weight
        self.v = fit[FIT_W]
        self.grad_w = 1.0
        self.grad_b = 0.0
        self.grad_a = 0.0
        self.reached = 1.0
        self.current = 1.0

    def alive(self, v, grad_w, grad_b, grad_a):
        """That a pass of speed^2 v, of gradient (grad_w, grad_b, grad_a), comes: with log v_c
        normal, P(v_c < v); or on a wheel of its own, P(r > the share of v the lap after it
        would lose) for log r normal."""
        f = self.fit
        if not self.own:
            var = f[FIT_NOISE] * quad(grad_w / v, grad_b / v, grad_a / v, *f[FIT_COV:FIT_SEEN])
            return cdf((log(v) - self.centre) / sd(self.variance + var))
        b = f[FIT_B]
        q = b / v + 1.0 - f[FIT_A]
        if q <= 0:
            return 1.0  # a ball gaining speed
        h = b / (v * v)
        grad_w = (-h * grad_w) / q  # the gradient of log q
        grad_b = (1.0 / v - h * grad_b) / q
        grad_a = (-h * grad_a - 1.0) / q
        var = f[FIT_NOISE] * quad(grad_w, grad_b, grad_a, *f[FIT_COV:FIT_SEEN])
        return cdf((self.centre - log(q)) / sd(self.variance + var))


def weigh(readings):
    """The current pass came: the readings weighed by how well they expected it (weights
    summing to 1). Returns the likeliest, whose pass times the call follows."""
    total = 0.0
    for h in readings:
        p = h.alive(h.v, 1.0, 0.0, 0.0)
        h.current = p if p > 1e-9 else 1e-9
        h.weight *= h.current
        total += h.weight
    likeliest = readings[0]
    for h in readings:
        h.weight /= total
        if h.weight > likeliest.weight:
            likeliest = h
    return likeliest


def readings(wheel, passes, u, k, noise_prior):
    """readings_steps() run to its end."""
    return run(readings_steps(wheel, passes, u, k, noise_prior))


def readings_steps(wheel, passes, u, k, noise_prior):
    """The readings of the spin, or an empty list. Resumable (rmcfw.rnvp_slices):
    checkpoints in each fit.

    Two readings: it is on the wheel learned (its drop speed and friction as the earlier
    spins had them), or on another one (a ball or wheel changed, a file of several
    wheels): the ball then leaves where a lap would lose a share r of its speed^2 that
    wheels share (DESIGN.md: last laps some 15 % longer than the one before), or, while
    this spin shows no friction of its own, at a drop speed as wheels in general have.
    This spin's slowing weighs them against each other. u: the last lap's mean speed^2,
    k: the laps fitted, noise_prior: the timing noise expected."""
    a = wheel.drag
    noise_floor = noise_prior if noise_prior > NOISE_MIN else NOISE_MIN
    # a wheel whose drag no spin has shown yet: fitted too
    lam_a = 0.0 if wheel.drag_spins else noise_floor * wheel.drag_precision
    loss_centre, loss_var = wheel.loss_belief()
    var_b_any = SD_WHEELS * SD_WHEELS + loss_var  # log b across wheels
    # another wheel: its own drag fitted too, from what wheels in general have
    b_any = wheel.friction_for(wheel.general, A_NEW)
    # (a few noisy laps may hide a slowing: then the friction they leave possible)
    lam_a_any = noise_floor / (SD_A * SD_A)
    few = k < B_LAPS
    fit_any = yield from fit_steps(
        passes, wheel.lap_noise, A_NEW, u, k, noise_prior, b_any, var_b_any, lam_a_any, few
    )
    seen = fit_any is not None and fit_any[FIT_SEEN] and fit_any[FIT_B] > 0
    fit_own = fit_any if seen else None
    p = wheel.p_same_wheel() if wheel.has_prior or wheel.learned else 0.0
    out = []
    if p > 0:
        b0, sd_log_b = wheel.friction_prior()
        fit_learned = yield from fit_steps(
            passes, wheel.lap_noise, a, u, k, noise_prior, b0, sd_log_b * sd_log_b, lam_a
        )
        if fit_learned is not None:
            c, var_c = wheel.belief()
            out.append(Reading(fit_learned, c, False, var_c, p))
            if fit_own is not None:
                p = _p_learned(wheel, fit_own, b0, sd_log_b, b_any, var_b_any, p)
                out[0].weight = p
    if fit_own is not None:
        out.append(Reading(fit_own, loss_centre, True, loss_var, 1.0 - p))
    elif p < 1.0 and fit_any is not None and fit_any[FIT_B] > 0:
        out.append(Reading(fit_any, wheel.general, False, SD_WHEELS * SD_WHEELS, 1.0 - p))
    return out


def _p_learned(wheel, fit_own, b0, sd_log_b, b_any, var_b_any, p):
    """The probability that the spin is on the wheel learned, p before its laps, by how
    likely this spin's slowing (fit_own: the speed^2 a lap loses now, drag and friction, which
    the laps tell better than either) is on the learned wheel (friction b0, sd_log_b of its
    log), and on any wheel (b_any, var_b_any)."""
    v = fit_own[FIT_W]
    g = 1.0 - fit_own[FIT_A]
    lost = g * v + fit_own[FIT_B]
    var_lost = fit_own[FIT_NOISE] * quad(g, 1.0, -v, *fit_own[FIT_COV:FIT_SEEN]) / (lost * lost)
    lost_learned = (1.0 - wheel.drag) * v + b0
    d_learned = log(lost / lost_learned)
    var_learned = sd_log_b * sd_log_b * b0 * b0 / (lost_learned * lost_learned) + var_lost
    d_any = log(lost / b_any)
    var_any = var_b_any + var_lost
    like_learned = p * exp(-0.5 * d_learned * d_learned / var_learned) / sqrt(var_learned)
    like_any = (1.0 - p) * exp(-0.5 * d_any * d_any / var_any) / sqrt(var_any)
    return like_learned / (like_learned + like_any)


def fit(passes, lap_noise, a, u, k, noise_prior, b0, var_log_b, lam_a, unseen=False):
    """fit_steps() run to its end."""
    return run(fit_steps(passes, lap_noise, a, u, k, noise_prior, b0, var_log_b, lam_a, unseen))


def fit_steps(passes, lap_noise, a, u, k, noise_prior, b0, var_log_b, lam_a, unseen=False):
    """The pass times fitted with a prior b0 on the friction (log variance var_log_b), as a
    tuple read by the FIT_ indices, or None for a ball not seen slowing; with unseen, then
    the friction it may have unseen (two standard errors over the fit) and FIT_SEEN False.
    lap_noise: the noise is on each lap, the lap times are fitted. Resumable (checkpoints
    in the fit)."""
    if lap_noise:  # a lap's variance: twice a pass's (noise_prior comes from pass-time fits)
        noise_prior *= 2.0
        lam_a *= 2.0
    noise_floor = noise_prior if noise_prior > NOISE_MIN else NOISE_MIN
    lam = noise_floor / (var_log_b * b0 * b0)
    f = yield from passes.refine_steps(a, (u + a * u - b0) / 2, b0, k, b0, lam, lam_a, lap_noise)
    if f is None:
        return None
    v, b = f
    # a few laps' scatter is itself scattered: pooled with whole spins' noise, or before
    # any spin with hand-clocked laps' (DESIGN.md: tens of ms)
    dof = k - 2 if lam_a == 0 else k - 3  # pass (or lap) times less parameters fitted
    noise = (passes.rss + _NOISE_DOF * noise_prior) / (dof + _NOISE_DOF)
    # the speed^2 lost per lap: a ball not seen slowing gets no prediction
    a_fit = passes.drag_fit
    g = 1.0 - a_fit
    slow = g * v + b
    cov = (passes.cov_ww, passes.cov_wb, passes.cov_bb, passes.cov_wa, passes.cov_ba, passes.cov_aa)
    var = noise * quad(g, 1.0, -v, *cov)
    if slow <= 0 or slow * slow < 4.0 * var:
        if not unseen:
            return None
        b += 2.0 * sqrt(var) - slow
        return (v, b, a_fit, noise) + cov + (False,)
    return (v, b, a_fit, noise) + cov + (True,)
