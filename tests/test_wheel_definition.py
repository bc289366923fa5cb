"""The wheel definition in hardware/ against decree 1-2."""

from __future__ import annotations

import itertools
import json

from rmc import HARDWARE_DIR
from rmcfw import numbers


def _wheel() -> dict:
    return json.loads((HARDWARE_DIR / "wheel.json").read_text())


def test_every_number_once() -> None:
    pockets = _wheel()["pockets"]
    assert sorted(pockets) == sorted(numbers.NUMBERS)


def test_colours_alternate_between_greens() -> None:
    pockets = _wheel()["pockets"]
    ring = pockets + pockets[:1]
    for a, b in itertools.pairwise(ring):
        ca, cb = numbers.colour(a), numbers.colour(b)
        if "vert" in (ca, cb):
            continue
        assert ca != cb, f"{a} and {b} are side by side and both {ca}"


def test_at_least_seven_deflectors() -> None:
    assert len(_wheel()["deflectors_deg"]) >= 7
