# Persistent, bounded journal of the frames sent, to serve RESEND and RECALL (docs/protocol.md).
#
# Power-safe by construction, without rewriting anything: the journal is a folder of
# append-only segment files "00000017.log", one frame line each (its own CRC inside). Every
# boot starts a new segment, so a line torn by a power cut stays alone at the end of an old
# segment, where its CRC rejects it; every line before it is intact. A cut at any instant
# therefore leaves the journal as it was before the frame or with the frame. Oldest
# segments are deleted once the older ones hold more than (segments - 1) x per_segment frames,
# so that frequent boots (short segments) do not shorten the history; and once there are more
# than 4 x segments files, which bounds the folder in a boot loop (deleting after creating the
# new one: a cut in between only leaves one segment too many, removed at the next start).
#
# Routine frames held in RAM (hold=True, the board's journal). Each durable append is one
# LittleFS sync, and LittleFS copies a file's last, partly written block into a newly
# erased one at every sync: every frame costs a 4 KB sector erase, ~45 ms with the chip's
# interrupts off, during which ball and rotor edges are served late, together, in pin order
# (docs/vpico.md). So the routine frames recovery does not need are kept in RAM, in order,
# and written with the next frame recovery needs (LAUNCH, VOID, FAULT, INC, RES, ... written
# at once, as ever), before any save of the state (Store.before_save), or when 8 KB are held:
# - always: STAT (the answers to the host's STATUS polls, every 0.3-0.5 s from a rig),
#   RECALL and HOP, so that the rotor turning between spins is not hit by an erase a poll;
# - from a LAUNCH (or a resumed spin, resume_run) to its DROP (or an incident's start, a
#   result, a close, a boot) also RNVP and the REV frames without the ball sensors'
#   disagreements.
# A RESEND reads them as if written. The trade-off: a power cut loses the held frames from
# the journal (the host has them if it heard them; BOOT's prev then names the last one
# kept, below what the host heard, which is no gap), and with the REV frames the laps before
# the cut: a spin resumed after it counts only the laps seen after power-up (fewer than
# min_revs: void, power).
import os

from micropython import const

from rmcfw import frames, proto

_SUFFIX = ".log"
_NAME_LEN = const(8)
_HOLD_BYTES = const(8192)  # routine frames kept in RAM at most
PER_SEGMENT = const(256)  # a segment's frames at most (Journal's default)
SEGMENTS = const(16)  # the segments' count the older ones are kept to (Journal's default)
# the frames a board's journal keeps, about: a host never asks further back (rmc.link)
FRAMES_KEPT = const(PER_SEGMENT * SEGMENTS)
# held at any time: the answers to STATUS and RECALL, and the pockets lit while the ball
# bounces (HOP, up to 20 a second from the drop to the result: RES or VOID writes them)
_HELD = (proto.T_STATUS, proto.T_RECALL, proto.T_HOP)
_HELD_RUN = (proto.T_RNVP, proto.T_REV)  # ... and these from a LAUNCH to its DROP
_KEPT = b",lone="  # a REV with the ball sensors' disagreements: recovery needs it at once
# the ball is off the track (or stopped): nothing more is held
_RUN_ENDS = (proto.T_DROP, proto.T_RESULT, proto.T_INCIDENT, proto.T_SESSION_CLOSE, proto.T_BOOT)


def _kind(line):
    """The frame type of a journal line ("$1,T01,boot,seq,ms,TYPE,..."), as str."""
    i = 0
    for _ in range(5):
        i = line.find(b",", i) + 1
        if i <= 0:
            return ""
    j = line.find(b",", i)
    k = line.find(b"*", i)
    if j < 0 or 0 <= k < j:
        j = k
    return line[i:j].decode() if j > i else ""


