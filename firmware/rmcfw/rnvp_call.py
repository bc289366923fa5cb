# Deciding the call. Counted to the last pass: the readings of the spin (rmcfw.rnvp_readings)
# followed pass by pass ahead give each pass the probability that it is the last, and its
# time a standard error; the call is chosen from that table (Ahead). Counted to the drop (the
# table's: the instant the ball leaves the rim, which its sensors see): the wheel's model run
# forward from the fitted pass speed until the speed^2 falls below the drop speed v_c
# (drop_call). docs/firmware.md, "Deciding the call".
from array import array
from math import exp, sqrt

from micropython import const

from rmcfw.rnvp_maths import cdf, quad, sd, within
from rmcfw.rnvp_readings import FIT_A, FIT_B, FIT_COV, FIT_NOISE, FIT_SEEN, weigh
from rmcfw.rnvp_slices import over, run

MAX_AHEAD = const(60)  # laps predicted at most (a ball hardly slowing: no prediction)
MIN_LAPS = const(4)  # a spin of fewer laps is void: its last pass is at least the 4th
_RISK = 0.001  # a pass call may miss a last pass this likely (a late call)
_GUARD = 0.02  # s: a call bounded by a pass comes at least this much before it
_OFFSETS = (0.0, -0.4, -0.2, 0.2, 0.4)  # s: calls tried around each pass's lead
_FEW_LAPS = const(4)  # a call to the drop: fewer laps tell little of the slowing


