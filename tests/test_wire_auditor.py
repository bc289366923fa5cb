"""`rmc check` judged by an auditor's own frames, written from docs/protocol.md (issue 19).

Frames come only from tests/auditor.py, which knows the spec and the decree but no code of
the project. The checker must find clean what the spec calls clean, with exactly its
results, and flag (exit 1) every forged, replayed, reordered, out-of-spec or out-of-rule
recording.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib

import pytest
from auditor import (
    POCKETS,
    Board,
    Close,
    Config,
    Fault,
    Last3,
    Lid,
    Open,
    Raw,
    Reboot,
    Spin,
    Tamper,
    chances,
    fields_of,
    frame_line,
    play,
    raw_body,
    seal,
    session,
    trace_bytes,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmc.checker import check_bytes

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
VOID_REASONS = ("few_revs", "object", "ball_out", "sensors")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def judge(lines: list[bytes] | bytes, key: bytes | None = None) -> dict:
    """The checker's report as JSON, `clean` included."""
    data = lines if isinstance(lines, bytes) else b"".join(lines)
    report, _, _ = check_bytes(data, key)
    out = report.to_json()
    out["clean"] = report.clean
    return out


def results(rec) -> list[dict]:
    return [{"spin": s, "result": n} for s, n in rec.results]


def rules(out: dict) -> set[str]:
    return {v["rule"] for v in out["violations"]}


def cli(tmp_path, data: bytes, key: bytes | None = None) -> tuple[int, dict]:
    """`python -m rmc check FILE --json`: exit status and JSON."""
    path = tmp_path / "input.log"
    path.write_bytes(data)
    cmd = [sys.executable, "-m", "rmc", "check", str(path), "--json"]
    if key is not None:
        kf = tmp_path / "table.key"
        kf.write_text(key.hex() + "\n")
        cmd += ["--key-file", str(kf)]
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    assert b"Traceback" not in p.stderr
    return p.returncode, json.loads(p.stdout.decode().strip().splitlines()[-1])


def six(changes: dict | None = None) -> list:
    """A session of six coups, the last three announced before the fourth; `changes` maps
    a coup's index to the Spin fields it gets."""
    events: list = [Open()]
    for i, num in enumerate(("1", "2", "3", "4", "5", "6")):
        if i == 3:
            events.append(Last3(6, 3))
        fields = {"num": num, **(changes or {}).get(i, {})}
        events.append(Spin(**fields))
    return [*events, Close()]


def respell(line: bytes, header=None, fields=None, key: bytes | None = None) -> bytes:
    """The same frame with its header items or fields spelled otherwise, CRC made good."""
    start, head, flds = fields_of(line)
    head = header(head) if header else head
    flds = fields(flds) if fields else flds
    return seal(raw_body(",".join(head), flds), key, start)


def index_of(lines: list[bytes], ftype: str, nth: int = 0) -> int:
    found = [i for i, ln in enumerate(lines) if fields_of(ln)[1][5] == ftype]
    return found[nth]


# --- Clean recordings ---


def test_clean_session_via_cli_capture_trace_and_key(tmp_path):
    rec = play(session(8))
    rc, out = cli(tmp_path, b"".join(rec.lines))
    assert rc == 0 and out["clean"], out
    assert out["results"] == results(rec)
    rc, out = cli(tmp_path, trace_bytes(rec.lines))
    assert (rc, out["input"], out["results"]) == (0, "trace", results(rec))
    keyed = play(session(8), key=KEY)
    rc, out = cli(tmp_path, b"".join(keyed.lines), key=KEY)
    assert rc == 0 and out["results"] == results(keyed) and out["auth_failures"] == 0