class Journal:
    def __init__(self, folder="journal", per_segment=PER_SEGMENT, segments=SEGMENTS, hold=False):
        if per_segment < 1 or segments < 2:
            raise ValueError("journal too small")
        self.folder = folder
        self.per_segment = per_segment
        self.segments = segments
        self.hold = hold  # routine frames kept in RAM (above)
        self._file = None
        self._count = 0
        self._size = 0  # bytes written to the current segment
        self._running = False  # a LAUNCH appended, its DROP not yet
        self._held = []  # lines kept in RAM, oldest first
        self._held_bytes = 0
        try:
            os.mkdir(folder)
        except OSError:
            pass  # exists already
        self._segs = self._scan()
        self._firsts = {}  # segment number -> (boot, seq) of its first valid line, or None
        self._lens = {}  # segment number -> its lines (counted once, for _trim)
        self.pos = None  # (segment, byte offset) just past the last line read

    def _scan(self):
        segs = []
        for name in os.listdir(self.folder):
            if name.endswith(_SUFFIX) and len(name) == _NAME_LEN + len(_SUFFIX):
                try:
                    segs.append(int(name[:_NAME_LEN]))
                except ValueError:
                    pass
        segs.sort()
        return segs

    def _path(self, seg):
        return "%s/%08d%s" % (self.folder, seg, _SUFFIX)

    def start(self):
        """Open a fresh segment: call once at boot, after last() and before append()."""
        self.close()
        seg = self._segs[-1] + 1 if self._segs else 1
        self._file = open(self._path(seg), "ab")
        self._segs.append(seg)
        self._count = 0
        self._size = 0
        self._trim()

    def _len(self, seg):
        n = self._lens.get(seg)
        if n is None:
            n = 0
            try:
                f = open(self._path(seg), "rb")
            except OSError:
                return 0
            try:
                while True:
                    chunk = f.read(512)
                    if not chunk:
                        break
                    n += chunk.count(b"\n")
            finally:
                f.close()
            self._lens[seg] = n
        return n

    def _trim(self):
        segs = self._segs
        older = 0  # frames in the segments before the current one
        for seg in segs[:-1]:
            older += self._len(seg)
        room = (self.segments - 1) * self.per_segment
        while len(segs) > 1 and (older > room or len(segs) > 4 * self.segments):
            old = segs.pop(0)
            n = self._len(old)
            if older - n < room and len(segs) <= 4 * self.segments:
                segs.insert(0, old)  # without it the older ones would hold too few
                break
            older -= n
            self._firsts.pop(old, None)
            self._lens.pop(old, None)
            try:
                os.remove(self._path(old))
            except OSError:
                pass

    def close(self):
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None

    def append(self, line, kind=None):
        """Store one frame line (bytes or memoryview, ending with its newline) durably; with
        hold, routine frames in RAM until the next durable write (above). kind: the frame's
        type when the caller knows it (the wire's), else read from the line."""
        if self.hold:
            line = bytes(line)  # (the encoder reuses its buffer)
            if kind is None:
                kind = _kind(line)
            if kind == proto.T_LAUNCH:
                self._running = True  # (the LAUNCH itself written at once)
            elif kind in _RUN_ENDS:
                self._running = False  # the ball is off the track: written with it
            elif (
                self._file is not None
                and self._held_bytes + len(line) <= _HOLD_BYTES
                and (kind in _HELD or (self._running and kind in _HELD_RUN and _KEPT not in line))
            ):
                self._held.append(line)
                self._held_bytes += len(line)
                return
        self._write(line)

    def resume_run(self):
        """A ball resumed on the track after a power cut: hold its routine frames as after
        its LAUNCH (the LAUNCH itself was journaled before the cut)."""
        self._running = True

    def flush(self):
        """Write the frames held in RAM, in order, durably (before any save of the state)."""
        if self._held:
            self._write(None)

    def _write(self, line):
        held = self._held
        if held:
            self._held = []  # (a reader keeps the list it was reading)
            self._held_bytes = 0
        elif self._file is None or self._count >= self.per_segment:
            # (held lines go into the segment a RESEND read them in: no new one before them)
            if self._segs:
                self._lens[self._segs[-1]] = self._count
            self.start()
        for x in held:
            self._file.write(x)
            self._size += len(x)
        if line is not None:
            self._file.write(line)
            self._size += len(line)
        # flush() makes LittleFS commit the append: the frame is on flash before it is sent.
        self._file.flush()
        self._count += len(held) + (line is not None)

    def _lines(self, seg, offset=0):
        try:
            f = open(self._path(seg), "rb")
        except OSError:
            return
        try:
            if offset:
                f.seek(offset)
            while True:
                line = f.readline()
                if not line:
                    break
                if line[-1] != 0x0A:
                    return  # torn by a power cut: the end of this segment
                offset += len(line)
                self.pos = (seg, offset)
                yield line
        finally:
            f.close()
        held = self._held
        if held and self._segs and seg == self._segs[-1]:
            # the lines held in RAM, as if written after the segment's own (their offsets
            # are where they will be written)
            end = self._size
            for line in held:
                end += len(line)
                if end > offset:
                    self.pos = (seg, end)
                    yield line

    def _first(self, seg):
        if seg not in self._firsts or self._firsts[seg] is None:
            first = None
            lines = self._lines(seg)
            for line in lines:
                first = frames.peek(line)
                if first is not None:
                    break
            lines.close()
            self._firsts[seg] = first
        return self._firsts[seg]

    def last(self):
        """(boot, seq) of the last intact frame kept, or None for an empty journal."""
        if self._held:
            return frames.peek(self._held[-1])
        for seg in reversed(self._segs):
            found = None
            for line in self._lines(seg):
                key = frames.peek(line)
                if key is not None:
                    found = key
            if found is not None:
                return found
        return None

    def frames(self, boot, seq, last=None, limit=None, only=None, at=None):
        """Yield the kept frame lines from (boot, seq) on, in order (up to (boot, last)).

        only: sorted list of (first, last) seq ranges of that boot; other frames are skipped
        (a host asking for scattered missing frames gets just those, in one pass).
        at: a `pos` this reading reached before (a reader closed across a write): it reads
        on from there instead of from the segment's start (LittleFS reads a line byte by
        byte: a deep segment would take tens of ms on a Pico). After each line yielded,
        `pos` is (segment, byte offset) just past it."""
        start = (boot, seq)
        k = 0
        segs = self._segs
        n = 0
        for i in range(len(segs)):
            offset = 0
            if at is not None:
                if segs[i] < at[0]:
                    continue  # read before
                if segs[i] == at[0]:
                    offset = at[1]
            elif i + 1 < len(segs):
                # Skip a segment when the next one already starts at or before what is asked.
                nxt = self._first(segs[i + 1])
                if nxt is not None and nxt <= start:
                    continue
            lines = self._lines(segs[i], offset)
            try:
                for line in lines:
                    key = frames.peek(line)
                    if key is None or key < start:
                        continue
                    if last is not None and (key[0] > boot or key[1] > last):
                        return
                    if only is not None:
                        if key[0] != boot:
                            return
                        while k < len(only) and key[1] > only[k][1]:
                            k += 1
                        if k >= len(only):
                            return
                        if key[1] < only[k][0]:
                            continue
                    yield line
                    n += 1
                    if limit is not None and n >= limit:
                        return
            finally:
                # closed now, not when the collector finds it (MicroPython has no
                # reference counts): an open file pins a LittleFS snapshot
                lines.close()

    def results(self, count):
        """The last `count` results kept, oldest first, as (spin, number) pairs."""
        found = []
        tag = ("," + proto.T_RESULT + ",").encode()
        for seg in self._segs:
            for line in self._lines(seg):
                if tag not in line:
                    continue
                try:
                    f = frames.decode(line)
                    found.append((int(f.fields["spin"]), f.fields["num"]))
                except (frames.FrameError, KeyError, ValueError):
                    continue
                if len(found) > count:
                    found.pop(0)
        return found
