"""rmc.rnvp.ceiling: the most lines of a lap file any predictor could call on time, none late,
and `rmc rnvp` saying so when it is not every line."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from rmc import ROOT
from rmc.cli import main
from rmc.rnvp import ceiling, on_target, replay

sys.path.insert(0, str(ROOT / "tests" / "fw"))
import lapgen


def _grid_ceiling(spins: list[list[float]], lead: float, tol: float, step: float) -> int:
    """The same bound by brute force: every deadline on a grid of `step` s at every set of
    lines that share their laps so far, counting each line's lead directly."""
    lines = [[round(sum(laps[:k]), 6) for k in range(len(laps) + 1)] for laps in spins]

    def best(group: list[int], depth: int) -> int:
        t = lines[group[0]][depth]
        if any(len(lines[i]) == depth + 1 for i in group):
            return 0  # a line ends here uncalled: late
        parts: dict[float, list[int]] = {}
        for i in group:
            parts.setdefault(lines[i][depth + 1], []).append(i)
        on = {p: best(g, depth + 1) for p, g in parts.items()}
        top = sum(on.values())  # no deadline before any next pass
        x = t
        while x < max(parts):
            n = 0
            for p, g in parts.items():
                if p <= x:
                    n += on[p]  # the pass came first: on uncalled
                else:
                    n += sum(lead - tol <= lines[i][-1] - x <= lead + tol for i in g)
            top = max(top, n)
            x = round(x + step, 6)
        return top

    return best(list(range(len(spins))), 0)


def test_the_bound_is_the_brute_forces_on_small_files() -> None:
    rng = random.Random(7)
    for _ in range(40):
        bases = [[rng.choice((0.5, 0.7, 0.9, 1.2, 1.6, 1.9)) for _ in range(5)] for _ in range(3)]
        spins = [b[: rng.randint(1, 5)] for b in bases for _ in range(rng.randint(1, 3))]
        assert ceiling(spins, 1.0) == _grid_ceiling(spins, 1.0, 0.5, 0.05), spins


def test_a_copy_cut_short_costs_a_line_when_its_last_lap_is_long() -> None:
    spin = [0.6, 0.7, 0.8, 1.0, 1.3]
    # the copy ends 1.3 s before its spin: one call cannot be within 0.5-1.5 s of both ends
    assert ceiling([spin, spin[:-1]], 1.0) == 1
    # ... but can when the cut lap is short: 1.3-1.5 s before the end suits both
    short = [0.6, 0.7, 0.8, 1.0, 0.8]
    assert ceiling([short, short[:-1]], 1.0) == 2
    # the same spin twice is called alike, on time for both
    assert ceiling([spin, spin], 1.0) == 2
    # laps that differ from the first one on: each line has its own call
    assert ceiling([spin, [0.61, *spin[1:-1]]], 1.0) == 2
    # not a copy, but alike over the laps where its call is due: one call for both
    alike = [0.5] * 8
    assert ceiling([[*alike, 1.2], [*alike, 1.6, 1.9]], 1.0) == 1
    # ... while lines that part before then each get their own
    assert ceiling([[*alike, 1.0, 1.2], [*alike, 1.6, 1.9]], 1.0) == 2
    # a line of any length (no recursion limit): a copy 0.5 s short, both on time
    assert ceiling([[0.5] * 3000, [0.5] * 2999], 1.0) == 2


def test_the_predictor_never_beats_the_bound() -> None:
    w = lapgen.Wheel(lapgen.Rng(3), 1.4)
    whole = [lapgen.laps(w.spin(noise_s=0.0)) for _ in range(30)]
    spins = [laps for sp in whole for laps in (sp, sp[:-1], sp[:-2])]
    cap = ceiling(spins, 1.0)
    calls = replay(spins, lead_s=1.0)
    hit = sum(on_target(c, laps, 1.0) and not c.late for c, laps in zip(calls, spins, strict=True))
    assert cap < len(spins)
    assert hit <= cap
    # without the copies, every line could be on time
    assert ceiling(whole, 1.0) == len(whole)


def _write(path: Path, spins: list[list[float]]) -> Path:
    path.write_text("".join(",".join(f"{x:.4f}" for x in laps) + "\n" for laps in spins))
    return path


def test_rnvp_says_the_files_bound(tmp_path, capsys) -> None:
    spin = [0.6, 0.7, 0.8, 1.0, 1.3]
    f = _write(tmp_path / "laps.csv", [spin, spin[:-1], [0.65, 0.7, 0.85, 1.1, 1.2]])
    assert main(["rnvp", str(f)]) == 0
    out, err = capsys.readouterr()
    assert "at most 2 of 3 lines" in err
    assert "(any predictor: at most 2)" in " ".join(out.split())
    # the JSON keeps the keys; the bound goes to stderr only
    assert main(["rnvp", str(f), "--json"]) == 0
    out, err = capsys.readouterr()
    assert set(json.loads(out)["summary"]) == {"spins", "late", "median_lead_s", "called"}
    assert "at most 2 of 3 lines" in err
    # a file whose lines all differ says nothing of it
    g = _write(tmp_path / "own.csv", [spin, [0.65, 0.7, 0.85, 1.1, 1.2]])
    assert main(["rnvp", str(g)]) == 0
    out, err = capsys.readouterr()
    assert "at most" not in err + out
