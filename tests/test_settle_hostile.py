"""Hostile bet files (issue 19, points 3 and 4): each is refused with a one-line reason.

Every case is checked twice: through the library (`rmc.bets.load_bets` raises BetsError) and
through the CLI in a subprocess (`rmc settle` exits 2, prints `rmc settle: …` lines on stderr,
nothing on stdout, never a traceback).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rmc.bets import MAX_DEPTH, MAX_NUMBER_CHARS, MAX_TEXT_CHARS, BetsError, load_bets
from rmc.cli import main
from rmc.limits import Table

TABLE = Table.load()


def doc(*bets: dict, **top) -> str:
    return json.dumps({**top, "bets": list(bets)}, ensure_ascii=False)


def plein(**fields) -> dict:
    return {"player": "A", "type": "plein", "numbers": ["17"], "stake": "10", **fields}


def rouge(**fields) -> dict:
    return {"player": "A", "type": "rouge", "stake": "10", **fields}


ROUGE = '{"player": "A", "type": "rouge", "stake": %s}'

# (case id, BETS.json text, what the reason must say)
HOSTILE = [
    # --- duplicated keys, at any level (point 3) ---
    (
        "dup-key-in-bet",
        '{"bets": [{"player": "A", "player": "B", "type": "rouge", "stake": "10"}]}',
        "duplicated key 'player'",
    ),
    (
        "dup-key-top",
        '{"bets": [], "bets": [{"player": "A", "type": "rouge", "stake": "10"}]}',
        "duplicated key 'bets'",
    ),
    (
        "dup-key-markers",
        '{"markers": {"A": "5", "A": "10"}, "bets": []}',
        "duplicated key 'A'",
    ),
    (
        "dup-key-escaped",
        '{"bets": [{"stake": "10", "player": "A", "type": "rouge", "st\\u0061ke": "150"}]}',
        "duplicated key 'stake'",
    ),
    # --- non-canonical spellings of numbers (point 3) ---
    ("stake-underscore", doc(plein(stake="10_0")), "not a plain decimal"),
    ("stake-plus", doc(plein(stake="+10")), "not a plain decimal"),
    ("stake-exponent-string", doc(plein(stake="1e1")), "not a plain decimal"),
    ("stake-full-width", doc(plein(stake="１０")), "not a plain decimal"),
    ("stake-arabic-indic", doc(plein(stake="١٠")), "not a plain decimal"),
    ("stake-spaces", doc(plein(stake=" 10 ")), "not a plain decimal"),
    ("stake-leading-zero", doc(plein(stake="010")), "not a plain decimal"),
    ("stake-trailing-point", doc(plein(stake="10.")), "not a plain decimal"),
    ("stake-leading-point", doc(plein(stake=".5")), "not a plain decimal"),
    ("stake-comma", doc(plein(stake="10,5")), "not a plain decimal"),
    ("stake-nan-string", doc(plein(stake="NaN")), "not a plain decimal"),
    ("stake-infinity-string", doc(plein(stake="Infinity")), "not a plain decimal"),
    ("stake-exponent-number", '{"bets": [%s]}' % (ROUGE % "1e1"), "exponent"),
    ("stake-1e400-number", '{"bets": [%s]}' % (ROUGE % "1e400"), "exponent"),
    ("stake-1e400-string", doc(plein(stake="1e400")), "not a plain decimal"),
    ("stake-nan-literal", '{"bets": [%s]}' % (ROUGE % "NaN"), "NaN"),
    ("stake-infinity-literal", '{"bets": [%s]}' % (ROUGE % "-Infinity"), "-Infinity"),
    ("stake-too-many-decimals", doc(plein(stake="10.001")), "3 decimals"),
    ("stake-trailing-zero-decimals", doc(plein(stake="10.000")), "3 decimals"),
    ("stake-number-too-many-decimals", '{"bets": [%s]}' % (ROUGE % "10.125"), "3 decimals"),
    ("marker-underscore", doc(rouge(), markers={"A": "1_0"}), "not a plain decimal"),
    (
        "index-float",
        '{"bets": [{"player": "A", "type": "colonne", "index": 1.0, "stake": "10"}]}',
        "'index' 1, 2 or 3",
    ),
    (
        "index-string",
        doc({"player": "A", "type": "colonne", "index": "1", "stake": "10"}),
        "'index' 1, 2 or 3",
    ),
    # --- absurd sizes (point 3) ---
    ("deep-arrays", "[" * 100_000 + "]" * 100_000, f"nested deeper than {MAX_DEPTH}"),
    ("deep-objects", '{"a": ' * 100_000 + "1" + "}" * 100_000, f"nested deeper than {MAX_DEPTH}"),
    (
        "deep-inside-bets",
        '{"bets": [' + "[" * 50 + "]" * 50 + "]}",
        f"nested deeper than {MAX_DEPTH}",
    ),
    (
        "thousands-of-digits-int",
        '{"bets": [{"player": "A", "type": "douzaine", "index": %s, "stake": "10"}]}'
        % ("1" * 5000),
        f"5000 characters long (more than {MAX_NUMBER_CHARS})",
    ),
    (
        "thousands-of-digits-decimal",
        '{"bets": [%s]}' % (ROUGE % ("1" * 5000 + ".5")),
        "characters long",
    ),
    ("thousands-of-digits-string", doc(plein(stake="1" * 5000)), "characters long"),
    (
        "megabytes-of-one-number",
        '{"bets": [%s]}' % (ROUGE % ("9" * 3_000_000)),
        f"3000000 characters long (more than {MAX_NUMBER_CHARS})",
    ),
    ("file-too-large", " " * (MAX_TEXT_CHARS + 1), f"more than {MAX_TEXT_CHARS} characters"),
    # --- impossible or malformed bets (point 4) ---
    ("cheval-not-adjacent", doc(plein(type="cheval", numbers=["1", "5"])), "not a cheval"),
    ("carre-not-square", doc(plein(type="carre", numbers=["1", "2", "3", "4"])), "not a carre"),
    (
        "transversale-not-row",
        doc(plein(type="transversale", numbers=["1", "2", "4"])),
        "not a transversale",
    ),
    (
        "sixain-not-two-rows",
        doc(plein(type="sixain", numbers=["1", "2", "3", "7", "8", "9"])),
        "not a sixain",
    ),
    (
        "colonne-index-4",
        doc({"player": "A", "type": "colonne", "index": 4, "stake": "10"}),
        "'index' 1, 2 or 3",
    ),
    (
        "douzaine-index-0",
        doc({"player": "A", "type": "douzaine", "index": 0, "stake": "10"}),
        "'index' 1, 2 or 3",
    ),
    ("plein-by-index", doc(plein(index=1)), "not by an index"),
    ("simple-with-numbers", doc(rouge(numbers=["1"])), "takes no 'numbers'"),
    ("plein-empty-numbers", doc(plein(numbers=[])), "needs a list"),
    ("plein-number-37", doc(plein(numbers=["37"])), "not a number of the tapis"),
    ("numbers-as-integers", doc(plein(numbers=[17])), "as strings"),
    (
        "numbers-as-floats",
        '{"bets": [{"player": "A", "type": "plein", "numbers": [17.0], "stake": "10"}]}',
        "as strings",
    ),
    ("numbers-long-string", doc(plein(numbers=["1" * 5000])), "not a number of the tapis"),
    ("stake-negative", doc(plein(stake="-10")), "not positive"),
    ("stake-negative-number", '{"bets": [%s]}' % (ROUGE % "-10"), "not positive"),
    ("stake-zero", doc(plein(stake="0")), "not positive"),
    ("stake-zero-number", '{"bets": [%s]}' % (ROUGE % "0"), "not positive"),
    ("stake-bool", '{"bets": [%s]}' % (ROUGE % "true"), "decimal string"),
    ("stake-null", '{"bets": [%s]}' % (ROUGE % "null"), "decimal string"),
    ("stake-missing", doc({"player": "A", "type": "rouge"}), "'stake' is missing"),
    ("unknown-field", doc(rouge(colour="red")), "unknown field(s) 'colour'"),
    ("unknown-field-newline", doc(rouge(**{"a\nb": 1})), "unknown field(s) 'a\\nb'"),
    ("unknown-chip", doc(rouge(chip="euro")), "unknown chip 'euro'"),
    ("unknown-type", doc(rouge(type="quinte")), "unknown bet type"),
    ("type-not-string", doc(rouge(type=5)), "'type'"),
    ("player-empty", doc(rouge(player=" ")), "'player'"),
    ("player-control", doc(rouge(player="A\x1b[31m")), "control"),
    ("player-newline", doc(rouge(player="A\nB")), "control"),
    (
        "player-lone-surrogate",
        '{"bets": [{"player": "\\ud800", "type": "rouge", "stake": "10"}]}',
        "surrogate",
    ),
    (
        "field-lone-surrogate",
        '{"bets": [{"player": "A", "type": "rouge", "stake": "10", "\\udfff": 1}]}',
        "surrogate",
    ),
    ("player-too-long", doc(rouge(player="A" * 5000)), "characters"),
    ("exception-not-bool", doc(rouge(exception="yes")), "true or false"),
    ("bet-not-object", doc("plein 17"), "a bet is a JSON object"),
    ("bets-not-list", '{"bets": {"player": "A"}}', '{"bets": [...]}'),
    ("not-json", '{"bets": [', "not valid JSON"),
    ("bom", '\ufeff{"bets": []}', "not valid JSON"),
]
IDS = [case[0] for case in HOSTILE]


@pytest.mark.parametrize(("text", "needle"), [c[1:] for c in HOSTILE], ids=IDS)
def test_library_refuses(text: str, needle: str) -> None:
    with pytest.raises(BetsError) as info:
        load_bets(text, TABLE)
    lines = info.value.lines()
    assert lines, "a refusal without a reason"
    assert any(needle in line for line in lines), lines
    for line in lines:
        assert "\n" not in line and len(line) < 400, line


def check_cli(status: int, out: str, err: str, needle: str) -> None:
    assert status == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert lines[-1] == "rmc settle: nothing settled"
    assert all(line.startswith("rmc settle: ") for line in lines), lines
    assert needle in err


@pytest.mark.parametrize(("text", "needle"), [c[1:] for c in HOSTILE], ids=IDS)
def test_cli_refuses(tmp_path, capsys, text: str, needle: str) -> None:
    """Every case through the CLI's entry function (in-process: quick)."""
    path = tmp_path / "bets.json"
    path.write_text(text, encoding="utf-8")
    status = main(["settle", "--result", "0", "--json", str(path)])
    out, err = capsys.readouterr()
    check_cli(status, out, err, needle)


