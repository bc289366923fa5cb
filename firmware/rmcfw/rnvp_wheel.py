# What the predictor knows of the wheel, learned spin after spin (rmcfw.rnvp_learn), and what
# that knowledge says of a new spin: the drop speed v_c, the ball's drag, the rim's friction,
# the timing noise and its kind; and that knowledge as plain data for the power-safe state
# (rmcfw.store), and back. docs/firmware.md, "Learning the wheel", gives the maths.
from array import array
from math import exp, log, sqrt

from micropython import const

SPINS = const(16)  # spins remembered to learn the drop speed
_PRIOR = const(4)  # weight of the wheel's prior, in spins
A_MIN = 0.8  # bounds of the per-lap drag factor: keeps a noisy fit physical
A_NEW = 1.0  # drag factor per lap before any spin: none known (DESIGN.md wheels: 0.95-1)
SD_A = 0.03  # ... and its standard deviation
WIDEN = 0.5  # a spin's bracket of v_c, widened by this many standard errors of its ends
# ... and for the centre alone by this many: the highest of 16 noisy lower ends overshoots by
# about 1.8 of their errors (the lowest upper end too, less, its errors being smaller), which
# set the centre high; the spread keeps WIDEN, as wider brackets hide a changed wheel
_WIDEN_C = 2.0
_FRICTION_VAR_MIN = 0.0025  # (5 %)^2: the friction varies at least that much between spins
SD_WHEELS = 0.6  # log v_c across wheels (last laps of 0.6-2 s)
# the friction per lap over the drop speed^2 that a last lap some 15 % longer than the one
# before implies (DESIGN.md: b/v at the last pass 0.38, so 0.38-0.6 of v_c; the simulator's
# wheels 0.44), and the spread allowed around it before a spin has shown this wheel's
B_OVER_VC = 0.45
_SD_B_NEW = 0.35
# ... and the spread of the loss r (rmcfw.rnvp_readings) before any spin: wider, for a spin on
# a wheel of its own (the simulator's wheels of other drop speeds have last laps 5-33 % longer)
SD_R_NEW = 0.6
_CHANGES = 0.0001  # share of spins on another wheel than the one learned, none seen lately
# The timing noise's kind: on each pass or on each lap (rmcfw.rnvp_learn); the passes' kind
# is assumed until the spins say otherwise.
LAPS_LOG_ODDS = -4.0


