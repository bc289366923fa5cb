# The predictor's refit in slices (rmcfw.rnvp.Predictor.work): with a ticks clock that moves
# as it works, a pass's refit stops at its first checkpoint past the slice budget, needs
# several work() calls, keeps the safety limit meanwhile, and ends with exactly the values the
# refit done at once gives (deadline, why, drop_s, revs_left), over the recorded spins of
# every setting of tests/fw/test_rnvp_calls.py; the table's frames are the same too.
import sys

import lapgen
from wheelsim import Frames, run, session_events

from rmcfw import channels, numbers, proto, rnvp, table, ticks

STEP_US = 23  # the work clock moves this much at each reading (a checkpoint)


class WorkClock:
    """A ticks clock that moves only as the predictor reads it: STEP_US a reading, so that
    the time a slice took is the checkpoints it passed. Counts the readings."""

    def __init__(self, step=STEP_US, start=0x3FFFFF00):
        self.now = start  # near the wrap: the budget's difference must wrap too
        self.step = step
        self.reads = 0

    def __call__(self):
        self.now = (self.now + self.step) & 0x3FFFFFFF
        self.reads += 1
        return self.now


def _spins(seed, last_lap_s, count, **kw):
    w = lapgen.Wheel(lapgen.Rng(seed), last_lap_s)
    out = []
    for i in range(count):
        keep = None if i % 3 else 5 + i % 6  # often only the last 5-10 laps are clocked
        out.append(w.spin(keep=keep, **kw))
    return out


def _settings():
    """(a predictor's keywords, its spins): test_rnvp_calls' settings, fewer spins."""
    return (
        ({"lead_s": 1.0}, _spins(5, 1.1, 5, noise_s=0.01)),
        ({"lead_s": 1.0, "drop_s": 1.07 * 0.9}, _spins(6, 0.9, 4, noise_s=0.0, lap_noise_s=0.02)),
        ({"lead_revs": 2}, _spins(7, 1.6, 3, noise_s=0.01)),
        ({"to_drop": True}, _spins(8, 1.2, 5, noise_s=0.0)),
        ({"to_drop": True, "lead_revs": 2}, _spins(9, 1.2, 3, noise_s=0.0)),
    )


def _values(p):
    return (p.deadline, p.why, p.drop_s, p.revs_left)


def _pending_values(p, t):
    """What a predictor with a refit under way must show: the safety limit alone."""
    s = ticks.diff(t, p.t0) / 1e6
    return (ticks.add(p.t0, int((s + p.limit()) * 1e6)), rnvp.WHY_LIMIT, None, None)


def test_sliced_refits_end_with_the_same_calls():
    passes = sliced = slices = 0
    longest = 0
    for kw, spins in _settings():
        plain = rnvp.Predictor(**kw)
        p = rnvp.Predictor(**kw)
        clock = WorkClock()
        p.clock = clock
        for times in spins:
            us = [int(x * 1e6) for x in times]
            plain.reset(us[0])
            p.reset(us[0])
            assert _values(p) == _values(plain)
            for t in us[1:]:
                plain.lap(t)
                start = clock.now
                p.lap(t)  # the first slice
                n = 1
                while p.pending:
                    took = (clock.now - start) & 0x3FFFFFFF
                    # stopped at the first checkpoint at or past the budget
                    assert rnvp.SLICE_US <= took < rnvp.SLICE_US + 2 * STEP_US, took
                    longest = max(longest, took)
                    assert _values(p) == _pending_values(p, t), (_values(p), t)
                    assert not p.due(ticks.add(t, 1000))  # no call on the stale fit
                    start = clock.now
                    done = p.work()
                    n += 1
                    assert done == (not p.pending)
                    assert n < 200, "a refit that never ends"
                assert _values(p) == _values(plain), (kw, t, _values(p), _values(plain))
                passes += 1
                slices += n
                sliced += n > 1
            assert p.learn_drop() == plain.learn_drop()
            assert rnvp.export(p) == rnvp.export(plain)
    # most passes with a refit need several slices: the budget does cut the work
    assert passes > 100 and sliced > passes // 2, (passes, sliced)
    assert slices > 3 * passes, (slices, passes)
    assert longest < rnvp.SLICE_US + 2 * STEP_US


def test_a_clock_that_stands_still_gets_it_all_in_lap():
    """A simulated clock that does not move while the predictor works (the virtual board's,
    a test's): lap() does the whole refit, as without a clock."""
    for kw, spins in _settings():
        plain = rnvp.Predictor(**kw)
        p = rnvp.Predictor(**kw)
        p.clock = lambda: 12345
        for times in spins:
            us = [int(x * 1e6) for x in times]
            plain.reset(us[0])
            p.reset(us[0])
            for t in us[1:]:
                assert p.lap(t) == plain.lap(t)
                assert not p.pending
                assert _values(p) == _values(plain)
            assert p.learn_drop() == plain.learn_drop()
        assert rnvp.export(p) == rnvp.export(plain)


