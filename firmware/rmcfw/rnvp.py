# "Rien ne va plus": when will the ball leave the track, and when to call it.
#
# The predictor in parts, each a module (docs/firmware.md, "The predictor", has the maths):
#   rnvp_passes    the spin's pass times and the wheel's model fitted to them
#   rnvp_wheel     what is known of the wheel: drop speed, drag, friction, timing noise; and
#                  that learning as plain data for the power-safe state
#   rnvp_learn     learning the wheel from a spin that ended
#   rnvp_readings  for a call counted to the last pass: the readings of the spin...
#   rnvp_call      ... followed ahead pass by pass, and the call chosen from them; and the
#                  call counted to the drop (the table's)
#   rnvp_maths     the normal distribution, a 4x4 inverse
# This module holds the Predictor the table uses, which ties them together.
from math import exp

from rmcfw import rnvp_learn, rnvp_slices, rnvp_wheel, ticks
from rmcfw.rnvp_call import MIN_LAPS, Ahead, drop_call_steps  # noqa: F401  MIN_LAPS: host's
from rmcfw.rnvp_passes import Passes
from rmcfw.rnvp_readings import readings_steps
from rmcfw.rnvp_wheel import Wheel

_NOISE_NEW = 1e-4  # s^2: (10 ms)^2, the timing noise assumed before any spin
SLICE_US = rnvp_slices.SLICE_US  # a slice of the refit: its first checkpoint after this long
WHY_FIT = "fit"
WHY_LIMIT = "limit"


