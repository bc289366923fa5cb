"""The firmware's end of the wire and the host's, joined by a lossy in-process line.

Both directions drop and corrupt a few percent of their bytes. Over hundreds of spins, with a
reboot of the table in the middle, the host must get every result, in order, exactly once,
by asking for resends from the firmware's journal.
"""

from __future__ import annotations

import random

import pytest

from rmc.framegen import ScriptedTable
from rmc.link import ASK_BACK, Link
from rmc.serve.store import LOST, Batch, EventRow, FrameRow, Store
from rmc.serve.tables import TableRunner, TableSpec
from rmc.trace import wheel_id
from rmcfw import proto
from rmcfw.commands import Wire
from rmcfw.frames import Encoder
from rmcfw.journal import Journal

KEY = bytes(range(100, 132))


class Lossy:
    """One direction of the line: some bytes dropped, some with one bit flipped."""

    def __init__(self, rng: random.Random, p_drop: float, p_flip: float) -> None:
        self.rng = rng
        self.p_drop = p_drop
        self.p_flip = p_flip
        self.q = bytearray()
        self.sent = 0
        self.damaged = 0

    def write(self, data) -> None:
        rnd = self.rng.random
        for b in bytes(data):
            self.sent += 1
            r = rnd()
            if r < self.p_drop:
                self.damaged += 1
                continue
            if r < self.p_drop + self.p_flip:
                self.damaged += 1
                b ^= 1 << self.rng.randrange(8)
            self.q.append(b)

    def read(self, n: int) -> bytes:
        out = bytes(self.q[:n])
        del self.q[:n]
        return out


class HostPort:
    def __init__(self, rx: Lossy, tx: Lossy) -> None:
        self.rx, self.tx = rx, tx

    def read(self, n: int) -> bytes:
        return self.rx.read(n)

    def write(self, data: bytes) -> None:
        self.tx.write(data)


class Bench:
    """Virtual time, a table whose frames go through a Wire, a host Link."""

    def __init__(self, tmp_path, key, p: float, seed: int, journal=(256, 64)) -> None:
        rng = random.Random(seed)
        self.journal_size = journal  # (frames a segment, segments)
        self.t = 0.0
        self.up = Lossy(rng, p / 2, p / 2)  # firmware -> host
        self.down = Lossy(rng, p / 2, p / 2)  # host -> firmware
        self.key = key
        self.folder = str(tmp_path / "journal")
        self.boot_no = 0
        self.results: list[tuple[int, int, str]] = []
        self.host = Link(
            HostPort(self.up, self.down),
            key=key,
            clock=lambda: self.t,
            on_result=lambda f: self.results.append((f.boot, f.seq, f.fields["num"])),
        )
        self.table = ScriptedTable(self.emit, seed=seed, revs=6, status_every=3)
        self.reboot()

    def reboot(self) -> None:
        self.boot_no += 1
        per_segment, segments = self.journal_size
        journal = Journal(self.folder, per_segment=per_segment, segments=segments)
        prev = journal.last()
        journal.start()
        self.wire = Wire(
            Encoder("T01", self.boot_no, self.key), journal, self.up.write, key=self.key
        )
        self.wire.ms = int(self.t * 1000)
        self.wire.boot("0.1.0", wheel_id(), "power", prev=prev)

    def emit(self, ftype: str, fields: tuple) -> None:
        self.wire.emit(ftype, fields)
        self.step()

    def step(self, dt: float = 0.05) -> None:
        self.t += dt
        self.wire.ms = int(self.t * 1000)
        self.host.poll()
        data = self.down.read(4096)
        if data:
            self.wire.feed(data)

    def settle(self, max_steps: int = 100000) -> None:
        """Run the line until the host holds every frame the table has sent."""
        for _ in range(max_steps):
            self.step()
            if (
                self.host.complete()
                and self.host._high.get(self.boot_no) == self.wire.enc.seq
                and not self.up.q
            ):
                return
        raise AssertionError(f"link never complete: missing {self.host.missing_ranges()[:5]}")