def test_a_refit_left_unfinished_is_dropped_by_the_next_pass_and_the_learning():
    """Each pass starts its own refit: one still under way is of no use then (a new pass
    came), nor once the ball has left. The learning is the same as ever."""
    for kw, spins in _settings():
        plain = rnvp.Predictor(**kw)
        p = rnvp.Predictor(**kw)
        p.clock = WorkClock(step=400)  # two checkpoints a slice
        for times in spins:
            us = [int(x * 1e6) for x in times]
            plain.reset(us[0])
            p.reset(us[0])
            for t in us[1:]:
                plain.lap(t)
                p.lap(t)  # never worked on further
            left = p.pending
            assert p.learn_drop() == plain.learn_drop()
            assert not p.pending
            assert rnvp.export(p) == rnvp.export(plain), left
        # the last pass's refit, finished at once, is the one done at once
        plain.reset(0)
        p.reset(0)
        for t in (0, 600_000, 1_250_000, 1_950_000, 2_720_000):
            plain.lap(t)
            p.lap(t)
        p.finish()
        assert not p.pending
        assert _values(p) == _values(plain)


def test_a_setting_changed_mid_refit_waits_for_the_next_pass():
    """A SET during a refit (Spin.apply_cfg, set_prior): the refit ends first, with what it
    began with, as when the pass's refit was done at once."""
    kw, spins = _settings()[3]
    plain = rnvp.Predictor(**kw)
    p = rnvp.Predictor(**kw)
    p.clock = WorkClock(step=400)
    times = spins[0]
    us = [int(x * 1e6) for x in times]
    plain.reset(us[0])
    p.reset(us[0])
    for t in us[1:]:
        plain.lap(t)
        p.lap(t)
    assert p.pending
    p.set_prior(1.3)
    assert not p.pending
    assert _values(p) == _values(plain)
    assert rnvp.restore(p, rnvp.export(plain))


def _traced_clock():
    """A clock that moves by one for each line of the firmware run (sys.settrace: CPython
    only), and the list of its readings."""
    state = [0]
    reads = []

    def line(frame, event, arg):
        if event == "line":
            state[0] += 1
        return line

    def call(frame, event, arg):
        return line if "rmcfw" in frame.f_code.co_filename else None

    def clock():
        reads.append(state[0])
        return state[0] & 0x3FFFFFFF

    return call, clock, reads


def test_the_checkpoints_are_close_together():
    """Counted in lines of firmware run: no stretch between two checkpoints is long, so a
    slice overshoots its budget by little whatever the predictor is doing (a missing
    checkpoint in a loop over the passes ahead or the laps fitted shows as a long one)."""
    if not hasattr(sys, "settrace"):
        return  # MicroPython: no line tracing (the slices are shown by the tests above)
    call, clock, reads = _traced_clock()
    worst = 0
    refit = 0
    for kw, spins in _settings():
        p = rnvp.Predictor(**kw)
        p.clock = clock
        for times in spins[:2]:
            us = [int(x * 1e6) for x in times]
            p.reset(us[0])
            for t in us[1:]:
                del reads[:]
                sys.settrace(call)
                try:
                    p.lap(t)
                    while not p.work():
                        pass
                finally:
                    sys.settrace(None)
                for i in range(1, len(reads)):
                    gap = reads[i] - reads[i - 1]
                    if gap > worst:
                        worst = gap
                if reads:
                    refit = max(refit, reads[-1] - reads[0])
            p.learn_drop()
    # a refit runs thousands of lines, and no stretch of them long without a checkpoint: the
    # longest, ~140 lines, ends a walk, sets its sums and makes the first pivot of the 4x4
    # inverse; one iteration of a loop over the passes ahead is ~110, of the fit's rows ~40
    assert refit > 3000, refit
    assert worst < 200, worst


def test_the_table_calls_the_same_with_a_refit_in_slices():
    """A session played through two tables, one whose predictor works in slices: the same
    frames, the calls included; and its refits did take several loop passes."""
    plan = ((1, -1, 12), (-1, 1, 20), (1, -1, 3))
    ev, t_end = session_events(plan)
    runs = []
    for clock in (None, WorkClock()):
        fr = Frames()
        tb = table.Table(numbers.NUMBERS, fr)
        tb.pred.clock = clock
        works = [0]
        work = tb.pred.work

        def counted(work=work, works=works, pred=tb.pred):
            works[0] += 1 if pred.pending else 0
            return work()

        tb.pred.work = counted
        tb.start(0)
        assert tb.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
        tb.feed(1000, channels.LID, 0)
        run(tb, ev, until=t_end)
        runs.append((fr.frames, works[0]))
    (plain, _), (sliced, works) = runs
    assert len(plain) == len(sliced)
    for i in range(len(plain)):
        a = plain[i]
        b = sliced[i]
        if a[0] == proto.T_RNVP and a != b:
            # a call whose time had already come when its refit ended goes then, as after a
            # late refit: the same call, a few loop passes later (lead_ms smaller by those ms)
            late = a[1]["lead_ms"] - b[1]["lead_ms"]
            assert 0 < late <= 30, (a, b)
            b = (b[0], dict(b[1], lead_ms=a[1]["lead_ms"]))
        assert a == b, (a, b)
    rnvps = [f for t, f in plain if t == proto.T_RNVP]
    assert len(rnvps) == len(plan) and all(f["why"] == rnvp.WHY_FIT for f in rnvps), rnvps
    assert works > 10, works  # loop passes that carried a refit on
