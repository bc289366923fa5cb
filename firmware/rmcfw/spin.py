# The spin state machine (decree 2019-819, 1-4 and 1-7; DESIGN.md "The wheel and the spin").
#
#   closed --OPEN--> open --lid unlocked--> bets --ball pass--> track --call--> rnvp
#      ^                ^                    ^                                  |
#      |  lid locked,   | lid locked         |  ball picked up          drop (no pass / a pocket)
#      +--- CLOSE ------+                  result <--one pocket settle_ms-- dropped
#
# Voids (a spin that gives no result, V_*): ball spun the rotor's way, rotor not reversed,
# fewer than min_revs revolutions, object in the cylinder, ball out of the wheel, sensors
# disagreeing. A void is sent as soon as it is known; a voided spin never gets a result.
# Incident (1-4): an object in the cylinder (a pocket held while the ball runs, two pockets held,
# or the croupier's incident input): "rien ne va plus", stop, the ball is put back in the
# pocket of the previous result (checked on the pocket sensors), then launched again; bets
# stay closed for that new launch.
#
# Frames go out through emit(type, (k1, v1, k2, v2, ...)), the wire's Wire.emit signature.
from micropython import const

from rmcfw import changes, commands, frames, numbers, proto, ticks

CW = "cw"
CCW = "ccw"
WHY_DROP = "drop"  # RNVP: the ball dropped before the predictor called (should never happen)
WHY_INCIDENT = "incident"  # RNVP: an incident stopped the game
WHY_POWER = "power"  # RNVP: the firmware restarted during a spin
_ROTOR_ERRORS = const(8)  # invalid quadrature transitions tolerated per spin
# HOP frames (the pockets lit while the ball bounces) at most one per HOP_MS: a chattering
# pocket sensor must not flood the line (20 a second at most, ~1 kB/s of a 11.5 kB/s line); a
# picture held back goes out when that time is up, and before the frame ending the spin.
HOP_MS = const(50)
_MASK = const(0x3FFFFFFF)  # the ticks clock's (rmcfw.ticks) ...
_HALF = const(0x20000000)  # ... and half its period


def dir_name(d):
    return CW if d > 0 else (CCW if d < 0 else "-")


