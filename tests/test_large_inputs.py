"""Very large inputs (issue 20): `rmc settle --json` and `rmc rnvp` stream what they can and show
a progress bar on standard error when it is a terminal, never on standard output.

What is checked here is what the speed-up must not change: the streamed statement is the very
text json.dump wrote of the whole statement, the one-bet-at-a-time reading finds the same bets
and the same problems as the whole reading, and the bar appears on a terminal only. No timing.
"""

from __future__ import annotations

import io
import json
import os
import pty
import random
import sys
import threading
from contextlib import contextmanager
from decimal import Decimal

import pytest

from rmc import ROOT, layout, progress
from rmc import bets as bets_module
from rmc.bets import Bet, BetsError, bet_to_json, load_bets, parse_bet, parse_bets, read_json
from rmc.cli import main
from rmc.limits import Table
from rmc.rnvp import read_laps, replay
from rmc.settle import Book, settle

sys.path.insert(0, str(ROOT / "tests" / "fw"))
import lapgen

TABLE = Table.load()
RESULTS = ("0", "00", "CMC", "17", "2", "36")
# Names that JSON must escape, or that rich would read as markup, or that are not ASCII.
NAMES = ("Zoé", 'Ann "the hand"', "[bold]B[/bold]", "back\\slash", "Łukasz", "李", "P")


def many_bets(count: int, seed: int = 20) -> dict:
    """A BETS.json document of `count` bets: every position, stakes whose half is no whole
    cent (the partage's rounding), value chips by exception, plaques, markers."""
    rng = random.Random(seed)
    positions = layout.all_positions()
    players = [*NAMES, *(f"Player {i}" for i in range(60))]
    out = []
    for _ in range(count):
        pos = rng.choice(positions)
        low = TABLE.limits[pos.type].min
        stake = low * rng.choice((1, 2, 3, 5)) + rng.choice((Decimal(0), Decimal("0.05")))
        player = rng.choice(players)
        chip = rng.choice(("couleur", "couleur", "valeur", "plaque"))
        if player == "Zoé" and chip == "couleur":
            stake = Decimal(5) * rng.choice((1, 2, 3))  # whole chips of her marker
        bet = bet_to_json(Bet(player, pos, stake))
        if chip != "couleur":
            bet["chip"] = chip
            if pos.type in layout.MULTIPLES:
                bet["exception"] = True
        out.append(bet)
    return {"markers": {"Zoé": "5"}, "bets": out}


def whole_statement(text: str, result: str) -> str:
    """The statement as `rmc settle --json` wrote it before issue 20: the whole statement
    built, then json.dump."""
    statement = settle(parse_bets(read_json(text), TABLE), result)
    return json.dumps(statement.to_json(), ensure_ascii=False, indent=2) + "\n"


@pytest.fixture(scope="module")
def bets_text() -> str:
    return json.dumps(many_bets(3000), ensure_ascii=False)


