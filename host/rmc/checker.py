"""The stream checker: integrity of the frames, then the decree's rules across them.

Feed it lines as they came (`feed`), in reception order; `report()` at any time gives the
counts, the gaps, the results and the rule violations (see docs/protocol.md, "Checking").

Integrity, per line: a line without a frame start is noise (REPL output, a prompt); a frame
with a wrong CRC, or truncated, is a CRC error; a right CRC over a bad layout is malformed;
with a key, a frame without a right tag is an authentication failure. Without a key, tags are
not checked, but an untagged frame in a stream where the table tags its frames is counted as
an authentication failure (a table with a key sends only tagged frames). Valid frames are
keyed by (boot, seq): the same key again is a duplicate (a different content under the same
key is a conflict, a rule violation), a key below what was already received in its boot or
a boot below the newest one is out of order, unless the frame comes marked as resent.

The decree's rules are checked on the valid frames in (boot, seq) order, so resent frames
take their place: see RULES.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmc.frames import (
    AuthError,
    CrcError,
    Frame,
    FrameError,
    Verifier,
    decode,
    frame_of,
    is_tagged,
)
from rmcfw import config as fwconfig
from rmcfw import numbers, proto
from rmcfw.frames import pocket_labels
from rmcfw.journal import FRAMES_KEPT

# Rule names, as they appear in reports.
RULES = {
    "conflict": "two different frames under one (boot, seq)",
    "table": "frame from another table",
    "wheel": "board booted with another wheel definition (pocket order) than the one expected",
    "rotor_not_reversed": "result of a spin whose rotor turned the same way as the spin before",
    "ball_with_rotor": "result of a spin whose ball was launched the rotor's way",
    "few_revs": "result after fewer than 4 ball revolutions",
    "drop_before_rnvp": "ball dropped before « rien ne va plus »",
    "result_without_rnvp": "result without « rien ne va plus »",
    "two_outcomes": "a spin with more than one result or void",
    "no_outcome": "a spin with neither result nor void before the next one",
    "spin_mismatch": "result or void for another spin than the one launched",
    "not_a_pocket": "result that is not a pocket of the wheel",
    "wrong_chances": "result whose colour, parity or manque/passe is not that of its number",
    "unknown_void_reason": "void with a reason code outside the protocol",
    "last_three_not_announced": "session closed without the last three spins announced",
    "last_three_late": "last three spins announced with fewer than three left, or moved",
    "after_last_spin": "spin launched after the announced last coup",
    "spin_while_closed": "spin launched while the session is closed",
    "lid_not_locked": "session closed and the lid not locked",
    "bad_field": "frame with a missing or invalid field",
    "not_launched": "result or void of a spin whose launch the recording should hold",
    "bad_threshold": "threshold set to a value the rules forbid, or no such threshold",
    "incident_procedure": "incident (decree 1-4) not stopped, put back or relaunched as it must",
    "coup_count": "session's coups counted otherwise by the table than by the recording",
    "closed_before_last_coup": "session closed before its announced last coup, with no reason",
    "open_while_open": "session opened while one is open",
    "hop_outside_bounce": "pockets lit (HOP) outside the ball's bounce: before its spin's drop, "
    "after its outcome, or of another spin",
}

# What makes a verdict not clean without breaking a rule of the stream: shown apart.
ALERTS = {
    "tamper": "the table reported tampering (TAMP)",
    "lid_opened": "lid unlocked while no session is open",
    "fault_active": "fault still active at the end of the recording",
}

# Enumerated fields, read exactly as the firmware writes them (one spelling).
DIRECTIONS = frozenset(("cw", "ccw", "-"))  # "-": not seen (the launch is then void)
_ENUMS = {
    (proto.T_LAUNCH, "rdir"): DIRECTIONS,
    (proto.T_LAUNCH, "bdir"): DIRECTIONS,
    (proto.T_LID, "locked"): frozenset(("0", "1")),
    (proto.T_FAULT, "on"): frozenset(("0", "1")),
    (proto.T_RNVP, "why"): frozenset(("fit", "limit", "drop", "incident", "power")),
    (proto.T_INCIDENT, "step"): frozenset(
        (proto.INC_START, proto.INC_BACK, proto.INC_RELAUNCH, proto.INC_IGNORED)
    ),
}

# A pocket field (LAUNCH's and DROP's `under`: the pocket under ball sensor A at the ball's
# first and last pass): a pocket label in its one spelling, or "-" (the rotor's place not
# known). Absent from an older firmware's frames.
POCKET_FIELDS = {proto.T_LAUNCH: "under", proto.T_DROP: "under"}
UNDER_VALUES = frozenset((*numbers.NUMBERS, "-"))

VOID_REASONS = frozenset(
    (
        proto.V_SAME_DIR,
        proto.V_NOT_REVERSED,
        proto.V_FEW_REVS,
        proto.V_OBJECT,
        proto.V_BALL_OUT,
        proto.V_SENSORS,
        proto.V_POWER,
    )
)
MIN_REVS = 4
_HEX8 = re.compile(rb"[0-9a-f]{8}")


@dataclass
class Report:
    lines: int = 0
    noise: int = 0
    frames: int = 0  # lines holding a frame start, damaged or not
    valid: int = 0  # distinct valid frames
    crc_errors: int = 0
    malformed: int = 0
    auth_failures: int = 0
    unverified: int = 0  # tagged frames accepted without a key to check them
    answers: int = 0  # unsequenced ACK frames (answers to commands)
    duplicates: int = 0
    resent: int = 0  # frames marked "~" accepted (filling a gap)
    out_of_order: int = 0
    reboots: int = 0
    gaps: list[list[int]] = field(default_factory=list)
    spins: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    voids: list[dict[str, Any]] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    tamper: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)  # results that broke a rule
    alerts: list[dict[str, Any]] = field(default_factory=list)  # ALERTS: {boot, seq, what, detail}
    active_faults: list[str] = field(default_factory=list)  # still active at the end
    forced_closes: list[dict[str, Any]] = field(default_factory=list)  # SCLOSE with a reason
    settings: list[dict[str, Any]] = field(default_factory=list)  # CFG: threshold changes
    commands: list[dict[str, Any]] = field(default_factory=list)  # a trace's host commands
    table: str | None = None
    boots: list[int] = field(default_factory=list)
    unmarked_duplicates: int = 0
    unmarked_out_of_order: int = 0
    # a trace's own faults (lines that do not parse, an end record missing or wrong): kept
    # apart from the frames' report, `rmc check` joins them in its output (rmc.check_view)
    trace_errors: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No corruption, forgery, gap, replay, rule violation, tamper, lid opened while
        closed, nor fault left active."""
        return self.sound and not self.alerts

    @property
    def sound(self) -> bool:
        """No corruption, forgery, gap, replay or rule violation (alerts aside: a rig or a
        demo compares those with what its truth expects)."""
        return not (
            self.crc_errors
            or self.malformed
            or self.auth_failures
            or self.gaps
            or self.violations
            or self.unmarked_duplicates
            or self.unmarked_out_of_order
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "table": self.table,
            "lines": self.lines,
            "noise": self.noise,
            "frames": self.frames,
            "valid": self.valid,
            "crc_errors": self.crc_errors,
            "malformed": self.malformed,
            "auth_failures": self.auth_failures,
            "unverified": self.unverified,
            "answers": self.answers,
            "duplicates": self.duplicates,
            "resent": self.resent,
            "out_of_order": self.out_of_order,
            "reboots": self.reboots,
            "boots": self.boots,
            "gaps": self.gaps,
            "spins": self.spins,
            "results": self.results,
            "voids": self.voids,
            "violations": self.violations,
            "faults": self.faults,
            "tamper": self.tamper,
            "rejected": self.rejected,
            "alerts": self.alerts,
            "active_faults": self.active_faults,
            "forced_closes": self.forced_closes,
            "settings": self.settings,
            "commands": self.commands,
        }


