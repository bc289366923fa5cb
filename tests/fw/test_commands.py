# Host commands at the firmware's end of the wire: checking, refusal, RESEND, RECALL.
from fwtest import raises, scratch_dir

from rmcfw import frames, proto
from rmcfw.commands import Commander, Wire
from rmcfw.journal import Journal

KEY = b"0123456789abcdef0123456789abcdef"


class Sink:
    def __init__(self):
        self.data = bytearray()

    def __call__(self, b):
        self.data.extend(b)

    def frames(self, key=None):
        out = []
        for line in bytes(self.data).split(b"\n"):
            if line:
                resent = line.startswith(b"~")
                out.append((resent, frames.decode(line.lstrip(b"~"), key)))
        self.data = bytearray()
        return out


def _wire(key=None, handler=None, boot=4):
    j = Journal(scratch_dir("c"), per_segment=50, segments=4)
    prev = j.last()
    j.start()
    sink = Sink()
    log = []
    w = Wire(
        frames.Encoder("T01", boot, key), j, sink, handler, lambda why, line: log.append(why), key
    )
    w.boot("1.0", "abcd", "power", prev=prev)
    return w, sink, log


def test_emit_journals_then_sends():
    w, sink, _ = _wire()
    seq = w.emit(proto.T_LID, ("locked", 1))
    assert seq == 2
    got = sink.frames()
    assert [f.type for _, f in got] == ["BOOT", "LID"]
    assert got[0][1].fields["prev"] == "-"
    kept = list(w.journal.frames(4, 1))
    assert [frames.decode(line).type for line in kept] == ["BOOT", "LID"]


def test_resend_serves_journal_range():
    w, sink, _ = _wire()
    for i in range(10):
        w.emit(proto.T_REV, ("spin", 1, "n", i + 1, "period_us", 600000))
    sink.frames()
    host = Commander("T01")
    w.feed(host.line(proto.C_RESEND, ("boot", 4, "seq", 3, "last", 5), boot=4))
    got = sink.frames()
    assert [(r, f.seq) for r, f in got[:3]] == [(True, 3), (True, 4), (True, 5)]
    ack = got[3][1]
    assert ack.type == "ACK" and ack.fields["ok"] == "1" and ack.fields["n"] == "3"


def test_commands_split_across_feeds_and_noise():
    calls = []

    def handler(cmd, fields):
        calls.append((cmd, fields.get("chef")))
        return True, ""

    w, sink, _ = _wire(handler=handler)
    sink.frames()
    host = Commander("T01")
    line = host.line(proto.C_OPEN, ("chef", "M. Dupont"), boot=4)
    data = b"garbage\r\n" + line
    for i in range(len(data)):
        w.feed(data[i : i + 1])
    assert calls == [("OPEN", "M. Dupont")]
    assert sink.frames()[0][1].fields["ok"] == "1"


def test_auth_refused_and_logged():
    w, sink, log = _wire(key=KEY)
    sink.frames(KEY)
    forger = Commander("T01")  # no key
    w.feed(forger.line(proto.C_RESEND, ("boot", 4, "seq", 1), boot=4))
    got = sink.frames(KEY)
    assert got[0][1].type == "ACK" and got[0][1].fields["detail"] == "auth"
    assert got[1][1].type == "TAMP" and got[1][1].fields["what"] == "cmd_auth"
    assert log == ["auth"]
    assert w.cmd_seq == 0
    good = Commander("T01", KEY)
    w.feed(good.line(proto.C_STATUS, boot=4))
    got = sink.frames(KEY)
    assert got[0][1].fields["ok"] == "1"


def test_replay_and_wrong_boot_refused():
    w, sink, log = _wire(key=KEY)
    host = Commander("T01", KEY)
    line = host.line(proto.C_STATUS, boot=4)
    old = Commander("T01", KEY).line(proto.C_STATUS, boot=3)
    sink.frames(KEY)
    w.feed(line)
    w.feed(line)  # replayed
    w.feed(old)  # from an earlier boot
    acks = [f.fields for _, f in sink.frames(KEY)]
    assert [a["ok"] for a in acks] == ["1", "0", "0"]
    assert acks[1]["detail"] == "stale" and acks[1]["next"] == "2"
    assert acks[2]["detail"] == "boot"
    assert log == ["stale", "boot"]


