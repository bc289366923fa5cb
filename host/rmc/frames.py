"""Host decoder for the wire's frames (docs/protocol.md).

The format is the firmware's (`rmcfw.frames`, which also encodes); this is a faster decoder
for CPython: one CRC over a slice, one `split`, no regular expression. The exceptions are the
firmware's own classes, so both halves name a failure the same way.
"""

from __future__ import annotations

import hashlib
import hmac as _hmac
import re
import zlib
from typing import NamedTuple

from rmcfw.frames import MAX_LINE, TAG_BYTES, AuthError, CrcError, FrameError, load_key, wheel_id

__all__ = [
    "MAX_LINE",
    "AuthError",
    "CrcError",
    "Frame",
    "FrameError",
    "Verifier",
    "decode",
    "load_key",
    "wheel_id",
]

_crc32 = zlib.crc32
_TAG_HEX = 2 * TAG_BYTES
_HEXDIGITS = frozenset(b"0123456789abcdef")
_U32 = 0xFFFFFFFF  # boot, seq and ms are below 2^32 (ms counts modulo 2^32)
_MAX_BODY = MAX_LINE - 9  # a frame is at most MAX_LINE bytes, "*" and its CRC included
# Bytes a value must escape, and so the only ones an escape may stand for (one spelling).
_MUST_ESCAPE = frozenset([*range(0x21), *range(0x7F, 0x100), *b"$>,=#*%"])


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
    for k, v in fields.items():
        if k not in _GOOD_NAMES and not _good(_NAME, k, _GOOD_NAMES):
            raise FrameError("bad field name")
        if v and ("%" in v or not v.isascii()) and _VALUE.fullmatch(v) is None:
            raise FrameError("bad field value")
    if "%" in raw:
        fields = {k: _unescape(v) if "%" in v else v for k, v in fields.items()}
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


def _unescape(text: str) -> str:
    raw = text.encode("ascii")
    out = bytearray()
    i = 0
    n = len(raw)
    while i < n:
        c = raw[i]
        if c == 0x25:
            h = raw[i + 1 : i + 3]
            if len(h) != 2 or not set(h) <= _HEXDIGITS:
                raise FrameError("bad escape")
            v = int(h, 16)
            if v not in _MUST_ESCAPE:
                raise FrameError("needless escape")  # one spelling per frame
            out.append(v)
            i += 3
        else:
            out.append(c)
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("bad escape") from None


# Names (types, field keys): printable ASCII but the separators; tables: [A-Za-z0-9_-]{1,16}.
_NAME = re.compile(r"[!\x22&'()+\-./0-9:;<?@A-Z\[\\\]^_`a-z{|}~]+")
_TABLE = re.compile(r"[A-Za-z0-9_-]{1,16}")
_VALUE = re.compile(r"(?:[!\x22&'()+\-./0-9:;<?@A-Z\[\\\]^_`a-z{|}~]|%[0-9a-f]{2})*")
_GOOD_TABLES: set[str] = set()  # names already checked: most frames reuse a few
_GOOD_NAMES: set[str] = set()


def _good(pattern: re.Pattern[str], text: str, memo: set[str]) -> bool:
    if pattern.fullmatch(text) is None:
        return False
    if len(memo) < 4096:
        memo.add(text)
    return True


def raw_ok(raw: str) -> bool:
    """Cheap checks of a frame's fields text, done for every frame: not empty, one "=" per
    field, nothing unprintable, no space, no frame start or CRC mark. Names and escapes are
    checked when the fields are read (`parse_fields`)."""
    return (
        bool(raw)
        and raw.count("=") == raw.count(",") + 1
        and raw.isprintable()
        and " " not in raw
        and "$" not in raw
        and ">" not in raw
        and "*" not in raw
    )


def _canonical(*numbers: str) -> bool:
    # One spelling per number: no leading zero (the slow path, taken only for a "0...").
    return all(n == "0" or n[0] != "0" for n in numbers)


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
    last = line[-1]
    if last == 0x0A or last == 0x0D:
        line = line.rstrip(b"\r\n")
    star = len(line) - 9
    if star < 1 or line[star] != 0x2A:
        raise CrcError("not a frame")
    first = line[0]
    if first != 0x24 and first != 0x3E:
        raise CrcError("not a frame")
    body = line[:star]
    if b"%08x" % _crc32(body) != line[star + 1 :]:
        raise CrcError("CRC mismatch")
    if star > _MAX_BODY:
        raise FrameError("frame too long")
    tag_at = star - _TAG_HEX - 1
    tagged = tag_at > 0 and line[tag_at] == 0x23
    if tagged:
        tag = line[tag_at + 1 : star]
        if not _HEXDIGITS.issuperset(tag):
            raise FrameError("bad tag")
        body = line[:tag_at]
    if b"#" in body:
        raise FrameError("bad tag")
    if verifier is not None:
        if not tagged:
            raise AuthError("no tag")
        if not verifier.check(body, tag):
            raise AuthError("bad tag")
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        raise FrameError("non-ASCII byte") from None
    parts = text.split(",", 6)
    if len(parts) < 6:
        raise FrameError("short header")
    if parts[0][1:] != "1":
        raise FrameError(f"unsupported version {parts[0][1:]!r}")
    table = parts[1]
    boot = parts[2]
    seq = parts[3]
    ms = parts[4]
    ftype = parts[5]
    if table not in _GOOD_TABLES and not _good(_TABLE, table, _GOOD_TABLES):
        raise FrameError("bad table")
    if ftype not in _GOOD_NAMES and not _good(_NAME, ftype, _GOOD_NAMES):
        raise FrameError("bad type")
    # Strict numbers: ASCII digits (the text is ASCII), no sign, no leading zero, <= 10 digits.
    if not (boot.isdigit() and seq.isdigit() and ms.isdigit()):
        raise FrameError("bad number")
    if (boot[0] == "0" or seq[0] == "0" or ms[0] == "0") and not _canonical(boot, seq, ms):
        raise FrameError("bad number")
    if len(boot) > 9 or len(seq) > 9 or len(ms) > 9:  # (up to 2^32 - 1: ten digits at most)
        if max(len(boot), len(seq), len(ms)) > 10 or max(int(boot), int(seq), int(ms)) > _U32:
            raise FrameError("bad number")
    if len(parts) == 7:
        raw = parts[6]
        if not raw_ok(raw):
            raise FrameError("bad field")  # the rest (names, escapes) is checked when read
    else:
        raw = ""
    return _new_frame(Frame, (table, int(boot), int(seq), ms, ftype, raw, tagged, resent, line))
