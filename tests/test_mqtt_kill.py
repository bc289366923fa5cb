"""`rmc serve --mqtt` killed with SIGKILL, twice, as a real process; `rmc subscribe -o` hears it.

Simulated tables (rmc.serve.simtable, in this process) -> `rmc serve --config ... --mqtt`
(a process, SQLite and a throwaway PostgreSQL) -> Mosquitto -> `rmc subscribe -o` (a
process). The service is killed twice at different moments:

1. while the tables stream and the publisher publishes (frames heard by the subscriber);
2. while the broker is stopped, with rows stored and not published yet (a table started
   only once the broker is down, and its rows waited for in the database): the outbox is
   all that holds them. The broker comes back, then the service.

At the end, every frame is exactly once in the database (no gap) and in each subscriber's
trace (duplicates dropped by key), the traces hold the database's lines, `rmc subscribe`
exits 0 (every table clean) and `rmc check` calls each trace clean with the table's key.
Every wait polls for its condition.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from mqtt_support import (  # noqa: F401  (the `mosquitto` fixture)
    ServeProcess,
    SubscribeProcess,
    mosquitto_fixture,
    trace_frames,
    wait_until,
)
from pgserver import pg_server  # noqa: F401  (fixture)

from rmc.serve.simtable import SimSpec, SimTables, table_key
from rmc.serve.store import Store

SECRET = bytes(range(32))
PREFIX = "casino/kill"
TIMEOUT = 180.0
N = 3000  # frames a table
LINE_BPS = 20_000  # ~230 frames a second a table: ~13 s a table


def wait_for(cond, what: str, timeout: float = TIMEOUT, state=None):
    return wait_until(cond, what, timeout, state, every=0.1)


def test_serve_killed_twice_loses_and_doubles_nothing(mosquitto, db, tmp_path):
    streaming, late = ["K01", "K02"], "K03"
    ids = [*streaming, late]
    keys = {t: table_key(SECRET, t) for t in ids}
    # Each table talks when the test starts it: K01, K02 once the service has its port open
    # (a table's first frames sent while the port is being opened are flushed by the open,
    # and never asked again: the service cannot know a table's boot began before it), K03
    # once the broker is down.
    specs = [SimSpec(t, key=keys[t], frames=N, line_bps=LINE_BPS, start="go",
                     lose=frozenset({50, 51})) for t in ids]  # fmt: skip
    sub = SubscribeProcess(tmp_path, mosquitto.url, PREFIX, keys, "kill-test-subscriber")
    try:
        wait_for(lambda: "rmc subscribe:" in sub.said(), "the subscriber connected", 60,
                 state=sub.said)  # fmt: skip
        with SimTables(specs) as sim:
            served = ServeProcess(tmp_path / "serve", sim.urls(), keys, db, mosquitto.url, PREFIX)
            served.start()
            watch = Store.open(db)  # the test's own reading of the database

            def stored(t: str) -> int:
                return watch.frame_count(t)

            def heard(t: str) -> int:
                return len(trace_frames(sub.trace(t)))

            def start(t: str) -> None:
                sim.call(lambda: sim.table(t).start(time.monotonic()))

            def probed(t: str) -> bool:
                """The service's link has sent the table a command (its STATUS probe of a
                quiet table, every 2 s): its port is open."""
                return sim.call(lambda: sim.table(t).commands) > 0

            def mqtt() -> dict:
                h = served.health()
                return (h or {}).get("mqtt") or {}

            try:
                for t in ids:
                    wait_for(lambda t=t: probed(t), f"the service's port to {t} open")
                for t in streaming:
                    start(t)
                # 1. killed while the tables stream and the publisher publishes
                wait_for(lambda: all(heard(t) >= 300 for t in streaming),
                         "frames heard before the first kill", state=sub.said)  # fmt: skip
                served.kill()
                served.start()
                wait_for(lambda: mqtt().get("connected"), "the restarted service's broker")
                wait_for(lambda: all(heard(t) >= 1000 for t in streaming),
                         "frames heard after the first restart", state=sub.said)  # fmt: skip

                # 2. killed with rows stored and not published: the broker is down
                mosquitto.stop()
                wait_for(lambda: mqtt().get("connected") is False, "the broker seen gone")
                start(late)
                wait_for(lambda: stored(late) >= 500, f"{late}'s frames stored")
                assert heard(late) == 0  # stored, not published: the outbox holds them
                served.kill()
                mosquitto.start()
                served.start()

                def all_stored() -> bool:
                    return all(stored(t) == N for t in ids)

                wait_for(all_stored, "every frame in the database",
                         state=lambda: {t: stored(t) for t in ids})  # fmt: skip
                wait_for(lambda: all(heard(t) == N for t in ids), "every frame in the traces",
                         state=lambda: ({t: heard(t) for t in ids}, mqtt()))  # fmt: skip
            finally:
                watch.close()
                stopped = served.stop()
        assert served.starts == 3 and stopped == 0
        code, summary = sub.stop()
    finally:
        sub.kill()
    assert code == 0, (summary, sub.said()[-3000:])
    every_frame_once(db, ids, sub, summary, tmp_path)


def test_two_services_a_restarted_broker_and_one_service_killed(mosquitto, request, tmp_path):
    """Issue 23's test: two services on one PostgreSQL share four tables (leases), each
    publishes the tables it holds; a subscriber checks every frame. The broker is restarted
    mid-session, then the service holding B1 is killed: the other takes its tables and
    publishes them from where the dead one's cursor was. The subscriber's traces and the
    database both hold every frame exactly once; `rmc check` calls each trace clean."""
    db = request.getfixturevalue("pg_server").new_database()
    pit_a, pit_b = ["A1", "A2"], ["B1", "B2"]
    ids = pit_a + pit_b
    keys = {t: table_key(SECRET, t) for t in ids}
    specs = [SimSpec(t, key=keys[t], frames=N, line_bps=LINE_BPS, start="go",
                     lose=frozenset({50, 51})) for t in ids]  # fmt: skip
    sub = SubscribeProcess(tmp_path, mosquitto.url, PREFIX, keys, "two-services-subscriber")
    try:
        wait_for(lambda: "rmc subscribe:" in sub.said(), "the subscriber connected", 60,
                 state=sub.said)  # fmt: skip
        with SimTables(specs) as sim:
            urls = sim.urls()
            a = ServeProcess(tmp_path / "a", urls, keys, db, mosquitto.url, PREFIX, name="a",
                             lease="pit-a", standby=set(pit_b))  # fmt: skip
            b = ServeProcess(tmp_path / "b", urls, keys, db, mosquitto.url, PREFIX, name="b",
                             lease="pit-b", standby=set(pit_a))  # fmt: skip
            services = {"pit-a": a, "pit-b": b}
            watch = None
            try:
                a.start()
                b.start()
                watch = Store.open(db)

                def held(p: ServeProcess) -> list[str]:
                    return sorted(((p.health() or {}).get("leases") or {}).get("held") or [])

                def heard(t: str) -> int:
                    return len(trace_frames(sub.trace(t)))

                def split() -> dict:
                    return {n: held(p) for n, p in services.items()}

                wait_for(lambda: sorted(held(a) + held(b)) == ids, "every table held once",
                         state=split)  # fmt: skip
                for t in ids:
                    wait_for(lambda t=t: sim.call(lambda: sim.table(t).commands) > 0,
                             f"{t}'s port open")  # fmt: skip
                for t in ids:
                    sim.call(lambda t=t: sim.table(t).start(time.monotonic()))
                wait_for(lambda: all(heard(t) >= 300 for t in ids), "frames heard",
                         state=sub.said)  # fmt: skip
                # the broker restarted mid-session
                mosquitto.stop()
                wait_for(lambda: all(watch.frame_count(t) >= 800 for t in ids),
                         "frames stored while the broker is down")  # fmt: skip
                mosquitto.start()
                wait_for(lambda: all(heard(t) >= 900 for t in ids), "frames heard again",
                         state=sub.said)  # fmt: skip
                # the service holding B1 killed
                owner = {t: n for n, p in services.items() for t in held(p)}
                victim = services[owner["B1"]]
                survivor = services["pit-a" if owner["B1"] == "pit-b" else "pit-b"]
                victim.kill()
                wait_for(lambda: held(survivor) == ids, "the survivor holding every table",
                         state=split)  # fmt: skip
                wait_for(lambda: all(watch.frame_count(t) == N for t in ids),
                         "every frame in the database",
                         state=lambda: {t: watch.frame_count(t) for t in ids})  # fmt: skip
                wait_for(lambda: all(heard(t) == N for t in ids), "every frame in the traces",
                         state=lambda: ({t: heard(t) for t in ids}, sub.said()[-999:]))  # fmt: skip
            finally:
                if watch is not None:
                    watch.close()
                stopped = [p.stop() for p in services.values()]
        code, summary = sub.stop()
    finally:
        sub.kill()
    assert stopped == [0, 0] or stopped.count(0) == 1  # the killed one's status is -9
    assert code == 0, (summary, sub.said()[-3000:])
    every_frame_once(db, ids, sub, summary, tmp_path)


def every_frame_once(db: str, ids, sub, summary: dict, keys: Path) -> None:
    """Each table's N frames once in the database and once in the subscriber's trace, the
    subscriber clean, and `rmc check` clean on its trace with the results the database holds."""
    with Store.open(db) as store:
        db_lines = {t: [r.line for r in store.frames(t)] for t in ids}
        db_results = {t: store.results(t, last=10**6)[::-1] for t in ids}
    for t in ids:
        keys_db = [(int(x.lstrip("~").split(",")[2]), int(x.lstrip("~").split(",")[3]))
                   for x in db_lines[t]]  # fmt: skip
        assert sorted(keys_db) == [(1, s) for s in range(1, N + 1)], f"{t}: in the database"
        lines = trace_frames(sub.trace(t))
        assert len(lines) == len(set(lines)) == N, f"{t}: in the trace"
        assert sorted(lines) == sorted(db_lines[t])
        s = summary["tables"][t]
        assert s["clean"] and s["valid"] == N and not s["gaps"], s
        check = subprocess.run(
            [sys.executable, "-m", "rmc", "check", str(sub.trace(t)),
             "--key-file", str(keys / f"sub-{t}.key"), "--json"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        report = json.loads(check.stdout)
        assert check.returncode == 0, (report["gaps"], report["violations"], report["alerts"])
        assert report["valid"] == N and report["auth_failures"] == 0 and report["unverified"] == 0
        valid = [(r["spin"], r["result"]) for r in db_results[t] if r["valid"]]
        assert [(r["spin"], r["result"]) for r in report["results"]] == valid