class Ahead:
    """The passes ahead of the current one, as the readings see them: each one's time (s
    from the first pass), its standard error (s) and the probability that it is the last."""

    def __init__(self):
        self.time = array("f", bytes(4 * MAX_AHEAD))
        self.error = array("f", bytes(4 * MAX_AHEAD))
        self.p_last = array("f", bytes(4 * MAX_AHEAD))

    def decide(self, s, readings, passes_seen, lap_noise, lead_s, lead_revs):
        """decide_steps() run to its end."""
        return run(self.decide_steps(s, readings, passes_seen, lap_noise, lead_s, lead_revs))

    def decide_steps(self, s, readings, passes_seen, lap_noise, lead_s, lead_revs):
        """(call time (s), the pass ahead aimed at as the last), or None: the readings
        mixed by their weights, at the current pass at s. Resumable (rmcfw.rnvp_slices): a
        checkpoint at each pass ahead and each call tried.

        Which pass is the last is uncertain (v_c, the fit): each pass ahead gets the
        probability that it is the last, and its time a standard error. The call may come
        after the last pass with at most _RISK probability (late()); within that bound it
        takes the time that puts the most probability within +-0.5 s of the lead. When the
        next pass may or may not be the last, a call just before it is within for the pass
        after it, whose lap is shorter than lead + 0.5 s: the doubt then costs little."""
        likeliest = weigh(readings)  # the pass times come from the likelier reading
        if over():
            yield
        n, first = yield from self._fill(s, readings, likeliest, passes_seen, lap_noise)
        if first < 0:
            return None  # no end in sight: the safety limit stands
        latest = yield from self._latest(s, n)
        if lead_revs > 0:
            return (yield from self._revs_call(s, n, latest, lead_revs))
        return (yield from self._lead_call(s, n, first, latest, lead_s))

    def _fill(self, s, readings, likeliest, passes_seen, lap_noise):
        """Follow the readings pass by pass ahead and fill the table; (passes in it, the
        earliest that may be the last or -1). A pass before the 4th voids the spin (decree:
        fewer than 4 revolutions): while it is ahead, it comes, and the readings are
        weighed by how likely they thought it."""
        f = likeliest.fit
        noise = f[FIT_NOISE]
        time_at = self.time
        error_at = self.error
        p_last_at = self.p_last
        t = s
        d_time = [0.0, 0.0, 0.0]  # d time / d (w, b, a) of the pass ahead
        cumulative = 0.0
        first = -1
        n = 0
        while n < MAX_AHEAD:
            time_at[n] = t
            # the fit's error, and the pass's own (with lap noise: that of each lap to it)
            own = n if lap_noise else 1
            err = quad(d_time[0], d_time[1], d_time[2], *f[FIT_COV:FIT_SEEN])
            error_at[n] = sd(noise * (err + own)) if n else 0.0
            void = passes_seen + n <= MIN_LAPS
            p_last = 0.0
            next_alive = 0.0
            lap = None
            for h in readings:
                h_fit = h.fit
                v = h.v
                v_next = h_fit[FIT_A] * v - h_fit[FIT_B]
                grad_w = h_fit[FIT_A] * h.grad_w
                grad_b = h_fit[FIT_A] * h.grad_b - 1.0
                grad_a = v + h_fit[FIT_A] * h.grad_a
                alive = _next_alive(h, v_next, grad_w, grad_b, grad_a, void)
                if h is likeliest:
                    lap = _lap(h, v_next, grad_w, grad_b, grad_a, d_time)
                p_last += h.weight * (h.reached - alive)
                next_alive += h.weight * alive
                h.v = v_next
                h.grad_w = grad_w
                h.grad_b = grad_b
                h.grad_a = grad_a
                h.reached = alive
            if void:
                _normalise(readings)
                next_alive = 1.0  # that pass comes (given), whatever the readings thought
            p_last_at[n] = p_last  # the pass n ahead is the last one
            cumulative += p_last
            if first < 0 and cumulative > _RISK:
                first = n
            n += 1
            if next_alive < 1e-4 or (first >= 0 and n > first + 2) or lap < 0:
                break
            t += lap
            if over():
                yield
        return n, first

    def _latest(self, s, n):
        """The latest call whose risk of coming after the last pass stays within _RISK."""
        latest = s
        if self.p_last[0] <= _RISK:
            lo = s
            hi = self.time[n - 1]
            if over():
                yield
            if self._late(hi, n) <= _RISK:
                lo = hi
            else:
                for _ in range(16):
                    x = (lo + hi) / 2
                    if self._late(x, n) <= _RISK:
                        lo = x
                    else:
                        hi = x
                    if over():
                        yield
            latest = lo - _GUARD if lo - _GUARD > s else s
        return latest

    def _lead_call(self, s, n, first, latest, lead):
        """Within the latest call, the one most likely within +-0.5 s of the lead; (call,
        the pass aimed at)."""
        time_at = self.time
        error_at = self.error
        p_last_at = self.p_last
        best = -1.0
        call = latest
        aim = first
        for k in range(first, n):
            for shift in _OFFSETS:
                x = time_at[k] - lead + shift
                if x > latest:
                    x = latest
                if x < s:
                    x = s
                score = 0.0
                for j in range(first, n):
                    score += p_last_at[j] * within(time_at[j] - x - lead, error_at[j])
                # centred leads first, among calls as likely
                off = time_at[k] - x - lead
                score -= 0.001 * (off if off > 0 else -off)
                if score > best:
                    best = score
                    call = x
                    aim = k
                if over():
                    yield
        return call, aim

    def _revs_call(self, s, n, latest, revs):
        """A lead in revolutions: the call at the pass `revs` laps before the last one, or
        in the lap that ends there, most likely so within the latest call the risk bound
        allows; (call, the pass ahead aimed at as the last)."""
        time_at = self.time
        p_last_at = self.p_last
        best = -1.0
        call = s
        aim = 0
        i = 0  # the lap the call falls in: the one that ends at the pass i ahead
        for m in range(n):
            x = time_at[m] if time_at[m] < latest else latest
            if x < s:
                x = s
            while i < m and time_at[i] < x:
                i += 1
            j = i + revs  # the last pass that puts this call `revs` laps before it
            if j < n and p_last_at[j] > best:
                best = p_last_at[j]
                call = x
                aim = j
            if over():
                yield
        return call, aim

    def _late(self, x, n):
        """Probability that a call at x comes after the last pass (by the table)."""
        time_at = self.time
        error_at = self.error
        p_last_at = self.p_last
        risk = 0.0
        for j in range(n):
            if error_at[j] > 0:
                risk += p_last_at[j] * cdf((x - time_at[j]) / error_at[j])
            elif x > time_at[j]:
                risk += p_last_at[j]
        return risk


