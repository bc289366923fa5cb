"""Simulated tables (rmc.serve.simtable): the real wire over loopback sockets.

The host's own link (rmc.link.Link, through pyserial's socket:// as `rmc record` opens it)
reads a simulated table that loses frames on its line, asks for them again and gets exactly
them; a raw RESEND gets exactly the frames it names; the frames pass the checker with the
table's key (and fail it with another). Every wait polls for its condition: nothing here
depends on how fast the machine is.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmc.checker import Checker
from rmc.link import Link
from rmc.record import _Port, open_port
from rmc.serve.simtable import (
    SimSpec,
    SimTables,
    make_frames,
    scripted_frames,
    table_key,
)
from rmcfw import frames as fw
from rmcfw import proto
from rmcfw.commands import Commander

KEY = bytes(range(32))
FAST = 1_000_000  # bytes/s: a fast line, so that the tests take little time
TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[1]


def wait_for(cond, what: str, timeout: float = TIMEOUT, step=None):
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        if step is None:
            time.sleep(0.02)


def seq_of(line: bytes) -> int:
    return int(line.lstrip(b"~").split(b",", 4)[3])


class Reader:
    """A raw host on a table's socket: lines as they come."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("socket://").rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        self.buf = b""

    def line(self) -> bytes:
        while b"\n" not in self.buf:
            data = self.sock.recv(65536)
            assert data, "the table closed the line"
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def send(self, line: bytes) -> None:
        self.sock.sendall(line)

    def close(self) -> None:
        self.sock.close()


def test_the_link_asks_again_for_lost_frames_and_gets_exactly_them():
    n = 700  # more than a session: sessions 1 and 2
    lost = frozenset({1, 5, 17, 18, 19, 300, n})  # the first and the last too
    spec = SimSpec("B001", key=KEY, frames=n, line_bps=FAST, lose=lost)
    with SimTables([spec]) as sim:
        got: list[bytes] = []
        seqs: set[int] = set()

        def on_line(line: bytes, f) -> None:
            got.append(line)
            if f is not None and f.seq:
                seqs.add(f.seq)

        port = _Port(open_port(sim.url("B001")))
        # a host that knows the boot from its start (the first frame is lost), as a
        # service resumed from its store: seq 1 on is expected
        link = Link(port, key=KEY, table="B001", on_line=on_line, idle_s=0.2)
        link.resume({1: 0}, {}, 1)
        try:
            wait_for(
                lambda: len(seqs) == n and link.complete(),
                "every frame, the lost ones asked again",
                step=link.poll,
            )
        finally:
            port.port.close()
        sent = sim.call(sim.table("B001").sent_ns)
        assert sim.call(sim.sent_ns) == {("B001", b, q): t for (b, q), t in sent.items()}
    expected = make_frames("B001", n, key=KEY)
    frames = [x for x in got if x[:1] in (b"$", b"~") and b",ACK," not in x]
    by_seq: dict[int, list[bytes]] = {}
    for line in frames:
        by_seq.setdefault(seq_of(line), []).append(line)
    assert sorted(by_seq) == list(range(1, n + 1))
    for seq, lines in by_seq.items():
        for line in lines:
            assert line.lstrip(b"~") == expected[seq - 1].rstrip(b"\n"), seq
        first = lines[0]
        if seq in lost:
            assert first.startswith(b"~"), f"seq {seq} was lost: it can only come resent"
        else:
            assert not first.startswith(b"~")
    resent = {seq_of(x) for x in frames if x.startswith(b"~")}
    assert lost <= resent and resent <= lost  # only what was asked: what was missing
    assert link.stats.resends_asked >= 1 and link.stats.lost == []
    # every live frame has its send time, in order
    assert sorted(sent) == [(1, s) for s in range(1, n + 1)]
    times = [sent[(1, s)] for s in range(1, n + 1)]
    assert times == sorted(times)
    # what the host got passes the checker with the table's key
    c = Checker(KEY, "B001")
    c.feed_many(got)
    r = c.report()
    assert r.clean, r.to_json()
    assert r.valid == n and r.resent == len(resent) and r.gaps == []
    assert r.auth_failures == 0