# keep=False: the lines remembered for duplicates, at least: what a board's journal keeps
# (a link asks further back, ASK_BACK, only for frames it never received)
LIVE_LINES = FRAMES_KEPT


class Checker:
    """Frame stream checker. key: the table's HMAC key (bytes) or None."""

    def __init__(
        self,
        key: bytes | None = None,
        table: str | None = None,
        wheel: str | None = None,
        keep: bool = True,
        lines_kept: int = LIVE_LINES,
    ) -> None:
        """wheel: the wheel id (rmc.trace.wheel_id) the board's BOOT frames must carry;
        None: not checked. keep=False: for a reader that keeps the frames itself (the table
        service stores them): only each frame's line stays here, for its duplicates and
        conflicts, and there is no report. The lines are kept in a dict of ints and bytes,
        which Python's garbage collector never looks into: a service's frames kept as
        frames made each full collection longer as they grew, 0.1-0.6 s with 200 tables at
        line rate after 8-30 s, every thread stopped meanwhile. Only the last `lines_kept`
        to twice that many are kept: a copy of an older frame is taken as new, as by a
        checker started after it (the service's store keeps the first, by its key)."""
        self.verifier = Verifier(key) if key else None
        self.table = table
        self.wheel = wheel
        self.keep = keep
        self.frames: dict[tuple[int, int], Frame] = {}  # (boot, seq) -> the frame
        # keep=False: boot << 32 | seq -> its line, the newest, then the lines_kept before
        self._lines: dict[int, bytes] = {}
        self._older: dict[int, bytes] = {}
        self._lines_kept = lines_kept
        self.rx: dict[tuple[int, int], float | None] = {}  # host receive time per frame
        self._displaced = 0  # untagged frames replaced by the tagged frame of the same key
        self._tagged_seen = False
        self._foreign: list[Frame] = []
        self._conflicts: list[Frame] = []
        self._tops: dict[int, int] = {}  # per boot, highest `top` of an ACK
        self._boots: list[Frame] = []  # BOOT frames (their `prev` shows a lost tail)
        self._in_order = True  # frames dict insertion order is (boot, seq) order
        self._last_key = (-1, -1)
        self.counts = Report()
        # why feed() returned None for the last line: "crc", "malformed", "auth", "noise",
        # "blank", "foreign", "duplicate", "conflict", "displaced" (a live service files it)
        self.why = ""

    def feed(self, line: bytes, rx_ms: float | None = None) -> Frame | None:
        """One received line (bytes, newline optional). Returns the frame if valid and new."""
        c = self.counts
        c.lines += 1
        # A frame starts with "$1," (anywhere: a REPL prompt may come first) or the line
        # starts with "$" (a damaged start); a "$" inside other text is noise.
        start = line.find(b"$1,")
        if start < 0 and (line[:1] == b"$" or line[:2] == b"~$"):
            start = line.find(b"$")
        if start < 0:
            body = line.rstrip(b"\r\n")
            if len(body) > 9 and body[-9] == 0x2A and _HEX8.fullmatch(body[-8:]):
                # A frame's tail without its start: damaged, not noise.
                c.frames += 1
                c.crc_errors += 1
                self.why = "crc"
            else:
                self.why = "noise" if body.strip() else "blank"
                if body.strip():
                    c.noise += 1
            return None
        c.frames += 1
        if start and line[start - 1] == 0x7E:  # "~": resent from the journal
            start -= 1
        try:
            f = decode(line[start:] if start else line, self.verifier)
        except AuthError:
            c.auth_failures += 1
            self.why = "auth"
            return None
        except CrcError:
            c.crc_errors += 1
            self.why = "crc"
            return None
        except FrameError:
            c.malformed += 1
            self.why = "malformed"
            return None
        return self._accept(f, rx_ms)

    def _accept(self, f: Frame, rx_ms: float | None = None) -> Frame | None:
        """Place a decoded frame in the stream: table, numbering, duplicates, order."""
        c = self.counts
        if f.start != "$":
            c.malformed += 1  # a command echoed back is not a frame
            self.why = "malformed"
            return None
        if self.table is None:
            self.table = f.table
        elif f.table != self.table:
            self._foreign.append(f)
            self.why = "foreign"
            return None
        if f.seq == proto.SEQ_NONE:
            return self._answer(f)
        key = (f.boot, f.seq)
        if self.keep:
            old = self.frames.get(key)
            if old is not None:
                return self._again(f, old.line, old.tagged)
        else:
            k = f.boot << 32 | f.seq  # (seq: below 2^32, as decoded)
            line = self._lines.get(k) or self._older.get(k)
            if line is not None:
                return self._again(f, line, is_tagged(line))
        # Out of order: below the highest (boot, seq) received so far.
        if key < self._last_key:
            self._in_order = False
            c.out_of_order += 1
            if not f.resent:
                c.unmarked_out_of_order += 1
        else:
            self._last_key = key
        if f.resent:
            c.resent += 1
        if f.tagged:
            self._tagged_seen = True
            if self.verifier is None:
                c.unverified += 1
        if not self.keep:
            self._remember(f)
            return f
        self.frames[key] = f
        if rx_ms is not None:
            self.rx[key] = rx_ms
        if f.type == proto.T_BOOT and f.seq == 1:
            self._boots.append(f)
        return f

    def _remember(self, f: Frame) -> None:
        """keep=False: the frame's line, in two generations of lines_kept (constant time)."""
        if len(self._lines) >= self._lines_kept:
            self._older, self._lines = self._lines, {}
        self._lines[f.boot << 32 | f.seq] = f.line

    def _answer(self, f: Frame) -> Frame | None:
        """An unsequenced answer (ACK): no place in the numbering, but its `top` tells the
        last seq the firmware had used, which shows frames missing at the end."""
        if f.type != proto.T_ACK:
            self.counts.malformed += 1
            self.why = "malformed"
            return None
        self.counts.answers += 1
        top = f.fields.get(proto.K_TOP, "")
        if top.isdigit():
            self._tops[f.boot] = max(self._tops.get(f.boot, 0), int(top))
        return f

    def _again(self, f: Frame, old_line: bytes, old_tagged: bool) -> Frame | None:
        """A frame under the key of one received already: a copy, or one that differs."""
        c = self.counts
        keyless = self.verifier is None
        if f.tagged and not old_tagged and keyless:
            # An untagged frame took the place of a tagged one: the tagged one is the table's
            # (a table with a key tags everything); the other is counted a forgery.
            self._displaced += 1
            self._tagged_seen = True
            c.unverified += 1
            if self.keep:
                self.frames[(f.boot, f.seq)] = f
            else:
                self._remember(f)
            return f
        if old_tagged and not f.tagged and keyless:
            self._displaced += 1  # an untagged copy of a tagged frame's place: a forgery
            self.why = "displaced"
            return None
        if old_line == f.line:
            c.duplicates += 1
            self.why = "duplicate"
            if not f.resent:
                c.unmarked_duplicates += 1
        else:
            self._conflicts.append(f)
            self.why = "conflict"
        return None

    def feed_many(self, lines: Iterable[bytes]) -> None:
        """feed() for a whole capture or trace: the same result, faster.

        A line that starts with a frame is decoded once, as feed() decodes it
        (`rmc.frames.frame_of`, the decoder without its newline and resend mark). The common
        frame (untagged, of this table, numbered after every frame before it, not a BOOT nor
        an ACK) is placed here; any other decoded frame goes through `_accept`, and any other
        line (noise, damaged, resent) through feed(), unchanged. The fuzz tests check that
        both ways give identical reports.
        """
        if not self.keep:
            for line in lines:
                self.feed(line)
            return
        frames = self.frames
        c = self.counts
        verifier = self.verifier
        table = self.table
        last_key = self._last_key
        boot_type = proto.T_BOOT
        fast = 0
        for line in lines:
            if line[:1] == b"$":
                if line[-1:] == b"\n":
                    line = line.rstrip(b"\r\n")
                try:
                    f = frame_of(line, verifier)
                except FrameError:  # CrcError and AuthError too: feed() counts it, and why
                    f = None
                else:
                    # (unpacked at once: a named tuple's attributes and items are slower)
                    ftable, boot, seq, _, ftype, _, tagged, _, _ = f
                    if ftable == table and seq and not tagged and ftype != boot_type:
                        key = (boot, seq)
                        if key > last_key:
                            frames[key] = f
                            last_key = key
                            fast += 1
                            continue
            else:
                f = None
            self._last_key = last_key
            if f is None:
                self.feed(line)
            else:
                c.lines += 1  # as feed() counts a line holding a frame
                c.frames += 1
                self._accept(f)
            table = self.table
            last_key = self._last_key
        self._last_key = last_key
        c.lines += fast
        c.frames += fast

    # --- gaps ---

    def keys(self) -> list[tuple[int, int]]:
        """The (boot, seq) of the valid frames, sorted (usually already in that order)."""
        if self._in_order:
            return list(self.frames)
        return sorted(self.frames)

    def gaps(self, keys: list[tuple[int, int]] | None = None) -> list[list[int]]:
        """Missing ranges [boot, first_seq, last_seq], from what the frames tell.

        Within a boot, from its first frame received (the first boot of a recording may have
        begun before it) or from seq 1 (later boots), to its last frame received or to the
        last seq the firmware says it used (an ACK's top, the next BOOT's prev)."""
        if keys is None:
            keys = self.keys()
        if not keys:
            return []
        prev_ends: dict[int, int] = {}
        for f in self._boots:
            try:
                prev = f.fields.get(proto.K_PREV, "-")
            except FrameError:
                continue
            b, _, n = prev.partition(":")
            if b.isdigit() and n.isdigit():
                prev_ends[int(b)] = max(prev_ends.get(int(b), 0), int(n))
        tops = self._tops
        first_boot = keys[0][0]
        gaps: list[list[int]] = []
        seen: set[int] = set()

        def close(boot: int, expect: int) -> None:
            end = max(tops.get(boot, 0), prev_ends.get(boot, 0))
            if end >= expect:
                gaps.append([boot, expect, end])

        cur = -1
        expect = 0
        for boot, seq in keys:
            if boot != cur:
                if cur >= 0:
                    close(cur, expect)
                cur = boot
                seen.add(boot)
                expect = seq if boot == first_boot else 1
            if seq > expect:
                gaps.append([boot, expect, seq - 1])
            expect = seq + 1
        close(cur, expect)
        for b, end in prev_ends.items():
            if b not in seen and b > first_boot:
                gaps.append([b, 1, end])  # a whole boot never heard
        gaps.sort()
        return gaps

    # --- report ---

    def report(self) -> Report:
        if not self.keep:
            raise RuntimeError("a checker made with keep=False keeps no frames to report on")
        c = self.counts
        # the lists copied: the rules add to the report's (a second report was doubled)
        r = Report(**{k: _copied(getattr(c, k)) for k in Report.__dataclass_fields__})
        r.results, r.voids, r.violations, r.faults, r.tamper = [], [], [], [], []
        r.table = self.table
        r.auth_failures += self._displaced
        untagged = 0
        if self._tagged_seen and self.verifier is None:
            untagged = sum(1 for f in self.frames.values() if not f.tagged)
        if untagged:
            # The table tags its frames: untagged ones with its name were not sent by it.
            r.auth_failures += untagged
            frames = {k: f for k, f in self.frames.items() if f.tagged}
        else:
            frames = self.frames
        r.valid = len(frames)
        boots = sorted({b for b, _ in frames})
        r.boots = boots
        r.reboots = max(len(boots) - 1, 0)
        r.gaps = self.gaps(None if frames is self.frames else sorted(frames))
        for f in self._foreign:
            r.violations.append(_v(f, "table", f"frame of table {f.table!r}"))
        for f in self._conflicts:
            r.violations.append(_v(f, "conflict", "differs from the frame first received"))
        if self.wheel is not None:
            for f in self._boots:
                if (f.boot, f.seq) in frames:
                    try:
                        got = f.fields.get("wheel")
                    except FrameError:
                        got = None  # fields that do not parse: no id either
                    if got != self.wheel:
                        detail = f"wheel id {got!r}, expected {self.wheel!r}"
                        r.violations.append(_v(f, "wheel", detail))
        if frames is self.frames and self._in_order:
            _Rules(r).run(frames.values())
        else:
            _Rules(r).run([frames[k] for k in self.keys() if k in frames])
        return r


