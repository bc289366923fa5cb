# The table: sensors in, frames out. Glues pockets, rotor, ball, predictor, the spin state
# machine and the power-safe store. No `machine` here: a board module (board_pico.py) or a
# host replaying a trace drives it.
#
#   t = Table(wheel, emit, store=Store(), board=None)
#   t.recover(frames, last)                # the frames journaled after the last save
#   t.start(now_us, reset="power")         # BOOT, faults still present, STAT
#   t.feed(t_us, channel, value)           # one sensor event (rmcfw.channels numbering)
#   t.scan(t_us, buf5)                     # a 74HC165 snapshot of the 39 pockets
#   t.poll(now_us)                         # timers: call at least every millisecond
#   t.handle(cmd, fields) -> (ok, detail)  # host commands (the wire's handler signature)
#
# Times are microseconds on the ticks_us clock (rmcfw.ticks: wrapped to 30 bits).
from micropython import const

from rmcfw import (
    ball,
    channels,
    config,
    lead,
    pockets,
    proto,
    recover,
    rnvp,
    rotor,
    spin,
    store,
    ticks,
)
from rmcfw.frames import wheel_id

FW = "rmcfw-1.0"
_MASK = const(0x3FFFFFFF)  # the ticks clock's (rmcfw.ticks)
_SAVE_FAILED = "save failed"  # F_STORAGE's detail begins so: cleared by the next save that works


