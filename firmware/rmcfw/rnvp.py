# "Rien ne va plus": when will the ball leave the track, and when to call it.
#
# Physics (DESIGN.md): on the track dW/dt = -alpha*W^2 - beta. With u = W^2 and the angle,
# du/dtheta = -2*alpha*u - 2*beta is linear, so the lap-mean u_n = (1/T_n)^2 of successive
# laps, in (rev/s)^2, follows u_(n+1) = a*u_n - b exactly: a = exp(-4*pi*alpha) is the air
# drag of the ball (a property of the wheel and ball, learned over whole spins, where the long
# baseline beats the timing noise), b the rim friction of this spin (fitted on its last laps).
#
# The ball leaves the rim when its speed falls below a critical speed set by the wheel
# (R*W^2 < g*tan(incline)): a lap is completed only while u stays above a threshold u_c, also
# learned from the spins seen (wheels differ): after each drop, u_c lies between the u of the
# last full lap and that of the lap that was not completed.
#
# The call comes `lead` seconds (or revolutions) before the predicted last pass of the ball,
# or as soon as a lap has lasted longer than the safety limit, whichever is first.
from array import array

from micropython import const

from rmcfw import ticks

_PASSES = const(64)  # pass times kept per spin (a spin has 10-25 laps)
_MAX_AHEAD = const(60)  # laps predicted at most (a ball hardly slowing: no prediction)
_AHEAD_KEPT = const(16)
_SPINS = const(16)  # spins remembered to learn the threshold
_A_MIN = 0.8  # bounds of the per-lap drag factor: keeps a noisy fit physical
WHY_FIT = "fit"
WHY_LIMIT = "limit"


class Predictor:
    """One per table. reset() at the first pass of a spin, lap() at every later pass.

    After each pass, `deadline` (us, on the ticks clock) is when to call unless another pass
    comes first; due(now) says whether it has come, `why` how it was set. `drop_s` is the
    predicted time of the ball's last pass (s from the first pass), None while there is none.
    """

    def __init__(
        self, lead_s=1.0, lead_revs=0, limit_s=1.4, last_lap_s=1.1, margin=0.06, learn=0.25
    ):
        self.lead_s = lead_s
        self.lead_revs = lead_revs  # > 0: lead counted in revolutions instead of seconds
        self.limit_s = limit_s
        self.margin = margin  # threshold raised by this fraction: calls err early, not late
        self.learn = learn  # EMA factor once a few spins are known
        self.learn_drag = True
        self.young = 0.6  # extra margin, divided by the spins learned + 1
        self.recent = 6  # laps in the fit of the current spin
        self.weight = 0.8  # weight of a lap relative to the next one
        # Until a drop is seen: a last lap of last_lap_s (DESIGN.md: median of clocked spins),
        # the next one 15% longer, and no drag.
        self.u_c = _mid(1.0 / (last_lap_s * last_lap_s), 1.0 / (1.3225 * last_lap_s * last_lap_s))
        self.a = 1.0
        self.learned = 0  # spins learned from
        self._t = array("f", bytes(4 * _PASSES))  # pass times, s from the first pass
        self._ahead = array("f", bytes(4 * _AHEAD_KEPT))  # predicted pass times
        self._lo = array("f", bytes(4 * _SPINS))  # recent spins: u_c was above these
        self.reset(0)

    def reset(self, t0):
        """A new spin whose first pass is at t0 (us ticks)."""
        self.t0 = t0
        self.passes = 1
        self.deadline = ticks.add(t0, int(self.limit_s * 1e6))
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
        """The safety limit on a lap (s): limit_s, or for a wheel known (8 spins) to hold
        slower laps, a quarter more than the shortest last lap it was seen to drop after."""
        if self.learned >= 8:
            slow = 1.25 / self.u_c**0.5
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
        return u, b

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
        # few spins seen: one more unknown on the drop speed, so a wider safety margin
        u_c = self.u_c * (1.0 + self.margin + self.young / (self.learned + 1))
        t = s
        n = 0
        times = self._ahead
        nxt = a * u - b
        while n < _MAX_AHEAD:
            u = nxt
            nxt = a * u - b
            if (u + nxt) / 2 < u_c:  # the speed at the end of that lap: below, no pass
                break
            t += 1.0 / u**0.5
            if n < _AHEAD_KEPT:
                times[n] = t
            n += 1
        if n >= _MAX_AHEAD:
            return None
        self.drop_s = t
        self.revs_left = n
        if self.lead_revs > 0:
            i = n - self.lead_revs  # the pass lead_revs laps before the last one
            if i <= 0:
                return s
            return times[i - 1] if i <= _AHEAD_KEPT else t - self.lead_revs
        return t - self.lead_s

    def learn_drop(self):
        """The ball left the track after the last pass: learn drag and threshold from the spin.
        Returns False when the spin is too short to learn from."""
        laps = self.passes - 1
        if laps < 3:
            return False
        k = 1.0 / (self.learned + 1) if self.learned < 3 else self.learn
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
        f = self._state(self.a)
        if f is None:
            return False
        last, b = f
        nxt = self.a * last - b  # the lap that was not completed
        after = self.a * nxt - b
        # the speed at a pass is about the mean of the laps either side of it
        last = (last + nxt) / 2
        nxt = (nxt + after) / 2
        if not 0 < nxt < last:
            return False  # a fit that does not slow down to a stop: nothing to learn
        i = self.learned % _SPINS
        self._lo[i] = nxt
        self.learned += 1
        self.u_c = self._threshold(min(self.learned, _SPINS))
        return True

    def _threshold(self, n):
        """The threshold from the last n spins: each said u_c lay in (lo, hi], and a
        threshold at or below a spin's lo would have called that spin late. So take the
        highest lo seen (and _predict adds `margin`): no recent spin would have been late; on
        a wheel whose drop speed is steady the lo's stay below every hi, so none early either.
        Where the drop speed varies from spin to spin, this errs early, never late."""
        top = self._lo[0]
        for i in range(1, n):
            if self._lo[i] > top:
                top = self._lo[i]
        return top

    def last_lap_s(self):
        """The learned threshold as a lap time (s)."""
        return 1.0 / self.u_c**0.5


def _mid(a, b):
    return (a * b) ** 0.5


def export(p):
    """What a predictor learned, as plain data for the power-safe state."""
    n = min(p.learned, _SPINS)
    return {
        "u_c": p.u_c,
        "a": p.a,
        "n": p.learned,
        "lo": [p._lo[i] for i in range(n)],
    }


def restore(p, data):
    """Back to what export() gave; ignores data that does not fit."""
    try:
        lo = data["lo"]
        if len(lo) > _SPINS:
            return False
        u_c = float(data["u_c"])
        a = float(data["a"])
        n = int(data["n"])
    except (KeyError, TypeError, ValueError):
        return False
    if not (u_c > 0 and _A_MIN <= a <= 1.0 and n >= 0):
        return False
    for i in range(len(lo)):
        p._lo[i] = lo[i]
    p.u_c = u_c
    p.a = a
    p.learned = n
    return True
