# The predictor's view of the spin on the track: its pass times, and the wheel's model fitted
# to them (docs/firmware.md, "The model"). Going back from the last pass, each
# lap's speed^2 follows from the next one's by the drag a and the friction b.
from array import array
from math import sqrt

from micropython import const

from rmcfw.rnvp_maths import invert4_steps
from rmcfw.rnvp_slices import over, run

PASSES = const(64)  # pass times kept per spin (a spin has 10-25 laps)


class Passes:
    """The pass times of one spin (s from its first pass) and the fits made on them.

    refine() leaves its results here: the covariance factors of (w, b, a) (times the
    pass-time variance, or a lap's with lap noise), the residual sum of squares and the drag
    it fitted. `recent` and `fade` shape state()'s fit of the lap means."""

    def __init__(self):
        self.times = array("f", bytes(4 * PASSES))
        self.count = 1  # passes seen, the first included
        self.recent = 20  # laps in the fit of the current spin (the model holds that long)
        self.fade = 1.0  # weight of a lap relative to the next one
        self.cov_ww = self.cov_wb = self.cov_bb = 0.0
        self.cov_wa = self.cov_ba = self.cov_aa = 0.0
        self.rss = 0.0
        self.drag_fit = 1.0
        self._normal = [0.0] * 16  # the normal matrix of a fit, then its inverse
        self._rhs = [0.0] * 4  # its right-hand side
        self._walked = False  # _walk reached the passes asked (the model has them all)

    def add(self, s):
        """A pass at s (s from the first); a ball that never slows keeps the latest ones."""
        if self.count >= PASSES:
            for i in range(PASSES - 1):
                self.times[i] = self.times[i + 1]
            self.count -= 1
        self.times[self.count] = s
        self.count += 1

    def u(self, lap):
        """Lap-mean (speed)^2 of lap `lap` (between passes lap and lap+1), in (rev/s)^2."""
        period = self.times[lap + 1] - self.times[lap]
        if period <= 0:
            return -1.0
        return 1.0 / (period * period)

    def state(self, a, k=None, fade=None):
        """state_steps() run to its end."""
        return run(self.state_steps(a, k, fade))

    def state_steps(self, a, k=None, fade=None):
        """(u, b): the last lap's u and the friction b of this spin, or None. Resumable
        (rmcfw.rnvp_slices): two checkpoints a lap.

        With the drag a known, the laps before the last one follow from those two values:
        u_(L-j) = u_L*c_j + b*d_j (c_j = a^-j, d_j = sum of a^-i for i = 1..j), so both come
        from a weighted least-squares fit over the recent laps, with no differencing of the
        noisy lap times.
        """
        laps = self.count - 1
        k = min(laps, k or self.recent)
        if fade is None:
            fade = self.fade
        if k < 2:
            return None
        sum_cc = sum_cd = sum_dd = sum_cu = sum_du = 0.0
        c = 1.0
        d = 0.0
        weight = 1.0
        inv = 1.0 / a
        for j in range(k):
            u = self.u(laps - 1 - j)
            if u <= 0:
                return None
            lap_weight = weight / (u * u * u)  # lap-time noise weighs on u as u^1.5
            sum_cc += lap_weight * c * c
            sum_cd += lap_weight * c * d
            if over():
                yield  # (a lap's sums take ~0.2 ms on the chip: a checkpoint halfway)
            sum_dd += lap_weight * d * d
            sum_cu += lap_weight * c * u
            sum_du += lap_weight * d * u
            c *= inv
            d = d * inv + inv
            weight *= fade
            if over():
                yield
        det = sum_cc * sum_dd - sum_cd * sum_cd
        if det <= 0:
            return None
        u = (sum_dd * sum_cu - sum_cd * sum_du) / det
        b = (sum_cc * sum_du - sum_cd * sum_cu) / det
        return u, b

    def refine(self, a, w, b, k, b0=0.0, lam=0.0, lam_a=0.0, lap_noise=False):
        """refine_steps() run to its end."""
        return run(self.refine_steps(a, w, b, k, b0, lam, lam_a, lap_noise))

    def refine_steps(self, a, w, b, k, b0=0.0, lam=0.0, lam_a=0.0, lap_noise=False):
        """(w, b) fitted to the last k+1 pass times themselves, from a first guess, or None.
        Resumable (rmcfw.rnvp_slices): checkpoints inside each pass row and each pivot of a
        solve.

        Gauss-Newton, equal weights, four steps. Each step walks the model back from the
        last pass (_walk), sums the normal equations of the pass times' errors
        (_pass_sums), or of the laps' (lap_noise: _lap_sums), adds the priors (_priors) and
        solves them (invert4_steps).
        The unknowns are w (the speed^2 at the last pass), b, a and the last pass's own
        error. Sets the covariance factors, rss and drag_fit.

        lam > 0: b has a prior b0, of variance (pass-time variance)/lam: the friction this
        wheel's spins had, which short noisy series cannot tell from their own laps.
        lam_a > 0: the drag is fitted too, with the given a as its prior (variance
        (pass-time variance)/lam_a): a wheel not yet learned, or drifting, is then not
        taken for a known one. Otherwise a is held."""
        a0 = a
        m = self._normal
        rss = 0.0
        for _ in range(4):
            if w <= 0 or a <= 0:
                return None
            rows = self._walk(a, w, b, k)
            if lap_noise:
                rss = yield from self._lap_sums(rows)
            else:
                rss = yield from self._pass_sums(rows, k)
            if not self._walked:
                return None
            self._priors(lam, lam * (b0 - b), lam_a, lam_a * (a0 - a))
            if not (yield from invert4_steps(m)):
                return None
            y = self._rhs
            w += m[0] * y[0] + m[1] * y[1] + m[2] * y[2] + m[3] * y[3]
            b += m[1] * y[0] + m[5] * y[1] + m[6] * y[2] + m[7] * y[3]
            if lam_a > 0:
                a += m[2] * y[0] + m[6] * y[1] + m[10] * y[2] + m[11] * y[3]
        self.cov_ww = m[0]
        self.cov_wb = m[1]
        self.cov_bb = m[5]
        if lam_a > 0:
            self.cov_wa = m[2]
            self.cov_ba = m[6]
            self.cov_aa = m[10]
        else:
            self.cov_wa = self.cov_ba = self.cov_aa = 0.0
        self.rss = rss
        self.drag_fit = a
        if w <= 0 or a <= 0:
            return None
        return w, b

    def _walk(self, a, w, b, k):
        """The model's pass times from the last pass back k passes, from speed^2 w at the
        last one: each earlier pass had v = (v_next + b)/a, and the lap between took
        2/(sqrt v + sqrt v_next). Yields a row for each pass, last first: its time's
        residual and its derivatives by (w, b, a). Rows are made as they are summed, so that
        none is kept. _walked tells, once it is over, whether the model had every pass: it
        stops short where it has no such pass. Yields None at a checkpoint halfway through
        each row and at its end (a row's walk and sums take ~0.5 ms on the chip): the sums
        pass it on."""
        self._walked = False
        inv = 1.0 / a
        v = w
        tau = 0.0  # model time of pass last-j, relative to the last pass
        d_w = d_b = d_a = 0.0  # its derivatives
        grad_w = 1.0  # dv/dw, dv/db, dv/da of the speed^2 at that pass
        grad_b = grad_a = 0.0
        times = self.times
        last = self.count - 1
        t_last = times[last]
        # each pass's sqrt(v) is the one before it in the walk's: taken once (every float
        # operation allocates on the chip, and this runs 4 x k times a refit)
        sqrt_v = sqrt(v)
        for j in range(k + 1):
            yield (times[last - j] - t_last) - tau, d_w, d_b, d_a
            # one pass further back
            v_prev = (v + b) * inv
            if v_prev <= 0:
                return
            sqrt_prev = sqrt(v_prev)
            sqrt_sum = sqrt_prev + sqrt_v
            q = 1.0 / (sqrt_sum * sqrt_sum)
            # lap = 2/(sqrt_prev + sqrt_v): d lap = -q*(dv_prev/sqrt_prev + dv/sqrt_v)
            grad_w_prev = grad_w * inv
            grad_b_prev = (grad_b + 1.0) * inv
            grad_a_prev = (grad_a - v_prev) * inv
            tau -= 2.0 / sqrt_sum
            if over():
                yield None
            d_w += q * (grad_w_prev / sqrt_prev + grad_w / sqrt_v)
            d_b += q * (grad_b_prev / sqrt_prev + grad_b / sqrt_v)
            d_a += q * (grad_a_prev / sqrt_prev + grad_a / sqrt_v)
            v = v_prev
            sqrt_v = sqrt_prev
            grad_w = grad_w_prev
            grad_b = grad_b_prev
            grad_a = grad_a_prev
            if over():
                yield None
        self._walked = True

    def _pass_sums(self, rows, k):
        """The error is on each pass (sensors, video frames): the normal equations of the
        k+1 pass rows, in (d_w, d_b, d_a, d_offset), into _normal (upper triangle) and _rhs. Returns
        the residual sum of squares; checkpoints in each row and in the walk's (a None
        row)."""
        # sums of the gradients' products
        sum_ww = sum_wb = sum_wa = sum_bb = sum_ba = sum_aa = 0.0
        sum_w = sum_b = sum_a = 0.0  # ... and of the gradients: the offset's column
        y_w = y_b = y_a = y_offset = 0.0  # the gradients times the residuals
        rss = 0.0
        for row in rows:
            if row is None:
                yield  # the walk's checkpoint: the slice's time is up
                continue
            r, d_w, d_b, d_a = row
            sum_ww += d_w * d_w
            sum_wb += d_w * d_b
            sum_wa += d_w * d_a
            sum_bb += d_b * d_b
            sum_ba += d_b * d_a
            sum_aa += d_a * d_a
            if over():
                yield
            sum_w += d_w
            sum_b += d_b
            sum_a += d_a
            y_w += d_w * r
            y_b += d_b * r
            y_a += d_a * r
            y_offset += r
            rss += r * r
            if over():
                yield
        m = self._normal
        y = self._rhs
        # (set here, not by a function: one of 10 arguments has a frame the heap would take)
        m[0] = sum_ww
        m[1] = sum_wb
        m[2] = sum_wa
        m[5] = sum_bb
        m[6] = sum_ba
        m[10] = sum_aa
        y[0] = y_w
        y[1] = y_b
        y[2] = y_a
        m[3] = sum_w
        m[7] = sum_b
        m[11] = sum_a
        m[15] = float(k + 1)
        y[3] = y_offset
        return rss

    def _lap_sums(self, rows):
        """The error is on each lap (laps clocked one by one, so the passes drift): the
        normal equations of the lap rows, each the difference of the two pass rows around
        it, in (d_w, d_b, d_a) with no offset. Returns the residual sum of squares; checkpoints
        in each row and in the walk's (a None row)."""
        sum_ww = sum_wb = sum_wa = sum_bb = sum_ba = sum_aa = 0.0
        y_w = y_b = y_a = 0.0
        rss = 0.0
        # the pass after the lap (rows go back in time; a walk's first row comes before its
        # first checkpoint)
        r_after, d_w_after, d_b_after, d_a_after = next(rows)
        for row in rows:
            if row is None:
                yield  # the walk's checkpoint: the slice's time is up
                continue
            r, d_w, d_b, d_a = row
            r_lap = r_after - r
            g_w = d_w_after - d_w
            g_b = d_b_after - d_b
            g_a = d_a_after - d_a
            sum_ww += g_w * g_w
            sum_wb += g_w * g_b
            sum_wa += g_w * g_a
            sum_bb += g_b * g_b
            sum_ba += g_b * g_a
            sum_aa += g_a * g_a
            if over():
                yield
            y_w += g_w * r_lap
            y_b += g_b * r_lap
            y_a += g_a * r_lap
            rss += r_lap * r_lap
            r_after = r
            d_w_after = d_w
            d_b_after = d_b
            d_a_after = d_a
            if over():
                yield
        m = self._normal
        y = self._rhs
        m[0] = sum_ww
        m[1] = sum_wb
        m[2] = sum_wa
        m[5] = sum_bb
        m[6] = sum_ba
        m[10] = sum_aa
        y[0] = y_w
        y[1] = y_b
        y[2] = y_a
        m[3] = m[7] = m[11] = y[3] = 0.0  # no offset: its row says d_offset = 0
        m[15] = 1.0
        return rss

    def _priors(self, lam, lam_b, lam_a, lam_da):
        """Add the priors to the normal equations (on b: lam, lam_b; on a: lam_a, lam_da,
        or a held when lam_a is 0), before they are solved. (Not steps: a generator is
        allocated at each call, 4 a fit.)"""
        m = self._normal
        y = self._rhs
        m[5] += lam
        y[1] += lam_b
        if lam_a > 0:
            m[10] += lam_a
            y[2] += lam_da
        else:  # a held: its row says da = 0
            m[2] = m[6] = m[11] = y[2] = 0.0
            m[10] = 1.0