@pytest.mark.parametrize(("key", "p", "seed"), [(None, 0.02, 1), (KEY, 0.02, 2)])
def test_every_result_arrives_in_order_exactly_once(tmp_path, key, p, seed):
    b = Bench(tmp_path, key, p, seed)
    b.table.open()
    for spin in range(1, 301):
        if spin == 150:
            # Power cut: the table reboots, its journal survives, the host sees BOOT.prev.
            b.reboot()
        if spin == 298:
            b.table.announce_last_three()
        b.table.play(void=proto.V_FEW_REVS if spin % 50 == 25 else None)
    b.table.close()
    b.settle()
    want = [num for _, num in b.table.results]
    got = [num for _, _, num in b.results]
    assert got == want
    assert len(b.results) == len(set((bt, s) for bt, s, _ in b.results)) == 294
    keys = [(bt, s) for bt, s, _ in b.results]
    assert keys == sorted(keys)
    report = b.host.checker.report()
    assert report.gaps == []
    assert [r["result"] for r in report.results] == want
    assert [v["spin"] for v in report.voids] == [25, 75, 125, 175, 225, 275]
    assert report.violations == [], report.violations[:5]
    assert report.reboots == 1
    # The line really was bad in both directions, and the host really had to ask.
    assert report.crc_errors > 100
    assert b.down.damaged > 0 and b.host.stats.resends_asked > 50
    assert b.host.stats.lost == []
    if key:
        assert report.auth_failures == 0 and report.unverified == 0


def test_host_restart_catches_up_with_command_counter(tmp_path):
    b = Bench(tmp_path, KEY, 0.0, 3)
    b.table.open()
    b.table.play()
    b.settle(2000)
    for _ in range(3):
        b.host.send(proto.C_STATUS)
        b.step()
    used = b.host._commander.seq
    assert used >= 3 and b.host.stats.refused == 0
    # A new host process on the same firmware boot starts its command count again at 1.
    b.host = Link(HostPort(b.up, b.down), key=KEY, clock=lambda: b.t)
    b.step()
    b.wire.emit(proto.T_LID, ("locked", 0))
    b.step()
    b.host.send(proto.C_STATUS)
    for _ in range(5):
        b.step()
    assert b.host.stats.refused == 1
    assert b.host._commander.seq >= used
    b.host.send(proto.C_STATUS)
    for _ in range(5):
        b.step()
    assert b.host.stats.refused == 1


def test_journal_evicted_range_is_reported_lost(tmp_path):
    b = Bench(tmp_path, None, 0.0, 4)
    small = Journal(str(tmp_path / "small"), per_segment=4, segments=2)
    small.start()
    b.wire.journal = small
    # Frames the host never sees (the line is unplugged), then the journal moves on.
    real_write = b.wire.write
    b.wire.write = lambda data: None
    for i in range(20):
        b.wire.emit(proto.T_LID, ("locked", i % 2))
    b.wire.write = real_write
    b.wire.emit(proto.T_LID, ("locked", 1))
    b.settle(3000)
    assert b.host.stats.lost, "the evicted frames must be reported lost, not asked forever"
    assert b.host.checker.report().gaps


@pytest.mark.parametrize("from_start", [False, True])
def test_a_link_joining_a_running_boot_asks_for_its_first_frames_only_when_told(
    tmp_path, from_start
):
    # A service (from_start) keeps every frame: a table it first hears at seq 7 of a boot
    # is asked for 1-6, which its journal still holds. A recorder starts where it joined.
    b = Bench(tmp_path, None, 0.0, 6)
    for i in range(5):
        b.emit(proto.T_LID, ("locked", i % 2))  # heard by the host of before
    seen: set[int] = set()
    b.host = Link(
        HostPort(b.up, b.down),
        clock=lambda: b.t,
        on_frame=lambda f: f.seq != proto.SEQ_NONE and seen.add(f.seq),  # (not the ACKs)
        from_start=from_start,
    )
    b.wire.emit(proto.T_LID, ("locked", 1))
    b.settle(3000)
    top = b.wire.enc.seq
    assert top == 7
    assert seen == (set(range(1, top + 1)) if from_start else {top})
    assert not b.host.stats.lost


