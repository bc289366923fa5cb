# A quiet journal between spins (the board's, hold=True): the answers to the host's STATUS
# polls (STAT) and RECALL wait in RAM at any time, so that the rotor turning between spins
# is not hit by a flash erase (45 ms, interrupts off on an RP2040) at every poll; they are
# written with the next frame recovery needs, before any save, or at 8 KB.
from fwtest import scratch_dir

from rmcfw import frames, proto
from rmcfw.journal import Journal


class _Counted(Journal):
    """A journal that counts its durable writes (each a LittleFS sync: a sector erase)."""

    def __init__(self, folder):
        Journal.__init__(self, folder, hold=True)
        self.writes = 0

    def _write(self, line):
        self.writes += 1
        Journal._write(self, line)


def _on_flash(j):
    return list(Journal(j.folder).frames(1, 1))


def _stat(enc, n):
    return bytes(enc.frame(proto.T_STATUS, ("state", "bets", "spin", n, "rotor_ms", 3000)))


def test_status_answers_between_spins_wait_for_the_next_frame_recovery_needs():
    j = _Counted(scratch_dir("q"))
    j.start()
    enc = frames.Encoder("T01", 1)
    boot = bytes(enc.frame(proto.T_BOOT, ("fw", "x")))
    j.append(boot)
    stats = [_stat(enc, n) for n in range(30)]
    for line in stats:
        j.append(line)
    (recall,) = [bytes(enc.frame(proto.T_RECALL, ("n", 0, "games", "")))]
    j.append(recall)
    assert j.writes == 1  # the BOOT alone: 30 polls answered, no flash written
    assert _on_flash(j) == [boot]
    assert list(j.frames(1, 1)) == [boot] + stats + [recall]  # a RESEND has them all
    assert j.last() == (1, 32)
    fault = bytes(enc.frame(proto.T_FAULT, ("code", proto.F_WATCHDOG, "on", 0, "detail", "")))
    j.append(fault)
    assert j.writes == 2  # one write: the held lines, in order, then the FAULT
    assert _on_flash(j) == [boot] + stats + [recall, fault]
    j.close()


def test_a_flush_before_a_save_writes_what_is_held():
    j = _Counted(scratch_dir("q"))
    j.start()
    enc = frames.Encoder("T01", 1)
    stats = [_stat(enc, n) for n in range(3)]
    for line in stats:
        j.append(line)
    j.flush()
    assert _on_flash(j) == stats and j.writes == 1
    j.flush()  # nothing held: no write
    assert j.writes == 1
    j.close()


def test_at_most_8_kb_are_held():
    j = _Counted(scratch_dir("q"))
    j.start()
    enc = frames.Encoder("T01", 1)
    lines = [_stat(enc, n) for n in range(400)]
    for line in lines:
        j.append(line)
        assert j._held_bytes <= 8192
    total = sum(len(x) for x in lines)
    assert total // 8192 <= j.writes <= total // 8192 + 1  # one write per 8 KB or so
    j.close()
    assert _on_flash(j) == lines  # close() wrote the rest


def test_a_routine_frame_of_a_running_ball_is_not_held_between_spins():
    j = _Counted(scratch_dir("q"))
    j.start()
    enc = frames.Encoder("T01", 1)
    rev = bytes(enc.frame(proto.T_REV, ("spin", 1, "n", 3, "period_us", 500000)))
    rnvp = bytes(enc.frame(proto.T_RNVP, ("spin", 1, "drop_ms", 1, "lead_ms", 1, "why", "fit")))
    j.append(rev)
    j.append(rnvp)
    assert _on_flash(j) == [rev, rnvp]  # no ball runs: held only from a LAUNCH
    j.close()


def test_a_new_boot_keeps_every_seq_the_host_heard_out_of_a_cut():
    d = scratch_dir("q")
    j = Journal(d, hold=True)
    j.start()
    enc = frames.Encoder("T01", 1)
    boot = bytes(enc.frame(proto.T_BOOT, ("fw", "x")))
    j.append(boot)
    for n in range(5):
        j.append(_stat(enc, n))
    # the power is cut: the five STATs were in RAM only
    j2 = Journal(d, hold=True)
    assert j2.last() == (1, 1)  # BOOT's prev: the last frame kept, below what was heard
    j2.start()
    enc2 = frames.Encoder("T01", 2)  # a new boot: its seqs start over, none is reused
    j2.append(bytes(enc2.frame(proto.T_BOOT, ("fw", "x", "prev", "1:1"))))
    assert [frames.peek(x) for x in j2.frames(1, 1)] == [(1, 1), (2, 1)]
    j2.close()