@pytest.mark.parametrize("result", RESULTS)
def test_streamed_statement_is_the_whole_one(tmp_path, capsys, bets_text, result) -> None:
    path = tmp_path / "bets.json"
    path.write_text(bets_text, encoding="utf-8")
    assert main(["settle", "--result", result, "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out == whole_statement(bets_text, result)


def test_write_json_in_many_pieces_and_none(bets_text) -> None:
    """Book.write_json, the streamed writer: the same text however it is cut, and for a table
    without bets; what it tells `progress` goes up to every payment."""
    bets = load_bets(bets_text, TABLE)
    pieces: list[str] = []
    told: list[int] = []
    Book(bets).write_json("0", pieces.append, told.append)
    assert len(pieces) > 2  # written as it goes, not in one piece
    assert "".join(pieces) == whole_statement(bets_text, "0")
    assert told[-1] == len(bets) and told == sorted(told)
    empty = io.StringIO()
    Book([]).write_json("CMC", empty.write)
    assert empty.getvalue() == whole_statement('{"bets": []}', "CMC")


def test_a_file_above_the_old_8_mi_limit_is_read(tmp_path, capsys) -> None:
    """800,000 bets take some 70 MB: the size limit is now MAX_TEXT_CHARS (128 Mi)."""
    text = '{"bets": [{"player": "A", "type": "rouge", "stake": "10"}' + " " * (9 << 20) + "]}"
    assert len(text) > 8 * 1024 * 1024
    path = tmp_path / "big.json"
    path.write_text(text)
    assert main(["settle", "--result", "1", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["paid"] == "20"


def test_the_stream_reader_is_used_and_reports_progress(bets_text) -> None:
    told: list[int] = []
    streamed = bets_module._stream_bets(bets_text, TABLE, told.append)
    assert streamed == parse_bets(read_json(bets_text), TABLE)
    assert told and told[-1] == len(bets_text) and told == sorted(told)
    assert load_bets(bets_text, TABLE) == streamed


def _verdict(text: str) -> object:
    try:
        return load_bets(text, TABLE)
    except BetsError as e:
        return e.lines()


def _whole_verdict(text: str) -> object:
    try:
        return parse_bets(read_json(text), TABLE)
    except BetsError as e:
        return e.lines()


def doc(*parts: str, before: str = "", after: str = "") -> str:
    """A BETS.json text: `before` and `after` are the top-level members around "bets"."""
    return "{" + before + '"bets": [' + ", ".join(parts) + "]" + after + "}"


BET = '{"player": "A", "type": "plein", "numbers": ["17"], "stake": "10"}'
OTHER = '{"player": "B", "type": "colonne", "index": 2, "stake": 10.50}'
# Files that the one-bet-at-a-time reading reads itself, or hands over to the whole reading:
# either way every bet and every refusal must be the whole reading's.
EQUIVALENT = [
    doc(BET, OTHER),
    ' \n{ "bets" : [ ' + BET + " , " + OTHER + ' ] , "note" : {"a": [1, 2]} }\n ',
    doc(),
    doc(BET, OTHER, before='"markers": {"A": "5"}, '),
    doc(BET, OTHER, before='"markers": {"A": "3"}, '),  # 10 is no whole number of 3s
    doc(BET, after=', "markers": {"A": "3"}'),  # markers after the bets
    doc(BET, before='"markers": {"A": "1_0"}, '),  # a bad marker
    doc('{"player": "A", "type": "rouge", "stake": "1"}', before='"markers": {"A": "1"}, '),
    doc(BET, "5", '{"player": "A"}', OTHER),  # refused bets, by index
    doc(BET, BET, BET, BET),  # totals above the maximum
    doc(BET, "5", BET, BET, BET, OTHER),  # both, numbered in the file
    doc(BET, OTHER, after=', "bets": []'),  # duplicated key at the top
    doc(BET, "5", '{"player": "A", "player": "B"}'),  # ... in a late bet
    doc(BET, "7", '{"stake": 1e3}'),  # an exponent after a refused bet
    doc(BET) + " x",  # something after the document
    doc(BET + ","),  # a trailing comma
    '{"bets": {"player": "A"}}',
    doc(BET)[:-1],
    '["bets"]',
    "\ufeff" + doc(),
    doc('{"player": "\\ud800", "type": "rouge", "stake": "10"}'),
    doc(BET, before='"\\udfff": 1, '),
    doc('{"player": "\\ud83d\\ude00", "type": "rouge", "stake": "10"}'),  # a pair
    doc(BET, before='"note": "[[[[[[[[[[[[[[[[[[[[", '),
    doc(BET, after=', "x": ' + "[" * 20 + "]" * 20),
]


@pytest.mark.parametrize("text", EQUIVALENT, ids=range(len(EQUIVALENT)))
def test_the_stream_reader_says_what_the_whole_reading_says(text: str) -> None:
    assert _verdict(text) == _whole_verdict(text)


def test_alike_bets_are_kept_apart() -> None:
    """The reader reuses its checks for bets alike: values Python finds equal but that are
    not the same to the decree or in print stay apart (10, "10", 10.0, "10.00"; 1, true)."""
    spellings = ['"10"', "10", "10.0", '"10.00"', "10", '"10.0"', '"10"']
    raws = ['{"player": "A", "type": "rouge", "stake": ' + x + "}" for x in spellings] + [
        '{"player": "B", "type": "colonne", "index": 1, "stake": "10"}',
        '{"player": "B", "type": "colonne", "index": true, "stake": "10"}',
        '{"player": "B", "type": "colonne", "index": 1, "stake": "10"}',
        '{"player": "C", "type": "rouge", "stake": "10", "chip": "plaque"}',
        '{"player": "C", "type": "rouge", "stake": "10"}',
    ]
    text = doc(*raws)
    try:
        load_bets(text, TABLE)
    except BetsError as e:
        lines = e.lines()
    else:
        pytest.fail("index true was accepted")
    assert lines[0].startswith("bet 8: ")
    alone = []
    for raw in raws:
        try:
            alone.append(parse_bet(json.loads(raw, parse_float=Decimal), TABLE))
        except ValueError as e:
            alone.append(str(e))
    good = [b for b in alone if isinstance(b, Bet)]
    document = json.loads(text, parse_float=Decimal)
    document["bets"] = [
        b for b, one in zip(document["bets"], alone, strict=True) if isinstance(one, Bet)
    ]
    together = parse_bets(document, TABLE)
    assert [str(b.stake) for b in together] == [str(b.stake) for b in good]
    assert [str(b.stake) for b in together][:4] == ["10", "10", "10.0", "10.00"]
    assert [b.chip for b in together][-2:] == ["plaque", "couleur"]


def test_depth_check_matches_the_careful_one() -> None:
    """The quick depth check (every bracket counts when no string holds one) decides as the
    careful one, string by string, on texts made of brackets, quotes and escapes."""
    rng = random.Random(16)
    alphabet = '[]{}"\\ a,é\n'
    texts = ['{"a": "x[y"}', '[["\\["]]', '"[[[[', '["\\""]', "]]]" + "[" * 18]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(60))) for _ in range(5000)]
    deep = bets_module.MAX_DEPTH
    try:
        bets_module.MAX_DEPTH = 3
        for text in texts:
            careful = bets_module._nesting_depth_ok_slowly(text)
            assert bets_module._nesting_depth_ok(text) == careful, text
    finally:
        bets_module.MAX_DEPTH = deep


# --- the progress bar: on a terminal only, never on stdout ----------------------------------


class _Terminal:
    """A pseudo-terminal as standard error, and what is written to it."""

    def __init__(self) -> None:
        self.master, slave = pty.openpty()
        self.file = open(slave, "w", encoding="utf-8", closefd=True)
        self.seen = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            self.seen += data

    def text(self) -> str:
        if not self.file.closed:
            self.file.close()
        self._reader.join(timeout=10)
        os.close(self.master)
        return self.seen.decode("utf-8", "replace")


@pytest.fixture
def terminal(monkeypatch):
    """A terminal as sys.stderr, set by the test itself (pytest's capture puts its own back
    when the test starts)."""
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # the bar at once: no wait in a test
    term = _Terminal()
    yield term
    term.file.close()


@contextmanager
def stderr_on(term: _Terminal):
    kept = sys.stderr
    sys.stderr = term.file
    try:
        yield
    finally:
        sys.stderr = kept


def test_settle_bar_on_a_terminal_and_stdout_untouched(tmp_path, capsys, terminal) -> None:
    text = json.dumps(many_bets(2000), ensure_ascii=False)
    path = tmp_path / "bets.json"
    path.write_text(text, encoding="utf-8")
    with stderr_on(terminal):
        assert main(["settle", "--result", "0", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    shown = terminal.text()
    assert "reading the bets" in shown or "writing the statement" in shown, shown
    assert out == whole_statement(text, "0")  # nothing of the bar in it


def test_settle_no_bar_off_a_terminal(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    text = json.dumps(many_bets(2000), ensure_ascii=False)
    path = tmp_path / "bets.json"
    path.write_text(text, encoding="utf-8")
    assert main(["settle", "--result", "0", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out == whole_statement(text, "0")


def _laps_file(tmp_path, n: int = 60):
    w = lapgen.Wheel(lapgen.Rng(5), 1.1)
    spins = [lapgen.laps(w.spin(noise_s=0.01, keep=None if i % 3 else 7)) for i in range(n)]
    path = tmp_path / "laps.csv"
    path.write_text("".join(",".join(f"{x:.4f}" for x in laps) + "\n" for laps in spins))
    return path, spins


def test_rnvp_bar_on_a_terminal_and_stdout_untouched(tmp_path, capsys, terminal) -> None:
    path, _ = _laps_file(tmp_path)
    with stderr_on(terminal):
        assert main(["rnvp", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "replaying the spins" in terminal.text()
    calls = replay(read_laps(path))
    assert json.loads(out)["spins"] == [c.as_dict() for c in calls]


def test_rnvp_no_bar_off_a_terminal(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    path, _ = _laps_file(tmp_path)
    assert main(["rnvp", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "replaying" not in err and "━" not in err
    json.loads(out)


def test_replay_progress_changes_no_call(tmp_path) -> None:
    _, spins = _laps_file(tmp_path, 120)
    told: list[int] = []
    with_bar = replay(spins, progress=told.append)
    assert told == [50, 100]
    assert [c.as_dict() for c in with_bar] == [c.as_dict() for c in replay(spins)]
