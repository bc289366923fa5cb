"""docs/protocol.md stays true: its example frame decodes, its names are the code's."""

from __future__ import annotations

import re

from rmc import ROOT
from rmc.checker import RULES
from rmc.frames import decode
from rmcfw import proto

DOC = (ROOT / "docs" / "protocol.md").read_text()


def test_example_frames_decode():
    examples = [line for line in DOC.splitlines() if line.startswith("$1,")]
    assert examples
    for line in examples:
        f = decode(line.encode())
        assert f.type == proto.T_RESULT and f.fields["num"] == "17"


def test_every_rule_and_type_is_documented():
    for rule in RULES:
        assert f"`{rule}`" in DOC, rule
    types = [v for k, v in vars(proto).items() if k.startswith("T_")]
    for t in types:
        assert re.search(rf"\| `{t}` \|", DOC), t
    commands = [v for k, v in vars(proto).items() if k.startswith("C_")]
    for c in commands:
        assert f"`{c}`" in DOC, c


def test_thresholds_fault_codes_and_alerts_are_the_codes():
    """A second encoder is written from the spec: its lists are the firmware's own."""
    from rmc.checker import ALERTS
    from rmcfw import config

    row = next(ln for ln in DOC.splitlines() if ln.startswith("| `key` (CFG) |"))
    documented = dict(re.findall(r"`(\w+)` (\d+–\d+)", row))
    assert documented == {k: "{}–{}".format(*config.bounds(k)) for k in config.keys()}
    row = next(ln for ln in DOC.splitlines() if ln.startswith("| `code` (FAULT) |"))
    faults = {v for k, v in vars(proto).items() if k.startswith("F_")}
    assert set(re.findall(r"`(\w+)`", row)) - {"code"} == faults
    for what in ALERTS:
        assert what in DOC, what
