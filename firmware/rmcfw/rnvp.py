# "Rien ne va plus": when will the ball leave the track, and when to call it.
#
# Physics (DESIGN.md): on the track dW/dt = -alpha*W^2 - beta. With v = W^2 and the angle,
# dv/dtheta = -2*alpha*v - 2*beta is linear, so the speed^2 at successive passes, in (rev/s)^2,
# follows v_(n+1) = a*v_n - b exactly, and so do the lap means u_n = (1/T_n)^2: a =
# exp(-4*pi*alpha) is the air drag of the ball (learned over whole spins, where the long
# baseline beats the timing noise), b the rim friction of this spin (fitted on its last laps).
#
# The ball leaves the rim when its speed falls below a critical speed set by the wheel's track
# (R*W^2 < g*tan(drop angle), wheel.json geometry.drop_angle_deg): v_c = 1/T_c^2, T_c the
# ball's period at the drop. It varies a few % from spin to spin and drifts slowly; wheels
# differ a lot. So v_c starts from the wheel's prior (drop_s) when the board has one, and is
# learned from every spin: after a drop, v_c lay between the speed^2 at the last pass and the
# one the next pass would have had; the recent spins' brackets give a centre and a spread.
#
# The call comes `lead` seconds (or revolutions) before the predicted drop (to_drop: the
# instant the ball leaves the rim, which the table sees) or last pass (lap data only show
# passes), or as soon as a lap has lasted longer than the safety limit, whichever is first.
#
# A call counted to the last pass (`rmc rnvp`) weighs its doubt (_decide): each pass ahead
# gets the probability that it is the last, from v_c's spread and the fit's error; the call
# comes late after a pass with at most _RISK probability, and within that bound where it is
# most likely within +-0.5 s of the lead. When the next pass may or may not be the last, a
# call just before it is within for the pass after it (laps up to ~1.4 s): the doubt then
# costs little. Short or noisy series borrow the friction b, the drag a and the timing noise
# of the wheel's earlier spins as priors, each weighed by how well those spins told it.
# Whole spins also tell whether the timing noise is on each pass (sensors, video frames) or on
# each lap (laps clocked one by one): a pass call then fits the pass times, or the lap times.
from array import array
from math import exp, log, sqrt

try:
    from math import erf
except ImportError:  # a port built without the special functions

    def erf(x):
        # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
        y = x if x >= 0 else -x
        t = 1.0 / (1.0 + 0.3275911 * y)
        p = t * (
            0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
        )
        y = 1.0 - p * exp(-y * y)
        return y if x >= 0 else -y


from micropython import const

from rmcfw import ticks

_PASSES = const(64)  # pass times kept per spin (a spin has 10-25 laps)
_MAX_AHEAD = const(60)  # laps predicted at most (a ball hardly slowing: no prediction)
_SPINS = const(16)  # spins remembered to learn the drop speed
_PRIOR = const(4)  # weight of the wheel's prior, in spins
_FEW_LAPS = const(4)  # fewer laps tell little of the slowing: used only near the drop
_A_MIN = 0.8  # bounds of the per-lap drag factor: keeps a noisy fit physical
MIN_LAPS = const(4)  # a spin of fewer laps is void: its last pass is at least the 4th
_A_NEW = 1.0  # drag factor per lap before any spin: none known (DESIGN.md wheels: 0.95-1)
_SD_A = 0.03  # ... and its standard deviation
_FORGET = 0.9  # per spin, the weight left to what earlier spins said of the drag
_RISK = 0.001  # a pass call may miss a last pass this likely (a late call)
_GUARD = 0.02  # s: a call bounded by a pass comes at least this much before it
_OFFSETS = (0.0, -0.4, -0.2, 0.2, 0.4)  # s: calls tried around each pass's lead
_WIDEN = 0.5  # a spin's bracket of v_c, widened by this many standard errors of its ends
# ... and for the centre alone by this many: the highest of 16 noisy lower ends overshoots by
# about 1.8 of their errors (the lowest upper end too, less, its errors being smaller), which
# set the centre high; the spread keeps _WIDEN, as wider brackets hide a changed wheel
_WIDEN_C = 2.0
_NOISE_MIN = 1e-5  # s^2: pass-time variance assumed at least (3 ms), for the friction's prior
_NOISE_NEW = 1e-4  # s^2: (10 ms)^2, the timing noise assumed before any spin
_LEARN_LAPS = const(4)  # a spin of that many laps teaches the timing noise...
_B_LAPS = const(6)  # ... and of that many the friction
_NOISE_DOF = 6  # the noise seen in whole spins weighs as that many laps of this one
_LB_VAR_MIN = 0.0025  # (5 %)^2: the friction varies at least that much from spin to spin
_FORGET_B = 0.875  # per spin, the weight left to what earlier spins said of the friction
_SD_WHEELS = 0.6  # log v_c across wheels (last laps of 0.6-2 s)
# the friction per lap over the drop speed^2 that a last lap some 15 % longer than the one
# before implies (DESIGN.md: b/v at the last pass 0.38, so 0.38-0.6 of v_c; the simulator's
# wheels 0.44), and the spread allowed around it before a spin has shown this wheel's
_B_OVER_VC = 0.45
_SD_B_NEW = 0.35
# ... and the spread of r (_pass_call) before any spin: wider, for a spin on a wheel of its
# own (the simulator's wheels of other drop speeds have last laps 5-33 % longer)
_SD_R_NEW = 0.6
_R_LAPS = const(32)  # r is learned over about that many spins
_CHANGES = 0.0001  # share of spins on another wheel than the one learned, none seen lately
_CHANGES_N = 16  # the changes seen are counted over about that many spins
# a spin was on another wheel when its whole laps make the learned one this unlikely
_CHANGED = 0.01
# The timing noise's kind: an error on each pass time (sensors, video frames: a lap shares its
# errors with its neighbours), or on each lap (laps clocked one by one), where a fit of the pass
# times claims some 3 times too little variance. Whole spins tell which by the likelihood of
# their laps under each (log ratio, laps over passes), summed over the last spins; the passes'
# kind is assumed until the spins say otherwise.
_LAPS_LL = -4.0
_FORGET_LL = 0.9
WHY_FIT = "fit"
WHY_LIMIT = "limit"


