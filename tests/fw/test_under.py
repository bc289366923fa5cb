# The pocket under ball sensor A (LAUNCH's and DROP's `under`, the dealer's signature): the
# rotor's place from the disc's reference mark and the quadrature count, integer arithmetic.
# Run under CPython and MicroPython (tests/test_micropython.py).
import json

import wheelsim
from wheelsim import Frames, count_at, pocket_under, segment_edges

from rmcfw import channels, proto, rotor, table

GEOMETRY = {
    "ball_sensor_angles_deg": [0, 6],
    "rotor_encoder_slots": 39,
    "rotor_sensor_deg": 0,
    "rotor_mark_deg": 0,
}


def _rotor(events, phi0, mark=wheelsim.MARK):
    r = rotor.Rotor(39)
    r.mark_q, r.a2 = rotor.mark_of({"geometry": GEOMETRY}, 39)
    a, b = wheelsim.levels(phi0, mark)
    r.seed(a, b)
    for t, c, v in events:
        r.edge(t, c == channels.ROTOR_B, v)
    return r


def _turning(phi0, period_us, direction, turns, mark=wheelsim.MARK, t0=1_000_000):
    """Edges of a rotor at a steady speed: (events, the end instant, the angle at a time)."""
    ev = []
    w = direction * wheelsim.TWO_PI * 1e6 / period_us
    dur = int(turns * period_us)
    segment_edges(t0, dur, phi0, w, 0.0, ev, mark)

    def phi(t):
        return phi0 + w * (t - t0) / 1e6

    return ev, t0 + dur, phi


def test_mark_of_reads_the_wheel_geometry():
    assert rotor.mark_of({"geometry": GEOMETRY}, 39) == (0, 0)
    g = dict(GEOMETRY, rotor_mark_deg=360 / 39 * 3, ball_sensor_angles_deg=[6, 12])
    q10, a2 = rotor.mark_of({"geometry": g}, 39)
    assert q10 == 156 - 12, q10  # the wide slot three pitches on: its count 12 back
    assert a2 == 203, a2  # 6 degrees: 2 * 6 * 39 * 156 / 360 = 202.8 half-steps
    for bad in ({}, {"geometry": {}}, {"geometry": dict(GEOMETRY, rotor_mark_deg="x")}):
        assert rotor.mark_of(bad, 39) is None
    assert rotor.mark_of({"geometry": dict(GEOMETRY, rotor_encoder_slots=40)}, 39) is None


def test_the_mark_gives_the_pocket_under_the_sensor_either_way():
    for direction in (1, -1):
        for phi0 in (0.3, 2.0, 5.5):
            ev, _, phi = _turning(phi0, 3_700_000, direction, 2.3)
            r = _rotor(ev, phi0)
            assert r.known and r.marks >= 2, (direction, phi0, r.marks)
            # instants inside a step (never on an edge): the rotor's count tells the pocket
            checked = 0
            for i in range(len(ev) - 15, len(ev) - 1):  # within the 16 edges kept
                t = (ev[i][0] + ev[i + 1][0]) // 2
                assert r.pocket_under(t) == pocket_under(phi(t)), (direction, phi0, t)
                checked += 1
            assert checked == 14


def test_before_the_mark_passes_the_place_is_unknown():
    # a quarter turn from a place whose mark is half a turn away: not seen yet
    ev, t_end, _ = _turning(3.1, 4_000_000, 1, 0.25)
    r = _rotor(ev, 3.1)
    assert not r.known and r.pocket_under(t_end) == -1


def test_a_plain_disc_never_shows_a_mark_speeding_up_or_braking():
    # every slot alike (no mark), the croupier's push from a stop, a coast, a brake to a stop
    ev = []
    phi = segment_edges(0, 600_000, 1.0, 0.0, 2.8, ev, mark=None)  # 0 to 1.7 rad/s
    phi = segment_edges(600_000, 8_000_000, phi, 1.68, -0.004, ev, mark=None)
    w = 1.68 - 0.004 * 8
    segment_edges(8_600_000, int(w / 2.0 * 1e6), phi, w, -2.0, ev, mark=None)
    r = _rotor(ev, 1.0, mark=None)
    assert r.marks == 0 and not r.known


def test_the_mark_is_found_while_the_rotor_speeds_up():
    ev = []
    phi = segment_edges(0, 600_000, 4.0, 0.0, 2.8, ev)
    segment_edges(600_000, 5_000_000, phi, 1.68, -0.004, ev)
    r = _rotor(ev, 4.0)
    assert r.known
    t = (ev[-3][0] + ev[-2][0]) // 2
    tau = (t - 600_000) / 1e6
    assert r.pocket_under(t) == pocket_under(phi + 1.68 * tau - 0.002 * tau * tau)


