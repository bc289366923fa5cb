"""The service's one tables' thread (rmc.serve.tables.Tables) over simulated tables.

Many tables read by one thread, frames lost on their lines and asked again, a line cut and
taken up again, a port read without a file descriptor, commands answered: every frame
stored exactly once, the rules' results equal to what `rmc check` finds in the frames, and
the service stopped at once. Real SQLite, real sockets (rmc.serve.simtable); every wait
polls for its condition.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from rmc.checker import Checker
from rmc.frames import decode
from rmc.record import open_port
from rmc.serve.config import ServeConfig
from rmc.serve.service import Service
from rmc.serve.simtable import SimSpec, SimTables, make_frames, table_key
from rmc.serve.store import Batch, FrameRow, Store
from rmc.serve.tables import TableSpec
from rmcfw import proto

SECRET = bytes(range(32))
FAST = 200_000  # bytes/s a line: fast, so that the tests take little time
TIMEOUT = 120.0


def wait_for(cond, what: str, timeout: float = TIMEOUT, state=None):
    """Poll cond() until true; on time out, say what was awaited and state() (the state)."""
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        if time.monotonic() > deadline:
            seen = f": {state()}" if state is not None else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{seen}")
        time.sleep(0.05)
    return got


def serve(tmp_path: Path, sim: SimTables, opener=open_port) -> Service:
    """The service on the simulated tables, which start talking once it holds every port:
    pyserial's socket:// open() discards what came before it returns, and a table first
    heard at seq 2 is a table whose recording began there (nothing is missing)."""
    specs = [TableSpec(t, u, table_key(SECRET, t)) for t, u in sim.urls().items()]
    cfg = ServeConfig(tables=specs, db=f"sqlite:///{tmp_path / 'rmc.db'}")
    svc = Service(cfg, opener=opener).start()

    def connected() -> bool:
        return all(r.health.connected for r in svc.runners.values())

    wait_for(connected, "every table connected")
    sim.call(sim.go)
    return svc


def stored_everything(svc: Service, frames: dict[str, int]) -> bool:
    assert svc.store is not None
    svc.flush(5)
    return {t: svc.store.frame_count(t) for t in frames} == frames


def wait_stored(svc: Service, frames: dict[str, int]) -> None:
    def state() -> dict:
        assert svc.store is not None
        return {
            t: (svc.store.frame_count(t), svc.table_info(t)["link"])
            for t, n in frames.items()
            if svc.store.frame_count(t) != n
        }

    wait_for(lambda: stored_everything(svc, frames), "every frame", state=state)


def check_table(svc: Service, table: str, n: int) -> None:
    """Every frame once, in order, as the table made them; the results the rules derived
    live are `rmc check`'s on those frames."""
    assert svc.store is not None
    made = [x.rstrip(b"\n") for x in make_frames(table, n, key=table_key(SECRET, table))]
    rows = list(svc.store.frames(table))
    assert [(r.boot, r.seq) for r in rows] == [(1, s) for s in range(1, n + 1)]
    assert [r.line.lstrip("~").encode() for r in rows] == made
    assert svc.store.resume(table).missing == {}
    c = Checker(table_key(SECRET, table), table)
    c.feed_many(made)
    want = c.report()
    got = svc.store.results(table, last=10_000)[::-1]
    assert [(r["spin"], r["result"]) for r in got if r["valid"]] == [
        (x["spin"], x["result"]) for x in want.results
    ]
    assert len([r for r in got if not r["valid"]]) == len(want.rejected)


def test_many_tables_one_thread_every_frame_once(tmp_path):
    n = 400
    specs = [
        SimSpec(f"M{i:02d}", key=table_key(SECRET, f"M{i:02d}"), frames=n, line_bps=FAST,
                lose=frozenset({2, 50 + i, 51 + i, n}) if i % 3 == 0 else frozenset(),
                start="go")
        for i in range(24)
    ]  # fmt: skip
    with SimTables(specs) as sim:
        svc = serve(tmp_path, sim)
        try:
            assert svc.tables is not None
            wait_stored(svc, {s.id: n for s in specs})
            # one thread reads them all (openers and closers come and go)
            names = [t.name for t in threading.enumerate()]
            assert names.count("tables") == 1
            for s in specs:
                check_table(svc, s.id, n)
                link = svc.table_info(s.id)["link"]
                assert link["connected"] and link["missing"] == 0 and link["lost"] == []
                assert (link["resends_asked"] > 0) == bool(s.lose)
        finally:
            svc.stop()
        assert not svc.tables._thread.is_alive()