class Predictor:
    """One per table. reset() at the first pass of a spin, lap() at every later pass.

    After each pass, `deadline` (us, on the ticks clock) is when to call unless another pass
    comes first; due(now) says whether it has come, `why` how it was set. `drop_s` is the
    predicted last pass (or, with to_drop, the instant the ball leaves the rim), s from the
    first pass, None while there is none.

    drop_s (constructor): the wheel's ball period at the drop (s), 0 when unknown: then the
    first spins are called early, with a margin that shrinks as spins are learned.
    A spin whose ball leaves before its 4th pass is void (decree: fewer than 4 revolutions):
    no call is placed for it.
    """

    def __init__(
        self,
        lead_s=1.0,
        lead_revs=0,
        limit_s=1.4,
        drop_s=0.0,
        to_drop=False,
        margin=0.02,
        last_lap_s=1.1,
    ):
        self.lead_s = lead_s
        self.lead_revs = lead_revs  # > 0: lead counted in revolutions instead of seconds
        self.limit_s = limit_s
        self.limit_set = False  # limit_s set by hand (SET limit_ms): kept as it is
        self.to_drop = to_drop
        self.margin = margin  # log margin on v_c for a pass call: errs early, not late
        self.young = 0.5  # extra margin without a prior, divided by the spins learned + 1
        self.recent = 20  # laps in the fit of the current spin (the model holds that long)
        self.weight = 1.0  # weight of a lap relative to the next one
        self.learn_drag = True
        self.z = 1.5  # a pass is predicted when z standard errors of the fit above v_c
        self.noise = 0.0  # pass-time variance (s^2) seen in whole spins
        self._rss = 0.0
        self._cww = self._cwb = self._cbb = 0.0
        self._cwa = self._cba = self._caa = 0.0
        self._m = [0.0] * 16  # the normal matrix of a fit, then its inverse
        self.a_fit = 1.0
        self.prior = 0.0  # log v_c of the wheel's prior, when there is one
        self.a = _A_NEW
        self._pa = 1.0 / (_SD_A * _SD_A)  # precision of a
        self.drag_spins = 0  # spins it was learned from
        self.learned = 0  # spins learned from
        self.lb = 0.0  # log of the friction b of this wheel's spins: mean, variance, count
        self.lbv = 0.0
        self.lbw = 0.0  # precision of lb (the spins' weights)
        self.nb = 0
        self.nn = 0  # spins the timing noise was learned from
        self.lr = log(_B_OVER_VC)  # log r (_pass_call), shared by wheels: mean, variance,
        self.lrv = 0.0
        self.nr = 0  # spins
        self.changes = 0.0  # wheel changes seen over the last _CHANGES_N spins or so
        self.laps_ll = _LAPS_LL  # the noise is on each lap rather than each pass: log ratio
        self.wheels = 1  # wheels learned since power-up (1 + the changes seen)
        self._t = array("f", bytes(4 * _PASSES))  # pass times, s from the first pass
        self._tp = array("f", bytes(4 * _MAX_AHEAD))  # passes ahead: time (s from first),
        self._st = array("f", bytes(4 * _MAX_AHEAD))  # its standard error (s),
        self._pl = array("f", bytes(4 * _MAX_AHEAD))  # the probability that it is the last
        self._lo = array("f", bytes(4 * _SPINS))  # recent spins: log v_c was above these...
        self._hi = array("f", bytes(4 * _SPINS))  # ... and at or below these
        self._se_lo = array("f", bytes(4 * _SPINS))  # ... their standard errors
        self._se_hi = array("f", bytes(4 * _SPINS))
        self._last_lap_s = last_lap_s
        # DESIGN.md: the median wheel's last lap 1.1 s, the drop some 7 % slower
        self._c0 = -2.0 * log(1.07 * last_lap_s)
        self.drop_prior_s = -1.0
        self.set_prior(drop_s)
        self.reset(0)

    def set_prior(self, drop_s):
        """The wheel's ball period at the drop (s) from its geometry; 0: unknown."""
        if drop_s == self.drop_prior_s:
            return
        self.drop_prior_s = drop_s
        self.has_prior = drop_s > 0
        if self.has_prior:
            self.prior = -2.0 * log(drop_s)
        else:
            self.prior = self._c0  # wheels in general (young margin on top)
        self._estimate(min(self.learned, _SPINS))

    @property
    def u_c(self):
        """The drop speed^2 (rev/s)^2 a pass call takes: the centre plus the margins."""
        return exp(self.c + self._margin())

    def _margin(self):
        m = self.spread if self.spread > self.margin else self.margin
        if not self.has_prior:
            m += self.young / (self.learned + 1)
        return m

    def reset(self, t0):
        """A new spin whose first pass is at t0 (us ticks)."""
        self.t0 = t0
        self.passes = 1
        self.deadline = ticks.add(t0, int(self.limit() * 1e6))
        self.why = WHY_LIMIT
        self.drop_s = None
        self.revs_left = None

    def lap(self, t):
        """The ball passed again at t (us ticks): refit, and move the deadline."""
        s = ticks.diff(t, self.t0) / 1e6
        if self.passes >= _PASSES:  # a ball that never slows: keep the latest passes
            for i in range(_PASSES - 1):
                self._t[i] = self._t[i + 1]
            self.passes -= 1
        self._t[self.passes] = s
        self.passes += 1
        lim = self.limit()
        limit = s + lim
        if s - self._t[self.passes - 2] >= lim:
            call = s  # that lap already took longer than the limit
        else:
            call = self._predict(s)
        if call is not None and call < limit:
            self.deadline = ticks.add(self.t0, int(call * 1e6))
            self.why = WHY_FIT
        else:
            self.deadline = ticks.add(self.t0, int(limit * 1e6))
            self.why = WHY_LIMIT
        return self.deadline

    def limit(self):
        """The safety limit on a lap (s): limit_s, or for a wheel known to drop at a slower
        period, a little more than that period (no lap on the track can last longer); a
        limit set by hand is kept, even below that (an earlier call is the safe side)."""
        if not self.limit_set and (self.has_prior or self.learned >= 8):
            slow = 1.05 * exp(-0.5 * (self.c - self.spread))
            if slow > self.limit_s:
                return slow
        return self.limit_s

    def due(self, now):
        return ticks.diff(now, self.deadline) >= 0

    def _u(self, lap):
        """Lap-mean (speed)^2 of lap `lap` (between passes lap and lap+1), in (rev/s)^2."""
        period = self._t[lap + 1] - self._t[lap]
        if period <= 0:
            return -1.0
        return 1.0 / (period * period)

    def _state(self, a, k=None, fade=None):
        """(u, b): the last lap's u and the friction b of this spin, or None.

        With the drag a known, the laps before the last one follow from those two values:
        u_(L-j) = u_L*c_j + b*d_j (c_j = a^-j, d_j = sum of a^-i for i = 1..j), so both come
        from a weighted least-squares fit over the recent laps, with no differencing of the
        noisy lap times.
        """
        laps = self.passes - 1
        k = min(laps, k or self.recent)
        if fade is None:
            fade = self.weight
        if k < 2:
            return None
        scc = scd = sdd = scu = sdu = 0.0
        c = 1.0
        d = 0.0
        w = 1.0
        inv = 1.0 / a
        for j in range(k):
            u = self._u(laps - 1 - j)
            if u <= 0:
                return None
            wn = w / (u * u * u)  # lap-time noise weighs on u as u^1.5
            scc += wn * c * c
            scd += wn * c * d
            sdd += wn * d * d
            scu += wn * c * u
            sdu += wn * d * u
            c *= inv
            d = d * inv + inv
            w *= fade
        det = scc * sdd - scd * scd
        if det <= 0:
            return None
        u = (sdd * scu - scd * sdu) / det
        b = (scc * sdu - scd * scu) / det
        return u, b

    def _refine(self, a, w, b, k, b0=0.0, lam=0.0, lam_a=0.0, lap_noise=False):
        """(w, b) fitted to the last k+1 pass times themselves, from a first guess, or None.

        Lap times are differences of noisy passes, so neighbouring laps share an error; the
        pass times carry it once. Model: going back from the last pass (speed^2 w), each
        earlier pass had v = (v_next + b)/a and the lap between took 2/(sqrt v + sqrt v_next);
        an offset takes the last pass's own error. Gauss-Newton, equal weights. Sets the
        covariance factors (_cww, _cwb, _cbb, and with a fitted _cwa, _cba, _caa: times the
        pass-time variance), _rss, and a_fit.

        lam > 0: b has a prior b0, of variance (pass-time variance)/lam: the friction this
        wheel's spins had, which short noisy series cannot tell from their own laps.
        lam_a > 0: the drag is fitted too, with the given a as its prior (variance
        (pass-time variance)/lam_a): a wheel not yet learned, or drifting, is then not
        taken for a known one.
        lap_noise: the noise is on each lap instead (laps clocked one by one): the lap times
        are fitted, with no offset; the covariance factors are then times a lap's variance."""
        last = self.passes - 1
        a0 = a
        m = self._m
        for _ in range(4):
            if w <= 0 or a <= 0:
                return None
            inv = 1.0 / a
            # sums for the normal equations of (dw, db, da, d_offset)
            s11 = s12 = s13 = s14 = s22 = s23 = s24 = s33 = s34 = s44 = 0.0
            r1 = r2 = r3 = r4 = rss = 0.0
            v = w
            tau = 0.0  # model time of pass last-j, relative to the last pass
            dw = db = da = 0.0  # its derivatives
            gw = 1.0  # dv/dw, dv/db, dv/da of the speed^2 at that pass
            gb = ga = 0.0
            y0 = self._t[last]
            rp = pw = pb = pa = 0.0  # the pass before's residual and derivatives
            for j in range(k + 1):
                r = (self._t[last - j] - y0) - tau
                if lap_noise:
                    # each lap's own error: the lap times' residuals and derivatives
                    if j:
                        xw = pw - dw
                        xb = pb - db
                        xa = pa - da
                        x = rp - r
                        s11 += xw * xw
                        s12 += xw * xb
                        s13 += xw * xa
                        s22 += xb * xb
                        s23 += xb * xa
                        s33 += xa * xa
                        r1 += xw * x
                        r2 += xb * x
                        r3 += xa * x
                        rss += x * x
                    rp = r
                    pw = dw
                    pb = db
                    pa = da
                else:
                    s11 += dw * dw
                    s12 += dw * db
                    s13 += dw * da
                    s14 += dw
                    s22 += db * db
                    s23 += db * da
                    s24 += db
                    s33 += da * da
                    s34 += da
                    s44 += 1.0
                    r1 += dw * r
                    r2 += db * r
                    r3 += da * r
                    r4 += r
                    rss += r * r
                # one pass further back
                vp = (v + b) * inv
                if vp <= 0:
                    return None
                sv = sqrt(vp)
                sn = sqrt(v)
                q = 1.0 / ((sv + sn) * (sv + sn))
                # lap = 2/(sv+sn): d lap = -q*(dvp/sv + dv/sn)
                gwp = gw * inv
                gbp = (gb + 1.0) * inv
                gap = (ga - vp) * inv
                tau -= 2.0 / (sv + sn)
                dw += q * (gwp / sv + gw / sn)
                db += q * (gbp / sv + gb / sn)
                da += q * (gap / sv + ga / sn)
                v = vp
                gw = gwp
                gb = gbp
                ga = gap
            if lap_noise:  # no offset
                s44 = 1.0
            s22 += lam
            r2 += lam * (b0 - b)
            if lam_a > 0:
                s33 += lam_a
                r3 += lam_a * (a0 - a)
            else:  # a held: its row says da = 0
                s13 = s23 = s34 = r3 = 0.0
                s33 = 1.0
            m[0] = s11
            m[1] = s12
            m[2] = s13
            m[3] = s14
            m[5] = s22
            m[6] = s23
            m[7] = s24
            m[10] = s33
            m[11] = s34
            m[15] = s44
            if not _invert4(m):
                return None
            w += m[0] * r1 + m[1] * r2 + m[2] * r3 + m[3] * r4
            b += m[1] * r1 + m[5] * r2 + m[6] * r3 + m[7] * r4
            if lam_a > 0:
                a += m[2] * r1 + m[6] * r2 + m[10] * r3 + m[11] * r4
        self._cww = m[0]
        self._cwb = m[1]
        self._cbb = m[5]
        if lam_a > 0:
            self._cwa = m[2]
            self._cba = m[6]
            self._caa = m[10]
        else:
            self._cwa = self._cba = self._caa = 0.0
        self._rss = rss
        self.a_fit = a
        if w <= 0 or a <= 0:
            return None
        return w, b

    def _predict(self, s):
        """Call time (s) from the fit, or None. Sets drop_s and revs_left."""
        a = self.a
        f = self._state(a)
        self.drop_s = None
        self.revs_left = None
        if f is None:
            return None
        u, b = f
        # a pass call weighs how sure it is (_decide); the drop instant's call needs a slowing
        # already seen, and some laps
        to_pass = not self.to_drop
        if b <= 0 and a >= 1.0 and not to_pass:
            return None  # not slowing down (noise): no prediction yet
        if self.passes <= _FEW_LAPS and not to_pass:
            # 2-3 laps: a fit of their slowing is mostly noise. A ball already within about a
            # lap of the drop speed (a feeble launch) is called at once, any other waits.
            if self._u(self.passes - 2) < 1.5 * self.u_c:
                self.drop_s = s
                self.revs_left = 0
                return s
            return None
        # pass speeds^2 follow the same map; the one at this pass is about the mean of the
        # laps either side of it (exact for a speed^2 linear in the angle)
        k = self.passes - 1
        if k > self.recent:
            k = self.recent
        n0 = self.noise if self.nn else _NOISE_NEW  # the timing noise expected
        if to_pass:
            return self._pass_call(s, a, u, k, n0)
        f = self._refine(a, (u + a * u - b) / 2, b, k)  # the table's sensors: exact passes
        if f is None:
            return None
        v, b = f
        u = (2 * v + b) / (1 + a)  # the last lap's mean, from the refined pass speed
        # timing noise (pass-time variance): this spin's scatter, or whole spins' (steadier)
        noise = self._rss / (k - 2) if k > 3 else 0.0
        if self.noise > noise:
            noise = self.noise
        if self.to_drop:
            v_c = exp(self.c + self.margin * 0.5)  # the drop instant: an unbiased threshold
            z2 = 0.0  # and a timing error, not a lap, for a wrong guess
        else:
            v_c = self.u_c
            z2 = self.z * self.z * noise
        gu = 1.0  # d v / d w and d v / d b of the pass speed^2 predicted
        gb = 0.0
        # only the passes a call before the next pass can be about need that margin: the
        # later ones will be predicted again from more laps
        near = s + self.lead_s + 2.5 * (s - self._t[self.passes - 2])
        t = s
        n = 0
        while n < _MAX_AHEAD:
            nxt = a * v - b
            gu *= a
            gb = a * gb - 1
            if nxt < v_c:
                break
            if t < near or n <= self.lead_revs + 2:
                # that pass comes if its speed^2 stays above v_c by z times its uncertainty
                var = z2 * (gu * gu * self._cww + 2 * gu * gb * self._cwb + gb * gb * self._cbb)
                if (nxt - v_c) * (nxt - v_c) < var:
                    break
            t += 2.0 / (v**0.5 + nxt**0.5)  # a lap with speed^2 linear in the angle
            v = nxt
            n += 1
        if n >= _MAX_AHEAD:
            return None
        self.revs_left = n
        if self.lead_revs > 0:
            self.drop_s = t
            # the pass lead_revs laps before the last: the pass n - lead_revs ahead
            if n <= self.lead_revs:
                return s
            return self._pass_ahead(s, u, b, n - self.lead_revs)
        if self.to_drop and v > v_c:
            # the part of the lap until the speed^2, linear in the angle, meets v_c
            nxt = a * v - b
            t += 2.0 * (v**0.5 - v_c**0.5) / (v - nxt)
        self.drop_s = t
        return t - self.lead_s

    @property
    def lap_noise(self):
        """The spins say the timing noise is on each lap: a pass call fits the lap times."""
        return self.laps_ll > 0

    def b_prior(self):
        """(b0, sd of log b): the friction this wheel's spins had; before any, what the
        drop speed and DESIGN.md's last lap some 15 % longer than the one before give."""
        if self.nb == 0:
            sc = self.sigma_c()
            sr2 = self.r_belief()[1] if self.nr else _SD_B_NEW * _SD_B_NEW
            return self._b_of(self.c, self.a), sqrt(sr2 + sc * sc)
        return exp(self.lb), sqrt(self._lb_var() + 1.0 / self.lbw)

    def _lb_var(self):
        """The spin-to-spin variance of log b, at least _LB_VAR_MIN."""
        return self.lbv if self.lbv > _LB_VAR_MIN else _LB_VAR_MIN

    def _learn_b(self, b, err):
        """The friction b of this wheel's spins: its log mean, each spin weighed by how
        sharply it told it (err: its fit's variance of log b), so that short noisy spins move
        it little and the mean's own error is known; and the spin-to-spin variance."""
        lb = log(b)
        w = 1.0 / (self._lb_var() + err)
        if self.nb == 0:
            self.lb = lb
            self.lbw = w
        else:
            d = lb - self.lb
            kb = 1.0 / (self.nb + 1) if self.nb < 7 else 0.125
            # d scatters by the variation, this fit's error and the mean's own
            self.lbv += kb * (d * d - err - 1.0 / self.lbw - self.lbv)
            if self.lbv < 0:
                self.lbv = 0.0
            self.lbw *= _FORGET_B  # a wheel drifts: earlier spins count a little less
            self.lb += d * w / (self.lbw + w)
            self.lbw += w
        self.nb += 1

    def r_belief(self):
        """(centre, variance) of log r, r the share of its speed^2 a ball at the drop speed
        would lose over a lap (drag and friction: 1 - a + b/v_c), for a spin of any wheel:
        what spins showed, after DESIGN.md's last laps some 15 % longer than the one before
        (_B_OVER_VC)."""
        if self.nr == 0:
            return self.lr, _SD_R_NEW * _SD_R_NEW
        v = self.lrv if self.lrv > _LB_VAR_MIN else _LB_VAR_MIN
        # the prior's variance weighs as one spin, the mean's own error on top
        return self.lr, (_SD_R_NEW * _SD_R_NEW + (self.nr + 1) * v) / (self.nr + 1)

    def _b_of(self, c, a):
        """The friction a ball of drop speed^2 exp(c) and drag a would have, by r."""
        r = exp(self.lr) - 1.0 + a
        return exp(c) * (r if r > 0.05 else 0.05)

    def sigma_c(self):
        """Standard deviation of log v_c by the table's margins: the spin-to-spin variation
        (or what the brackets leave open), plus, with no prior, the youth of the learning."""
        m = self.spread if self.spread > self.margin else self.margin
        if not self.has_prior:
            y = self.young / (self.learned + 1)
            return sqrt(m * m + y * y)
        return m

    def _belief(self):
        """(centre, variance) of log v_c for a pass call.

        With the wheel's prior: as learned (the prior weighs as _PRIOR spins). Without: what
        the brackets leave open (taken as uniform), weighed against what DESIGN.md says of
        wheels in general (a last lap of 0.6-2 s); then the spin-to-spin variation on top."""
        if self.has_prior:
            m = self.spread if self.spread > self.margin else self.margin
            return self.c, m * m
        w = self.cross if self.cross > self.margin else self.margin
        p = 1.0 / (_SD_WHEELS * _SD_WHEELS)
        pc = p * (-2.0 * log(1.07 * self._last_lap_s))
        if self.learned:
            o = self.open / 1.7320508 + 0.005  # the sd of a uniform over +-open
            p += 1.0 / (o * o)
            pc += self.c / (o * o)
        return pc / p, 1.0 / p + w * w

    def _pass_call(self, s, a, u, k, n0):
        """Call time (s) for a lead counted to the last pass, or None.

        Two readings of the spin: it is on the wheel learned (its drop speed and friction as
        the earlier spins had them), or on another one (a ball or wheel changed, a file of
        several wheels): the ball then leaves where a lap would lose a share r of its speed^2
        that wheels share (DESIGN.md: last laps some 15 % longer than the one before), or,
        while this spin shows no friction of its own, at a drop speed as wheels in general
        have. This spin's slowing weighs them against each other; _decide mixes them."""
        pn = n0 if n0 > _NOISE_MIN else _NOISE_MIN
        # a wheel whose drag no spin has shown yet: fitted too
        lam_a = 0.0 if self.drag_spins else pn * self._pa
        lr, sr2 = self.r_belief()
        sdn2 = _SD_WHEELS * _SD_WHEELS + sr2  # log b across wheels
        # another wheel: its own drag fitted too, from what wheels in general have
        bn = self._b_of(self._c0, _A_NEW)
        # (a few noisy laps may hide a slowing: then the friction they leave possible)
        fu = self._fit(_A_NEW, u, k, n0, bn, sdn2, pn / (_SD_A * _SD_A), k < _B_LAPS)
        fs = fu if fu is not None and fu[10] and fu[1] > 0 else None
        p = self.p_same() if self.has_prior or self.learned else 0.0
        fw = None
        if p > 0:
            b0, sd = self.b_prior()
            fw = self._fit(a, u, k, n0, b0, sd * sd, lam_a)
        hy = []  # readings: fit, centre, own wheel?, variance (as _alive takes them), weight
        if fw is not None:
            c, sc2 = self._belief()
            hy.append([fw, c, False, sc2, p])
            if fs is not None:
                # how likely this spin's slowing (the speed^2 a lap loses now: drag and
                # friction, which the laps tell better than either) is on the learned
                # wheel, and on any wheel
                v = fs[0]
                g = 1.0 - fs[2]
                lost = g * v + fs[1]
                vb = fs[3] * _quad(g, 1.0, -v, *fs[4:10]) / (lost * lost)
                lost_w = (1.0 - self.a) * v + b0
                d = log(lost / lost_w)
                vw = sd * sd * b0 * b0 / (lost_w * lost_w) + vb
                dn = log(lost / bn)
                vn = sdn2 + vb
                lw = p * exp(-0.5 * d * d / vw) / sqrt(vw)
                ln = (1.0 - p) * exp(-0.5 * dn * dn / vn) / sqrt(vn)
                p = lw / (lw + ln)
                hy[0][4] = p
        if fs is not None:
            hy.append([fs, lr, True, sr2, 1.0 - p])
        elif p < 1.0:
            if fu is not None and fu[1] > 0:
                hy.append([fu, self._c0, False, _SD_WHEELS * _SD_WHEELS, 1.0 - p])
        return self._decide(s, hy) if hy else None

    def _fit(self, a, u, k, n0, b0, var_lb, lam_a, unseen=False):
        """The pass times fitted with a prior b0 on the friction (log variance var_lb): (v,
        b, a, noise, cww, cwb, cbb, cwa, cba, caa, seen), or None for a ball not seen
        slowing; with unseen, then the friction it may have unseen (two standard errors
        over the fit) and seen False."""
        lap_noise = self.lap_noise
        if lap_noise:  # a lap's variance: twice a pass's (n0 comes from pass-time fits)
            n0 *= 2.0
            lam_a *= 2.0
        pn = n0 if n0 > _NOISE_MIN else _NOISE_MIN
        lam = pn / (var_lb * b0 * b0)
        f = self._refine(a, (u + a * u - b0) / 2, b0, k, b0, lam, lam_a, lap_noise)
        if f is None:
            return None
        v, b = f
        # a few laps' scatter is itself scattered: pooled with whole spins' noise, or before
        # any spin with hand-clocked laps' (DESIGN.md: tens of ms)
        dof = k - 2 if lam_a == 0 else k - 3  # pass (or lap) times less parameters fitted
        noise = (self._rss + _NOISE_DOF * n0) / (dof + _NOISE_DOF)
        # the speed^2 lost per lap: a ball not seen slowing gets no prediction
        g = 1.0 - self.a_fit
        slow = g * v + b
        c = (self._cww, self._cwb, self._cbb, self._cwa, self._cba, self._caa)
        var = noise * _quad(g, 1.0, -v, *c)
        if slow <= 0 or slow * slow < 4.0 * var:
            if not unseen:
                return None
            b += 2.0 * sqrt(var) - slow
            return (v, b, self.a_fit, noise) + c + (False,)
        return (v, b, self.a_fit, noise) + c + (True,)

    def _decide(self, s, hy):
        """Call time (s) from the readings of the spin (_pass_call), each mixed in by its
        weight.

        Which pass is the last is uncertain (v_c, the fit): each pass ahead gets the
        probability that it is the last, and its time a standard error. The call may come
        after the last pass with at most _RISK probability (_late); within that bound it
        takes the time that puts the most probability within +-0.5 s of the lead. When the
        next pass may or may not be the last, a call just before it is within for the pass
        after it, whose lap is shorter than lead + 0.5 s: the doubt then costs little."""
        # each reading then follows its passes ahead: speed^2, its gradient (w, b, a),
        # P(reached), P(the current pass)
        for h in hy:
            h += (h[0][0], 1.0, 0.0, 0.0, 1.0, 1.0)
        # the current pass came: the readings are weighed by how well they expected it
        tot = 0.0
        for h in hy:
            p = _alive(h[0], h[5], 1.0, 0.0, 0.0, h[1], h[2], h[3])
            h[10] = p if p > 1e-9 else 1e-9
            h[4] *= h[10]
            tot += h[4]
        dom = hy[0]
        for h in hy:
            h[4] /= tot
            if h[4] > dom[4]:
                dom = h
        f = dom[0]  # the pass times come from the likelier reading
        noise = f[3]
        lap_noise = self.lap_noise
        tp = self._tp
        st = self._st
        pl = self._pl
        t = s
        tw = tb = ta = 0.0  # d time / d (w, b, a) of the pass ahead
        cum = 0.0
        first = -1  # the earliest pass that may be the last
        n = 0
        while n < _MAX_AHEAD:
            tp[n] = t
            # the fit's error, and the pass's own (with lap noise: that of each lap to it)
            own = n if lap_noise else 1
            st[n] = _sd(noise * (_quad(tw, tb, ta, *f[4:10]) + own)) if n else 0.0
            void = self.passes + n <= MIN_LAPS
            p_last = 0.0
            nxt_alive = 0.0
            lap = None
            for h in hy:
                fh = h[0]
                v = h[5]
                nxt = fh[2] * v - fh[1]
                gw = fh[2] * h[6]
                gb = fh[2] * h[7] - 1.0
                ga = v + fh[2] * h[8]
                if nxt > 0:
                    na = _alive(fh, nxt, gw, gb, ga, h[1], h[2], h[3])
                    if void:
                        # a ball that leaves sooner voids the spin (decree: fewer than 4
                        # revolutions): that pass comes, and the later ones count from it
                        p = na if na > 1e-9 else 1e-9
                        h[4] *= p / h[10]
                        h[10] = p
                        na = 1.0
                    else:
                        na /= h[10]
                    if na > h[9]:
                        na = h[9]
                else:
                    na = 0.0
                if h is dom:
                    if nxt <= 0:
                        lap = -1.0
                    else:
                        sv = sqrt(v)
                        sn = sqrt(nxt)
                        q = 1.0 / ((sv + sn) * (sv + sn))
                        tw -= q * (h[6] / sv + gw / sn)  # lap = 2/(sv + sn)
                        tb -= q * (h[7] / sv + gb / sn)
                        ta -= q * (h[8] / sv + ga / sn)
                        lap = 2.0 / (sv + sn)
                p_last += h[4] * (h[9] - na)
                nxt_alive += h[4] * na
                h[5] = nxt
                h[6] = gw
                h[7] = gb
                h[8] = ga
                h[9] = na
            if void:
                tot = 0.0
                for h in hy:
                    tot += h[4]
                for h in hy:
                    h[4] /= tot
                nxt_alive = 1.0  # that pass comes (given), whatever the readings thought
            pl[n] = p_last  # the pass n ahead is the last one
            cum += p_last
            if first < 0 and cum > _RISK:
                first = n
            n += 1
            if nxt_alive < 1e-4 or (first >= 0 and n > first + 2) or lap < 0:
                break
            t += lap
        if first < 0:
            return None  # no end in sight: the safety limit stands
        # the latest call whose risk of coming after the last pass stays within _RISK
        latest = s
        if pl[0] <= _RISK:
            lo = s
            hi = tp[n - 1]
            if self._late(hi, n) <= _RISK:
                lo = hi
            else:
                for _ in range(16):
                    x = (lo + hi) / 2
                    if self._late(x, n) <= _RISK:
                        lo = x
                    else:
                        hi = x
            latest = lo - _GUARD if lo - _GUARD > s else s
        if self.lead_revs > 0:
            call, aim = self._revs_call(s, n, latest)
            self.revs_left = aim
            self.drop_s = tp[aim]
            return call
        # within that bound, the call most likely within +-0.5 s of the lead
        lead = self.lead_s
        best = -1.0
        call = latest
        aim = first
        for k in range(first, n):
            for d in _OFFSETS:
                x = tp[k] - lead + d
                if x > latest:
                    x = latest
                if x < s:
                    x = s
                score = 0.0
                for j in range(first, n):
                    score += pl[j] * _within(tp[j] - x - lead, st[j])
                # centred leads first, among calls as likely
                off = tp[k] - x - lead
                score -= 0.001 * (off if off > 0 else -off)
                if score > best:
                    best = score
                    call = x
                    aim = k
        self.revs_left = aim
        self.drop_s = tp[aim]
        return call

    def _revs_call(self, s, n, latest):
        """A lead in revolutions: the call at the pass lead_revs laps before the last one, or
        in the lap that ends there, most likely so within the latest call the risk bound
        allows (_decide's table); (call, the pass ahead aimed at as the last)."""
        tp = self._tp
        pl = self._pl
        revs = self.lead_revs
        best = -1.0
        call = s
        aim = 0
        i = 0  # the lap the call falls in: the one that ends at the pass i ahead
        for m in range(n):
            x = tp[m] if tp[m] < latest else latest
            if x < s:
                x = s
            while i < m and tp[i] < x:
                i += 1
            j = i + revs  # the last pass that puts this call lead_revs laps before it
            if j < n and pl[j] > best:
                best = pl[j]
                call = x
                aim = j
        return call, aim

    def _late(self, x, n):
        """Probability that a call at x comes after the last pass (by _decide's table)."""
        tp = self._tp
        st = self._st
        pl = self._pl
        r = 0.0
        for j in range(n):
            if st[j] > 0:
                r += pl[j] * _cdf((x - tp[j]) / st[j])
            elif x > tp[j]:
                r += pl[j]
        return r

    def _pass_ahead(self, s, u, b, k):
        """Time (s) of the k-th pass after the one at s."""
        a = self.a
        v = (u + a * u - b) / 2
        for _ in range(k):
            nxt = a * v - b
            s += 2.0 / (v**0.5 + nxt**0.5)
            v = nxt
        return s

    def learn_drop(self):
        """The ball left the track after the last pass: learn drag and drop speed from the
        spin. Returns False when the spin is too short to learn from."""
        laps = self.passes - 1
        if laps < 3:
            return False
        # the spin fitted with the drag the earlier spins left: for the change test and the
        # noise's kind (the pass-time fit's covariance and scatter are kept until both ran)
        a = self.a
        f = self._spin_fit(laps)
        rss = self._rss
        if (self.learned or self.nb) and laps >= _LEARN_LAPS:
            k = 1.0 - 1.0 / _CHANGES_N
            self.changes *= k
            if self._changed(f):
                self.changes += 1.0
                self.forget_wheel()
        self._learn_noise_kind(f, rss, a)
        if self.learn_drag and laps >= 6:
            self._learn_drag(laps)
        a = self.a
        f = self._spin_fit(laps)
        if f is None:
            return False
        last, b, n = f  # speed^2 at the last pass, friction, laps fitted
        if n >= _LEARN_LAPS:
            kn = 1.0 / (self.nn + 1) if self.nn < 3 else 0.25
            self.noise += kn * (self._rss / (n - 2) - self.noise)
            self.nn += 1
            if b > 0:
                self._learn_b(b, self._cbb * self._rss / (n - 2) / (b * b))
        nxt = a * last - b  # ... and at the pass that did not come
        if not 0 < nxt < last:
            return False  # a fit that does not slow down to a stop: nothing to learn
        # each end of the bracket widened by _WIDEN of its standard error: the highest of
        # noisy lower ends (the lowest of the upper ones) overshoots v_c by about the noise,
        # which set the centre high, the calls a lap early (lapgen at 20 ms: +0.05 in log v_c)
        s2 = self._rss / (n - 2)
        se_lo = _sd(s2 * (a * a * self._cww - 2.0 * a * self._cwb + self._cbb)) / nxt
        se_hi = _sd(s2 * self._cww) / last
        if b > 0 and n >= _LEARN_LAPS and (n >= _B_LAPS or self.nr == 0):
            self._learn_r(last, b, n)
        i = self.learned % _SPINS
        self._lo[i] = log(nxt) - _WIDEN * se_lo
        self._hi[i] = log(last) + _WIDEN * se_hi
        self._se_lo[i] = se_lo
        self._se_hi[i] = se_hi
        self.learned += 1
        self._estimate(min(self.learned, _SPINS))
        return True

    def _learn_noise_kind(self, f, rp, a):
        """Whether the timing noise is on each pass or on each lap: the spin's likelihood
        under each, both fits having three parameters (speed, friction, and the pass times'
        offset or the first pass). The drag is the one the earlier spins left: this spin's
        own would take in much of a lap noise's drift. A drag off the mark bends the pass
        times as a drift does, and may choose the laps' fit too: it is the safer one then
        (lapgen's wheels at 20 ms: pass noise 0-14 spins of 36, lap noise 11-35, and none
        on its fast wheel, whose spins are short). f: the spin's _spin_fit with drag a, rp
        its sum of squares."""
        if f is None or f[2] < _B_LAPS:
            return
        last, b, n = f
        if rp < _NOISE_MIN * n or self._refine(a, last, b, n, lap_noise=True) is None:
            return  # times too exact to tell
        # the n laps, or the n pass times less the last one (whose own error the others
        # share), are equally many and told the same way: their maximum likelihoods compare
        if self._rss > 0:
            ll = 0.5 * (n * log(rp / self._rss) + log(n + 1))
            self.laps_ll = self.laps_ll * _FORGET_LL + ll

    def _spin_fit(self, laps):
        """(speed^2 at the last pass, friction, laps fitted): the spin just ended, fitted
        with the wheel's drag over its last laps (up to `recent`), or None."""
        a = self.a
        f = self._state(a)
        if f is None:
            return None
        u, b = f
        n = laps if laps < self.recent else self.recent
        f = self._refine(a, (u + a * u - b) / 2, b, n)
        if f is None:
            return None
        return f[0], f[1], n

    def _changed(self, f):
        """Whether the spin just ended was, beyond doubt, on another wheel than the one
        learned (a ball or wheel changed, a file of several wheels): its friction and the
        bracket of its drop speed, likely on wheels in general, unlikely on this one. f: its
        _spin_fit, just made."""
        a = self.a
        if f is None:
            return False
        last, b, n = f
        nxt = a * last - b
        if not (b > 0 and 0 < nxt < last):
            return False
        lo = log(nxt)
        hi = log(last)
        s2 = self._rss / (n - 2)  # the pass-time variance, and the bracket's own error
        ev = s2 * self._cww / (last * last)
        c, sc2 = self._belief()
        sc = _sd(sc2 + ev)
        same = _cdf((hi - c) / sc) - _cdf((lo - c) / sc)
        sn = sqrt(_SD_WHEELS * _SD_WHEELS + ev)
        new = _cdf((hi - self._c0) / sn) - _cdf((lo - self._c0) / sn)
        if self.nb:
            lb = log(b)
            err = self._cbb * s2 / (b * b)
            b0, sd = self.b_prior()
            vw = sd * sd + err
            d = lb - log(b0)
            same *= exp(-0.5 * d * d / vw) / sqrt(vw)
            vn = _SD_WHEELS * _SD_WHEELS + self.r_belief()[1] + err
            d = lb - log(self._b_of(self._c0, a))
            new *= exp(-0.5 * d * d / vn) / sqrt(vn)
        p = self.p_same()
        return p * same < _CHANGED * (1.0 - p) * new

    def p_same(self):
        """The probability that a spin is on the wheel learned, before its laps are seen:
        high on a table, lower where wheels were seen to change lately, the more so while
        the one learned has few spins."""
        y = self.learned + 1
        r = _CHANGES + self.changes / (y * y)
        return 1.0 - (r if r < 0.5 else 0.5)

    def forget_wheel(self):
        """Start learning a new wheel: its drop speed, friction and drag. The timing noise
        (the clocking's) and r (shared by wheels) stay."""
        self.wheels += 1
        self.learned = 0
        self.nb = 0
        self.lb = self.lbv = self.lbw = 0.0
        self.a = _A_NEW
        self._pa = 1.0 / (_SD_A * _SD_A)
        self.drag_spins = 0
        self._estimate(0)

    def _learn_r(self, last, b, n):
        """r, the share of v_c a lap from v_c would lose, as a spin on a wheel of its own
        (_pass_call) tells it: its drag fitted too, from what wheels in general have. v_c lay
        in (nxt, last], so r in [g + b/last, g + b/nxt). The middle, less the bracket's
        (uniform) and the fit's own variance, leaves the spin-to-spin variation."""
        s2 = self._rss / (n - 2)
        if s2 < _NOISE_MIN:
            s2 = _NOISE_MIN
        f = self._refine(_A_NEW, last, b, n, 0.0, 0.0, s2 / (_SD_A * _SD_A))
        if f is None:
            return
        last, b = f
        g = 1.0 - self.a_fit
        nxt = self.a_fit * last - b
        if not (b > 0 and 0 < nxt < last):
            return
        lo = log(g + b / last)
        hi = log(g + b / nxt)
        d = (lo + hi) / 2 - self.lr
        e = b / (g * nxt + b)  # d log r / d log b, about
        err = e * e * self._cbb * self._rss / (n - 2) / (b * b) + (hi - lo) * (hi - lo) / 12
        nr = self.nr if self.nr < _R_LAPS else _R_LAPS
        self.lr += d / (nr + 2)  # the prior weighs as one spin
        self.lrv += (d * d - err - self.lrv) / (nr + 1)
        if self.lrv < 0:
            self.lrv = 0.0
        self.nr += 1

    def _learn_drag(self, laps):
        """Drag: fitted with the friction to the whole spin's pass times (the lap times, as
        differences of noisy passes, would bias it), and weighed by how sharply the spin
        tells it, so that short noisy spins move it little."""
        a = self.a
        f = self._state(a, laps, 1.0)
        if f is None:
            return
        u, b = f
        n = laps if laps < _PASSES - 1 else _PASSES - 1
        if self._refine(a, (u + a * u - b) / 2, b, n, 0.0, 0.0, 1e-12) is None:
            return
        s2 = self._rss / (n - 3)  # the pass-time variance of this spin
        if s2 < 1e-12:
            s2 = 1e-12
        var = s2 * self._caa
        if not var > 0:
            return
        est = self.a_fit
        if est > 1.0 + 5 * var**0.5 or est < _A_MIN:
            return  # a fit that makes no physical sense: nothing learned
        prec = 1.0 / var
        # what earlier spins said counts a little less each spin (a wheel drifts)
        self._pa *= _FORGET
        self.a = (self._pa * self.a + prec * est) / (self._pa + prec)
        self._pa += prec
        self.drag_spins += 1
        if self.a > 1.0:
            self.a = 1.0
        elif self.a < _A_MIN:
            self.a = _A_MIN

    def _estimate(self, n):
        """Centre and spread of log v_c from the last n spins' brackets (lo, hi].

        On a steady wheel the highest lo and the lowest hi close in on v_c from both sides;
        where v_c varies from spin to spin they cross, by about that variation. Their middle
        is the centre either way (taken with each end widened by _WIDEN_C of its error, so
        that one noisy end does not set it), half their distance the spread. The prior
        counts as _PRIOR spins at the centre."""
        if n == 0:
            self.c = self.prior  # log v_c: the centre estimate
            self.spread = 0.0  # log half-width of what the brackets leave open
            self.open = self.cross = 0.0
            return
        # the highest lo and lowest hi; for the centre, those of the brackets widened
        # further (_WIDEN_C)
        k = _WIDEN_C - _WIDEN
        top = top_c = bottom = bottom_c = 0.0
        for i in range(n):
            lo = self._lo[i]
            hi = self._hi[i]
            lo_c = lo - k * self._se_lo[i]
            hi_c = hi + k * self._se_hi[i]
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
        self.c = c
        self.open = open_
        self.cross = cross
        self.spread = open_ + cross

    def last_lap_s(self):
        """The learned drop speed as a period (s)."""
        return exp(-0.5 * self.c)


