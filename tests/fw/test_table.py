# The whole table, driven by synthetic sensor events: results, voids, incidents, sessions.
from fwtest import scratch_dir
from wheelsim import LAPS, Frames, run, spin_events

from rmcfw import channels, numbers, proto, store, table

WHEEL = numbers.NUMBERS  # any order of the 39 labels will do: pocket channel i is WHEEL[i]


def open_table(st=None):
    fr = Frames()
    tb = table.Table(WHEEL, fr, st)
    tb.start(0)
    assert tb.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
    tb.feed(1000, channels.LID, 0)
    assert tb.spin.state == proto.S_BETS
    fr.clear()
    return tb, fr


def play(tb, t0, rdir, bdir, pocket, **kw):
    ev, _, t_end = spin_events(t0, rdir, bdir, pocket, **kw)
    run(tb, ev, until=t_end)
    # the croupier picks the ball up
    tb.feed(t_end + 1000, pocket, 0)
    return t_end + 2000


def test_a_spin_gives_its_result():
    tb, fr = open_table()
    play(tb, 5_000_000, 1, -1, 12)
    assert fr.types()[0] == proto.T_LAUNCH
    res = fr.of(proto.T_RESULT)
    assert res == [
        {"spin": 1, "num": WHEEL[12], "colour": "noir", "parity": "pair", "half": "manque"}
    ], res
    assert len(fr.of(proto.T_RNVP)) == 1
    assert len(fr.of(proto.T_REV)) == len(LAPS)
    assert fr.of(proto.T_DROP) == [{"spin": 1, "revs": len(LAPS)}]
    assert [r["n"] for r in fr.of(proto.T_REV)] == list(range(1, len(LAPS) + 1))
    assert not fr.of(proto.T_VOID)
    assert tb.spin.state == proto.S_BETS
    assert tb.st["results"] == [[1, WHEEL[12]]]


def test_frames_come_in_game_order():
    tb, fr = open_table()
    play(tb, 5_000_000, -1, 1, 0)
    order = [t for t in fr.types() if t in ("LAUNCH", "RNVP", "DROP", "RES")]
    assert order == ["LAUNCH", "RNVP", "DROP", "RES"], order
    res = fr.of(proto.T_RESULT)[0]
    assert res["num"] == "0" and res["colour"] == "vert" and res["half"] == "-"


def test_rnvp_comes_before_the_ball_leaves_the_track():
    tb, fr = open_table()
    ev, _, t_end = spin_events(5_000_000, 1, -1, 3)
    last_pass = max(t for t, c, v in ev if c == channels.BALL_A)
    seen = []
    orig = fr.__call__

    def spy(ftype, fields=()):
        if ftype == proto.T_RNVP:
            seen.append(tb.now)
        orig(ftype, fields)

    tb.emit = tb.spin.emit = spy
    run(tb, ev, until=t_end)
    assert len(seen) == 1 and seen[0] < last_pass, (seen, last_pass)
    assert fr.of(proto.T_RNVP)[0]["why"] in ("fit", "limit")


def test_rotor_must_turn_the_other_way_each_spin():
    tb, fr = open_table()
    t = play(tb, 5_000_000, 1, -1, 12)
    t = play(tb, t + 5_000_000, 1, -1, 13)  # same rotor direction again
    assert fr.of(proto.T_VOID) == [{"spin": 2, "reason": proto.V_NOT_REVERSED}]
    assert [r["spin"] for r in fr.of(proto.T_RESULT)] == [1]  # no result for a void
    play(tb, t + 5_000_000, -1, 1, 14)
    assert [r["spin"] for r in fr.of(proto.T_RESULT)] == [1, 3]


def test_ball_spun_the_rotor_way_is_void():
    tb, fr = open_table()
    play(tb, 5_000_000, 1, 1, 12)
    assert fr.of(proto.T_VOID) == [{"spin": 1, "reason": proto.V_SAME_DIR}]
    assert not fr.of(proto.T_RESULT)


def test_fewer_than_four_revolutions_is_void():
    tb, fr = open_table()
    play(tb, 5_000_000, 1, -1, 12, laps=(1.2, 1.4))
    assert fr.of(proto.T_VOID) == [{"spin": 1, "reason": proto.V_FEW_REVS}]
    assert not fr.of(proto.T_RESULT)


def test_ball_out_of_the_wheel():
    tb, fr = open_table()
    ev, t_rest, _t_end = spin_events(5_000_000, 1, -1, 12, bounce=())
    ev = [e for e in ev if e[1] != 12]  # the ball never lands in a pocket
    run(tb, ev, until=t_rest + 12_000_000)
    assert fr.of(proto.T_VOID) == [{"spin": 1, "reason": proto.V_BALL_OUT}]
    assert {"code": proto.F_NO_POCKET, "on": 1, "detail": ""} in fr.of(proto.T_FAULT)
    assert tb.spin.state == proto.S_BETS
    tb.feed(t_rest + 13_000_000, 20, 1)  # ball put back: the fault clears
    assert fr.of(proto.T_FAULT)[-1]["on"] == 0