def test_a_service_stopped_before_a_joined_boots_start_came_asks_for_it_again(tmp_path):
    # A service joins a running boot at seq 7 and asks for 1-6, but stops (its request
    # lost, or killed) before they come. Restarted, it takes the table up from what its
    # database holds and asks for 1-6 again: every frame the journal still holds is kept.
    store = Store.open(f"sqlite:///{tmp_path / 'serve.db'}")
    rows: list[FrameRow] = []

    def keep(line: bytes, f) -> None:
        if f is not None and f.seq != proto.SEQ_NONE:
            rows.append(FrameRow("T01", f.boot, f.seq, f.ms, f.type, line.decode(), 0, f.resent))

    b = Bench(tmp_path, None, 0.0, 6)
    for i in range(5):
        b.emit(proto.T_LID, ("locked", i % 2))  # before the service
    b.host = Link(
        HostPort(b.up, b.down), table="T01", clock=lambda: b.t, on_line=keep, from_start=True
    )
    b.down.p_drop = 1.0  # what the first service asks never reaches the table
    b.wire.emit(proto.T_LID, ("locked", 1))
    for _ in range(3000):
        b.step()
    assert [r.seq for r in rows] == [7] and b.host.missing_ranges()
    store.write(Batch(frames=rows))
    r = store.resume("T01")
    assert r.missing == {1: [1, 2, 3, 4, 5, 6]}
    rows.clear()
    b.down.p_drop = 0.0
    b.host = Link(
        HostPort(b.up, b.down), table="T01", clock=lambda: b.t, on_line=keep, from_start=True
    )
    b.host.resume(r.high, r.missing, r.first_boot)
    b.settle(3000)
    assert sorted(r.seq for r in rows) == [1, 2, 3, 4, 5, 6]
    assert not b.host.stats.lost
    store.close()


def test_frames_a_journal_no_longer_holds_are_asked_for_and_reported_once(tmp_path):
    # The service joins a boot at seq 41 and asks for 1-40; the journal (two segments of 4
    # frames) holds only the last few. The others are reported lost, kept as a LOST event,
    # and a restarted service neither asks for them nor reports them anew: it shows them.
    store = Store.open(f"sqlite:///{tmp_path / 'serve.db'}")
    b = Bench(tmp_path, None, 0.0, 8, journal=(4, 2))
    for i in range(39):
        b.emit(proto.T_LID, ("locked", i % 2))  # before the service (after the BOOT)
    spec = TableSpec("T01", "-", None)
    runner = TableRunner(spec, store.resume("T01"))
    runner.link.port, runner.link.clock = HostPort(b.up, b.down), lambda: b.t
    b.host = runner.link
    b.emit(proto.T_LID, ("locked", 1))
    b.settle(3000)
    lost = runner.link.stats.lost
    assert len(lost) == 1 and lost[0][:2] == [1, 1] and 30 < lost[0][2] < 40
    runner.tick(b.t)
    store.write(runner.out)
    r = store.resume("T01")
    assert r.lost == lost and r.missing == {}
    again = TableRunner(spec, r)
    assert again.link.stats.lost == lost and again.link.missing_ranges() == []
    again.tick(b.t)
    assert not again.out.events  # told once
    odd = EventRow("T01", LOST, 1, 1, 1, {"boot": "1", "first": 2})  # not a row of ours
    store.write(Batch(events=[odd]))
    assert store.resume("T01").lost == lost
    store.close()


def test_a_long_boot_joined_late_is_asked_only_for_what_a_journal_can_hold(tmp_path):
    # A service joins a boot at seq 1,000,000: no journal holds the first 934,463 of them
    # (rmc.link.ASK_BACK). They are reported lost at once, not listed one by one; the last
    # ASK_BACK are asked for. A restarted service asks for no more.
    enc = Encoder("T01", 3, None, seq=999_999)
    link = Link(None, table="T01", from_start=True)
    link.receive(bytes(enc.frame(proto.T_LID, ("locked", 1))))
    top = 1_000_000
    assert link.stats.lost == [[3, 1, top - ASK_BACK - 1]]
    ranges = link.missing_ranges()  # (in pieces of a RESEND's size)
    assert ranges[0][:2] == [3, top - ASK_BACK] and ranges[-1][2] == top - 1
    assert sum(b - a + 1 for _, a, b in ranges) == ASK_BACK
    store = Store.open(f"sqlite:///{tmp_path / 'serve.db'}")
    line = bytes(enc.frame(proto.T_LID, ("locked", 0), seq=top)).decode().rstrip("\n")
    store.write(Batch(frames=[FrameRow("T01", 3, top, 0, proto.T_LID, line, 0, False)]))
    r = store.resume("T01")
    assert r.missing == {3: list(range(top - ASK_BACK, top))}
    store.close()


