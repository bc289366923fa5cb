# The firmware's end of the wire (docs/protocol.md): frames out through the journal, host
# commands in, checked (CRC, HMAC when a key is set, addressed to this table and this boot,
# command seq strictly increasing) before anything is done. RESEND and RECALL are served here
# from the journal; the other commands go to the table's handler.
#
# A RESEND is served a few frames at a time (pump(), once per loop pass, as far as the line
# takes them without waiting): 200 frames are ~1.5 s of a 115200 baud line, more than the
# loop may stop for (watchdog, pocket scan, the call). Live frames are never held back by it.
from micropython import const

from rmcfw import frames, proto

_MAX_RESEND = const(200)  # frames per RESEND answer: the host asks again for the rest
_TAMP_EVERY_MS = const(1000)  # at most one TAMP frame per second for refused commands
_MAX_RANGES = const(40)  # ranges in one RESEND's `only`
RECALL_MIN = const(10)  # games recalled at least (regulators ask for the last 10)
_RESENT = proto.RESENT.encode()

_COMMANDS = (
    proto.C_STATUS,
    proto.C_RESEND,
    proto.C_RECALL,
    proto.C_OPEN,
    proto.C_CLOSE,
    proto.C_LAST_THREE,
    proto.C_SET,
)


class Wire:
    """Joins an Encoder, a Journal and the line to the host.

    write(data): sends bytes to the host (UART, USB CDC, a test link).
    handler(cmd, fields): the table's answer to STATUS, OPEN, CLOSE, LAST3, SET (and RECALL
    if it keeps its own record of games): returns (ok, detail). Without a handler those
    commands are answered ok=0 detail=busy, except STATUS (ok=1) and RECALL (from the journal).
    log(reason, line): called for every refused command (after its ACK).
    room(): how many bytes the line takes now without waiting (the board's UART); resent
    frames go out only as far as it allows, in pump(). None: no limit (a test sink, a socket):
    a RESEND is then served whole as soon as it is asked.
    """

    def __init__(self, encoder, journal, write, handler=None, log=None, key=None, room=None):
        self.enc = encoder
        self.journal = journal
        self.write = write
        self.room = room
        self.handler = handler
        self.log = log
        self._hmac = frames.Hmac(key) if key else None
        self._inbuf = bytearray(frames.MAX_LINE + 2)
        self._inlen = 0
        self._overflow = False
        self.cmd_seq = 0  # last accepted command seq in this boot
        self.refused = 0  # refused commands since the last TAMP frame
        self._tamp_ms = None
        self.ms = 0  # the firmware's clock, updated by the caller (ticks_ms)
        # the RESEND being served: [cseq, boot, seq, last, only, sent, journal pos] (boot,
        # seq and pos: where to read on), the journal generator reading it, a line read that
        # did not fit yet
        self._rs = None
        self._gen = None
        self._held = None
        # A frame put off (owe()) when `defer` (the board's): 3 while it waits to be built,
        # 2 to be journaled, 1 to be sent (built: the encoder's buffer holds it till then)
        self.defer = False
        self.owed = 0
        self._owed = None  # its type, fields and time stamp
        self._owed_fields = ()
        self._owed_ms = 0
        self._line = None  # the frame built, not yet sent

    # --- out ---

    def emit(self, ftype, fields=()):
        """Build, journal, then send one frame; returns its seq."""
        if self.owed:
            self.settle()  # the frame put off goes first, in its place
        line = self.enc.frame(ftype, fields, ms=self.ms)
        # No journal file open for reading across a write: LittleFS gives each open file a
        # snapshot, whose blocks an append or a segment removal may free and reuse. The
        # RESEND under way reads on from where it was (pump()).
        self._close_reader()
        # Journal first: a frame the host may have seen is always one it can ask for again.
        self.journal.append(line)
        self.write(line)
        return self.enc.seq

    def owe(self, ftype, fields):
        """emit() put off to the loop's next passes when `defer`, a step a pass (work()):
        built, then journaled, then sent, so that no pass does it all (a REV frame at a
        ball pass: ~2 ms on the RP2040). Time stamped now. Whatever would come after it
        first settles it: a frame, an ACK, a resent frame, the seq read for a save
        (last_seq()). Frames, their order, seq and content are emit()'s. Without `defer`,
        emit() now."""
        if self.owed:
            self.settle()
        if not self.defer:
            self.emit(ftype, fields)
            return
        self._owed = ftype
        self._owed_fields = fields
        self._owed_ms = self.ms
        self.owed = 3

    def work(self):
        """The frame put off: its next step (one a loop pass)."""
        if self.owed == 3:
            self.owed = 0  # (a frame that cannot be built raises once, as emit() would)
            self._line = self.enc.frame(self._owed, self._owed_fields, ms=self._owed_ms)
            self._owed_fields = ()
            self.owed = 2
        elif self.owed == 2:
            self._close_reader()  # (as emit)
            self.journal.append(self._line, self._owed)  # (its type known: not read back)
            self._owed = None
            self.owed = 1
        elif self.owed:
            self.owed = 0
            self.write(self._line)
            self._line = None

    def settle(self):
        """The frame put off, if any, built, journaled and sent now."""
        while self.owed:
            self.work()

    def last_seq(self):
        """The last seq used, the frame put off settled first (a save's state holds it)."""
        if self.owed:
            self.settle()
        return self.enc.seq

    def boot(self, fw, wheel, reset, faults="", prev=None):
        """The BOOT frame. prev: journal.last() taken before this boot's journal.start()."""
        p = "-" if prev is None else "%d:%d" % prev
        return self.emit(
            proto.T_BOOT,
            ("fw", fw, "wheel", wheel, "reset", reset, "faults", faults, proto.K_PREV, p),
        )

    # --- in ---

    def feed(self, data):
        """Bytes from the host, any amount: each complete line is handled as a command.
        (For each piece read: its frame within 11 words, which MicroPython keeps off the
        heap, a while loop, a for loop's iterator taking 4: board_pico.Board.step.)"""
        buf = self._inbuf
        i = 0
        while i < len(data):
            b = data[i]
            i += 1
            if b == 0x0A:
                self._line_end()
            elif b == 0x0D:
                continue
            elif self._inlen >= frames.MAX_LINE:
                self._overflow = True  # too long to be a command: drop it whole
                self._inlen = 0
            elif not self._overflow:
                buf[self._inlen] = b
                self._inlen += 1

    def _line_end(self):
        """A newline read: the line before it is a command, unless it was too long."""
        if self._overflow:
            self._overflow = False
        elif self._inlen:
            self.command(memoryview(self._inbuf)[0 : self._inlen])
        self._inlen = 0

    def command(self, line):
        """Handle one command line (without newline). Returns (ok, detail) for tests. (At
        each command, a STATUS poll every few seconds among them: its frame and its
        helpers' within 11 words, which MicroPython keeps off the heap.)"""
        line = bytes(line)
        start = line.find(b">")
        if start < 0:
            return False, "noise"  # not for us (an echo, REPL noise): no answer
        line = line[start:]
        try:
            # (the frame decoded in `start`: a local more would take the frame past 11 words)
            start = frames.decode(line, hmac=self._hmac)
        except frames.AuthError:
            return self._forged(line)
        except frames.FrameError:
            # A damaged line gets no answer: the host repeats what was not acknowledged.
            return False, "crc"
        return self._checked(start, line)

    def _forged(self, line):
        return self._refuse(None, 0, proto.A_AUTH, line)

    def _checked(self, f, line):
        """A command decoded: for this table, this boot, in order, known; then done."""
        if f.start != frames.COMMAND_START:
            return False, "noise"
        if f.table != self.enc.table:
            return self._refuse(f.type, f.seq, proto.A_TABLE, line)
        # boot=0 is only good for STATUS: a host that has not heard from us yet.
        if f.boot != self.enc.boot and not (f.boot == 0 and f.type == proto.C_STATUS):
            return self._refuse(f.type, f.seq, proto.A_BOOT, line)
        if f.seq <= self.cmd_seq:
            return self._refuse(f.type, f.seq, proto.A_STALE, line)
        self.cmd_seq = f.seq
        if f.type not in _COMMANDS:
            return self._refuse(f.type, f.seq, proto.A_UNKNOWN, line)
        r = self._answer(f)
        if r is None:
            return True, ""  # a RESEND: its ACK follows its last frame (pump)
        self._ack(f.type, f.seq, r[0], r[1])
        if not r[0] and self.log is not None:
            self.log(r[1], line)
        return r

    def _answer(self, f):
        """A checked command done: (ok, detail) for its ACK; None for a RESEND, served
        from pump(), which answers it."""
        try:
            if f.type == proto.C_RESEND:
                self._resend(f)
                return None
            if f.type == proto.C_RECALL and self.handler is None:
                return self._recall(f)
            if self.handler is not None:
                return self.handler(f.type, f.fields)
            if f.type == proto.C_STATUS:
                return True, ""
            return False, proto.A_BUSY
        except (KeyError, ValueError):
            return False, proto.A_BAD

    def _ack(self, cmd, cseq, ok, detail, extra=()):
        # An ACK is an answer, not an event: it is sent with seq 0, outside the numbering and
        # the journal, so that answering the host never opens new gaps on a bad line. `top`
        # (the last seq used) lets the host see frames it has missed at the end. (Its
        # fields in pieces: one tuple of ten would take its frame over 11 words.)
        if self.owed:
            self.settle()
        cmd = (proto.K_CMD, cmd or "?", proto.K_CSEQ, cseq)
        cmd += (proto.K_OK, 1 if ok else 0, proto.K_DETAIL, detail or "")
        cmd += (proto.K_TOP, self.enc.seq) + extra
        self.write(self._ack_line(cmd))

    def _ack_line(self, fields):
        return self.enc.frame(proto.T_ACK, fields, 0, self.ms)  # seq 0: unnumbered

    def _refuse(self, cmd, cseq, why, line):
        extra = ()
        if why == proto.A_STALE:
            extra = (proto.K_NEXT, self.cmd_seq + 1)
        self._ack(cmd, cseq, False, why, extra)
        if why == proto.A_AUTH:
            # Logged in the journal itself (persistent) and shown to the host, rate-limited so
            # that a flood of forged lines cannot flood the journal.
            self.refused += 1
            if self._tamp_ms is None or self.ms - self._tamp_ms >= _TAMP_EVERY_MS:
                self._tamp_ms = self.ms
                self.emit(proto.T_TAMPER, ("what", proto.W_CMD_AUTH, proto.K_COUNT, self.refused))
                self.refused = 0
        if self.log is not None:
            self.log(why, line)
        return False, why

    def _resend(self, f):
        fl = f.fields
        boot = frames.field_uint(fl, "boot")
        seq = frames.field_uint(fl, "seq")
        last = frames.field_uint(fl, proto.K_LAST) if proto.K_LAST in fl else None
        if boot < 1 or seq < 1 or (last is not None and last < seq):
            raise ValueError("range")
        only = f.fields.get(proto.K_ONLY)
        if only is not None:
            only = parse_ranges(only)
        if self._rs is not None:
            # A new RESEND replaces the one under way: the host asks for what it still
            # misses, so the old rest would mostly come twice. The old one is answered
            # busy (its frames sent stand; the host asks again for the others), not with
            # a count, which would tell the host its first unsent frames are gone.
            self._finish(False)
        self._rs = [f.seq, boot, seq, last, only, 0, None]
        self.pump()

    def pending(self):
        """True while a RESEND is being served."""
        return self._rs is not None

    def pump(self):
        """Send resent frames as far as the line takes them now; call once per loop pass.
        Returns the bytes written."""
        rs = self._rs
        if rs is None:
            return 0
        if self.owed:
            self.settle()  # (a RESEND to the end reads it too)
        room = self.room() if self.room is not None else None
        used = 0
        mark = _RESENT
        while True:
            line = self._held
            if line is None:
                if rs[5] >= _MAX_RESEND:
                    break
                try:
                    if self._gen is None:
                        self._gen = self.journal.frames(
                            rs[1], rs[2], rs[3], _MAX_RESEND - rs[5], rs[4], rs[6]
                        )
                    line = next(self._gen)  # (no next(gen, default) on every port)
                    rs[6] = self.journal.pos  # where to read on, once the reader is closed
                except StopIteration:
                    break
                except OSError:
                    self._finish(False)  # the journal unreadable now: the host asks again
                    return used
                # where to read on after a journal write (emit closes the reader)
                p = line.split(b",", 4)
                rs[1] = int(p[2])
                rs[2] = int(p[3]) + 1
            n = len(line) + 1
            if room is not None and used + n > room:
                self._held = line  # next pass: the line has no room for it now
                return used
            self._held = None
            self.write(mark + line)
            used += n
            rs[5] += 1
        self._finish(True)
        return used

    def _close_reader(self):
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def _finish(self, done):
        rs = self._rs
        self._close_reader()
        self._rs = None
        self._held = None
        self._ack(proto.C_RESEND, rs[0], done, "" if done else proto.A_BUSY, (proto.K_COUNT, rs[5]))

    def _recall(self, f):
        count = frames.field_uint(f.fields, "n", RECALL_MIN)
        if count < 1:
            raise ValueError("n")
        emit_recall(self.emit, self.journal.results(max(count, RECALL_MIN)))
        return True, ""


