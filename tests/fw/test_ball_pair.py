# Two ball edges served together (the core had its interrupts off, as an RP2040 does during a
# 45 ms flash erase; docs/vpico.md): the pass counts, seen by both sensors, with no direction.
# Their pin order (A first) must not read a counter-clockwise ball clockwise.
from wheelsim import Frames, ball_passes, run, spin_events

from rmcfw import ball, channels, numbers, proto, table

WHEEL = numbers.NUMBERS
IRQ_US = 30  # two hard IRQs served back to back, A's then B's
GAP_FASTEST_US = 3333  # 6 degrees apart at a 0.2 s lap: twice the fastest launch's speed


def feed(b, events):
    n = 0
    for t, c, v in sorted(events):
        if v and b.edge(t, c == channels.BALL_B):
            n += 1
    return n


def served_late(events, t_from, t_to):
    """The ball edges in [t_from, t_to] held by interrupts off and served at t_to, in pin
    order (A, then B IRQ_US later); the other edges as they were."""
    out = []
    held = []
    for e in events:
        if t_from <= e[0] <= t_to and (e[1] == channels.BALL_A or e[1] == channels.BALL_B):
            held.append(e)
        else:
            out.append(e)
    for _t, c, v in held:
        out.append((t_to + (IRQ_US if c == channels.BALL_B else 0), c, v))
    out.sort(key=lambda e: e[0])
    return out


def test_edges_served_together_give_a_pass_with_no_direction():
    b = ball.Ball()
    ev = []
    ball_passes([1_000_000], -1, ev)  # B at 985 ms, A at 1 s: counter-clockwise
    ev = served_late(ev, 980_000, 1_020_000)  # both served at 1.02 s, A first
    assert feed(b, ev) == 1
    assert b.count == 1 and b.paired and b.dir == 0 and b.together == 1
    assert b.first_dir == 0 and b.reversed == 0 and b.lone == 0


def test_a_launch_pass_served_together_leaves_the_direction_to_the_next_pass():
    b = ball.Ball()
    ev = []
    ball_passes([1_000_000, 1_550_000, 2_120_000], -1, ev)
    ev = served_late(ev, 980_000, 1_020_000)
    evs = sorted(ev)
    feed(b, evs[:2])  # the launch pass
    b.restart()
    assert b.count == 1 and b.first_dir == 0  # the spin checks the direction later
    feed(b, evs[2:])
    assert b.first_dir == -1 and b.dir == -1 and b.reversed == 0 and b.lone == 0
    assert b.count == 3


def test_a_later_pass_served_together_is_neither_reversed_nor_lone():
    b = ball.Ball()
    ev = []
    times = [0, 600_000, 1_250_000, 1_960_000]
    ball_passes(times, -1, ev)
    ev = served_late(ev, 1_230_000, 1_270_000)
    assert feed(b, ev) == 4
    assert b.first_dir == -1 and b.reversed == 0 and b.lone == 0 and b.together == 1
    assert b.count == 4 and b.dir == -1  # the last pass had its direction again


def test_the_fastest_ball_still_gives_its_direction():
    for d in (1, -1):
        b = ball.Ball()
        ev = []
        ball_passes([500_000, 700_000], d, ev, gap_us=GAP_FASTEST_US)
        assert feed(b, ev) == 2
        assert b.first_dir == d and b.dir == d and b.together == 0, d


def _spin(rdir, bdir, hold_pass):
    """One spin on a table: rotor rdir, ball bdir, result pocket channel 12; the ball edges
    of pass `hold_pass` (0: the launch) held 40 ms and served together."""
    fr = Frames()
    tb = table.Table(WHEEL, fr, None)
    tb.start(0)
    assert tb.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
    tb.feed(1000, channels.LID, 0)
    fr.clear()
    ev, _, t_end = spin_events(5_000_000, rdir, bdir, 12)
    passes = sorted(e[0] for e in ev if e[1] == channels.BALL_A)
    t = passes[hold_pass]
    ev = served_late(ev, t - 20_000, t + 20_000)
    run(tb, ev, until=t_end)
    return fr


def test_a_counter_clockwise_launch_served_together_is_no_same_dir_void():
    fr = _spin(1, -1, 0)
    assert fr.of(proto.T_VOID) == [], fr.of(proto.T_VOID)
    assert [f["num"] for f in fr.of(proto.T_RESULT)] == [WHEEL[12]]
    assert [f["code"] for f in fr.of(proto.T_FAULT) if f["code"] == proto.F_BALL] in (
        [],
        [proto.F_BALL],
    )
    assert all(f.get("on") != 1 for f in fr.of(proto.T_FAULT) if f["code"] == proto.F_BALL)


def test_a_ball_spun_the_rotors_way_is_still_void_when_its_launch_came_together():
    fr = _spin(1, 1, 0)
    assert [f["reason"] for f in fr.of(proto.T_VOID)] == [proto.V_SAME_DIR]


def test_a_later_pass_served_together_keeps_the_result():
    for k in (1, 5):
        fr = _spin(1, -1, k)  # counter-clockwise: A first reads it backwards
        assert fr.of(proto.T_VOID) == [], (k, fr.of(proto.T_VOID))
        assert [f["num"] for f in fr.of(proto.T_RESULT)] == [WHEEL[12]], k
        assert all(f.get("lone") is None for f in fr.of(proto.T_REV)), k
