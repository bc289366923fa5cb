"""`rmc settle --trace TRACE | --db URL --table ID --bets BETS.jsonl`: recorded spins settled
with bets kept apart (issue 21), each against the result the checker accepted, in the
decree's order; late bets, bets during an incident refused; bets without a result listed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pgserver import pg_server  # noqa: F401  (a fixture)
from recorded_support import BASE_MS, STEP_MS, TABLE, Table, iso

from rmc.cli import main
from rmc.limits import Table as Limits
from rmc.serve.store import Batch, Store
from rmc.settle_recorded import Placer, from_trace, read_bets
from rmcfw import proto


@pytest.fixture(scope="module")
def night() -> Table:
    """A session: spins 1, 2 with results, 3 voided, 4, an incident on 5 relaunched as 6,
    7 with the ball launched the rotor's way (its result rejected), the last three 8-10."""
    t = Table()
    t.start()
    for _ in range(2):
        t.play()
    t.play(void=proto.V_BALL_OUT)
    t.play()
    t.incident()
    t.play()
    t.with_the_rotor("5")
    t.last_three()
    for _ in range(3):
        t.play()
    t.close()
    return t


@pytest.fixture(scope="module")
def night_trace(night, tmp_path_factory) -> Path:
    return night.trace(tmp_path_factory.mktemp("night") / "night.jsonl")


def jsonl(path: Path, bets: list[dict]) -> str:
    path.write_text("".join(json.dumps(b) + "\n" for b in bets), encoding="utf-8")
    return str(path)


