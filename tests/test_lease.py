"""Table leases (rmc.serve.lease) on a real database: SQLite and a throwaway PostgreSQL.

A free table is taken by one holder; a held one by nobody else until its lease expires; an
expired one by exactly one of several holders racing for it; a lost lease is seen at the
next renewal; a batch of a table not held is left out by the fence; and, on PostgreSQL, a
taking waits for a batch that holds the lease row (FOR SHARE) to commit. Every wait polls.
"""

from __future__ import annotations

import threading

import pytest
from mqtt_support import wait_until
from pgserver import pg_server  # noqa: F401  (fixture)

from rmc.serve.config import ConfigError, ServeConfig, check
from rmc.serve.lease import Leases
from rmc.serve.store import Batch, FrameRow, Store, TableLeaseRec
from rmc.serve.tables import TableSpec

TIMEOUT = 60.0


def wait_for(cond, what: str, timeout: float = TIMEOUT):
    return wait_until(cond, what, timeout, every=0.02)


def frames(table: str, seqs: range) -> Batch:
    return Batch(frames=[FrameRow(table, 1, s, s, "STAT", f"$1,{table},1,{s},x", s, False)
                         for s in seqs])  # fmt: skip


def _expire(store: Store, table: str) -> None:
    """The table's lease run out, as when its holder stopped renewing long enough: the tests'
    leases last a minute, so that no taking, however slow the machine, outlasts one."""
    from sqlalchemy import update

    with store._write() as conn:
        conn.execute(
            update(TableLeaseRec).where(TableLeaseRec.table_id == table).values(expires_us=0)
        )


def test_a_lease_is_held_by_one_until_it_expires_then_taken_over(db):
    store = Store.open(db)
    try:
        for t in ("T1", "T2"):
            store.ensure_table(t)
        a = Leases(store, "pit-a", lease_s=60)
        b = Leases(store, "pit-b", lease_s=60)
        assert a.take("T1") == 1
        assert b.take("T1") is None  # held
        assert b.take("T2") == 1
        assert a.renew() == set() and set(a.held) == {"T1"}
        rows = a.rows()
        assert (rows["T1"].holder, rows["T1"].epoch, rows["T1"].expired) == ("pit-a", 1, False)
        # pit-a stops renewing: its lease expires, pit-b takes it, with the next epoch
        _expire(store, "T1")
        assert b.take("T1") == 2
        assert a.renew() == {"T1"} and a.held == {}
        assert set(b.held) == {"T1", "T2"}
        # a holder taking back its own lease (a restart) does not wait for it to expire
        c = Leases(store, "pit-b", lease_s=60)
        assert c.take("T2", own=True) == 2
        assert b.renew() == {"T2"}  # the old life lost it: another epoch
        # released: free at once
        c.release()
        assert a.take("T2") == 3
    finally:
        store.close()


def test_the_fence_leaves_out_the_rows_of_tables_not_held(db):
    store = Store.open(db)
    try:
        for t in ("T1", "T2"):
            store.ensure_table(t)
        a = Leases(store, "pit-a", lease_s=60)
        b = Leases(store, "pit-b", lease_s=60)
        assert a.take("T1") == 1 and a.take("T2") == 1
        both = Batch(frames=frames("T1", range(1, 6)).frames + frames("T2", range(1, 6)).frames)
        store.write(both, fence=a.fence)
        assert (store.frame_count("T1"), store.frame_count("T2")) == (5, 5)
        _expire(store, "T2")
        assert b.take("T2") == 2
        # pit-a still believes it holds T2 (no renewal yet): its rows of T2 are left out
        late = Batch(frames=frames("T1", range(6, 9)).frames + frames("T2", range(6, 9)).frames)
        store.write(late, fence=a.fence)
        assert (store.frame_count("T1"), store.frame_count("T2")) == (8, 5)
        assert a.fenced == 3
        store.write(frames("T2", range(6, 9)), fence=b.fence)
        assert store.frame_count("T2") == 8
    finally:
        store.close()


def test_of_several_holders_racing_for_an_expired_lease_one_takes_it(db):
    store = Store.open(db)
    try:
        store.ensure_table("R1")
        # A lease far longer than any taking can last, however slow the disk: a second
        # winner would be a lease taken twice, not one that expired meanwhile. The winner
        # gives it up before the next round.
        holders = [Leases(store, f"pit-{i}", lease_s=60) for i in range(4)]
        for _round in range(10):
            for h in holders:
                h.release()
            assert holders[0].rows().get("R1") is None or holders[0].rows()["R1"].expired
            got: list = [None] * len(holders)
            go = threading.Barrier(len(holders))

            def take(i: int, go=go, got=got) -> None:
                go.wait()
                got[i] = holders[i].take("R1")

            threads = [threading.Thread(target=take, args=(i,)) for i in range(len(holders))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert sum(e is not None for e in got) == 1, got
    finally:
        store.close()


def test_on_postgresql_a_taking_waits_for_the_holders_batch(request):
    """The fence's FOR SHARE: pit-b's taking of an expired lease waits until pit-a's batch,
    fenced (read while pit-a held the table), is committed; so pit-b's start finds it."""
    db = request.getfixturevalue("pg_server").new_database()
    store = Store.open(db)
    try:
        store.ensure_table("P1")
        a = Leases(store, "pit-a", lease_s=0.3)
        b = Leases(store, "pit-b", lease_s=0.3)
        assert a.take("P1") == 1
        with store._write() as conn:
            kept = a.fence(conn, frames("P1", range(1, 4)))
            assert len(kept.frames) == 3
            wait_for(lambda: a.rows()["P1"].expired, "pit-a's lease expired")
            taken: list = []
            t = threading.Thread(target=lambda: taken.append(b.take("P1")))
            t.start()

            def waiting() -> bool:  # pit-b's UPDATE waits for our row lock
                with store._read() as c:
                    return bool(c.exec_driver_sql(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND starts_with(query, 'UPDATE table_lease')").scalar())  # fmt: skip

            wait_for(waiting, "pit-b's taking to wait for the lock")
            assert not taken
            store._write_batch(conn, kept)
        t.join(30)
        assert taken == [2]
        assert store.frame_count("P1") == 3
    finally:
        store.close()


def test_lease_settings_are_checked():
    cfg = ServeConfig(tables=[TableSpec("T1", "socket://x:1")], lease="pit a")
    with pytest.raises(ConfigError, match="lease name"):
        check(cfg)
    cfg = ServeConfig(tables=[TableSpec("T1", "socket://x:1")], standby={"T1"})
    with pytest.raises(ConfigError, match="standby"):
        check(cfg)