CLEAN_CASES = {
    "green pockets": [
        Open(),
        Spin("0"),
        Spin("00"),
        Spin("CMC"),
        Last3(6),
        Spin("36"),
        Spin("19"),
        Spin("18"),
        Close(),
    ],
    "incident and relaunch": six({1: {"incident": True}}),
    "voided spins": [
        Open(),
        Spin("5", void="few_revs", revs=2),
        Spin("7"),
        Spin("8", void="object"),
        Spin("9"),
        Spin("10"),
        Last3(6),
        Spin("11"),
        Spin("12", void="ball_out"),
        Spin("13"),
        Spin("14"),
        Close(),
    ],
    "fault raised and cleared, threshold set": [Fault(), Config(), *six(), Fault(on=False)],
    "reboot between spins": [*six()[:4], Reboot(), *six()[4:]],
    "two sessions and a reboot": [*six(), Reboot(), *session(4)],
    "session without a coup": [Open(), Close(), *six()],
    "forced close with its reason, before the last three": [
        Open(),
        *[Spin(n) for n in "1234"],
        Raw("SCLOSE", (("chef", "C7"), ("session", 1), ("spins", 4), ("reason", "rotor fault"))),
        Lid(True),
    ],
    "last three repeated as they go": [
        Open(),
        Spin("1"),
        Last3(4, 3),
        Spin("2"),
        Last3(4, 2),
        Spin("3"),
        Last3(4, 1),
        Spin("4"),
        Close(),
    ],
}


@pytest.mark.parametrize("name", sorted(CLEAN_CASES))
def test_clean_recordings_from_the_spec(name):
    rec = play(CLEAN_CASES[name])
    out = judge(rec.lines)
    assert out["clean"], out
    assert out["results"] == results(rec)


def test_clean_in_a_trace_naming_the_table_and_wheel():
    rec = play(six())
    out = judge(trace_bytes(rec.lines))
    assert out["clean"], out
    assert out["results"] == results(rec)


def test_resent_frames_marked_are_clean():
    lines = play(six()).lines
    i = index_of(lines, "RES")
    # a frame sent again from the journal, marked ~, after later ones: no replay
    out = judge([*lines[:i], *lines[i + 1 : i + 4], b"~" + lines[i], *lines[i + 4 :]])
    assert out["clean"], out
    out = judge([*lines, b"~" + lines[i]])
    assert out["clean"], out


# --- Forgery, replay, reordering ---


def test_forged_frames_without_the_key_are_flagged(tmp_path):
    lines = play(six(), key=KEY).lines
    forged_plain = play(six({5: {"num": "9"}})).lines
    forged_other = play(six({5: {"num": "9"}}), key=OTHER_KEY).lines
    i = index_of(lines, "RES", 5)
    cases = {
        "untagged": [*lines[:i], forged_plain[i], *lines[i + 1 :]],
        "tagged with another key": [*lines[:i], forged_other[i], *lines[i + 1 :]],
        "added, tagged with another key": [*lines, forged_other[i]],
    }
    for name, case in cases.items():
        out = judge(case, KEY)
        assert not out["clean"] and out["auth_failures"] >= 1, name
        assert {"spin": 6, "result": "9"} not in out["results"], name
    # an untagged frame in a tagged stream is flagged without the key too
    assert not judge(cases["untagged"])["clean"]
    rc, out = cli(tmp_path, b"".join(cases["tagged with another key"]), key=KEY)
    assert rc == 1 and out["auth_failures"] == 1


def test_replay_of_an_earlier_boot_is_flagged():
    rec = play([*six(), Reboot(), *session(3)])
    boot1 = rec.boards[0].lines
    assert not judge([*rec.lines, *boot1])["clean"]  # boot 1 again after boot 2
    assert not judge([*rec.lines, boot1[index_of(boot1, "RES")]])["clean"]
    # frames of boot 1 never seen before, played after boot 2: below the highest key
    later = rec.boards[1].lines
    assert not judge([*later, *boot1])["clean"]


def test_reordered_frames_without_the_resend_mark_are_flagged():
    lines = play(six()).lines
    i = index_of(lines, "LAUNCH", 2)
    out = judge([*lines[:i], lines[i + 1], lines[i], *lines[i + 2 :]])
    assert not out["clean"] and out["out_of_order"] == 1
    out = judge([*lines[:i], lines[i + 1], b"~" + lines[i], *lines[i + 2 :]])
    assert out["clean"], out  # the same, marked as resent