class Predictor:
    """One per table. reset() at the first pass of a spin, lap() at every later pass.

    After each pass, `deadline` (us, on the ticks clock) is when to call unless another pass
    comes first; due(now) says whether it has come, `why` how it was set. `drop_s` is the
    predicted last pass (or, with to_drop, the instant the ball leaves the rim), s from the
    first pass, None while there is none; `revs_left` the passes ahead to it.

    lead_s, lead_revs: the call comes lead_s seconds before the predicted drop (to_drop) or
    last pass, or lead_revs > 0 passes before it. limit_s: the safety limit on a lap (a lap
    that lasts longer is called at once); limit_set: it was set by hand, kept as it is.
    drop_s (constructor): the wheel's ball period at the drop (s), 0 when unknown: then the
    first spins are called early, with a margin that shrinks as spins are learned.
    A spin whose ball leaves before its 4th pass is void (decree: fewer than 4 revolutions):
    no call is placed for it.

    The parts: `passes` (the spin's pass times and fits), `wheel` (what is learned), `ahead`
    (the passes ahead of a pass call).

    clock: None, or a function giving the ticks clock now (us, 30 bits: the board's
    time.ticks_us). With one, lap() only starts the pass's refit: it runs in slices of about
    SLICE_US, the first in lap() itself, the others in work(), one a main loop pass; until
    it is over, `pending` is True and the deadline is the safety limit's. Without one, lap()
    does it all, as does a clock that does not move while it works (a simulated one). Either
    way the deadline it ends with is the same. budget: None, or a function giving the us a
    slice may take now (the board's: what is left of the loop's period), SLICE_US at most;
    a slice with none left still runs to its first checkpoint; None from it: no slice in
    this pass (the board's pass does work a ball pass put off: rmcfw.commands.Wire.owe).

    The learning after a result may run in slices too (learn_start(), then learn_work() one
    a main loop pass, while `learning` is not None), the first in learn_start() itself:
    until it ends the wheel is half-learned, so whatever reads the wheel or the spin's
    passes (a new spin, a setting, the wheel's figures, export, restore) first runs the rest
    of it at once. learn_drop() learns at once; both learn exactly the same.
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
        self.lead_revs = lead_revs
        self.limit_s = limit_s
        self.limit_set = False
        self.to_drop = to_drop
        self.learn_drag = True
        self.passes = Passes()
        self.wheel = Wheel(last_lap_s, margin)
        self.ahead = Ahead()
        self.wheel.set_prior(drop_s)
        self.clock = None
        self.budget = None  # None, or a function: the us a slice may take now (the board's)
        self._work = None  # the pass's refit under way: its steps (rmcfw.rnvp_slices)
        self.learning = None  # the learning after a result under way: its steps
        self.reset(0)

    # what the table and the host read of the wheel learned
    # (each first ends a learning under way: a half-learned wheel is never read)
    @property
    def learned(self):
        self.finish_learning()
        return self.wheel.learned

    @property
    def wheels(self):
        self.finish_learning()
        return self.wheel.wheels

    @property
    def drop_prior_s(self):
        self.finish_learning()
        return self.wheel.drop_prior_s

    @property
    def lap_noise(self):
        self.finish_learning()
        return self.wheel.lap_noise

    @property
    def u_c(self):
        self.finish_learning()
        return self.wheel.u_c

    def set_prior(self, drop_s):
        """The wheel's ball period at the drop (s) from its geometry; 0: unknown."""
        self.finish()  # a refit under way ends with what it began with
        self.wheel.set_prior(drop_s)

    def last_lap_s(self):
        """The learned drop speed as a period (s)."""
        self.finish_learning()
        return self.wheel.last_lap_s()

    def reset(self, t0):
        """A new spin whose first pass is at t0 (us ticks)."""
        if self.learning is not None:
            self.finish_learning()  # the spin before's learning ends before its passes go
        self._work = None  # a refit of the spin before: of no use now
        self.t0 = t0
        self.passes.count = 1
        self.passes.times[0] = 0.0  # a spin of over PASSES passes moved its later ones here
        self.deadline = ticks.add(t0, int(self.limit() * 1e6))
        self.why = WHY_LIMIT
        self.drop_s = None
        self.revs_left = None

    def lap(self, t):
        """The ball passed again at t (us ticks): refit, and move the deadline. With a
        clock, the refit's first slice only (work() runs the others): the deadline returned
        is then the safety limit's until it is over."""
        self.lap_start(t)
        if self._work is not None:
            self._slice()
        return self.deadline

    def lap_start(self, t):
        """lap() but, with a clock, not even the refit's first slice: the pass recorded,
        the deadline the safety limit's, the refit begun for work() to run, so that the
        ball pass's own loop pass stays short (rmcfw.spin). Without a clock, all of lap().
        (Apart from lap(): each within 11 words, off the heap.)"""
        if self.learning is not None:
            self.finish_learning()  # (a reset() ended it: only a lap() without one finds it)
        s = ticks.diff(t, self.t0) / 1e6
        self.passes.add(s)
        self._refit_at(s, self.limit())
        if self.clock is None and self._work is not None:
            self._slice()  # no loop to run the slices: the whole refit now

    def _refit_at(self, s, lap_limit):
        """The refit of the pass at s begun, lap_limit the safety limit on its lap (s). (Apart
        from lap(): each ball pass calls both, and each frame within 11 words stays off the
        heap: board_pico.Board.step.)"""
        passes = self.passes
        limit = s + lap_limit
        # the previous pass's fit is stale now: the safety limit alone, until the refit
        self.deadline = ticks.add(self.t0, int(limit * 1e6))
        self.why = WHY_LIMIT
        if s - passes.times[passes.count - 2] >= lap_limit:
            self._work = None
            self._place(s, limit)  # that lap already took longer than the limit
        else:
            self._work = self._refit(s, limit)  # (its first slice: lap(), or work())

    @property
    def pending(self):
        """A pass's refit is under way: its deadline is not known yet."""
        return self._work is not None

    def work(self):
        """One slice of the pass's refit, if one is under way: it stops at the first
        checkpoint after SLICE_US on the clock (without a clock it runs to its end). True
        once none is left."""
        if self._work is None:
            return True  # (none under way: no call further)
        return self._slice()

    def work_ended(self):
        """work() where a refit is under way: True when this slice ended it (the deadline
        is the refit's now), else False. (The table's loop: one call a pass, where the
        `pending` property then work() would be two, and a property is the dearer.)"""
        return self._work is not None and self._slice()

    def _slice(self):
        """One slice of the refit under way, if any (rnvp_slices.step, unrolled: a call less
        in each loop pass that runs one): True once none is left."""
        steps = self._work
        if steps is not None:
            budget = SLICE_US if self.budget is None else self.budget()
            if budget is None:
                return False  # the loop's pass has other work: the next one
            rnvp_slices.begin(self.clock, budget)
            for _ in steps:
                return False  # the steps yield only when the slice's time is up
        self._work = None
        return True

    def _budget(self):
        """A slice's time (us): what the main loop's pass has left (budget()), SLICE_US at
        most; None: none this pass (it does work a ball pass put off)."""
        budget = self.budget
        return SLICE_US if budget is None else budget()

    def finish(self):
        """The pass's refit under way, if any, run to its end at once; and the learning."""
        steps = self._work
        if steps is not None:
            rnvp_slices.run(steps)
            self._work = None
        self.finish_learning()

    def finish_learning(self):
        """The learning under way, if any, run to its end at once."""
        steps = self.learning
        if steps is not None:
            self.learning = None
            rnvp_slices.run(steps)

    def _refit(self, s, limit):
        """The refit of the pass at s, as resumable steps: the deadline it gives, set at
        the end. Sets drop_s and revs_left. (The call from the fit is found here, not in
        steps of their own: each level of steps costs a slice a resumption and a yield.)"""
        call = None
        self.drop_s = None
        self.revs_left = None
        passes = self.passes
        f = yield from passes.state_steps(self.wheel.drag)
        if f is not None:
            u, b = f
            k = passes.count - 1
            if k > passes.recent:
                k = passes.recent
            if self.to_drop:
                call = yield from drop_call_steps(self, s, u, b, k)
            else:
                call = yield from self._pass_call(s, u, k)
        self._place(call, limit)

    def _place(self, call, limit):
        """The deadline at call (s from the first pass), or at the limit when none comes
        before it."""
        if call is not None and call < limit:
            self.deadline = ticks.add(self.t0, int(call * 1e6))
            self.why = WHY_FIT
        else:
            self.deadline = ticks.add(self.t0, int(limit * 1e6))
            self.why = WHY_LIMIT

    def limit(self):
        """The safety limit on a lap (s): limit_s, or for a wheel known to drop at a slower
        period, a little more than that period (no lap on the track can last longer); a
        limit set by hand is kept, even below that (an earlier call is the safe side)."""
        wheel = self.wheel
        if not self.limit_set and (wheel.has_prior or wheel.learned >= 8):
            slow = 1.05 * exp(-0.5 * (wheel.centre - wheel.spread))
            if slow > self.limit_s:
                return slow
        return self.limit_s

    def due(self, now):
        return ticks.diff(now, self.deadline) >= 0

    def learn_drop(self):
        """The ball left the track after the last pass: learn drag and drop speed from the
        spin, at once. Returns False when the spin is too short to learn from."""
        self.finish_learning()
        # (a refit under way is dropped: the learning refits the passes its own way, and
        # the pass's call is of no use once the ball has left)
        self._work = None
        return rnvp_learn.learn_drop(self.wheel, self.passes, self.learn_drag)

    def learn_start(self):
        """learn_drop() in slices: its first slice now (with a clock; without one, or with
        one that does not move while it works, all of it), the others in learn_work().
        True once it is over (`learning` is None then)."""
        self.finish_learning()
        self._work = None  # (as learn_drop)
        self.learning = rnvp_learn.learn_drop_steps(self.wheel, self.passes, self.learn_drag)
        return self.learn_work()

    def learn_work(self):
        """One slice of the learning under way, if any (a slice: as work()'s). True once
        none is left."""
        steps = self.learning
        if steps is None:
            return True
        budget = self._budget()
        if budget is not None and rnvp_slices.step(steps, self.clock, budget):
            self.learning = None
            return True
        return False  # (None: the loop's pass has other work, the next one)

    def _pass_call(self, s, u, k):
        """A lead counted to the last pass: the call most likely within +-0.5 s of it, with
        its doubt weighed (rmcfw.rnvp_readings, rmcfw.rnvp_call); or None. Resumable."""
        wheel = self.wheel
        noise_prior = wheel.noise if wheel.noise_spins else _NOISE_NEW  # the timing noise expected
        readings = yield from readings_steps(wheel, self.passes, u, k, noise_prior)
        if not readings:
            return None
        decision = yield from self.ahead.decide_steps(
            s, readings, self.passes.count, wheel.lap_noise, self.lead_s, self.lead_revs
        )
        if decision is None:
            return None
        call, aim = decision
        self.revs_left = aim
        self.drop_s = self.ahead.time[aim]
        return call


def export(p):
    """What a predictor learned, as plain data for the power-safe state (a learning under
    way ended first; a refit under way goes on: it leaves the wheel as it is)."""
    p.finish_learning()
    return rnvp_wheel.export(p.wheel)


def restore(p, data):
    """Back to what export() gave; ignores data that does not fit (older formats too: what
    they lack starts afresh)."""
    p.finish()  # a refit under way ends with the wheel it began with
    return rnvp_wheel.restore(p.wheel, data)
