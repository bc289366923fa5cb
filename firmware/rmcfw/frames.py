# The wire format (docs/protocol.md): one ASCII line per frame.
#
#   $1,T01,3,42,123456,RES,spin=12,num=17,colour=noir,parity=impair,half=manque#<tag>*<crc>
#
# "$" starts a frame (firmware -> host), ">" a command (host -> firmware). After the header
# (version, table, boot, seq, ms, type) come key=value fields. With a key, "#" and 16 hex
# digits of HMAC-SHA256 over everything before "#" follow. "*" and 8 lowercase hex digits of
# CRC-32 over everything before "*" end the line. Runs unchanged under MicroPython and CPython.
#
# The grammar is defined here once (docs/protocol.md, "Lines"): the bytes a value escapes
# (SEPARATORS and unsafe()), a table id (is_table, TABLE_MAX), a name or a value (is_token),
# an escape (unescape), a number (number, NUMBER_DIGITS, U32), a list of pockets in one value
# (pocket_list, pocket_labels: HOP's lit). The host's faster decoder,
# rmc.frames, builds its checks from these, and a differential fuzz test holds both decoders
# to the same lines.
import binascii
import hashlib

from micropython import const

from rmcfw import proto

FRAME_START = const(0x24)  # "$"
COMMAND_START = const(0x3E)  # ">"
MAX_LINE = const(250)  # bytes, without the newline: bounded buffers on both sides
TAG_BYTES = const(8)  # HMAC-SHA256 truncated to 64 bits (16 hex digits)
_BLOCK = const(64)  # SHA-256 block size, for HMAC
HEX = b"0123456789abcdef"  # the one spelling of a tag, a CRC and an escape: lowercase
SEPARATORS = b"$>,=#*%"  # frame starts, field and tag and CRC marks, the escape
TABLE_MAX = const(16)  # a table id's characters at most
NUMBER_DIGITS = const(10)  # a number's digits at most (below 2^32)
_COMMA = const(0x2C)
_EQUAL = const(0x3D)
_HASH = const(0x23)
_STAR = const(0x2A)
_PERCENT = const(0x25)
_NL = const(0x0A)
_NAMES_KEPT = const(64)  # names an encoder keeps checked (the protocol has fewer)


class FrameError(ValueError):
    """A line that is not a well-formed frame (its CRC may be right)."""


class CrcError(FrameError):
    """Damaged or truncated line: the CRC-32 does not match, or there is none."""


class AuthError(FrameError):
    """CRC right but the HMAC tag is missing or wrong: forged, or sent with another key."""


def unsafe(b):
    """Whether byte b is escaped as %xx inside a value (and so never part of a name): space,
    controls, non-ASCII and the SEPARATORS."""
    return b <= 0x20 or b >= 0x7F or b in SEPARATORS


class Hmac:
    """HMAC-SHA256 (RFC 2104) over hashlib.sha256: MicroPython on a Pico has no `hmac`."""

    def __init__(self, key):
        if isinstance(key, str):
            key = key.encode()
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = bytes(key) + bytes(_BLOCK - len(key))
        # The padded keys are computed once; hashlib.sha256 has no copy() on MicroPython, so
        # each tag costs two fresh hashes of ipad/opad plus the message.
        self._ipad = bytes(b ^ 0x36 for b in key)
        self._opad = bytes(b ^ 0x5C for b in key)

    def digest(self, msg):
        inner = hashlib.sha256(self._ipad)
        inner.update(msg)
        outer = hashlib.sha256(self._opad)
        outer.update(inner.digest())
        return outer.digest()

    def tag(self, msg):
        """The truncated tag as 16 lowercase hex digits (bytes)."""
        return binascii.hexlify(self.digest(msg)[:TAG_BYTES])


def crc_hex(data):
    return b"%08x" % (binascii.crc32(data) & 0xFFFFFFFF)