def test_a_frame_sent_twice_unmarked_or_changed_is_flagged():
    lines = play(six()).lines
    i = index_of(lines, "RES")
    assert not judge([*lines, lines[i]])["clean"]
    changed = respell(lines[i], fields=lambda f: [(k, "3" if k == "num" else v) for k, v in f])
    out = judge([*lines, b"~" + changed])
    assert not out["clean"]


# --- One spelling per frame ---


def _field(name: str, new):
    return lambda flds: [(k, new(v) if k == name else v) for k, v in flds]


NON_CANONICAL = {
    "ball direction CW": ("LAUNCH", None, _field("bdir", str.upper)),
    "rotor direction CCW": ("LAUNCH", None, _field("rdir", str.upper)),
    "spin +1": ("LAUNCH", None, _field("spin", lambda v: "+" + v)),
    "spin 01": ("LAUNCH", None, _field("spin", lambda v: "0" + v)),
    "revolutions 05": ("DROP", None, _field("revs", lambda v: "0" + v)),
    "number 05": ("RES", None, _field("num", lambda v: "0" + v)),
    "needless escape %31": ("RES", None, _field("num", lambda v: "%31")),
    "needless escape %63": ("LAUNCH", None, _field("bdir", lambda v: "%63" + v[1:])),
    "escape in capitals %2C": ("FAULT", None, _field("detail", lambda v: v.replace("%2c", "%2C"))),
    "field twice": ("LAUNCH", None, lambda f: [*f, f[0]]),
    "field twice, other value": ("RES", None, lambda f: [*f, ("num", "9")]),
    "seq 05": ("LAUNCH", lambda h: [*h[:3], "0" + h[3], *h[4:]], None),
    "boot +1": ("LAUNCH", lambda h: [h[0], h[1], "+" + h[2], *h[3:]], None),
    "ms with a leading zero": ("LAUNCH", lambda h: [*h[:4], "0" + h[4], h[5]], None),
    "ms over 2^32": ("LAUNCH", lambda h: [*h[:4], str(2**32 + 5), h[5]], None),
    "version 2": ("LAUNCH", lambda h: ["2", *h[1:]], None),
    "type in lower case": ("RES", lambda h: [*h[:5], "res"], None),
}


@pytest.mark.parametrize("name", sorted(NON_CANONICAL))
def test_non_canonical_spellings_are_flagged(name):
    ftype, header, fields = NON_CANONICAL[name]
    events = [Fault(), *six(), Fault(on=False)]
    events[0] = Raw("FAULT", (("code", "F_X"), ("on", 1), ("detail", "a,b")))
    events[-1] = Raw("FAULT", (("code", "F_X"), ("on", 0), ("detail", "a,b")))
    lines = play(events).lines
    assert judge(lines)["clean"]
    i = index_of(lines, ftype)
    bad = respell(lines[i], header, fields)
    assert bad != lines[i]
    out = judge([*lines[:i], bad, *lines[i + 1 :]])
    assert not out["clean"], (bad, out)


def _fault_line(length: int) -> bytes:
    """A FAULT frame of exactly `length` bytes without its newline (seq 3 of boot 1)."""
    bare = frame_line("T01", 1, 3, 5000, "FAULT", [("code", "F_X"), ("on", 0), ("detail", "")])
    pad = "a" * (length - len(bare.rstrip(b"\n")))
    return seal(raw_body("1,T01,1,3,5000,FAULT", [("code", "F_X"), ("on", "0"), ("detail", pad)]))


def test_the_250_byte_limit():
    head = play([]).lines  # BOOT, LID: seq 1 and 2
    assert len(_fault_line(250)) == 251 and len(_fault_line(251)) == 252
    assert judge([*head, _fault_line(250)])["clean"]
    assert not judge([*head, _fault_line(251)])["clean"]
    with pytest.raises(ValueError):
        frame_line("T01", 1, 3, 5000, "FAULT", [("detail", "a" * 251)])