def _invert4(m):
    """Invert the symmetric 4x4 matrix m (a flat list, upper triangle filled) in place, by
    Gauss-Jordan without pivoting (a normal matrix: positive definite). False if singular."""
    for i in range(4):
        for j in range(i):
            m[4 * i + j] = m[4 * j + i]
    for p in range(4):
        d = m[5 * p]
        if d <= 1e-30:
            return False
        d = 1.0 / d
        for j in range(4):
            m[4 * p + j] *= d
        m[5 * p] = d
        for i in range(4):
            if i != p:
                f = m[4 * i + p]
                if f != 0.0:
                    for j in range(4):
                        if j != p:
                            m[4 * i + j] -= f * m[4 * p + j]
                    m[4 * i + p] = -f * d
    return True


def _quad(x, y, z, xx, xy, yy, xz, yz, zz):
    """g' C g for g = (x, y, z) and the symmetric C given by its upper triangle."""
    return x * x * xx + y * y * yy + z * z * zz + 2 * (x * y * xy + x * z * xz + y * z * yz)


def _alive(f, v, gw, gb, ga, m, own, s2):
    """That a pass of speed^2 v, of gradient (gw, gb, ga) in the fit f = (w, b, a, noise,
    covariance), comes: with log v_c normal (centre m, variance s2), P(v_c < v); or on a
    wheel of its own (own), P(r > the share of v the lap after it would lose) for log r
    normal, centre m, variance s2."""
    if not own:
        return _cdf((log(v) - m) / _sd(s2 + f[3] * _quad(gw / v, gb / v, ga / v, *f[4:10])))
    b = f[1]
    q = b / v + 1.0 - f[2]
    if q <= 0:
        return 1.0  # a ball gaining speed
    h = b / (v * v)
    var = f[3] * _quad((-h * gw) / q, (1.0 / v - h * gb) / q, (-h * ga - 1.0) / q, *f[4:10])
    return _cdf((m - log(q)) / _sd(s2 + var))