class Wheel:
    """The wheel learned: its drop speed (the brackets of log v_c that past spins left, their
    centre and spread, the wheel's prior), the ball's drag, the rim's friction, the loss r
    that wheels share, the timing noise, and how often wheels changed.

    margin: log margin on v_c for a pass call (errs early, not late); young: the extra
    margin without a prior, divided by the spins learned + 1."""

    def __init__(self, last_lap_s=1.1, margin=0.02):
        self.margin = margin
        self.young = 0.5
        self.noise = 0.0  # pass-time variance (s^2) seen in whole spins
        self.noise_spins = 0  # spins it was learned from
        self.drag = A_NEW  # the ball's drag factor per lap, a
        self.drag_precision = 1.0 / (SD_A * SD_A)
        self.drag_spins = 0  # spins it was learned from
        self.learned = 0  # spins learned from
        # log of the friction b of this wheel's spins: mean, spin-to-spin variance,
        # precision of the mean (the spins' weights), spins
        self.friction_log = 0.0
        self.friction_var = 0.0
        self.friction_weight = 0.0
        self.friction_spins = 0
        # log of the loss r, shared by wheels: mean, variance, spins
        self.loss_log = log(B_OVER_VC)
        self.loss_var = 0.0
        self.loss_spins = 0
        self.changes = 0.0  # wheel changes seen over the last spins (rmcfw.rnvp_learn)
        self.laps_log_odds = LAPS_LOG_ODDS  # the noise is on each lap rather than each pass
        self.wheels = 1  # wheels learned since power-up (1 + the changes seen)
        # recent spins: log v_c was above low and at or below high, each end's standard error
        self.low = array("f", bytes(4 * SPINS))
        self.high = array("f", bytes(4 * SPINS))
        self.low_se = array("f", bytes(4 * SPINS))
        self.high_se = array("f", bytes(4 * SPINS))
        # log v_c of wheels in general: DESIGN.md's median wheel has a last lap of 1.1 s, and
        # drops some 7 % slower
        self.general = -2.0 * log(1.07 * last_lap_s)
        self.prior = 0.0  # log v_c of the wheel's prior, when there is one
        self.has_prior = False
        self.drop_prior_s = -1.0
        self.centre = self.spread = self.open = self.cross = 0.0

    def set_prior(self, drop_s):
        """The wheel's ball period at the drop (s) from its geometry; 0: unknown."""
        if drop_s == self.drop_prior_s:
            return
        self.drop_prior_s = drop_s
        self.has_prior = drop_s > 0
        if self.has_prior:
            self.prior = -2.0 * log(drop_s)
        else:
            self.prior = self.general  # wheels in general (young margin on top)
        self.estimate(min(self.learned, SPINS))

    def forget(self):
        """Start learning a new wheel: its drop speed, friction and drag. The timing noise
        (the clocking's) and the loss r (shared by wheels) stay."""
        self.wheels += 1
        self.learned = 0
        self.friction_spins = 0
        self.friction_log = self.friction_var = self.friction_weight = 0.0
        self.drag = A_NEW
        self.drag_precision = 1.0 / (SD_A * SD_A)
        self.drag_spins = 0
        self.estimate(0)

    @property
    def lap_noise(self):
        """The spins say the timing noise is on each lap: a pass call fits the lap times."""
        return self.laps_log_odds > 0

    @property
    def u_c(self):
        """The drop speed^2 (rev/s)^2 a pass call takes: the centre plus the margins."""
        return exp(self.centre + self._margin())

    def _margin(self):
        m = self.spread if self.spread > self.margin else self.margin
        if not self.has_prior:
            m += self.young / (self.learned + 1)
        return m

    def last_lap_s(self):
        """The learned drop speed as a period (s)."""
        return exp(-0.5 * self.centre)

    def estimate(self, n):
        """Centre and spread of log v_c from the last n spins' brackets (low, high].

        On a steady wheel the highest low and the lowest high close in on v_c from both
        sides; where v_c varies from spin to spin they cross, by about that variation. Their
        middle is the centre either way (taken with each end widened by _WIDEN_C of its
        error, so that one noisy end does not set it), half their distance the spread. The
        prior counts as _PRIOR spins at the centre."""
        if n == 0:
            self.centre = self.prior
            self.spread = 0.0  # log half-width of what the brackets leave open
            self.open = self.cross = 0.0
            return
        # the highest low and lowest high; for the centre, those of the brackets widened
        # further (_WIDEN_C)
        k = _WIDEN_C - WIDEN
        top = top_c = bottom = bottom_c = 0.0
        for i in range(n):
            lo = self.low[i]
            hi = self.high[i]
            lo_c = lo - k * self.low_se[i]
            hi_c = hi + k * self.high_se[i]
            if i == 0 or lo > top:
                top = lo
            if i == 0 or hi < bottom:
                bottom = hi
            if i == 0 or lo_c > top_c:
                top_c = lo_c
            if i == 0 or hi_c < bottom_c:
                bottom_c = hi_c
        c = (top_c + bottom_c) / 2
        # what the brackets leave open (steady wheel), or how far they cross (varying one)
        open_ = (bottom - top) / 2 if bottom > top else 0.0
        cross = (top - bottom) / 2 if top > bottom else 0.0
        if self.has_prior:
            # the prior and the bracket's middle agree within what the bracket leaves open
            w = _PRIOR / (_PRIOR + n)
            c = w * self.prior + (1 - w) * c
            open_ = 0.0
        self.centre = c
        self.open = open_
        self.cross = cross
        self.spread = open_ + cross

    def sigma_c(self):
        """Standard deviation of log v_c by the table's margins: the spin-to-spin variation
        (or what the brackets leave open), plus, with no prior, the youth of the learning."""
        m = self.spread if self.spread > self.margin else self.margin
        if not self.has_prior:
            youth = self.young / (self.learned + 1)
            return sqrt(m * m + youth * youth)
        return m

    def belief(self):
        """(centre, variance) of log v_c for a pass call.

        With the wheel's prior: as learned (the prior weighs as _PRIOR spins). Without: what
        the brackets leave open (taken as uniform), weighed against what DESIGN.md says of
        wheels in general (a last lap of 0.6-2 s); then the spin-to-spin variation on top."""
        if self.has_prior:
            m = self.spread if self.spread > self.margin else self.margin
            return self.centre, m * m
        width = self.cross if self.cross > self.margin else self.margin
        p = 1.0 / (SD_WHEELS * SD_WHEELS)
        p_centre = p * self.general
        if self.learned:
            sd_open = self.open / 1.7320508 + 0.005  # the sd of a uniform over +-open
            p += 1.0 / (sd_open * sd_open)
            p_centre += self.centre / (sd_open * sd_open)
        return p_centre / p, 1.0 / p + width * width

    def p_same_wheel(self):
        """The probability that a spin is on the wheel learned, before its laps are seen:
        high on a table, lower where wheels were seen to change lately, the more so while
        the one learned has few spins."""
        spins = self.learned + 1
        r = _CHANGES + self.changes / (spins * spins)
        return 1.0 - (r if r < 0.5 else 0.5)

    def friction_prior(self):
        """(b0, sd of log b): the friction this wheel's spins had; before any, what the
        drop speed and DESIGN.md's last lap some 15 % longer than the one before give."""
        if self.friction_spins == 0:
            sd_c = self.sigma_c()
            var_r = self.loss_belief()[1] if self.loss_spins else _SD_B_NEW * _SD_B_NEW
            return self.friction_for(self.centre, self.drag), sqrt(var_r + sd_c * sd_c)
        return exp(self.friction_log), sqrt(self.friction_variation() + 1.0 / self.friction_weight)

    def friction_variation(self):
        """The spin-to-spin variance of log b, at least _FRICTION_VAR_MIN."""
        v = self.friction_var
        return v if v > _FRICTION_VAR_MIN else _FRICTION_VAR_MIN

    def loss_belief(self):
        """(centre, variance) of log r, r the share of its speed^2 a ball at the drop speed
        would lose over a lap (drag and friction: 1 - a + b/v_c), for a spin of any wheel:
        what spins showed, after DESIGN.md's last laps some 15 % longer than the one before
        (B_OVER_VC)."""
        if self.loss_spins == 0:
            return self.loss_log, SD_R_NEW * SD_R_NEW
        v = self.loss_var if self.loss_var > _FRICTION_VAR_MIN else _FRICTION_VAR_MIN
        # the prior's variance weighs as one spin, the mean's own error on top
        n = self.loss_spins + 1
        return self.loss_log, (SD_R_NEW * SD_R_NEW + n * v) / n

    def friction_for(self, c, a):
        """The friction a ball of drop speed^2 exp(c) and drag a would have, by r."""
        r = exp(self.loss_log) - 1.0 + a
        return exp(c) * (r if r > 0.05 else 0.05)


