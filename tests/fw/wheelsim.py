# Synthetic sensor events for the firmware tests: a rotor turning, a ball running its laps,
# dropping, bouncing among the pockets and coming to rest. Events are (t_us, channel, value)
# in time order, fed to rmcfw.table.Table.feed with poll() in between (run()).
from rmcfw import channels as ch

ROTOR_CPR = 156  # counts per revolution: 39 slots, both edges of both channels


def rotor_edges(t0, t1, period_us, direction, events, phase=0):
    """Quadrature edges from t0 to t1 for a rotor turning once per period_us."""
    step = period_us // ROTOR_CPR
    seq = ((0, 1), (1, 1), (0, 0), (1, 0))  # (channel B?, level): A up, B up, A down, B down
    if direction < 0:
        seq = ((1, 1), (0, 1), (1, 0), (0, 0))
    t = t0
    i = phase
    while t < t1:
        b, level = seq[i % 4]
        events.append((t, ch.ROTOR_B if b else ch.ROTOR_A, level))
        t += step
        i += 1
    return i


def ball_passes(times_us, direction, events, gap_us=15000, drop_a=None, drop_b=None):
    """Both ball sensors pulse at each pass; direction +1: A then B, -1: B then A.
    drop_a / drop_b: pass indexes where that sensor misses the ball."""
    for i, t in enumerate(times_us):
        first, second = (ch.BALL_A, ch.BALL_B) if direction > 0 else (ch.BALL_B, ch.BALL_A)
        t_first = t if direction > 0 else t - gap_us
        t_second = t + gap_us if direction > 0 else t
        if not (drop_a and i in drop_a and first == ch.BALL_A) and not (
            drop_b and i in drop_b and first == ch.BALL_B
        ):
            events.append((t_first, first, 1))
        if not (drop_a and i in drop_a and second == ch.BALL_A) and not (
            drop_b and i in drop_b and second == ch.BALL_B
        ):
            events.append((t_second, second, 1))


def laps_to_times(t0, laps_s):
    out = [t0]
    for lap in laps_s:
        out.append(out[-1] + int(lap * 1e6))
    return out


LAPS = (0.55, 0.57, 0.6, 0.63, 0.67, 0.71, 0.76, 0.82, 0.89, 0.97, 1.07, 1.2)


def spin_events(t0, rdir, bdir, pocket, laps=LAPS, bounce=(5, 17, 30), settle_us=3000000):
    """Events of one spin starting at t0: rotor turning rdir, ball launched bdir, resting in
    pocket channel `pocket` after bouncing through the channels in `bounce`."""
    ev = []
    times = laps_to_times(t0, laps)
    t_end = times[-1] + 1500000 + 200000 * len(bounce) + settle_us
    rotor_edges(t0 - 3000000, t_end, 4000000, rdir, ev)
    ball_passes(times, bdir, ev)
    t = times[-1] + 900000  # the ball leaves the track during the next lap
    for b in bounce:
        ev.append((t, b, 1))
        ev.append((t + 120000, b, 0))
        t += 200000
    ev.append((t, pocket, 1))
    ev.sort(key=lambda e: e[0])
    return ev, t, t_end


def session_events(plan, t=5_000_000):
    """The events of spins (rdir, bdir, pocket) played 5 s apart, the ball picked up 1 ms
    after each rests. Returns (events in time order, the session's end)."""
    ev = []
    for rdir, bdir, pocket in plan:
        e, _, t_end = spin_events(t, rdir, bdir, pocket)
        ev += e
        ev.append((t_end + 1000, pocket, 0))  # the croupier picks the ball up
        t = t_end + 5_000_000
    ev.sort(key=lambda e: e[0])
    return ev, t


def sensors_at_power_up(table, events, t_cut, t_on):
    """A table started again at t_on after a cut at t_cut: the lid closed and the sensors as
    the board reads them at power-up (the rotor's quadrature levels, the pockets held)."""
    table.feed(t_on, ch.LID, 0)
    level = {ch.ROTOR_A: 0, ch.ROTOR_B: 0}
    for te, c, v in events:
        if te <= t_cut and (c < ch.POCKETS or c in level):
            level[c] = v
    table.rotor.seed(level.pop(ch.ROTOR_A), level.pop(ch.ROTOR_B))
    for c in level:
        if level[c]:
            table.feed(t_on, c, 1)


