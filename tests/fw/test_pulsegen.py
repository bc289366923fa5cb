# The rig's pulse-generator core (firmware/pulsegen/core.py): line format, schedule, timing.
from fwtest import raises
from pulsegen import core

NAMES = ("ball_a", "ball_b", "rotor_a", "rotor_b")
PERIOD = 1 << 30  # the RP2040's ticks_us period


class Clock:
    """A fake ticks_us that advances by `step` on every read (a busy-wait always ends)."""

    def __init__(self, t=0, step=1):
        self.t = t
        self.step = step

    def ticks(self):
        t = self.t
        self.t = (self.t + self.step) % PERIOD
        return t

    def add(self, t, d):
        return (t + d) % PERIOD

    def diff(self, a, b):
        d = (a - b) % PERIOD
        if d >= PERIOD // 2:
            d -= PERIOD
        return d


def make(t=0, step=1, capacity=64):
    clock = Clock(t, step)
    writes = []

    def write(lv):
        writes.append((clock.t, lv))

    gen = core.Generator(NAMES, write, clock.ticks, clock.add, clock.diff, capacity=capacity)
    return gen, clock, writes


def req(seq, body):
    return core.seal((">%d,%s" % (seq, body)).encode())


def reply(gen, seq, body):
    """Send one request; return the reply's parts after the seq, checking seq and CRC."""
    out = gen.handle(req(seq, body))
    assert out.endswith(b"\n")
    parts = core.unseal(out, 0x3C)
    assert parts[0] == str(seq).encode(), out
    return [p.decode() for p in parts[1:]]


def fields(parts):
    d = {}
    for p in parts[1:]:
        k, v = p.split("=")
        d[k] = v
    return d


def test_seal_and_unseal_round_trip():
    line = core.seal(b">7,HELLO")
    assert line[-10:-9] == b"*" and line.endswith(b"\n")
    assert core.unseal(line, 0x3E) == [b"7", b"HELLO"]


def test_corrupted_lines_are_refused():
    line = core.seal(b">7,SET,3")
    bad = line.replace(b"SET,3", b"SET,2")
    assert str(raises(core.LineError, core.unseal, bad, 0x3E)) == "crc"
    assert str(raises(core.LineError, core.unseal, line[:-5], 0x3E)) == "frame"
    assert str(raises(core.LineError, core.unseal, line, 0x3C)) == "frame"
    assert str(raises(core.LineError, core.unseal, b">" + b"1" * 300, 0x3E)) == "long"


def test_strict_numbers_and_levels():
    assert core.uint(b"0") == 0 and core.uint(b"1234") == 1234
    for bad in (b"", b"01", b"-1", b"1a", b"12345678901"):
        raises(core.LineError, core.uint, bad)
    assert core.hexlevels(b"f") == 15 and core.hexlevels(b"a5") == 0xA5
    for bad in (b"", b"F", b"123", b"g"):
        raises(core.LineError, core.hexlevels, bad)


def test_hello_reports_lines_and_capacity():
    gen, _, writes = make()
    r = reply(gen, 1, "HELLO")
    assert r[0] == "OK"
    f = fields(r)
    assert f["pulsegen"] == "1" and f["cap"] == "64"
    assert f["lines"] == "ball_a;ball_b;rotor_a;rotor_b"
    assert writes == [(0, 0)]  # all lines low from the start


def test_bad_requests_get_an_error_reply_never_an_exception():
    gen, _, _ = make()
    assert gen.handle(b"garbage").startswith(b"<-,ERR,frame*")
    assert reply(gen, 2, "NOPE") == ["ERR", "unknown"]
    assert reply(gen, 3, "SET,10") == ["ERR", "levels"]  # line 4 does not exist
    assert reply(gen, 4, "SET") == ["ERR", "args"]
    assert reply(gen, 5, "ADD,0,5") == ["ERR", "event"]
    assert reply(gen, 6, "ADD,0,5.x") == ["ERR", "levels"]
    assert reply(gen, 7, "ADD,0,300000000.1") == ["ERR", "dt"]
    assert reply(gen, 8, "ADD,0") == ["ERR", "event"]


def test_set_drives_the_lines_now():
    gen, _, writes = make()
    assert reply(gen, 1, "SET,5") == ["OK"]
    assert writes[-1][1] == 5 and gen.levels == 5


def test_add_checks_the_index_and_the_room():
    gen, _, _ = make(capacity=4)
    assert reply(gen, 1, "ADD,0,10.1,10.0") == ["OK", "next=2", "free=2"]
    assert reply(gen, 2, "ADD,0,10.1") == ["ERR", "index", "next=2"]  # a duplicate line
    assert reply(gen, 3, "ADD,3,10.1") == ["ERR", "index", "next=2"]  # a lost line
    assert reply(gen, 4, "ADD,2,1.1,1.0,1.1") == ["ERR", "full", "free=2"]
    assert gen.sched.queued() == 2  # a refused line adds nothing
    assert reply(gen, 5, "END,3") == ["ERR", "count", "next=2"]
    assert reply(gen, 6, "END,2") == ["OK"]
    assert reply(gen, 7, "ADD,2,1.1") == ["ERR", "ended"]


