# Realistic ball lap series for the predictor's tests (deterministic on both interpreters).
#
# A wheel has a critical speed (the ball leaves the rim below it); each spin integrates
# dW/dt = -a*W^2 - b from a launch of 0.5-0.7 s laps, with the friction b set so that the last
# laps grow by about 15% each, records the passes, stops at the drop, then adds timing noise.


class Rng:
    """A small LCG: the same numbers under CPython and MicroPython."""

    def __init__(self, seed):
        self.s = seed & 0x7FFFFFFF

    def random(self):
        self.s = (self.s * 1103515245 + 12345) & 0x7FFFFFFF
        return self.s / 2147483648.0

    def uniform(self, a, b):
        return a + (b - a) * self.random()

    def gauss(self, sigma):
        return sigma * (sum(self.random() for _ in range(12)) - 6.0)


def _lap(u0, a, b):
    """Duration of one revolution starting at speed^2 u0 (du/dtheta linear: u -> a*u - b)."""
    # u(theta) = (u0 + c) * a**theta - c with c = b / (1 - a); Simpson's rule over 16 steps
    c = b / (1.0 - a) if a < 1.0 else None
    total = 0.0
    for i in range(17):
        th = i / 16.0
        u = (u0 + c) * a**th - c if c is not None else u0 - b * th
        w = 1 if i in (0, 16) else (4 if i % 2 else 2)
        total += w / u**0.5
    return total / 48.0


class Wheel:
    """A wheel: the lap time at which the ball leaves it, and its ball's air drag per lap."""

    def __init__(self, rng, last_lap_s, drag=None, growth=(1.15, 1.22)):
        """growth: the range of g, the speed ratio over the last lap (u loses 1 - 1/g^2).
        The default makes the last lap ~11 % longer than the one before; (1.28, 1.38) makes
        it DESIGN.md's ~15 % (1.152 +- 0.014), and fast wheels' spins short (4-6 laps)."""
        self.rng = rng
        self.last_lap_s = last_lap_s
        self.drag = rng.uniform(0.0, 0.06) if drag is None else drag
        self.growth = growth

    def spin(self, noise_s=0.02, jitter=0.015, keep=None, lap_noise_s=0.0):
        """Pass times (s, from the first kept pass) of one spin. keep: only the last laps.
        noise_s: an error on each pass time (sensors, video); lap_noise_s: one on each lap
        (laps clocked one by one), so that the passes drift."""
        rng = self.rng
        # The ball leaves at the critical speed: instantaneous u below u_c (rev/s)^2.
        t_c = self.last_lap_s * 1.07 * (1.0 + rng.gauss(jitter))
        u_c = 1.0 / (t_c * t_c)
        u0 = 1.0 / min(rng.uniform(0.5, 0.7), 0.6 * self.last_lap_s) ** 2
        f = 1.0 - 1.0 / rng.uniform(self.growth[0], self.growth[1]) ** 2  # u lost, last lap
        a = 1.0 - self.drag
        b = (f - self.drag) * u_c  # du per lap = drag * u + b
        times = [0.0]
        u = u0
        while len(times) < 60:
            nxt = a * u - b
            if nxt < u_c:
                break
            times.append(times[-1] + _lap(u, a, b))
            u = nxt
        times = [p + rng.gauss(noise_s) for p in times]
        if lap_noise_s:
            drift = 0.0
            for i in range(1, len(times)):
                drift += rng.gauss(lap_noise_s)
                times[i] += drift
        if keep is not None and keep < len(times) - 1:
            times = times[-keep - 1 :]
        t0 = times[0]
        return [x - t0 for x in times]


def spin(rng, last_lap_s, noise_s=0.02, jitter=0.015, keep=None):
    return Wheel(rng, last_lap_s).spin(noise_s, jitter, keep)


def spins(seed, last_lap_s, count, **kw):
    """`count` spins of one wheel, pass times from the first (s); often only the last 5-10
    laps clocked (every third spin)."""
    w = Wheel(Rng(seed), last_lap_s)
    out = []
    for i in range(count):
        keep = None if i % 3 else 5 + i % 6
        out.append(w.spin(keep=keep, **kw))
    return out


def laps(times):
    return [times[i + 1] - times[i] for i in range(len(times) - 1)]