def test_crc_and_tag_spelled_in_capitals_are_flagged():
    lines = play(six(), key=KEY).lines
    i = index_of(lines, "RES")
    text = lines[i].rstrip(b"\n")
    crc_up = text[:-8] + text[-8:].upper() + b"\n"
    hash_at = text.index(b"#")
    tag_up = text[: hash_at + 1] + text[hash_at + 1 : hash_at + 17].upper() + text[hash_at + 17 :]
    tag_up = seal_text(tag_up)
    for bad in (crc_up, tag_up):
        assert bad != lines[i]
        assert not judge([*lines[:i], bad, *lines[i + 1 :]], KEY)["clean"], bad


def seal_text(text: bytes) -> bytes:
    """`text` up to its `*`, the CRC computed again over it."""
    head = text.rsplit(b"*", 1)[0]
    return head + b"*" + f"{zlib.crc32(head) & 0xFFFFFFFF:08x}".encode() + b"\n"


# --- The decree's rules ---

RULE_BREAKS = {
    # name: (events, the rule the spec names for it, or None when it names none)
    "rotor not reversed": (six({2: {"same_rotor": True}}), "rotor_not_reversed"),
    "ball launched the rotor's way": (six({2: {"with_rotor": True}}), "ball_with_rotor"),
    "three revolutions": (six({2: {"revs": 3}}), "few_revs"),
    "no revolution": (six({2: {"revs": 0}}), "few_revs"),
    "three revolutions after a relaunch": (
        six({2: {"revs": 3, "incident": True}}),
        "few_revs",
    ),
    "drop before rien ne va plus": (six({2: {"rnvp_after_drop": True}}), "drop_before_rnvp"),
    "result without rien ne va plus": (six({2: {"rnvp": False}}), "result_without_rnvp"),
    "result of a spin never launched": (six({0: {"launch": False}}), None),
    "result of spin 99, never launched": (six({2: {"launch": False, "spin": 99}}), None),
    "second result of a settled spin": (
        [
            *six()[:3],
            Raw(
                "RES",
                (
                    ("spin", 1),
                    ("num", "2"),
                    *zip(("colour", "parity", "half"), chances("2"), strict=True),
                ),
            ),
            *six()[3:],
        ],
        "two_outcomes",
    ),
    "void of a settled spin": (
        [*six()[:3], Raw("VOID", (("spin", 1), ("reason", "object"))), *six()[3:]],
        "two_outcomes",
    ),
    "wrong colour": (six({2: {"chances": ("noir", "impair", "manque")}}), "wrong_chances"),
    "wrong parity": (six({2: {"chances": ("rouge", "pair", "manque")}}), "wrong_chances"),
    "wrong half": (six({2: {"chances": ("rouge", "impair", "passe")}}), "wrong_chances"),
    "zero with a parity": (
        six({2: {"num": "0", "chances": ("vert", "pair", "-")}}),
        "wrong_chances",
    ),
    "double zero red": (six({2: {"num": "00", "chances": ("rouge", "-", "-")}}), "wrong_chances"),
    "37 is no pocket": (
        six({2: {"num": "37", "chances": ("rouge", "impair", "passe")}}),
        "not_a_pocket",
    ),
    "cmc in lower case": (
        six({2: {"num": "cmc", "chances": ("vert", "-", "-")}}),
        "not_a_pocket",
    ),
    "unknown void reason": (six({2: {"void": "luck", "revs": 2}}), "unknown_void_reason"),
    "last three announced with two left": (
        [Open(), *[Spin(n) for n in "1234"], Last3(6, 2), Spin("5"), Spin("6"), Close()],
        "last_three_late",
    ),
    "last three announced after the first one's rien ne va plus": (
        [
            Open(),
            *[Spin(n) for n in "123"],
            Spin("4", after_rnvp=(Last3(6, 3),)),
            Spin("5"),
            Spin("6"),
            Close(),
        ],
        "last_three_late",
    ),
    "last three never announced": (
        [Open(), *[Spin(n) for n in "123456"], Close()],
        "last_three_not_announced",
    ),
    "a spin after the last coup": (
        [Open(), Spin("1"), Spin("2"), Last3(5, 3), *[Spin(n) for n in "3456"], Close()],
        "after_last_spin",
    ),
    "a voided launch after the last coup": (
        [
            Open(),
            Spin("1"),
            Spin("2"),
            Last3(5, 3),
            *[Spin(n) for n in "345"],
            Spin("6", void="object"),
            Close(),
        ],
        "after_last_spin",
    ),
    "a launch before the session opens, at first boot": ([Spin("9"), *six()], "spin_while_closed"),
    "a launch after the session closed": ([*six(), Spin("9")], "spin_while_closed"),
    "lid not locked after close": ([*six()[:-1], Close(lock=False)], "lid_not_locked"),
    "lid opened while closed": ([*six(), Lid(False)], None),
    "tamper": ([*six()[:3], Tamper(), *six()[3:]], None),
    "a fault still active at the end": ([Fault(), *six()], None),
    "a fault still active at the next boot": ([*six(), Fault(), Reboot()], None),
    # SET refuses these (docs/protocol.md, commands): no CFG frame may record them
    "a threshold set without who asked": ([Config(by=""), *six()], None),
    "a threshold set out of range": ([Config(new=10**6), *six()], None),
    "a threshold that does not exist": ([Config(key="luck"), *six()], None),
}


