# A ball pass's dear work put off to the loop's next passes (issue 27): its REV frame built
# in the pass after it, journaled in the next, sent in the one after (rmcfw.commands.Wire.owe),
# its refit's slices after them (rmcfw.rnvp.Predictor.lap_start). The board running a spin
# so sends the same bytes, in the same order, as one doing it all in the ball's pass:
# frames, seq, time stamps, the ACK and STAT of a STATUS read in between, the call, the result.
import fakemachine
from test_board_pico import apply_event, make_board
from wheelsim import spin_events

from rmcfw import frames, proto
from rmcfw.commands import Commander


def _spin(defer, poll_after=()):
    """One spin on a board run as Board.run runs it (step, then pace, on the test's clock);
    a STATUS read from the line in the passes `poll_after` the 3rd, 6th and 9th ball passes
    (0: the ball's own pass). Returns (every byte the UART sent, the passes that found a
    frame put off at their start)."""
    b, clock = make_board()
    b.wire.defer = defer
    uart = fakemachine.UART.last
    host = Commander("T01")
    assert b.table.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
    fakemachine.Pin.all[14].level = 1  # lid unlocked (locked_level 0)
    b._due = clock.ticks_us()
    for _ in range(30):
        b.step()
        b.pace()
    assert b.table.spin.state == proto.S_BETS
    ev, _, t_end = spin_events(clock.us + 4_000_000, 1, -1, 17)
    i = 0
    owed = 0
    passes = b.table.ball.count
    polls = []  # the passes left before a STATUS is read
    while clock.us < t_end:
        while i < len(ev) and ev[i][0] <= clock.us + 100:
            apply_event(clock, ev[i])  # (an edge stamped just before the pass that drains it)
            i += 1
        for k in range(len(polls)):
            polls[k] -= 1
            if not polls[k]:
                line = host.line(proto.C_STATUS, (), boot=b.encoder.boot)
                uart.inp.extend(line + b"\n")
        if b.wire.owed:
            owed += 1
        b.step()
        b.pace()
        if b.table.ball.count != passes:
            passes = b.table.ball.count
            if passes in (3, 6, 9):
                polls += [k + 1 for k in poll_after]
    return bytes(uart.out), owed


def _frames(data):
    return [frames.decode(x) for x in data.split(b"\n") if x]


def test_a_spin_sends_the_same_bytes_with_its_revs_put_off():
    now, n_now = _spin(False)
    later, n_later = _spin(True)
    assert n_now == 0
    revs = [f for f in _frames(later) if f.type == proto.T_REV]
    assert len(revs) >= 10 and n_later == 3 * len(revs)  # built, journaled, sent: a pass each
    assert later == now
    got = _frames(later)
    types = [f.type for f in got]
    assert proto.T_RNVP in types and proto.T_RESULT in types, types


def test_a_command_between_a_pass_and_its_rev_is_answered_after_it():
    """A STATUS read in the ball's pass, or in either pass after it: its ACK and STAT come
    after the REV, as when the REV went out in the ball's pass (the ACK's `top` counts it)."""
    for poll in ((0,), (1,), (2,), (0, 1, 2)):
        now, _ = _spin(False, poll)
        later, n_later = _spin(True, poll)
        assert n_later
        assert later == now, poll
        got = _frames(later)
        acks = [f for f in got if f.type == proto.T_ACK]
        assert len(acks) == 3 * len(poll)
        for a in acks:
            k = got.index(a)  # the STAT it answers, then its ACK: after the pass's REV
            assert got[k - 1].type == proto.T_STATUS, got[k - 1]
            before = got[k - 2].type
            assert before == proto.T_REV or before == proto.T_ACK, got[k - 2]
            assert int(a.fields[proto.K_TOP]) == got[k - 1].seq


def test_a_save_settles_the_rev_put_off_first():
    """The state a save writes holds the seq of the REV put off: it is journaled first."""
    b, _ = make_board()
    tb = b.table
    assert tb.handle(proto.C_OPEN, {"chef": "C1"}) == (True, "")
    seq = b.encoder.seq
    tb.owe(proto.T_REV, ("spin", 1, "n", 1, "period_us", 600000))
    assert b.wire.owed and b.encoder.seq == seq  # not built yet
    tb.save()
    assert not b.wire.owed and b.encoder.seq == seq + 1
    assert tb.st["seq"] == seq + 1
    last = _frames(bytes(fakemachine.UART.last.out))[-1]
    assert last.type == proto.T_REV and last.seq == seq + 1


def test_a_frame_formatted_at_once_is_the_one_written_a_piece_at_a_time():
    """A type met before with int values only (a REV) is formatted whole (Encoder._whole):
    the same bytes as a fresh encoder's, which writes it a piece at a time, for any ints;
    other keys, or a text value, are written a piece at a time as ever."""
    keyed = frames.Encoder("T01", 7, key=b"k" * 16)
    plain = frames.Encoder("T-1_x", 3)
    values = (0, 1, -1, 9, 10, 123456, -987654, 2**30, 2**31 - 1, 2**32 + 5, -(2**40))
    for enc in (keyed, plain):
        enc.frame(proto.T_REV, ("spin", 1, "n", 2, "period_us", 3))  # its format learned
        for i in range(len(values)):
            fields = ("spin", values[i], "n", values[-1 - i], "period_us", values[i // 2])
            for more in ((), ("lone", 1, "reversed", values[i]), ("why", "x%y")):
                fresh = frames.Encoder(enc.table, enc.boot, seq=enc.seq)
                fresh._hmac = enc._hmac
                want = bytes(fresh.frame(proto.T_REV, fields + more, ms=values[i] & 0xFFFF))
                got = bytes(enc.frame(proto.T_REV, fields + more, ms=values[i] & 0xFFFF))
                assert got == want, (got, want)
    assert proto.T_REV in plain._formats
    big = ("spin", 10**240, "n", 1, "period_us", 1)
    seq = plain.seq
    try:
        plain.frame(proto.T_REV, big)
        raise AssertionError("a frame over MAX_LINE")
    except ValueError:
        pass
    assert plain.seq == seq  # no seq consumed
