"""The pocket under the ball sensor (the dealer's signature, issue 24) on the simulator's
sessions: the truth it writes, what the firmware reports from the same sensor edges (LAUNCH's
and DROP's `under`), and the steady hand (`rmc sim --steady-hand S`).

`python tests/test_sim_under.py` writes tests/fw/under_sim.txt, the session that
tests/fw/test_under.py replays under both interpreters."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from rmc import ROOT
from rmc.cli import main
from rmc.sim import Params, load_wheel, simulate_session
from rmcfw import channels, proto, store, table

sys.path.insert(0, str(ROOT / "tests" / "fw"))
from wheelsim import Frames

FIXTURE = ROOT / "tests" / "fw" / "under_sim.txt"
FIXTURE_SEED, FIXTURE_SPINS = 11, 3


def replay(s, folder: Path | None = None, wheel=None):
    """The session's sensor edges through the firmware's table, as the board sees them (a
    power cut stops it; the restore boots a new table on the same flash): its frames."""
    wheel = s.wheel.raw if wheel is None else wheel
    fr = Frames()
    if folder is not None:
        folder.mkdir()
    st = None if folder is None else store.Store(str(folder))
    tb = table.Table(wheel, fr, st)
    tb.start(0)
    cmds = sorted(
        (r["t_us"], r["event"]) for r in s.truth if r["event"] in ("session_open", "last_three")
    )
    cuts = sorted((p["t_us"], p["event"]) for p in s.power)
    powered = True
    levels: dict[int, int] = {}
    now = 0
    for t, ch, v in s.events:
        while cuts and cuts[0][0] <= t:
            at, ev = cuts.pop(0)
            powered = ev != "cut"
            if powered:
                tb = table.Table(wheel, fr, None if folder is None else store.Store(str(folder)))
                tb.start(at)
                for c, lv in levels.items():
                    tb.feed(at, c, lv)
            now = at
        if not powered:
            levels[ch] = v
            continue
        while now + 1000 < t:
            now += 1000
            while cmds and cmds[0][0] <= now:
                ev = cmds.pop(0)[1]
                cmd = proto.C_OPEN if ev == "session_open" else proto.C_LAST_THREE
                assert tb.handle(cmd, {"chef": "sim"})[0], ev
            tb.poll(now)
        tb.feed(t, ch, v)
        levels[ch] = v
        now = t
    for _ in range(15_000):
        now += 1000
        tb.poll(now)
    return fr


def truth_of(s, event: str) -> list:
    return [r.get("under") for r in s.truth if r["event"] == event]


# --- the truth --------------------------------------------------------------------------


def decode_rotor(events) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An independent quadrature decoder: (edge times, the count after each, the count's
    value at its first state) from the trace's rotor edges, A leading B clockwise."""
    order = [(1, 0), (1, 1), (0, 1), (0, 0)]  # states of counts 0, 1, 2, 3 (mod 4)
    ab = [0, 0]
    times, counts, durs, dirs = [], [], [], []
    c = 0
    for t, ch, v in events:
        if ch not in (channels.ROTOR_A, channels.ROTOR_B):
            continue
        i = 0 if ch == channels.ROTOR_A else 1
        if t == 0:
            ab[i] = v  # the initial levels
            continue
        before = order.index(tuple(ab))
        ab[i] = v
        d = 1 if order.index(tuple(ab)) == (before + 1) % 4 else -1
        if times:
            durs.append(t - times[-1])
            dirs.append((d, counts[-1]))  # the step left: its count
        c += d
        times.append(t)
        counts.append(c)
    return np.asarray(times), np.asarray(counts), _wide_slot(durs, dirs, order, ab)


def _wide_slot(durs, dirs, order, ab) -> int:
    """The relative count of the wide slot's first state: the step whose length, against
    its neighbours', is the shortest (its 00 step, an eighth of a pitch short), plus one."""
    n = 156
    score = np.zeros(n)
    seen = np.zeros(n)
    durs = np.asarray(durs, dtype=float)
    for k in range(4, len(durs) - 4):
        d, c = dirs[k]
        if not all(dirs[j][0] == d for j in range(k - 4, k + 5)):
            continue
        ref = 0.5 * (durs[k - 4] + durs[k + 4])  # the same state a pitch before and after
        score[c % n] += math.log(durs[k] / ref)
        seen[c % n] += 1
    return int(np.argmin(score / np.maximum(seen, 1))) + 1


