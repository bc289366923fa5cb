"""The pin map the board tests use is hardware/pico_pins.json's, and the board reads no key
that file lacks. The hardware description agrees with that pin map: hardware/harness.md's
table of inputs (what drives each input, its output stage, its pull, its active level),
hardware/bom.csv (designators, quantities, the pull resistors) and hardware/rig.md."""

from __future__ import annotations

import csv
import json
import re
import sys

from rmc import FIRMWARE_DIR, HARDWARE_DIR, ROOT

sys.path.insert(0, str(ROOT / "tests" / "fw"))
import test_board_pico


def _subset(small: dict, big: dict, where: str = "") -> None:
    for k, v in small.items():
        assert k in big, f"{where}{k} missing from pico_pins.json"
        if isinstance(v, dict):
            _subset(v, big[k], f"{where}{k}.")
        else:
            assert big[k] == v, f"{where}{k}: test {v!r}, pico_pins.json {big[k]!r}"


def test_board_test_pins_match_the_hardware_file() -> None:
    pins = json.loads((HARDWARE_DIR / "pico_pins.json").read_text())
    _subset(test_board_pico.PINS, pins)


def test_board_reads_only_keys_of_the_pin_map() -> None:
    pins = json.loads((HARDWARE_DIR / "pico_pins.json").read_text())
    src = (FIRMWARE_DIR / "board_pico.py").read_text()
    # the names board_pico.py gives the pin map and its sections
    keys = set(re.findall(r'\b(?:cfg|pk|spec|u|lid|inc)(?:\.get\(|\[)\s*"([a-z_]+)"', src))
    assert {"pockets", "latch_active", "watchdog_ms", "de"} <= keys  # the pattern still works
    known = set(pins)
    for v in pins.values():
        if isinstance(v, dict):
            known |= set(v)
    assert keys <= known, keys - known


# --- the hardware description against the pin map ---------------------------------------

PULSE_LINES = ("ball_a", "ball_b", "rotor_a", "rotor_b")
GPIO_INPUTS = (*PULSE_LINES, "lid", "incident")
INPUT_ROWS = {"pockets", *GPIO_INPUTS, "uart"}  # uart: its RX pin
INPUTS_HEADING = "## Inputs as the firmware sees them"
_DESIGNATOR = re.compile(r"\b([A-Z]{1,2})(\d+)(?:-([A-Z]{1,2})(\d+))?\b")
_OPEN_STAGES = ("open-collector", "open collector", "open-drain", "open drain", "switch to gnd")


def _pins() -> dict:
    return json.loads((HARDWARE_DIR / "pico_pins.json").read_text())


def _designators(text: str, prefixes: set[str] | None = None) -> list[str]:
    """Designators and ranges ("R1-R43", "U7") in text, expanded; only those of `prefixes`."""
    out = []
    for m in _DESIGNATOR.finditer(text):
        pre, lo, pre2, hi = m.groups()
        if prefixes is not None and pre not in prefixes:
            continue
        if pre2 is None:
            out.append(f"{pre}{lo}")
            continue
        assert pre2 == pre and int(hi) > int(lo), f"bad designator range {m.group(0)!r}"
        out.extend(f"{pre}{i}" for i in range(int(lo), int(hi) + 1))
    return out


