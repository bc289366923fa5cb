# The state after a power cut: the saved state, plus the frames journaled after it.
#
# Every frame that changes what must survive a cut (a launch, a result, a void, a fault, a
# session opened or closed, the last three announced, an incident, a threshold set) is
# journaled before the state that follows from it is saved (rmcfw.spin, rmcfw.table). A cut
# between the two leaves a journal one step ahead of the state file; without this, the table
# would settle a spin twice, reuse a spin number, or give a voided spin a result. At power-up
# the frames journaled after the last save (state "boot" and "seq") are applied here, in
# order, before anything is sent.
#
# apply() takes a frame as (type, fields), fields a dict whose values are the frame's text
# (from the journal) or the values emitted (tests): both read the same way. Frames that change
# nothing persistent (REV, RNVP, DROP, STAT, ACK ...) are ignored; applying a frame whose
# effect the state already holds changes nothing.
#
# power_up() is the order a board brings its table up in after any reset: the state and the
# journal read back, then the journal, the wire and BOOT; board_pico and the tests share it.
from rmcfw import commands, config, frames, proto, store


def _dir(text):
    return 1 if text == "cw" else (-1 if text == "ccw" else 0)


def apply(st, ftype, fields):
    """Apply one journaled frame's lasting effect to the state dict st."""
    n = fields.get("spin")
    if ftype == proto.T_LAUNCH:
        n = int(n)
        if n > st["spin"]:
            rdir = _dir(fields.get("rdir"))
            # the launch's verdict, whose VOID the cut may have kept from going out:
            # resume() sends it (a journal of older firmware: its checks, as they were)
            why = fields.get("void")
            if why is None and "void" not in fields:
                bdir = _dir(fields.get("bdir"))
                if rdir == 0:
                    why = proto.V_SENSORS
                elif rdir == st["rdir"]:
                    why = proto.V_NOT_REVERSED
                elif bdir == rdir:
                    why = proto.V_SAME_DIR
            st["spin"] = n
            st["rdir"] = rdir
            st["run"] = n
            st["voided"] = None
            st["run_void"] = why
            st["run_revs"] = 0
            st["run_lone"] = [0, 0]
            st["frozen"] = False  # an incident's relaunch: launched
    elif ftype == proto.T_REV:
        if st["run"] == int(n):
            st["run_revs"] = int(fields["n"])  # the laps before a cut: resume() counts on
            if "lone" in fields:  # and the ball sensors' disagreements
                st["run_lone"] = [int(fields["lone"]), int(fields.get("reversed", 0))]
    elif ftype == proto.T_DROP:
        why = fields.get("void")  # the drop's verdict (few revolutions, ball sensors)
        if why and st["run"] == int(n) and not st["voided"]:
            st["run_void"] = str(why)
    elif ftype == proto.T_VOID:
        if st["run"] == int(fields["spin"]):
            st["voided"] = str(fields["reason"])  # its ball may still be running
            st["run_void"] = None
    elif ftype == proto.T_RESULT:
        n = int(fields["spin"])
        res = st["results"]
        if res and res[-1][0] >= n:
            return  # already saved
        res.append([n, str(fields["num"])])
        if len(res) > store.RESULTS_KEPT:
            res.pop(0)
        if st["run"] == n:
            st["run"] = None
            st["voided"] = None
            st["run_void"] = None
        sess = st["session"]
        if sess:
            sess["spins"] += 1
            if sess.get("last3"):
                sess["left"] -= 1
    elif ftype == proto.T_LAST_THREE:
        sess = st["session"]
        if sess:
            sess["last3"] = int(fields["last"])
            sess["left"] = int(fields["left"])
    elif ftype == proto.T_SESSION_OPEN:
        n = int(fields["session"])
        if n > st["sessions"]:
            st["sessions"] = n
            st["session"] = {
                "id": n,
                "chef": str(fields["chef"]),
                "spins": 0,
                "last3": 0,
                "left": 0,
            }
    elif ftype == proto.T_SESSION_CLOSE:
        sess = st["session"]
        if sess and sess["id"] == int(fields["session"]):
            st["session"] = None
            st["incident"] = None
    elif ftype == proto.T_INCIDENT:
        step = fields.get("step")
        if step == proto.INC_START:
            n = int(fields["spin"])
            st["incident"] = n
            if st["run"] == n:
                st["run"] = None  # stopped: the relaunch is a spin of its own
        elif step == proto.INC_RELAUNCH:
            st["incident"] = None
            st["frozen"] = True  # its launch, bets closed, is next
    elif ftype == proto.T_CONFIG:
        # a threshold set by hand (Table.recover puts it in force); a value the firmware
        # refuses (a foreign journal) raises ValueError: not taken
        key = str(fields["key"])
        st["cfg"][key] = config.check(key, fields["new"])
    elif ftype == proto.T_FAULT:
        code = str(fields["code"])
        if str(fields.get("on")) == "1":
            st["faults"][code] = str(fields.get("detail", ""))
        else:
            st["faults"].pop(code, None)
    if n is not None and ftype != proto.T_RECALL:
        # every frame of a spin says its number: with the launches trimmed from the journal
        # (a lost state file), the counter still goes on from the newest one
        n = int(n)
        if n > st["spin"]:
            st["spin"] = n


def journaled_after(journal, st, tick=None):
    """(type, fields) of the frames a rmcfw.journal.Journal holds after the state's last
    save, oldest first. With no state saved (a new board, or a state file lost), the whole
    journal: the spin numbers, results, session and faults come back from it. tick(): called
    at each frame (a board feeds its watchdog: the whole journal takes a while to read)."""
    for line in journal.frames(st["boot"], st["seq"] + 1):
        if tick is not None:
            tick()
        try:
            f = frames.decode(line)
        except ValueError:  # FrameError (and CrcError): a line torn by a cut is no frame
            continue
        yield f.type, f.fields


def power_up(*, tb, jr, table_id, key, send, now_us, now_ms, reset, rotor_levels, tick=None):
    """Bring a table up after a reset, in the only safe order; returns (encoder, wire).
    Keywords only: ten arguments by position are too easily swapped.

    tb: a rmcfw.table.Table whose emit is not bound yet (it must send nothing before this);
    jr: its rmcfw.journal.Journal, not started; send(line): the frame line's writer;
    now_us(), now_ms(): the clocks, read when needed (the journal takes a while to read);
    reset: "power" or "watchdog"; rotor_levels: (A, B) as the rotor's IRQs started;
    tick(): called at each journaled frame read back (a board feeds its watchdog)."""
    prev = jr.last()
    # the frames sent after the last save (a cut between a frame and its save), applied
    # first: the state, and the boot number, go on from where the journal is
    tb.recover(journaled_after(jr, tb.st, tick), prev)
    jr.start()
    # the rotor's channels as they stood when its IRQs started: its first edge then counts
    # the right way
    tb.rotor.seed(rotor_levels[0], rotor_levels[1])
    enc = frames.Encoder(table_id, tb.st["boot"] + 1, key)  # the boot start() counts
    wire = commands.Wire(enc, jr, send, handler=tb.handle, key=key)
    wire.ms = now_ms()
    tb.emit = wire.emit
    tb.seq = lambda: enc.seq
    tb.start(now_us(), reset, lambda fw, wh, rs, faults: wire.boot(fw, wh, rs, faults, prev))
    return enc, wire