def _within(off, sd):
    """Probability that a lead off from the one asked (s), of standard error sd, is within
    +-0.5 s."""
    if sd <= 0:
        return 1.0 if -0.5 <= off <= 0.5 else 0.0
    return _cdf((off + 0.5) / sd) - _cdf((off - 0.5) / sd)


def _sd(var):
    """sqrt of a variance that rounding (single floats) may have taken below 0."""
    return sqrt(var) if var > 1e-12 else 1e-6


def _cdf(x):
    return 0.5 * (1.0 + erf(x * 0.7071067811865476))


def export(p):
    """What a predictor learned, as plain data for the power-safe state."""
    n = min(p.learned, _SPINS)
    return {
        "a": p.a,
        "n": p.learned,
        "lo": [p._lo[i] for i in range(n)],
        "hi": [p._hi[i] for i in range(n)],
        "se": [[p._se_lo[i] for i in range(n)], [p._se_hi[i] for i in range(n)]],
        "drag": [p._pa, p.drag_spins],  # precision of a, spins it came from
        "b": [p.lb, p.lbv, p.nb, p.lbw],  # friction: log mean, variance, spins, precision
        "noise": [p.noise, p.nn],  # pass-time variance (s^2), spins
        "r": [p.lr, p.lrv, p.nr],  # log r (_pass_call): mean, variance, spins
        "changes": p.changes,  # wheel changes seen lately
        "laps_ll": p.laps_ll,  # the timing noise's kind: on each lap rather than each pass
    }


