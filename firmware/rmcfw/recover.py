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
# apply() makes each frame's change with rmcfw.changes, the functions rmcfw.spin makes it
# with live. It takes a frame as (type, fields), fields a dict whose values are the frame's
# text (from the journal) or the values emitted (tests): both read the same way. Frames that
# change nothing persistent (RNVP, STAT, ACK ...) are ignored; applying a frame whose effect
# the state already holds changes nothing.
#
# power_up() is the order a board brings its table up in after any reset: the state and the
# journal read back, then the journal, the wire and BOOT; board_pico and the tests share it.
from rmcfw import changes, commands, config, frames, proto


def _dir(text):
    return 1 if text == "cw" else (-1 if text == "ccw" else 0)


def _launch(st, fields):
    n = int(fields["spin"])
    rdir = _dir(fields.get("rdir"))
    # the launch's verdict, whose VOID the cut may have kept from going out: resume() sends
    # it (a journal of older firmware: its checks, as they were)
    why = fields.get("void")
    if why is None and "void" not in fields:
        why = changes.launch_void(rdir, _dir(fields.get("bdir")), st["rdir"], rdir == 0)
    changes.launch(st, n, rdir, why)


def _rev(st, fields):
    n = int(fields["spin"])
    if st["run"] == n:  # (a frame of another spin: nothing more of it is read)
        # the laps before a cut, and the ball sensors' disagreements: resume() counts on
        changes.lap(st, n, int(fields["n"]))
        if "lone" in fields:
            changes.disagree(st, n, int(fields["lone"]), int(fields.get("reversed", 0)))


def _drop(st, fields):
    why = fields.get("void")  # the drop's verdict (few revolutions, ball sensors)
    if why:
        changes.drop(st, int(fields["spin"]), str(why))


def _void(st, fields):
    n = int(fields["spin"])
    if st["run"] == n:  # (a frame of another spin: nothing more of it is read)
        changes.void(st, n, str(fields["reason"]))


def _result(st, fields):
    n = int(fields["spin"])
    res = st["results"]
    if not (res and res[-1][0] >= n):  # else already saved
        changes.result(st, n, str(fields["num"]))


def _last_three(st, fields):
    if st["session"]:
        changes.last_three(st, int(fields["last"]), int(fields["left"]))


def _session_open(st, fields):
    n = int(fields["session"])
    if n > st["sessions"]:
        changes.session_open(st, n, str(fields["chef"]))
    # The session's number also moves the spin counter on, as apply() has always done (it
    # read it as a spin's). Kept as it was: the counter may skip numbers, never reuse one.
    changes.seen(st, n)


def _session_close(st, fields):
    if st["session"]:
        changes.session_close(st, int(fields["session"]))


def _incident(st, fields):
    step = fields.get("step")
    if step == proto.INC_START:
        changes.incident(st, int(fields["spin"]))
    elif step == proto.INC_RELAUNCH:
        changes.relaunch(st)


def _config(st, fields):
    # a threshold set by hand (Table.recover puts it in force); a value the firmware refuses
    # (a foreign journal) raises ValueError: not taken
    key = str(fields["key"])
    st["cfg"][key] = config.check(key, fields["new"])


def _fault(st, fields):
    on = str(fields.get("on")) == "1"
    changes.fault(st, str(fields["code"]), on, str(fields.get("detail", "")) if on else "")


# apply()'s step for each frame type with a lasting effect
_APPLY = {
    proto.T_LAUNCH: _launch,
    proto.T_REV: _rev,
    proto.T_DROP: _drop,
    proto.T_VOID: _void,
    proto.T_RESULT: _result,
    proto.T_LAST_THREE: _last_three,
    proto.T_SESSION_OPEN: _session_open,
    proto.T_SESSION_CLOSE: _session_close,
    proto.T_INCIDENT: _incident,
    proto.T_CONFIG: _config,
    proto.T_FAULT: _fault,
}


def apply(st, ftype, fields):
    """Apply one journaled frame's lasting effect to the state dict st."""
    step = _APPLY.get(ftype)
    if step is not None:
        step(st, fields)
    n = fields.get("spin")
    if n is not None and ftype != proto.T_RECALL:
        # every frame of a spin says its number: with the launches trimmed from the journal
        # (a lost state file), the counter still goes on from the newest one
        changes.seen(st, int(n))


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
    tb.owe = wire.owe
    tb.seq = wire.last_seq
    tb.start(now_us(), reset, lambda fw, wh, rs, faults: wire.boot(fw, wh, rs, faults, prev))
    return enc, wire