# --- one RESEND at a time, on a line paced like the board's UART ---


class Paced:
    """The firmware's Wire and a host Link on a line paced at `baud` both ways, in 1 ms
    passes of virtual time. The Wire's room is the board's (board_pico._tx_room): resent
    frames only while less than 512 bytes wait on the line, at most 256 a pass. The host
    polls every `poll_ms`. Filters drop chosen lines: `cut_up` (firmware -> host),
    `cut_down` (host -> firmware); `hold` stops the firmware serving RESENDs."""

    def __init__(self, tmp_path, baud: int = 115200, poll_ms: int = 5) -> None:
        self.ms = 0
        self.bytes_per_ms = baud / 10 / 1000  # 8N1
        self.poll_ms = poll_ms
        self.up = bytearray()  # on the line to the host, oldest first
        self.down = bytearray()
        self.rx = bytearray()  # arrived at the host, not read yet
        self._up_credit = 0.0
        self._down_credit = 0.0
        self.plugged = True
        self.hold = False
        self.cut_up = lambda line: False
        self.cut_down = lambda line: False
        self.resends: list[tuple[float, bytes]] = []  # (when, command) written by the host
        self.acks: list[tuple[float, dict]] = []  # (when, fields) RESEND ACKs received
        journal = Journal(str(tmp_path / "journal"), per_segment=256, segments=16)
        journal.start()
        self.wire = Wire(Encoder("T01", 1, None), journal, self._tx, room=self._room)
        self.host = Link(self, clock=lambda: self.ms / 1000, on_frame=self._frame)

    # the host's port
    def read(self, n: int) -> bytes:
        out = bytes(self.rx[:n])
        del self.rx[:n]
        return out

    def write(self, data: bytes) -> None:
        if b",RESEND," in data:
            self.resends.append((self.ms / 1000, bytes(data)))
        if not self.cut_down(bytes(data)):
            self.down.extend(data)

    def _frame(self, f) -> None:
        if f.type == proto.T_ACK and f.fields[proto.K_CMD] == proto.C_RESEND:
            self.acks.append((self.ms / 1000, f.fields))

    # the firmware's line
    def _tx(self, data) -> None:
        if self.plugged and not self.cut_up(bytes(data)):
            self.up.extend(data)

    def _room(self) -> int:
        if self.hold:
            return 0
        return max(0, min(256, 512 - len(self.up)))

    def step(self) -> None:
        self.ms += 1
        self.wire.ms = self.ms
        self._up_credit += self.bytes_per_ms
        n = int(self._up_credit)
        self._up_credit -= n
        self.rx.extend(self.up[:n])
        del self.up[:n]
        self._down_credit += self.bytes_per_ms
        n = int(self._down_credit)
        self._down_credit -= n
        data = bytes(self.down[:n])
        del self.down[:n]
        if data:
            self.wire.feed(data)
        self.wire.pump()
        if self.ms % self.poll_ms == 0:
            self.host.poll()

    def run(self, seconds: float, until=lambda: False) -> None:
        for _ in range(int(seconds * 1000)):
            self.step()
            if until():
                return

    def gap(self, frames: int) -> None:
        """A few frames the host sees, `frames` it misses (unplugged), then one it sees."""
        for i in range(3):
            self.wire.emit(proto.T_LID, ("locked", i % 2))
            self.run(0.05)
        self.plugged = False
        for i in range(frames):
            self.wire.emit(proto.T_LID, ("locked", i % 2))
        self.plugged = True
        self.wire.emit(proto.T_LID, ("locked", 1))

    def done(self) -> bool:
        return self.host.complete() and self.host._high.get(1) == self.wire.enc.seq

    def busy(self) -> int:
        return sum(1 for _, a in self.acks if a[proto.K_DETAIL] == proto.A_BUSY)


