# The frame codec of the firmware (docs/protocol.md): encoder, decoder, CRC-32, HMAC-SHA256.
import binascii

from fwtest import raises

from rmcfw import frames, proto

KEY = binascii.unhexlify("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")


def test_hmac_matches_rfc4231_case_2():
    h = frames.Hmac(b"Jefe")
    got = binascii.hexlify(h.digest(b"what do ya want for nothing?"))
    assert got == b"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


def test_hmac_long_key_rfc4231_case_6():
    h = frames.Hmac(b"\xaa" * 131)
    got = binascii.hexlify(h.digest(b"Test Using Larger Than Block-Size Key - Hash Key First"))
    assert got == b"60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"


def test_frame_layout_is_exact():
    enc = frames.Encoder("T01", 3)
    line = bytes(enc.frame(proto.T_RESULT, ("spin", 12, "num", "17"), ms=123456))
    body = b"$1,T01,3,1,123456,RES,spin=12,num=17"
    crc = b"%08x" % (binascii.crc32(body) & 0xFFFFFFFF)
    assert line == body + b"*" + crc + b"\n"
    assert enc.seq == 1


def test_roundtrip_and_sequence():
    enc = frames.Encoder("T01", 7, seq=41)
    f = frames.decode(enc.frame(proto.T_VOID, ("spin", 3, "reason", proto.V_FEW_REVS), ms=5))
    assert (f.table, f.boot, f.seq, f.ms, f.type) == ("T01", 7, 42, 5, "VOID")
    assert f.fields == {"spin": "3", "reason": "few_revs"}
    assert not f.tagged
    f = frames.decode(enc.frame(proto.T_LID, ("locked", 1)))
    assert f.seq == 43


def test_values_are_escaped_and_restored():
    enc = frames.Encoder("T01", 1)
    text = "a b,c=d#e*f%g$h>i\u00e9"
    line = bytes(enc.frame(proto.T_FAULT, ("code", "x", "detail", text, "neg", -5)))
    assert line.count(b",") == 8
    assert b" " not in line
    f = frames.decode(line)
    assert f.fields["detail"] == text
    assert f.fields["neg"] == "-5"


def test_bad_crc_raises():
    enc = frames.Encoder("T01", 1)
    line = bytearray(enc.frame(proto.T_LID, ("locked", 1)))
    for i in range(len(line) - 1):
        damaged = bytearray(line)
        damaged[i] ^= 0x01
        raises(frames.FrameError, frames.decode, damaged)
    raises(frames.CrcError, frames.decode, line[:-5])
    raises(frames.CrcError, frames.decode, b"")
    raises(frames.CrcError, frames.decode, b"hello world")


def test_uppercase_crc_is_refused():
    enc = frames.Encoder("T01", 1)
    line = bytes(enc.frame(proto.T_LID, ("locked", 1))).rstrip(b"\n")
    star = line.rfind(b"*")
    upper = line[: star + 1] + line[star + 1 :].upper()
    if upper != line:
        raises(frames.CrcError, frames.decode, upper)


def test_tagged_frame_needs_the_key():
    enc = frames.Encoder("T01", 2, key=KEY)
    line = bytes(enc.frame(proto.T_RESULT, ("spin", 1, "num", "00")))
    assert b"#" in line
    f = frames.decode(line, key=KEY)
    assert f.tagged and f.fields["num"] == "00"
    raises(frames.AuthError, frames.decode, line, b"another key 1234")
    # Without the key the frame still decodes (a checker with no key cannot verify it).
    assert frames.decode(line).tagged


def test_forged_frame_without_key_fails_auth():
    plain = frames.Encoder("T01", 2)
    line = bytes(plain.frame(proto.T_RESULT, ("spin", 1, "num", "17")))
    raises(frames.AuthError, frames.decode, line, KEY)
    # A tag made up by the forger, with a right CRC.
    body = line[: line.rfind(b"*")] + b"#0123456789abcdef"
    forged = body + b"*" + frames.crc_hex(body)
    raises(frames.AuthError, frames.decode, forged, KEY)


def test_too_long_frame_is_refused_without_using_a_seq():
    enc = frames.Encoder("T01", 1)
    e = raises(ValueError, enc.frame, proto.T_FAULT, ("detail", "x" * 300))
    assert "long" in str(e)
    assert enc.seq == 0
    assert frames.decode(enc.frame(proto.T_LID, ("locked", 0))).seq == 1


def test_bad_table_ids():
    raises(ValueError, frames.Encoder, "", 1)
    raises(ValueError, frames.Encoder, "a,b", 1)
    raises(ValueError, frames.Encoder, "x" * 17, 1)


def test_strict_numbers():
    body = b"$1,T01,01,1,0,LID"
    raises(frames.FrameError, frames.decode, body + b"*" + frames.crc_hex(body))
    body = b"$2,T01,1,1,0,LID"
    raises(frames.FrameError, frames.decode, body + b"*" + frames.crc_hex(body))
    body = b"$1,T01,1,1,0,LID,novalue"
    raises(frames.FrameError, frames.decode, body + b"*" + frames.crc_hex(body))


def test_peek():
    enc = frames.Encoder("T01", 9, seq=99)
    line = bytes(enc.frame(proto.T_LID, ("locked", 1)))
    assert frames.peek(line) == (9, 100)
    assert frames.peek(line[:-4]) is None
    assert frames.peek(b"junk") is None


def test_load_key():
    assert frames.load_key("00" * 16 + "\n") == bytes(16)
    raises(ValueError, frames.load_key, "abcd")
    raises(ValueError, frames.load_key, "zz" * 16)


def _with_crc(body):
    return body + b"*" + frames.crc_hex(body) + b"\n"


def test_one_spelling_per_frame_escapes_only_where_needed():
    # %2c is a comma, which must be escaped; %41 is an "A", which must not be
    f = frames.decode(_with_crc(b"$1,T01,1,2,0,INC,spin=1,step=a%2cb"))
    assert f.fields["step"] == "a,b"
    raises(frames.FrameError, frames.decode, _with_crc(b"$1,T01,1,2,0,INC,spin=1,step=%41"))


def test_a_frame_longer_than_the_limit_is_refused_even_with_a_right_crc():
    head = b"$1,T01,1,2,0,INC,spin=1,step="
    fits = head + b"x" * (frames.MAX_LINE - 9 - len(head))
    assert len(_with_crc(fits)) == frames.MAX_LINE + 1  # 250 bytes and the newline
    assert frames.decode(_with_crc(fits)).fields["step"] == "x" * (len(fits) - len(head))
    raises(frames.FrameError, frames.decode, _with_crc(fits + b"x"))


def test_field_numbers_have_one_spelling():
    fields = {"n": "12", "zero": "0", "plus": "+5", "lead": "05", "space": " 5", "u": "5_0"}
    assert frames.field_uint(fields, "n") == 12 and frames.field_uint(fields, "zero") == 0
    assert frames.field_uint(fields, "none", 10) == 10
    for k in ("plus", "lead", "space", "u", "none"):
        raises(frames.FrameError, frames.field_uint, fields, k)