class Table:
    def __init__(self, wheel, emit, store_=None, board=None, slots=39, seq=None):
        """wheel: the wheel definition (hardware/wheel.json as a dict: its pockets, and its
        geometry for the predictor's prior), or just the 39 labels in pocket channel order;
        emit(type, fields) the frame sink; store_: a rmcfw.store.Store (None: nothing
        persists, for tests and replays); board: optional object with led(on); seq: optional
        callable giving the last frame seq sent, saved with the state."""
        defaults = None
        mark = None
        if isinstance(wheel, dict):
            drop_ms = config.drop_ms_of(wheel)
            defaults = {"drop_ms": drop_ms} if drop_ms else None
            mark = rotor.mark_of(wheel, slots)  # the rotor's place: the pocket under the ball
            wheel = wheel["pockets"]
        self.emit = emit
        self.owe = None  # a sink for frames that may wait for the loop's next passes (Wire.owe)
        self.store = store_
        self.board = board
        self.seq = seq
        self._saving = False
        self.st = store_.load() if store_ else store.defaults()
        self.cfg = config.Config(self.st.get("cfg"), defaults)
        self.pockets = pockets.Pockets()
        self.rotor = rotor.Rotor(slots)
        if mark is not None:
            self.rotor.mark_q, self.rotor.a2 = mark
        self.ball = ball.Ball()
        # the table sees the ball leave the rim: it calls the lead before that instant
        # board.rand: the random source of the lead window (rmcfw.lead), a seeded one without
        self.pred = lead.Predictor(lead.source(board), to_drop=True)
        if self.st.get("learn"):
            rnvp.restore(self.pred, self.st["learn"])
        self.wheel = tuple(wheel)
        self.spin = spin.Spin(
            cfg=self.cfg,
            pockets=self.pockets,
            rotor=self.rotor,
            ball=self.ball,
            predictor=self.pred,
            wheel=self.wheel,
            state=self.st,
            emit=self._emit,
            save=self.save,
            owe=self._owe,
        )
        self.now = 0
        self._led = 0

    def _emit(self, ftype, fields):
        self.emit(ftype, fields)  # through the attribute: the sink can be rewired after start

    def _owe(self, ftype, fields):
        """A frame that may be built and sent in the loop's next passes (rmcfw.spin: a REV):
        emit()'s, its place kept (rmcfw.commands.Wire.owe), where such a sink is bound."""
        if self.owe is None:
            self.emit(ftype, fields)
        else:
            self.owe(ftype, fields)

    # --- power-safe state -------------------------------------------------------------

    def _write(self):
        st = self.st
        st["cfg"] = self.cfg.changed()
        st["learn"] = rnvp.export(self.pred)
        if self.seq is not None:
            st["seq"] = self.seq()
        self.store.save(st)

    def save(self):
        if self.store is None or self._saving:
            return
        st = self.st
        self._saving = True
        try:
            self._write()
            if str(st["faults"].get(proto.F_STORAGE, "")).startswith(_SAVE_FAILED):
                self.spin.fault(proto.F_STORAGE, 0)  # saves again, guarded by _saving
                self._saving = False
                self._write()
        except OSError as e:
            if proto.F_STORAGE not in st["faults"]:
                detail = "%s: %s" % (_SAVE_FAILED, e)  # the same in the frame and the state
                self.emit(proto.T_FAULT, ("code", proto.F_STORAGE, "on", 1, "detail", detail))
                st["faults"][proto.F_STORAGE] = detail
        finally:
            self._saving = False

    def recover(self, journaled, last=None):
        """Before start(): apply the frames journaled after the last save ((type, fields)
        pairs, oldest first: rmcfw.recover.journaled_after), so that a power cut between a
        frame and the state that follows from it loses nothing. last: the journal's newest
        (boot, seq): a boot number is never used twice, even when the state file was lost."""
        st = self.st
        cfg = False
        for ftype, fields in journaled:
            try:
                recover.apply(st, ftype, fields)
            except (KeyError, ValueError, TypeError):
                pass  # a frame of another layout: nothing of it to keep
            cfg = cfg or ftype == proto.T_CONFIG
        if cfg:
            # a threshold SET after the last save: in force as the SET put it
            self.cfg.load(st["cfg"])
            self.spin.apply_cfg()
        if last is not None and last[0] > st["boot"]:
            st["boot"] = last[0]

    def start(self, now, reset="power", boot=None):
        """After power-up: count the boot, say so, report the faults still present."""
        self.now = now
        st = self.st
        st["boot"] += 1
        faults = st["faults"]
        if self.store is not None and self.store.damaged:
            faults[proto.F_STORAGE] = proto.D_STATE_DAMAGED  # until the next session opens
        if reset == "watchdog":
            faults[proto.F_WATCHDOG] = "reset"
        self.spin.state = proto.S_OPEN if st["session"] else proto.S_CLOSED  # as recovered
        # the boot counted before BOOT goes out: a cut in between skips a number, never
        # sends two boots under one (no frame before BOOT: a failure is reported below)
        if self.store is not None:
            try:
                self._write()
            except OSError:
                pass
        codes = ",".join(sorted(faults))
        if boot is None:
            self.emit(
                proto.T_BOOT,
                ("fw", FW, "wheel", wheel_id(self.wheel), "reset", reset, "faults", codes),
            )
        else:
            boot(FW, wheel_id(self.wheel), reset, codes)
        for code in sorted(faults):
            # present at power-down (or found now): shown again until cleared
            self.emit(proto.T_FAULT, ("code", code, "on", 1, "detail", faults[code]))
        self.save()
        self.spin.status(now)
        if st.get("incident") and st["session"]:
            self.spin.resume_incident(now)  # the power came back during an incident
        elif st.get("run") and st["session"]:
            self.spin.resume(now)  # the power came back during a spin

    # --- sensors ----------------------------------------------------------------------

    def feed(self, t, ch, value):
        """One sensor event at t (us): a pocket channel's new level, a ball sensor's pulse
        (value 1; 0 ignored), a rotor channel's new level, the lid or incident level."""
        t = ticks.wrap(t)
        self.poll(t)  # timers due before this event fire first
        if ch < channels.POCKETS:
            if self.pockets.set(t, ch, value):
                self.spin.on_pockets(t)
        elif ch == channels.BALL_A or ch == channels.BALL_B:
            if value and self.ball.edge(t, ch == channels.BALL_B):
                self.spin.on_pass(self.ball.t_pass)
        elif ch == channels.ROTOR_A or ch == channels.ROTOR_B:
            self.rotor.edge(t, ch == channels.ROTOR_B, value)
        elif ch == channels.LID:
            self.spin.on_lid(t, value)
        elif ch == channels.INCIDENT:
            self.spin.on_incident(t, value)
        else:
            raise ValueError("no channel %r" % (ch,))

    def sink(self, t, ch, value):
        """feed() without the poll: for draining the IRQ edge buffers (the loop polls)."""
        if ch == channels.BALL_A or ch == channels.BALL_B:
            if value and self.ball.edge(t, ch == channels.BALL_B):
                self.spin.on_pass(self.ball.t_pass)
        elif ch == channels.ROTOR_A or ch == channels.ROTOR_B:
            self.rotor.edge(t, ch == channels.ROTOR_B, value)
        else:
            self.feed(t, ch, value)

    def edges_lost(self, n):
        """The IRQ edge buffer overflowed and dropped n ball or rotor edges: the spin's
        timing is not to be trusted (a fault until the next launch)."""
        if n > 0:
            self.rotor.doubt()  # the count may have slipped: the rotor's place is in doubt
            self.spin.fault(proto.F_EDGES, 1, "%d" % n)

    def scan(self, t, buf):
        """A snapshot of the pocket chain (5 bytes, rmcfw.pockets)."""
        if self.pockets.scan(t, buf):
            self.spin.on_pockets(t)

    def poll(self, now):
        now &= _MASK  # (ticks.wrap without its call: every pass)
        self.now = now
        if self.ball.poll(now):
            self.spin.on_pass(self.ball.t_pass)
        self.rotor.poll(now)
        self.spin.poll(now)

    # --- host commands ----------------------------------------------------------------

    def handle(self, cmd, fields):
        """A checked host command (rmcfw.commands.Wire's handler): returns (ok, detail)."""
        sp = self.spin
        if cmd == proto.C_STATUS:
            sp.status(self.now)
            return True, ""
        if cmd == proto.C_OPEN:
            return sp.open_session(self.now, _text(fields, "chef"))
        if cmd == proto.C_CLOSE:
            return self._close(fields)
        if cmd == proto.C_LAST_THREE:
            return sp.last_three(self.now)
        if cmd == proto.C_RECALL:
            n = int(fields.get("n", 10))
            if n < 1:
                raise ValueError("n")
            return sp.recall(max(n, 10))
        if cmd == proto.C_SET:
            return self._set(fields)
        return False, proto.A_UNKNOWN

    def _close(self, fields):
        # with a reason: the chef de table's forced close (a fault, an incident that
        # cannot be resolved), last three coups announced or not
        reason = _text(fields, "reason") if "reason" in fields else None
        return self.spin.close_session(self.now, _text(fields, "chef"), reason)

    def _set(self, fields):
        role = _text(fields, "role") if "role" in fields else None
        return self._set_cfg(_text(fields, "key"), fields["value"], _text(fields, "by"), role)

    def _set_cfg(self, key, value, by, role=None):
        """SET: a threshold changed, on record with its old value and who asked (and as
        what: `role`, when the SET gave one). A later call needs role=engineer (rmcfw.lead)."""
        cfg = self.cfg
        new = config.check(key, value)  # ValueError (the wire answers bad): no frame, no change
        if role != lead.ROLE and lead.later(cfg, key, new):
            return False, lead.A_ENGINEER
        fields = ("key", key, "old", getattr(cfg, key), "new", new, "by", by)
        if role is not None:
            fields += ("role", role)
        # the frame first (journaled, then sent): a name the line cannot carry raises here,
        # before any change; the state saved after it (rmcfw.recover applies it after a cut)
        self.emit(proto.T_CONFIG, fields)
        cfg.set(key, new)
        self.spin.apply_cfg()
        self.save()
        return True, ""

    # --- status LED -------------------------------------------------------------------

    def led(self):
        """LED level for now: steady in bets, blinking fast on a fault, slow otherwise."""
        if self.st["faults"]:
            period = 200_000
        elif self.spin.state == proto.S_BETS:
            return 1
        else:
            period = 1_000_000
        return 1 if self.now % period < period // 2 else 0


def _text(fields, key):
    v = fields[key]
    if isinstance(v, bytes):
        v = v.decode()
    if not v:
        raise ValueError(key)
    return v