def test_a_ball_sensor_missing_passes_voids_the_spin():
    tb, fr = open_table()
    ev, _, t_end = spin_events(5_000_000, 1, -1, 12)
    a_edges = [e for e in ev if e[1] == channels.BALL_A]
    drop = set(a_edges[i] for i in (3, 5, 7))
    run(tb, [e for e in ev if e not in drop], until=t_end)
    assert fr.of(proto.T_VOID) == [{"spin": 1, "reason": proto.V_SENSORS}]
    assert fr.of(proto.T_FAULT)[0]["code"] == proto.F_BALL
    # revolutions still counted from the other sensor
    assert fr.of(proto.T_DROP)[0]["revs"] == len(LAPS)


def test_two_pockets_held_is_an_object_and_the_incident_procedure_runs():
    tb, fr = open_table()
    t = play(tb, 5_000_000, 1, -1, 12)  # previous result: channel 12
    ev, t_rest, _t_end = spin_events(t + 5_000_000, -1, 1, 20)
    ev = [e for e in ev if e[0] < t_rest]
    ev.append((t_rest, 20, 1))
    ev.append((t_rest + 50_000, 30, 1))  # a chip in pocket 30 as well
    run(tb, ev, until=t_rest + 500_000)
    assert tb.spin.state == proto.S_INCIDENT
    assert fr.of(proto.T_VOID)[-1] == {"spin": 2, "reason": proto.V_OBJECT}
    assert fr.of(proto.T_INCIDENT) == [{"spin": 2, "step": "start"}]
    assert any(f["code"] == proto.F_TWO_POCKETS for f in fr.of(proto.T_FAULT))
    t = t_rest + 600_000
    # croupier clears the chip and the ball; puts the ball in the wrong pocket first
    tb.feed(t, 30, 0)
    tb.feed(t + 1000, 20, 0)
    tb.feed(t + 2000, 7, 1)
    run(tb, [], until=t + 3_000_000)
    assert fr.of(proto.T_INCIDENT) == [{"spin": 2, "step": "start"}]  # not accepted
    tb.feed(t + 3_100_000, 7, 0)
    tb.feed(t + 3_200_000, 12, 1)  # the pocket of the previous result
    t = t + 3_200_000
    run(tb, [(t + 2_000_000, 12, 1)], until=t + 2_000_000)
    assert fr.of(proto.T_INCIDENT)[-1] == {"spin": 2, "step": "ball_back"}
    tb.feed(t + 2_100_000, 12, 0)
    n_rnvp = len(fr.of(proto.T_RNVP))
    play(tb, t + 3_000_000, 1, -1, 25)
    assert fr.of(proto.T_INCIDENT)[-1] == {"spin": 2, "step": "relaunch"}
    rn = fr.of(proto.T_RNVP)
    assert len(rn) == n_rnvp + 1 and rn[-1]["why"] == "incident"  # bets stay closed
    assert fr.of(proto.T_RESULT)[-1]["spin"] == 3
    assert fr.of(proto.T_RESULT)[-1]["num"] == WHEEL[25]


def test_incident_input_during_the_run():
    tb, fr = open_table()
    ev, _t_rest, _t_end = spin_events(5_000_000, 1, -1, 12)
    cut = [e for e in ev if e[0] < 7_000_000]
    run(tb, cut)
    tb.feed(7_000_000, channels.INCIDENT, 1)
    assert tb.spin.state == proto.S_INCIDENT
    assert fr.of(proto.T_RNVP)[-1]["why"] == "incident"
    assert fr.of(proto.T_VOID) == [{"spin": 1, "reason": proto.V_OBJECT}]


def test_last_three_spins_then_the_session_closes_with_the_lid():
    tb, fr = open_table()
    t = play(tb, 5_000_000, 1, -1, 1)
    assert tb.handle(proto.C_LAST_THREE, {}) == (True, "")
    assert fr.of(proto.T_LAST_THREE) == [{"last": 4, "left": 3}]
    assert tb.handle(proto.C_CLOSE, {"chef": "C1"}) == (False, "lid")
    d = -1
    for pocket in (2, 3, 4):
        t = play(tb, t + 5_000_000, d, -d, pocket)
        d = -d
    assert [f["left"] for f in fr.of(proto.T_LAST_THREE)] == [3, 2, 1, 0]
    assert tb.spin.state == proto.S_OPEN  # no more bets
    tb.feed(t + 1000, channels.LID, 1)
    assert fr.of(proto.T_SESSION_CLOSE) == [{"chef": "C1", "session": 1, "spins": 4}]
    assert tb.spin.state == proto.S_CLOSED
    tb.feed(t + 2000, channels.LID, 0)
    assert fr.of(proto.T_TAMPER) == [{"what": "lid"}]


