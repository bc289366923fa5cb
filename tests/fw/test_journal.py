# The persistent journal of frames (resend, recall), and its behaviour across power cuts.
import os

from fwtest import scratch_dir

from rmcfw import frames, proto
from rmcfw.journal import Journal


def _fill(j, enc, n):
    lines = []
    for _ in range(n):
        line = bytes(enc.frame(proto.T_STATUS, ("state", "open")))
        j.append(line)
        lines.append(line)
    return lines


def test_append_and_resend_range():
    d = scratch_dir("j")
    j = Journal(d, per_segment=10, segments=4)
    assert j.last() is None
    j.start()
    enc = frames.Encoder("T01", 1)
    lines = _fill(j, enc, 25)
    assert j.last() == (1, 25)
    assert list(j.frames(1, 1)) == lines
    assert list(j.frames(1, 12, 14)) == lines[11:14]
    assert list(j.frames(1, 5, limit=3)) == lines[4:7]
    j.close()


def test_bounded_oldest_dropped():
    d = scratch_dir("j")
    j = Journal(d, per_segment=5, segments=3)
    j.start()
    enc = frames.Encoder("T01", 1)
    lines = _fill(j, enc, 40)
    kept = list(j.frames(1, 1))
    assert kept == lines[-len(kept) :]
    assert 10 <= len(kept) <= 15
    assert len(os.listdir(d)) <= 3
    j.close()


def test_frequent_boots_keep_as_many_frames():
    # Each boot starts a segment: short ones must not shorten the history (16 boots of a
    # few frames used to be all that was kept), while a boot loop stays bounded in files.
    d = scratch_dir("j")
    lines = []
    for boot in range(1, 21):
        j = Journal(d, per_segment=5, segments=3)
        j.start()
        lines += _fill(j, frames.Encoder("T01", boot), 3)
        j.close()
    j = Journal(d, per_segment=5, segments=3)
    kept = list(j.frames(1, 1))
    assert kept == lines[-len(kept) :]
    assert len(kept) >= 10, len(kept)  # (segments - 1) x per_segment at least
    for boot in range(21, 121):  # a boot loop: one frame each
        j = Journal(d, per_segment=5, segments=3)
        j.start()
        _fill(j, frames.Encoder("T01", boot), 1)
        j.close()
    assert len(os.listdir(d)) <= 12  # 4 x segments
    assert len(list(Journal(d, per_segment=5, segments=3).frames(1, 1))) >= 10


def test_survives_reboot_and_torn_line():
    d = scratch_dir("j")
    j = Journal(d, per_segment=100, segments=4)
    j.start()
    enc = frames.Encoder("T01", 1)
    lines = _fill(j, enc, 6)
    # Power cut in the middle of the 7th frame: half a line reaches flash.
    half = bytes(enc.frame(proto.T_STATUS, ("state", "bets")))
    j._file.write(half[: len(half) // 2])
    j._file.flush()
    j.close()
    j2 = Journal(d, per_segment=100, segments=4)
    assert j2.last() == (1, 6)
    j2.start()
    enc2 = frames.Encoder("T01", 2)
    more = _fill(j2, enc2, 3)
    assert list(j2.frames(1, 1)) == lines + more
    assert list(j2.frames(2, 2)) == more[1:]
    assert list(j2.frames(1, 5, 6)) == lines[4:6]
    j2.close()


def test_results_for_recall():
    d = scratch_dir("j")
    j = Journal(d, per_segment=7, segments=10)
    j.start()
    enc = frames.Encoder("T01", 1)
    for spin in range(1, 15):
        j.append(enc.frame(proto.T_LAUNCH, ("spin", spin, "rdir", "cw", "bdir", "ccw")))
        j.append(enc.frame(proto.T_RESULT, ("spin", spin, "num", str(spin + 10))))
    got = j.results(10)
    assert got == [(s, str(s + 10)) for s in range(5, 15)]
    j.close()


def test_power_cut_at_every_byte_leaves_old_or_new_state():
    enc = frames.Encoder("T01", 1)
    first = [bytes(enc.frame(proto.T_LID, ("locked", i % 2))) for i in range(3)]
    nxt = bytes(enc.frame(proto.T_RESULT, ("spin", 1, "num", "17")))
    for cut in range(len(nxt) + 1):
        d = scratch_dir("p")
        j = Journal(d, per_segment=50, segments=4)
        j.start()
        for line in first:
            j.append(line)
        # The cut: only `cut` bytes of the next frame reach flash, then the board restarts.
        j._file.write(nxt[:cut])
        j._file.flush()
        j.close()
        j2 = Journal(d, per_segment=50, segments=4)
        kept = list(j2.frames(1, 1))
        if cut == len(nxt):
            assert kept == first + [nxt]
            assert j2.last() == (1, 4)
        else:
            assert kept == first, cut
            assert j2.last() == (1, 3)
        # And the journal goes on after the restart.
        j2.start()
        enc2 = frames.Encoder("T01", 2)
        after = bytes(enc2.frame(proto.T_LID, ("locked", 1)))
        j2.append(after)
        assert list(j2.frames(2, 1)) == [after]
        j2.close()


def test_a_reading_stopped_early_closes_its_file():
    # MicroPython has no reference counts: a segment left open by a reading that stopped
    # early (its limit, its last frame, or the caller closing it) would stay open until the
    # collector runs, pinning a LittleFS snapshot. Each must close it at once.
    d = scratch_dir("j")
    j = Journal(d, per_segment=10, segments=4)
    j.start()
    _fill(j, frames.Encoder("T01", 1), 25)
    opened = []
    real = j._lines

    def lines(seg, offset=0):
        g = real(seg, offset)
        opened.append(g)
        return g

    j._lines = lines
    for reading in (
        list(j.frames(1, 3, limit=2)),
        list(j.frames(1, 3, last=5)),
        list(j.frames(1, 3, only=[(4, 4)])),
    ):
        assert reading
    g = j.frames(1, 12)
    next(g)
    g.close()
    for gen in opened:
        try:
            next(gen)
        except StopIteration:
            pass  # closed: its finally ran, the file is shut
        else:
            raise AssertionError("a segment's reader left open")
    j.close()
