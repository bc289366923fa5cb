# The predictor's refit in slices (rmcfw.rnvp.Predictor.work): with a ticks clock that moves
# as it works, a pass's refit stops at its first checkpoint past the slice budget, needs
# several work() calls, keeps the safety limit meanwhile, and ends with exactly the values the
# refit done at once gives (deadline, why, drop_s, revs_left), over the recorded spins of
# every setting of tests/fw/test_rnvp_calls.py; the table's frames are the same too.
# The learning after a result in slices (learn_start, learn_work) learns exactly what
# learn_drop does at once; whatever reads the wheel first ends it; the table sends the result
# and saves before it, and saves again once it is over (a power cut meanwhile loses only it).
import sys

import lapgen
from fwtest import scratch_dir
from wheelsim import Frames, run, session_events

from rmcfw import channels, numbers, proto, rnvp, store, table, ticks

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


def _settings():
    """(a predictor's keywords, its spins): test_rnvp_calls' settings, fewer spins."""
    return (
        ({"lead_s": 1.0}, lapgen.spins(5, 1.1, 5, noise_s=0.01)),
        (
            {"lead_s": 1.0, "drop_s": 1.07 * 0.9},
            lapgen.spins(6, 0.9, 4, noise_s=0.0, lap_noise_s=0.02),
        ),
        ({"lead_revs": 2}, lapgen.spins(7, 1.6, 3, noise_s=0.01)),
        ({"to_drop": True}, lapgen.spins(8, 1.2, 5, noise_s=0.0)),
        ({"to_drop": True, "lead_revs": 2}, lapgen.spins(9, 1.2, 3, noise_s=0.0)),
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


def test_a_slice_takes_the_budget_the_loop_leaves_it():
    """With a budget (the board's: what is left of the loop pass's period), each slice
    stops at its first checkpoint past it, SLICE_US at most; with none left, at its first
    checkpoint, so that the refit still gets on. The refits end as done at once."""
    for left in (-300, 0, 3 * STEP_US, 10 * STEP_US, 10 * rnvp.SLICE_US):
        lim = min(left, rnvp.SLICE_US)
        for kw, spins in _settings()[2:]:
            plain = rnvp.Predictor(**kw)
            p = rnvp.Predictor(**kw)
            clock = WorkClock()
            p.clock = clock
            p.budget = lambda left=left: left
            for times in spins[:3]:
                us = [int(x * 1e6) for x in times]
                plain.reset(us[0])
                p.reset(us[0])
                for t in us[1:]:
                    plain.lap(t)
                    start = clock.now
                    p.lap(t)
                    while p.pending:
                        took = (clock.now - start) & 0x3FFFFFFF
                        if lim <= 0:  # the slice's start, then its first checkpoint
                            assert took == 2 * STEP_US, (left, took)
                        else:
                            assert lim <= took < lim + 2 * STEP_US, (left, took)
                        start = clock.now
                        p.work()
                    assert _values(p) == _values(plain)
                assert p.learn_drop() == plain.learn_drop()
            assert rnvp.export(p) == rnvp.export(plain)


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
    worst_table = 0  # the table's refits (to_drop): the calls counted to the drop
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
                    if kw.get("to_drop") and gap > worst_table:
                        worst_table = gap
                if reads:
                    refit = max(refit, reads[-1] - reads[0])
            p.learn_drop()
    # a refit runs thousands of lines, and no stretch of them long without a checkpoint: the
    # longest, ~140 lines, one iteration of a loop over the passes ahead (a call counted to
    # the last pass). The table's refits are all fits and laps run forward: a fit's row has
    # four checkpoints (~12 lines apart), the longest stretch, ~55 lines, ends a walk, sets
    # its sums and begins the 4x4 inverse (a piece of ~0.1-0.2 ms on the chip)
    assert refit > 3000, refit
    assert worst < 200, worst
    assert worst_table < 70, worst_table


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
        work = tb.pred.work_ended  # (the table's loop: a slice a pass, while one is left)

        def counted(work=work, works=works, pred=tb.pred):
            works[0] += 1 if pred.pending else 0
            return work()

        tb.pred.work_ended = counted
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


# --- the learning after a result, in slices ------------------------------------------------


def _learn_sliced(p, clock):
    """learn_start() then learn_work() until it is over, each slice checked against the
    budget: the number of slices."""
    start = clock.now
    n = 1
    done = p.learn_start()
    while not done:
        took = (clock.now - start) & 0x3FFFFFFF
        assert rnvp.SLICE_US <= took < rnvp.SLICE_US + 2 * STEP_US, took
        assert p.learning is not None
        start = clock.now
        done = p.learn_work()
        n += 1
        assert n < 1000, "a learning that never ends"
    assert p.learning is None
    return n


def test_sliced_learning_learns_what_learning_at_once_does_over_many_spins():
    spins_seen = several = 0
    for i, (kw, _) in enumerate(_settings()):
        spins = lapgen.spins(20 + i, 0.9 + 0.1 * i, 14, noise_s=0.01 if i % 2 else 0.0)
        plain = rnvp.Predictor(**kw)
        p = rnvp.Predictor(**kw)
        clock = WorkClock()
        for times in spins:
            us = [int(x * 1e6) for x in times]
            plain.reset(us[0])
            p.clock = None  # the refits at once here: the learning alone in slices
            p.reset(us[0])
            for t in us[1:]:
                plain.lap(t)
                p.lap(t)
            assert _values(p) == _values(plain)  # the wheel learned so far calls the same
            plain.learn_drop()
            p.clock = clock
            n = _learn_sliced(p, clock)
            several += n > 2
            spins_seen += 1
            assert rnvp.export(p) == rnvp.export(plain), (kw, spins_seen)
        assert p.learned == plain.learned > 0
    # the learning does take several slices (lapgen's spins: some laps clocked only)
    assert spins_seen >= 60 and several > spins_seen // 2, (spins_seen, several)


def _pending_learning(kw, times, step=400):
    """A predictor whose learning from the spin at `times` is under way (its first slice
    run), and one that learned it at once."""
    plain = rnvp.Predictor(**kw)
    p = rnvp.Predictor(**kw)
    p.clock = WorkClock(step=step)
    us = [int(x * 1e6) for x in times]
    for q in (plain, p):
        q.reset(us[0])
        for t in us[1:]:
            q.lap(t)
        q.finish()  # (the last pass's refit: not what this is about)
    plain.learn_drop()
    assert not p.learn_start()
    assert p.learning is not None
    return p, plain


def test_a_launch_while_learning_finishes_it_first():
    """A new spin (reset, then lap), a setting, the wheel's figures, export, restore: each
    first ends the learning under way, with what it began with; the calls that follow are
    those of a wheel learned at once."""
    kw, spins = _settings()[3]
    reads = (
        lambda p: p.reset(5_000_000),
        lambda p: p.set_prior(0.0),
        lambda p: p.finish(),
        lambda p: p.learned,
        lambda p: p.last_lap_s(),
        lambda p: p.u_c,
        lambda p: p.lap_noise,
        lambda p: p.wheels,
        lambda p: rnvp.export(p),
        lambda p: p.learn_drop(),  # (a learning of its own: after the one under way)
    )
    for i, read in enumerate(reads):
        p, plain = _pending_learning(kw, spins[0])
        read(p)
        assert p.learning is None, i
        if i == len(reads) - 1:
            plain.learn_drop()  # the same spin learned twice, in both
        assert rnvp.export(p) == rnvp.export(plain), i
    # a launch: the next spin's calls are those of the wheel learned at once
    p, plain = _pending_learning(kw, spins[0])
    us = [int(x * 1e6) for x in spins[1]]
    for q in (plain, p):
        q.reset(us[0])
    assert p.learning is None
    for t in us[1:]:
        plain.lap(t)
        p.lap(t)
        p.finish()
        assert _values(p) == _values(plain)
    # restore: the learning under way ends, then the wheel given replaces it
    p, plain = _pending_learning(kw, spins[0])
    saved = rnvp.export(rnvp.Predictor(**kw))
    assert rnvp.restore(p, saved)
    assert p.learning is None and rnvp.export(p) == saved


class _Played:
    """A table with a store in a folder of its own, its predictor's clock `clock`, a
    session opened, the lid unlocked; its frames in `fr`."""

    def __init__(self, clock):
        self.d = scratch_dir("learn")
        self.fr = Frames()
        self.tb = table.Table(numbers.NUMBERS, self.fr, store.Store(self.d))
        self.tb.pred.clock = clock
        self.tb.start(0)
        assert self.tb.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
        self.tb.feed(1000, channels.LID, 0)
        self.now = 1000
        self.i = 0  # the next event to feed

    def until(self, events, stop, end=None, step_us=1000):
        """Feed events and poll every step_us (wheelsim.run) until stop() holds after a
        poll or a feed, or up to `end`: whether stop() held."""
        tb = self.tb
        while self.i < len(events):
            t, c, v = events[self.i]
            while self.now + step_us < t:
                self.now += step_us
                tb.poll(self.now)
                if stop():
                    return True
            tb.feed(t, c, v)
            self.now = t
            self.i += 1
            if stop():
                return True
        while end is not None and self.now + step_us <= end:
            self.now += step_us
            tb.poll(self.now)
            if stop():
                return True
        return False

    def saved(self):
        return store.Store(self.d).load()


def test_the_table_sends_the_result_then_learns_in_slices_and_saves_the_wheel_learned():
    """The same session on a table whose clock stands still and on one whose clock moves as
    the predictor works: the same frames; the second learns over several loop passes after
    the result's pass, in the states that follow, and its store ends with the same wheel."""
    plan = ((1, -1, 12), (-1, 1, 20), (1, -1, 3))
    ev, t_end = session_events(plan)
    still = _Played(None)
    still.until(ev, lambda: False, t_end)
    moving = _Played(WorkClock())
    pred = moving.tb.pred
    learning_passes = []  # per result: the loop passes that carried its learning on
    states = set()
    work = pred.learn_work

    def counted(work=work):
        learning_passes[-1] += 1
        states.add(moving.tb.spin.state)
        return work()

    pred.learn_work = counted
    starts = [0]
    start = pred.learn_start

    def started(start=start):
        learning_passes.append(0)
        # the result is out and saved before the learning starts: with the wheel before it
        f = moving.fr.frames
        assert f[-1][0] == proto.T_STATUS and f[-2][0] == proto.T_RESULT, f[-2:]
        assert moving.saved()["learn"] == rnvp.export(moving.tb.pred)
        starts[0] += 1
        return start()

    pred.learn_start = started
    moving.until(ev, lambda: False, t_end)
    assert starts[0] == len(plan)
    assert len(still.fr.frames) == len(moving.fr.frames)
    for i in range(len(still.fr.frames)):
        a = still.fr.frames[i]
        b = moving.fr.frames[i]
        if a[0] == proto.T_RNVP and a != b:  # a call a few loop passes late (as above)
            assert 0 < a[1]["lead_ms"] - b[1]["lead_ms"] <= 30, (a, b)
            b = (b[0], dict(b[1], lead_ms=a[1]["lead_ms"]))
        assert a == b, (a, b)
    # each learning took loop passes of its own (the first slice ran in the result's)
    assert len(learning_passes) == len(plan) and min(learning_passes) > 5, learning_passes
    assert proto.S_RESULT in states, states
    assert moving.tb.pred.learning is None
    assert rnvp.export(moving.tb.pred) == rnvp.export(still.tb.pred)
    assert moving.saved()["learn"] == still.saved()["learn"] == rnvp.export(still.tb.pred)
    assert moving.tb.pred.learned == len(plan)


def test_a_power_cut_mid_learning_loses_that_spins_learning_only():
    """The power cut while the second spin's learning is under way: the table rebuilt from
    its store has that spin's result, and the wheel the first spin taught, nothing of the
    second's learning; everything else saved is what the table that learned at once saved."""
    plan = ((1, -1, 12), (-1, 1, 20))
    ev = session_events(plan)[0]
    cut = _Played(WorkClock())
    results = lambda: len(cut.fr.of(proto.T_RESULT))  # noqa: E731
    assert cut.until(ev, lambda: results() == 2 and cut.tb.pred.learning is not None)
    t_cut = cut.now
    # the table learning at once, to the same instant (the same pass)
    still = _Played(None)
    assert still.until(ev, lambda: len(still.fr.of(proto.T_RESULT)) == 2)
    assert still.now == t_cut
    saved = cut.saved()
    ref = still.saved()
    assert saved["learn"] != ref["learn"]  # the second spin taught something
    for key in ref:
        # (gen counts the saves: the table that learned at once saved twice in that pass)
        if key != "learn" and key != "gen":
            assert saved[key] == ref[key], key
    assert saved["gen"] == ref["gen"] - 1
    assert saved["results"][-1] == ref["results"][-1] and len(saved["results"]) == 2
    # the wheel saved is the one the first spin taught: what a table that played only it
    # learned (its learning over, saved)
    first = _Played(None)
    first.until(ev, lambda: len(first.fr.of(proto.T_RESULT)) == 1)
    assert first.saved()["learn"] == saved["learn"]
    assert saved["learn"]["n"] == 1  # (spins learned)
    # the table rebuilt from it: that wheel, and it plays on
    fr = Frames()
    back = table.Table(numbers.NUMBERS, fr, store.Store(cut.d))
    assert back.pred.learning is None
    assert rnvp.export(back.pred) == saved["learn"]
    assert back.pred.learned == 1
    # the table the cut spared ends its learning as the one that learned at once
    cut.until(ev, lambda: cut.tb.pred.learning is None)
    assert cut.saved()["learn"] == ref["learn"] == rnvp.export(still.tb.pred)