# The cases that crashed or were accepted before issue 19, run as a real process.
SUBPROCESS = {
    "dup-key-in-bet",
    "dup-key-markers",
    "stake-underscore",
    "stake-full-width",
    "stake-exponent-number",
    "stake-trailing-zero-decimals",
    "deep-arrays",
    "thousands-of-digits-int",
    "megabytes-of-one-number",
    "numbers-as-integers",
    "player-lone-surrogate",
    "player-control",
}


@pytest.mark.parametrize(
    ("text", "needle"),
    [c[1:] for c in HOSTILE if c[0] in SUBPROCESS],
    ids=sorted(SUBPROCESS, key=IDS.index),
)
@pytest.mark.parametrize("mode", [["--json"], []], ids=["json", "text"])
def test_cli_subprocess_refuses(tmp_path, text: str, needle: str, mode: list[str]) -> None:
    path = tmp_path / "bets.json"
    path.write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "rmc", "settle", "--result", "0", *mode, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    check_cli(proc.returncode, proc.stdout, proc.stderr, needle)


def test_canonical_spellings_are_accepted() -> None:
    """The documented canonical forms: "123", "123.45", 123, 123.45; index 1-3; numbers as
    strings; brackets inside strings do not count as nesting."""
    text = json.dumps(
        {
            "markers": {"[[[[[[[[[[[[[[[[[[[[A]]]]]]]]]]]]]]]]]]]]": "2.50"},
            "bets": [
                {"player": "A", "type": "plein", "numbers": ["17"], "stake": "10"},
                {"player": "A", "type": "plein", "numbers": ["18"], "stake": "2.5"},
                {"player": "A", "type": "plein", "numbers": ["19"], "stake": "5.50"},
                {"player": "Zoé", "type": "douzaine", "index": 2, "stake": "20"},
                {
                    "player": "[[[[[[[[[[[[[[[[[[[[A]]]]]]]]]]]]]]]]]]]]",
                    "type": "rouge",
                    "stake": "7.50",
                },
            ],
        },
        ensure_ascii=False,
    )
    text = text.replace('"stake": "20"', '"stake": 20').replace('"2.5"', "2.5")
    placed = load_bets(text, TABLE)
    assert [str(b.stake) for b in placed] == ["10", "2.5", "5.50", "20", "7.50"]
    assert placed[4].player.count("[") > MAX_DEPTH
