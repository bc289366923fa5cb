"""Bets as placed on the tapis, read from BETS.json and checked against the decree and the table.

A bet names a player, a combination (`type`), where it lies (`numbers` or `index`), a stake,
and the chips it is made of (decree 1-3, 1-6):
- `couleur`: the player's own colour chips, whose value the player chose within the table's
  limits and the chef de table shows with a marker (optional `markers` in BETS.json: a stake in
  colour chips must then be a whole number of chips);
- `valeur`: value chips, and `plaque`: plaques. Both are accepted on the chances simples; on a
  multiple chance only by exception — the exchange for colour chips could not be made before
  "rien ne va plus" — which the bet must say (`"exception": true`) and the statement records.

The table's limits apply per line for the minimum (each chip laid) and per position for the
maximum: a player's total on one position, whatever the number of lines (`check_totals`).

BETS.json is read strictly (`load_bets`): duplicated keys, numbers in any spelling but the
plain decimal one, and absurd sizes are refused before Python's lenient conversions could
decide what they mean.
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from rmc.layout import MULTIPLES, NUMBERED, LayoutError, Position, position
from rmc.limits import Partage, Table
from rmc.money import MAX_AMOUNT_CHARS, PLAIN, MoneyError, is_multiple, parse_plain, total

COULEUR = "couleur"
VALEUR = "valeur"
PLAQUE = "plaque"
CHIPS = (COULEUR, VALEUR, PLAQUE)

_FIELDS = {"player", "type", "numbers", "index", "stake", "chip", "exception"}

# Guards against absurd files (500 bets take about 50 kB, depth 3). The size allows the very
# large files of issue 20, some 800,000 bets (70 MB), read in well under 500 MB of memory.
MAX_TEXT_CHARS = 128 * 1024 * 1024
MAX_DEPTH = 16  # nesting of arrays and objects; json.loads would recurse on each level
MAX_NUMBER_CHARS = MAX_AMOUNT_CHARS  # a JSON number token, and an amount string
MAX_NAME_CHARS = 100  # a player's name
# A JSON number token as the decoder hands it over, already of JSON's grammar; checked again
# here so that a lenient decoder (the pure-Python one takes any Unicode digit) cannot pass.
_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)", re.ASCII)


@dataclass(frozen=True, slots=True)
class Bet:
    player: str
    position: Position
    stake: Decimal
    chip: str = COULEUR
    exception: bool = False  # value chips or plaques on a multiple chance, by exception (1-6)
    # The table's rule for the partage on 0, set when the bet is read against a table.
    # None (a bet built by hand): the exact half goes back.
    partage: Partage | None = None

    @property
    def type(self) -> str:
        return self.position.type


class BetsError(ValueError):
    """Bets that cannot be settled; `problems` lists (bet index or None, reason)."""

    def __init__(self, problems: list[tuple[int | None, str]]):
        self.problems = problems
        super().__init__("; ".join(_describe(i, r) for i, r in problems))

    def lines(self) -> list[str]:
        return [_describe(i, r) for i, r in self.problems]


def _describe(index: int | None, reason: str) -> str:
    return reason if index is None else f"bet {index}: {reason}"


def _show(value: object, limit: int = 40) -> str:
    """User text quoted on one line, and cut short: a refusal must stay one readable line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}…{text[-4:]}"


def check_player(player: object, what: str = "'player'") -> str:
    """A player's name: printable text of reasonable length (it is printed in statements)."""
    if not isinstance(player, str) or not player.strip():
        raise ValueError(f"{what} must be a non-empty string")
    if len(player) > MAX_NAME_CHARS:
        raise ValueError(f"{what} is {len(player)} characters long, more than {MAX_NAME_CHARS}")
    # Control and format characters would move the terminal's cursor or turn text around.
    bad = next((c for c in player if unicodedata.category(c) in ("Cc", "Cf")), None)
    if bad is not None:
        raise ValueError(f"{what} {_show(player)} holds the control character U+{ord(bad):04X}")
    return player


