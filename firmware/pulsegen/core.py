# Pulse generator core: plays a schedule of output levels at exact instants (docs/rig.md).
#
# Runs on a second Pico of the test rig, which drives the table's ball and rotor sensor lines
# with microsecond timing that Linux user-space GPIO cannot give. The host streams the schedule
# over serial in checked lines; this core parses them, keeps the events in preallocated ring
# buffers and says when each is due. It never touches a pin or a clock itself: the board file
# (board_pico.py) passes in the clock functions and the function that writes the levels, so the
# same code runs under CPython and MicroPython in the tests.
#
# Line format (one ASCII line each way, CRC-32 of everything before "*", 8 lowercase hex):
#   host -> generator  ">SEQ,CMD[,ARG...]*crc"
#   generator -> host  "<SEQ,OK[,key=value...]*crc"  or  "<SEQ,ERR,reason[,key=value...]*crc"
# Commands: HELLO, RESET, SET,lv  ADD,idx,dt.lv[,dt.lv...]  END,count  GO,lead_us  STOP  STAT
# An event is "dt.lv": dt microseconds after the previous event (the first one: after GO's
# start instant), lv the levels of all lines after it, in hex (bit i = line i).
import binascii

from micropython import const

VERSION = const(1)
MAX_LINE = const(250)
MAX_DT = const(200000000)  # below half of the RP2040's 2**30 us tick period, with margin
MAX_LINES = const(8)

IDLE = "idle"  # no run: levels set by SET or RESET
ARMED = "armed"  # GO received, waiting for the start instant
RUNNING = "running"
DONE = "done"  # all events of the schedule (END count) played
STOPPED = "stopped"

# Lateness histogram bucket limits (us): <=10, <=50, <=100, <=500, <=1000, more.
BUCKETS = (10, 50, 100, 500, 1000)

_HEX = b"0123456789abcdef"


class LineError(ValueError):
    """A line that is not a well-formed, CRC-checked request."""


def crc_hex(data):
    return b"%08x" % (binascii.crc32(data) & 0xFFFFFFFF)


def seal(body):
    """body (bytes, without "*crc") -> the full line with its CRC and newline."""
    return body + b"*" + crc_hex(body) + b"\n"


def unseal(line, start):
    """Check one line's start byte and CRC; return the body's parts (list of bytes)."""
    line = bytes(line)
    end = len(line)
    while end and line[end - 1] in (0x0A, 0x0D):
        end -= 1
    if end > MAX_LINE:
        raise LineError("long")
    star = line.rfind(b"*", 0, end)
    if star < 2 or end - star != 9 or line[0] != start:
        raise LineError("frame")
    if line[star + 1 : end] != crc_hex(line[:star]):
        raise LineError("crc")
    return line[1:star].split(b",")


def uint(b):
    # Strict decimal: one spelling per number, so a corrupted digit cannot pass unnoticed.
    if not b or len(b) > 10 or (len(b) > 1 and b[0] == 0x30):
        raise LineError("number")
    v = 0
    for c in b:
        if c < 0x30 or c > 0x39:
            raise LineError("number")
        v = v * 10 + c - 0x30
    return v


def hexlevels(b):
    if not b or len(b) > 2:
        raise LineError("levels")
    v = 0
    for c in b:
        i = _HEX.find(bytes((c,)))
        if i < 0:
            raise LineError("levels")
        v = v * 16 + i
    return v


class Schedule:
    """Ring of events (dt_us, levels), preallocated: nothing is allocated while playing."""

    def __init__(self, capacity):
        if capacity < 2:
            raise ValueError("capacity")
        self.capacity = capacity
        self._dt = [0] * capacity  # small ints (dt <= MAX_DT < 2**30): no heap per item
        self._lv = bytearray(capacity)
        self.clear()

    def clear(self):
        self._head = 0  # next slot to fill
        self._tail = 0  # next event to play
        self._n = 0
        self.added = 0  # events accepted since clear: the index the next ADD must start at

    def free(self):
        return self.capacity - self._n

    def queued(self):
        return self._n

    def push(self, dt, lv):
        if self._n == self.capacity:
            raise LineError("full")
        self._dt[self._head] = dt
        self._lv[self._head] = lv
        self._head = (self._head + 1) % self.capacity
        self._n += 1
        self.added += 1

    def peek_dt(self):
        return self._dt[self._tail]

    def pop_levels(self):
        lv = self._lv[self._tail]
        self._tail = (self._tail + 1) % self.capacity
        self._n -= 1
        return lv


