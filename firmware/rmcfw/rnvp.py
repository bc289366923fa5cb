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
from array import array
from math import exp, log

from micropython import const

from rmcfw import ticks

_PASSES = const(64)  # pass times kept per spin (a spin has 10-25 laps)
_MAX_AHEAD = const(60)  # laps predicted at most (a ball hardly slowing: no prediction)
_SPINS = const(16)  # spins remembered to learn the drop speed
_PRIOR = const(4)  # weight of the wheel's prior, in spins
_FEW_LAPS = const(4)  # fewer laps tell little of the slowing: used only near the drop
_A_MIN = 0.8  # bounds of the per-lap drag factor: keeps a noisy fit physical
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
        self.to_drop = to_drop
        self.margin = margin  # log margin on v_c for a pass call: errs early, not late
        self.young = 0.5  # extra margin without a prior, divided by the spins learned + 1
        self.recent = 20  # laps in the fit of the current spin (the model holds that long)
        self.weight = 1.0  # weight of a lap relative to the next one
        self.learn_drag = True
        self.z = 1.5  # a pass is predicted when z standard errors of the fit above v_c
        self.noise = 0.0  # pass-time variance (s^2) seen in whole spins
        self.residual = 0.0
        self._rss = 0.0
        self._cww = self._cwb = self._cbb = 0.0
        self.prior = 0.0  # log v_c of the wheel's prior, when there is one
        self.a = 1.0
        self.learned = 0  # spins learned from
        self._t = array("f", bytes(4 * _PASSES))  # pass times, s from the first pass
        self._lo = array("f", bytes(4 * _SPINS))  # recent spins: log v_c was above these...
        self._hi = array("f", bytes(4 * _SPINS))  # ... and at or below these
        self._last_lap_s = last_lap_s
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
            # DESIGN.md: median last lap 1.1 s, the drop some 7% slower (young margin on top)
            self.prior = -2.0 * log(1.07 * self._last_lap_s)
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
        period, a little more than that period (no lap on the track can last longer)."""
        if self.has_prior or self.learned >= 8:
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
        scc = scd = sdd = scu = sdu = suu = 0.0
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
            suu += wn * u * u
            c *= inv
            d = d * inv + inv
            w *= fade
        det = scc * sdd - scd * scd
        if det <= 0:
            return None
        u = (sdd * scu - scd * sdu) / det
        b = (scc * sdu - scd * scu) / det
        self.residual = suu - 2 * (u * scu + b * sdu) + u * u * scc + 2 * u * b * scd + b * b * sdd
        # for the uncertainty of what is predicted from (u, b): the inverse normal matrix
        return u, b

    def _refine(self, a, w, b, k):
        """(w, b) fitted to the last k+1 pass times themselves, from a first guess, or None.

        Lap times are differences of noisy passes, so neighbouring laps share an error; the
        pass times carry it once. Model: going back from the last pass (speed^2 w), each
        earlier pass had v = (v_next + b)/a and the lap between took 2/(sqrt v + sqrt v_next);
        an offset takes the last pass's own error. Gauss-Newton, equal weights. Sets the
        covariance factors (_cww, _cwb, _cbb: times the pass-time variance) and _rss."""
        last = self.passes - 1
        inv = 1.0 / a
        for _ in range(3):
            if w <= 0:
                return None
            # sums for the normal equations of (dw, db, d_offset)
            s11 = s12 = s13 = s22 = s23 = s33 = r1 = r2 = r3 = rss = 0.0
            v = w
            tau = 0.0  # model time of pass last-j, relative to the last pass
            dw = db = 0.0  # its derivatives
            gw = 1.0  # dv/dw, dv/db of the speed^2 at that pass
            gb = 0.0
            y0 = self._t[last]
            for j in range(k + 1):
                r = (self._t[last - j] - y0) - tau
                s11 += dw * dw
                s12 += dw * db
                s13 += dw
                s22 += db * db
                s23 += db
                s33 += 1.0
                r1 += dw * r
                r2 += db * r
                r3 += r
                rss += r * r
                # one pass further back
                vp = (v + b) * inv
                if vp <= 0:
                    return None
                sv = vp**0.5
                sn = v**0.5
                q = 1.0 / ((sv + sn) * (sv + sn))
                # lap = 2/(sv+sn): d lap = -q*(dvp/sv + dv/sn)
                gwp = gw * inv
                gbp = (gb + 1.0) * inv
                tau -= 2.0 / (sv + sn)
                dw += q * (gwp / sv + gw / sn)
                db += q * (gbp / sv + gb / sn)
                v = vp
                gw = gwp
                gb = gbp
            # 3x3 solve (symmetric) by cofactors
            c11 = s22 * s33 - s23 * s23
            c12 = s13 * s23 - s12 * s33
            c13 = s12 * s23 - s13 * s22
            c22 = s11 * s33 - s13 * s13
            c23 = s12 * s13 - s11 * s23
            det = s11 * c11 + s12 * c12 + s13 * c13
            if det <= 0:
                return None
            w += (c11 * r1 + c12 * r2 + c13 * r3) / det
            b += (c12 * r1 + c22 * r2 + c23 * r3) / det
        self._cww = c11 / det
        self._cwb = c12 / det
        self._cbb = c22 / det
        self._rss = rss
        if w <= 0:
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
        if b <= 0 and a >= 1.0:
            return None  # not slowing down (noise): no prediction yet
        if self.passes <= _FEW_LAPS:
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
        f = self._refine(a, (u + a * u - b) / 2, b, k)
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
        k = 1.0 / (self.learned + 1) if self.learned < 3 else 0.25
        if self.learn_drag and laps >= 6:
            # drag: the a whose model fits the whole spin best (a search: the regression of
            # u_(n+1) on u_n would be biased by the noise on both)
            best = None
            a = _A_MIN
            while a <= 1.0001:
                if self._state(a, laps, 1.0) is not None and (best is None or self.residual < best):
                    best = self.residual
                    best_a = a
                a += 0.005
            if best is not None:
                self.a += k * (best_a - self.a)
        a = self.a
        f = self._state(a)
        if f is None:
            return False
        u, b = f
        n = laps if laps < self.recent else self.recent
        f = self._refine(a, (u + a * u - b) / 2, b, n)
        if f is None:
            return False
        last, b = f  # speed^2 at the last pass
        if n >= 6:
            self.noise += k * (self._rss / (n - 2) - self.noise)
        nxt = a * last - b  # ... and at the pass that did not come
        if not 0 < nxt < last:
            return False  # a fit that does not slow down to a stop: nothing to learn
        i = self.learned % _SPINS
        self._lo[i] = log(nxt)
        self._hi[i] = log(last)
        self.learned += 1
        self._estimate(min(self.learned, _SPINS))
        return True

    def _estimate(self, n):
        """Centre and spread of log v_c from the last n spins' brackets (lo, hi].

        On a steady wheel the highest lo and the lowest hi close in on v_c from both sides;
        where v_c varies from spin to spin they cross, by about that variation. Their middle
        is the centre either way, half their distance the spread. The prior counts as
        _PRIOR spins at the centre."""
        if n == 0:
            self.c = self.prior  # log v_c: the centre estimate
            self.spread = 0.0  # log half-width of what the brackets leave open
            return
        top = self._lo[0]
        bottom = self._hi[0]
        for i in range(1, n):
            if self._lo[i] > top:
                top = self._lo[i]
            if self._hi[i] < bottom:
                bottom = self._hi[i]
        c = (top + bottom) / 2
        # what the brackets leave open (steady wheel), or how far they cross (varying one)
        open_ = (bottom - top) / 2 if bottom > top else 0.0
        cross = (top - bottom) / 2 if top > bottom else 0.0
        if self.has_prior:
            # the prior and the bracket's middle agree within what the bracket leaves open
            w = _PRIOR / (_PRIOR + n)
            c = w * self.prior + (1 - w) * c
            open_ = 0.0
        self.c = c
        self.spread = open_ + cross

    def last_lap_s(self):
        """The learned drop speed as a period (s)."""
        return exp(-0.5 * self.c)


def export(p):
    """What a predictor learned, as plain data for the power-safe state."""
    n = min(p.learned, _SPINS)
    return {
        "a": p.a,
        "n": p.learned,
        "lo": [p._lo[i] for i in range(n)],
        "hi": [p._hi[i] for i in range(n)],
    }


def restore(p, data):
    """Back to what export() gave; ignores data that does not fit (older formats too)."""
    try:
        lo = data["lo"]
        hi = data["hi"]
        if len(lo) > _SPINS or len(hi) != len(lo):
            return False
        a = float(data["a"])
        n = int(data["n"])
    except (KeyError, TypeError, ValueError):
        return False
    if not (_A_MIN <= a <= 1.0 and n >= 0):
        return False
    for i in range(len(lo)):
        p._lo[i] = lo[i]
        p._hi[i] = hi[i]
    p.a = a
    p.learned = n
    p._estimate(min(n, _SPINS))
    return True