def _check_numbers(raw: object) -> None:
    """The numbers of a bet are strings ("17", "00"): a JSON 17 or 17.0 is refused, so that
    `0` and `00` can never be confused and no number conversion decides."""
    if not isinstance(raw, list):
        return  # layout.position says what is wrong
    for value in raw:
        if not isinstance(value, str):
            raise ValueError(
                f'\'numbers\' lists the numbers as strings ("17", "00"), not {_show(value)}'
            )
        if len(value) > 3:  # "CMC" is the longest label
            raise ValueError(f"{_show(value)} is not a number of the tapis (0, 00, CMC, 1-36)")


def parse_bet(raw: object, table: Table, markers: dict[str, Decimal] | None = None) -> Bet:
    """One bet from its JSON object, or ValueError with the reason."""
    return _BetReader(table, markers).bet(raw)


_MISSING = object()


def _key(value: object) -> object:
    """A memo key that tells apart what the checks tell apart: 1, True, 1.0 and "1"
    compare equal or alike in Python, and Decimal("10") == Decimal("10.0") prints
    differently; None when the value is not worth a key (an object, a nested list)."""
    kind = type(value)
    if kind is str or value is _MISSING:
        return value
    if kind is list:
        if all(type(v) is str for v in value):  # type: ignore[attr-defined]
            return (list, *value)  # type: ignore[misc]
        return None
    if kind in (int, bool, Decimal) or value is None:
        return (kind, repr(value))
    return None


class _BetReader:
    """parse_bet for many bets of one table: a bet file repeats its players, positions and
    stakes over and over, so each check's verdict is kept and reused (issue 20: 800,000
    bets). The checks and their order are parse_bet's, whatever is reused."""

    def __init__(self, table: Table, markers: dict[str, Decimal] | None = None):
        self.table = table
        self.markers = markers or {}
        self.partage = table.partage  # one Partage for every bet, not one each
        self._players: dict[str, tuple[str, str | None]] = {}  # name -> (it, reason refused)
        self._rest: dict[tuple, tuple | str] = {}  # the fields after the player -> verdict

    def bet(self, raw: object) -> Bet:
        if not isinstance(raw, dict):
            raise ValueError(f"a bet is a JSON object, not {type(raw).__name__}")
        if not raw.keys() <= _FIELDS:
            unknown = sorted(set(raw) - _FIELDS)
            raise ValueError(f"unknown field(s) {', '.join(_show(k) for k in unknown[:5])}")
        player = raw.get("player")
        if type(player) is str:
            seen = self._players.get(player)
            if seen is None:
                try:
                    check_player(player)
                    why = None
                except ValueError as e:
                    why = str(e)
                seen = self._players[player] = (player, why)
            # one string per name, however many bets: 800,000 copies would take 50 MB
            player, why = seen
            if why is not None:
                raise ValueError(why)
        else:
            check_player(player)
        key = (
            _key(raw.get("type")),
            _key(raw.get("numbers")),
            _key(raw.get("index")),
            _key(raw.get("stake", _MISSING)),
            _key(raw.get("chip", COULEUR)),
            _key(raw.get("exception", False)),
        )
        if None in key:
            verdict = self._checked(raw)  # a value no key stands for: checked afresh
        else:
            verdict = self._rest.get(key)
            if verdict is None:
                verdict = self._rest[key] = self._checked(raw)
        if type(verdict) is str:
            raise ValueError(verdict)
        pos, stake, chip, exception = verdict  # type: ignore[misc]
        marker = self.markers.get(player)  # type: ignore[arg-type]
        if chip == COULEUR and marker is not None and not is_multiple(stake, marker):
            raise ValueError(
                f"stake {stake} in colour chips is not a whole number of {player}'s chips "
                f"(marker {marker})"
            )
        return Bet(player, pos, stake, chip, exception, self.partage)  # type: ignore[arg-type]

    def _checked(self, raw: dict) -> tuple | str:
        """(position, stake, chip, exception recorded), or the reason the bet is refused."""
        try:
            return self._check(raw)
        except ValueError as e:
            return str(e)

    def _check(self, raw: dict) -> tuple:
        table = self.table
        kind = raw.get("type")
        if not isinstance(kind, str):
            raise ValueError("'type' is missing or not a string")
        if len(kind) > 20:
            raise ValueError(f"unknown bet type {_show(kind)}")
        _check_numbers(raw.get("numbers"))
        try:
            pos = position(kind, raw.get("numbers"), raw.get("index"))
        except LayoutError as e:
            raise ValueError(str(e)) from None
        if "stake" not in raw:
            raise ValueError("'stake' is missing")
        try:
            stake = parse_plain(raw["stake"], "stake", table.decimals)
        except MoneyError as e:
            raise ValueError(str(e)) from None
        chip = raw.get("chip", COULEUR)
        if not isinstance(chip, str) or chip not in CHIPS:
            raise ValueError(f"unknown chip {_show(chip)} (one of {', '.join(CHIPS)})")
        exception = raw.get("exception", False)
        if not isinstance(exception, bool):
            raise ValueError("'exception' must be true or false")
        limit = table.limits[kind]
        # The minimum is for each chip laid (each line); the maximum is checked here for the
        # line and again, by check_totals, for the player's total on the position.
        if stake < limit.min:
            raise ValueError(f"stake {stake} is below the table minimum {limit.min} for a {kind}")
        if stake > limit.max:
            raise ValueError(f"stake {stake} is above the table maximum {limit.max} for a {kind}")
        if not is_multiple(stake, table.unit):
            raise ValueError(
                f"stake {stake} is not a whole multiple of the table's unit {table.unit}"
            )
        if chip != COULEUR and kind in MULTIPLES and not exception:
            raise ValueError(
                f"a {chip} is refused on a multiple chance ({kind}) unless the bet is marked "
                '"exception": true (the exchange for colour chips could not be made before '
                '"rien ne va plus", decree 1-6)'
            )
        # An exception is only recorded where one was needed: value chips on a multiple
        # chance.
        return pos, stake, chip, exception and chip != COULEUR and kind in MULTIPLES