def test_a_resend_gets_exactly_the_frames_it_names():
    n = 60
    with SimTables([SimSpec("B002", key=KEY, frames=n, line_bps=FAST)]) as sim:
        host = Reader(sim.url("B002"))
        try:
            live = [host.line() for _ in range(n)]
            assert [seq_of(x) for x in live] == list(range(1, n + 1))
            cmd = Commander("B002", KEY)
            only = "3;7-9;20"
            host.send(
                cmd.line(
                    proto.C_RESEND,
                    ("boot", 1, "seq", 3, proto.K_LAST, 20, proto.K_ONLY, only),
                    boot=1,
                )
            )
            answer = []
            while True:
                line = host.line()
                if b",ACK," in line:
                    ack = fw.decode(line, key=KEY)
                    break
                answer.append(line)
            assert [seq_of(x) for x in answer] == [3, 7, 8, 9, 20]
            assert all(x.startswith(b"~") for x in answer)
            assert [x[1:] for x in answer] == [live[s - 1] for s in (3, 7, 8, 9, 20)]
            assert ack.fields["cmd"] == proto.C_RESEND and ack.fields["cseq"] == "1"
            assert ack.fields[proto.K_OK] == "1" and ack.fields[proto.K_COUNT] == "5"
            # STATUS: its ACK tells the last seq sent
            host.send(cmd.line(proto.C_STATUS, (), boot=1))
            ack = fw.decode(host.line(), key=KEY)
            assert ack.type == proto.T_ACK and ack.fields[proto.K_TOP] == str(n)
        finally:
            host.close()


def test_frames_made_ahead_are_the_frames_made_as_sent():
    n = 80
    made = make_frames("B003", n, key=KEY)
    specs = [
        SimSpec("B003", key=KEY, frames=n, line_bps=FAST, lines=made),
        SimSpec("B004", key=KEY, frames=n, line_bps=FAST),  # made as it goes
    ]
    with SimTables(specs) as sim:
        hosts = {t: Reader(sim.url(t)) for t in ("B003", "B004")}
        try:
            a = [hosts["B003"].line() + b"\n" for _ in range(n)]
            b = [hosts["B004"].line() for _ in range(n)]
        finally:
            for h in hosts.values():
                h.close()
    assert a == made
    assert [x + b"\n" for x in b] == make_frames("B004", n, key=KEY)


def test_a_forged_command_shifts_the_frames_made_ahead_and_the_stream_stays_whole():
    # The wire numbers a TAMP frame of its own: the frames made ahead are made again, one
    # seq later, and the stream stays gapless and clean but for the tamper it reports.
    n = 120
    made = make_frames("B005", n, key=KEY)
    with SimTables(
        [SimSpec("B005", key=KEY, frames=n, line_bps=FAST, lines=made, start="go")]
    ) as sim:
        host = Reader(sim.url("B005"))
        try:
            forged = Commander("B005", b"another key, not the table's...").line(
                proto.C_STATUS, (), boot=1
            )
            host.send(forged)
            first = host.line()  # its refusal (sent at once: the line is idle)
            sim.call(sim.go)
            lines = [first] + [host.line() for _ in range(n + 1)]
        finally:
            host.close()
    ack = fw.decode(lines[0], key=KEY)
    assert ack.type == proto.T_ACK and ack.fields[proto.K_DETAIL] == proto.A_AUTH
    frames = [fw.decode(x, key=KEY) for x in lines[1:]]
    assert [f.seq for f in frames] == list(range(1, n + 2))
    assert frames[0].type == proto.T_TAMPER
    # the same frames after it, each one seq later
    assert [(f.type, f.fields) for f in frames[1:]] == [
        (g.type, g.fields) for g in (fw.decode(x) for x in made)
    ]
    c = Checker(KEY, "B005")
    c.feed_many(lines)
    r = c.report()
    assert r.valid == n + 1 and r.gaps == [] and r.violations == [] and r.tamper


