# The table's audit trail (issue 19): every threshold change journaled with its old and new
# value and who asked (CFG), and a session closed early for a stated reason (SCLOSE reason).
# The board's path throughout: a real journal, the wire, commands as lines, power cuts.
from fwtest import Line, scratch_dir
from wheelsim import Frames, run, spin_events

from rmcfw import channels, commands, frames, numbers, proto, recover, store, table
from rmcfw.journal import Journal

WHEEL = numbers.NUMBERS
TABLE = "T01"


class _Cut(Exception):
    """The power goes off."""


class _CutStore(store.Store):
    """A state file whose next save the power cut prevents, when `cut` is set."""

    cut = False

    def save(self, state):
        if self.cut:
            raise _Cut()
        store.Store.save(self, state)


class _Board:
    """A table brought up on the flash folder d as board_pico does (rmcfw.recover.power_up)."""

    def __init__(self, d):
        self.d = d
        self.store = _CutStore(d)
        self.tb = table.Table(WHEEL, None, self.store)
        self.jr = Journal(d + "/journal")
        self.line = Line()
        self.enc, self.wire = recover.power_up(
            tb=self.tb,
            jr=self.jr,
            table_id=TABLE,
            key=None,
            send=self.line,
            now_us=lambda: 0,
            now_ms=lambda: 0,
            reset="power",
            rotor_levels=(0, 0),
        )
        self.host = commands.Commander(TABLE)
        self.line.take()

    def command(self, cmd, fields=()):
        """The host's command as a line: (ok, detail) of its ACK, and the frames before it."""
        self.line.take()  # the sensors' frames so far
        self.wire.command(self.host.line(cmd, fields, boot=self.enc.boot))
        got = self.line.take()
        ack = got[-1]
        assert ack.type == proto.T_ACK, got
        return (ack.fields["ok"] == "1", ack.fields["detail"]), got[:-1]

    def journaled(self):
        return [frames.decode(x) for x in self.jr.frames(self.enc.boot, 1)]


def _set(key, value, by="E7"):
    fields = ("key", key, "value", value)
    return fields + ("by", by) if by is not None else fields


def _longest_by():
    """The longest `by` a SET command's line carries: its CFG frame's line cannot."""
    host = commands.Commander(TABLE)
    n = 250
    while True:
        try:
            host.line(proto.C_SET, _set("settle_ms", "800", "x" * n), boot=1)
            return "x" * n
        except ValueError:
            n -= 1


def test_a_threshold_change_is_journaled_with_its_old_and_new_value_and_who_asked():
    d = scratch_dir()
    b = _Board(d)
    assert b.command(proto.C_SET, _set("settle_ms", "800"))[0] == (True, "")
    got = b.command(proto.C_SET, _set("settle_ms", "900", "Mme Durand"))
    assert got[0] == (True, "")
    cfg = [f for f in got[1] if f.type == proto.T_CONFIG]
    assert [f.fields for f in cfg] == [
        {"key": "settle_ms", "old": "800", "new": "900", "by": "Mme Durand"}
    ], got[1]
    # journaled, like every frame, before the state that follows from it is saved
    kept = [f for f in b.journaled() if f.type == proto.T_CONFIG]
    assert [f.fields["new"] for f in kept] == ["800", "900"]
    assert b.tb.cfg.settle_ms == 900
    saved = store.Store(d).load()
    assert saved["cfg"] == {"settle_ms": 900} and saved["seq"] >= kept[-1].seq
    # set again to the value it has: still a change by hand, still on record
    got = b.command(proto.C_SET, _set("settle_ms", "900"))
    assert [f.fields for f in got[1] if f.type == proto.T_CONFIG] == [
        {"key": "settle_ms", "old": "900", "new": "900", "by": "E7"}
    ]