def parse_markers(raw: object, table: Table) -> dict[str, Decimal]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BetsError([(None, "'markers' must map each player to a colour-chip value")])
    markers: dict[str, Decimal] = {}
    problems: list[tuple[int | None, str]] = []
    for player, value in raw.items():
        try:
            check_player(player, "a player named in 'markers'")
            amount = parse_plain(value, f"marker of {player}", table.decimals)
        except ValueError as e:
            problems.append((None, str(e)))
            continue
        if not table.marker.min <= amount <= table.marker.max:
            problems.append(
                (
                    None,
                    f"marker of {player} ({amount}) is outside the table's colour-chip limits "
                    f"{table.marker.min}-{table.marker.max}",
                )
            )
        markers[player] = amount
    if problems:
        raise BetsError(problems)
    return markers


def parse_bets(document: object, table: Table) -> list[Bet]:
    """Every bet of a BETS.json document, or BetsError listing every problem found."""
    if not isinstance(document, dict) or not isinstance(document.get("bets"), list):
        raise BetsError([(None, 'the document must be a JSON object {"bets": [...]}')])
    markers = parse_markers(document.get("markers"), table)
    checked = _Checked(table, markers)
    for raw in document["bets"]:
        checked.add(raw)
    return checked.bets()


class _Checked:
    """The bets of one file as they are read, one after the other, and the problems found."""

    def __init__(self, table: Table, markers: dict[str, Decimal]):
        self.table = table
        self.reader = _BetReader(table, markers)
        self.placed: list[Bet] = []
        self.problems: list[tuple[int | None, str]] = []
        self.indices: list[int] = []  # the bets' numbers in the file, once one is refused
        self.count = 0

    def add(self, raw: object) -> None:
        i = self.count
        self.count += 1
        try:
            bet = self.reader.bet(raw)
        except ValueError as e:
            if not self.problems:
                self.indices = list(range(len(self.placed)))
            self.problems.append((i, str(e)))
            return
        self.placed.append(bet)
        if self.problems:
            self.indices.append(i)

    def bets(self) -> list[Bet]:
        """Every bet, or BetsError listing every problem found."""
        # Totals only over the lines that passed: a refused line is already reported.
        problems = self.problems + check_totals(
            self.placed, self.table, self.indices if self.problems else None
        )
        if problems:
            raise BetsError(problems)
        return self.placed