def test_the_truth_names_the_pocket_the_rotors_edges_put_under_sensor_a():
    s = simulate_session(5, 8)
    w = s.wheel
    assert w.mark_count == 0 and w.rotor_sensor_rad == 0.0 and w.ball_sensors_rad[0] == 0.0
    times, counts, mark = decode_rotor(s.events)
    step = 2 * math.pi / (4 * w.rotor_slots)
    a = [t for t, ch, v in s.events if ch == channels.BALL_A and v == 1]
    b = [t for t, ch, v in s.events if ch == channels.BALL_B and v == 1]
    firsts = truth_of(s, "launch")
    checked = 0
    for sp, first in zip(s.spins, firsts, strict=True):
        t0 = sp.launch_s * 1e6
        rises = [x for x in a if x >= t0 and any(abs(x - y) <= 120_000 for y in b)]
        c = int(counts[np.searchsorted(times, rises[0], side="right") - 1])
        q = c - mark + w.mark_count  # the absolute count: the rotor is in its step q
        under = round(-((q + 0.5) * step) / w.pocket_angle) % 39
        assert w.pockets[under] == first == sp.under_first, (sp.spin, w.pockets[under], first)
        checked += 1
    assert checked == 8


def test_the_firmware_reports_the_truth_on_simulated_sessions(tmp_path):
    """LAUNCH's and DROP's `under` against the truth, on sessions with every scenario: a
    pocket named is always the truth's; "-" only where the rotor's place is not known (after
    a power cut, until the mark passes again)."""
    named = unknown = 0
    for i, (seed, scen) in enumerate(
        [
            (21, ()),
            (22, ("same_dir", "not_reversed", "few_revs")),
            (23, ("object", "ball_out", "stuck_on")),
            (24, ("stuck_off", "power_cut")),
            (25, ("power_cut@4", "object@7")),
        ]
    ):
        s = simulate_session(seed, 10, scenarios=scen)
        fr = replay(s, tmp_path / f"flash{i}")
        launches = [f for f in fr.of(proto.T_LAUNCH)]
        drops = [f for f in fr.of(proto.T_DROP)]
        # the firmware numbers each launch as the simulator does (a relaunch is a spin)
        want_first = {r["spin"]: r.get("under") for r in s.truth if r["event"] == "launch"}
        want_drop = {r["spin"]: r.get("under") for r in s.truth if r["event"] == "drop"}
        for f in launches:
            assert f["under"] in (want_first[f["spin"]], "-"), (seed, f, want_first[f["spin"]])
            named += f["under"] != "-"
            unknown += f["under"] == "-"
        for f in drops:
            assert f["under"] in (want_drop[f["spin"]], "-"), (seed, f, want_drop[f["spin"]])
            named += f["under"] != "-"
            unknown += f["under"] == "-"
        assert len(launches) == 10
    assert named >= 90 and unknown <= 4, (named, unknown)


def test_a_wheel_without_the_mark_gives_dashes_and_the_old_edges(tmp_path):
    raw = json.loads((ROOT / "hardware" / "wheel.json").read_text())
    for k in ("rotor_mark_deg", "rotor_sensor_deg"):
        del raw["geometry"][k]
    path = tmp_path / "plain_wheel.json"
    path.write_text(json.dumps(raw))
    plain = load_wheel(path)
    assert plain.mark_count is None
    s_plain = simulate_session(3, 2, wheel=plain)
    s = simulate_session(3, 2)
    # the same rotor motion; only the wide slot's two edges a turn move, by half a step
    rot = (channels.ROTOR_A, channels.ROTOR_B)
    e1 = [e for e in s_plain.events if e[1] in rot]
    e2 = [e for e in s.events if e[1] in rot]
    assert len(e1) == len(e2) and [e[1:] for e in e1] == [e[1:] for e in e2]
    moved = [(x[0], y[0]) for x, y in zip(e1, e2, strict=True) if x[0] != y[0]]
    # by half a step (early turning clockwise, late the other way): a few ms
    assert moved and all(0 < abs(x - y) < 30_000 for x, y in moved)
    assert truth_of(s_plain, "launch") == truth_of(s, "launch")  # the truth is the rotor's
    fr = replay(s_plain)
    assert {f["under"] for f in fr.of(proto.T_LAUNCH) + fr.of(proto.T_DROP)} == {"-"}


# --- the steady hand --------------------------------------------------------------------


def signed_distances(s) -> tuple[np.ndarray, np.ndarray]:
    """Each valid spin's distance from the pocket under sensor A at the first pass and at
    the drop, the ball's way over the rotor (rmc.stats.signature's)."""
    w = s.wheel
    first, drop = [], []
    for sp in s.valid_spins():
        sg = 1 if sp.rotor_dir < 0 else -1
        r = w.channel_of(sp.pocket)
        first.append((r - w.channel_of(sp.under_first)) * sg % 39)
        drop.append((r - w.channel_of(sp.under_drop)) * sg % 39)
    return np.asarray(first), np.asarray(drop)