def test_close_is_refused_while_the_lid_is_open_or_spins_remain():
    tb, _fr = open_table()
    assert tb.handle(proto.C_CLOSE, {"chef": "C1"}) == (False, "lid")
    tb.feed(2000, channels.LID, 1)
    assert tb.spin.state == proto.S_OPEN
    assert tb.handle(proto.C_CLOSE, {"chef": "C1"}) == (True, "")  # no spin played
    assert tb.handle(proto.C_CLOSE, {"chef": "C1"}) == (False, "closed")
    assert tb.handle(proto.C_OPEN, {"chef": "C2"}) == (True, "")
    assert tb.handle(proto.C_OPEN, {"chef": "C2"}) == (False, proto.A_BUSY)


def test_set_and_recall():
    tb, fr = open_table()
    assert tb.handle(proto.C_SET, {"key": "settle_ms", "value": "800"}) == (True, "")
    assert tb.cfg.settle_ms == 800
    try:
        tb.handle(proto.C_SET, {"key": "settle_ms", "value": "5"})
    except ValueError:
        pass
    else:
        raise AssertionError("out of range accepted")
    t = play(tb, 5_000_000, 1, -1, 5)
    play(tb, t + 5_000_000, -1, 1, 6)
    assert tb.handle(proto.C_RECALL, {"n": "10"}) == (True, "")
    rc = fr.of(proto.T_RECALL)[-1]
    assert rc == {"n": 2, "games": "1:%s;2:%s" % (WHEEL[5], WHEEL[6])}, rc


def test_a_pocket_stuck_on_is_found_and_masked():
    tb, fr = open_table()
    tb.feed(2_000_000, 33, 1)  # stuck before the launch, never lets go
    ev, _t_rest, t_end = spin_events(5_000_000, 1, -1, 12)
    run(tb, ev, until=t_end)
    f = [x for x in fr.of(proto.T_FAULT) if x["code"] == proto.F_POCKET_STUCK_ON]
    assert f == [{"code": proto.F_POCKET_STUCK_ON, "on": 1, "detail": "33"}], fr.frames
    assert fr.of(proto.T_RESULT)[0]["num"] == WHEEL[12]
    tb.feed(t_end + 1000, 33, 0)
    f = [x for x in fr.of(proto.T_FAULT) if x["code"] == proto.F_POCKET_STUCK_ON]
    assert f[-1]["on"] == 0


def test_a_pocket_stuck_on_while_bets_are_open_is_reported_before_the_launch():
    tb, fr = open_table()
    tb.feed(2_000_000, 7, 1)  # the ball is off the pockets while bets are open
    run(tb, [(2_000_001, 40, 0)], until=3_400_000)
    assert not fr.of(proto.T_FAULT)  # not yet: stuck_on_ms is 1.5 s
    run(tb, [(3_400_001, 40, 0)], until=3_600_000)
    assert fr.of(proto.T_FAULT) == [{"code": proto.F_POCKET_STUCK_ON, "on": 1, "detail": "7"}]
    assert tb.pockets.count == 0  # masked: the next drop sees only the ball
    ev, _t_rest, t_end = spin_events(5_000_000, 1, -1, 12)
    run(tb, ev, until=t_end)
    assert fr.of(proto.T_RESULT)[0]["num"] == WHEEL[12]
    assert len(fr.of(proto.T_FAULT)) == 1  # reported once


def test_a_dead_pocket_sensor_voids_the_spin_soon_after_the_bounces():
    tb, fr = open_table()
    ev, t_rest, _t_end = spin_events(5_000_000, 1, -1, 12)
    ev = [e for e in ev if e[1] != 12]  # bounces seen, the resting pocket's sensor dead
    run(tb, ev, until=t_rest + 3_500_000)
    assert fr.of(proto.T_VOID) == [{"spin": 1, "reason": proto.V_SENSORS}]
    assert {"code": proto.F_POCKET_STUCK_OFF, "on": 1, "detail": "-"} in fr.of(proto.T_FAULT)


def test_state_survives_a_reboot_and_faults_are_reported_again():
    d = scratch_dir()
    tb, _fr = open_table(store.Store(d))
    t = play(tb, 5_000_000, 1, -1, 12)
    tb.spin.fault(proto.F_ROTOR, 1, "test")
    # power cut: a new table on the same files
    fr2 = Frames()
    tb2 = table.Table(WHEEL, fr2, store.Store(d))
    tb2.start(t + 10)
    assert fr2.of(proto.T_BOOT)[0]["faults"] == proto.F_ROTOR
    assert {"code": proto.F_ROTOR, "on": 1, "detail": "test"} in fr2.of(proto.T_FAULT)
    assert tb2.st["boot"] == 2
    assert tb2.st["results"] == [[1, WHEEL[12]]]
    assert tb2.st["rdir"] == 1
    assert tb2.spin.state == proto.S_OPEN  # the session is still open
    assert tb2.st["session"]["spins"] == 1
    assert tb2.pred.learned == tb.pred.learned