def check_totals(
    bets: list[Bet], table: Table, indices: list[int] | None = None
) -> list[tuple[int | None, str]]:
    """The table's maximum applied to each player's total on each position (decree 1-3).

    A position is the combination and what it covers: `Position` objects are canonical, so
    ["20", "17"] and ["17", "20"] are the same cheval. `indices` are the bets' numbers in the
    input (default: their order here). Returns one problem per player and position over."""
    return [(None, why) for _, why in positions_over(bets, table, indices)]


def positions_over(
    bets: list[Bet], table: Table, numbering: list[int] | None = None
) -> list[tuple[list[int], str]]:
    """(the positions in `bets` of the lines, the reason) for each player's position whose
    total is above the table's maximum; `numbering` names the bets in the reason."""
    # Per player, the first line on each position; the lines of a position with more than one
    # (most have one: a single line was checked by parse_bet), by their first line, which is
    # the order positions are first met in. No (player, position) key is built per bet.
    first: dict[str, dict[Position, int]] = {}
    several: dict[int, list[int]] = {}
    for n, bet in enumerate(bets):
        mine = first.get(bet.player)
        if mine is None:
            mine = first[bet.player] = {}
        m = mine.setdefault(bet.position, n)
        if m != n:
            ns = several.get(m)
            if ns is None:
                several[m] = [m, n]
            else:
                ns.append(n)
    over: list[tuple[list[int], str]] = []
    for m in sorted(several):
        ns = several[m]
        player, pos = bets[m].player, bets[m].position
        amount = total(bets[n].stake for n in ns)
        limit = table.limits[pos.type].max
        if amount > limit:
            where = ", ".join(str(n if numbering is None else numbering[n]) for n in ns)
            why = (
                f"player {player}: bets {where} on {pos.name} total {amount}, above the "
                f"table maximum {limit} for a {pos.type}"
            )
            over.append((ns, why))
    return over


class _Refused(ValueError):
    """A BETS.json text refused while it is decoded (raised from json.loads' hooks)."""


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen = dict(pairs)
    if len(seen) == len(pairs):
        return seen
    seen = {}  # the first key met again, for the reason
    for key, value in pairs:
        if key in seen:
            raise _Refused(f"duplicated key {_show(key)} in a JSON object")
        seen[key] = value
    return seen


def _number_token(token: str) -> None:
    if len(token) > MAX_NUMBER_CHARS:
        raise _Refused(
            f"a JSON number {len(token)} characters long (more than {MAX_NUMBER_CHARS}): "
            "no amount or index is that long"
        )


def _json_int(token: str) -> int:
    _number_token(token)
    if _JSON_INT.fullmatch(token) is None:
        raise _Refused(f"{_show(token)} is not a plain JSON integer")
    return int(token)


def _json_decimal(token: str) -> Decimal:
    _number_token(token)
    if "e" in token or "E" in token:
        raise _Refused(
            f"the JSON number {_show(token)} has an exponent: write amounts as plain decimals "
            '("10", "2.50")'
        )
    if PLAIN.fullmatch(token) is None:
        raise _Refused(f"{_show(token)} is not a plain decimal")
    return Decimal(token)


def _json_constant(name: str) -> object:
    raise _Refused(f"{name} is not a JSON number, and no amount")


# A string (unrolled: no backtracking; an unterminated one runs to the end) or a bracket.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
# Text outside strings, and whole strings that hold no bracket, escaped or not: a text this
# matches to its end is cut into strings as _STRING_OR_BRACKET cuts it, and its every bracket
# is outside strings. Possessive: one pass, nothing to backtrack.
_NO_BRACKET_IN_STRINGS = re.compile(
    r'(?:[^"]++|"[^"\\\[\]{}]*+(?:\\[^\[\]{}][^"\\\[\]{}]*+)*+")*+', re.DOTALL
)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_CHUNK = 1 << 20  # characters