def test_a_steady_hand_peaks_the_distance_from_the_first_pass():
    s = simulate_session(8, 240, params=Params(steady_hand=0.5), edges=False)
    first, _ = signed_distances(s)
    counts = np.bincount(first, minlength=39)
    peak = max(int(np.roll(counts, -k)[:5].sum()) for k in range(39))
    # half the throws within 5 of 39 distances: 0.5 + 0.5 * 5/39 of them, about 64 %
    assert peak > 0.5 * first.size, (peak, first.size, counts)
    # the pockets themselves stay flat: the rotor's place at the release is anywhere
    pockets = np.bincount([s.wheel.channel_of(sp.pocket) for sp in s.valid_spins()], minlength=39)
    assert pockets.max() < 0.1 * first.size
    assert s.to_trace_records().__next__()["bias"] == {"steady_hand": {"strength": 0.5, "width": 5}}


def test_a_regular_hand_leaves_the_distance_flat():
    s = simulate_session(8, 240, edges=False)
    first, _ = signed_distances(s)
    counts = np.bincount(first, minlength=39)
    peak = max(int(np.roll(counts, -k)[:5].sum()) for k in range(39))
    assert peak < 0.25 * first.size, (peak, counts)


def test_no_steady_hand_draws_nothing():
    """S = 0 draws from no stream of its own: the session is the one without it, edges,
    truth and all (whatever the width)."""
    a = simulate_session(12, 6)
    b = simulate_session(12, 6, params=Params(steady_hand=0.0, steady_width=9))
    assert a.events == b.events and a.truth == b.truth
    assert "bias" not in next(b.to_trace_records())


def test_a_steady_hand_is_within_its_width():
    s = simulate_session(30, 150, params=Params(steady_hand=1.0, steady_width=3), edges=False)
    first, _ = signed_distances(s)
    values = sorted(set(first.tolist()))
    assert len(values) == 3 and (values[-1] - values[0]) % 39 == 2, values


@pytest.mark.parametrize("bad", ["-0.1", "1.5", "nan", "x"])
def test_the_command_refuses_a_bad_strength(bad, capsys):
    assert main(["sim", "--steady-hand", bad, "--quiet"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_the_command_writes_the_steady_hand(tmp_path):
    out = tmp_path / "t.jsonl"
    args = ["sim", "--seed", "2", "--spins", "3", "--steady-hand", "0.4"]
    assert main([*args, "--steady-width", "7", "-o", str(out), "--quiet"]) == 0
    header = json.loads(out.read_text().splitlines()[0])
    assert header["bias"] == {"steady_hand": {"strength": 0.4, "width": 7}}
    assert main(["sim", "--steady-hand", "0.4", "--steady-width", "0", "--quiet"]) == 2


# --- the fixture tests/fw/test_under.py replays --------------------------------------------


def write_fixture(path: Path = FIXTURE) -> None:
    """A short session of the simulator, as tests/fw/test_under.py reads it: the wheel,
    the host's commands, the truth (spin, under at the first pass, at the drop), the
    sensors' initial levels and each later event as (µs since the one before, channel)."""
    s = simulate_session(FIXTURE_SEED, FIXTURE_SPINS)
    geo = {k: v for k, v in s.wheel.raw["geometry"].items() if not k.endswith("comment")}
    wheel = {"pockets": s.wheel.raw["pockets"], "geometry": geo}
    cmds = [
        [r["t_us"], "open" if r["event"] == "session_open" else "last3"]
        for r in s.truth
        if r["event"] in ("session_open", "last_three")
    ]
    drops = {r["spin"]: r["under"] for r in s.truth if r["event"] == "drop"}
    truth = [[r["spin"], r["under"], drops[r["spin"]]] for r in s.truth if r["event"] == "launch"]
    lines = [
        f"# rmc.sim seed {FIXTURE_SEED}, {FIXTURE_SPINS} spins: written by "
        "tests/test_sim_under.py (python tests/test_sim_under.py)",
        "W " + json.dumps(wheel, separators=(",", ":")),
        "C " + json.dumps(cmds),
        "T " + json.dumps(truth),
    ]
    prev = 0
    for t, ch, v in s.events:
        if t == 0:
            lines.append(f"I {ch} {v}")
        else:
            lines.append(f"{t - prev} {ch}")
            prev = t
    path.write_text("\n".join(lines) + "\n")


def test_the_fixture_is_a_simulated_session():
    text = FIXTURE.read_text()
    assert text.startswith(f"# rmc.sim seed {FIXTURE_SEED}, {FIXTURE_SPINS} spins")
    truth = json.loads(next(x for x in text.splitlines() if x.startswith("T "))[2:])
    assert [t[0] for t in truth] == list(range(1, FIXTURE_SPINS + 1))
    assert all(isinstance(t[1], str) and isinstance(t[2], str) for t in truth)


if __name__ == "__main__":
    write_fixture()
    print(f"wrote {FIXTURE}")
