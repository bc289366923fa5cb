"""The firmware's end of the wire and the host's, joined by a lossy in-process line.

Both directions drop and corrupt a few percent of their bytes. Over hundreds of spins, with a
reboot of the table in the middle, the host must get every result, in order, exactly once,
by asking for resends from the firmware's journal.
"""

from __future__ import annotations

import random

import pytest

from rmc.framegen import ScriptedTable
from rmc.link import Link
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

    def __init__(self, tmp_path, key, p: float, seed: int) -> None:
        rng = random.Random(seed)
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
        journal = Journal(self.folder, per_segment=256, segments=64)
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
        b.table.play(void=proto.V_FEW_REVS if spin % 50 == 0 else None)
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
    assert [v["spin"] for v in report.voids] == [50, 100, 150, 200, 250, 300]
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