def emit_recall(emit, games):
    """The RECALL frame of (spin, number) pairs, oldest first: the newest that fit in a line
    (a keyed frame, long spin numbers), n saying how many."""
    while True:
        text = ";".join("%d:%s" % (s, label) for s, label in games)
        try:
            emit(proto.T_RECALL, ("n", len(games), "games", text))
            return
        except ValueError:  # longer than a line (the encoder consumes no seq then)
            if not games:
                raise
            games = games[1:]


def parse_ranges(text):
    """ "3;7-9;12" -> [(3, 3), (7, 9), (12, 12)]: sorted, disjoint; ValueError otherwise."""
    out = []
    for part in text.split(";"):
        a, _, b = part.partition("-")
        a = frames.number(a)  # one spelling (FrameError is a ValueError)
        b = frames.number(b) if b else a
        if a < 1 or b < a or (out and a <= out[-1][1]):
            raise ValueError("ranges")
        out.append((a, b))
    if not out or len(out) > _MAX_RANGES:
        raise ValueError("ranges")
    return out


def format_ranges(ranges):
    return ";".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in ranges)


class Commander:
    """The host's command encoder (also used by tests): frames addressed to a firmware boot."""

    def __init__(self, table, key=None):
        self._enc = {}
        self.table = table
        self.key = key
        self.seq = 0

    def line(self, cmd, fields=(), boot=0, ms=0):
        enc = self._enc.get(boot)
        if enc is None:
            enc = frames.Encoder(self.table, boot, self.key, start=frames.COMMAND_START)
            self._enc[boot] = enc
        self.seq += 1
        return bytes(enc.frame(cmd, fields, seq=self.seq, ms=ms))