def test_watchdog_reset_is_a_fault_until_the_next_session():
    fr = Frames()
    tb = table.Table(WHEEL, fr)
    tb.start(0, reset="watchdog")
    assert fr.of(proto.T_BOOT)[0]["faults"] == proto.F_WATCHDOG
    tb.handle(proto.C_OPEN, {"chef": "C"})
    assert fr.of(proto.T_FAULT)[-1] == {"code": proto.F_WATCHDOG, "on": 0, "detail": "reset"}


def test_bad_input_is_refused_not_crashing():
    tb, fr = open_table()
    for bad in ((1000, 99, 1), (1000, -1, 1)):
        try:
            tb.feed(*bad)
        except ValueError:
            pass
        else:
            raise AssertionError("bad channel accepted")
    try:
        table.Table(WHEEL[:-1], fr)
    except ValueError:
        pass
    else:
        raise AssertionError("short wheel accepted")
    assert tb.handle("NOPE", {}) == (False, proto.A_UNKNOWN)


def power_back(folder, t_on):
    """The power comes back at t_on: a new table on the same flash; the lid is read (unlocked)."""
    fr = Frames()
    tb = table.Table(WHEEL, fr, store.Store(folder))
    tb.start(t_on)
    tb.feed(t_on, channels.LID, 0)
    return tb, fr


def test_power_cut_during_a_spin_resumes_it():
    d = scratch_dir()
    tb, _fr = open_table(store.Store(d))
    t = play(tb, 5_000_000, 1, -1, 12)
    ev, _t_rest, t_end = spin_events(t + 5_000_000, -1, 1, 20)
    t_cut = t + 5_000_000 + 4_000_000  # the ball is on the track
    run(tb, [e for e in ev if e[0] < t_cut])
    assert tb.spin.state == proto.S_TRACK
    # power back 1.5 s later: a new table on the same flash; the lid is read at power-up
    t_on = t_cut + 1_500_000
    tb2, fr2 = power_back(d, t_on)
    assert fr2.of(proto.T_RNVP) == [{"spin": 2, "drop_ms": 0, "lead_ms": 0, "why": "power"}]
    run(tb2, [e for e in ev if e[0] > t_on], until=t_end)
    assert fr2.of(proto.T_RESULT) == [
        {"spin": 2, "num": "18", "colour": "rouge", "parity": "pair", "half": "manque"}
    ], fr2.frames
    assert not fr2.of(proto.T_VOID)
    assert tb2.st["run"] is None


def test_power_cut_during_an_incident_keeps_the_procedure():
    # Decree 1-4: the ball goes back to the previous result's pocket and is launched again,
    # bets staying closed. A power cut in the middle must not reopen the bets.
    d = scratch_dir()
    tb, _fr = open_table(store.Store(d))
    t = play(tb, 5_000_000, 1, -1, 12)  # previous result: channel 12
    ev, _t_rest, _t_end = spin_events(t + 5_000_000, -1, 1, 20)
    t_inc = t + 5_000_000 + 3_000_000
    run(tb, [e for e in ev if e[0] < t_inc])
    tb.feed(t_inc, channels.INCIDENT, 1)
    tb.feed(t_inc + 10_000, channels.INCIDENT, 0)
    assert tb.spin.state == proto.S_INCIDENT
    # power back: a new table on the same flash, still in the incident
    t_on = t_inc + 2_000_000
    tb2, fr2 = power_back(d, t_on)
    assert tb2.spin.state == proto.S_INCIDENT, tb2.spin.state
    # the ball is put back where the previous result was, then launched again
    tb2.feed(t_on + 100_000, 12, 1)
    run(tb2, [], until=t_on + 2_500_000)
    assert fr2.of(proto.T_INCIDENT) == [{"spin": 2, "step": "ball_back"}], fr2.frames
    tb2.feed(t_on + 2_600_000, 12, 0)
    play(tb2, t_on + 3_000_000, 1, -1, 25)
    assert fr2.of(proto.T_INCIDENT)[-1] == {"spin": 2, "step": "relaunch"}
    assert fr2.of(proto.T_RNVP)[0]["why"] == "incident"  # bets closed at the relaunch
    res = fr2.of(proto.T_RESULT)
    assert [(r["spin"], r["num"]) for r in res] == [(3, WHEEL[25])], res
    assert tb2.st["incident"] is None
