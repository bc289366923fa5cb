"""Host decoder for the wire's frames (docs/protocol.md).

The format is the firmware's (`rmcfw.frames`, which also encodes); this is a faster decoder
for CPython: one CRC over a slice, one `split`, no regular expression. The exceptions are the
firmware's own classes, so both halves name a failure the same way.
"""

from __future__ import annotations

import hashlib
import hmac as _hmac
import zlib
from dataclasses import dataclass, field

from rmcfw.frames import TAG_BYTES, AuthError, CrcError, FrameError, load_key, wheel_hash

__all__ = [
    "AuthError",
    "CrcError",
    "Frame",
    "FrameError",
    "Verifier",
    "decode",
    "load_key",
    "wheel_hash",
]

_crc32 = zlib.crc32
_TAG_HEX = 2 * TAG_BYTES
_HEXDIGITS = frozenset(b"0123456789abcdef")


@dataclass(slots=True)
class Frame:
    """A frame whose CRC (and tag, when checked) is right.

    `line` is the frame's bytes from "$" to its CRC, without newline and without the resend
    mark; `resent` says whether it came marked "~" (an answer to RESEND).
    """

    table: str
    boot: int
    seq: int
    ms: int
    type: str
    fields: dict[str, str]
    tagged: bool
    resent: bool
    line: bytes
    start: str = "$"
    verified: bool = field(default=False)

    @property
    def key(self) -> tuple[int, int]:
        return (self.boot, self.seq)

    def int(self, name: str) -> int:
        """An integer field; FrameError when absent or not a number."""
        text = self.fields.get(name)
        try:
            return int(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise FrameError(f"{self.type}: field {name!r} is not a number: {text!r}") from None


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


def _uint(text: str) -> int:
    # Strict: ASCII digits, no sign, no leading zero; one spelling per number.
    if not text.isdigit() or (text[0] == "0" and len(text) > 1) or len(text) > 10:
        raise FrameError(f"bad number {text!r}")
    return int(text)


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
            out.append(int(h, 16))
            i += 3
        else:
            out.append(c)
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("bad escape") from None


def decode(line: bytes, verifier: Verifier | None = None) -> Frame:
    """Decode one frame line (bytes; newline, "\\r" and the "~" resend mark allowed).

    Raises CrcError (damaged, truncated, not a frame), AuthError (a verifier is given and
    the tag is missing or wrong), FrameError (right CRC, bad layout).
    """
    resent = False
    if line[:1] == b"~":
        resent = True
        line = line[1:]
    if line[-1:] in (b"\n", b"\r"):
        line = line.rstrip(b"\r\n")
    star = len(line) - 9
    if star < 1 or line[star] != 0x2A or line[0] not in (0x24, 0x3E):
        raise CrcError("not a frame")
    body = line[:star]
    if b"%08x" % _crc32(body) != line[star + 1 :]:
        raise CrcError("CRC mismatch")
    tag_at = star - _TAG_HEX - 1
    tagged = tag_at > 0 and line[tag_at] == 0x23
    if tagged:
        tag = line[tag_at + 1 : star]
        if not set(tag) <= _HEXDIGITS:
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
    parts = text.split(",")
    if len(parts) < 6:
        raise FrameError("short header")
    if parts[0][1:] != "1":
        raise FrameError(f"unsupported version {parts[0][1:]!r}")
    table = parts[1]
    ftype = parts[5]
    if not table or not ftype:
        raise FrameError("empty table or type")
    fields: dict[str, str] = {}
    if len(parts) > 6:
        try:
            fields = dict(p.split("=", 1) for p in parts[6:])  # type: ignore[misc]
        except ValueError:
            raise FrameError("bad field") from None
        if len(fields) != len(parts) - 6 or "" in fields:
            raise FrameError("bad field")
        if "%" in text:
            fields = {k: _unescape(v) if "%" in v else v for k, v in fields.items()}
    return Frame(
        table,
        _uint(parts[2]),
        _uint(parts[3]),
        _uint(parts[4]),
        ftype,
        fields,
        tagged,
        resent,
        line,
        chr(line[0]),
        verifier is not None,
    )