def test_a_fleet_of_sessions_passes_the_checker_with_each_tables_key():
    secret = b"fleet secret"
    for table in ("B010", "B011"):
        key = table_key(secret, table)
        lines = make_frames(table, 2000, key=key)  # three sessions and more
        c = Checker(key, table)
        c.feed_many(lines)
        r = c.report()
        assert r.clean, r.to_json()
        assert r.valid == 2000 and len(r.results) > 60
        # another table's key: every frame fails its tag
        other = Checker(table_key(secret, "B999"), table)
        other.feed_many(lines[:50])
        assert other.report().auth_failures == 50
    # the scripted stream is the same however far it is read
    gen = scripted_frames("B010", key=table_key(secret, "B010"))
    assert [next(gen) for _ in range(30)] == make_frames("B010", 30, key=table_key(secret, "B010"))


def test_make_frames_keeps_them_in_its_cache(tmp_path):
    a = make_frames("B020", 100, key=KEY, cache=tmp_path)
    assert a == make_frames("B020", 100, key=KEY)
    (path,) = tmp_path.iterdir()
    assert path.read_bytes() == b"".join(a)
    assert make_frames("B020", 70, key=KEY, cache=tmp_path) == a[:70]  # a prefix of it
    assert make_frames("B020", 150, key=KEY, cache=tmp_path)[:100] == a  # made longer
    assert len(path.read_bytes().splitlines()) == 150
    assert make_frames("B020", 40, key=None, cache=tmp_path) != a[:40]  # another key
    assert len(list(tmp_path.iterdir())) == 2
    # a file the script no longer makes (a changed generator, a damaged file) is made again
    path.write_bytes(b"".join([a[1], a[0], *a[2:]]))
    assert make_frames("B020", 100, key=KEY, cache=tmp_path) == a
    assert path.read_bytes() == b"".join(a)


def test_the_program_serves_its_tables_and_writes_the_send_times(tmp_path):
    sent = tmp_path / "sent.json"
    cmd = [
        sys.executable,
        "-m",
        "rmc.serve.simtable",
        "--tables",
        "2",
        "--frames",
        "30",
        "--key",
        KEY.hex(),
        "--per-table",
        "--baud",
        "2000000",
        "--go",
        "--sent",
        str(sent),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "host")}
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None and p.stdin is not None
        urls = json.loads(p.stdout.readline())["tables"]
        assert sorted(urls) == ["B001", "B002"]
        hosts = {t: Reader(u) for t, u in urls.items()}
        p.stdin.write("go\n")
        p.stdin.flush()
        got = {t: [h.line() for _ in range(30)] for t, h in hosts.items()}
        done = json.loads(p.stdout.readline())
        assert done["done"] and done["frames"] == 60
        for t, lines in got.items():
            c = Checker(table_key(KEY, t), t)
            c.feed_many(lines)
            assert c.report().clean and c.report().valid == 30
        times = json.loads(sent.read_text())
        assert {t: (v["boot"], len(v["t_ns"])) for t, v in times.items()} == {
            "B001": (1, 30),
            "B002": (1, 30),
        }
        assert all(t > 0 for v in times.values() for t in v["t_ns"])
        for h in hosts.values():
            h.close()
        p.stdin.close()
        assert p.wait(TIMEOUT) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_bad_arguments_get_a_reason():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "host")}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmc.serve.simtable",
            "--tables",
            "2",
            "--frames",
            "3",
            "--key",
            "xyz",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--key" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "rmc.serve.simtable", "--tables", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert p.returncode == 2 and "--duration or --frames" in p.stderr


@pytest.mark.parametrize("rate", [None, 150.0])
def test_the_line_is_paced(rate):
    # Bounds that hold however slow the machine is (a late loop sends less, never more):
    # the bytes sent by a frame's send time fit in the line's rate since the start (plus the
    # frame that overdraws it), and so do the frames at `rate`.
    bps, n = 20_000, 150
    spec = SimSpec("B030", key=KEY, frames=n, line_bps=bps, rate=rate)
    with SimTables([spec]) as sim:
        host = Reader(sim.url("B030"))
        try:
            lines = [host.line() for _ in range(n)]
        finally:
            host.close()
        t = sim.call(sim.table("B030").sent_times)
        t0 = sim.tables["B030"].t0_ns
    sizes = [len(x) + 1 for x in lines]
    assert t0 and len(t) == n and t[0] >= t0
    for i in range(n):
        elapsed = (t[i] - t0) / 1e9
        assert sum(sizes[: i + 1]) <= elapsed * bps + max(sizes), i
        if rate is not None:
            assert i + 1 <= elapsed * rate + 1, i
