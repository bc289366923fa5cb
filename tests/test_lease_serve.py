"""Two `rmc serve` processes on one PostgreSQL, sharing simulated tables through leases
(rmc.serve.lease); one killed with SIGKILL, the other takes its tables.

Each service is configured with every table: its own pit's first, the other pit's as standby.
Every table is held by exactly one service; the API of each answers for every table (results
from the database, `served_by` for the other's, its live events mirrored from the database);
a command to a table held by the other is refused with the holder's name. The service holding
B1 is killed while the tables stream: the other takes every table it held (their leases
expire: a few seconds) and asks their journals for what it missed. In the end every frame is
stored exactly once, with no gap, and every event once. The killed service restarted takes
nothing back; the survivor stopped cleanly releases its leases, and the other takes them.

A second test runs two services in this process and stalls the renewals of the one serving
the tables: its leases expire, the other takes them while the first still reads and writes
(its rows are left out by the fence), the first drops them at its next renewal, and the
frames are stored once all the same.
Every wait polls.
"""

from __future__ import annotations

import secrets
import time

from mqtt_support import ServeProcess
from pgserver import pg_server  # noqa: F401  (fixture)
from serve_support import EventStream

from rmc.serve.client import Client, ClientError
from rmc.serve.config import ServeConfig
from rmc.serve.lease import LEASE_S, RENEW_S, Elsewhere
from rmc.serve.service import Service
from rmc.serve.simtable import SimSpec, SimTables, table_key
from rmc.serve.store import Store
from rmc.serve.tables import TableRunner, TableSpec

SECRET = bytes(range(32))
TIMEOUT = 180.0
N = 3000  # frames a table
LINE_BPS = 20_000  # ~230 frames a second a table


def wait_for(cond, what: str, timeout: float = TIMEOUT, state=None):
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = cond()
        except ClientError:
            got = None  # a service starting
        if got:
            return got
        if time.monotonic() > deadline:
            seen = f": {state()}" if state is not None else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{seen}")
        time.sleep(0.1)


def held(p: ServeProcess) -> list[str]:
    return sorted(((p.health() or {}).get("leases") or {}).get("held") or [])


def test_two_services_one_killed_the_other_takes_its_tables(request, tmp_path):
    db = request.getfixturevalue("pg_server").new_database()
    pit_a, pit_b = ["A1", "A2"], ["B1", "B2"]
    ids = pit_a + pit_b
    keys = {t: table_key(SECRET, t) for t in ids}
    token = tmp_path / "screen.token"
    token.write_text(secrets.token_hex(16) + "\n")
    chef = tmp_path / "chef.token"
    chef.write_text(secrets.token_hex(16) + "\n")
    operators = "\n".join(
        f'[[operator]]\nname = "{name}"\nrole = "{role}"\ntoken_file = "{path}"\n'
        for name, role, path in (("screen", "display", token), ("marie", "chef", chef))
    )
    specs = [SimSpec(t, key=keys[t], frames=N, line_bps=LINE_BPS, start="go",
                     lose=frozenset({50, 51})) for t in ids]  # fmt: skip
    with SimTables(specs) as sim:
        urls = sim.urls()
        a = ServeProcess(tmp_path / "a", urls, keys, db, name="a", lease="pit-a",
                         standby=set(pit_b), operators=operators)  # fmt: skip
        b = ServeProcess(tmp_path / "b", urls, keys, db, name="b", lease="pit-b",
                         standby=set(pit_a), operators=operators)  # fmt: skip
        services = {"pit-a": a, "pit-b": b}
        try:
            a.start()
            b.start()

            def split() -> dict[str, list[str]]:
                return {name: held(p) for name, p in services.items()}

            wait_for(lambda: sorted(held(a) + held(b)) == ids, "every table held, once",
                     state=split)  # fmt: skip

            def probed(t: str) -> bool:  # its holder's port is open (its STATUS probe came)
                return sim.call(lambda: sim.table(t).commands) > 0

            for t in ids:
                wait_for(lambda t=t: probed(t), f"{t}'s port open")
            for t in ids:
                sim.call(lambda t=t: sim.table(t).start(time.monotonic()))
            with Store.open(db) as watch:
                wait_for(lambda: all(watch.frame_count(t) >= 500 for t in ids), "frames stored")
            owner = {t: name for name, p in services.items() for t in held(p)}
            victim_name = owner["B1"]
            victim = services[victim_name]
            survivor_name = "pit-a" if victim_name == "pit-b" else "pit-b"
            survivor = services[survivor_name]
            theirs = [t for t in ids if owner[t] == victim_name]
            # the API of each answers for every table, those of the other from the database
            for name, p in services.items():
                c = Client.from_token_file(p.url, str(token))
                listed = {x["id"]: x for x in c.get("/api/tables")["tables"]}
                assert sorted(listed) == ids
                for t in ids:
                    if owner[t] != name:
                        assert listed[t]["link"]["served_by"] == owner[t]
                        assert listed[t]["link"]["connected"] is False
                    assert wait_for(lambda c=c, t=t: c.results(t, 5), f"{t}'s results via {name}")
            # a command goes to the table's holder; elsewhere it is refused with its name
            try:
                Client.from_token_file(survivor.url, str(chef)).command("B1", "status")
                raise AssertionError("a command to a table held elsewhere was accepted")
            except ClientError as e:
                assert e.status == 503 and victim_name in str(e), str(e)
            # the survivor's live stream carries the victim's tables' results, from the database
            live = EventStream(survivor.url, str(token)).start()
            wait_for(lambda: [e for e in live.events if e.get("type") == "result"
                              and e.get("table") in theirs and e.get("via") == "database"],
                     "a mirrored result on the live stream")  # fmt: skip

            killed_at = time.monotonic()
            victim.kill()
            wait_for(lambda: held(survivor) == ids, "the survivor holding every table",
                     state=split)  # fmt: skip
            took = time.monotonic() - killed_at
            print(f"{survivor_name} took {theirs} {took:.1f} s after {victim_name} was killed "
                  f"(lease {LEASE_S:g} s, renewed every {RENEW_S:g} s)")  # fmt: skip
            with Store.open(db) as watch:
                wait_for(lambda: all(watch.frame_count(t) == N for t in ids),
                         "every frame stored",
                         state=lambda: {t: watch.frame_count(t) for t in ids})  # fmt: skip
            health = survivor.health() or {}
            assert health["leases"]["holder"] == survivor_name
            # the victim restarted does not take back what the survivor holds
            victim.start()
            assert held(victim) == [] and held(survivor) == ids
            # the survivor stopped cleanly releases its leases: the other takes them at once
            assert survivor.stop() == 0
            wait_for(lambda: held(victim) == ids, "the restarted service holding every table")
        finally:
            stopped = [p.stop() for p in services.values()]
    assert stopped == [0, 0]
    with Store.open(db) as store:
        for t in ids:
            keys_db = [(r.boot, r.seq) for r in store.frames(t)]
            assert sorted(keys_db) == [(1, s) for s in range(1, N + 1)], t
            for kind in ("result", "session_open", "session_close", "last3"):
                ns = sorted(e["n"] for e in store.events(t, [kind], 100_000))
                assert ns == list(range(len(ns))), (t, kind)
            results = store.results(t, last=100_000)
            assert len({(r["boot"], r["seq"]) for r in results}) == len(results) > 0
            rows = store.resume(t)
            assert not any(rows.missing.values()), (t, rows.missing)