def run(table, events, until=None, step_us=1000):
    """Feed events in order, polling every step_us in between (the board's main loop)."""
    now = events[0][0] if events else 0
    for t, c, v in events:
        while now + step_us < t:
            now += step_us
            table.poll(now)
        table.feed(t, c, v)
        now = t
    if until is not None:
        while now + step_us <= until:
            now += step_us
            table.poll(now)
    return now


class Frames:
    """An emit() sink that records frames as (type, dict)."""

    def __init__(self):
        self.frames = []

    def __call__(self, ftype, fields=()):
        d = {}
        for i in range(0, len(fields), 2):
            d[fields[i]] = fields[i + 1]
        self.frames.append((ftype, d))

    def of(self, ftype):
        return [f for t, f in self.frames if t == ftype]

    def types(self):
        return [t for t, _ in self.frames]

    def clear(self):
        self.frames = []


# --- the rotor's place: a disc with its reference mark (hardware/wheel.json geometry) --------
#
# The same geometry as the host's simulator (host/rmc/sim/rotor.py), in plain Python for both
# interpreters: the rotor's angle phi (rad, clockwise: the stator angle of pocket 0's centre),
# quarter-slot boundaries k*STEP, the two that open the wide slot (counts MARK and MARK + 1)
# STEP/2 early. Rotor sensor A and ball sensor A at the stator's 0.

TWO_PI = 6.283185307179586
STEP = TWO_PI / ROTOR_CPR
MARK = 0  # the count of the wide slot's first state (wheel.json rotor_mark_deg 0)


def boundary(k, mark=MARK):
    """The angle at which the count enters k from k - 1 (turning clockwise)."""
    r = k % ROTOR_CPR
    early = mark is not None and (r == mark or r == (mark + 1) % ROTOR_CPR)
    return k * STEP - (STEP / 2 if early else 0.0)


def count_at(phi, mark=MARK):
    k = int(phi // STEP)
    return k + 1 if boundary(k + 1, mark) <= phi else k


def levels(phi, mark=MARK):
    """(A, B) with the rotor at phi."""
    q = count_at(phi, mark) % 4
    return (1 if q in (0, 1) else 0, 1 if q in (1, 2) else 0)


def pocket_under(phi):
    """The pocket channel whose centre is nearest ball sensor A (the stator's 0)."""
    return int((-phi / (TWO_PI / 39)) + 0.5 + 39 * 1000) % 39


def segment_edges(t0_us, dur_us, phi0, w0, acc, events, mark=MARK):
    """The quadrature edges of a rotor turning from phi0 at t0_us for dur_us with speed w0
    (rad/s, signed) and a constant acceleration acc (rad/s^2; not past a stop). Returns the
    angle at the end."""
    tau_end = dur_us / 1e6
    phi1 = phi0 + w0 * tau_end + 0.5 * acc * tau_end * tau_end
    up = phi1 > phi0
    lo, hi = (phi0, phi1) if up else (phi1, phi0)
    ks = list(range(int(lo // STEP) - 1, int(hi // STEP) + 2))
    if not up:
        ks.reverse()
    sg = 1.0 if up else -1.0
    v0 = sg * w0
    a = sg * acc
    for k in ks:
        b = boundary(k, mark)
        if (up and phi0 < b <= phi1) or (not up and phi1 <= b < phi0):
            x = sg * (b - phi0)
            disc = v0 * v0 + 2 * a * x
            tau = 2 * x / (v0 + (disc if disc > 0 else 0.0) ** 0.5)
            q = k if up else k - 1  # the count entered
            m = k % 4  # the boundary's channel: A at 0 and 2, B at 1 and 3
            b_ch = m in (1, 3)
            level = levels_of_count(q)[1 if b_ch else 0]
            events.append((t0_us + int(tau * 1e6), ch.ROTOR_B if b_ch else ch.ROTOR_A, level))
    return phi1


def levels_of_count(q):
    q %= 4
    return (1 if q in (0, 1) else 0, 1 if q in (1, 2) else 0)