def restore(p, data):
    """Back to what export() gave; ignores data that does not fit (older formats too: what
    they lack starts afresh)."""
    try:
        lo = data["lo"]
        hi = data["hi"]
        if len(lo) > _SPINS or len(hi) != len(lo):
            return False
        a = float(data["a"])
        n = int(data["n"])
        pa, ka = data.get("drag", (1.0 / (_SD_A * _SD_A), 0))
        b = data.get("b", (0.0, 0.0, 0))
        lb, lbv, nb = b[:3]
        lbw = float(b[3]) if len(b) > 3 else 0.0  # older formats: from the spins' count
        noise, nn = data.get("noise", (0.0, 0))
        lr, lrv, nr = data.get("r", (log(_B_OVER_VC), 0.0, 0))
        changes = float(data.get("changes", 0.0))
        laps_ll = float(data.get("laps_ll", _LAPS_LL))
        # the brackets' standard errors (older formats: none, the centre as the brackets say)
        se_lo, se_hi = data.get("se", ((0.0,) * len(lo), (0.0,) * len(lo)))
        if len(se_lo) != len(lo) or len(se_hi) != len(lo):
            return False
        se_lo = [float(x) for x in se_lo]
        se_hi = [float(x) for x in se_hi]
        lr = float(lr)
        lrv = float(lrv)
        nr = int(nr)
        pa = float(pa)
        lb = float(lb)
        lbv = float(lbv)
        noise = float(noise)
        ka = int(ka)
        nb = int(nb)
        nn = int(nn)
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    if not (_A_MIN <= a <= 1.0 and n >= 0 and 0 < pa < 1e30 and lbv >= 0 and noise >= 0):
        return False
    if ka < 0 or nb < 0 or nn < 0 or not -20 < lb < 20 or not 0 <= lbw < 1e30:
        return False
    if nr < 0 or lrv < 0 or not -20 < lr < 20 or not 0 <= changes < 1e6:
        return False
    if not -1e6 < laps_ll < 1e6:
        return False
    for x in se_lo + se_hi:
        if not 0 <= x < 10:
            return False
    for i in range(len(lo)):
        p._lo[i] = lo[i]
        p._hi[i] = hi[i]
        p._se_lo[i] = se_lo[i]
        p._se_hi[i] = se_hi[i]
    p.a = a
    p.learned = n
    p._pa = pa
    p.drag_spins = ka
    p.lb = lb
    p.lbv = lbv
    p.nb = nb
    p.lbw = lbw if lbw > 0 else nb / p._lb_var()
    p.noise = noise
    p.nn = nn
    p.lr = lr
    p.lrv = lrv
    p.nr = nr
    p.changes = changes
    p.laps_ll = laps_ll
    p._estimate(min(n, _SPINS))
    return True