def test_next_resend_waits_for_the_ack_then_goes_at_once(tmp_path):
    # 9600 baud: the first RESEND's 200 frames take ~8 s, far beyond retry_s.
    b = Paced(tmp_path, baud=9600)
    b.gap(300)
    b.run(30, until=lambda: len(b.acks) == 1)
    assert len(b.acks) == 1, "the first RESEND was never answered"
    t_ack, ack = b.acks[0]
    assert ack[proto.K_OK] == "1" and ack[proto.K_COUNT] == "200"
    first = b.resends[0][0]
    assert t_ack - first > 5 * b.host.retry_s
    # Its answer was never cut short by a second RESEND...
    assert [t for t, _ in b.resends if t < t_ack] == [first]
    # ...and the next goes as soon as the ACK is in.
    b.run(0.1, until=lambda: len(b.resends) > 1)
    assert len(b.resends) == 2 and b.resends[1][0] - t_ack <= b.poll_ms / 1000
    assert b"seq=204," in b.resends[1][1]  # the gap starts at seq 4: 204 on
    b.run(60, until=b.done)
    assert b.done() and b.busy() == 0 and b.host.stats.refused == 0


def test_lost_resend_is_sent_again_after_its_answer_s(tmp_path):
    b = Paced(tmp_path)
    lost: list[bytes] = []

    def cut_first(line: bytes) -> bool:
        if b",RESEND," in line and not lost:
            lost.append(line)
            return True
        return False

    b.cut_down = cut_first
    b.gap(300)
    b.run(2, until=lambda: len(b.resends) > 1)
    assert lost and len(b.resends) == 2
    waited = b.resends[1][0] - b.resends[0][0]
    # No second RESEND while the first might still be answered, none long after.
    assert waited > 2 * b.host.min_interval_s
    assert b.host.answer_s <= waited <= b.host.answer_s + b.poll_ms / 1000
    b.run(10, until=b.done)
    assert b.done() and b.busy() == 0


def test_lost_ack_does_not_stall_the_link(tmp_path):
    b = Paced(tmp_path)
    dropped: list[bytes] = []

    def cut_first_ack(line: bytes) -> bool:
        if b",ACK," in line and b"cmd=RESEND" in line and not dropped:
            dropped.append(line)
            return True
        return False

    b.cut_up = cut_first_ack
    last_resent = [0.0]
    on_frame = b.host.on_frame

    def frame(f) -> None:
        if f.resent:
            last_resent[0] = b.ms / 1000
        on_frame(f)

    b.host.on_frame = frame
    b.gap(300)
    b.run(5, until=lambda: bool(dropped))
    assert dropped, "the first RESEND was never served to its end"
    assert len(b.resends) == 1  # its answer (200 frames, ~0.8 s) was not cut short
    # The next waits answer_s of silence for the ACK that never comes, not for ever.
    b.run(1, until=lambda: len(b.resends) > 1)
    assert len(b.resends) == 2
    waited = b.resends[1][0] - last_resent[0]
    assert b.host.answer_s <= waited <= b.host.answer_s + b.poll_ms / 1000
    b.run(10, until=b.done)
    assert b.done() and b.busy() == 0
    # what the lost ACK's RESEND asked is not kept for ever (a night on a bad line)
    b.run(1, until=lambda: len(b.acks) == len(b.resends) - 1)
    assert len(b.acks) == len(b.resends) - 1 and b.host._resends == {}


@pytest.mark.parametrize("live_every_ms", [0, 100])
def test_big_gap_caught_up_without_cutting_resends_short(tmp_path, live_every_ms):
    """495 frames missed at 115200 baud: three RESENDs, each served whole, none busy."""
    b = Paced(tmp_path)
    b.gap(495)
    start = b.ms
    while not b.done() and b.ms - start < 10_000:
        if live_every_ms and (b.ms - start) % live_every_ms == 0:
            b.wire.emit(proto.T_LID, ("locked", 0))  # the table goes on meanwhile
        b.step()
    assert b.done(), b.host.missing_ranges()[:3]
    took = (b.ms - start) / 1000
    b.run(0.1)  # the last ACK, after the last frame
    assert len(b.resends) == 3 and b.busy() == 0 and b.host.stats.refused == 0
    assert [a[proto.K_COUNT] for _, a in b.acks] == ["200", "200", "95"]
    assert took < 3.0
