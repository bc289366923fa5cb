"""`rmc serve` against the virtual board running the firmware: a session opened, announced
and closed with operator commands through the API, spins played, results in the API equal
to the simulator's truth; then the service killed (SIGKILL) at random moments many times
over a long session, with every frame stored exactly once in the end."""

from __future__ import annotations

import json
import random
import threading

import pytest
from cli_support import rmc
from pgserver import pg_server  # noqa: F401  (a fixture)
from serve_support import (
    TABLE,
    Cable,
    EventStream,
    Served,
    Tokens,
    answered,
    board,
    command_with_retry,
    play,
    power_up,
    simulate,
    wait_for,
)

from rmc.demo import deploy as fwdeploy
from rmc.demo.run import truth_outcomes
from rmc.serve.store import Store

# Each test is a class of its own: `make test` (pytest-xdist --dist loadscope) runs the
# classes on different workers, side by side.


@pytest.fixture(scope="module")
def firmware(tmp_path_factory):
    return fwdeploy.build(tmp_path_factory.mktemp("fw") / "mpy")


@pytest.fixture
def db_url(db) -> str:
    """The same tests on the embedded default and on a throwaway PostgreSQL server."""
    return db


def _outcomes(store: Store, voids: list[dict]) -> dict[int, str]:
    out = {}
    for r in store.results(TABLE, last=10_000):
        if r["valid"]:
            out[r["spin"]] = f"result:{r['result']}"
    for v in voids:
        out.setdefault(v["data"]["spin"], f"void:{v['data']['reason']}")
    return out


