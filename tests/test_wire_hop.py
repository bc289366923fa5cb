"""HOP, the pockets lit while the ball bounces (docs/protocol.md): the checker takes it from
a spin's DROP to its outcome, for that spin, with pocket labels in their one spelling; every
other HOP is a violation with its reason, and the host's readers of frames pass it by."""

from __future__ import annotations

import pytest

from rmc.checker import RULES, Checker
from rmc.framegen import result_fields
from rmcfw import proto
from rmcfw.frames import Encoder

Frames = list[tuple[str, tuple]]


def _spin(n: int, rdir: str, hops: Frames = (), after: Frames = (), void: str | None = None):
    bdir = "ccw" if rdir == "cw" else "cw"
    out: Frames = [(proto.T_LAUNCH, ("spin", n, "rdir", rdir, "bdir", bdir, "under", "5"))]
    out += [(proto.T_REV, ("spin", n, "n", i, "period_us", 600000)) for i in range(1, 6)]
    out.append((proto.T_RNVP, ("spin", n, "drop_ms", 9000, "lead_ms", 1200, "why", "fit")))
    out.append((proto.T_DROP, ("spin", n, "revs", 5, "under", "17")))
    out += list(hops)
    if void:
        out.append((proto.T_VOID, ("spin", n, "reason", void)))
    else:
        out.append((proto.T_RESULT, result_fields(n, "17")))
    return out + list(after)


def _hop(n: int, lit: str) -> tuple[str, tuple]:
    return (proto.T_HOP, ("spin", n, "lit", lit))


BOUNCE = [_hop(1, "5"), _hop(1, "-"), _hop(1, "17;32"), _hop(1, "17")]


def check(frames: Frames, prev: str = "-") -> tuple[list[tuple[str, str]], object]:
    enc = Encoder("T01", 1 if prev == "-" else 9)
    head: Frames = [
        (proto.T_BOOT, ("fw", "1", "wheel", "", "reset", "power", "faults", "", "prev", prev))
    ]
    if prev == "-":
        head += [(proto.T_LID, ("locked", 0)), (proto.T_SESSION_OPEN, ("chef", "c", "session", 1))]
    c = Checker()
    ms = 0
    for ftype, fields in head + frames:
        ms += 100
        assert c.feed(bytes(enc.frame(ftype, fields, ms=ms))) is not None
    r = c.report()
    assert not r.gaps and not r.crc_errors and not r.malformed
    return [(v["rule"], v["detail"]) for v in r.violations], r


def test_a_bounce_between_the_drop_and_the_result_is_clean():
    got, r = check(_spin(1, "cw", BOUNCE) + _spin(2, "ccw", [_hop(2, "0;00;CMC"), _hop(2, "17")]))
    assert got == []
    assert [x["result"] for x in r.results] == ["17", "17"]
    assert "hop_outside_bounce" in RULES


def test_a_recording_begun_during_the_bounce_takes_its_hops():
    got, _ = check([_hop(4, "5"), _hop(4, "17"), (proto.T_RESULT, result_fields(4, "17"))], "8:40")
    assert got == []


def _moved(frames: Frames, i: int, j: int) -> Frames:
    """frames with the one at i moved to j (in the list without it)."""
    out = list(frames)
    out.insert(j, out.pop(i))
    return out


SPIN1 = _spin(1, "cw", BOUNCE)
AT_DROP = next(i for i, (t, _) in enumerate(SPIN1) if t == proto.T_DROP)
PLACES = {
    "before the drop": (_moved(SPIN1, AT_DROP + 1, AT_DROP), "spin 1: before its drop"),
    "before the launch's rnvp": (
        [_hop(1, "5"), *SPIN1],
        "spin 1: no such spin among the pockets",
    ),
    "after the result": ([*SPIN1, _hop(1, "17")], "spin 1: after its outcome"),
    "after a void": (
        _spin(1, "cw", void=proto.V_BALL_OUT, after=[_hop(1, "-")]),
        "spin 1: after its outcome",
    ),
    "of another spin while one is open": (
        _spin(1, "cw", [_hop(2, "5")]),
        "spin 2 while spin 1 is open",
    ),
    "of a spin never launched, between spins": (
        [*SPIN1, _hop(7, "5"), *_spin(2, "ccw")],
        "spin 7: no such spin among the pockets",
    ),
    "after an incident's start": (
        [
            *_spin(1, "cw", void=proto.V_OBJECT),
            (proto.T_INCIDENT, ("spin", 1, "step", "start")),
            _hop(1, "5"),
        ],
        "spin 1: after its outcome",
    ),
}


@pytest.mark.parametrize("name", sorted(PLACES))
def test_a_hop_outside_the_bounce_is_a_violation(name):
    frames, detail = PLACES[name]
    got, _ = check(frames)
    assert ("hop_outside_bounce", detail) in got, got
    assert all(rule == "hop_outside_bounce" for rule, _ in got), got


BAD = {
    "37": "'37' in 'lit' is not a pocket",
    "cmc": "'cmc' in 'lit' is not a pocket",
    "05": "'05' in 'lit' is not a pocket",
    "17;17": "pocket twice in a list",
    "17;": "bad pocket list",
    ";17": "bad pocket list",
    "": "bad pocket list",
    "-;17": "bad pocket list",
}


@pytest.mark.parametrize("lit", sorted(BAD))
def test_a_hop_whose_pockets_are_not_in_their_one_spelling_is_a_bad_field(lit):
    got, r = check(_spin(1, "cw", [_hop(1, "5"), _hop(1, lit), _hop(1, "17")]))
    assert len(got) == 1 and got[0][0] == "bad_field" and BAD[lit] in got[0][1], got
    assert [x["result"] for x in r.results] == ["17"]  # the spin stands: no rule of the game


def test_a_hop_without_its_fields_is_a_bad_field():
    got, _ = check(_spin(1, "cw", [(proto.T_HOP, ("spin", 1))]))
    assert got == [("bad_field", "HOP without 'lit'")]
    got, _ = check(_spin(1, "cw", [(proto.T_HOP, ("lit", "5"))]))
    assert len(got) == 1 and got[0][0] == "bad_field", got
