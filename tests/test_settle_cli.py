"""`rmc settle` as other tools call it: arguments, JSON output, exit status, messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources

import pytest

from rmc.cli import main

BETS = {
    "bets": [
        {"player": "A", "type": "plein", "numbers": ["17"], "stake": "10"},
        {"player": "B", "type": "douzaine", "index": 2, "stake": "20"},
        {"player": "A", "type": "rouge", "stake": "5", "chip": "plaque"},
    ]
}


@pytest.fixture
def bets_file(tmp_path):
    def write(doc=BETS, name="bets.json"):
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return str(path)

    return write


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_json_statement(capsys, bets_file) -> None:
    status, out, err = run(capsys, "settle", "--result", "17", "--json", bets_file())
    assert status == 0, err
    doc = json.loads(out)
    assert doc["result"] == "17"
    assert doc["announcement"] == "17, noir, impair et manque"
    assert doc["totals"] == {
        "staked": "35",
        "paid": "420",
        "house": "-385",
        "partage_kept": "0",
    }
    first, second, third = doc["payments"]
    assert first == {
        "player": "A",
        "bet_index": 0,
        "type": "plein",
        "numbers": ["17"],
        "stake": "10",
        "chip": "couleur",
        "exception": False,
        "outcome": "win",
        "paid": "360",
        "winnings": "350",
        "announcement": "Plein du 17 : 35 fois 10, 350",
    }
    # A's losing rouge comes after A's winners, before player B.
    assert (second["player"], second["bet_index"], second["outcome"], second["paid"]) == (
        "A",
        2,
        "lose",
        "0",
    )
    assert second["announcement"] is None
    assert (third["player"], third["type"], third["index"], third["paid"]) == (
        "B",
        "douzaine",
        2,
        "60",
    )
    assert third["announcement"] == "Deuxième douzaine : 2 fois 20, 40"


def test_readable_statement(capsys, bets_file) -> None:
    status, out, _ = run(capsys, "settle", "--result", "0", bets_file())
    assert status == 0
    assert "Résultat : Zéro" in out
    assert "Rouge : partage, la moitié de 5, 2,5 (plaque)" in out
    assert "house 32.5" in out


@pytest.mark.parametrize(
    ("doc", "args", "needle"),
    [
        (
            {"bets": [{"player": "A", "type": "quinte", "stake": "5"}]},
            [],
            "bet 0: unknown bet type",
        ),
        (
            {
                "bets": [
                    BETS["bets"][0],
                    {"player": "A", "type": "cheval", "numbers": ["1", "5"], "stake": "5"},
                ]
            },
            [],
            "bet 1: 1-5 is not a cheval",
        ),
        (
            {"bets": [{"player": "A", "type": "rouge", "stake": "-5"}]},
            [],
            "bet 0: stake '-5' is not positive",
        ),
        (
            {"bets": [{"player": "A", "type": "rouge", "stake": "9000"}]},
            [],
            "bet 0: stake 9000 is above",
        ),
        (
            {
                "bets": [
                    {
                        "player": "A",
                        "type": "plein",
                        "numbers": ["1"],
                        "stake": "5",
                        "chip": "plaque",
                    }
                ]
            },
            [],
            "bet 0: a plaque is refused on a multiple chance",
        ),
        ('{"bets": [{"player": "A",', [], "not valid JSON"),
        (BETS, ["--result", "37"], "unknown result '37'"),
    ],
)
def test_bad_input_exits_2_and_settles_nothing(capsys, bets_file, doc, args, needle) -> None:
    argv = ["settle", *(args or ["--result", "17"]), "--json", bets_file(doc)]
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert needle in err


def test_missing_file_and_bad_table(capsys, bets_file, tmp_path) -> None:
    status, out, err = run(capsys, "settle", "--result", "17", str(tmp_path / "none.json"))
    assert (status, out) == (2, "") and "cannot read" in err
    bad = tmp_path / "t.toml"
    bad.write_text("[limits]\nplein = 3\n")
    status, out, err = run(capsys, "settle", "--result", "17", "--table", str(bad), bets_file())
    assert (status, out) == (2, "")
    assert "t.toml" in err


def test_custom_table_limits(capsys, bets_file, tmp_path) -> None:
    default = resources.files("rmc").joinpath("data/table.toml").read_text()
    table = tmp_path / "low.toml"
    table.write_text(default.replace('max = "150"', 'max = "5"'))
    status, _, err = run(capsys, "settle", "--result", "17", "--table", str(table), bets_file())
    assert status == 2
    assert "bet 0: stake 10 is above the table maximum 5 for a plein" in err


def test_installed_entry_point(bets_file) -> None:
    exe = [sys.executable, "-m", "rmc", "settle", "--result", "CMC", "--json", bets_file()]
    proc = subprocess.run(exe, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["announcement"] == "CMC"
    assert [p["outcome"] for p in doc["payments"]] == ["lose", "lose", "lose"]
    assert doc["totals"]["house"] == "35"


def rmc_settle(*argv: str) -> subprocess.CompletedProcess:
    # A wide terminal, so the readable statement shows whole announcements.
    return subprocess.run(
        [sys.executable, "-m", "rmc", "settle", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_limit_on_the_total_of_a_position(bets_file) -> None:
    line = {"player": "A", "type": "cheval", "numbers": ["17", "20"], "stake": "150"}
    turned = {**line, "numbers": ["20", "17"]}
    path = bets_file({"bets": [line, BETS["bets"][1], turned, line]})
    proc = rmc_settle("--result", "17", "--json", path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [
        "rmc settle: player A: bets 0, 2, 3 on Cheval 17-20 total 450, above the table "
        "maximum 300 for a cheval",
        "rmc settle: nothing settled",
    ]


def test_partage_rounding_in_both_statements(bets_file, tmp_path) -> None:
    default = resources.files("rmc").joinpath("data/table.toml").read_text()
    table = tmp_path / "whole.toml"
    table.write_text(default.replace('unit = "0.01"', 'unit = "1"'))
    path = bets_file({"bets": [{"player": "A", "type": "rouge", "stake": "5"}]})
    proc = rmc_settle("--result", "0", "--table", str(table), "--json", path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (payment,) = doc["payments"]
    assert payment["paid"] == "2"
    assert payment["partage"] == {
        "half": "2.5",
        "given_back": "2",
        "kept": "0.5",
        "unit": "1",
        "rounding": "down",
    }
    assert doc["totals"] == {"staked": "5", "paid": "2", "house": "3", "partage_kept": "0.5"}
    proc = rmc_settle("--result", "0", "--table", str(table), path)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert (
        "Rouge : partage, la moitié de 5, 2,5, arrondie à 2 (unité 1) ; l'arrondi garde 0,5" in text
    )