class TestSession:
    """A whole session through the service, on each database."""

    def test_a_session_through_the_service_matches_the_truth(self, tmp_path, firmware, db_url):
        session, segments = simulate(seed=7, spins=8, scenarios=("same_dir@3",))
        tokens = Tokens.make(tmp_path / "tokens")
        db = db_url
        with board(tmp_path, firmware) as vb:
            power_up(vb, session)
            served = Served(tmp_path, vb.uart_url, db, tokens, key=True).start()
            try:
                chef = served.client("chef")
                wait_for(lambda: chef.table(TABLE)["link"]["frames"] > 0, 60, "the first frames")
                live = EventStream(served.url, served.tokens.names["display"], TABLE).start()

                def order(verb, args):
                    out = chef.command(TABLE, verb, args)
                    assert answered(out), repr(sorted(out.items()))
                    return out

                answers = play(vb, segments, order)
                want = truth_outcomes(session)
                wait_for(
                    lambda: (
                        len(chef.results(TABLE, 100))
                        >= sum(1 for v in want.values() if v.startswith("result"))
                    ),
                    60,
                    "every result",
                )
                results = chef.results(TABLE, 100)
                shown = {r["spin"]: r for r in results}
                for spin, outcome in want.items():
                    if outcome.startswith("result:"):
                        r = shown[spin]
                        assert f"result:{r['result']}" == outcome
                        assert r["at"].endswith("Z") and r["colour"] and r["parity"] and r["half"]
                assert [r["spin"] for r in results] == sorted(shown, reverse=True)  # newest first
                # the live stream carried each result as it came, in order
                streamed = wait_for(lambda: live.of("result", len(results)), 30, "streamed results")
                assert [(e["spin"], e["result"]) for e in streamed] == [
                    (r["spin"], r["result"]) for r in reversed(results)
                ]
                assert live.of("session_open", 1) and live.of("command", 3)
                assert {a["command"] for a in answers} == {"open", "last3", "close"}
                # the commands are on record with who gave them and the table's answer
                cmds = chef.get(f"/api/tables/{TABLE}/commands?last=50")["commands"]
                assert {c["cmd"] for c in cmds} >= {"OPEN", "LAST3", "CLOSE"}
                assert all(c["by"] == "marie" and c["answered_us"] for c in cmds)
                assert all(c["ok"] for c in cmds if c["cmd"] in ("OPEN", "LAST3"))
                # the table's own record of its last games: its RECALL frame comes before the
                # ACK, and is the answer
                recalled = chef.command(TABLE, "recall", {"n": 10})
                assert recalled.get("ok") is True, repr(sorted(recalled.items()))
                games = [g.split(":") for g in recalled["games"].split(";")]
                assert [(int(s), n) for s, n in games][-len(results) :] == [
                    (r["spin"], r["result"]) for r in reversed(results)
                ]
                # a display reads but may not command; a wrong token is refused
                display = served.client("display")
                assert display.results(TABLE, 1)
                from rmc.serve.client import Client, ClientError

                with pytest.raises(ClientError) as e:
                    display.command(TABLE, "last3")
                assert e.value.status == 403
                with pytest.raises(ClientError) as e:
                    Client(served.url, "not-a-token-of-anyone").results(TABLE)
                assert e.value.status == 401
                # the OpenAPI description and the health need no token
                anyone = Client(served.url, None)
                paths = anyone.get("/openapi.json")["paths"]
                assert "/api/tables/{table}/results" in paths and "/api/events" in paths
                assert anyone.get("/api/health")["database"]["ok"] is True
                audit = served.client("engineer").get("/api/audit")["audit"]
                assert {a["status"] for a in audit} >= {401, 403}
            finally:
                assert served.stop() == 0
        with Store.open(db) as store:
            voids = store.events(TABLE, ["void"], 1000)
            assert _outcomes(store, voids) == want
            resume = store.resume(TABLE)
            assert not any(resume.missing.values()), resume.missing
            violations = [e["data"] for e in store.events(TABLE, ["violation"], 1000)]
        # the export is a trace rmc check verifies: the same results, violations and commands
        trace = tmp_path / "export.jsonl"
        p = rmc("export", "--db", db, "--table", TABLE, "-o", str(trace))
        assert p.returncode == 0, p.stderr
        key = tmp_path / "T01.key"
        p = rmc("check", str(trace), "--key-file", str(key), "--json")
        report = json.loads(p.stdout)
        assert report["gaps"] == [] and report["auth_failures"] == 0
        assert [(r["spin"], r["result"]) for r in report["results"]] == [
            (r["spin"], r["result"]) for r in reversed(results)
        ]
        assert sorted(map(str, report["violations"])) == sorted(map(str, reversed(violations)))
        given = [c for c in report["commands"] if c["cmd"] in ("OPEN", "LAST3", "CLOSE")]
        assert [c["cmd"] for c in given] == ["OPEN", "LAST3", "CLOSE"]
        assert all(
            c["by"] == "marie" and c["role"] == "chef" and c["ok"] is not None for c in given
        )
        assert given[0]["ok"] and given[1]["ok"]


class TestKills:
    """The service killed with SIGKILL at random moments, on each database."""

    def test_killed_at_random_moments_loses_and_doubles_nothing(self, tmp_path, firmware, db_url):
        """SIGKILL the service at random moments (between commands and while the board plays),
        restart it on the same database each time: every frame the table sent is stored once,
        the results equal the truth, the commands went through."""
        rnd = random.Random(20261201)
        session, segments = simulate(seed=11, spins=10, scenarios=("ball_out@4",))
        tokens = Tokens.make(tmp_path / "tokens")
        db = db_url
        kills = 0
        with board(tmp_path, firmware) as vb:
            power_up(vb, session)
            served = Served(tmp_path, vb.uart_url, db, tokens, key=True).start()
            stop = threading.Event()
            lock = threading.Lock()

            def killer():
                # while the board plays: kill at a random instant, restart at once
                nonlocal kills
                while not stop.wait(rnd.uniform(0.3, 2.0)):
                    with lock:
                        served.kill()
                        kills += 1
                        served.start()

            def between(i):
                nonlocal kills
                if rnd.random() < 0.5:
                    with lock:
                        served.kill()
                        kills += 1
                        served.start()

            def order(verb, args):
                with lock:  # no kill while a command is on its way
                    out = command_with_retry(served, verb, args)
                assert answered(out), repr(sorted(out.items()))
                return out

            t = threading.Thread(target=killer, daemon=True)
            t.start()
            try:
                play(vb, segments, order, between)
            finally:
                stop.set()
                t.join(30)
            try:
                chef = served.client("chef")
                want = truth_outcomes(session)
                n_results = sum(1 for v in want.values() if v.startswith("result"))
                wait_for(lambda: len(chef.results(TABLE, 1000)) >= n_results, 120, "every result")
                # the table's last frame stored: its STAT answer's top, once nothing is missing
                wait_for(lambda: chef.table(TABLE)["link"]["missing"] == 0, 120, "no gap left")
            finally:
                assert served.stop() == 0
        assert kills >= 5
        with Store.open(db) as store:
            rows = list(store.frames(TABLE))
            keys = [(r.boot, r.seq) for r in rows]
            assert len(keys) == len(set(keys))  # nothing twice
            for boot in {b for b, _ in keys}:
                seqs = sorted(s for b, s in keys if b == boot)
                assert seqs == list(range(seqs[0], seqs[-1] + 1)), f"boot {boot}: a gap"
            voids = store.events(TABLE, ["void"], 1000)
            assert _outcomes(store, voids) == want
            results = store.results(TABLE, last=1000)
            assert len({(r["boot"], r["seq"]) for r in results}) == len(results)
            # each event once: ordinals 0..n-1 per kind
            for kind in ("result", "void", "session_open", "session_close"):
                ns = sorted(e["n"] for e in store.events(TABLE, [kind], 10_000))
                assert ns == list(range(len(ns))), kind