def test_a_line_cut_is_taken_up_again_and_its_frames_asked_again(tmp_path):
    n = 3000
    spec = SimSpec("C01", key=table_key(SECRET, "C01"), frames=n, line_bps=20_000, start="go")
    with SimTables([spec]) as sim:
        svc = serve(tmp_path, sim)
        try:
            assert svc.store is not None
            wait_for(lambda: svc.store.frame_count("C01") > 200, "frames before the cut")

            def cut() -> None:  # the table's end of the line closes
                t = sim.table("C01")
                if t._transport is not None:
                    t._transport.close()

            sim.call(cut)
            wait_for(lambda: svc.table_info("C01")["link"]["reconnects"] >= 1, "reconnected")
            wait_stored(svc, {"C01": n})
            check_table(svc, "C01", n)
            link = svc.table_info("C01")["link"]
            assert link["connected"] and link["missing"] == 0
        finally:
            svc.stop()


class NoFd:
    """A port that has no file descriptor (as some pyserial URL handlers): polled."""

    def __init__(self, url: str) -> None:
        self.port = open_port(url)

    @property
    def in_waiting(self) -> int:
        return self.port.in_waiting

    def read(self, n: int) -> bytes:
        return self.port.read(n)

    def write(self, data: bytes) -> None:
        self.port.write(data)

    def close(self) -> None:
        self.port.close()


def test_a_port_without_a_file_descriptor_is_polled(tmp_path):
    n = 300
    spec = SimSpec("P01", key=table_key(SECRET, "P01"), frames=n, line_bps=FAST,
                   lose=frozenset({7, 8}), start="go")  # fmt: skip
    with SimTables([spec]) as sim:
        svc = serve(tmp_path, sim, opener=NoFd)
        try:
            wait_stored(svc, {"P01": n})
            check_table(svc, "P01", n)
        finally:
            svc.stop()


def test_commands_go_through_the_one_thread_and_are_answered(tmp_path):
    spec = SimSpec("K01", key=table_key(SECRET, "K01"), frames=50, line_bps=FAST, start="go")
    with SimTables([spec]) as sim:
        svc = serve(tmp_path, sim)
        try:
            assert svc.store is not None
            wait_stored(svc, {"K01": 50})
            runner = svc.runner("K01")
            for _ in range(3):
                out = runner.command("status", proto.C_STATUS, (), "paul", "engineer")
                assert out.get("ok") is True and "error" not in out, out
            svc.flush(5)
            cmds = svc.store.commands("K01")
            assert [c["cmd"] for c in cmds] == [proto.C_STATUS] * 3
            assert all(c["ok"] is True and c["answer_line"] for c in cmds)
            assert len({c["cseq"] for c in cmds}) == 3
        finally:
            svc.stop()
        # stopped: a command is refused at once, with why
        out = runner.command("status", proto.C_STATUS, (), "paul", "engineer")
        assert "not connected" in out["error"]


def test_rows_derived_at_start_from_the_stored_frames_are_written(tmp_path):
    """Killed after a batch of frames was committed and before the rows derived from them
    were: the restarted service derives them from the stored frames, and writes them."""
    table, n = "R01", 400
    key = table_key(SECRET, table)
    db = f"sqlite:///{tmp_path / 'rmc.db'}"
    made = [x.rstrip(b"\n") for x in make_frames(table, n, key=key)]
    frames = [decode(x) for x in made]
    store = Store.open(db)
    rows = [FrameRow(table, f.boot, f.seq, f.ms, f.type, f.line.decode(), 1000 + f.seq, False)
            for f in frames]  # fmt: skip
    store.write(Batch(frames=rows))
    store.close()
    with socket.socket() as s:  # a table out of reach: only the stored frames count
        s.bind(("127.0.0.1", 0))
        dead = f"socket://127.0.0.1:{s.getsockname()[1]}"
    svc = Service(ServeConfig(tables=[TableSpec(table, dead, key)], db=db)).start()
    try:
        assert svc.store is not None and svc.flush(10)
        c = Checker(key, table)
        c.feed_many(made)
        want = c.report()
        got = svc.store.results(table, last=10_000)[::-1]
        assert [(r["spin"], r["result"]) for r in got if r["valid"]] == [
            (x["spin"], x["result"]) for x in want.results
        ]
        assert len(svc.store.events(table, ["session_open"])) == len(
            [f for f in frames if f.type == proto.T_SESSION_OPEN]
        )
    finally:
        svc.stop()