def test_status_to_boot_zero_and_unknown_command():
    w, sink, _ = _wire()
    sink.frames()
    host = Commander("T01")
    w.feed(host.line(proto.C_STATUS, boot=0))
    w.feed(host.line("FORMAT", boot=4))
    w.feed(host.line(proto.C_OPEN, ("chef", "x"), boot=0))
    acks = [f.fields for _, f in sink.frames()]
    assert [(a["ok"], a["detail"]) for a in acks] == [("1", ""), ("0", "unknown"), ("0", "boot")]


def test_damaged_command_gets_no_answer():
    w, sink, log = _wire()
    sink.frames()
    line = bytearray(Commander("T01").line(proto.C_STATUS, boot=4))
    line[5] ^= 0x04
    w.feed(line)
    w.feed(b"x" * 400 + b"\n")
    assert sink.frames() == [] and log == []


def test_recall_from_journal():
    w, sink, _ = _wire()
    for spin in range(1, 13):
        w.emit(proto.T_RESULT, ("spin", spin, "num", "CMC" if spin == 12 else str(spin)))
    sink.frames()
    w.feed(Commander("T01").line(proto.C_RECALL, ("n", 10), boot=4))
    got = sink.frames()
    rec = got[0][1]
    assert rec.type == "RECALL" and rec.fields["n"] == "10"
    assert rec.fields["games"].split(";")[-1] == "12:CMC"
    assert rec.fields["games"].split(";")[0] == "3:3"


def test_bad_resend_fields():
    w, sink, _ = _wire()
    sink.frames()
    host = Commander("T01")
    w.feed(host.line(proto.C_RESEND, ("boot", "x", "seq", 1), boot=4))
    w.feed(host.line(proto.C_RESEND, ("seq", 1), boot=4))
    acks = [f.fields for _, f in sink.frames()]
    assert [(a["ok"], a["detail"]) for a in acks] == [("0", "bad"), ("0", "bad")]


def test_resend_only_listed_ranges_and_ack_is_unsequenced():
    w, sink, _ = _wire()
    for i in range(20):
        w.emit(proto.T_REV, ("spin", 1, "n", i + 1, "period_us", 600000))
    sink.frames()
    host = Commander("T01")
    w.feed(host.line(proto.C_RESEND, ("boot", 4, "seq", 3, "last", 15, "only", "3;7-9;15"), boot=4))
    got = sink.frames()
    assert [f.seq for r, f in got if r] == [3, 7, 8, 9, 15]
    ack = got[-1][1]
    assert ack.type == "ACK" and ack.seq == 0 and ack.fields["n"] == "5"
    assert ack.fields["top"] == "21"
    # The ACK took no seq: the next frame follows the last one.
    assert w.emit(proto.T_LID, ("locked", 1)) == 22


def test_parse_ranges():
    from rmcfw.commands import format_ranges, parse_ranges

    assert parse_ranges("3;7-9;12") == [(3, 3), (7, 9), (12, 12)]
    assert format_ranges([(3, 3), (7, 9)]) == "3;7-9"
    for bad in ("", "0", "5-3", "3;3", "7;5", "a", "1-2-3", ";".join(str(i) for i in range(1, 90))):
        raises(ValueError, parse_ranges, bad)


# --- RESEND served as the line takes it (the board's loop must never stop for it) -------


class _Reading(Journal):
    """A journal that checks no reader of it is open across a write: LittleFS gives each
    open file a snapshot whose blocks a write may free and reuse."""

    readers = 0
    lines_read = 0

    def _lines(self, seg, offset=0):
        for line in Journal._lines(self, seg, offset):
            self.lines_read += 1
            yield line

    def frames(self, *args):
        self.readers += 1
        try:
            yield from Journal.frames(self, *args)
        finally:
            self.readers -= 1

    def append(self, line):
        assert self.readers == 0, "journal written while read"
        Journal.append(self, line)