@pytest.mark.parametrize("name", sorted(RULE_BREAKS))
def test_rule_breaks_are_flagged(name):
    events, rule = RULE_BREAKS[name]
    out = judge(play(events).lines)
    assert not out["clean"], out
    if rule is not None:
        assert rule in rules(out), out["violations"]


def test_rule_break_exits_1_via_cli(tmp_path):
    rc, out = cli(tmp_path, b"".join(play(six({2: {"revs": 3}})).lines))
    assert rc == 1 and "few_revs" in rules(out)


def test_frames_of_another_table_than_the_trace_header_names():
    lines = play(six()).lines
    other = play(six(), table="T02").lines
    assert "table" in rules(judge(trace_bytes(lines, table="T02")))
    i = index_of(lines, "RES", 4)
    out = judge(trace_bytes([*lines[:i], other[i], *lines[i + 1 :]]))
    assert not out["clean"] and "table" in rules(out)
    # an extra result of another table, slipped in a capture
    assert not judge([*lines[:i], other[i], *lines[i:]])["clean"]


def test_a_board_with_another_wheel_than_the_trace_header_names():
    lines = play(six()).lines
    out = judge(trace_bytes(lines, pockets=list(reversed(POCKETS))))
    assert "wheel" in rules(out)


# --- What the checker lets pass (issue 19): each of these should be flagged ---


def test_last_three_announced_too_late_though_its_left_field_says_3():
    # 4 coups played, last=6: 2 left, so the last three were not announced before them.
    events = [Open(), *[Spin(n) for n in "1234"], Last3(6, 3), Spin("5"), Spin("6"), Close()]
    out = judge(play(events).lines)
    assert "last_three_late" in rules(out), out


def test_a_coup_beyond_the_announced_last_one():
    # LAST3 last=5 after 3 coups, then 3 more: coup 6 comes after the announced last coup
    events = [Open(), *[Spin(n) for n in "123"], Last3(5, 3), *[Spin(n) for n in "456"], Close()]
    out = judge(play(events).lines)
    assert "after_last_spin" in rules(out), out


def test_a_session_closed_before_its_announced_last_coup():
    # last=6 announced after 3 coups, closed after 5: coups 3 4 5 were the last three,
    # and the third from last was played before the announcement (decree 1-7)
    events = [Open(), *[Spin(n) for n in "123"], Last3(6, 3), Spin("4"), Spin("5"), Close()]
    out = judge(play(events).lines)
    assert not out["clean"], out


def test_lid_never_locked_between_two_sessions():
    events = [*six()[:-1], Close(lock=False), *six()]
    out = judge(play(events).lines)
    assert "lid_not_locked" in rules(out), out


@pytest.mark.parametrize("spins", [2, 9])
def test_session_close_counting_other_coups_than_were_played(spins):
    # a recording from the first boot, without a gap: all six coups are on record
    events = [
        *six()[:-1],
        Raw("SCLOSE", (("chef", "C7"), ("session", 1), ("spins", spins))),
        Lid(True),
    ]
    out = judge(play(events).lines)
    assert not out["clean"], out


