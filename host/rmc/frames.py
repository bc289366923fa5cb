"""Host decoder for the wire's frames (docs/protocol.md).

The format is the firmware's (`rmcfw.frames`, which also encodes); this is a faster decoder
for CPython: one CRC over a slice, one `split`, no regular expression on the way of a
frame. Its grammar is the firmware's: the character classes, limits and escapes below are
built from `rmcfw.frames`, which defines them once, and a differential fuzz test holds both
decoders to the same lines. The exceptions are the firmware's own classes, so both halves
name a failure the same way. `rmc.checker` reads every line through `decode`.
"""

from __future__ import annotations

import hashlib
import hmac as _hmac
import re
import zlib
from typing import NamedTuple

from rmcfw import frames as fw
from rmcfw import proto
from rmcfw.frames import MAX_LINE, TAG_BYTES, AuthError, CrcError, FrameError, load_key, wheel_id

__all__ = [
    "MAX_LINE",
    "AuthError",
    "CrcError",
    "Frame",
    "FrameError",
    "Verifier",
    "decode",
    "frame_of",
    "load_key",
    "wheel_id",
]

_crc32 = zlib.crc32
_TAG_HEX = 2 * TAG_BYTES
_TAG_SPAN = 1 + _TAG_HEX  # "#" and the tag
_STARTS = frozenset((fw.FRAME_START, fw.COMMAND_START))
_HEXDIGITS = frozenset(fw.HEX)
_MAX_BODY = MAX_LINE - 9  # a frame is at most MAX_LINE bytes, "*" and its CRC included
_FRAME_HEAD = "$" + str(proto.VERSION)  # a frame's start, then the version
_COMMAND_HEAD = ">" + str(proto.VERSION)
_SHORT = fw.NUMBER_DIGITS - 1  # digits a number may have without a look at its size


class Frame(NamedTuple):
    """A frame whose CRC (and tag, when checked) is right.

    `line` is the frame's bytes from "$" to its CRC, without newline and without the resend
    mark; `resent` says whether it came marked "~" (an answer to RESEND). `raw` holds the
    fields as sent; `fields` parses them at each use (most frames of a stream are never
    looked into; a handler that needs several fields reads `fields` once). A bad field
    layout raises FrameError there. A tuple: built at C speed, immutable, compared by value.
    """

    table: str
    boot: int
    seq: int
    msraw: str  # the ms field as sent (see `ms`)
    type: str
    raw: str  # "k=v,k=v" (escaped)
    tagged: bool
    resent: bool
    line: bytes

    @property
    def fields(self) -> dict[str, str]:
        return parse_fields(self.raw)

    @property
    def ms(self) -> int:
        return int(self.msraw)

    @property
    def start(self) -> str:
        """ "$" for a frame, ">" for a command."""
        return chr(self.line[0])

    @property
    def key(self) -> tuple[int, int]:
        return (self.boot, self.seq)

    def int(self, name: str, fields: dict[str, str] | None = None) -> int:
        """An integer field in its one spelling (ASCII digits, no sign, no leading zero, at
        most 10 digits, as the header's numbers); FrameError when absent or not so."""
        text = (self.fields if fields is None else fields).get(name)
        if text is not None and len(text) <= 10:
            try:
                v = int(text)
            except ValueError:
                pass
            else:
                if str(v) == text:  # the one spelling: no sign, zero, space, "_", other digit
                    return v
        raise FrameError(f"{self.type}: field {name!r} is not a number: {text!r}")

    def __repr__(self) -> str:
        return f"Frame({self.start}{self.table} {self.boot}:{self.seq} {self.type} {self.raw!r})"


_new_frame = tuple.__new__  # Frame's fields in order, without the Python-level __new__


def parse_fields(raw: str) -> dict[str, str]:
    """ "k=v,k=v" -> dict, values unescaped; FrameError for a bad layout."""
    if not raw:
        return {}
    parts = raw.split(",")
    try:
        # dict() refuses any part that does not split in exactly two: one "=" per field.
        fields = dict([p.split("=") for p in parts])
    except ValueError:
        raise FrameError("bad field") from None
    if len(fields) != len(parts):
        raise FrameError("bad field")  # a name twice
    # Most fields: names seen before, values without escapes, nothing else to look at.
    if "%" in raw or not raw.isascii() or not _GOOD_NAMES.issuperset(fields):
        for k, v in fields.items():
            if k not in _GOOD_NAMES and not _good(_NAME, k, _GOOD_NAMES):
                raise FrameError("bad field name")
            if v and ("%" in v or not v.isascii()) and _VALUE.fullmatch(v) is None:
                raise FrameError("bad field value")
        if "%" in raw:
            fields = {k: fw.unescape(v.encode()) if "%" in v else v for k, v in fields.items()}
    return fields


class Verifier:
    """HMAC-SHA256 tag check with one per-table key (the ipad/opad states are kept)."""

    def __init__(self, key: bytes) -> None:
        self._base = _hmac.new(key, digestmod=hashlib.sha256)

    def tag(self, body: bytes) -> bytes:
        h = self._base.copy()
        h.update(body)
        return h.hexdigest()[:_TAG_HEX].encode()

    def check(self, body: bytes, tag: bytes) -> bool:
        return _hmac.compare_digest(self.tag(body), tag)


def _class(ok) -> str:
    """A regular expression's character class of the ASCII bytes b for which ok(b)."""
    return "[" + "".join(re.escape(chr(b)) for b in range(0x80) if ok(b)) + "]"