# Generator's method for each command: request arguments (bytes) -> reply body (str)
_COMMANDS = {
    "HELLO": "_hello",
    "STAT": "_stat",
    "RESET": "_reset",
    "STOP": "_stop",
    "SET": "_set_levels",
    "ADD": "_add_events",
    "END": "_end",
    "GO": "_go",
}


class Generator:
    """The pulse generator: request lines in, reply lines out, levels out at their instants.

    ticks() -> now (us, wrapping); ticks_add(t, d); ticks_diff(a, b) -> a - b signed: the
    board's time.ticks_us / ticks_add / ticks_diff. write(levels) drives the lines at once.
    names: the lines' names, bit 0 first (reported by HELLO).
    """

    def __init__(self, names, write, ticks, ticks_add, ticks_diff, capacity=4096):
        if not names or len(names) > MAX_LINES:
            raise ValueError("1 to %d lines" % MAX_LINES)
        self.names = names
        self._write = write
        self._ticks = ticks
        self._add = ticks_add
        self._diff = ticks_diff
        self.sched = Schedule(capacity)
        self.mask = (1 << len(names)) - 1
        self.levels = 0
        self.state = IDLE
        self.total = -1  # events in the whole schedule (END), -1 unknown yet
        self.played = 0
        self._due = 0
        self.hist = [0] * (len(BUCKETS) + 1)
        self.late_max = 0
        self.late_sum = 0
        self.starved = 0  # times the schedule ran dry before END (the host fell behind)
        self._empty = False
        self._write(0)

    # --- playing ---

    def next_due(self):
        """Tick at which the next event is due, or None when nothing is to be played now."""
        if self.state == ARMED:
            return self._due
        if self.state != RUNNING:
            return None
        if self.sched.queued():
            self._empty = False
            return self._add(self._due, self.sched.peek_dt())
        if self.played == self.total:
            self.state = DONE
        elif not self._empty:
            # Ran dry before END: the host is behind. Keep running; what comes next is
            # played as soon as it arrives, its lateness recorded, and the episode counted.
            self._empty = True
            self.starved += 1
        return None

    def fire(self):
        """Play the next event now (the caller waited until next_due()); returns the lateness."""
        if self.state == ARMED:
            # The start instant: lines keep their levels; events are timed from here.
            self.state = RUNNING
            return 0
        due = self._add(self._due, self.sched.peek_dt())
        lv = self.sched.pop_levels()
        self._write(lv)
        late = self._diff(self._ticks(), due)
        self.levels = lv
        self._due = due  # the next dt counts from when this event was due, not when it ran
        self.played += 1
        if late < 0:
            late = 0
        self.late_sum += late
        if late > self.late_max:
            self.late_max = late
        i = 0
        while i < len(BUCKETS) and late > BUCKETS[i]:
            i += 1
        self.hist[i] += 1
        return late

    def service(self, guard_us):
        """Play every event due within guard_us, busy-waiting to its instant.

        Returns microseconds until the next event (or -1 when none is pending): the caller may
        do other work (read the serial line) for up to that long minus its own margin.
        """
        ticks = self._ticks  # locals: each turn of the busy-wait is a few bytecodes only
        diff = self._diff
        while True:
            due = self.next_due()
            if due is None:
                return -1
            wait = diff(due, ticks())
            if wait > guard_us:
                return wait - guard_us
            while diff(due, ticks()) > 0:
                pass
            self.fire()

    # --- requests ---

    def handle(self, line):
        """One request line -> one reply line (bytes, sealed). Never raises on bad input."""
        try:
            parts = unseal(line, 0x3E)  # ">"
        except LineError as e:
            return seal(b"<-,ERR," + str(e).encode())
        seq = parts[0]
        try:
            uint(seq)
            body = self._command(parts[1].decode(), parts[2:])
        except LineError as e:
            body = "ERR," + str(e)
        except (ValueError, IndexError):
            body = "ERR,args"
        return seal(b"<" + seq + b"," + body.encode())

    def _command(self, cmd, args):
        name = _COMMANDS.get(cmd)
        if name is None:
            raise LineError("unknown")
        return getattr(self, name)(args)

    def _hello(self, args):
        return "OK,pulsegen=%d,cap=%d,lines=%s" % (
            VERSION,
            self.sched.capacity,
            ";".join(self.names),
        )

    def _stat(self, args):
        return self.stat()

    def _reset(self, args):
        self.sched.clear()
        self.state = IDLE
        self.total = -1
        self.played = 0
        self.late_max = self.late_sum = self.starved = 0
        for i in range(len(self.hist)):
            self.hist[i] = 0
        self._set(0)
        return "OK"

    def _stop(self, args):
        if self.state in (ARMED, RUNNING):
            self.state = STOPPED
        return "OK,played=%d" % self.played

    def _set_levels(self, args):
        if self.state in (ARMED, RUNNING):
            raise LineError("busy")
        self._set(self._levels(args[0]))
        return "OK"

    def _add_events(self, args):
        s = self.sched
        if self.state in (DONE, STOPPED):
            raise LineError(self.state)
        idx = uint(args[0])
        if idx != s.added:
            return "ERR,index,next=%d" % s.added
        events = self._events(args[1:])
        if len(events) > s.free():
            return "ERR,full,free=%d" % s.free()
        if self.total >= 0:
            raise LineError("ended")
        for dt, lv in events:  # checked whole first: a line is taken entirely or not at all
            s.push(dt, lv)
        return "OK,next=%d,free=%d" % (s.added, s.free())

    def _events(self, args):
        """ADD's "dt.lv" arguments -> [(dt, levels)], at least one."""
        events = []
        for a in args:
            dot = a.find(b".")
            if dot < 0:
                raise LineError("event")
            dt = uint(a[:dot])
            if dt > MAX_DT:
                raise LineError("dt")
            events.append((dt, self._levels(a[dot + 1 :])))
        if not events:
            raise LineError("event")
        return events

    def _end(self, args):
        n = uint(args[0])
        if n != self.sched.added:
            return "ERR,count,next=%d" % self.sched.added
        self.total = n
        return "OK"

    def _go(self, args):
        lead = uint(args[0])
        if lead > MAX_DT:
            raise LineError("lead")
        if self.state != IDLE:
            raise LineError("busy")
        self.played = 0
        self._due = self._add(self._ticks(), lead)
        self.state = ARMED
        return "OK"

    def _levels(self, b):
        lv = hexlevels(b)
        if lv & ~self.mask:
            raise LineError("levels")
        return lv

    def _set(self, lv):
        self._write(lv)
        self.levels = lv

    def stat(self):
        # Calling next_due() settles DONE / UNDERRUN first, so the state reported is current.
        self.next_due()
        return (
            "OK,state=%s,played=%d,total=%d,queued=%d,free=%d,lv=%x,late_max=%d,late_sum=%d,starved=%d,hist=%s"
            % (
                self.state,
                self.played,
                self.total,
                self.sched.queued(),
                self.sched.free(),
                self.levels,
                self.late_max,
                self.late_sum,
                self.starved,
                ";".join(str(h) for h in self.hist),
            )
        )


class LineReader:
    """Assembles bytes into lines in a fixed buffer; overlong lines are dropped whole."""

    def __init__(self, size=MAX_LINE + 2):
        self._buf = bytearray(size)
        self._n = 0
        self._over = False

    def feed_byte(self, b):
        """Returns a complete line (bytes, without newline) or None."""
        if b == 0x0A:
            n = self._n
            over = self._over
            self._n = 0
            self._over = False
            if not n:
                return None
            if over:
                return bytes(self._buf[:n]) + b"~"  # longer than MAX_LINE: refused as "long"
            return bytes(self._buf[:n])
        if b == 0x0D:
            return None
        if self._n < len(self._buf):
            self._buf[self._n] = b
            self._n += 1
        else:
            self._over = True
        return None