def test_a_result_after_an_incident_without_the_relaunch():
    # decree 1-4: an object in the cylinder stops the game; the ball is launched again
    events = six({3: {"incident": True, "incident_steps": ("start",)}})
    out = judge(play(events).lines)
    assert not out["clean"], out


# --- Random sessions and random single mutations ---


@st.composite
def sessions(draw) -> list:
    """Events of one or two clean sessions: voids, incidents, faults, reboots."""
    events: list = []
    for number in range(1, draw(st.integers(1, 2)) + 1):
        coups = draw(st.sampled_from([0, 3, 4, 5, 6, 7]))
        events.append(Open(session=number))
        for i in range(coups):
            if i == coups - 3:
                events.append(Last3(coups, 3))
            elif i > coups - 3 and draw(st.booleans()):
                events.append(Last3(coups, coups - i))  # repeated as they go
            if draw(st.integers(0, 5)) == 0:
                reason = draw(st.sampled_from(VOID_REASONS))
                revs = draw(st.integers(0, 3)) if reason == "few_revs" else 6
                events.append(Spin("1", void=reason, revs=revs))
            if draw(st.integers(0, 6)) == 0:
                events.append(draw(st.sampled_from([Reboot(), Config(), Fault()])))
                if isinstance(events[-1], Fault):
                    events.append(Fault(on=False))  # cleared: a fault left on is flagged
            events.append(
                Spin(
                    draw(st.sampled_from(POCKETS)),
                    revs=draw(st.integers(4, 12)),
                    incident=draw(st.integers(0, 8)) == 0,
                )
            )
        events.append(Close())
    return events


@SETTINGS
@given(sessions(), st.booleans())
def test_random_clean_sessions_stay_clean(events, keyed):
    key = KEY if keyed else None
    rec = play(events, key=key)
    out = judge(rec.lines, key)
    assert out["clean"], out
    assert out["results"] == results(rec)


MUTATIONS = {
    "same_rotor": lambda d: {"same_rotor": True},
    "with_rotor": lambda d: {"with_rotor": True},
    "few_revs": lambda d: {"revs": d(st.integers(0, 3))},
    "rnvp_after_drop": lambda d: {"rnvp_after_drop": True},
    "no_rnvp": lambda d: {"rnvp": False},
    "not_a_pocket": lambda d: {
        "num": d(
            st.text("0123456789CMcmx-", min_size=0, max_size=4).filter(lambda s: s not in POCKETS)
        ),
        "chances": ("vert", "-", "-"),
    },
    "wrong_chances": None,  # drawn below: any triple but the right one
}


@SETTINGS
@given(st.data())
def test_random_rule_breaks_are_flagged(data):
    d = data.draw
    coups = d(st.integers(4, 8))
    nums = [d(st.sampled_from(POCKETS)) for _ in range(coups)]
    k = d(st.integers(1, coups - 1))
    kind = d(st.sampled_from(sorted(MUTATIONS)))
    if kind == "wrong_chances":
        right = chances(nums[k])
        triple = d(
            st.tuples(
                st.sampled_from(["rouge", "noir", "vert"]),
                st.sampled_from(["pair", "impair", "-"]),
                st.sampled_from(["manque", "passe", "-"]),
            ).filter(lambda t: t != right)
        )
        change = {"chances": triple}
    else:
        change = MUTATIONS[kind](d)
    events: list = [Open()]
    for i, num in enumerate(nums):
        if i == coups - 3:
            events.append(Last3(coups, 3))
        events.append(Spin(**{"num": num, **(change if i == k else {})}))
    events.append(Close())
    out = judge(play(events).lines)
    assert not out["clean"], (kind, k, change, out)