# The firmware's grammar as regular expressions, checked once per new name (memoized below):
# names (types, field keys) are the bytes a value does not escape; a value may hold escapes.
_SAFE = _class(lambda b: not fw.unsafe(b))
_NAME = re.compile(f"{_SAFE}+")
_TABLE = re.compile(f"{_class(lambda b: fw.is_table(bytes((b,))))}{{1,{fw.TABLE_MAX}}}")
_VALUE = re.compile(f"(?:{_SAFE}|%{_class(fw.HEX.__contains__)}{{2}})*")
_GOOD_TABLES: set[str] = set()  # names already checked: most frames reuse a few
_last_table = [""]  # the table of the last frame decoded, a good one
_GOOD_NAMES: set[str] = set()


def _good(pattern: re.Pattern[str], text: str, memo: set[str]) -> bool:
    if pattern.fullmatch(text) is None:
        return False
    if len(memo) < 4096:
        memo.add(text)
    return True


def _numbers_ok(*numbers: str) -> bool:
    """Numbers of ASCII digits in their one spelling: no leading zero, at most
    NUMBER_DIGITS digits, below 2^32 (the slow path, for a "0..." or a long one)."""
    return all(
        (n == "0" or n[0] != "0") and len(n) <= fw.NUMBER_DIGITS and int(n) <= fw.U32
        for n in numbers
    )


def decode(line: bytes, verifier: Verifier | None = None) -> Frame:
    """Decode one frame line (bytes; newline, "\\r" and the "~" resend mark allowed).

    Raises CrcError (damaged, truncated, not a frame), AuthError (a verifier is given and
    the tag is missing or wrong), FrameError (right CRC, bad layout).
    """
    if not line:
        raise CrcError("empty line")
    resent = line[0] == 0x7E
    if resent:
        line = line[1:]
        if not line:
            raise CrcError("empty line")
    if line[-1] == 0x0A or line[-1] == 0x0D:
        line = line.rstrip(b"\r\n")
    return frame_of(line, verifier, resent)


def is_tagged(line: bytes) -> bool:
    """A decoded frame's line (`Frame.line`) carries a tag: what its `tagged` says."""
    at = len(line) - 9 - _TAG_SPAN
    return at > 0 and line[at] == 0x23


def _tag_checked(line: bytes, star: int, verifier: Verifier | None) -> tuple[bytes, bool]:
    """(body, tagged) of a line with a "#" before its CRC, or of any line when a key checks
    it (an untagged one then fails): its tag well-formed and, with a key, right."""
    tag_at = star - _TAG_SPAN
    tagged = tag_at > 0 and line[tag_at] == 0x23
    body = line[:tag_at] if tagged else line[:star]
    tag = line[tag_at + 1 : star]
    if (tagged and not _HEXDIGITS.issuperset(tag)) or b"#" in body:
        raise FrameError("bad tag")
    if verifier is not None and not (tagged and verifier.check(body, tag)):
        raise AuthError("bad tag" if tagged else "no tag")
    return body, tagged


def frame_of(line: bytes, verifier: Verifier | None = None, resent: bool = False) -> Frame:
    """decode() of a line without its newline and resend mark (resent: it had one), for a
    reader whose lines are so: `rmc.checker` reads a capture's frames through it."""
    star = len(line) - 9
    if star < 1 or line[star] != 0x2A or line[0] not in _STARTS:
        raise CrcError("not a frame")
    body = line[:star]
    if b"%08x" % _crc32(body) != line[star + 1 :]:
        raise CrcError("CRC mismatch")
    if star > _MAX_BODY:
        raise FrameError("frame too long")
    if verifier is None and b"#" not in body:
        tagged = False  # (a tag starts with "#")
    else:
        body, tagged = _tag_checked(line, star, verifier)
    if not body.isascii():
        raise FrameError("non-ASCII byte")
    parts = body.decode().split(",", 6)
    raw = None  # no fields
    if len(parts) == 7:
        head, table, boot, seq, ms, ftype, raw = parts
    elif len(parts) == 6:
        head, table, boot, seq, ms, ftype = parts
    else:
        raise FrameError("short header")
    if head != _FRAME_HEAD and head != _COMMAND_HEAD:  # (its start checked above)
        raise FrameError(f"unsupported version {head[1:]!r}")
    if table != _last_table[0]:  # (most lines are one table's: no hash, no lookup)
        if table not in _GOOD_TABLES and not _good(_TABLE, table, _GOOD_TABLES):
            raise FrameError("bad table")
        _last_table[0] = table
    if ftype not in _GOOD_NAMES and not _good(_NAME, ftype, _GOOD_NAMES):
        raise FrameError("bad type")
    if not (boot.isdigit() and seq.isdigit() and ms.isdigit()) or (
        (
            boot[0] == "0"
            or seq[0] == "0"
            or ms[0] == "0"
            or len(boot) > _SHORT
            or len(seq) > _SHORT
            or len(ms) > _SHORT
        )
        and not _numbers_ok(boot, seq, ms)  # a "0..." or a long one: its spelling, its size
    ):
        raise FrameError("bad number")
    if raw is None:
        raw = ""
    elif not (
        # cheap checks of the fields text: not empty, one "=" per field, nothing unprintable,
        # no space, no frame start or CRC mark (names and escapes: when read, parse_fields)
        raw
        and raw.count("=") == raw.count(",") + 1
        and raw.isprintable()
        and " " not in raw
        and "$" not in raw
        and ">" not in raw
        and "*" not in raw
    ):
        raise FrameError("bad field")
    return _new_frame(Frame, (table, int(boot), int(seq), ms, ftype, raw, tagged, resent, line))