def _copied(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


def _v(f: Frame, rule: str, detail: str) -> dict[str, Any]:
    return {"boot": f.boot, "seq": f.seq, "rule": rule, "detail": detail}


class _Spin:
    __slots__ = (
        "bdir",
        "drop",
        "launch_rules",
        "launched",
        "number",
        "outcome",
        "rdir",
        "rev_frames",
        "reversed",
        "revs",
        "rnvp",
        "rnvp_late",
    )

    def __init__(self, number: int) -> None:
        self.number = number
        self.launched = False
        self.rdir: str | None = None
        self.bdir: str | None = None
        self.reversed = True
        self.revs: int | None = None
        self.rev_frames: list[Frame] = []
        self.rnvp = False
        self.drop = False
        self.outcome = 0
        self.launch_rules: list[str] = []  # rules its launch broke: its result is not valid
        self.rnvp_late = False  # « rien ne va plus » came before the last three were announced


class _Incident:
    __slots__ = ("back", "previous", "relaunched", "spin")

    def __init__(self, spin: int, previous: str | None) -> None:
        self.spin = spin
        self.previous = previous  # the pocket the ball goes back to (None: not known)
        self.back = False
        self.relaunched = False


class _Rules:
    """The decree's rules over the frames in (boot, seq) order."""

    def __init__(self, report: Report) -> None:
        self.r = report
        self.spin: _Spin | None = None
        self.prev_rdir: str | None = None
        self.session: bool | None = None  # None: unknown (recording began mid-session)
        # Decree 1-7: the last coup is announced before the last three. LAST3 counts coups,
        # i.e. results: a voided launch is no coup, so spin numbers cannot be compared with it.
        self.last3: int | None = None  # announced last coup (the session's result count)
        self.left: int | None = None  # coups left after the latest LAST3 and results since
        # coups of the open session (None: it opened before the recording began). One that
        # closes with none played has nothing to announce, and the table lets it close.
        self.coups: int | None = None
        self.lid_pending: Frame | None = None
        self.spins: set[int] = set()
        self.fl: dict[str, str] = {}  # the fields of the frame being handled
        # Whether every launch is in the recording: it began at the table's first boot
        # (BOOT prev=-), or a launch was seen already. Until then, the first spin's result
        # or void may follow a launch made before the recording began.
        self.every_launch = False
        self.first_spin: int | None = None
        self.settled: set[int] = set()  # spins with a result or a void
        self.last3_frame: Frame | None = None
        self.faults_on: dict[str, Frame] = {}  # fault code -> the frame that raised it
        self.last_result: str | None = None  # the previous coup's number: an incident's pocket
        self.inc: _Incident | None = None  # under way: from its start to the relaunch
        self.lid_state: str | None = None

    def bad(self, f: Frame, rule: str, detail: str) -> None:
        self.r.violations.append(_v(f, rule, detail))

    def enum(self, f: Frame, name: str) -> str | None:
        """An enumerated field, read exactly as the firmware writes it (None: absent)."""
        v = self.fl.get(name)
        if v is not None and v not in _ENUMS[f.type, name]:
            allowed = sorted(_ENUMS[f.type, name])
            raise FrameError(f"{f.type}: field {name!r} is {v!r}, not one of {allowed}")
        return v

    def pocket_field(self, f: Frame) -> None:
        """A pocket field (POCKET_FIELDS) with another value is a bad field; it breaks no
        rule of the game, so the frame is handled all the same."""
        name = POCKET_FIELDS[f.type]
        v = self.fl.get(name)
        if v is not None and v not in UNDER_VALUES:
            self.bad(f, "bad_field", f"{f.type}: field {name!r} is {v!r}, not a pocket nor '-'")

    def run(self, frames: Iterable[Frame]) -> None:
        self.feed(frames)
        self.finish()

    def feed(self, frames: Iterable[Frame]) -> None:
        """Frames in (boot, seq) order; may be called again with the frames that follow."""
        handlers = {
            proto.T_LAUNCH: self.launch,
            proto.T_RNVP: self.rnvp,
            proto.T_DROP: self.drop,
            proto.T_RESULT: self.result,
            proto.T_VOID: self.void,
            proto.T_INCIDENT: self.incident,
            proto.T_SESSION_OPEN: self.open,
            proto.T_SESSION_CLOSE: self.close,
            proto.T_LAST_THREE: self.last_three,
            proto.T_LID: self.lid,
            proto.T_FAULT: self.fault,
            proto.T_TAMPER: self.tamper,
            proto.T_BOOT: self.boot,
            proto.T_CONFIG: self.config,
            proto.T_HOP: self.hop,
        }
        rev, stat = proto.T_REV, proto.T_STATUS
        for f in frames:
            t = f.type
            # The most frequent frames first, without reading their fields.
            if t == rev:
                s = self.spin
                if s is not None and s.outcome == 0:
                    s.rev_frames.append(f)  # read only if its DROP does not count
                continue
            if t == stat:
                if self.lid_pending is None and self.inc is None:
                    continue
                h = self.status
            else:
                h = handlers.get(t)
                if h is None:
                    continue
            try:
                self.fl = f.fields  # parsed once for the handler
                h(f)
            except FrameError as e:
                self.bad(f, "bad_field", str(e))

    def finish(self) -> None:
        """What the end of the recording leaves open: reported once, after the last frame."""
        if self.lid_pending is not None:
            self.bad(self.lid_pending, "lid_not_locked", "no lid lock after the session closed")
        for code, f in sorted(self.faults_on.items()):
            self.alert(f, "fault_active", code)
        self.r.active_faults = sorted(self.faults_on)
        self.r.spins = len(self.spins)

    def config(self, f: Frame) -> None:
        """A threshold changed (SET): on record with its old and new value and who asked."""
        key, by = self.fl.get("key", ""), self.fl.get("by", "")
        old, new = f.int("old", self.fl), f.int("new", self.fl)
        setting = {"boot": f.boot, "seq": f.seq, "key": key, "old": old, "new": new, "by": by}
        if "role" in self.fl:  # as what they asked (rmcfw.lead: a later call, an engineer)
            setting["role"] = self.fl["role"]
        self.r.settings.append(setting)
        if not by:
            raise FrameError("CFG: field 'by' is empty: who asked is not on record")
        if key not in fwconfig.keys():
            self.bad(f, "bad_threshold", f"no threshold {key!r}")
            return
        lo, hi = fwconfig.bounds(key)
        if not lo <= new <= hi:
            self.bad(f, "bad_threshold", f"{key} set to {new}, outside {lo}..{hi}")

    def alert(self, f: Frame, what: str, detail: str) -> None:
        self.r.alerts.append({"boot": f.boot, "seq": f.seq, "what": what, "detail": detail})

    def boot(self, f: Frame) -> None:
        if f.seq != 1:
            return
        if self.fl.get(proto.K_PREV) == "-":
            # The table's first boot: its journal is empty, no session is open, no spin was
            # launched before: the recording holds every launch from here.
            self.every_launch = True
            self.session = False
        faults = self.fl.get("faults", "")
        # the faults still active at power-up (a fault cleared while off is cleared here)
        self.faults_on = {c: f for c in faults.split(",") if c}

    def current(self, f: Frame) -> _Spin | None:
        n = f.int("spin", self.fl)
        self.spins.add(n)
        if self.first_spin is None:
            self.first_spin = n
        if self.spin is not None and self.spin.number == n:
            return self.spin
        if self.spin is not None and self.spin.launched and self.spin.outcome == 0:
            # A frame of another spin while this one is open: only a launch may move on.
            self.bad(f, "spin_mismatch", f"spin {n} while spin {self.spin.number} is open")
        return None

    def launch(self, f: Frame) -> None:
        self.pocket_field(f)
        n = f.int("spin", self.fl)
        rdir, bdir = self.enum(f, "rdir"), self.enum(f, "bdir")
        if not rdir or not bdir:
            raise FrameError("LAUNCH without rdir/bdir")
        s = self.spin
        if s is not None and s.number == n and s.outcome == 0:
            # Relaunch after an incident (decree 1-4): same spin, ball launched again.
            s.rdir, s.bdir, s.revs, s.rnvp, s.drop = rdir, bdir, None, False, False
            s.rev_frames = []
            return
        if s is not None and s.launched and s.outcome == 0:
            self.bad(f, "no_outcome", f"spin {s.number} ended without result or void")
        s = _Spin(n)
        inc = self.inc
        if inc is not None and not inc.relaunched:
            self.bad(
                f, "incident_procedure", f"spin {n} launched with no relaunch after the incident"
            )
        self.inc = None
        if self.session is False:
            self.bad(f, "spin_while_closed", f"spin {n}")
            s.launch_rules.append("spin_while_closed")
        if self.left is not None and self.left <= 0:
            self.bad(f, "after_last_spin", f"spin {n} after the announced last coup {self.last3}")
            s.launch_rules.append("after_last_spin")
        if n in self.settled:
            self.bad(f, "spin_mismatch", f"spin {n} launched again after its outcome")
            s.launch_rules.append("spin_mismatch")
        self.every_launch = True
        if self.first_spin is None:
            self.first_spin = n
        s.launched = True
        s.rdir, s.bdir = rdir, bdir
        s.reversed = self.prev_rdir is None or self.prev_rdir != rdir
        self.prev_rdir = rdir
        self.spin = s
        self.spins.add(n)

    def count_revs(self, s: _Spin) -> None:
        if s.revs is None and s.rev_frames:
            for f in s.rev_frames:
                if f.int("spin") == s.number:
                    s.revs = max(s.revs or 0, f.int("n"))
            s.rev_frames = []

    def rnvp(self, f: Frame) -> None:
        self.enum(f, "why")
        s = self.current(f)
        if s is not None:
            s.rnvp = True

    def drop(self, f: Frame) -> None:
        self.pocket_field(f)
        s = self.current(f)
        if s is None:
            return
        if s.launched and not s.rnvp:
            self.bad(f, "drop_before_rnvp", f"spin {s.number}")
        s.drop = True
        if "revs" in self.fl:
            s.revs = max(s.revs or 0, f.int("revs", self.fl))

    def hop(self, f: Frame) -> None:
        """The pockets lit while the ball bounces: from the spin's DROP to its outcome (RES,
        VOID, INC start), each a pocket label once (rmcfw.frames.pocket_labels), or "-"."""
        n = f.int("spin", self.fl)
        lit = self.fl.get("lit")
        if lit is None:
            raise FrameError("HOP without 'lit'")
        for label in pocket_labels(lit):
            if label not in numbers.INDEX:
                raise FrameError(f"HOP: {label!r} in 'lit' is not a pocket")
        s = self.spin
        if s is not None and s.number == n:
            if s.outcome:
                self.bad(f, "hop_outside_bounce", f"spin {n}: after its outcome")
            elif not s.drop:
                self.bad(f, "hop_outside_bounce", f"spin {n}: before its drop")
        elif s is not None and s.launched and s.outcome == 0:
            self.bad(f, "hop_outside_bounce", f"spin {n} while spin {s.number} is open")
        elif s is not None or self.every_launch:
            self.bad(f, "hop_outside_bounce", f"spin {n}: no such spin among the pockets")
        # else the recording began during this spin's bounce: nothing to hold it against

    def unlaunched(self, f: Frame, n: int, what: str) -> list[str]:
        """The rules an outcome of a spin that is not the open one breaks: a second outcome,
        or one of a spin never launched where the recording holds every launch."""
        if n in self.settled:
            self.bad(f, "two_outcomes", f"spin {n}: a second {what}")
            return ["two_outcomes"]
        if self.every_launch or n != self.first_spin:
            self.bad(f, "not_launched", f"{what} of spin {n}, whose launch is not recorded")
            return ["not_launched"]
        return []  # the first spin of a recording that began after its launch

    def result(self, f: Frame) -> None:
        n = f.int("spin", self.fl)
        num = self.fl.get("num", "")
        before = len(self.r.violations)
        s = self.current(f)
        self.check_result(f, n, num, s)
        # the rules its own frame broke (a late announcement is the LAST3 frame's, not its)
        at = (f.boot, f.seq)
        rules = [v["rule"] for v in self.r.violations[before:] if (v["boot"], v["seq"]) == at]
        if s is not None:
            rules += s.launch_rules
        if rules:
            self.r.rejected.append({"spin": n, "result": num, "rules": sorted(set(rules))})
        else:
            self.r.results.append({"spin": n, "result": num})
            self.last_result = num
        self.settled.add(n)

    def check_result(self, f: Frame, n: int, num: str, s: _Spin | None) -> None:
        if num not in numbers.INDEX:
            self.bad(f, "not_a_pocket", f"spin {n}: {num!r}")
        else:
            want = numbers.chances(num) or (numbers.VERT, "-", "-")
            got = (self.fl.get("colour"), self.fl.get("parity"), self.fl.get("half"))
            if got != want:
                self.bad(f, "wrong_chances", f"spin {n}: {num} is {'/'.join(want)}, sent {got}")
        inc = self.inc
        if inc is not None and not inc.relaunched:
            detail = f"result of spin {n} during the incident of spin {inc.spin}, not relaunched"
            self.bad(f, "incident_procedure", detail)
        if s is None:
            if not self.unlaunched(f, n, "result"):
                self.coup()  # the first spin of a recording that began after its launch
            return  # no launch to check it against
        self.outcome(f, s)
        if s.outcome == 1:
            self.coup()  # (a second result of a spin is no second coup)
        if s.rnvp_late and self.last3_frame is not None:
            self.bad(
                self.last3_frame,
                "last_three_late",
                f"announced after « rien ne va plus » of spin {n}, one of the last three",
            )
        if not s.launched:
            return
        if not s.rnvp:
            self.bad(f, "result_without_rnvp", f"spin {n}")
        if s.bdir == s.rdir:
            self.bad(f, "ball_with_rotor", f"spin {n}: ball and rotor both {s.rdir}")
        if not s.reversed:
            self.bad(f, "rotor_not_reversed", f"spin {n}: rotor {s.rdir} as on the spin before")
        self.count_revs(s)
        if s.revs is not None and s.revs < MIN_REVS:
            self.bad(f, "few_revs", f"spin {n}: {s.revs} revolutions")

    def coup(self) -> None:
        """A coup played: one fewer left of the last three, one more in the session."""
        if self.left is not None:
            self.left -= 1
        if self.coups is not None:
            self.coups += 1

    def outcome(self, f: Frame, s: _Spin) -> None:
        s.outcome += 1
        if s.outcome > 1:
            self.bad(f, "two_outcomes", f"spin {s.number}")

    def void(self, f: Frame) -> None:
        n = f.int("spin", self.fl)
        reason = self.fl.get("reason", "")
        self.r.voids.append({"spin": n, "reason": reason})
        if reason not in VOID_REASONS:
            self.bad(f, "unknown_void_reason", f"spin {n}: {reason!r}")
        s = self.current(f)
        if s is not None:
            self.outcome(f, s)
        else:
            self.unlaunched(f, n, "void")
        self.settled.add(n)

    def incident(self, f: Frame) -> None:
        """Decree 1-4: « rien ne va plus », the game stopped, the ball put back in the pocket
        of the previous number, then launched again; no bet in between."""
        step = self.enum(f, "step")
        n = f.int("spin", self.fl)
        s = self.current(f)
        inc = self.inc
        if step == proto.INC_START:
            if s is not None and s.launched and not s.rnvp:
                self.bad(f, "incident_procedure", f"spin {n} stopped before « rien ne va plus »")
            self.inc = _Incident(n, self.last_result)
        elif step in (proto.INC_BACK, proto.INC_RELAUNCH) and (inc is None or inc.spin != n):
            if self.every_launch:  # else the recording may have begun during the incident
                self.bad(f, "incident_procedure", f"{step} of spin {n} with no incident under way")
        elif step == proto.INC_BACK:
            num = self.fl.get("num")
            if num is not None and inc.previous is not None and num != inc.previous:
                detail = f"ball put back in {num}, not in {inc.previous}, the previous number"
                self.bad(f, "incident_procedure", detail)
            inc.back = True
        elif step == proto.INC_RELAUNCH:
            if not inc.back or self.fl.get("checked") == "0":
                detail = f"spin {n} relaunched before its ball was seen back in its pocket"
                self.bad(f, "incident_procedure", detail)
            inc.relaunched = True

    def open(self, f: Frame) -> None:
        if self.session is True:
            self.bad(f, "open_while_open", "a session is open already")
        if self.lid_pending is not None:
            self.bad(self.lid_pending, "lid_not_locked", "no lid lock before the next session")
        self.session = True
        self.last3 = self.left = None
        self.coups = 0
        self.lid_pending = None

    def close(self, f: Frame) -> None:
        # the coups the table counted (SCLOSE's spins), or those seen: a gap may hide some
        played = self.coups if self.coups is not None else 1
        if "spins" in self.fl:
            try:
                counted = f.int("spins", self.fl)
            except FrameError as e:
                self.bad(f, "bad_field", str(e))  # and the session closes all the same
                counted = played
            if self.coups is not None and counted != self.coups:
                detail = f"SCLOSE counts {counted} coup(s), the recording holds {self.coups}"
                self.bad(f, "coup_count", detail)
            played = max(self.coups or 0, counted)
        reason = self.fl.get("reason")
        if reason is not None:
            # the chef de table's forced close: on record with its reason, and reported
            self.r.forced_closes.append(
                {"boot": f.boot, "seq": f.seq, "coups": played, "reason": reason}
            )
        elif self.session is not False and self.last3 is None and played > 0:
            self.bad(f, "last_three_not_announced", f"session closed after {played} coup(s)")
        elif self.left is not None and self.left > 0 and played > 0:
            # (a session that played no coup closes freely, announced or not)
            detail = f"{self.left} coup(s) before the announced last coup {self.last3}"
            self.bad(f, "closed_before_last_coup", detail)
        self.coups = None
        self.session = False
        self.last3 = self.left = None
        self.lid_pending = f

    def last_three(self, f: Frame) -> None:
        last = f.int("last", self.fl)
        left = f.int("left", self.fl)
        miscounted = self.coups is not None and last - self.coups != left
        if miscounted:
            # the coups left are the recording's count, not the frame's word for it
            real = last - self.coups
            self.bad(f, "last_three_late", f"left={left}, yet {real} coup(s) left to {last}")
            left = real
        # The first announcement must come before the last three spins; the table may
        # repeat it as they go (left 2, 1, 0), which is no violation.
        if miscounted:
            pass
        elif self.last3 is None and left < 3:
            self.bad(f, "last_three_late", f"announced with {left} spin(s) left")
        elif self.last3 is not None and last != self.last3:
            self.bad(f, "last_three_late", f"last coup moved from {self.last3} to {last}")
        elif self.last3 is None:
            # Players must hear it while they can still bet on all three: a spin whose bets
            # have closed already is late for it, if it turns out to be a coup (a result).
            s = self.spin
            if s is not None and s.launched and s.outcome == 0 and s.rnvp:
                s.rnvp_late = True
                self.last3_frame = f
        self.last3, self.left = last, left

    def lid(self, f: Frame) -> None:
        locked = self.enum(f, "locked")
        if locked == "1":
            self.lid_pending = None
        elif locked == "0" and self.session is False and self.lid_state == "1":
            self.alert(f, "lid_opened", "lid unlocked while no session is open")
        self.lid_state = locked

    def status(self, f: Frame) -> None:
        if self.fl.get("lid") == "1":
            self.lid_pending = None
        inc = self.inc
        if inc is not None and not inc.relaunched and self.fl.get("state") == proto.S_BETS:
            self.bad(f, "incident_procedure", f"bets open during the incident of spin {inc.spin}")

    def fault(self, f: Frame) -> None:
        self.r.faults.append(
            {"boot": f.boot, "seq": f.seq, **{k: self.fl[k] for k in sorted(self.fl)}}
        )
        code = self.fl.get("code", "")
        if self.enum(f, "on") == "1":
            self.faults_on[code] = f
        else:
            self.faults_on.pop(code, None)

    def tamper(self, f: Frame) -> None:
        self.r.tamper.append(
            {"boot": f.boot, "seq": f.seq, **{k: self.fl[k] for k in sorted(self.fl)}}
        )
        self.alert(f, "tamper", ", ".join(f"{k}={self.fl[k]}" for k in sorted(self.fl)))


def command_log(trace: Any) -> list[dict[str, Any]]:
    """The host's commands a trace holds, each with the table's answer (its ACK, matched by
    boot and command seq; ok None when none came): who gave it when the recorder knew (the
    table service writes `by` and `role`), what, when."""
    out: list[dict[str, Any]] = []
    sent: dict[tuple[int, int], dict[str, Any]] = {}
    for r in trace.records:
        kind, line = r.get("kind"), r.get("line")
        if not isinstance(line, str) or kind not in ("command", "frame"):
            continue
        if kind == "frame" and f",{proto.T_ACK}," not in line:
            continue
        try:
            f = decode(line.encode("latin-1", "replace"))
            fl = f.fields
        except (FrameError, CrcError, AuthError):
            continue
        if kind == "command":
            c = {
                "boot": f.boot,
                "cseq": f.seq,
                "cmd": f.type,
                "fields": fl,
                "tx_ms": r.get("tx_ms"),
            }
            c.update({"by": r.get("by"), "role": r.get("role"), "ok": None, "detail": None})
            out.append(c)
            sent[(f.boot, f.seq)] = c
        else:
            cseq = fl.get(proto.K_CSEQ, "")
            c = sent.get((f.boot, int(cseq))) if cseq.isdigit() else None
            if c is not None and c["ok"] is None:
                c["ok"] = fl.get(proto.K_OK) == "1"
                c["detail"] = fl.get(proto.K_DETAIL, "")
    return out


def check_bytes(data: bytes, key: bytes | None = None) -> tuple[Report, str, Checker]:
    """Check a trace or a raw capture given as bytes; returns (report, "trace"|"capture",
    the checker), the report holding a trace's own errors in `trace_errors`.

    Raises TraceError when the input is unusable: empty, a trace without a valid header, or
    a capture in which no frame start appears at all.
    """
    from rmc.trace import TraceError, looks_like_trace, parse_trace, wheel_id

    if not data.strip():
        raise TraceError("empty input")
    if looks_like_trace(data[:65536]):
        trace = parse_trace(data)
        # the board must run the wheel definition the trace says it was given, and be the
        # table it names (a recorder that did not know it yet writes none)
        table = trace.header.get("table")
        table = table if isinstance(table, str) and table != "unknown" else None
        checker = Checker(key, table=table, wheel=wheel_id(trace.header.get("wheel")))
        checker.feed_many(line for line, _ in trace.frame_lines())
        report = checker.report()
        report.trace_errors = trace.errors
        report.commands = command_log(trace)
        return report, "trace", checker
    if b"$" not in data:
        raise TraceError("no frame found: neither a trace nor a capture of the table's line")
    checker = Checker(key)
    checker.feed_many(data.split(b"\n"))
    report = checker.report()
    if not report.frames:
        # "$" in its lines, yet not one frame: what was meant for frames came damaged
        report.crc_errors += sum(1 for ln in data.split(b"\n") if b"$" in ln)
        report.frames = report.crc_errors
    return report, "capture", checker