def test_a_missed_edge_puts_the_place_in_doubt_until_the_mark_passes_again():
    ev, _, phi = _turning(0.5, 3_600_000, -1, 1.5)
    r = _rotor(ev, 0.5)
    assert r.known
    t0 = ev[-1][0] + 1000
    ev2, _, phi2 = _turning(phi(t0), 3_600_000, -1, 2.0, t0=t0)
    for t, c, v in ev2[:10] + ev2[11:13]:  # edge 10 missed: its channel's next is an error
        r.edge(t, c == channels.ROTOR_B, v)
    assert r.errors == 1
    assert not r.known and r.pocket_under(ev2[12][0]) == -1
    for t, c, v in ev2[13:]:
        r.edge(t, c == channels.ROTOR_B, v)
    # the count slipped by a pitch; the mark's next pass sets the place right
    assert r.known
    t = (ev2[-3][0] + ev2[-2][0]) // 2
    assert r.pocket_under(t) == pocket_under(phi2(t))


def test_an_instant_just_before_the_last_edges_is_placed_on_the_count():
    ev, _, phi = _turning(1.2, 3_000_000, 1, 1.5)
    r = _rotor(ev, 1.2)
    for back in (2, 5, 9):
        t = (ev[-back - 1][0] + ev[-back][0]) // 2
        assert r.pocket_under(t) == pocket_under(phi(t)), back
    # older than the 16 edges kept: not placed
    assert r.pocket_under(ev[-20][0] - 1) == -1


def test_count_helpers_agree_with_the_edges():
    ev, _, phi = _turning(0.0, 3_900_000, 1, 1.0)
    levels = list(wheelsim.levels(0.0))
    for t, c, v in ev:
        levels[0 if c == channels.ROTOR_A else 1] = v
        # half a millisecond on (a step lasts some 20 ms): clear of the edge in float32 too
        assert tuple(levels) == wheelsim.levels_of_count(count_at(phi(t + 500))), t


# --- the table: LAUNCH and DROP carry it ---------------------------------------------------


def _fixture():
    """A session of rmc.sim (tests/fw/under_sim.txt, written by tests/test_sim_under.py):
    its wheel, host commands, truth and sensor events."""
    wheel = commands = truth = None
    events = []
    levels = {}
    t = 0
    path = __file__.rsplit("/", 1)[0] + "/under_sim.txt"
    with open(path) as f:
        for line in f:
            kind = line[0]
            if kind == "#":
                continue
            if kind == "W":
                wheel = json.loads(line[2:])
            elif kind == "C":
                commands = json.loads(line[2:])
            elif kind == "T":
                truth = json.loads(line[2:])
            elif kind == "I":
                c, v = line[2:].split()
                levels[int(c)] = int(v)
                events.append((0, int(c), int(v)))
            else:
                dt, c = line.split()
                t += int(dt)
                c = int(c)
                levels[c] = 1 - levels[c]  # every event changes its channel's level
                events.append((t, c, levels[c]))
    return wheel, commands, truth, events


def test_the_table_reports_the_simulators_truth():
    wheel, commands, truth, events = _fixture()
    fr = Frames()
    tb = table.Table(wheel, fr)
    tb.start(0)
    now = 0
    for t, c, v in events:
        while now + 1000 < t:
            now += 1000
            while commands and commands[0][0] <= now:
                cmd = commands.pop(0)[1]
                ok = tb.handle(proto.C_OPEN if cmd == "open" else proto.C_LAST_THREE, {"chef": "s"})
                assert ok[0], cmd
            tb.poll(now)
        tb.feed(t, c, v)
        now = t
    for _ in range(12000):
        now += 1000
        tb.poll(now)
    launches, drops = fr.of(proto.T_LAUNCH), fr.of(proto.T_DROP)
    assert len(launches) == len(drops)
    got = [
        [launches[i]["spin"], launches[i]["under"], drops[i]["under"]] for i in range(len(drops))
    ]
    assert got == truth, (got, truth)
    assert len(fr.of(proto.T_RESULT)) == len(truth)


def test_a_wheel_without_the_geometry_says_unknown():
    ev, _t_rest, t_end = wheelsim.spin_events(5_000_000, -1, 1, 12)
    fr = Frames()
    tb = table.Table(wheelsim_wheel(), fr)
    tb.start(0)
    tb.handle(proto.C_OPEN, {"chef": "c"})
    tb.feed(1000, channels.LID, 0)
    wheelsim.run(tb, ev, until=t_end + 2_000_000)
    assert [f["under"] for f in fr.of(proto.T_LAUNCH)] == ["-"]
    assert [f["under"] for f in fr.of(proto.T_DROP)] == ["-"]
    assert fr.of(proto.T_RESULT)


def wheelsim_wheel():
    wheel, _, _, _ = _fixture()
    return wheel["pockets"]  # the labels alone: no geometry


def test_the_longest_launch_and_drop_fit_in_a_line():
    from rmcfw import frames

    enc = frames.Encoder("T" * 16, 4294967295, b"k" * 32)
    big = 4294967295
    launch = enc.frame(
        proto.T_LAUNCH,
        ("spin", big, "rdir", "ccw", "bdir", "ccw", "under", "CMC", "void", "not_reversed"),
        seq=big - 1,
        ms=big,
    )
    drop = enc.frame(
        proto.T_DROP, ("spin", big, "revs", big, "under", "CMC", "void", "few_revs"), ms=big
    )
    assert len(launch) <= 251 and len(drop) <= 251, (len(launch), len(drop))  # with "\n"