def _bom() -> dict[str, dict[str, str]]:
    """bom.csv: designator -> its row."""
    with (HARDWARE_DIR / "bom.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    by_ref: dict[str, dict[str, str]] = {}
    for row in rows:
        ref = row["ref"]
        assert _DESIGNATOR.sub("", ref).strip(" ,") == "", f"bom.csv: bad ref {ref!r}"
        refs = _designators(ref)
        assert len(refs) == int(row["qty"]), (
            f"bom.csv {ref}: {len(refs)} designators, qty {row['qty']}"
        )
        for r in refs:
            assert r not in by_ref, f"bom.csv: {r} in both {by_ref[r]['ref']} and {ref}"
            by_ref[r] = row
    return by_ref


def _pull_word(text: str) -> str | None:
    t = text.lower()
    found = {d for d in ("up", "down") if f"pull-{d}" in t}
    assert len(found) <= 1, f"both a pull-up and a pull-down in {text!r}"
    return found.pop() if found else None


def _inputs_table() -> dict[str, dict[str, str]]:
    """harness.md's table of inputs: line -> {column: cell}."""
    text = (HARDWARE_DIR / "harness.md").read_text()
    assert INPUTS_HEADING in text, f"harness.md has no section {INPUTS_HEADING!r}"
    section = text.split(INPUTS_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")]
    assert len(rows) > 2, "harness.md: the inputs section has no table"
    cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows]
    head = [h.split(" (")[0] for h in cells[0]]
    want = ["line", "input", "driven by", "output stage", "pull at the input", "active level"]
    assert head == want, head
    return {c[0]: dict(zip(head, c, strict=True)) for c in cells[2:]}


def _expected_active(pins: dict, line: str) -> int:
    """The electrical level of a line's logical 1, as the firmware and the rig read the map."""
    if line == "pockets":
        return int(pins["pockets"]["active"])
    if line == "lid":
        return int(pins["lid"]["locked_level"])
    if line == "incident":
        return int(pins["incident"]["active_level"])
    if line == "uart":
        return 0  # the start bit; a UART line idles high
    spec = pins[line]
    # The firmware counts a ball pass on a rising edge only (IRQ_RISING); the rig
    # (rmc.rig.pins.Levels) drives the pulse lines active high unless they are pulled up.
    if spec.get("edge") == "rising":
        assert spec.get("pull") != "up", f"{line}: rising-edge pulses on a pulled-up input"
        return 1
    return 0 if spec.get("pull") == "up" else 1


def test_bom_designators_match_quantities() -> None:
    bom = _bom()
    assert "U1" in bom and "Pico" in bom["U1"]["part"]


def test_harness_inputs_agree_with_the_pin_map_and_the_bom() -> None:
    pins = _pins()
    bom = _bom()
    prefixes = {re.match(r"[A-Z]+", r).group(0) for r in bom}
    table = _inputs_table()
    assert set(table) == INPUT_ROWS, set(table) ^ INPUT_ROWS
    mentioned: set[str] = set()
    for line, row in table.items():
        where = f"harness.md inputs, {line}"
        gp = re.findall(r"\bGP(\d+)\b", row["input"])
        if line == "pockets":
            assert not gp and "74HC165" in row["input"], where
            json_pull = None  # a 74HC165 has no pull resistors of its own
        else:
            spec = pins["uart"] if line == "uart" else pins[line]
            pin = spec["rx"] if line == "uart" else spec["pin"]
            assert gp == [str(pin)], f"{where}: input {row['input']!r}, pico_pins.json GP{pin}"
            json_pull = None if line == "uart" else spec.get("pull")
        # the pull: an internal one is what the firmware is told to switch on, an external
        # one is a part of the BOM that says the same direction
        pull_cell = row["pull at the input"]
        pull = _pull_word(pull_cell)
        if "internal" in pull_cell.lower():
            assert pull == json_pull, f"{where}: {pull_cell!r}, pico_pins.json pull {json_pull!r}"
        else:
            assert json_pull is None, f"{where}: pico_pins.json pulls {json_pull}, harness.md not"
        for ref in _designators(pull_cell, prefixes):
            assert ref in bom, f"{where}: {ref} not in bom.csv"
            desc = (bom[ref]["part"] + " " + bom[ref]["description"]).lower()
            assert f"pull-{pull}" in desc, f"{where}: {ref} is no pull-{pull} in bom.csv"
            mentioned.add(ref)
        for ref in _designators(row["driven by"], prefixes):
            assert ref in bom, f"{where}: {ref} not in bom.csv"
            mentioned.add(ref)
        # the level, and an output stage that can give it
        level = re.match(r"\s*([01])\b", row["active level"])
        assert level, f"{where}: active level {row['active level']!r}"
        active = int(level.group(1))
        assert active == _expected_active(pins, line), f"{where}: active {active}, pico_pins.json"
        idle_pull = "down" if active == 1 else "up"
        stage = row["output stage"].lower()
        if any(s in stage for s in _OPEN_STAGES):
            assert pull == "up" and active == 0, (
                f"{where}: an {stage} output needs a pull-up and is active low"
            )
        elif "high-z" in stage or "tri-state" in stage:
            assert pull == idle_pull, f"{where}: a {stage} output needs a pull-{idle_pull}"
        else:
            assert "push-pull" in stage, f"{where}: unknown output stage {stage!r}"
        if pull is not None:  # an unplugged sensor must read idle, not active
            assert pull == idle_pull, f"{where}: pull-{pull} on an input that idles at {1 - active}"
    # no pull resistor in the BOM that the harness does not place
    for ref, row in bom.items():
        desc = (row["part"] + " " + row["description"]).lower()
        if "pull-up" in desc or "pull-down" in desc:
            assert ref in mentioned, f"bom.csv {row['ref']}: {ref} pulls no input of harness.md"


def test_harness_and_rig_pin_rows_agree_with_the_pin_map() -> None:
    pins = _pins()
    seen = set()
    # harness.md: "| BALL_A | GP10, pull-down | rising edge, hard IRQ |"
    text = (HARDWARE_DIR / "harness.md").read_text()
    for m in re.finditer(
        r"^\| *([A-Z_]+) *\| *GP(\d+)(?:, *([a-z-]+))? *\|([^|\n]*)\|", text, re.M
    ):
        line, pin, pull, rest = m.group(1).lower(), int(m.group(2)), m.group(3), m.group(4)
        if line not in GPIO_INPUTS:
            continue
        spec = pins[line]
        assert pin == spec["pin"], f"harness.md {line}: GP{pin}, pico_pins.json {spec['pin']}"
        assert pull == (f"pull-{spec['pull']}" if "pull" in spec else None), f"harness.md {line}"
        if line in PULSE_LINES:
            edge = "both" if "both edges" in rest else "rising" if "rising" in rest else None
            assert edge == spec["edge"], f"harness.md {line}: {rest.strip()!r}"
        seen.add(("harness", line))
    # rig.md: "| ball_a | GP10 (pull-down, rising) | 1 = ball passing | ..."
    text = (HARDWARE_DIR / "rig.md").read_text()
    for m in re.finditer(r"^\| *([a-z_]+) *\| *GP(\d+) \(([^)]*)\) *\| *([^|]*)\|", text, re.M):
        line, pin, how, level = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        spec = pins[line]
        assert pin == spec["pin"], f"rig.md {line}: GP{pin}, pico_pins.json {spec['pin']}"
        assert _pull_word(how) == spec.get("pull"), f"rig.md {line}: {how!r}"
        if "edge" in spec:
            assert ("both" in how) == (spec["edge"] == "both"), f"rig.md {line}: {how!r}"
        lv = re.match(r"([01]) =", level.strip())
        if lv:
            assert int(lv.group(1)) == _expected_active(pins, line), f"rig.md {line}: {level!r}"
        seen.add(("rig", line))
    for doc in ("harness", "rig"):
        missing = [ln for ln in GPIO_INPUTS if (doc, ln) not in seen]
        assert not missing, f"{doc}.md: no pin row for {missing}"
    # rig.md's pocket rows: "| pocket 0..15 | 74HC165 #1-#2 inputs, channel i | 1 = ball ..."
    for m in re.finditer(r"^\| *pocket [\d.]+ *\| *74HC165[^|]*\| *([01])\b", text, re.M):
        assert int(m.group(1)) == pins["pockets"]["active"], "rig.md pocket level"
