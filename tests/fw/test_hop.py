# HOP: the pockets lit while the ball bounces, from the DROP to the frame ending the spin, at
# most one per spin.HOP_MS, the last picture always sent before the result.
from fwtest import raises
from test_table import WHEEL, open_table, play
from wheelsim import run, spin_events

from rmcfw import frames, proto, spin


def _between(fr, first, last):
    """The frame types from the first `first` to the first `last` after it, both included."""
    types = fr.types()
    i = types.index(first)
    j = types.index(last, i)
    return fr.frames[i : j + 1]


def test_the_bounce_is_sent_pocket_by_pocket_between_the_drop_and_the_result():
    tb, fr = open_table()
    play(tb, 5_000_000, 1, -1, 12)
    part = _between(fr, proto.T_DROP, proto.T_RESULT)
    hops = [f for t, f in part if t == proto.T_HOP]
    # wheelsim: channels 5, 17, 30 held 120 ms each, 80 ms apart, then 12 at rest
    assert [h["lit"] for h in hops] == [WHEEL[5], "-", WHEEL[17], "-", WHEEL[30], "-", WHEEL[12]]
    assert all(h["spin"] == 1 for h in hops)
    # none before the drop, none after the result
    types = fr.types()
    assert proto.T_HOP not in types[: types.index(proto.T_DROP)]
    assert proto.T_HOP not in types[types.index(proto.T_RESULT) :]
    assert tb.spin.state == proto.S_BETS


def _times_of_hops(tb, fr):
    times = []
    orig = fr.__call__

    def spy(ftype, fields=()):
        if ftype == proto.T_HOP:
            times.append(tb.now)
        orig(ftype, fields)

    tb.emit = tb.spin.emit = spy
    return times


def test_a_chattering_pocket_sends_one_hop_per_hop_ms_and_its_last_picture():
    tb, fr = open_table()
    times = _times_of_hops(tb, fr)
    ev, t_rest, t_end = spin_events(5_000_000, 1, -1, 12, bounce=(5,))
    # pocket 9 chatters every 2 ms for 300 ms in the middle of the bounce, and ends held
    # together with nothing else (the ball then settles in 12 as before)
    t0 = t_rest - 700_000
    for k in range(150):
        ev.append((t0 + 2000 * k, 9, 1 - k % 2))
    ev.append((t0 + 300_000, 9, 1))
    ev.append((t0 + 450_000, 9, 0))
    ev.sort(key=lambda e: e[0])
    run(tb, ev, until=t_end)
    hops = fr.of(proto.T_HOP)
    assert len(times) == len(hops)
    gaps = [times[i + 1] - times[i] for i in range(len(times) - 1)]
    assert min(gaps) >= spin.HOP_MS * 1000, gaps
    assert len(hops) <= 2 + 450_000 // (spin.HOP_MS * 1000) + 4, hops
    assert hops[-1]["lit"] == WHEEL[12]  # the last picture: the pocket the ball rests in
    assert fr.of(proto.T_RESULT)[0]["num"] == WHEEL[12]


def test_the_last_picture_goes_out_before_the_result_even_inside_hop_ms():
    tb, fr = open_table()
    tb.spin.cfg.settle_ms = 200  # the lowest settle: still above HOP_MS
    ev, _t_rest, t_end = spin_events(5_000_000, 1, -1, 12, bounce=(5,), settle_us=400_000)
    run(tb, ev, until=t_end)
    part = _between(fr, proto.T_DROP, proto.T_RESULT)
    assert part[-2] == (proto.T_HOP, {"spin": 1, "lit": WHEEL[12]}), part


def test_the_hop_before_the_result_is_forced_when_held_back():
    # the spin's own logic: a picture still held back by HOP_MS is sent with force before
    # the frame ending the spin
    tb, fr = open_table()
    ev, t_rest, _t_end = spin_events(5_000_000, 1, -1, 12, bounce=(5,))
    run(tb, [e for e in ev if e[0] < t_rest])
    s = tb.spin
    assert s.state == proto.S_DROPPED
    fr.clear()
    s.hop_sent = True
    s.t_hop = t_rest - 1000  # pretend a HOP went 1 ms ago: the next one is held back
    tb.feed(t_rest, 12, 1)  # the pocket held, and at once (same instant) the result decided
    assert s.hop_due and not fr.of(proto.T_HOP)  # held back
    s._result(t_rest, 12)
    assert fr.types()[:2] == [proto.T_HOP, proto.T_RESULT], fr.types()
    assert fr.of(proto.T_HOP) == [{"spin": 1, "lit": WHEEL[12]}]


def test_a_spin_void_at_its_drop_sends_no_hop():
    tb, fr = open_table()
    play(tb, 5_000_000, 1, -1, 12, laps=(1.2, 1.4))
    assert fr.of(proto.T_VOID) == [{"spin": 1, "reason": proto.V_FEW_REVS}]
    assert not fr.of(proto.T_HOP)


def test_a_ball_out_of_the_wheel_sends_no_hop_and_an_incident_ends_them():
    tb, fr = open_table()
    ev, _t_rest, t_end = spin_events(5_000_000, 1, -1, 12, bounce=())
    run(tb, [e for e in ev if e[1] != 12], until=t_end + 30_000_000)
    assert fr.of(proto.T_VOID)[0]["reason"] == proto.V_BALL_OUT
    assert not fr.of(proto.T_HOP)
    # two pockets held among the bounces: an object; the HOPs stop before its VOID
    tb, fr = open_table()
    ev, t_rest, t_end = spin_events(5_000_000, 1, -1, 12, bounce=(5, 17))
    ev = [e for e in ev if e[0] < t_rest] + [(t_rest, 20, 1), (t_rest + 1000, 21, 1)]
    run(tb, ev, until=t_rest + 3_000_000)
    types = fr.types()
    assert proto.T_INCIDENT in types
    i = types.index(proto.T_VOID)
    hops = [f["lit"] for t, f in fr.frames[:i] if t == proto.T_HOP]
    assert hops[-2:] == [WHEEL[20], "%s;%s" % (WHEEL[20], WHEEL[21])], hops
    assert proto.T_HOP not in types[i:]


def test_a_pocket_list_has_one_spelling():
    assert frames.pocket_list([]) == "-"
    assert frames.pocket_list(["17"]) == "17"
    assert frames.pocket_list(["0", "00", "CMC"]) == "0;00;CMC"
    assert frames.pocket_labels("-") == []
    assert frames.pocket_labels("0;00;CMC") == ["0", "00", "CMC"]
    for bad in ("", ";", "17;", ";17", "17;;5", "17;17", "-;17", "17;-"):
        raises(frames.FrameError, frames.pocket_labels, bad)


def test_every_pocket_lit_still_fits_a_tagged_line():
    labels = list(WHEEL)
    enc = frames.Encoder("T0123456789abcde", 4294967295, b"k" * 32, seq=4294967290)
    line = enc.frame(proto.T_HOP, ("spin", 4294967295, "lit", frames.pocket_list(labels)))
    assert len(line) <= frames.MAX_LINE + 1
    f = frames.decode(bytes(line), b"k" * 32)
    assert frames.pocket_labels(f.fields["lit"]) == labels