# --- the wheel learned as plain data, for the power-safe state (rmcfw.store), and back ---


def export(wheel):
    """The Wheel's learning as plain data. The keys are the saved state's: kept as they
    are, so that a board's saved state survives an update."""
    n = min(wheel.learned, SPINS)
    return {
        "a": wheel.drag,
        "n": wheel.learned,
        "lo": [wheel.low[i] for i in range(n)],
        "hi": [wheel.high[i] for i in range(n)],
        "se": [[wheel.low_se[i] for i in range(n)], [wheel.high_se[i] for i in range(n)]],
        "drag": [wheel.drag_precision, wheel.drag_spins],
        # friction: log mean, variance, spins, precision
        "b": [wheel.friction_log, wheel.friction_var, wheel.friction_spins, wheel.friction_weight],
        "noise": [wheel.noise, wheel.noise_spins],  # pass-time variance (s^2), spins
        "r": [wheel.loss_log, wheel.loss_var, wheel.loss_spins],  # log r: mean, variance, spins
        "changes": wheel.changes,  # wheel changes seen lately
        "laps_ll": wheel.laps_log_odds,  # the timing noise's kind: on each lap, not each pass
    }


def restore(wheel, data):
    """Back to what export() gave; ignores data that does not fit (older formats too: what
    they lack starts afresh). False when nothing was restored."""
    try:
        values = _read(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    if values is None or not _sound(values):
        return False
    lo, hi, se_lo, se_hi = values[0:4]
    for i in range(len(lo)):
        wheel.low[i] = lo[i]
        wheel.high[i] = hi[i]
        wheel.low_se[i] = se_lo[i]
        wheel.high_se[i] = se_hi[i]
    (wheel.drag, wheel.learned, wheel.drag_precision, wheel.drag_spins) = values[4:8]
    (wheel.friction_log, wheel.friction_var, wheel.friction_spins) = values[8:11]
    weight = values[11]  # older formats: from the spins' count
    wheel.friction_weight = (
        weight if weight > 0 else wheel.friction_spins / wheel.friction_variation()
    )
    (wheel.noise, wheel.noise_spins, wheel.loss_log, wheel.loss_var, wheel.loss_spins) = (
        values[12:17]
    )  # fmt: skip
    (wheel.changes, wheel.laps_log_odds) = values[17:19]
    wheel.estimate(min(wheel.learned, SPINS))
    return True


def _read(data):
    """The saved values in restore()'s order, converted, or None for a bad shape."""
    lo = data["lo"]
    hi = data["hi"]
    if len(lo) > SPINS or len(hi) != len(lo):
        return None
    a = float(data["a"])
    n = int(data["n"])
    drag_precision, drag_spins = data.get("drag", (1.0 / (SD_A * SD_A), 0))
    friction = data.get("b", (0.0, 0.0, 0))
    friction_log, friction_var, friction_spins = friction[:3]
    friction_weight = float(friction[3]) if len(friction) > 3 else 0.0
    noise, noise_spins = data.get("noise", (0.0, 0))
    loss_log, loss_var, loss_spins = data.get("r", (log(B_OVER_VC), 0.0, 0))
    changes = float(data.get("changes", 0.0))
    laps_ll = float(data.get("laps_ll", LAPS_LOG_ODDS))
    # the brackets' standard errors (older formats: none, the centre as the brackets say)
    se_lo, se_hi = data.get("se", ((0.0,) * len(lo), (0.0,) * len(lo)))
    if len(se_lo) != len(lo) or len(se_hi) != len(lo):
        return None
    se_lo = [float(x) for x in se_lo]
    se_hi = [float(x) for x in se_hi]
    return (
        lo, hi, se_lo, se_hi, a, n, float(drag_precision), int(drag_spins),
        float(friction_log), float(friction_var), int(friction_spins), friction_weight,
        float(noise), int(noise_spins), float(loss_log), float(loss_var), int(loss_spins),
        changes, laps_ll,
    )  # fmt: skip


def _sound(values):
    """The values read are within their bounds."""
    (
        se_lo, se_hi, a, n, drag_precision, drag_spins, friction_log, friction_var,
        friction_spins, friction_weight, noise, noise_spins, loss_log, loss_var, loss_spins,
        changes,
    ) = values[2:18]  # fmt: skip
    if not (
        A_MIN <= a <= 1.0
        and n >= 0
        and 0 < drag_precision < 1e30
        and friction_var >= 0
        and noise >= 0
    ):
        return False
    if (
        drag_spins < 0
        or friction_spins < 0
        or noise_spins < 0
        or not -20 < friction_log < 20
        or not 0 <= friction_weight < 1e30
    ):
        return False
    if loss_spins < 0 or loss_var < 0 or not -20 < loss_log < 20 or not 0 <= changes < 1e6:
        return False
    if not -1e6 < values[18] < 1e6:
        return False
    for x in se_lo + se_hi:
        if not 0 <= x < 10:
            return False
    return True