def load_key(text):
    """A per-table key from its provisioning text: hex digits (>= 16 bytes) on one line."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode()
    text = text.strip()
    try:
        key = binascii.unhexlify(text)
    except (ValueError, TypeError):
        raise ValueError("key file: hex digits expected") from None
    if len(key) < 16:
        raise ValueError("key file: at least 16 bytes (32 hex digits) required")
    return key


class Encoder:
    """Builds frames in one preallocated buffer, numbering them (boot, seq).

    frame() returns a memoryview of the buffer, valid until the next call: write it to the
    line and to the journal before building the next frame. The header prefix is built
    once, and each name (type, key) checked once; a frame then allocates only its numbers'
    digits (a small bytes each), its string values' and the CRC/HMAC work.
    """

    def __init__(self, table, boot, key=None, seq=0, start=FRAME_START):
        _check_name(table)
        self.table = table
        self.boot = boot
        self.seq = seq  # the last seq used; the next frame gets seq + 1
        self._buf = bytearray(MAX_LINE + 2)
        self._mv = memoryview(self._buf)
        self._hmac = Hmac(key) if key else None
        # the names met (frame types, keys: the firmware's own), checked once and copied
        # whole since: ~60 us a byte checked one by one on the RP2040
        self._names = {}
        # frame type -> (its keys, the whole line before the CRC as a format), or None: a
        # frame of that type, those keys and int values formatted at once in C (_whole)
        self._formats = {}
        head = bytearray()
        head.append(start)
        head.extend(("%d,%s,%d," % (proto.VERSION, table, boot)).encode())
        self._head = bytes(head)

    def frame(self, ftype, fields=(), seq=None, ms=0):
        """Frame of type `ftype` with fields (k1, v1, k2, v2, ...): int, str or bytes values.

        Takes the next seq unless `seq` is given (a command's own counter, or 0 for an
        unsequenced frame, which leaves the numbering as it is). Raises
        ValueError, consuming no seq, when the frame would exceed MAX_LINE.

        (Every frame sent: this and each helper keep their frame within 11 words, which
        MicroPython holds on the C stack, not the heap: board_pico.Board.step.)
        """
        if len(fields) & 1:
            raise ValueError("fields must be key, value pairs")
        if seq is None:
            seq = self.seq + 1
        ms = (seq, ms & 0xFFFFFFFF)  # the header's numbers
        n = self._whole(ftype, fields, ms)
        if n < 0:
            n = self._head_of(ms, ftype)
            n = self._fields(n, fields)
            self._learn(ftype, fields)
        n = self._end(n)
        if seq > self.seq:
            self.seq = seq
        return self._mv[0 : n + 1]

    def _whole(self, ftype, fields, head):
        """A frame of a type met before, with its keys and int values only (a REV), written
        at once by one format in C (a piece at a time, each a Python call or more, took
        ~0.4 ms more of the RP2040's loop pass that builds a REV); the length so far, or -1
        (the frame is to be written a piece at a time)."""
        f = self._formats.get(ftype)
        if f is None:
            return -1
        head = _values(f[0], head, fields)
        if head is None:
            return -1
        return self._put(f[1] % head)

    def _put(self, line):
        n = len(line)
        if n > MAX_LINE:
            raise ValueError("frame too long")
        self._buf[0:n] = line
        return n

    def _learn(self, ftype, fields):
        """After a frame of a type not met before, written a piece at a time (its names
        checked): with int values only, the format of its type and keys (_whole)."""
        if ftype not in self._formats and len(self._formats) < _NAMES_KEPT:
            self._formats[ftype] = self._format(ftype, fields)

    def _format(self, ftype, fields):
        """(keys, format) for _whole; None for a frame with a text value (each of its type
        then written a piece at a time), or a name not kept."""
        names = self._names
        if ftype not in names:
            return None
        f = self._head + b"%d,%d," + names[ftype]
        keys = []
        i = 0
        while i < len(fields):
            if fields[i] not in names or not isinstance(fields[i + 1], int):
                return None
            f += b"," + names[fields[i]] + b"=%d"
            keys.append(fields[i])
            i += 2
        return tuple(keys), f

    def _head_of(self, head, ftype):
        """The header, seq and time (head), type written; the length so far."""
        buf = self._buf
        n = len(self._head)
        buf[0:n] = self._head
        n = self._num(n, head[0])
        buf[n] = _COMMA
        n = self._num(n + 1, head[1])
        buf[n] = _COMMA
        return self._name(n + 1, ftype)

    def _fields(self, n, fields):
        """The fields written at n; the length so far."""
        i = 0
        while i < len(fields):
            n = self._field(n, fields, i)
            i += 2
        return n

    def _field(self, n, fields, i):
        """The field at fields[i], `,key=value`, written at n; the length so far."""
        buf = self._buf
        buf[n] = _COMMA
        n = self._name(n + 1, fields[i])
        v = fields[i + 1]
        buf[n] = _EQUAL
        if not isinstance(v, int):
            return self._text(n + 1, v)
        if v < 0:
            buf[n + 1] = 0x2D  # "-"
            return self._num(n + 2, -v)
        return self._num(n + 1, v)

    def _end(self, n):
        """The tag (with a key), CRC and newline after the n bytes written; the index of the
        newline."""
        buf = self._buf
        if self._hmac is not None:
            if n + 1 + 2 * TAG_BYTES + 9 > MAX_LINE:
                raise ValueError("frame too long")
            buf[n] = _HASH
            buf[n + 1 : n + 1 + 2 * TAG_BYTES] = self._hmac.tag(self._mv[0:n])
            n += 1 + 2 * TAG_BYTES
        if n + 9 > MAX_LINE:
            raise ValueError("frame too long")
        buf[n] = _STAR
        # (formatted in C: digit by digit, on a long int, took ~0.1 ms on the RP2040)
        buf[n + 1 : n + 9] = b"%08x" % (binascii.crc32(self._mv[0:n]) & 0xFFFFFFFF)
        n += 9
        buf[n] = _NL
        return n

    def _num(self, n, v):
        """A number (an int >= 0) written at n; the length so far. (Formatted in C: digit by
        digit in Python took ~0.1 ms a number on the RP2040.)"""
        d = b"%d" % v
        end = n + len(d)
        if end > MAX_LINE:
            raise ValueError("frame too long")
        self._buf[n:end] = d
        return end

    def _name(self, n, s):
        """A name (str or bytes: a frame's type, a field's key) written at n; the length so
        far. ValueError for a byte a name may not hold."""
        b = self._names.get(s)
        if b is None:
            b = self._checked(s)
        end = n + len(b)
        if end > MAX_LINE:
            raise ValueError("frame too long")
        self._buf[n:end] = b
        return end

    def _checked(self, s):
        """A name not met before, as bytes once checked (kept, up to _NAMES_KEPT names)."""
        b = s.encode() if isinstance(s, str) else bytes(s)
        for x in b:
            if unsafe(x):
                raise ValueError("bad character in name %r" % (b,))
        if len(self._names) < _NAMES_KEPT:
            self._names[s] = b
        return b

    def _text(self, n, s):
        """A value (str or bytes) written at n, its unsafe bytes escaped; the length so far.
        (A while loop: a for loop's iterator takes 4 words of the frame.)"""
        if isinstance(s, str):
            s = s.encode()
        buf = self._buf
        i = 0
        while i < len(s):
            b = s[i]
            if unsafe(b):
                n = self._escape(n, b)
            elif n >= MAX_LINE:
                raise ValueError("frame too long")
            else:
                buf[n] = b
                n += 1
            i += 1
        return n

    def _escape(self, n, b):
        """Byte b of a value as %xx at n; the length so far."""
        if n + 3 > MAX_LINE:
            raise ValueError("frame too long")
        buf = self._buf
        buf[n] = _PERCENT
        buf[n + 1] = HEX[b >> 4]
        buf[n + 2] = HEX[b & 15]
        return n + 3


def _values(keys, head, fields):
    """head + the values of fields (k1, v1, k2, v2, ...) when its keys are these, in order,
    and its values ints; else None. (A loop: not every port slices with a step.)"""
    if len(fields) != 2 * len(keys):
        return None
    v = list(head)
    i = 0
    while i < len(keys):
        x = fields[2 * i + 1]
        if fields[2 * i] != keys[i] or not isinstance(x, int):
            return None
        v.append(x)
        i += 1
    return tuple(v)


def _check_name(name):
    if not name or len(name) > TABLE_MAX:
        raise ValueError("table id: 1 to 16 characters")
    if not is_table(name.encode()):
        raise ValueError("table id: letters, digits, '-' and '_' only")


class Frame:
    """One decoded frame or command. fields: dict of str -> str (values unescaped)."""

    __slots__ = ("boot", "fields", "ms", "seq", "start", "table", "tagged", "type", "version")

    def __init__(self, start, version, table, boot, seq, ms, ftype, fields, tagged):
        self.start = start
        self.version = version
        self.table = table
        self.boot = boot
        self.seq = seq
        self.ms = ms
        self.type = ftype
        self.fields = fields
        self.tagged = tagged

    def get(self, key, default=None):
        return self.fields.get(key, default)

    def __repr__(self):
        return "Frame(%s %s %d:%d %s %r)" % (
            chr(self.start),
            self.table,
            self.boot,
            self.seq,
            self.type,
            self.fields,
        )


U32 = 0xFFFFFFFF  # boot, seq and ms are below 2^32 (ms counts modulo 2^32); not a const:
# a long integer on a 32-bit port


def _uint(b):
    # Strict decimal: digits only, no sign, no leading zero (one spelling per number), at
    # most NUMBER_DIGITS digits.
    if not b or (len(b) > 1 and b[0] == 0x30) or len(b) > NUMBER_DIGITS:
        raise FrameError("bad number")
    v = 0
    for c in b:
        if c < 0x30 or c > 0x39:
            raise FrameError("bad number")
        v = v * 10 + c - 0x30
    return v


def number(text):
    """The integer of a number in its one spelling (str or bytes: ASCII digits, no sign, no
    leading zero, at most 10 digits); FrameError (a ValueError) otherwise."""
    return _uint(text.encode() if isinstance(text, str) else text)


def field_uint(fields, key, default=None):
    """A field's integer in its one spelling (number()); `default` when absent."""
    v = fields.get(key)
    if v is None:
        if default is None:
            raise FrameError("no field %s" % key)
        return default
    return number(v)


def unescape(b):
    """A value's text from its bytes as sent (%xx escapes); FrameError for a bad escape, or
    a needless one (one spelling per frame)."""
    if b"%" not in b:
        return b.decode()
    out = bytearray()
    i = 0
    n = len(b)
    while i < n:
        c = b[i]
        if c == _PERCENT:
            if i + 3 > n:
                raise FrameError("bad escape")
            try:
                v = int(b[i + 1 : i + 3], 16)
            except ValueError:
                raise FrameError("bad escape") from None
            if not unsafe(v):
                raise FrameError("needless escape")  # one spelling per frame
            out.append(v)
            i += 3
        else:
            out.append(c)
            i += 1
    try:
        return out.decode()
    except UnicodeError:
        raise FrameError("bad escape") from None


def _is_lower_hex(b):
    for c in b:
        if not (0x30 <= c <= 0x39 or 0x61 <= c <= 0x66):
            return False
    return True


def decode(line, key=None, hmac=None):
    """Decode one line (bytes, with or without its newline) into a Frame.

    Raises CrcError for a damaged or truncated line, AuthError when a key (or an Hmac) is
    given and the tag is missing or wrong, FrameError for a right CRC over a bad layout.
    """
    line = bytes(line)
    end = len(line)
    while end and line[end - 1] in (0x0A, 0x0D):
        end -= 1
    star = line.rfind(b"*", 0, end)
    if star < 1 or end - star != 9 or line[0] not in (FRAME_START, COMMAND_START):
        raise CrcError("no frame")
    crc = line[star + 1 : end]
    if not _is_lower_hex(crc) or crc != crc_hex(line[:star]):
        raise CrcError("CRC mismatch")
    if end > MAX_LINE:
        raise FrameError("frame too long")
    body_end = star
    hsh = line.rfind(b"#", 0, star)
    tag = None
    if hsh >= 0:
        tag = line[hsh + 1 : star]
        body_end = hsh
        if len(tag) != 2 * TAG_BYTES or not _is_lower_hex(tag) or b"#" in line[:hsh]:
            raise FrameError("bad tag")
    if hmac is None and key:
        hmac = Hmac(key)
    if hmac is not None:
        if tag is None:
            raise AuthError("no tag")
        if not _same(hmac.tag(line[:body_end]), tag):
            raise AuthError("bad tag")
    parts = line[1:body_end].split(b",")
    if len(parts) < 6:
        raise FrameError("short header")
    version = _uint(parts[0])
    if version != proto.VERSION:
        raise FrameError("unsupported version %d" % version)
    if not is_table(parts[1]):
        raise FrameError("bad table")
    table = parts[1].decode()
    boot = _uint(parts[2])
    seq = _uint(parts[3])
    ms = _uint(parts[4])
    if boot > U32 or seq > U32 or ms > U32:
        raise FrameError("bad number")
    if not is_token(parts[5], False):
        raise FrameError("bad type")
    ftype = parts[5].decode()
    fields = {}
    for p in parts[6:]:
        eq = p.find(b"=")
        if eq <= 0 or not is_token(p[:eq], False) or not is_token(p[eq + 1 :], True):
            raise FrameError("bad field")
        k = p[:eq].decode()
        if k in fields:
            raise FrameError("field twice")
        fields[k] = unescape(p[eq + 1 :])
    return Frame(line[0], version, table, boot, seq, ms, ftype, fields, tag is not None)


def is_table(b):
    """Whether bytes b are a table id: 1 to TABLE_MAX ASCII letters, digits, "-" or "_"."""
    if not 1 <= len(b) <= TABLE_MAX:
        return False
    for c in b:
        if not (0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or c in b"-_"):
            return False
    return True


def is_token(b, value):
    """Whether bytes b are a name (value False: a type or a field's key, printable ASCII but
    the SEPARATORS, at least one character) or a value as sent (value True: may be empty,
    and may hold %xx escapes, two lowercase hex digits)."""
    if not b and not value:
        return False
    i = 0
    n = len(b)
    while i < n:
        c = b[i]
        if c == _PERCENT and value:
            if i + 3 > n or not _is_lower_hex(b[i + 1 : i + 3]):
                return False
            i += 3
            continue
        if unsafe(c):
            return False
        i += 1
    return True


def peek(line):
    """(boot, seq) of a line whose CRC is right, else None: the journal's cheap index."""
    try:
        end = len(line)
        while end and line[end - 1] in (0x0A, 0x0D):
            end -= 1
        star = line.rfind(b"*", 0, end)
        if star < 1 or end - star != 9 or crc_hex(line[:star]) != bytes(line[star + 1 : end]):
            return None
        parts = line[1:star].split(b",", 4)
        return _uint(parts[2]), _uint(parts[3])
    except (ValueError, IndexError):
        return None


def _same(a, b):
    # Compare tags in time independent of where they differ.
    if len(a) != len(b):
        return False
    d = 0
    for i in range(len(a)):
        d |= a[i] ^ b[i]
    return d == 0


LIST_SEP = ";"  # the items of a list in one value (HOP's lit; RECALL's games, RESEND's only)
NO_POCKET = "-"  # a pocket field naming none (HOP's lit, LAUNCH's and DROP's under)


def pocket_list(labels):
    """HOP's `lit`: pocket labels (in channel order) joined by LIST_SEP; NO_POCKET for none."""
    return LIST_SEP.join(labels) if labels else NO_POCKET


def pocket_labels(text):
    """The labels of a pocket list (pocket_list's one spelling): [] for NO_POCKET; FrameError
    for an empty item or a label twice. Whether each is a pocket of the game is the reader's
    to check (rmcfw.numbers)."""
    if text == NO_POCKET:
        return []
    items = text.split(LIST_SEP)
    for i in range(len(items)):
        if not items[i] or items[i] == NO_POCKET:
            raise FrameError("bad pocket list")
        if items[i] in items[:i]:
            raise FrameError("pocket twice in a list")
    return items


def wheel_id(labels):
    """The wheel definition's id in BOOT frames: 16 hex digits of the SHA-256 of its pocket
    labels in channel order, comma-joined. That order maps a pocket sensor to a number: a
    board given another order would announce other numbers, so the host checks the id."""
    return binascii.hexlify(hashlib.sha256(",".join(labels).encode()).digest()[:8]).decode()