def _nesting_depth_ok(text: str) -> bool:
    """False when arrays and objects nest deeper than MAX_DEPTH, counting brackets outside
    strings; checked before json.loads, which recurses once per level."""
    if _NO_BRACKET_IN_STRINGS.match(text).end() != len(text):  # type: ignore[union-attr]
        return _nesting_depth_ok_slowly(text)
    # Every bracket counts (issue 20: no Python loop over every string of a large file).
    # UTF-8 bytes: a bracket is one byte, and no other character holds that byte.
    depth = 0
    for k in range(0, len(text), _CHUNK):
        chunk = text[k : k + _CHUNK].encode("utf-8", "surrogatepass")
        brackets = chunk.translate(None, _NOT_BRACKETS)
        running = list(itertools.accumulate(map(_STEP.__getitem__, brackets), initial=depth))
        if max(running) > MAX_DEPTH:
            return False
        depth = running[-1]
    return True


def _nesting_depth_ok_slowly(text: str) -> bool:
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        c = match.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif c in "]}":
            depth -= 1
    return True


def _has_surrogate(value: object) -> bool:
    """A lone surrogate (JSON "\\ud800") is no text: it cannot be printed or written back."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


# A surrogate in the text itself, or the escape of one (\\ud800-\\udfff): without either no
# decoded string can hold a lone surrogate, and the walk over the document is left out.
_SURROGATE_HINT = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


def _may_hold_surrogate(text: str) -> bool:
    return _SURROGATE_HINT.search(text) is not None


def read_json(text: str) -> object:
    """A BETS.json document, read strictly, or BetsError with a one-line reason.

    Numbers are exact: a JSON integer becomes an int, a JSON decimal a Decimal, through hooks
    that refuse exponents, NaN and Infinity and over-long tokens before any conversion."""
    _check_size_and_depth(text)
    try:
        document = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_int=_json_int,
            parse_float=_json_decimal,
            parse_constant=_json_constant,
        )
    except _Refused as e:
        raise BetsError([(None, str(e))]) from None
    except json.JSONDecodeError as e:
        raise BetsError([(None, f"not valid JSON: {e}")]) from None
    except RecursionError:  # not expected after the depth guard; never a traceback
        raise BetsError([(None, "the bets file is nested too deeply")]) from None
    if _may_hold_surrogate(text) and _has_surrogate(document):
        raise BetsError([(None, "the bets file holds a lone surrogate (\\ud800-\\udfff): no text")])
    return document


def _check_size_and_depth(text: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise BetsError([(None, f"the bets file holds more than {MAX_TEXT_CHARS} characters")])
    if not _nesting_depth_ok(text):
        raise BetsError([(None, f"the bets file is nested deeper than {MAX_DEPTH} levels")])


# read_json's decoder: its scanner reads one value at a time (_stream_bets)
_DECODER = json.JSONDecoder(
    object_pairs_hook=_no_duplicates,
    parse_int=_json_int,
    parse_float=_json_decimal,
    parse_constant=_json_constant,
)


def load_bets(text: str, table: Table, progress: Callable[[int], None] | None = None) -> list[Bet]:
    """Parse BETS.json text strictly (see read_json), then check every bet (parse_bets).

    A plain file is read one bet at a time (_stream_bets): each bet is checked as soon as it
    is decoded, and the file's objects are never all held at once. Any file that is not plain
    is read whole by read_json and parse_bets, which give every refusal and its reason.
    `progress` is told how many characters have been read, now and then."""
    _check_size_and_depth(text)
    bets = _stream_bets(text, table, progress)
    if bets is None:
        return parse_bets(read_json(text), table)
    return bets


_WS = re.compile(r"[ \t\n\r]*")  # JSON's whitespace
_PROGRESS_EVERY = 4096  # bets


def _stream_bets(
    text: str, table: Table, progress: Callable[[int], None] | None
) -> list[Bet] | None:
    """The bets of a plain BETS.json text, decoded one at a time, or BetsError with the
    problems of its bets; None for any other text, which load_bets then reads whole.

    Plain: one object whose keys are all different, "markers" (if any) before "bets", the
    bets an array, every value decoded by the strict decoder's own scanner and hooks, no
    lone surrogate, nothing after the object. The problems are then the very ones
    parse_bets(read_json(text)) finds, in the same order; for any other text (a JSON error
    anywhere, a bad marker...) that whole reading decides what is said."""
    return _PlainReader(text, table, progress).read()


class _NotPlain(Exception):
    """The text is no plain BETS.json (see _stream_bets): load_bets reads it whole."""


class _PlainReader:
    """_stream_bets' reading: the text's one object, member by member, from `i` on."""

    def __init__(self, text: str, table: Table, progress: Callable[[int], None] | None):
        self.text = text
        self.table = table
        self.progress = progress
        self.surrogates = _may_hold_surrogate(text)
        self.i = 0
        self.checked: _Checked | None = None  # once the bets array is met
        self.markers: dict[str, Decimal] = {}

    def read(self) -> list[Bet] | None:
        try:
            self._object()
        except (_NotPlain, ValueError, StopIteration, RecursionError):
            # a JSON error (JSONDecodeError and _Refused are ValueErrors), a bad marker
            # (BetsError): the whole reading says which and where
            return None
        if self.i != len(self.text) or self.checked is None:
            return None
        if self.progress is not None:
            self.progress(self.i)
        return self.checked.bets()

    def _object(self) -> None:
        self.i = _WS.match(self.text).end()
        self._expect("{")
        self.i = _WS.match(self.text, self.i + 1).end()
        keys: set[str] = set()
        while True:
            key = self._key(keys)
            if key == "bets" and self.text[self.i : self.i + 1] == "[":
                self._bets()
            else:
                self._value(key)
            if self._past_separator("}"):
                return

    def _expect(self, c: str) -> None:
        if self.text[self.i : self.i + 1] != c:
            raise _NotPlain

    def _no_surrogate(self, value: object) -> None:
        if self.surrogates and _has_surrogate(value):
            raise _NotPlain

    def _key(self, keys: set[str]) -> str:
        """A member's key, not seen before, and its colon."""
        self._expect('"')
        key, self.i = json.decoder.scanstring(self.text, self.i + 1)
        if key in keys:
            raise _NotPlain
        self._no_surrogate(key)
        keys.add(key)
        self.i = _WS.match(self.text, self.i).end()
        self._expect(":")
        self.i = _WS.match(self.text, self.i + 1).end()
        return key

    def _past_separator(self, close: str) -> bool:
        """Past the comma or the `close` after a value: True at `close`."""
        text = self.text
        i = _WS.match(text, self.i).end()
        c = text[i : i + 1]
        self.i = _WS.match(text, i + 1).end()
        if c == close:
            return True
        if c != ",":
            raise _NotPlain
        return False

    def _bets(self) -> None:
        """The bets array, each bet checked as soon as it is decoded."""
        self.checked = checked = _Checked(self.table, self.markers)
        self.i = _WS.match(self.text, self.i + 1).end()
        if self.text[self.i : self.i + 1] == "]":
            self.i += 1
            return
        scan, progress = _DECODER.scan_once, self.progress
        while True:
            raw, self.i = scan(self.text, self.i)
            self._no_surrogate(raw)
            checked.add(raw)
            if progress is not None and checked.count % _PROGRESS_EVERY == 0:
                progress(self.i)
            if self._past_separator("]"):
                return

    def _value(self, key: str) -> None:
        """Any other member's value: the markers, read before the bets, are kept."""
        value, self.i = _DECODER.scan_once(self.text, self.i)
        self._no_surrogate(value)
        if key == "markers":
            if self.checked is not None:
                raise _NotPlain  # markers after the bets: read whole
            self.markers = parse_markers(value, self.table)
        elif key == "bets":
            raise _NotPlain  # bets that are no array: read_json and parse_bets say so


def bet_to_json(bet: Bet) -> dict:
    """The BETS.json form of a bet (the inverse of parse_bet)."""
    out: dict = {"player": bet.player, "type": bet.type}
    if bet.position.index is not None:
        out["index"] = bet.position.index
    elif bet.type in NUMBERED:
        out["numbers"] = list(bet.position.numbers)
    out["stake"] = format(bet.stake, "f")
    if bet.chip != COULEUR:
        out["chip"] = bet.chip
    if bet.exception:
        out["exception"] = True
    return out


def players_in_order(bets: Iterable[Bet]) -> list[str]:
    return list(dict.fromkeys(b.player for b in bets))