def test_a_refused_set_sends_nothing_and_changes_nothing():
    d = scratch_dir()
    b = _Board(d)
    before = len(b.journaled())
    refused = (
        _set("settle_ms", "800", None),  # nobody asked: refused, as an OPEN without chef
        _set("settle_ms", "800", ""),
        _set("settle_ms", "800", _longest_by()),  # a name the frame's line cannot carry
        _set("min_revs", "3"),  # the rules' 4 revolutions cannot be lowered
        _set("min_revs", "0"),
        _set("settle_ms", "+800"),  # one spelling of a number only
        _set("settle_ms", "0800"),
        _set("settle_ms", " 800"),
        _set("settle_ms", "8_00"),
        _set("settle_ms", "\u0668\u0660\u0660"),  # Arabic-Indic digits
        _set("settle_ms", "5"),  # out of range
        _set("no_such_ms", "800"),
        ("key", "settle_ms", "by", "E7"),  # no value
        ("value", "800", "by", "E7"),  # no key
    )
    for fields in refused:
        got = b.command(proto.C_SET, fields)
        assert got == ((False, proto.A_BAD), []), (fields, got)
    assert len(b.journaled()) == before
    assert b.tb.cfg.settle_ms == 1500 and b.tb.cfg.min_revs == 4
    assert not b.tb.cfg.by_hand("settle_ms")
    assert store.Store(d).load()["cfg"] == {}


def test_a_threshold_change_cut_before_its_save_is_applied_at_power_up():
    # The CFG frame journaled, then the power cut before the state was saved: at power-up the
    # frame, after the last save, sets the threshold as the SET did (and by hand).
    d = scratch_dir()
    b = _Board(d)
    assert b.command(proto.C_SET, _set("settle_ms", "800"))[0] == (True, "")
    b.store.cut = True
    try:
        b.command(proto.C_SET, _set("pair_ms", "200"))
    except _Cut:
        pass
    else:
        raise AssertionError("the save was not cut")
    assert store.Store(d).load()["cfg"] == {"settle_ms": 800}  # the state is one step behind
    b2 = _Board(d)
    c = b2.tb.cfg
    assert c.pair_ms == 200 and c.by_hand("pair_ms") and c.settle_ms == 800
    assert b2.tb.ball.pair_us == 200_000  # in force, not only written down
    assert store.Store(d).load()["cfg"] == {"settle_ms": 800, "pair_ms": 200}
    # and once more (no cut): what the state holds now stays
    b3 = _Board(d)
    assert b3.tb.cfg.pair_ms == 200 and b3.tb.ball.pair_us == 200_000


def test_a_cfg_frame_applied_twice_or_out_of_range_changes_nothing_more():
    # recover.apply, as a cut during the recovery itself replays the same frames again; a
    # frame with a value the rules forbid (a damaged or foreign journal) is not applied
    st = store.defaults()
    cfg = {"key": "min_revs", "old": "4", "new": "6", "by": "E7"}
    recover.apply(st, proto.T_CONFIG, cfg)
    recover.apply(st, proto.T_CONFIG, cfg)
    assert st["cfg"] == {"min_revs": 6}
    tb = table.Table(WHEEL, Frames())
    tb.recover([(proto.T_CONFIG, cfg), (proto.T_CONFIG, {"key": "min_revs", "new": "2"})])
    assert tb.cfg.min_revs == 6
    tb.start(0)
    assert tb.st["cfg"] == {"min_revs": 6}


def _open(b, t=1000):
    assert b.command(proto.C_OPEN, ("chef", "C1"))[0] == (True, "")
    b.tb.feed(t, channels.LID, 0)
    assert b.tb.spin.state == proto.S_BETS


def _play(tb, t0, rdir, bdir, pocket):
    ev, _, t_end = spin_events(t0, rdir, bdir, pocket)
    run(tb, ev, until=t_end)
    tb.feed(t_end + 1000, pocket, 0)  # the croupier picks the ball up
    return t_end + 2000