def _paced_wire(room):
    j = _Reading(scratch_dir("c"), per_segment=50, segments=8)
    j.start()
    sink = Sink()
    w = Wire(frames.Encoder("T01", 4, None), j, sink, room=lambda: room[0])
    w.boot("1.0", "abcd", "power")
    for i in range(120):
        w.emit(proto.T_REV, ("spin", 1, "n", i + 1, "period_us", 600000))
    sink.frames()
    return w, sink


def test_resend_goes_out_as_the_line_takes_it():
    room = [130]  # bytes the line takes now, each pass: two frames
    w, sink = _paced_wire(room)
    host = Commander("T01")
    w.feed(host.line(proto.C_RESEND, ("boot", 4, "seq", 2, "last", 101), boot=4))
    assert [f.seq for r, f in sink.frames()] == [2, 3]  # what fitted: no ACK yet
    got = []
    passes = 0
    while w.pending():
        passes += 1
        if passes == 10:
            # a live frame while it is served: journaled (the reader closed first), sent
            # at once, and the RESEND goes on where it was
            assert w.emit(proto.T_LID, ("locked", 1)) == 122
        if passes == 20:
            room[0] = 0  # the line full for a while: nothing is sent, nothing lost
            for _ in range(5):
                assert w.pump() == 0
            room[0] = 130
        n = w.pump()
        assert n <= 130
        got.extend(sink.frames())
    assert passes > 40
    resent = [f.seq for r, f in got if r]
    assert resent == list(range(4, 102))  # after 2 and 3: in order, each once
    live = [i for i, (r, f) in enumerate(got) if f.type == proto.T_LID]
    assert len(live) == 1 and not got[live[0]][0] and 10 < live[0] < 30
    ack = got[-1][1]  # after the last frame asked: n counts those sent
    assert ack.type == "ACK" and ack.fields["ok"] == "1" and ack.fields["n"] == "100"
    assert ack.fields["top"] == "122" and ack.seq == 0


def test_a_resend_reads_on_where_it_was_after_each_live_frame():
    # A live frame each pass while a RESEND is served: the reader is closed for each write,
    # and reopened where it was (Journal.frames at=), not at its segment's start (a Pico's
    # LittleFS reads a line byte by byte: a deep segment costs tens of ms each time).
    room = [130]
    w, sink = _paced_wire(room)
    host = Commander("T01")
    j = w.journal
    w.feed(host.line(proto.C_RESEND, ("boot", 4, "seq", 2, "last", 101), boot=4))
    j.lines_read = 0
    while w.pending():
        w.emit(proto.T_STATUS, ("state", "track"))
        w.pump()
    resent = [f.seq for r, f in sink.frames() if r]
    assert resent == list(range(2, 102))
    # each line read about once (a segment's first line is peeked at once more)
    assert j.lines_read < 130, j.lines_read


def test_a_new_resend_replaces_the_one_under_way():
    room = [130]
    w, sink = _paced_wire(room)
    host = Commander("T01")
    w.feed(host.line(proto.C_RESEND, ("boot", 4, "seq", 2, "last", 90), boot=4))
    w.pump()
    first = [f.seq for r, f in sink.frames() if r]
    assert first == [2, 3, 4, 5]
    w.feed(host.line(proto.C_RESEND, ("boot", 4, "seq", 50, "only", "50-52;60"), boot=4))
    got = sink.frames()
    # the first answered busy (not a count, which would tell the host that frames it has
    # not received are gone), with what it did send
    ack = got[0][1]
    assert ack.type == "ACK" and ack.fields["cseq"] == "1" and ack.fields["ok"] == "0"
    assert ack.fields["detail"] == "busy" and ack.fields["n"] == "4"
    assert [f.seq for r, f in got[1:] if r] == [50, 51]
    while w.pending():
        w.pump()
        got.extend(sink.frames())
    assert [f.seq for r, f in got if r] == [50, 51, 52, 60]
    ack = got[-1][1]
    assert ack.fields["cseq"] == "2" and ack.fields["ok"] == "1" and ack.fields["n"] == "4"