def settle_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(["settle", *argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def refused(doc: dict) -> dict[int, str]:
    return {r["line"]: r["reason"] for r in doc["refused"]}


def unsettled(doc: dict) -> dict[int, str]:
    return {r["line"]: r["reason"] for r in doc["unsettled"]}


def settled(doc: dict) -> dict[int, list[int]]:
    """spin -> the lines of the bets settled on it, in paying order."""
    return {s["spin"]: [p["line"] for p in s["payments"]] for s in doc["spins"]}


def test_bets_by_spin_and_by_time_are_settled_against_the_recorded_results(
    night, night_trace, tmp_path, capsys
):
    r1, r2 = night.result_of(1), night.result_of(2)
    bets = [
        {"spin": 1, "player": "A", "type": "plein", "numbers": [r1], "stake": "10"},
        # by time: before spin 2's « rien ne va plus », after spin 1's result
        {
            "at": iso(night.rx("RNVP", 2) - 1),
            "player": "B",
            "type": "plein",
            "numbers": [r2],
            "stake": "2.50",
        },
        {"spin": 2, "player": "B", "type": "colonne", "index": 1, "stake": "5"},
        # by both: in time for spin 1
        {
            "spin": 1,
            "at": iso(night.rx("LAUNCH", 1)),
            "player": "C",
            "type": "rouge",
            "stake": "10",
        },
    ]
    doc = settle_json(capsys, "--trace", str(night_trace), "--bets", jsonl(tmp_path / "b", bets))
    assert doc["source"] == {"trace": str(night_trace)}
    assert doc["recording"]["table"] == TABLE
    s1, s2 = doc["spins"][0], doc["spins"][1]
    assert (s1["spin"], s1["result"], s2["spin"], s2["result"]) == (1, r1, 2, r2)
    assert s1["result_at"] == iso(night.rx("RES", 1))
    assert s1["bets_closed_at"] == iso(night.rx("RNVP", 1))
    # paying order (decree): per player, winners in the decree's order, plein last
    assert settled(doc)[1] == [1, 4]  # players in order of first appearance
    # B's colonne before the plein when both win, the winner before the loser otherwise
    colonne_wins = r2.isdigit() and int(r2) % 3 == 1
    assert settled(doc)[2] == ([3, 2] if colonne_wins else [2, 3])
    plein = next(p for p in s2["payments"] if p["line"] == 2)
    assert (plein["outcome"], plein["paid"], plein["winnings"]) == ("win", "90.00", "87.50")
    assert plein["announcement"] == f"Plein du {r2} : 35 fois 2,50, 87,50"
    assert s1["payments"][0]["paid"] == "360"
    assert doc["refused"] == [] and doc["unsettled"] == []
    t = doc["totals"]
    assert (t["bets"], t["settled"], t["refused"], t["unsettled"]) == (4, 4, 0, 0)
    staked = sum(float(s["totals"]["staked"]) for s in doc["spins"])
    assert float(t["staked"]) == staked == 27.5


def test_a_bet_placed_after_rien_ne_va_plus_is_refused(night, night_trace, tmp_path, capsys):
    """The late bet: placed at or after its spin's « rien ne va plus » was received."""
    call = night.rx("RNVP", 2)
    bets = [
        {"at": iso(call - 0.001), "player": "A", "type": "rouge", "stake": "10"},  # 1 µs before
        {"at": iso(call), "player": "B", "type": "rouge", "stake": "10"},  # at the call
        {"at": iso(call + 1), "player": "C", "type": "rouge", "stake": "10"},  # after it
        {
            "spin": 2,
            "at": iso(night.rx("RES", 2) + 1),
            "player": "D",
            "type": "noir",
            "stake": "10",
        },
        # for a later spin, but placed while spin 2's bets were closed
        {"spin": 4, "at": iso(call + 1), "player": "E", "type": "noir", "stake": "10"},
    ]
    doc = settle_json(capsys, "--trace", str(night_trace), "--bets", jsonl(tmp_path / "b", bets))
    assert settled(doc) == {2: [1]}
    why = refused(doc)
    assert set(why) == {2, 3, 4, 5}
    assert all("after « rien ne va plus » of spin 2" in w for w in why.values())
    assert iso(call) in why[2]
    assert why[2].startswith("placed while bets were closed") and why[4].startswith("placed after")
    assert "before its outcome" in why[5]
    assert [r["spin"] for r in doc["refused"]] == [2, 2, 2, 4]
    assert doc["refused"][0]["player"] == "B" and doc["refused"][0]["type"] == "rouge"


def test_a_voided_spins_bets_stand_for_the_next_spin(night, night_trace, tmp_path, capsys):
    bets = [
        {"spin": 3, "player": "A", "type": "pair", "stake": "10"},
        {"at": iso(night.rx("RNVP", 3) - 1), "player": "B", "type": "impair", "stake": "10"},
        {"at": iso(night.rx("VOID", 3) + 1), "player": "C", "type": "manque", "stake": "10"},
    ]
    doc = settle_json(capsys, "--trace", str(night_trace), "--bets", jsonl(tmp_path / "b", bets))
    (spin,) = doc["spins"]
    assert spin["spin"] == 4 and spin["carried_from"] == [3]
    assert sorted(p["line"] for p in spin["payments"]) == [1, 2, 3]


def test_bets_during_an_incident_are_refused(night, night_trace, tmp_path, capsys):
    """Decree 1-4: no bet from the incident's « rien ne va plus » to the relaunched spin's
    outcome; the bets placed before it stand for the relaunch."""
    stop = night.rx("RNVP", 5)
    bets = [
        {"at": iso(stop - 1), "player": "A", "type": "rouge", "stake": "10"},  # before: stands
        {
            "at": iso(night.rx("INC", 5, proto.INC_BACK)),
            "player": "B",
            "type": "rouge",
            "stake": "10",
        },
        {"at": iso(night.rx("LAUNCH", 6)), "player": "C", "type": "rouge", "stake": "10"},
        {
            "spin": 6,
            "at": iso(night.rx("RNVP", 6) - 1),
            "player": "D",
            "type": "rouge",
            "stake": "10",
        },
        {"at": iso(night.rx("RES", 6)), "player": "E", "type": "rouge", "stake": "10"},  # after
    ]
    doc = settle_json(capsys, "--trace", str(night_trace), "--bets", jsonl(tmp_path / "b", bets))
    why = refused(doc)
    assert set(why) == {2, 3, 4}
    assert all("incident of spin 5" in w for w in why.values())
    assert settled(doc)[6] == [1]
    assert doc["spins"][0]["carried_from"] == [5]
    # after the relaunched spin's result: for spin 7, whose result is rejected
    assert unsettled(doc) == {
        5: "spin 7: its result 5 was rejected by the checker (ball_with_rotor): it settles nothing"
    }


def test_a_rejected_result_settles_nothing(night, night_trace, tmp_path, capsys):
    bets = [
        {"spin": 7, "player": "A", "type": "plein", "numbers": ["5"], "stake": "10"},
        {"at": iso(night.rx("RNVP", 7) - 1), "player": "B", "type": "impair", "stake": "10"},
    ]
    doc = settle_json(capsys, "--trace", str(night_trace), "--bets", jsonl(tmp_path / "b", bets))
    assert doc["spins"] == []
    why = unsettled(doc)
    assert set(why) == {1, 2}
    assert "result 5 was rejected by the checker (ball_with_rotor)" in why[1]
    assert doc["recording"]["rejected"] == 1
    assert doc["totals"]["paid"] == "0" and doc["totals"]["staked"] == "0"


def test_bets_without_a_result_are_listed_unsettled(night, tmp_path, capsys):
    cut = Table()
    cut.start()
    cut.play()
    cut.play()
    cut.lines = cut.lines[:-3]  # the trace stops before spin 2's result
    path = cut.trace(tmp_path / "cut.jsonl", end=False)
    bets = [
        {"spin": 2, "player": "A", "type": "rouge", "stake": "10"},
        {"spin": 9, "player": "B", "type": "rouge", "stake": "10"},
        {"at": iso(cut.rx("RES", 1) + 1), "player": "C", "type": "rouge", "stake": "10"},
        {"at": iso(cut.t + 60_000), "player": "D", "type": "rouge", "stake": "10"},
    ]
    doc = settle_json(capsys, "--trace", str(path), "--bets", jsonl(tmp_path / "b", bets))
    why = unsettled(doc)
    assert why == {
        1: "spin 2 has no outcome in the recording",
        2: "spin 9 is not in the recording",
        3: "spin 2 has no outcome in the recording",
        4: "spin 2 has no outcome in the recording",
    }
    # the trace was cut (no end record): used, and said
    assert doc["recording"]["notes"][0].startswith("the trace is cut short: no end record")


def test_the_table_maximum_holds_for_a_players_total_within_a_spin(
    night, night_trace, tmp_path, capsys
):
    line = {"spin": 1, "player": "A", "type": "plein", "numbers": ["17"], "stake": "100"}
    bets = [line, line, {**line, "spin": 2}, {**line, "player": "B"}]
    doc = settle_json(capsys, "--trace", str(night_trace), "--bets", jsonl(tmp_path / "b", bets))
    why = refused(doc)
    assert set(why) == {1, 2}
    assert "player A: bets 1, 2 on Plein du 17 total 200, above the table maximum 150" in why[1]
    assert settled(doc) == {1: [4], 2: [3]}


def test_a_session_closed_after_a_void_leaves_its_bets_unsettled(tmp_path, capsys):
    t = Table()
    t.start()
    t.play()
    t.play(void=proto.V_BALL_OUT)
    t.close(reason="fault")
    t.st.open(session=2)
    t.play()
    bets = [{"spin": 2, "player": "A", "type": "rouge", "stake": "10"}]
    path = t.trace(tmp_path / "t.jsonl")
    doc = settle_json(capsys, "--trace", str(path), "--bets", jsonl(tmp_path / "b", bets))
    assert doc["spins"] == []
    assert "the session closed before another spin" in unsettled(doc)[1]


def test_the_same_outcome_from_the_services_database(night, night_trace, tmp_path, capsys):
    bets = [
        {"spin": 1, "player": "A", "type": "plein", "numbers": [night.result_of(1)], "stake": "10"},
        {"at": iso(night.rx("RNVP", 2) + 1), "player": "B", "type": "rouge", "stake": "10"},
        {"spin": 3, "player": "C", "type": "noir", "stake": "10"},
        {"at": iso(night.rx("RNVP", 5) + 1), "player": "D", "type": "noir", "stake": "10"},
        {"spin": 7, "player": "E", "type": "noir", "stake": "10"},
    ]
    path = jsonl(tmp_path / "b", bets)
    db = tmp_path / "rmc.db"
    store = Store.open(f"sqlite:///{db}")
    store.ensure_table(TABLE)
    rows = night.rows()
    store.write(Batch(frames=rows[40:]))  # in any order: the store gives (boot, seq) order
    store.write(Batch(frames=rows[:40]))
    store.close()
    from_db = settle_json(capsys, "--db", f"sqlite:///{db}", "--table", TABLE, "--bets", path)
    from_trace = settle_json(capsys, "--trace", str(night_trace), "--bets", path)
    assert from_db.pop("source") == {"db": f"sqlite:///{db}", "table": TABLE}
    from_trace.pop("source")
    assert from_db == from_trace
    assert len(from_db["spins"]) == 2 and len(from_db["refused"]) == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_database_refusals_are_one_line(backend, night, tmp_path, request, capsys):
    bets = jsonl(tmp_path / "b", [{"spin": 1, "player": "A", "type": "rouge", "stake": "10"}])
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/rmc.db"
        missing = tmp_path / "typo.db"
        assert main(["settle", "--db", str(missing), "--table", TABLE, "--bets", bets]) == 2
        assert capsys.readouterr().err == f"rmc settle: {missing}: no database file {missing}\n"
        assert not missing.exists()  # a reading command creates no database
    else:
        url = request.getfixturevalue("pg_server").new_database()
    store = Store.open(url)
    store.ensure_table(TABLE)
    store.write(Batch(frames=night.rows()))
    store.close()
    assert main(["settle", "--db", url, "--table", "T99", "--bets", bets]) == 2
    err = capsys.readouterr().err
    assert err.endswith(": no table 'T99' in the database: no frame of it is stored\n")
    assert err.count("\n") == 1
    doc = settle_json(capsys, "--db", url, "--table", TABLE, "--bets", bets)
    assert settled(doc) == {1: [1]}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "line 2: not valid JSON: Expecting property name enclosed in double quotes"),
        ('{"player": "A", "type": "rouge", "stake": "10"}', "line 2: a bet names its 'spin' or"),
        ('{"spin": 1, "player": "A", "type": "rouge", "stake": "10.001"}', "line 2: stake 10.001"),
        ('{"spin": 0, "player": "A", "type": "rouge", "stake": "10"}', "line 2: 'spin' must be"),
        ('{"spin": true, "player": "A", "type": "rouge", "stake": "10"}', "line 2: 'spin' must"),
        (
            '{"spin": 1, "spin": 2, "player": "A", "type": "rouge", "stake": "10"}',
            "line 2: duplicated key 'spin'",
        ),
        (
            '{"at": "2024-05-01T21:30:00", "player": "A", "type": "rouge", "stake": "10"}',
            "line 2: 'at' '2024-05-01T21:30:00' has no offset",
        ),
        (
            '{"at": "tonight", "player": "A", "type": "rouge", "stake": "10"}',
            "line 2: 'at' 'tonight' is not an ISO 8601 time",
        ),
        ('{"at": 1e9, "player": "A", "type": "rouge", "stake": "10"}', "line 2: the JSON number"),
        ('{"spin": 1, "player": "A", "type": "rouge", "stake": "1"}', "line 2: stake 1 is below"),
        (
            '{"spin": 1, "player": "A", "type": "rouge", "stake": "10", "hat": 1}',
            "line 2: unknown field(s) 'hat'",
        ),
        ("[1, 2]", "line 2: a bet is a JSON object, not list"),
        (
            '{"spin": 1, "player": "A", "type": "rouge", "stake": "10"} {}',
            "line 2: not valid JSON: extra data at column 59",
        ),
    ],
)
def test_a_bad_line_is_refused_with_its_number(night_trace, tmp_path, capsys, line, reason):
    good = '{"spin": 1, "player": "A", "type": "rouge", "stake": "10"}'
    path = tmp_path / "b.jsonl"
    path.write_text(f"{good}\n{line}\n{good}\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["settle", "--trace", str(night_trace), "--bets", str(path), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"rmc settle: {path} {reason}"), err
    assert err.count("\n") == 1


def test_unusable_input_is_one_line(night, night_trace, tmp_path, capsys):
    bets = jsonl(tmp_path / "b", [{"spin": 1, "player": "A", "type": "rouge", "stake": "10"}])
    changed = tmp_path / "changed.jsonl"
    text = night_trace.read_text().replace('"rx_ms":1714591800500.0', '"rx_ms":1714591800501.0')
    changed.write_text(text)
    headless = tmp_path / "headless.jsonl"
    headless.write_text("\n".join(night_trace.read_text().splitlines()[1:]) + "\n")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"spin": 1, "player": "\xff", "type": "rouge", "stake": "10"}\n')
    cases = [
        (["--trace", str(changed), "--bets", bets], "the trace does not check: line "),
        (["--trace", str(headless), "--bets", bets], "a trace starts with its header"),
        (["--trace", str(tmp_path / "none"), "--bets", bets], "cannot read it"),
        (["--trace", str(night_trace), "--bets", str(tmp_path / "none")], "cannot read"),
        (["--trace", str(night_trace), "--bets", str(binary)], "line 1: not UTF-8 text"),
        (["--trace", str(night_trace)], "--bets BETS.jsonl: give the bets"),
        (["--bets", bets], "give the recording: --trace TRACE, or --db URL --table ID"),
        (["--db", "x.db", "--bets", bets], "--db needs --table ID"),
        (["--trace", str(night_trace), "--table", "T01", "--bets", bets], "--table ID goes"),
        (["--trace", str(night_trace), "--bets", bets, "--result", "17"], "BETS.json and --res"),
        (["--trace", str(night_trace), "--bets", bets, "--limits", "none.toml"], "cannot read"),
    ]
    for argv, reason in cases:
        capsys.readouterr()
        assert main(["settle", *argv]) == 2, argv
        out, err = capsys.readouterr()
        assert out == ""
        assert err.count("\n") == 1 and reason in err, (argv, err)
    # and as a process: the same line, no traceback
    proc = rmc("settle", "--trace", str(changed), "--bets", bets, "--json")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith(f"rmc settle: {changed}: the trace does not check: line ")
    assert proc.stderr.count("\n") == 1