def test_a_forced_close_states_its_reason_and_needs_no_last_three():
    d = scratch_dir()
    b = _Board(d)
    _open(b)
    t = _play(b.tb, 5_000_000, 1, -1, 12)
    why = "ball sensor B dead, 2 spins void; call = #*%$> 100% sûr\nfin"
    close = ("chef", "C1", "reason", why)
    assert b.command(proto.C_CLOSE, close)[0] == (False, "lid")  # the cylinder locked first
    b.tb.feed(t, channels.LID, 1)
    # a plain close, as today: the last three coups must be announced and played
    assert b.command(proto.C_CLOSE, ("chef", "C1")) == ((False, "last3"), [])
    assert b.command(proto.C_CLOSE, ("chef", "C1", "reason", "")) == ((False, proto.A_BAD), [])
    ok, got = b.command(proto.C_CLOSE, close)
    assert ok == (True, "")
    sclose = [f.fields for f in got if f.type == proto.T_SESSION_CLOSE]
    assert sclose == [{"chef": "C1", "session": "1", "spins": "1", "reason": why}], got
    assert b.tb.spin.state == proto.S_CLOSED and b.tb.st["session"] is None
    assert [f.fields.get("reason") for f in b.journaled() if f.type == "SCLOSE"] == [why]


def test_a_plain_close_sends_no_reason():
    b = _Board(scratch_dir())
    _open(b)
    b.tb.feed(2000, channels.LID, 1)
    ok, got = b.command(proto.C_CLOSE, ("chef", "C1"))  # no coup played: it may close
    assert ok == (True, "")
    assert [f.fields for f in got if f.type == proto.T_SESSION_CLOSE] == [
        {"chef": "C1", "session": "1", "spins": "0"}
    ]


def test_a_forced_close_ends_an_incident_that_cannot_be_resolved():
    b = _Board(scratch_dir())
    tb = b.tb
    _open(b)
    t = _play(tb, 5_000_000, 1, -1, 12)  # the previous result: channel 12
    ev, _t_rest, _t_end = spin_events(t + 5_000_000, -1, 1, 20)
    t_inc = t + 8_000_000
    run(tb, [e for e in ev if e[0] < t_inc])
    # a forced close while the ball runs: refused, the spin ends first
    assert b.command(proto.C_CLOSE, ("chef", "C1", "reason", "x"))[0] == (False, proto.A_BUSY)
    tb.feed(t_inc, channels.INCIDENT, 1)
    tb.feed(t_inc + 10_000, channels.INCIDENT, 0)
    assert tb.spin.state == proto.S_INCIDENT
    # the ball back in the wrong pocket, whose sensor or whose ball never comes right
    tb.feed(t_inc + 5_000_000, 30, 1)
    run(tb, [], until=t_inc + 50_000_000)
    assert tb.spin.state == proto.S_INCIDENT
    tb.feed(t_inc + 50_000_000, channels.LID, 1)
    assert b.command(proto.C_CLOSE, ("chef", "C1"))[0] == (False, proto.A_BUSY)
    ok, got = b.command(proto.C_CLOSE, ("chef", "C1", "reason", "incident: wrong pocket"))
    assert ok == (True, "")
    assert [f.fields["reason"] for f in got if f.type == proto.T_SESSION_CLOSE] == [
        "incident: wrong pocket"
    ]
    assert tb.spin.state == proto.S_CLOSED and tb.st["incident"] is None
    assert store.Store(b.d).load()["incident"] is None
    # the next session starts clean: no incident, bets open as usual
    tb.feed(t_inc + 51_000_000, 30, 0)
    _open(b, t_inc + 52_000_000)


def test_a_forced_close_cut_right_after_its_frame_stays_closed():
    d = scratch_dir()
    b = _Board(d)
    _open(b)
    t = _play(b.tb, 5_000_000, 1, -1, 12)
    b.tb.feed(t, channels.LID, 1)
    b.store.cut = True
    try:
        b.command(proto.C_CLOSE, ("chef", "C1", "reason", "rotor sensor fault"))
    except _Cut:
        pass
    else:
        raise AssertionError("the save was not cut")
    assert store.Store(d).load()["session"] is not None  # the state is one step behind
    b2 = _Board(d)
    assert b2.tb.st["session"] is None and b2.tb.spin.state == proto.S_CLOSED