def test_events_are_played_at_their_instants():
    gen, _clock, writes = make(t=1000)
    reply(gen, 1, "ADD,0,100.1,50.3,0.2,1000.0")
    reply(gen, 2, "END,4")
    reply(gen, 3, "GO,500")
    start = gen.next_due()  # the start instant: GO's arrival + 500
    assert 1500 <= start <= 1505
    while gen.service(10) != -1:
        pass
    played = writes[1:]
    assert [lv for _, lv in played] == [1, 3, 2, 0]
    wanted = [start + 100, start + 150, start + 150, start + 1150]
    for i in range(4):
        t, w = played[i][0], wanted[i]
        assert 0 <= t - w <= 5, (t, w)  # the fake clock moves 1 us per read
    f = fields(reply(gen, 4, "STAT"))
    assert f["state"] == "done" and f["played"] == "4" and f["total"] == "4"
    assert int(f["late_max"]) <= 5
    assert f["hist"] == "4;0;0;0;0;0"


def test_a_late_event_does_not_shift_the_next_ones():
    gen2, clock2, _writes2 = make()
    reply(gen2, 1, "ADD,0,100.1,100.0,100.1")
    reply(gen2, 2, "END,3")
    reply(gen2, 3, "GO,0")
    assert gen2.fire() == 0  # start
    clock2.t = 350  # the first event (due 100) runs 250 us late
    assert gen2.fire() >= 250
    # The next events are still timed from the first one's due instant (200, 300).
    assert gen2.next_due() == 200
    assert gen2.late_max >= 250
    assert gen2.hist[3] == 1  # 100 < 250 <= 500


def test_wrap_around_of_the_tick_clock():
    gen, _clock, writes = make(t=PERIOD - 100)
    reply(gen, 1, "ADD,0,150.1,150.0")
    reply(gen, 2, "END,2")
    reply(gen, 3, "GO,0")
    while gen.service(10) != -1:
        pass
    assert [lv for _, lv in writes[1:]] == [1, 0]
    assert gen.late_max <= 3
    assert gen.state == "done"


def test_a_starved_schedule_goes_on_late_and_is_counted():
    gen, clock, writes = make()
    reply(gen, 1, "ADD,0,10.1")
    reply(gen, 2, "GO,0")
    gen.service(10)
    assert gen.state == "running" and gen.played == 1
    assert gen.service(10) == -1  # nothing queued: the host is behind
    clock.t += 500
    reply(gen, 3, "ADD,1,10.0")  # due 10 us after the first event: played late
    reply(gen, 4, "END,2")
    while gen.service(10) != -1:
        pass
    f = fields(reply(gen, 5, "STAT"))
    assert f["state"] == "done" and f["starved"] == "1"
    assert int(f["late_max"]) >= 490
    assert writes[-1][1] == 0
    assert reply(gen, 6, "ADD,2,1.1") == ["ERR", "done"]


def test_streaming_beyond_the_capacity():
    gen, _clock, writes = make(capacity=8)
    sent = 0
    seq = 1
    total = 40
    reply(gen, seq, "GO,100")
    while True:
        while sent < total and gen.sched.free() >= 4:
            seq += 1
            ev = ",".join("20.%x" % ((sent + i) % 2) for i in range(4))
            assert reply(gen, seq, "ADD,%d,%s" % (sent, ev))[0] == "OK"
            sent += 4
            if sent == total:
                seq += 1
                reply(gen, seq, "END,%d" % total)
        if gen.service(5) == -1:
            break
    assert gen.state == "done" and gen.played == total
    assert len(writes) == total + 1


def test_stop_and_reset():
    gen, _, writes = make()
    reply(gen, 1, "ADD,0,1000.1")
    reply(gen, 2, "GO,0")
    assert reply(gen, 3, "GO,0") == ["ERR", "busy"]
    assert reply(gen, 4, "SET,1") == ["ERR", "busy"]
    assert reply(gen, 5, "STOP") == ["OK", "played=0"]
    assert gen.next_due() is None
    assert reply(gen, 6, "RESET") == ["OK"]
    assert gen.state == "idle" and gen.sched.queued() == 0 and writes[-1][1] == 0


def test_line_reader():
    r = core.LineReader(size=8)
    out = [r.feed_byte(b) for b in b"ab\r\n\nxyz\n"]
    assert [o for o in out if o is not None] == [b"ab", b"xyz"]
    got = [r.feed_byte(b) for b in b"0123456789\n"]
    assert got[-1] == b"01234567~"  # an overlong line comes out marked, and unseal refuses it