def test_a_table_taken_from_a_live_service_is_dropped_and_served_by_the_other(request):
    db = request.getfixturevalue("pg_server").new_database()
    ids = ["C1", "C2"]
    keys = {t: table_key(SECRET, t) for t in ids}
    n = 2000
    specs = [SimSpec(t, key=keys[t], frames=n, line_bps=LINE_BPS, start="go") for t in ids]
    with SimTables(specs) as sim:
        tables = [TableSpec(t, u, keys[t]) for t, u in sim.urls().items()]
        x = Service(ServeConfig(tables=tables, db=db, lease="pit-x")).start()
        y = None
        try:
            assert sorted(x.leases.leases.held) == ids  # free at its start: taken at once
            y = Service(ServeConfig(tables=tables, db=db, lease="pit-y", standby=set(ids)))
            y.start()
            assert y.leases.leases.held == {}
            assert all(isinstance(y.runners[t], Elsewhere) for t in ids)
            wait_for(lambda: all(x.runners[t].health.connected for t in ids), "x connected")
            sim.call(sim.go)
            wait_for(lambda: x.store.frame_count("C2") >= 300, "C2's frames stored by x")
            # x's renewals stall (its thread held up, as by a long pause): its leases expire
            # and y, whose standby tables they are, takes them; x still reads and writes
            renew = x.leases.leases.renew
            x.leases.leases.renew = lambda: set()
            wait_for(lambda: sorted(y.leases.leases.held) == ids, "y taking both tables")
            assert sorted(x.leases.leases.held) == ids  # x does not know yet: its rows fenced
            wait_for(lambda: all(isinstance(y.runners[t], TableRunner) for t in ids), "y serving")
            x.leases.leases.renew = renew  # x renews again: it learns, and drops both
            wait_for(lambda: all(isinstance(x.runners[t], Elsewhere) for t in ids), "x dropping")
            assert all(x.runners[t].holder == "pit-y" for t in ids)
            # the reading thread lets its runners go on its next turn: waited for, not raced
            wait_for(
                lambda: x.leases.leases.held == {} and x.tables.runners == [],
                "x's reader letting both tables go",
            )
            print(f"x's rows left out by the fence: {x.leases.leases.fenced}")

            def stored() -> dict[str, int]:
                x.flush(5)
                y.flush(5)
                return {t: x.store.frame_count(t) for t in ids}

            wait_for(lambda: stored() == {t: n for t in ids}, "every frame stored", state=stored)
        finally:
            x.stop()
            if y is not None:
                y.stop()
    with Store.open(db) as store:
        for t in ids:
            assert sorted((r.boot, r.seq) for r in store.frames(t)) == [
                (1, s) for s in range(1, n + 1)
            ]
            ns = sorted(e["n"] for e in store.events(t, ["result"], 100_000))
            assert ns == list(range(len(ns))) and ns