def _next_alive(h, v_next, grad_w, grad_b, grad_a, void):
    """The probability that reading h reaches the next pass (speed^2 v_next, of gradient
    (grad_w, grad_b, grad_a)), given the current pass and at most its chance of reaching this
    one. A pass that voids the spin comes: the reading is weighed by how likely it thought it
    instead."""
    if v_next <= 0:
        return 0.0
    alive = h.alive(v_next, grad_w, grad_b, grad_a)
    if void:
        p = alive if alive > 1e-9 else 1e-9
        h.weight *= p / h.current
        h.current = p
        alive = 1.0
    else:
        alive /= h.current
    return h.reached if alive > h.reached else alive


def _lap(h, v_next, grad_w, grad_b, grad_a, d_time):
    """The lap from reading h's pass to the next (speed^2 v_next, of gradient (grad_w, grad_b,
    grad_a)), -1 where there is none; adds its derivatives by (w, b, a) to d_time."""
    if v_next <= 0:
        return -1.0
    sqrt_v = sqrt(h.v)
    sqrt_next = sqrt(v_next)
    q = 1.0 / ((sqrt_v + sqrt_next) * (sqrt_v + sqrt_next))
    d_time[0] -= q * (h.grad_w / sqrt_v + grad_w / sqrt_next)  # lap = 2/(sqrt_v + sqrt_next)
    d_time[1] -= q * (h.grad_b / sqrt_v + grad_b / sqrt_next)
    d_time[2] -= q * (h.grad_a / sqrt_v + grad_a / sqrt_next)
    return 2.0 / (sqrt_v + sqrt_next)


def _normalise(readings):
    total = 0.0
    for h in readings:
        total += h.weight
    for h in readings:
        h.weight /= total


# --- the call counted to the drop ---


def drop_call(p, s, u, b, k):
    """drop_call_steps() run to its end."""
    return run(drop_call_steps(p, s, u, b, k))


def drop_call_steps(p, s, u, b, k):
    """Call time (s) for the Predictor p at its pass at s, or None; sets p.drop_s and
    p.revs_left. u, b: the last lap's mean speed^2 and the friction (Passes.state), k:
    the laps to fit. Resumable (rmcfw.rnvp_slices): checkpoints in the fit and at each
    lap run forward."""
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
    f = yield from passes.refine_steps(a, (u + a * u - b) / 2, b, k)  # sensors: exact passes
    if f is None:
        return None
    v, b = f
    u = (2 * v + b) / (1 + a)  # the last lap's mean, from the refined pass speed
    v_c = exp(wheel.centre + wheel.margin * 0.5)  # the drop instant: an unbiased threshold
    # pass speeds^2 follow the same map: the passes until the speed^2 falls below v_c
    t = s
    n = 0
    while n < MAX_AHEAD:
        v_next = a * v - b
        if v_next < v_c:
            break
        t += 2.0 / (v**0.5 + v_next**0.5)  # a lap with speed^2 linear in the angle
        v = v_next
        n += 1
        if over():
            yield
    if n >= MAX_AHEAD:
        return None
    if p.lead_revs > 0:
        # the pass lead_revs laps before the last: the pass n - lead_revs ahead
        call = s
        if n > p.lead_revs:
            call = yield from _pass_ahead(a, s, u, b, n - p.lead_revs)
        # (set once the steps are over: none is known while they are under way)
        p.revs_left = n
        p.drop_s = t
        return call
    p.revs_left = n
    if v > v_c:
        # the part of the lap until the speed^2, linear in the angle, meets v_c
        v_next = a * v - b
        t += 2.0 * (v**0.5 - v_c**0.5) / (v - v_next)
    p.drop_s = t
    return t - p.lead_s


def _pass_ahead(a, s, u, b, k):
    """Time (s) of the k-th pass after the one at s, from the last lap's mean u.
    Resumable: a checkpoint at each lap."""
    v = (u + a * u - b) / 2
    for _ in range(k):
        v_next = a * v - b
        s += 2.0 / (v**0.5 + v_next**0.5)
        v = v_next
        if over():
            yield
    return s