def _stored_once_without_gap(store: Store) -> None:
    keys = [(r.boot, r.seq) for r in store.frames(TABLE)]
    assert len(keys) == len(set(keys))
    for boot in {b for b, _ in keys}:
        seqs = sorted(s for b, s in keys if b == boot)
        assert seqs == list(range(seqs[0], seqs[-1] + 1)), f"boot {boot}: a gap"


class TestOutages:
    """The table's cable pulled out, the database server killed, on each database."""

    def test_a_port_pulled_out_and_a_database_down_lose_nothing(
        self, tmp_path, firmware, db_url, request
    ):
        """The table's cable pulled out and put back while the board plays (the frames sent
        meanwhile are asked again from its journal), and, on PostgreSQL, the database server
        killed and restarted a few seconds later (the rows wait in memory and are written then)."""
        pg = request.getfixturevalue("pg_server") if db_url.startswith("postgresql") else None
        session, segments = simulate(seed=5, spins=10)
        tokens = Tokens.make(tmp_path / "tokens")
        with board(tmp_path, firmware) as vb:
            power_up(vb, session)
            cable = Cable(vb.uart_url)
            served = Served(tmp_path, cable.url, db_url, tokens, key=True).start()
            timers: list[threading.Timer] = []

            def outage(i):
                # while the board plays a segment: its frames meanwhile go nowhere, or wait
                if i % 3 == 1:
                    cable.pull()
                    timers.append(threading.Timer(1.5, cable.plug))
                    timers[-1].start()
                elif i % 3 == 2 and pg is not None:
                    pg.kill()
                    timers.append(threading.Timer(3.0, pg.restart))
                    timers[-1].start()
                for t in timers:
                    t.join(30)  # back before the next command

            def order(verb, args):
                out = command_with_retry(served, verb, args)
                assert answered(out), repr(sorted(out.items()))
                return out

            try:
                play(vb, segments, order, playing=outage)
                chef = served.client("chef")
                want = truth_outcomes(session)
                n_results = sum(1 for v in want.values() if v.startswith("result"))
                wait_for(lambda: len(chef.results(TABLE, 1000)) >= n_results, 120, "every result")
                wait_for(lambda: chef.table(TABLE)["link"]["missing"] == 0, 120, "no gap left")
                link = chef.table(TABLE)["link"]
                assert link["reconnects"] >= 1 and link["resends_asked"] >= 1
                if pg is not None:
                    assert chef.get("/api/health")["database"]["retries"] >= 1
            finally:
                assert served.stop() == 0
                cable.close()
        assert cable.cuts >= 2
        with Store.open(db_url) as store:
            _stored_once_without_gap(store)
            assert _outcomes(store, store.events(TABLE, ["void"], 1000)) == want
