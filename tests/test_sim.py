"""The simulated wheel (rmc.sim): determinism, sensor edges against ground truth, scenarios.

The edges are read back with small decoders written here, independent of the simulator's code:
a quadrature decoder for the rotor, a pulse-order decoder for the ball sensors.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmc.sim import SCENARIOS, Session, load_wheel, simulate_session
from rmcfw import channels, proto

WHEEL = load_wheel()
SLOTS = WHEEL.raw["geometry"]["rotor_encoder_slots"]


# ---------------------------------------------------------------- independent decoders


def by_channel(events: list[tuple[int, int, int]]) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for t, ch, v in events:
        out[ch].append((t, v))
    return out


def level_at(series: list[tuple[int, int]], t_us: int) -> int:
    level = 0
    for t, v in series:
        if t > t_us:
            break
        level = v
    return level


def rotor_steps(events, t0: int, t1: int) -> int:
    """Net quadrature steps between t0 and t1: + clockwise (A leads B), − counter-clockwise."""
    # Gray-code order of (A, B) turning clockwise: 10 -> 11 -> 01 -> 00 -> 10.
    order = {(1, 0): 0, (1, 1): 1, (0, 1): 2, (0, 0): 3}
    a = b = 0
    state = None
    steps = 0
    for t, ch, v in events:
        if ch == channels.ROTOR_A:
            a = v
        elif ch == channels.ROTOR_B:
            b = v
        else:
            continue
        q = order[(a, b)]
        if state is not None and t0 <= t <= t1:
            d = (q - state) % 4
            assert d in (1, 3), f"quadrature skipped a state at {t} µs"
            steps += 1 if d == 1 else -1
        state = q
    return steps


def rises(series: list[tuple[int, int]], t0: int, t1: int) -> list[int]:
    return [t for t, v in series if v == 1 and t0 <= t <= t1]


def ball_direction(events, t0: int, t1: int) -> str:
    """'cw' when sensor A sees the ball just before B (B sits clockwise of A)."""
    ch = by_channel(events)
    a = rises(ch[channels.BALL_A], t0, t1)
    b = rises(ch[channels.BALL_B], t0, t1)
    assert a and b, "no ball pulses in the window"
    votes = 0
    for ta in a:
        nearest = min(b, key=lambda tb: abs(tb - ta))
        votes += 1 if nearest > ta else -1
    assert abs(votes) >= len(a) - 1, "ball sensors disagree on the direction"
    return "cw" if votes > 0 else "ccw"


# ---------------------------------------------------------------- helpers


def truth(s: Session, event: str, spin: int | None = None) -> list[dict]:
    return [r for r in s.truth if r["event"] == event and (spin is None or r["spin"] == spin)]


def one(s: Session, event: str, spin: int) -> dict:
    found = truth(s, event, spin)
    assert len(found) == 1, f"spin {spin}: {len(found)} {event!r} records"
    return found[0]


def pockets_held(s: Session, t_us: int) -> list[int]:
    ch = by_channel(s.events)
    return [c for c in range(channels.POCKETS) if level_at(ch[c], t_us)]


@cache
def all_scenarios() -> Session:
    names = [n for n in SCENARIOS if n != "normal"]
    return simulate_session(7, 16, scenarios=names)


@cache
def plain(seed: int = 3, spins: int = 8) -> Session:
    return simulate_session(seed, spins)


# ---------------------------------------------------------------- basic properties


def test_deterministic_per_seed() -> None:
    a = simulate_session(42, 5, scenarios=["same_dir", "power_cut"])
    b = simulate_session(42, 5, scenarios=["same_dir", "power_cut"])
    c = simulate_session(43, 5, scenarios=["same_dir", "power_cut"])
    assert a.events == b.events and a.truth == b.truth and a.power == b.power
    assert a.events != c.events


def check_edges(s: Session) -> None:
    assert s.events, "no events"
    times = [t for t, _, _ in s.events]
    assert times == sorted(times)
    assert all(isinstance(t, int) and t >= 0 for t in times)
    ch = by_channel(s.events)
    assert set(ch) == set(range(channels.COUNT)), "every channel has its initial level at 0"
    for c, series in ch.items():
        assert series[0][0] == 0
        for (t0, v0), (t1, v1) in itertools.pairwise(series):
            assert v1 in (0, 1) and v1 != v0, f"channel {c}: not a level change at {t1}"
            assert t1 > t0, f"channel {c}: two changes at {t1}"


def test_edges_are_level_changes_sorted() -> None:
    check_edges(plain())
    check_edges(all_scenarios())


def test_rest_one_pocket_matching_wheel() -> None:
    s = plain()
    for sp in s.spins:
        rest = one(s, "rest", sp.spin)
        # In the settle window after rest, one pocket and only one holds the ball.
        held = pockets_held(s, rest["t_us"] + 300_000)
        assert held == [rest["channel"]]
        assert WHEEL.pockets[rest["channel"]] == rest["pocket"]
        assert rest["t_us"] < rest["pickup_us"]
        assert pockets_held(s, rest["pickup_us"] + 10) == []


def test_directions_alternate_and_decode_from_edges() -> None:
    s = plain()
    prev = None
    for sp in s.spins:
        launch = one(s, "launch", sp.spin)
        drop = one(s, "drop", sp.spin)
        steps = rotor_steps(s.events, launch["t_us"], drop["t_us"])
        rotor = "cw" if steps > 0 else "ccw"
        assert rotor == launch["rotor_dir"]
        assert ball_direction(s.events, launch["t_us"], drop["t_us"]) == launch["ball_dir"]
        assert launch["ball_dir"] != launch["rotor_dir"], "decree 1-4: ball against the rotor"
        if prev is not None:
            assert rotor != prev, "decree 1-4: rotor reversed each spin"
        prev = rotor
        # 4 quadrature steps per slot: the rotor period seen by the encoder is the truth's.
        assert 3_000_000 <= launch["rotor_period_us"] <= 5_000_000


def test_ball_pulses_match_lap_truth() -> None:
    s = plain()
    ch = by_channel(s.events)
    for sp in s.spins:
        launch, drop = one(s, "launch", sp.spin), one(s, "drop", sp.spin)
        a = rises(ch[channels.BALL_A], launch["t_us"], drop["t_us"])
        assert len(a) == drop["revs"] + 1
        periods = [t1 - t0 for t0, t1 in itertools.pairwise(a)]
        for got, want in zip(periods, drop["lap_periods_us"], strict=True):
            assert abs(got - want) < 2_000  # rising edge vs pulse centre: a few ms at most
        # Nothing on the ball sensors once the ball has left the track.
        pick = one(s, "rest", sp.spin)["pickup_us"]
        assert rises(ch[channels.BALL_A], drop["t_us"] + 1, pick) == []


def test_quadrature_counts_slots_per_turn() -> None:
    s = plain()
    sp = s.spins[0]
    launch, drop = one(s, "launch", sp.spin), one(s, "drop", sp.spin)
    steps = abs(rotor_steps(s.events, launch["t_us"], drop["t_us"]))
    turns = (drop["t_us"] - launch["t_us"]) / launch["rotor_period_us"]
    # The rotor slows a little over the spin: a little under 4·slots steps per launch period.
    assert 0.9 * turns * 4 * SLOTS <= steps <= 1.01 * turns * 4 * SLOTS


def test_session_structure_lid_and_last_three() -> None:
    s = plain()
    lid = by_channel(s.events)[channels.LID]
    assert [v for _, v in lid] == [1, 0, 1]  # locked, unlocked for the session, locked again
    opened = truth(s, "session_open")[0]["t_us"]
    closed = truth(s, "session_close")[0]["t_us"]
    # Opened, then unlocked (unlocked while closed is tamper); locked, then closed.
    assert opened < lid[1][0] < one(s, "launch", 1)["t_us"]
    assert lid[2][0] < closed
    last3 = truth(s, "last_three")
    assert len(last3) == 1 and last3[0]["spin"] == len(s.spins) - 2
    assert last3[0]["t_us"] < one(s, "launch", len(s.spins) - 2)["t_us"]


# ---------------------------------------------------------------- scenarios


def scen_spin(s: Session, name: str) -> int:
    (n,) = [k for k, v in s.scenarios.items() if v == name]
    return n


def void_of(s: Session, spin: int) -> str:
    return one(s, "void", spin)["reason"]


def test_every_scenario_is_placed() -> None:
    s = all_scenarios()
    placed = set(s.scenarios.values()) | set(s.table_scenarios)
    assert placed == set(SCENARIOS) - {"normal"}


def test_same_dir_edges() -> None:
    s = all_scenarios()
    n = scen_spin(s, "same_dir")
    launch, drop = one(s, "launch", n), one(s, "drop", n)
    rotor = "cw" if rotor_steps(s.events, launch["t_us"], drop["t_us"]) > 0 else "ccw"
    ball = ball_direction(s.events, launch["t_us"], drop["t_us"])
    assert rotor == ball == launch["ball_dir"] == launch["rotor_dir"]
    assert void_of(s, n) == proto.V_SAME_DIR


def test_not_reversed_edges() -> None:
    s = all_scenarios()
    n = scen_spin(s, "not_reversed")
    dirs = []
    for k in (n - 1, n):
        launch, drop = one(s, "launch", k), one(s, "drop", k)
        dirs.append(rotor_steps(s.events, launch["t_us"], drop["t_us"]) > 0)
    assert dirs[0] == dirs[1]
    assert void_of(s, n) == proto.V_NOT_REVERSED
    launch = one(s, "launch", n)
    assert (
        ball_direction(s.events, launch["t_us"], one(s, "drop", n)["t_us"]) != (launch["rotor_dir"])
    )


def test_few_revs_edges() -> None:
    s = all_scenarios()
    n = scen_spin(s, "few_revs")
    launch, drop = one(s, "launch", n), one(s, "drop", n)
    a = rises(by_channel(s.events)[channels.BALL_A], launch["t_us"], drop["t_us"])
    # Under 3 turns: at most 3 passes, 2 full laps, whichever way a reader counts them.
    assert 1 <= len(a) <= 3 and drop["revs"] == len(a) - 1 and drop["turns"] < 3
    assert void_of(s, n) == proto.V_FEW_REVS


def test_object_incident_procedure() -> None:
    s = all_scenarios()
    n = scen_spin(s, "object")
    start = next(r for r in truth(s, "incident", n) if r["step"] == "start")
    back = next(r for r in truth(s, "incident", n) if r["step"] == "ball_back")
    relaunch = next(r for r in truth(s, "incident", n) if r["step"] == "relaunch")
    assert void_of(s, n) == proto.V_OBJECT
    assert truth(s, "drop", n) == [] and truth(s, "rest", n) == []
    # Two pockets held at once while the ball still runs on the track.
    held = pockets_held(s, start["t_us"] + 200_000)
    assert held == sorted(start["channels"]) and len(held) == 2
    # The croupier's incident input is raised, the ball stops passing the sensors.
    ch = by_channel(s.events)
    inc = [t for t, v in ch[channels.INCIDENT] if v == 1]
    assert len(inc) == 1 and start["t_us"] < inc[0] < back["t_us"]
    assert rises(ch[channels.BALL_A], inc[0] + 2_000_000, back["t_us"]) == []
    # The ball goes back into the previous valid result's pocket, alone.
    prev = [r for r in truth(s, "rest") if r["spin"] < n and "void" not in r][-1]
    assert back["channel"] == prev["channel"]
    assert pockets_held(s, back["t_us"] + 100_000) == [prev["channel"]]
    # The relaunch is the next spin, against its rotor, reversed from the voided spin.
    assert relaunch["relaunch_spin"] == n + 1
    l0, l1 = one(s, "launch", n), one(s, "launch", n + 1)
    assert relaunch["t_us"] == l1["t_us"] and l1["rotor_dir"] != l0["rotor_dir"]
    assert "void" not in one(s, "rest", n + 1)


def test_ball_out_no_pocket() -> None:
    s = all_scenarios()
    n = scen_spin(s, "ball_out")
    drop = one(s, "drop", n)
    assert void_of(s, n) == proto.V_BALL_OUT and truth(s, "rest", n) == []
    next_launch = one(s, "launch", n + 1)["t_us"] if n < len(s.spins) else s.duration_us
    touched = {
        ch
        for t, ch, v in s.events
        if ch < channels.POCKETS and v == 1 and drop["t_us"] <= t <= next_launch
    }
    assert touched == set()


def test_stuck_on_sensor() -> None:
    s = all_scenarios()
    n = scen_spin(s, "stuck_on")
    on, off = truth(s, "fault", n)
    assert on["code"] == off["code"] == proto.F_POCKET_STUCK_ON and (on["on"], off["on"]) == (1, 0)
    x = on["channel"]
    rest = one(s, "rest", n)
    assert x != rest["channel"] and "void" not in rest
    launch = one(s, "launch", n)
    assert pockets_held(s, launch["t_us"]) == [x]  # held with no ball: stuck, before launch
    assert pockets_held(s, rest["t_us"] + 300_000) == sorted([x, rest["channel"]])
    series = by_channel(s.events)[x]
    assert not [t for t, v in series if on["t_us"] < t < off["t_us"]], "stuck means no change"
    assert level_at(series, off["t_us"] + 1) == 0


def test_stuck_off_sensor() -> None:
    s = all_scenarios()
    n = scen_spin(s, "stuck_off")
    on, _off = truth(s, "fault", n)
    assert on["code"] == proto.F_POCKET_STUCK_OFF
    rest = one(s, "rest", n)
    assert rest["channel"] == on["channel"] and rest["seen"] is False
    assert void_of(s, n) == proto.V_SENSORS
    assert pockets_held(s, rest["t_us"] + 300_000) == []
    drop = one(s, "drop", n)
    touched = {
        ch
        for t, ch, v in s.events
        if ch < channels.POCKETS and v == 1 and drop["t_us"] <= t <= rest["t_us"]
    }
    assert touched and rest["channel"] not in touched  # hops seen, the rest pocket silent


def test_tamper_lid_after_close() -> None:
    s = all_scenarios()
    closed = truth(s, "session_close")[0]["t_us"]
    tamper = truth(s, "tamper")[0]["t_us"]
    lid = by_channel(s.events)[channels.LID]
    assert level_at(lid, closed) == 1
    after = [(t, v) for t, v in lid if t > closed]
    assert [v for _, v in after] == [0, 1]
    assert after[0][0] == tamper


def test_power_cut_during_track() -> None:
    s = all_scenarios()
    n = scen_spin(s, "power_cut")
    cut, restore = s.power
    assert (cut["event"], restore["event"]) == ("cut", "restore")
    launch, drop = one(s, "launch", n), one(s, "drop", n)
    assert launch["t_us"] < cut["t_us"] < restore["t_us"] < drop["t_us"]
    assert [r["what"] for r in truth(s, "power", n)] == ["cut", "restore"]
    assert "void" not in one(s, "rest", n)


def test_regular_spins_around_scenarios_are_valid() -> None:
    s = all_scenarios()
    for sp in s.spins:
        if sp.scenario in ("normal", "stuck_on", "power_cut"):
            assert truth(s, "void", sp.spin) == [] or sp.revs < 4


# ---------------------------------------------------------------- property test


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**40), spins=st.integers(1, 4))
def test_any_seed_consistent(seed: int, spins: int) -> None:
    s = simulate_session(seed, spins)
    check_edges(s)
    times = [r["t_us"] for r in s.truth]
    assert times == sorted(times)
    for sp in s.spins:
        rest = one(s, "rest", sp.spin)
        assert pockets_held(s, rest["t_us"] + 300_000) == [rest["channel"]]
        launch = one(s, "launch", sp.spin)
        assert launch["ball_dir"] != launch["rotor_dir"]


# ---------------------------------------------------------------- trace file and errors


def test_trace_file(tmp_path) -> None:
    s = simulate_session(5, 4, scenarios=["power_cut", "tamper"])
    path = tmp_path / "t.jsonl"
    n = s.write_trace(path)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(recs) == n
    head = recs[0]
    assert head["kind"] == "header" and head["format"] == "rmc-trace/1"
    assert head["source"] == "sim" and head["seed"] == 5 and head["firmware"] is None
    assert head["wheel"] == json.loads((WHEEL_PATH).read_text())
    assert set(head["scenario"]) == {"power_cut@2", "tamper"}
    body, end = recs[1:-1], recs[-1]
    assert end["kind"] == "end" and end["lines"] == n - 1
    assert [r["t_us"] for r in body] == sorted(r["t_us"] for r in body)
    kinds = {r["kind"] for r in body}
    assert kinds == {"sensor", "truth", "power"}
    for r in body:
        if r["kind"] == "sensor":
            channels.parse(r["ch"])
            assert r["v"] in (0, 1)
    assert sum(r["kind"] == "sensor" for r in body) == len(s.events)


WHEEL_PATH = __import__("rmc").HARDWARE_DIR / "wheel.json"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"spins": 0}, "spins"),
        ({"spins": 3, "scenarios": ["nope"]}, "unknown scenario"),
        ({"spins": 3, "scenarios": ["object@1"]}, "spin before it"),
        ({"spins": 3, "scenarios": ["same_dir@9"]}, "has 3 spins"),
        ({"spins": 3, "scenarios": ["object@3"]}, "last spin"),
        ({"spins": 3, "scenarios": ["same_dir@2", "few_revs@2"]}, "two scenarios"),
        ({"spins": 2, "scenarios": ["same_dir", "few_revs", "ball_out"]}, "not enough spins"),
        ({"spins": 3, "scenarios": ["tamper@2"]}, "not bound"),
    ],
)
def test_bad_requests(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_session(1, **kwargs)


def test_bad_seed() -> None:
    with pytest.raises(ValueError, match="seed"):
        simulate_session(-1, 3)


def test_trace_reads_with_the_wire_reader(tmp_path) -> None:
    # The trace module of the wire half (docs/traces.md) reads the simulator's file cleanly.
    from rmc.trace import read_trace

    path = tmp_path / "t.jsonl"
    s = simulate_session(8, 3, scenarios=["power_cut"])
    s.write_trace(path)
    tr = read_trace(path)
    assert tr.errors == []
    assert tr.header["source"] == "sim"
    assert len(tr.of_kind("sensor")) == len(s.events)
    assert len(tr.of_kind("truth")) == len(s.truth) and len(tr.of_kind("power")) == 2


def test_rnvp_asked_before_each_drop() -> None:
    s = simulate_session(12, 5, scenarios=["object@3"], rnvp_lead_s=1.5)
    asked = truth(s, "rnvp_asked")
    drops = truth(s, "drop")
    assert [r["spin"] for r in asked] == [r["spin"] for r in drops] == [1, 2, 4, 5]
    for a, d in zip(asked, drops, strict=True):
        assert d["t_us"] - a["t_us"] == a["lead_us"] == 1_500_000
    assert truth(plain(), "rnvp_asked") == []
    with pytest.raises(ValueError, match="rnvp_lead_s"):
        simulate_session(1, 2, rnvp_lead_s=-1)


def test_fault_records_say_if_sensors_show_them() -> None:
    s = all_scenarios()
    flags = {(r["code"], r["detectable"]) for r in truth(s, "fault")}
    assert flags == {(proto.F_POCKET_STUCK_ON, True), (proto.F_POCKET_STUCK_OFF, False)}


def test_rotor_turns_the_new_way_before_each_launch() -> None:
    # A quadrature reader must be able to tell the new direction by the launch: the rotor has
    # turned well over a quarter turn the new way in the two seconds before it.
    s = all_scenarios()
    for sp in s.spins:
        launch = one(s, "launch", sp.spin)
        steps = rotor_steps(s.events, launch["t_us"] - 2_000_000, launch["t_us"])
        assert ("cw" if steps > 0 else "ccw") == launch["rotor_dir"]
        assert abs(steps) >= SLOTS  # 4·slots steps a turn


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    names=st.lists(
        st.sampled_from(sorted(set(SCENARIOS) - {"normal"})), min_size=1, max_size=4, unique=True
    ),
)
def test_any_scenario_mix_consistent(seed: int, names: list[str]) -> None:
    s = simulate_session(seed, 2 * len(names) + 2, scenarios=names)
    check_edges(s)
    assert set(s.scenarios.values()) | set(s.table_scenarios) == set(names)
    for sp in s.spins:
        rest = truth(s, "rest", sp.spin)
        voids = truth(s, "void", sp.spin)
        assert len(voids) <= 1
        if sp.scenario in ("object", "ball_out"):
            assert rest == [] and voids[0]["reason"] in (proto.V_OBJECT, proto.V_BALL_OUT)
            continue
        (r,) = rest
        held = pockets_held(s, r["t_us"] + 300_000)
        if sp.scenario == "stuck_off":
            assert held == []
        elif sp.scenario == "stuck_on":
            assert r["channel"] in held and len(held) == 2
        else:
            assert held == [r["channel"]]
        assert ("void" in r) == bool(voids)