class Spin:
    """The table's game logic. Sensors come in through the methods below; the Table feeds them.

    pockets, rotor, ball, predictor: rmcfw.pockets/rotor/ball/rnvp objects.
    wheel: the 39 labels, pocket channel order (hardware/wheel.json "pockets").
    state: the persistent state dict (rmcfw.store.defaults()); save(): persist it now.
    Keywords only (rmcfw.table): nine arguments by position are too easily swapped.
    """

    def __init__(self, *, cfg, pockets, rotor, ball, predictor, wheel, state, emit, save, owe=None):
        if len(wheel) != numbers.COUNT:
            raise ValueError("wheel needs %d pockets" % numbers.COUNT)
        for label in wheel:
            numbers.value(label)  # ValueError for a label that is not a number of the game
        self.cfg = cfg
        self.pockets = pockets
        self.rotor = rotor
        self.ball = ball
        self.pred = predictor
        self.wheel = wheel
        self.st = state
        self.emit = emit
        # a REV's sink: emit's, or one that builds and sends it in the loop's next passes,
        # in its place among the frames (rmcfw.commands.Wire.owe)
        self.owe = emit if owe is None else owe
        self._save_now = save
        self._hold = 0  # a step of several frames under way: its saves wait for its end
        self._dirty = False
        self.lid = 1
        self.state = proto.S_OPEN if state["session"] else proto.S_CLOSED
        self.void = None  # reason the current spin was voided
        self.called = False  # "rien ne va plus" called for the current spin
        self.t_pocket = 0  # last time a pocket was seen held after the drop
        self.touched = False
        self.inc_back = False  # incident: ball seen back in its pocket
        self.frozen = bool(state["frozen"])  # the next launch follows an incident: bets closed
        self.t_status = 0
        self.dirs_checked = True
        self.resumed = False  # the spin under way was resumed after a power cut
        self.t_resume = 0
        self.revs_before = 0  # a resumed spin's laps before the power cut (its REV frames)
        self.lone_before = 0  # ... and its ball sensors' lone edges and reversed passes
        self.reversed_before = 0
        self.t_lone = -1  # a pass one sensor alone saw in bets: a launch if another follows
        self.inc_moving = False  # incident: the ball still passing the track sensors
        self.t_inc = 0  # ... its last pass, or the incident's start
        self.under = -1  # the pocket under ball sensor A at the last pass both saw (-1: unknown)
        self.hop_bits = bytearray(len(pockets.bits))  # the picture the last HOP sent
        self.hop_due = False  # the picture changed since: a HOP owed
        self.hop_sent = False  # a HOP sent since the drop (the first goes at once)
        self.t_hop = 0  # when the last one went
        self.apply_cfg()

    def apply_cfg(self):
        c = self.cfg
        p = self.pred
        p.finish()  # a refit under way ends with the settings it began with
        p.lead_s = c.lead_ms / 1000
        p.lead_revs = c.lead_revs
        p.window_ms = c.lead_window_ms  # each spin's random extra lead (rmcfw.lead)
        p.limit_s = c.limit_ms / 1000
        p.limit_set = c.by_hand("limit_ms")
        p.set_prior(c.drop_ms / 1000)
        self.ball.pair_us = c.pair_ms * 1000
        self.rotor.stop_us = c.rotor_stop_ms * 1000
        self.pockets.stuck_off_results = c.stuck_off

    # --- saving -----------------------------------------------------------------------

    def save(self):
        """Save the state now, or once the step under way has sent all its frames: a state
        saved half-way through a step (a launch and its void, a drop and its void) would be
        a state the journal's frames after it cannot mend (rmcfw.recover)."""
        if self._hold:
            self._dirty = True
        else:
            self._save_now()

    def _release(self):
        self._hold -= 1
        if not self._hold and self._dirty:
            self._dirty = False
            self._save_now()

    # --- faults -----------------------------------------------------------------------

    def fault(self, code, on, detail=""):
        faults = self.st["faults"]
        if bool(on) == (code in faults):
            return
        if not on:
            detail = faults[code]
        # the frame first: a state saved is never ahead of the journal (rmcfw.recover)
        self.emit(proto.T_FAULT, ("code", code, "on", 1 if on else 0, "detail", detail))
        changes.fault(self.st, code, on, detail)
        self.save()

    # --- frames -----------------------------------------------------------------------

    def _set(self, state, t):
        if state != self.state:
            self.state = state
            self.status(t)

    def status(self, t=None):
        """The STAT frame (at each STATUS poll, every few seconds: its fields in pieces, the
        frame within 11 words)."""
        f = ("state", self.state, "spin", self.st["spin"])
        f += ("rotor_ms", self.rotor.period_us // 1000, "rdir", dir_name(self.rotor.dir))
        self.emit(proto.T_STATUS, f + ("lid", self.lid))
        if t is not None:
            self.t_status = t

    # --- sensors ----------------------------------------------------------------------

    def on_lid(self, t, locked):
        locked = 1 if locked else 0
        if locked == self.lid:
            if locked and self.state != proto.S_CLOSED and not self._more_spins():
                sess = self.st["session"]
                if sess and sess.get("last3"):
                    self._close(t, sess["chef"])  # read at power-up: the last spin was played
            return
        self.lid = locked
        self.emit(proto.T_LID, ("locked", locked))
        s = self.state
        if s == proto.S_CLOSED:
            if not locked:
                self.emit(proto.T_TAMPER, ("what", "lid"))
        elif locked:
            if s in (proto.S_BETS, proto.S_RESULT):
                self._set(proto.S_OPEN, t)
            sess = self.st["session"]
            if sess and sess.get("last3") and sess.get("left") == 0 and s != proto.S_CLOSED:
                self._close(t, sess["chef"])
        elif s == proto.S_OPEN and self._more_spins():
            self._set(self._bets(), t)

    def on_incident(self, t, active):
        if not active:
            return
        s = self.state
        if s in (proto.S_TRACK, proto.S_RNVP, proto.S_DROPPED):
            self._incident(t, "input")
        elif s != proto.S_INCIDENT:
            # no ball on the track (decree 1-4 stops a game under way): nothing stops, but the
            # press is on record, with the state it found
            self.emit(
                proto.T_INCIDENT, ("spin", self.st["spin"], "step", proto.INC_IGNORED, "state", s)
            )

    def on_pass(self, t):
        """The ball passed the sensors (Ball recorded it). (At each ball pass: its frame, and
        those of the helpers a pass on the track calls, within 11 words, the rest apart:
        board_pico.Board.step.) On the track, the pass's dear work waits for the loop's
        next passes: its REV frame is built, journaled and sent in the next three
        (self.owe), its refit in slices after them (Predictor.lap_start); what it decides
        is decided now."""
        s = self.state
        # (comparisons, not `in (...)`: a tuple of module names is built, on the heap, each time)
        if s == proto.S_BETS or s == proto.S_RESULT:
            if self._launching(t):
                self._launch(t)
        elif s == proto.S_TRACK or s == proto.S_RNVP:
            self._rev()
            if self.ball.paired:
                # the pocket under ball sensor A as the ball reaches it (DROP's `under`: the
                # last pass both sensors saw, as the simulator's truth counts it)
                self.under = self.rotor.pocket_under(t)
            self._check_dirs(t)
            self.pred.lap_start(t)
            self._check_call(t)
        elif s == proto.S_DROPPED:
            self._pass_dropped(t)
        elif s == proto.S_INCIDENT:
            self._pass_incident(t)

    def _rev(self):
        """The REV frame of a pass on the track."""
        b = self.ball
        spin = self.st["spin"]
        n = b.count - 1 + self.revs_before
        fields = ("spin", spin, "n", n, "period_us", b.period_us)
        # (saved with the next save; recovered from the REV frame)
        changes.lap(self.st, spin, n)
        if b.lone or self.lone_before or b.reversed:
            fields += self._disagree()
        self.owe(proto.T_REV, fields)

    def _disagree(self):
        """The ball sensors' disagreements so far, kept for a spin resumed after a cut: the
        REV frame's fields for them."""
        b = self.ball
        lone = b.lone + self.lone_before
        rev = b.reversed + self.reversed_before
        changes.disagree(self.st, self.st["spin"], lone, rev)
        return ("lone", lone, "reversed", rev)

    def _pass_dropped(self, t):
        """A ball pass after the drop."""
        if self.pockets.count:
            self._incident(t, "object")  # the ball still runs while something is held
        else:
            self._void(t, proto.V_SENSORS)  # no pocket, yet the ball is on the track
            if self.touched:  # the pockets saw it bounce, then lost it: a dead sensor
                self.fault(proto.F_POCKET_STUCK_OFF, 1, "-")

    def _pass_incident(self, t):
        """A ball pass during an incident: still running, or the relaunch."""
        if not self.inc_back and self.inc_moving:
            self.t_inc = t  # the ball still runs: it is not back yet
        elif self._launching(t):
            # The relaunch, bets closed. Launched before the ball was seen back (after it
            # had stopped): said so, and played all the same rather than ignored (the
            # launch's own checks, 4 revolutions among them, still hold).
            fields = ("spin", self.st["spin"], "step", proto.INC_RELAUNCH)
            self.emit(proto.T_INCIDENT, fields if self.inc_back else fields + ("checked", 0))
            self.frozen = True
            changes.relaunch(self.st)  # (saved by the launch)
            self._launch(t)
        elif not self.inc_back:
            self.inc_moving = True  # one sensor alone: moving, if not yet a launch
            self.t_inc = t

    def on_pockets(self, t):
        """The pocket picture changed."""
        p = self.pockets
        if p.count and proto.F_NO_POCKET in self.st["faults"]:
            self.fault(proto.F_NO_POCKET, 0)
        if p.count <= 1 and proto.F_TWO_POCKETS in self.st["faults"]:
            self.fault(proto.F_TWO_POCKETS, 0)
        if proto.F_POCKET_STUCK_ON in self.st["faults"] and p.masked() < 0:
            self.fault(proto.F_POCKET_STUCK_ON, 0)
        if self.state == proto.S_RESULT and p.count == 0:
            self._set(proto.S_BETS if self._more_spins() else proto.S_OPEN, t)
        elif self.state == proto.S_DROPPED:
            self.hop_due = True  # the ball among the pockets: a HOP shows where (rate bound)
            self._hop(t, False)

    def _hop(self, t, force):
        """The HOP owed, if any: from the drop to the spin's end (RES, VOID, INC), and none
        for a spin void already. At most one per HOP_MS unless `force` (the frame ending the
        spin comes next); a picture back to the one last sent sends nothing."""
        if not self.hop_due or self.state != proto.S_DROPPED or self.void is not None:
            return
        if not force and self.hop_sent and ticks.diff(t, self.t_hop) < HOP_MS * 1000:
            return  # (poll() sends it once the time is up)
        self._hop_send(t)  # (apart: this check runs every pass the HOP is held back)

    def _hop_send(self, t):
        self.hop_due = False
        if self._hop_same():
            return
        self.hop_sent = True
        self.t_hop = t
        self.emit(proto.T_HOP, self._hop_fields())

    def _hop_fields(self):
        return ("spin", self.st["spin"], "lit", frames.pocket_list(self._lit()))

    def _hop_same(self):
        """Whether the picture is the one the last HOP sent; it is the one sent from now."""
        bits = self.pockets.bits
        last = self.hop_bits
        same = True
        i = 0
        while i < len(bits):
            if bits[i] != last[i]:
                same = False
                last[i] = bits[i]
            i += 1
        return same

    def _lit(self):
        """The labels of the pockets held, in channel order."""
        lit = []
        ch = 0
        while ch < len(self.wheel):
            if self.pockets.held(ch):
                lit.append(self.wheel[ch])
            ch += 1
        return lit

    # --- time -------------------------------------------------------------------------

    def poll(self, now):
        # the state's step, from _POLLS: a table built once, at import, of plain
        # functions (no tuple, no bound method made per call: this runs every millisecond)
        step = _POLLS.get(self.state)
        if step is not None:
            step(self, now)
        if self.pred.learning is not None:
            self._learn_more()  # the learning after a result, in whatever state follows
        c = self.cfg
        if self.t_lone >= 0 and ticks.diff(now, self.t_lone) > c.limit_ms * 1000:
            self.t_lone = -1  # no pass followed the lone one: a glitch, not a launch
        if c.status_ms:
            # ticks.diff(now, t_status) >= status_ms without its call (every pass)
            d = (now - self.t_status) & _MASK
            if d < _HALF and d >= c.status_ms * 1000:
                self.status(now)

    def _learn_more(self):
        """A slice of the predictor's learning after the result; its wheel saved once over
        (a save meanwhile, or a launch, ends it at once: rmcfw.rnvp.Predictor)."""
        if self.pred.learn_work():
            self.save()

    def _poll_track(self, now):
        """Ball on the track, bets open: the predictor's call, then as in rnvp; last, a
        slice of the pass's refit while one is under way, so that it has what is left of
        the loop's period (board_pico.Board._slice_us), and the call if it ended it."""
        self._check_call(now)
        self._poll_rnvp(now)  # on, even if the call just moved the state to rnvp
        if self.state == proto.S_TRACK and self.pred.work_ended():
            self._check_call(now)  # the refit just ended: its deadline may have come

    def _poll_rnvp(self, now):
        """Ball on the track: its drop (a pocket held, or no pass for a lap's share)."""
        p = self.pockets
        c = self.cfg
        b = self.ball
        # (count first: with no pocket held, as the ball runs, fresh()'s loop is skipped)
        if p.count and p.fresh() and ticks.diff(now, p.since) >= c.pocket_drop_ms * 1000:
            if p.fresh_count() >= 2:
                # The ball fills one pocket at most: something else fell into the
                # cylinder while the ball runs (decree 1-4), not a drop.
                self._two_pockets(now)
            else:
                self._drop(now)
        elif b.period_us or b.count == 1:
            last = b.period_us or c.limit_ms * 1000
            if ticks.diff(now, b.t_pass) > last // 100 * c.drop_pct:  # stays a small int
                self._drop(now)
        elif self.resumed and not b.count:
            # back from a power cut and no pass since: the ball is in a pocket, or was
            # already picked up; either way it is off the track
            if ticks.diff(now, self.t_resume) > self._stopped_us():
                self._drop(now)
                if not p.count:
                    # nor in a pocket: picked up while the power was off, unseen
                    self._void(now, proto.V_POWER)
                    self._end()
                    self._set(proto.S_BETS if self._more_spins() else proto.S_OPEN, now)

    def _poll_dropped(self, now):
        """Ball among the pockets: its result, an object, or no pocket holding it. (Every
        pass: its frame within 11 words, the rare ends in helpers: board_pico.Board.step.)"""
        if self.hop_due:
            self._hop(now, False)
        p = self.pockets
        n = p.count
        if n:
            self.t_pocket = now
            self.touched = True
            if n == 1:
                if ticks.diff(now, p.since) >= self.cfg.settle_ms * 1000:
                    self._result(now, p.first)
            elif ticks.diff(now, p.since) >= self.cfg.object_ms * 1000:
                self._two_pockets(now)
        elif ticks.diff(now, self.t_pocket) >= self._no_pocket_us():
            self._no_pocket(now)

    def _two_pockets(self, now):
        """Two pockets held while the ball runs or bounces: an object in the cylinder."""
        self.fault(proto.F_TWO_POCKETS, 1, "%d" % self.pockets.count)
        self._incident(now, "object")

    def _no_pocket_us(self):
        """No pocket held this long after the drop ends the spin (µs)."""
        c = self.cfg
        return (c.dead_pocket_ms if self.touched else c.no_pocket_ms) * 1000

    def _no_pocket(self, now):
        """No pocket holds the ball: the spin is void, and why."""
        self._hold += 1
        try:
            # the VOID first: the fault after it (a cut between them loses a fault
            # frame, never the void)
            if self.resumed:
                # its end came about the power cut, and no pocket holds the ball:
                # the result was not seen
                self._void(now, proto.V_POWER)
            elif self.touched:
                # pockets saw the ball bounce, none sees it at rest: a dead sensor
                self._void(now, proto.V_SENSORS)
                self.fault(proto.F_POCKET_STUCK_OFF, 1, "-")
            else:
                self._void(now, proto.V_BALL_OUT)
                self.fault(proto.F_NO_POCKET, 1, "")
            self._end()
        finally:
            self._release()
        self._set(proto.S_BETS if self._more_spins() else proto.S_OPEN, now)

    def _poll_bets(self, now):
        # Bets open: the ball was picked up (every pocket was seen empty), so a pocket
        # held this long is a sensor stuck on (or something lying in it): mask, report.
        p = self.pockets
        if p.count and ticks.diff(now, p.since) >= self.cfg.stuck_on_ms * 1000:
            self.fault(proto.F_POCKET_STUCK_ON, 1, "%d" % p.mask_held(now))

    def _poll_incident(self, now):
        """Incident: the ball back in the previous result's pocket, once it has stopped."""
        if self.inc_back:
            return  # seen back: the relaunch is next (on_pass)
        quiet = ticks.diff(now, self.t_inc)
        if self.inc_moving:
            if quiet <= self._stopped_us():
                return
            self.inc_moving = False  # no pass for longer than a lap: the ball is stopped
        self._incident_back(now, quiet)

    def _incident_back(self, now, quiet):
        """The ball stopped: back in the previous result's pocket, or nowhere seen."""
        p = self.pockets
        want = self._previous_channel()
        if p.count == 1 and ticks.diff(now, p.since) >= self.cfg.settle_ms * 1000:
            if want < 0 or p.first == want:
                self._back(self.wheel[p.first])
        elif not p.count and want >= 0 and quiet >= self.cfg.incident_ms * 1000:
            # the ball nowhere to be seen this long: that pocket's sensor is likely dead
            # (the ball lies there unseen). The check cannot be made: the relaunch is let
            # through, bets closed as ever, and the dead sensor reported.
            self.fault(proto.F_POCKET_STUCK_OFF, 1, "%d" % want)
            self._back(None)

    def _back(self, num):
        """The ball back (num: the pocket it is back in, for the host to check against the
        last result; None: not seen)."""
        self.inc_back = True
        fields = ("spin", self.st["spin"], "step", proto.INC_BACK)
        self.emit(proto.T_INCIDENT, fields if num is None else fields + ("num", num))

    # --- the spin ---------------------------------------------------------------------

    def _launch(self, t):
        st = self.st
        self.void = None
        self.called = False
        self.pred.reset(t)
        self.pockets.mark()
        self.ball.restart()
        r = self.rotor
        rdir = r.dir
        bdir = self.ball.first_dir
        rotor_bad = rdir == 0 or r.errors > _ROTOR_ERRORS
        # the launch's own verdict, known before its frame, and carried in it: a cut right
        # after the frame leaves the VOID owed, not lost (rmcfw.recover)
        why = changes.launch_void(rdir, bdir, st["rdir"], rotor_bad)
        # its lasting effects, then its frames; one save at the end
        changes.launch(st, st["spin"] + 1, rdir, why)
        self.revs_before = self.lone_before = self.reversed_before = 0
        frozen = self.frozen
        self.frozen = False
        # the pocket under ball sensor A at the ball's first pass (the dealer's signature)
        self.under = r.pocket_under(t)
        fields = ("spin", st["spin"], "rdir", dir_name(rdir), "bdir", dir_name(bdir))
        fields += ("under", self._label(self.under))
        self._hold += 1
        try:
            self.emit(proto.T_LAUNCH, fields + ("void", why) if why else fields)
            self._launched(t, why, frozen, rdir, bdir, rotor_bad)
        finally:
            self._release()
        self.save()

    def _launched(self, t, why, frozen, rdir, bdir, rotor_bad):
        """The frames that follow a launch's own: its void, the track, an incident's relaunch
        called at once, the faults the launch clears or finds."""
        if why:
            self._void(t, why)
        self.fault(proto.F_EDGES, 0)  # a new spin's timing starts clean
        self._set(proto.S_TRACK, t)
        self.resumed = False
        if frozen:
            self._call(t, WHY_INCIDENT)
        self.dirs_checked = bool(bdir)  # else at the first pass both sensors see
        if rotor_bad:
            self.fault(proto.F_ROTOR, 1, "stopped" if rdir == 0 else "errors")
        else:
            self.fault(proto.F_ROTOR, 0)
        self.rotor.errors = 0

    def _check_dirs(self, t):
        """Ball against rotor, once the ball's direction is known (a first pass seen by one
        sensor only gives none)."""
        bdir = self.ball.first_dir
        if self.dirs_checked or not bdir:
            return
        self.dirs_checked = True
        if bdir == self.st["rdir"]:
            self._void(t, proto.V_SAME_DIR)

    def resume_incident(self, t):
        """After a power cut during an incident: the procedure goes on where it was, the
        ball to be seen back in the previous result's pocket before the relaunch, and bets
        stay closed (the launch after it calls "rien ne va plus" at once)."""
        self.inc_back = False
        # the ball may still run from before the cut: until a lap's time without a pass
        # (a pass then must not be taken for the relaunch, whose result it would give)
        self.inc_moving = True
        self.t_inc = t
        self._set(proto.S_INCIDENT, t)

    def _stopped_us(self):
        """No pass for this long: the ball is off the track (drop_pct of the longest lap)."""
        c = self.cfg
        return c.limit_ms * 10 * c.drop_pct

    def _launching(self, t):
        """Whether a pass in bets launches the ball: one seen by both sensors, or a second
        pass within a lap of one seen by a single sensor (a lone pulse alone is a glitch:
        it must not open a phantom spin)."""
        if self.ball.paired or (
            self.t_lone >= 0 and ticks.diff(t, self.t_lone) <= self.cfg.limit_ms * 1000
        ):
            self.t_lone = -1
            return True
        self.t_lone = t
        return False

    def _bets(self):
        """Bets open: the ball held in a pocket (left there from the last spin) keeps the
        table in its resting state until it is picked up (not a pocket stuck on)."""
        return proto.S_RESULT if self.pockets.count else proto.S_BETS

    def resume(self, t):
        """After a power cut during a spin (state "run" saved at its launch): the ball may
        still be running. Bets are closed at once (the passes before the cut are lost, no
        prediction can be made), and the spin goes on to its drop and result (or, voided,
        to the ball's rest: its passes are not taken for a new launch)."""
        self.state = proto.S_TRACK
        self.void = self.st["voided"]
        self.called = False
        self.dirs_checked = True
        self.resumed = True
        self.ball.reset()
        self.pockets.mark()
        self.pred.reset(t)
        self.t_resume = t
        # the laps before the cut, as its REV frames counted them: the pass after the resume
        # ends the lap under way then (laps while the power was off are not seen)
        self.revs_before = self.st["run_revs"] + 1
        self.lone_before, self.reversed_before = self.st["run_lone"]
        self.under = -1  # the passes before the cut are lost
        self._call(t, WHY_POWER)
        why = self.st["run_void"]
        if why:
            self._void(t, why)  # its launch was void, and the cut kept the VOID in

    def _check_call(self, t):
        if not self.called and self.pred.due(t):
            self._call(t, self.pred.why)

    def _call(self, t, why):
        self.called = True
        p = self.pred
        drop_ms = 0
        lead_ms = 0
        if p.drop_s is not None:
            drop_us = int(p.drop_s * 1e6)
            drop_ms = ticks.add(p.t0, drop_us) // 1000
            lead_ms = (drop_us - ticks.diff(t, p.t0)) // 1000
        self.emit(
            proto.T_RNVP,
            ("spin", self.st["spin"], "drop_ms", drop_ms, "lead_ms", lead_ms, "why", why),
        )
        if self.state == proto.S_TRACK:
            self._set(proto.S_RNVP, t)

    def _drop(self, t):
        if not self.called:
            self._call(t, WHY_DROP)
        b = self.ball
        self.t_pocket = t
        self.touched = False  # a pocket held since the drop
        revs = b.count - 1 if b.count else 0  # full laps: the launch pass starts the first
        # the drop's verdict before its frame, and carried in it (as a launch's)
        why = None
        ball_bad = False
        if self.resumed:
            # the laps before the cut, then each pass since ends one; the ball sensors as
            # far as the passes since tell (the direction came at the launch)
            revs = self.revs_before - 1 + b.count
            lone = b.lone + self.lone_before
            ball_bad = lone > self.cfg.lone_max or b.reversed + self.reversed_before > 0
            if ball_bad:
                why = proto.V_SENSORS
            elif revs < self.cfg.min_revs:
                why = proto.V_POWER  # too few laps seen: laps while off, or a short spin?
        else:
            ball_bad = b.lone > self.cfg.lone_max or b.reversed or not b.first_dir
            if ball_bad:
                why = proto.V_SENSORS
            elif revs < self.cfg.min_revs:
                why = proto.V_FEW_REVS
        if self.void is not None:
            why = None  # one reason per spin: sent already
        # the pocket under ball sensor A at the ball's last pass both sensors saw
        fields = ("spin", self.st["spin"], "revs", revs, "under", self._label(self.under))
        changes.drop(self.st, self.st["spin"], why)  # owed until its VOID, next
        self._hold += 1
        try:
            self.emit(proto.T_DROP, fields + ("void", why) if why else fields)
            if why:
                self._void(t, why)
            self._set(proto.S_DROPPED, t)
            ch = self.pockets.stuck_on(t)
            if ch >= 0:
                self.fault(proto.F_POCKET_STUCK_ON, 1, "%d" % ch)
            if ball_bad:
                self.fault(proto.F_BALL, 1, "lone=%d reversed=%d" % (b.lone, b.reversed))
            elif not self.resumed:
                self.fault(proto.F_BALL, 0)  # (a resumed spin's passes are too few to say)
        finally:
            self._release()
        # the pockets held at the drop (a pocket held may be what showed it): the first HOP
        for i in range(len(self.hop_bits)):
            self.hop_bits[i] = 0
        self.hop_sent = False
        self.hop_due = True
        self._hop(t, False)

    def _result(self, t, ch):
        self._hop(t, True)  # the last picture before the result
        st = self.st
        label = self.wheel[ch]
        stuck = self.pockets.result_seen(ch)
        if stuck >= 0:
            self.fault(proto.F_POCKET_STUCK_OFF, 1, "%d" % stuck)
        elif proto.F_POCKET_STUCK_OFF in st["faults"] and self.pockets.stuck_off() < 0:
            self.fault(proto.F_POCKET_STUCK_OFF, 0)
        if self.void is not None:
            self._end()
            self._set(proto.S_RESULT, t)  # the ball is at rest, but the spin gives nothing
            return
        ch3 = numbers.chances(label) or ("-", "-", "-")
        self.emit(
            proto.T_RESULT,
            (
                "spin",
                st["spin"],
                "num",
                label,
                "colour",
                numbers.colour(label),
                "parity",
                ch3[1],
                "half",
                ch3[2],
            ),
        )
        changes.result(st, st["spin"], label)
        sess = st["session"]
        if sess and sess.get("last3"):
            self.emit(proto.T_LAST_THREE, ("last", sess["last3"], "left", sess["left"]))
        self.save()
        self._set(proto.S_RESULT, t)
        if not self.resumed:
            # only spins with a result teach the predictor: not a void, not a chip fallen
            # into a pocket taken for the drop (an incident follows). After the result is
            # out and saved: hundreds of ms on the chip, in slices (poll); saved once over.
            if self.pred.learn_start():
                self.save()

    def _void(self, t, reason):
        if self.void is not None:
            return  # one reason per spin: the first found
        self._hop(t, True)  # among the pockets: the last picture before the void
        self.void = reason
        self.emit(proto.T_VOID, ("spin", self.st["spin"], "reason", reason))
        changes.void(self.st, self.st["spin"], reason)
        self.save()

    def _end(self):
        """The spin's ball is at rest, or off the wheel: nothing left to resume."""
        st = self.st
        if st["run"] is not None:
            st["run"] = None
            st["voided"] = None
            self.save()

    def _incident(self, t, what):
        if self.state == proto.S_INCIDENT:
            return
        if not self.called:
            self._call(t, WHY_INCIDENT)
        self._hold += 1
        try:
            self._void(t, proto.V_OBJECT)
            changes.incident(self.st, self.st["spin"])  # survives a power cut
            self.emit(proto.T_INCIDENT, ("spin", self.st["spin"], "step", proto.INC_START))
        finally:
            self._release()
        self.inc_back = False
        self.inc_moving = True  # until a lap's time without a pass
        self.t_inc = t
        self._set(proto.S_INCIDENT, t)

    def _label(self, ch):
        """A pocket channel's label, "-" for -1 (unknown)."""
        return self.wheel[ch] if ch >= 0 else "-"

    def _previous_channel(self):
        """Pocket channel of the previous result, -1 when there is none to check."""
        res = self.st["results"]
        if not res:
            return -1
        label = res[-1][1]
        for i in range(len(self.wheel)):
            if self.wheel[i] == label:
                return i
        return -1

    def _more_spins(self):
        sess = self.st["session"]
        return bool(sess) and not (sess.get("last3") and sess.get("left", 1) <= 0)

    # --- session commands (answers (ok, detail) for the wire's ACK) ----------------------

    def open_session(self, t, chef):
        if self.state != proto.S_CLOSED:
            return False, proto.A_BUSY
        st = self.st
        n = st["sessions"] + 1
        # the frame first: a chef id the line cannot carry raises here, before any change
        self.emit(proto.T_SESSION_OPEN, ("chef", chef, "session", n))
        changes.session_open(st, n, chef)
        self.fault(proto.F_WATCHDOG, 0)
        if st["faults"].get(proto.F_STORAGE) == proto.D_STATE_DAMAGED:
            self.fault(proto.F_STORAGE, 0)  # seen, and a new session starts from here
        self.save()
        self._set(self._bets() if not self.lid else proto.S_OPEN, t)
        return True, ""

    def close_session(self, t, chef, reason=None):
        """CLOSE; with a reason, the chef de table's forced close: the last three coups
        need not be announced, and an incident that cannot be resolved ends with it."""
        sess = self.st["session"]
        if not sess:
            return False, "closed"
        s = self.state
        if not (s == proto.S_OPEN or s == proto.S_BETS or s == proto.S_RESULT) and not (
            reason and s == proto.S_INCIDENT
        ):
            return False, proto.A_BUSY  # a spin is running: its result or void comes first
        if not self.lid:
            return False, "lid"  # a session closes only with the cylinder locked
        if not reason and sess["spins"] and not (sess["last3"] and sess["left"] <= 0):
            return False, "last3"  # the last three spins must be announced and played
        self._close(t, chef, reason)
        return True, ""

    def _close(self, t, chef, reason=None):
        sess = self.st["session"]
        fields = ("chef", chef, "session", sess["id"], "spins", sess["spins"])
        # the frame first: a reason the line cannot carry raises here, before any change
        self.emit(proto.T_SESSION_CLOSE, fields + ("reason", reason) if reason else fields)
        changes.session_close(self.st, sess["id"])
        self.save()
        self._set(proto.S_CLOSED, t)

    def last_three(self, t):
        sess = self.st["session"]
        if not sess:
            return False, "closed"
        if sess["last3"]:
            return False, proto.A_BUSY  # already announced
        # results so far + 3: a spin under way is the first of the three
        changes.last_three(self.st, sess["spins"] + 3, 3)
        self.emit(proto.T_LAST_THREE, ("last", sess["last3"], "left", 3))
        self.save()
        return True, ""

    def recall(self, n):
        commands.emit_recall(self.emit, self.st["results"][-n:] if n > 0 else [])
        return True, ""


# Spin.poll()'s step for each state (none: nothing timed in it), built once, at import
_POLLS = {
    proto.S_TRACK: Spin._poll_track,
    proto.S_RNVP: Spin._poll_rnvp,
    proto.S_DROPPED: Spin._poll_dropped,
    proto.S_BETS: Spin._poll_bets,
    proto.S_INCIDENT: Spin._poll_incident,
}
