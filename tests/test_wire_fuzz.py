"""Fuzz and property tests of the host's frame checker (hypothesis).

A clean session of frames, made by the firmware's own encoder, is damaged in the ways a line
or an attacker can damage it. The checker must never crash, never accept a damaged or forged
frame, and count exactly what was done to the stream.
"""

from __future__ import annotations

import functools
import gc
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmc.checker import Checker, Report
from rmc.framegen import result_fields, session_lines
from rmc.frames import CrcError, FrameError, decode, is_tagged
from rmcfw import frames as fwframes
from rmcfw import proto
from rmcfw.commands import Commander, Wire
from rmcfw.frames import Encoder, crc_hex

KEY = bytes(range(32))
# RMC_FUZZ_EXAMPLES=5000 for a longer run than the default one.
SETTINGS = settings(
    max_examples=int(os.environ.get("RMC_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@functools.cache
def clean(
    key: bytes | None = None, boot: int = 1, spins: int = 6, first_spin: int = 1, prev: str = "-"
) -> tuple:
    lines, table = session_lines(
        spins, key=key, boot=boot, seed=boot, first_spin=first_spin, prev=prev
    )
    return tuple(lines), tuple(table.results)


def check(lines, key=None) -> Report:
    """Check line by line, and in one batch: both must report exactly the same. A checker
    that keeps no frames (a live service's) must take and refuse the same lines, for the
    same reasons."""
    c = Checker(key)
    live = Checker(key, keep=False)
    for line in lines:
        took = c.feed(line)
        live_took = live.feed(line)
        assert (live_took is None) == (took is None)
        assert took is not None or live.why == c.why
    assert live.counts == c.counts
    one = c.report()
    assert c.report().to_json() == one.to_json()  # a report changes nothing
    assert not live.frames  # and nothing for the garbage collector to look into:
    assert not gc.is_tracked(live._lines) and not gc.is_tracked(live._older)
    assert all(is_tagged(f.line) == f.tagged for f in c.frames.values())
    with pytest.raises(RuntimeError):
        live.report()
    batch = Checker(key)
    batch.feed_many(line.rstrip(b"\n") for line in lines)
    assert batch.report().to_json() == one.to_json()
    return one


def expected_results(lines) -> list[dict]:
    out = []
    for line in lines:
        f = decode(line)
        if f.type == proto.T_RESULT:
            out.append({"spin": int(f.fields["spin"]), "result": f.fields["num"]})
    return out


def test_clean_session_is_clean():
    for key in (None, KEY):
        lines, results = clean(key)
        r = check(lines, key)
        assert r.clean, r.to_json()
        assert r.valid == len(lines) and r.crc_errors == 0 and r.gaps == []
        assert [(x["spin"], x["result"]) for x in r.results] == list(results)
        assert r.spins == len(results)


@SETTINGS
@given(st.binary(max_size=3000))
def test_random_bytes_never_crash_never_accepted(data):
    c = Checker()
    for line in data.split(b"\n"):
        c.feed(line)
    r = c.report()
    assert r.valid == 0
    assert r.lines == len(data.split(b"\n"))
    # Every line is counted once: noise, a damaged frame, or blank.
    assert r.noise + r.crc_errors + r.malformed + r.auth_failures <= r.lines
    for line in data.split(b"\n"):
        try:
            fwframes.decode(line)
        except FrameError:
            pass


@SETTINGS
@given(st.lists(st.binary(max_size=120), max_size=20), st.booleans())
def test_firmware_command_parser_never_crashes(chunks, keyed):
    from wire_support import make_wire

    w, sink = make_wire(KEY if keyed else None)
    for chunk in chunks:
        w.feed(chunk)
    # Whatever came in, nothing was accepted and every answer is a valid frame.
    assert w.cmd_seq == 0
    for line in bytes(sink.data).split(b"\n"):
        if line:
            decode(line)


@SETTINGS
@given(st.data())
def test_bit_flips_are_all_caught(data):
    key = data.draw(st.sampled_from([None, KEY]))
    lines = list(clean(key)[0])
    picks = data.draw(st.sets(st.integers(0, len(lines) - 1), min_size=1, max_size=8))
    damaged = list(lines)
    for i in picks:
        line = bytearray(lines[i])
        pos = data.draw(st.integers(0, len(line) - 2))  # not the newline itself
        bit = data.draw(st.integers(0, 7))
        line[pos] ^= 1 << bit
        if line[pos] in (0x0A, 0x0D):
            line[pos] ^= 1 << bit  # a flip into a line end splits the line: tested elsewhere
            line[pos] ^= 0x80
        damaged[i] = bytes(line)
    r = check(damaged, key)
    assert r.crc_errors == len(picks)
    assert r.valid == len(lines) - len(picks)
    assert r.auth_failures == 0 and r.malformed == 0
    missing = sorted(i + 1 for i in picks)  # seq = index + 1
    got = [s for _, a, b in r.gaps for s in range(a, b + 1)]
    # A recording may begin late and end early: frames lost before the first valid frame or
    # after the last one leave nothing to show a gap.
    kept = [i + 1 for i in range(len(lines)) if i not in picks]
    assert got == [s for s in missing if kept[0] < s < kept[-1]]
    keep = [ln for i, ln in enumerate(lines) if i not in picks]
    # Every result kept is reported, valid or rejected: a result whose launch, « rien ne
    # va plus » or session frame was lost cannot be checked, and is listed apart.
    exp = expected_results(keep)
    rejected = [{"spin": x["spin"], "result": x["result"]} for x in r.rejected]
    assert sorted(r.results + rejected, key=lambda x: x["spin"]) == exp
    assert all(x["rules"] for x in r.rejected)
    lost = {decode(lines[i]).type for i in picks}
    if not lost & {proto.T_LAUNCH, proto.T_RNVP, proto.T_SESSION_OPEN, proto.T_BOOT}:
        assert r.results == exp
    assert not r.clean


@SETTINGS
@given(st.data())
def test_truncated_lines(data):
    lines = list(clean()[0])
    picks = data.draw(st.sets(st.integers(0, len(lines) - 2), min_size=1, max_size=6))
    damaged = []
    for i, line in enumerate(lines):
        if i in picks:
            cut = data.draw(st.integers(1, len(line) - 2))
            line = line[:cut] + b"\n"
        damaged.append(line)
    r = check(damaged)
    assert r.crc_errors == len(picks)
    assert r.valid == len(lines) - len(picks)
    first_kept = min(set(range(len(lines))) - picks)
    assert sum(b - a + 1 for _, a, b in r.gaps) == len([i for i in picks if i > first_kept])


@SETTINGS
@given(st.data())
def test_duplicates_counted_and_harmless(data):
    key = data.draw(st.sampled_from([None, KEY]))
    lines, results = clean(key)
    picks = data.draw(st.lists(st.integers(0, len(lines) - 1), min_size=1, max_size=10))
    stream = list(lines)
    for i in picks:
        at = data.draw(st.integers(i + 1, len(stream)))
        stream.insert(at, lines[i])
    r = check(stream, key)
    assert r.duplicates == len(picks) == r.unmarked_duplicates
    assert r.valid == len(lines)
    assert [(x["spin"], x["result"]) for x in r.results] == list(results)
    assert r.gaps == [] and r.violations == []
    assert not r.clean  # an unmarked duplicate on a serial line is a replay


@SETTINGS
@given(st.data())
def test_reordered_lines(data):
    lines, results = clean()
    n = len(lines)
    starts = data.draw(st.sets(st.integers(0, n // 2 - 1), min_size=1, max_size=10))
    stream = list(lines)
    for s in starts:  # swap disjoint pairs (2s, 2s+1)
        stream[2 * s], stream[2 * s + 1] = stream[2 * s + 1], stream[2 * s]
    r = check(stream)
    assert r.out_of_order == len(starts) == r.unmarked_out_of_order
    assert r.valid == n and r.gaps == [] and r.violations == []
    assert [(x["spin"], x["result"]) for x in r.results] == list(results)
    # The same frames marked as resent are accepted quietly.
    marked = [b"~" + ln if ln != lines[i] else ln for i, ln in enumerate(stream)]
    r = check(marked)
    assert r.unmarked_out_of_order == 0 and r.clean


@SETTINGS
@given(st.data())
def test_interleaved_noise_and_other_table(data):
    lines, results = clean()
    other, _ = session_lines(2, table="T02", seed=9)
    noise = [b">>> ", b"MicroPython v1.27 on rp2\r\n", b"", b"   \r\n", b"*** help ***\n"]
    stream = list(lines)
    n_noise = 0
    n_other = 0
    for item in data.draw(st.lists(st.sampled_from(range(len(noise) + len(other))), max_size=30)):
        at = data.draw(st.integers(0, len(stream)))
        if item < len(noise):
            stream.insert(at, noise[item])
            n_noise += 1 if noise[item].strip() else 0
        else:
            stream.insert(at, other[item - len(noise)])
            n_other += 1
    if n_other and stream.index(lines[0]) > min(stream.index(o) for o in other if o in stream):
        return  # the other table came first and would be taken as this one: not this test
    r = check(stream)
    assert r.noise == n_noise
    assert len([v for v in r.violations if v["rule"] == "table"]) == n_other
    assert r.valid == len(lines)
    assert [(x["spin"], x["result"]) for x in r.results] == list(results)


@SETTINGS
@given(st.data())
def test_forged_frames_without_key(data):
    lines, results = clean(KEY)
    stream = list(lines)
    forged = 0
    for _ in range(data.draw(st.integers(1, 8))):
        spin = data.draw(st.integers(1, 6))
        num = data.draw(st.sampled_from(["0", "00", "17", "CMC"]))
        seq = data.draw(st.integers(1, len(lines) + 5))
        how = data.draw(st.sampled_from(["untagged", "random_tag", "other_key"]))
        if how == "other_key":
            enc = Encoder("T01", 1, b"not the key 0123", seq=seq - 1)
            line = bytes(enc.frame(proto.T_RESULT, ("spin", spin, "num", num)))
        else:
            enc = Encoder("T01", 1, seq=seq - 1)
            line = bytes(enc.frame(proto.T_RESULT, ("spin", spin, "num", num))).rstrip(b"\n")
            if how == "random_tag":
                tag = data.draw(st.binary(min_size=8, max_size=8)).hex().encode()
                body = line[: line.rfind(b"*")] + b"#" + tag
                line = body + b"*" + crc_hex(body)
        stream.insert(data.draw(st.integers(0, len(stream))), line)
        forged += 1
    r = check(stream, KEY)
    assert r.auth_failures == forged
    assert r.valid == len(lines) and r.clean is False
    assert [(x["spin"], x["result"]) for x in r.results] == list(results)
    assert r.gaps == [] and r.violations == []


@SETTINGS
@given(st.data())
def test_replay_from_an_earlier_boot(data):
    first, res1 = clean(KEY, boot=1, spins=3)
    # boot 2 goes on from boot 1's spins, its BOOT naming boot 1's last frame
    second, res2 = clean(KEY, boot=2, spins=3, first_spin=4, prev=f"1:{len(first)}")
    picks = data.draw(st.lists(st.integers(0, len(first) - 1), min_size=1, max_size=10))
    stream = list(first) + list(second)
    for i in picks:
        stream.insert(data.draw(st.integers(len(first), len(stream))), first[i])
    r = check(stream, KEY)
    assert r.duplicates == len(picks)
    assert r.valid == len(first) + len(second)
    assert r.reboots == 1 and r.boots == [1, 2]
    assert r.auth_failures == 0 and r.crc_errors == 0
    assert [(x["spin"], x["result"]) for x in r.results] == list(res1) + list(res2)


def test_untagged_frames_in_a_tagged_stream_fail_without_key():
    lines, _ = clean(KEY)
    enc = Encoder("T01", 1, seq=len(lines))
    forged = bytes(enc.frame(proto.T_RESULT, ("spin", 99, "num", "17")))
    r = check([*lines, forged])
    assert r.auth_failures == 1
    assert r.unverified == len(lines)
    assert {"spin": 99, "result": "17"} not in r.results


def test_conflict_under_one_key_is_a_violation():
    lines, _ = clean()
    f = decode(lines[5])
    enc = Encoder("T01", 1, seq=f.seq - 1)
    other = bytes(enc.frame(f.type, ("spin", 1, "n", 99)))
    r = check([*lines, other])
    assert [v["rule"] for v in r.violations] == ["conflict"]


def test_a_live_checker_remembers_the_last_lines_only():
    """keep=False keeps from lines_kept to twice that many lines: a copy of one of them is
    a duplicate, a different frame under its key a conflict; a copy of an older frame is
    taken as new, as by a checker started after it."""
    lines, _ = clean()
    live = Checker(None, keep=False, lines_kept=8)
    for line in lines:
        assert live.feed(line) is not None
    assert 8 <= len(live._lines) + len(live._older) <= 16
    assert live.feed(lines[-3]) is None and live.why == "duplicate"
    f = decode(lines[-3])
    other = bytes(Encoder("T01", f.boot, seq=f.seq - 1).frame(f.type, ("spin", 1, "n", 99)))
    assert live.feed(other) is None and live.why == "conflict"
    assert live.feed(lines[0]) is not None  # older than the lines kept


def test_damaged_frame_never_decodes():
    lines, _ = clean(KEY)
    line = lines[10]
    for i in range(len(line) - 1):
        for bit in range(8):
            b = bytearray(line)
            b[i] ^= 1 << bit
            try:
                decode(bytes(b))
            except (CrcError, FrameError):
                continue
            raise AssertionError(f"accepted {bytes(b)!r}")


def test_commander_and_wire_roundtrip_for_fuzz_support():
    from wire_support import make_wire

    w, sink = make_wire(None)
    w.feed(Commander("T01").line(proto.C_STATUS, boot=1))
    assert b"ACK" in bytes(sink.data)
    assert isinstance(w, Wire)


def test_dollar_in_repl_text_is_noise_but_a_frame_after_a_prompt_is_read():
    lines, results = clean()
    stream = [b">>> print('$5 a chip')", b"cost: $1 each", b">>> " + lines[0], *lines[1:]]
    r = check(stream)
    assert r.noise == 2 and r.crc_errors == 0 and r.valid == len(lines)
    assert r.clean and [(x["spin"], x["result"]) for x in r.results] == list(results)


@SETTINGS
@given(st.data())
def test_untagged_forgeries_in_a_tagged_stream_without_key(data):
    """Without the key, a forger's untagged frames can neither fill a gap nor push out the
    table's tagged frame of the same (boot, seq): they are counted as forgeries."""
    lines, results = clean(KEY)
    stream = list(lines)
    lost = data.draw(st.integers(5, len(lines) - 5))
    del stream[lost]  # a genuine frame lost...
    picks = data.draw(st.sets(st.integers(5, len(lines) - 5), min_size=1, max_size=5))
    for seq0 in sorted(picks):  # ...and untagged frames forged under genuine (boot, seq)
        enc = Encoder("T01", 1, seq=seq0)
        forged = bytes(enc.frame(proto.T_RESULT, result_fields(1, "CMC")))
        genuine_at = next(i for i, x in enumerate(stream) if decode(x).seq >= seq0 + 1)
        before = data.draw(st.booleans())
        stream.insert(genuine_at if before else genuine_at + 1, forged)
    r = check(stream)
    assert r.auth_failures == len(picks)
    assert [g[1:] for g in r.gaps] == [[lost + 1, lost + 1]]
    assert all(x["result"] != "CMC" or (x["spin"], "CMC") in results for x in r.results)


@SETTINGS
@given(st.data())
def test_host_and_firmware_decoders_agree(data):
    """The host's fast decoder and the firmware's own accept exactly the same lines and read
    the same frame from them (differential test over damaged and odd lines)."""
    key = data.draw(st.sampled_from([None, KEY]))
    lines = clean(key)[0]
    line = bytearray(data.draw(st.sampled_from(lines)).rstrip(b"\n"))
    for _ in range(data.draw(st.integers(0, 3))):
        how = data.draw(st.sampled_from(["flip", "cut", "insert", "recrc", "pad"]))
        if how == "flip" and line:
            i = data.draw(st.integers(0, len(line) - 1))
            line[i] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "cut" and line:
            del line[data.draw(st.integers(0, len(line) - 1)) :]
        elif how == "insert":
            i = data.draw(st.integers(0, len(line)))
            line[i:i] = data.draw(
                st.sampled_from(
                    [b",", b"=", b"0", b"+", b"%", b"%zz", b"%41", b"%2c", b"#", b"\xff", b"a"]
                )
            )
        elif how == "pad" and b"=" in line:
            # a value grown around the length limit (250 bytes without the newline)
            i = line.rfind(b"=") + 1
            line[i:i] = b"x" * data.draw(st.integers(100, 200))
        elif how == "recrc" and b"*" in line:
            # A forger with a right CRC over whatever the body became.
            body = bytes(line[: line.rfind(b"*")])
            line = bytearray(body + b"*" + crc_hex(body))
    line = bytes(line)
    verifier = None
    if key is not None and data.draw(st.booleans()):
        from rmc.frames import Verifier

        verifier = Verifier(key)
    try:
        host = decode(line, verifier)
        _ = host.fields  # the host reads fields lazily: a frame is accepted when they parse
    except FrameError as e:
        host = type(e)
    try:
        fw = fwframes.decode(line, key if verifier is not None else None)
    except FrameError as e:
        fw = type(e)
    if isinstance(host, type) or isinstance(fw, type):
        # Both refuse; the class may differ only between layout and CRC/tag wording.
        assert isinstance(host, type) and isinstance(fw, type), (line, host, fw)
        if issubclass(host, fwframes.AuthError) or issubclass(fw, fwframes.AuthError):
            assert host is fw, (line, host, fw)
        return
    host_fields = host.fields
    assert (host.table, host.boot, host.seq, host.ms, host.type) == (
        fw.table,
        fw.boot,
        fw.seq,
        fw.ms,
        fw.type,
    ), line
    assert host_fields == fw.fields, line


def test_host_field_numbers_have_one_spelling():
    from rmcfw.frames import Encoder

    enc = Encoder("T01", 1)
    for text, ok in (("12", True), ("0", True), ("+5", False), ("05", False), ("5_0", False),
                     ("٥", False), ("12345678901", False)):  # fmt: skip
        f = decode(bytes(enc.frame(proto.T_REV, ("spin", text, "n", 1))))
        if ok:
            assert f.int("spin") == int(text)
        else:
            try:
                f.int("spin")
            except FrameError:
                continue
            raise AssertionError(f"{text!r} read as a number")


def test_both_decoders_refuse_needless_escapes_and_long_frames():
    from rmcfw.frames import MAX_LINE, crc_hex

    for body in (b"$1,T01,1,2,0,INC,spin=1,step=%41", b"$1,T01,1,2,0,INC,step=" + b"x" * 230):
        line = body + b"*" + crc_hex(body)
        for dec in (lambda x: decode(x).fields, fwframes.decode):
            try:
                dec(line)
            except FrameError:
                continue
            raise AssertionError((line, dec))
        assert len(line) > MAX_LINE or b"%41" in line