def test_the_readable_statement_prints_user_text_literally(night, night_trace, tmp_path):
    name = "[bold red]Mme [X][/]"
    bets = [
        {
            "spin": 1,
            "player": name,
            "type": "plein",
            "numbers": [night.result_of(1)],
            "stake": "10",
        },
        {"spin": 2, "at": iso(night.rx("RES", 2)), "player": name, "type": "rouge", "stake": "10"},
    ]
    proc = rmc(
        "settle",
        "--trace",
        str(night_trace),
        "--bets",
        jsonl(tmp_path / "b", bets),
        env={**os.environ, "COLUMNS": "250"},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"Spin 1 — {night.result_of(1)}" in out
    assert out.count(name) == 2
    assert "refused (1)" in out and "after « rien ne va plus » of spin 2" in out
    assert "bets 2: settled 1, refused 1, unsettled 0" in out


def test_the_one_result_form_is_unchanged_and_takes_limits_too(tmp_path, capsys):
    bets = tmp_path / "bets.json"
    bets.write_text(
        json.dumps({"bets": [{"player": "A", "type": "plein", "numbers": ["17"], "stake": "10"}]})
    )
    table = tmp_path / "t.toml"
    default = Path(sys.modules["rmc"].__file__).parent / "data" / "table.toml"
    table.write_text(default.read_text().replace('max = "150"', 'max = "5"', 1))
    assert main(["settle", "--result", "17", "--json", str(bets)]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["paid"] == "360"
    for flag in ("--table", "--limits"):
        assert main(["settle", "--result", "17", flag, str(table), str(bets)]) == 2
        assert "above the table maximum 5 for a plein" in capsys.readouterr().err
    argv = ["settle", "--result", "17", "--table", str(table), "--limits", str(table), str(bets)]
    assert main(argv) == 2
    assert "give one" in capsys.readouterr().err
    assert main(["settle", str(bets)]) == 2
    assert "give BETS.json and --result N" in capsys.readouterr().err


def test_bets_from_standard_input(night, night_trace, tmp_path):
    bet = {"spin": 1, "player": "A", "type": "rouge", "stake": "10"}
    proc = rmc(
        "settle",
        "--trace",
        str(night_trace),
        "--bets",
        "-",
        "--json",
        input=json.dumps(bet) + "\n\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["totals"]["settled"] == 1


def test_many_bets_are_each_placed_once(night, night_trace, tmp_path):
    """Read one line at a time and placed as read: each bet settled, refused or left."""
    count = 30_000
    rec = from_trace(night_trace.read_bytes())
    path = tmp_path / "many.jsonl"
    r1 = night.result_of(1)
    with path.open("w") as f:
        for i in range(count):
            spin = 1 + i % 10
            f.write(
                json.dumps(
                    {
                        "spin": spin,
                        "player": f"P{i % 1000}",
                        "type": "plein",
                        "numbers": [r1],
                        "stake": "2",
                    }
                )
                + "\n"
            )
    placer = Placer(rec, Limits.load())
    with path.open("rb") as f:
        for n, bet, spin, at in read_bets(f, Limits.load()):
            placer.place(n, bet, spin, at)
    out = placer.finish()
    assert out.bets == count
    settled_bets = sum(len(g.bets) for g in out.settled)
    assert settled_bets + len(out.refused) + len(out.unsettled) == count
    # 3 lines of 2 a player on a spin (spin 4: 6, with spin 3's), under the maximum 150;
    # spin 7's result is rejected
    assert len(out.unsettled) == count // 10
    assert {g.spin.number for g in out.settled} == {1, 2, 4, 6, 8, 9, 10}


def rmc(*args: str, env: dict | None = None, input: str | None = None):
    return subprocess.run(
        [sys.executable, "-m", "rmc", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        input=input,
        timeout=120,
    )


def test_times_between_frames_are_a_step_apart(night):
    """The helper's clock, on which these tests rely: one frame every STEP_MS."""
    assert night.rx("RES", 1) - night.rx("RNVP", 1) == 2 * STEP_MS


def test_since_and_until_take_a_night_of_a_long_recording(night, night_trace, tmp_path, capsys):
    bets = [
        {"spin": 1, "player": "A", "type": "rouge", "stake": "10"},
        {"spin": 4, "player": "B", "type": "rouge", "stake": "10"},
    ]
    path = jsonl(tmp_path / "b", bets)
    since = iso(night.rx("LAUNCH", 4))
    url = f"sqlite:///{tmp_path}/rmc.db"
    store = Store.open(url)
    store.ensure_table(TABLE)
    store.write(Batch(frames=night.rows()))
    store.close()
    for source in (["--trace", str(night_trace)], ["--db", url, "--table", TABLE]):
        doc = settle_json(capsys, *source, "--bets", path, "--since", since)
        assert settled(doc) == {4: [2]}
        assert unsettled(doc) == {1: "spin 1 is not in the recording"}
    late = str(BASE_MS // 1000 + 3600)
    assert main(["settle", "--db", url, "--table", TABLE, "--bets", path, "--since", late]) == 2
    assert "no frame of table 'T01' received in that window" in capsys.readouterr().err
    assert main(["settle", "--result", "17", "--since", late, path]) == 2
    assert "--since goes with --trace or --db" in capsys.readouterr().err


def test_a_resent_call_is_dated_when_it_was_made_not_when_it_came_again(tmp_path, capsys):
    """Spin 2's « rien ne va plus » was lost on the line and received again after the
    result: bets closed when it was sent, which the frame before it and the firmware's
    milliseconds tell, not when the host finally heard it."""
    t = Table()
    t.start()
    t.play()
    t.play()
    call = t.rx("RNVP", 2)
    lines = [x for x in t.lines if x[1] != call]
    rnvp = next(line for line, rx in t.lines if rx == call)
    resent_at = t.rx("RES", 2) + 40
    t.lines = [*lines, (b"~" + rnvp, resent_at)]
    path = t.trace(tmp_path / "t.jsonl")
    bets = [
        {"at": iso(call - 1), "player": "A", "type": "rouge", "stake": "10"},
        {"at": iso(call + 1), "player": "B", "type": "rouge", "stake": "10"},
        {"spin": 2, "at": iso(call + 100), "player": "C", "type": "rouge", "stake": "10"},
    ]
    doc = settle_json(capsys, "--trace", str(path), "--bets", jsonl(tmp_path / "b", bets))
    assert doc["recording"]["clean"]  # the gap was filled
    assert settled(doc) == {2: [1]}
    assert set(refused(doc)) == {2, 3}
    assert doc["spins"][0]["bets_closed_at"] == iso(call)


def test_a_session_closed_during_an_incident_opens_bets_again(tmp_path, capsys):
    """The chef de table closes the session instead of relaunching (a forced close): the
    next session's bets are taken again, before its first call."""
    t = Table()
    t.start()
    t.play()
    t.incident()
    t.close(reason="incident")
    t.st.open(session=2)
    n = t.play()
    bets = [
        {"at": iso(t.rx("RNVP", n) - 1), "player": "A", "type": "rouge", "stake": "10"},
        {"at": iso(t.rx("INC", 2, proto.INC_BACK)), "player": "B", "type": "rouge", "stake": "10"},
    ]
    path = t.trace(tmp_path / "t.jsonl")
    doc = settle_json(capsys, "--trace", str(path), "--bets", jsonl(tmp_path / "b", bets))
    assert settled(doc) == {n: [1]}
    assert "incident of spin 2" in refused(doc)[2]


def test_instants_are_read_exactly_and_need_their_offset():
    from decimal import Decimal

    from rmc.timestamps import InstantError, format_instant, parse_instant

    assert parse_instant("2024-05-01T21:30:00.25+02:00") == 1_714_591_800_250_000
    assert parse_instant("2024-05-01T19:30:00.25Z") == 1_714_591_800_250_000
    assert parse_instant("1714591800.25") == parse_instant(Decimal("1714591800.25"))
    assert parse_instant(1714591800) == 1_714_591_800_000_000
    assert format_instant(1_714_591_800_250_000) == "2024-05-01T19:30:00.250000Z"
    for bad in ("2024-05-01T21:30:00", "1714591800.1234567", "-5", "1e9", True, "", " 1"):
        with pytest.raises(InstantError):
            parse_instant(bad)
