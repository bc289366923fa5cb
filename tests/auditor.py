"""An auditor's own encoder of the wire, written from docs/protocol.md alone (issue 19).

It imports neither rmcfw nor rmc: a second reading of the spec, so that `rmc check` is
judged against the text rather than against the code it was written with. Where the spec
was not enough, the choice made was listed, and the spec now says it (its section is
named where it matters).

Two layers:
- `frame_line` writes one line: the grammar, the escapes, the tag and the CRC.
- `Board` writes a boot's frames with their numbering, and `play` turns a list of table
  events (`Open`, `Spin`, `Last3`, `Close`, …) into a whole recording, with the chances of
  each result computed here from the decree.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import zlib
from dataclasses import dataclass, field

# --- Pockets and their chances (decree 1-2 and 1-5) ---

# "Field values": the red numbers; the three green pockets are spelled as here.
RED = frozenset({1, 3, 5, 7, 9, 12, 14, 16, 18, 19, 21, 23, 25, 27, 30, 32, 34, 36})
GREEN = ("0", "00", "CMC")
POCKETS = tuple(str(n) for n in range(1, 37)) + GREEN


def chances(num: str) -> tuple[str, str, str]:
    """(colour, parity, half) of a pocket, as RES spells them."""
    if num in GREEN:
        return "vert", "-", "-"
    n = int(num)
    return (
        "rouge" if n in RED else "noir",
        "pair" if n % 2 == 0 else "impair",
        "manque" if n <= 18 else "passe",
    )


def wheel_id(pockets: list[str] | tuple[str, ...]) -> str:
    """16 hex digits of the SHA-256 of the pocket labels in channel order, comma-joined."""
    # "Field values", `wheel`: channel order is the order of wheel.json's pockets
    return hashlib.sha256(",".join(pockets).encode("ascii")).hexdigest()[:16]


# --- One line ---

# "Lines": `safe` is 0x21-0x7e but the separators; every other byte is escaped.
UNSAFE = set(b" ,=#*%$>")
SAFE = frozenset(c for c in range(0x21, 0x7F) if c not in UNSAFE)


def escape(value: str | bytes | int) -> str:
    """A field value in its one spelling: safe bytes as they are, others as %xx lowercase."""
    if isinstance(value, int):
        if value < 0:
            raise ValueError("numbers have no sign")
        return str(value)
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return "".join(chr(b) if b in SAFE else f"%{b:02x}" for b in raw)


def tag(key: bytes, start: str, body: str) -> str:
    """First 8 bytes of HMAC-SHA256(key, start + body), lowercase hex."""
    return hmac.new(key, (start + body).encode("ascii"), hashlib.sha256).hexdigest()[:16]


def crc(text: str) -> str:
    return f"{zlib.crc32(text.encode('latin-1')) & 0xFFFFFFFF:08x}"


def header(table: str, boot: int | str, seq: int | str, ms: int | str, ftype: str) -> str:
    return f"1,{table},{boot},{seq},{ms},{ftype}"


def raw_body(head: str, fields: list[tuple[str, str]]) -> str:
    """A body from fields already spelled (no escaping here: for forged spellings)."""
    return head + "".join(f",{k}={v}" for k, v in fields)


def seal(body: str, key: bytes | None = None, start: str = "$", resent: bool = False) -> bytes:
    """start + body [# tag] * crc, newline: the CRC covers the tag, `~` stays outside."""
    text = start + body
    if key is not None:
        text += "#" + tag(key, start, body)
    line = f"{text}*{crc(text)}\n"
    return (("~" if resent else "") + line).encode("latin-1")


def frame_line(
    table: str,
    boot: int,
    seq: int,
    ms: int,
    ftype: str,
    fields: list[tuple[str, str | bytes | int]] = (),  # type: ignore[assignment]
    key: bytes | None = None,
    start: str = "$",
    resent: bool = False,
) -> bytes:
    """One frame line in its canonical spelling; ValueError over 250 bytes."""
    body = raw_body(
        header(table, boot, seq, ms % 2**32, ftype), [(k, escape(v)) for k, v in fields]
    )
    line = seal(body, key, start, resent)
    if len(line.rstrip(b"\n").lstrip(b"~")) > 250:
        raise ValueError("a frame is at most 250 bytes without the newline")
    return line


def fields_of(line: bytes) -> tuple[str, list[str], list[tuple[str, str]]]:
    """Split one of our own lines (as written, `~` and tag dropped) for mutations:
    (start, the six header items, the fields as spelled)."""
    text = line.decode("latin-1").rstrip("\n").lstrip("~")
    start, rest = text[0], text[1:]
    rest = rest.rsplit("*", 1)[0].split("#", 1)[0]
    parts = rest.split(",")
    return start, parts[:6], [tuple(p.split("=", 1)) for p in parts[6:]]  # type: ignore[misc]


# --- A boot's frames ---


@dataclass
class Board:
    """Writes the frames of one boot, numbered from 1 (the BOOT frame)."""

    table: str = "T01"
    boot: int = 1
    key: bytes | None = None
    seq: int = 0
    ms: int = 1000
    lines: list[bytes] = field(default_factory=list)

    def emit(self, ftype: str, *fields: tuple[str, str | bytes | int]) -> bytes:
        self.seq += 1
        self.ms += 37  # any clock will do: the spec gives no rule on ms
        line = frame_line(self.table, self.boot, self.seq, self.ms, ftype, list(fields), self.key)
        self.lines.append(line)
        return line

    def boot_frame(
        self, prev: str = "-", wheel: str | None = None, faults: str = "", reset: str = "power"
    ) -> bytes:
        return self.emit(
            "BOOT",
            ("fw", "1.0.0"),
            ("wheel", wheel or wheel_id(DEFAULT_POCKETS)),
            ("reset", reset),
            ("faults", faults),
            ("prev", prev),
        )

    def ack(self, cmd: str = "STATUS", cseq: int = 1) -> bytes:
        """An ACK: seq 0, unsequenced, `top` the last seq used."""
        self.ms += 1
        line = frame_line(
            self.table,
            self.boot,
            0,
            self.ms,
            "ACK",
            [("cmd", cmd), ("cseq", cseq), ("ok", 1), ("detail", ""), ("top", self.seq)],
            self.key,
        )
        self.lines.append(line)
        return line


# The wheel a trace header records (hardware/wheel.json's format is in docs/traces.md):
# The spec gives no pocket order (the wheel definition does): any order makes a wheel.
DEFAULT_POCKETS = list(POCKETS)


# --- Table events and whole recordings ---


@dataclass
class Open:
    chef: str = "C7"
    session: int = 1


@dataclass
class Close:
    chef: str = "C7"
    lock: bool = True  # the lid locked after the close (decree 1-2)


@dataclass
class Last3:
    last: int  # the session's coup count at its last coup
    left: int = 3


@dataclass
class Spin:
    """One spin: a launch, revolutions, « rien ne va plus », the drop, the result."""

    num: str
    revs: int = 8
    rdir: str | None = None  # None: the other way from the spin before (decree 1-4)
    bdir: str | None = None  # None: against the rotor
    same_rotor: bool = False  # the rotor the same way as the spin before (out of rule)
    with_rotor: bool = False  # the ball launched the rotor's way (out of rule)
    rnvp: bool = True
    rnvp_after_drop: bool = False
    incident: bool = False  # an object in the cylinder: start, ball_back, relaunch
    incident_steps: tuple[str, ...] = ("start", "ball_back", "relaunch")
    void: str | None = None  # a void reason instead of a result (at the drop)
    result: bool = True  # False: the spin is left without an outcome
    spin: int | None = None  # None: the next spin number
    launch: bool = True  # False: no LAUNCH nor REV frames (a result out of nowhere)
    chances: tuple[str, str, str] | None = None  # None: the pocket's own
    after_rnvp: tuple = ()  # events played right after the RNVP frame (LAST3 too late)


@dataclass
class Fault:
    code: str = "F_ROTOR"  # "Field values", `code` (FAULT)
    on: bool = True


@dataclass
class Tamper:
    n: int = 1


@dataclass
class Lid:
    locked: bool


@dataclass
class Config:
    """A threshold set by the host's SET command: CFG key, old, new, by."""

    # "Field values", `key` (CFG): the thresholds and their ranges
    key: str = "min_revs"
    old: int = 4
    new: int = 5
    by: str = "C7"


@dataclass
class Raw:
    """Any frame, fields as given (escaped as the grammar says)."""

    ftype: str
    fields: tuple = ()


@dataclass
class Reboot:
    """A new boot: BOOT with prev = the last frame of this one."""


@dataclass
class Recording:
    lines: list[bytes]
    results: list[tuple[int, str]]  # (spin, num) in order
    boards: list[Board]


def other(direction: str) -> str:
    return "ccw" if direction == "cw" else "cw"


def play(
    events: list,
    table: str = "T01",
    key: bytes | None = None,
    first_boot: int = 1,
    prev: str = "-",
    wheel: str | None = None,
) -> Recording:
    """The frames a table writes for these events, from a boot (a first boot: prev=-)."""
    player = _Player(table, key, wheel)
    player.start(first_boot, prev)
    for ev in events:
        player.do(ev)
    lines = [ln for b in player.boards for ln in b.lines]
    return Recording(lines, player.results, player.boards)


class _Player:
    def __init__(self, table: str, key: bytes | None, wheel: str | None) -> None:
        self.table, self.key, self.wheel = table, key, wheel
        self.boards: list[Board] = []
        self.results: list[tuple[int, str]] = []
        self.spin = 0
        self.rdir = "ccw"
        self.session = 0
        self.coups = 0
        self.faults: list[str] = []  # codes raised and not cleared

    @property
    def board(self) -> Board:
        return self.boards[-1]

    def start(self, boot: int, prev: str, ms: int = 1000) -> None:
        self.boards.append(Board(self.table, boot, self.key, ms=ms))
        self.board.boot_frame(prev=prev, wheel=self.wheel, faults=",".join(self.faults))
        for code in self.faults:  # "still-active ones again after power-up"
            self.board.emit("FAULT", ("code", code), ("on", 1), ("detail", "at power-up"))
        # a closed table with its lid locked: the state a session is opened from
        self.board.emit("LID", ("locked", 1))

    def do(self, ev) -> None:
        board = self.board
        if isinstance(ev, Reboot):
            self.start(board.boot + 1, f"{board.boot}:{board.seq}", ms=board.ms + 5000)
        elif isinstance(ev, Open):
            self.session = ev.session
            self.coups = 0
            board.emit("SOPEN", ("chef", ev.chef), ("session", ev.session))
            # "Sessions, the lid and incidents": SOPEN before the lid is unlocked
            board.emit("LID", ("locked", 0))
        elif isinstance(ev, Close):
            board.emit(
                "SCLOSE", ("chef", ev.chef), ("session", self.session), ("spins", self.coups)
            )
            if ev.lock:
                board.emit("LID", ("locked", 1))
        elif isinstance(ev, Last3):
            board.emit("LAST3", ("last", ev.last), ("left", ev.left))
        elif isinstance(ev, Lid):
            board.emit("LID", ("locked", int(ev.locked)))
        elif isinstance(ev, Fault):
            board.emit("FAULT", ("code", ev.code), ("on", int(ev.on)), ("detail", "test"))
            if ev.on and ev.code not in self.faults:
                self.faults.append(ev.code)
            elif not ev.on and ev.code in self.faults:
                self.faults.remove(ev.code)
        elif isinstance(ev, Tamper):
            board.emit("TAMP", ("what", "cmd_auth"), ("n", ev.n))
        elif isinstance(ev, Config):
            board.emit("CFG", ("key", ev.key), ("old", ev.old), ("new", ev.new), ("by", ev.by))
        elif isinstance(ev, Raw):
            board.emit(ev.ftype, *ev.fields)
        elif isinstance(ev, Spin):
            self.play_spin(ev)
        else:
            raise TypeError(ev)

    def play_spin(self, ev: Spin) -> None:
        board = self.board
        spin = ev.spin if ev.spin is not None else self.spin + 1
        self.spin = max(self.spin, spin)
        rdir = ev.rdir or (self.rdir if ev.same_rotor else other(self.rdir))
        bdir = ev.bdir or (rdir if ev.with_rotor else other(rdir))
        if ev.launch:
            self.rdir = rdir
            board.emit("LAUNCH", ("spin", spin), ("rdir", rdir), ("bdir", bdir))
            if ev.incident:
                # "Sessions, the lid and incidents": « rien ne va plus », the spin voided,
                # the ball put back in the previous coup's pocket, the next spin launched
                board.emit("REV", ("spin", spin), ("n", 1), ("period_us", 700000))
                board.emit(
                    "RNVP", ("spin", spin), ("drop_ms", 1), ("lead_ms", 1), ("why", "incident")
                )
                board.emit("VOID", ("spin", spin), ("reason", "object"))
                for step in ev.incident_steps:
                    back = step == "ball_back" and self.results
                    num = (("num", self.results[-1][1]),) if back else ()
                    board.emit("INC", ("spin", spin), ("step", step), *num)
                if "relaunch" in ev.incident_steps:
                    spin += 1
                    self.spin = spin
                    rdir = other(rdir)  # the rotor the other way again, the ball against it
                    bdir = other(rdir)
                    self.rdir = rdir
                    board.emit("LAUNCH", ("spin", spin), ("rdir", rdir), ("bdir", bdir))
            for n in range(1, ev.revs + 1):
                board.emit("REV", ("spin", spin), ("n", n), ("period_us", 700000 + 40000 * n))
        rnvp = (
            "RNVP",
            ("spin", spin),
            ("drop_ms", board.ms + 2000),
            ("lead_ms", 1500),
            ("why", "fit"),
        )
        if ev.rnvp and not ev.rnvp_after_drop:
            board.emit(*rnvp)
            for sub in ev.after_rnvp:
                self.do(sub)
        if ev.void is not None:
            board.emit("DROP", ("spin", spin), ("revs", ev.revs), ("void", ev.void))
            board.emit("VOID", ("spin", spin), ("reason", ev.void))
            return
        board.emit("DROP", ("spin", spin), ("revs", ev.revs))
        if ev.rnvp and ev.rnvp_after_drop:
            board.emit(*rnvp)
        if not ev.result:
            return
        colour, parity, half = ev.chances or chances(ev.num)
        board.emit(
            "RES",
            ("spin", spin),
            ("num", ev.num),
            ("colour", colour),
            ("parity", parity),
            ("half", half),
        )
        self.results.append((spin, ev.num))
        self.coups += 1


def session(coups: int, first_num: int = 0) -> list:
    """Events of one clean session of `coups` coups (at least 3), last three announced."""
    events: list = [Open()]
    for i in range(coups):
        if i == coups - 3:
            events.append(Last3(last=coups, left=3))
        events.append(Spin(POCKETS[(first_num + 7 * i) % len(POCKETS)]))
    events.append(Close())
    return events


# --- Traces (docs/traces.md: the spec of the wire says nothing of them) ---


def trace_bytes(lines: list[bytes], table: str = "T01", pockets: list[str] | None = None) -> bytes:
    """A trace: header, one frame record per line, and the writer's end record."""
    recs = [
        {
            "kind": "header",
            "format": "rmc-trace/1",
            "table": table,
            "wheel": {"format": "rmc-wheel/1", "pockets": pockets or DEFAULT_POCKETS},
            "firmware": "1.0.0",
            "source": "record",
        }
    ]
    for i, ln in enumerate(lines):
        recs.append(
            {"kind": "frame", "rx_ms": 1000.0 + i, "line": ln.rstrip(b"\n").decode("latin-1")}
        )
    text = [json.dumps(r) + "\n" for r in recs]
    digest = hashlib.sha256("".join(text).encode("ascii")).hexdigest()
    text.append(json.dumps({"kind": "end", "lines": len(text), "sha256": digest}) + "\n")
    return "".join(text).encode("ascii")
