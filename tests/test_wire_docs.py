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