@SETTINGS
@given(st.data())
def test_random_session_level_breaks_are_flagged(data):
    d = data.draw
    events = d(sessions().filter(lambda e: sum(isinstance(x, Spin) for x in e) >= 3))
    closes = [i for i, e in enumerate(events) if isinstance(e, Close)]
    spins = [i for i, e in enumerate(events) if isinstance(e, Spin)]
    kind = d(st.sampled_from(["no_last3", "lid", "lid_opened", "tamper", "fault", "after_close"]))
    if kind == "no_last3":
        events = [e for e in events if not isinstance(e, Last3)]
    elif kind == "lid":
        events[closes[-1]] = Close(lock=False)
    elif kind == "lid_opened":
        events.insert(d(st.sampled_from(closes)) + 1, Lid(False))
    elif kind == "tamper":
        events.insert(d(st.integers(0, len(events))), Tamper())
    elif kind == "fault":
        events.insert(d(st.integers(0, len(events))), Fault(code="F_LEFT"))
    else:
        events.insert(d(st.sampled_from(closes)) + 1, Spin("7"))
    assert spins
    out = judge(play(events).lines)
    assert not out["clean"], (kind, out)


@SETTINGS
@given(st.data())
def test_random_wire_damage_is_flagged(data):
    d = data.draw
    keyed = d(st.booleans())
    key = KEY if keyed else None
    lines = play(six(), key=key).lines
    n = len(lines)
    kinds = ["flip", "drop", "swap", "repeat", "respell"] + (
        ["strip_tag", "forge_tag"] if keyed else []
    )
    kind = d(st.sampled_from(kinds))
    i = d(st.integers(1, n - 2))  # a frame with frames after it: its loss can be seen
    if kind == "flip":
        line = lines[i]
        pos = d(st.integers(0, len(line) - 2))  # any byte before the newline
        bit = 1 << d(st.integers(0, 6))
        new = bytearray(line)
        new[pos] ^= bit
        lines = [*lines[:i], bytes(new), *lines[i + 1 :]]
    elif kind == "drop":
        lines = [*lines[:i], *lines[i + 1 :]]
    elif kind == "swap":
        lines = [*lines[:i], lines[i + 1], lines[i], *lines[i + 2 :]]
    elif kind == "repeat":
        j = d(st.integers(i, n))
        lines = [*lines[:j], lines[i], *lines[j:]]
    elif kind == "respell":
        head = fields_of(lines[i])[1]
        new = respell(lines[i], header=lambda h: [*h[:3], "0" + h[3], *h[4:]], key=key)
        assert head != fields_of(new)[1]
        lines = [*lines[:i], new, *lines[i + 1 :]]
    elif kind == "strip_tag":
        lines = [*lines[:i], respell(lines[i]), *lines[i + 1 :]]
    else:
        lines = [*lines[:i], respell(lines[i], key=OTHER_KEY), *lines[i + 1 :]]
    out = judge(lines, key)
    assert not out["clean"], (kind, i, out)


def test_an_ack_is_no_gap_and_reveals_lost_frames():
    rec = play(six())
    board: Board = rec.boards[-1]
    ack = board.ack()
    assert judge([*rec.lines, ack])["clean"]
    # the last two frames lost: the ACK's top shows them missing
    out = judge([*rec.lines[:-2], ack])
    assert not out["clean"] and out["gaps"] == [[1, board.seq - 1, board.seq]]


@SETTINGS
@given(st.data())
def test_random_last_three_announcements_judged_by_the_decree(data):
    """Decree 1-7 as the spec words it: LAST3 names the session's last coup (`last`) and
    the coups left (`left`), at least three spins ahead, and no spin after the last.
    Clean exactly when its fields agree with the coups played, it comes three or more
    coups ahead, and the session ends at the coup it named."""
    d = data.draw
    coups = d(st.integers(3, 8))
    at = d(st.integers(0, coups))  # coups played before the announcement
    last = d(st.integers(max(at, coups - 2), coups + 2))
    left = d(st.sampled_from(sorted({last - at, 3, d(st.integers(0, 4))})))
    events: list = [Open()]
    for i in range(coups + 1):
        if i == at:
            events.append(Last3(last, left))
        if i < coups:
            events.append(Spin(POCKETS[(5 * i) % len(POCKETS)]))
    events.append(Close())
    clean = left == last - at and left >= 3 and last == coups
    out = judge(play(events).lines)
    assert out["clean"] == clean, (coups, at, last, left, out["violations"])
