"""`rmc rnvp LAPS.csv [--lead SECONDS] [--json]`: the interface fixed by issue 6."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rmc import ROOT
from rmc.cli import main

sys.path.insert(0, str(ROOT / "tests" / "fw"))
import lapgen


def _write(path: Path, spins: list[list[float]]) -> Path:
    path.write_text("".join(",".join(f"{x:.4f}" for x in laps) + "\n" for laps in spins))
    return path


def _wheel_spins(n: int, noise: float = 0.0, seed: int = 5) -> list[list[float]]:
    w = lapgen.Wheel(lapgen.Rng(seed), 1.1)
    return [lapgen.laps(w.spin(noise_s=noise, keep=None if i % 3 else 7)) for i in range(n)]


def _run_json(capsys, *args: str) -> dict:
    assert main(["rnvp", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_output_has_the_fixed_keys(tmp_path, capsys) -> None:
    f = _write(tmp_path / "laps.csv", _wheel_spins(12))
    out = _run_json(capsys, str(f))
    assert set(out) == {"spins", "summary"}
    assert set(out["summary"]) == {"spins", "late", "median_lead_s", "called"}
    assert out["summary"]["spins"] == 12 == len(out["spins"])
    for i, s in enumerate(out["spins"], 1):
        assert set(s) == {"spin", "rnvp_s", "predicted_drop_s", "last_pass_s", "lead_s", "late"}
        assert s["spin"] == i
        assert isinstance(s["late"], bool)
        if s["rnvp_s"] is None:
            assert s["late"] and s["lead_s"] is None
        else:
            assert s["lead_s"] == pytest.approx(s["last_pass_s"] - s["rnvp_s"], abs=2e-3)
            assert s["late"] == (s["rnvp_s"] > s["last_pass_s"])
    assert out["summary"]["late"] == sum(s["late"] for s in out["spins"])
    assert out["summary"]["called"] == sum(s["rnvp_s"] is not None for s in out["spins"])


def test_last_pass_is_the_sum_of_the_laps(tmp_path, capsys) -> None:
    f = _write(tmp_path / "laps.csv", [[0.6, 0.65, 0.7, 0.8, 0.9, 1.05, 1.2]])
    s = _run_json(capsys, str(f))["spins"][0]
    assert s["last_pass_s"] == pytest.approx(5.9, abs=1e-3)
    assert not s["late"]  # the 1.4 s safety limit at worst, or the fit


def test_the_lead_follows_the_option(tmp_path, capsys) -> None:
    f = _write(tmp_path / "laps.csv", _wheel_spins(30))
    short = _run_json(capsys, str(f), "--lead", "0.8")["summary"]["median_lead_s"]
    long = _run_json(capsys, str(f), "--lead", "2.0")["summary"]["median_lead_s"]
    assert short == pytest.approx(0.8, abs=0.3)
    assert long == pytest.approx(2.0, abs=0.3)


def test_same_predictor_as_the_firmware(tmp_path, capsys) -> None:
    """The CLI replays through rmcfw.rnvp: the same calls as feeding the predictor directly."""
    from rmc.rnvp import read_laps
    from rmcfw import rnvp, ticks

    f = _write(tmp_path / "l.csv", _wheel_spins(8))
    out = _run_json(capsys, str(f))["spins"]
    spins = read_laps(f)  # the laps as the file holds them (4 decimals)
    p = rnvp.Predictor(lead_s=1.0)
    for laps, got in zip(spins, out, strict=True):
        t = [0]
        for lap in laps:
            t.append(t[-1] + round(lap * 1e6))
        p.reset(0)
        call = None
        for k in range(1, len(t)):
            if call is None and ticks.diff(t[k], p.deadline) > 0:
                call = max(p.deadline, t[k - 1]) / 1e6
            p.lap(t[k])
        p.learn_drop()
        assert got["rnvp_s"] == (None if call is None else round(call, 3))


def test_table_output(tmp_path, capsys) -> None:
    f = _write(tmp_path / "laps.csv", _wheel_spins(5))
    assert main(["rnvp", str(f)]) == 0
    out = capsys.readouterr().out
    assert "5 spins" in out and "median lead" in out


def test_a_second_wheel_is_shown(tmp_path, capsys) -> None:
    # a slow wheel's spins, then a fast one's: the first fast spin shows the change
    slow = lapgen.Wheel(lapgen.Rng(11), 1.6)
    fast = lapgen.Wheel(lapgen.Rng(3), 0.8)
    spins = [lapgen.laps(slow.spin(noise_s=0.0)) for _ in range(6)]
    spins += [lapgen.laps(fast.spin(noise_s=0.0)) for _ in range(4)]
    f = _write(tmp_path / "laps.csv", spins)
    assert main(["rnvp", str(f)]) == 0
    out = capsys.readouterr().out
    assert "learned afresh from there: spin 7\n" in out, out
    data = _run_json(capsys, str(f))
    assert data["summary"]["late"] == 0
    assert all(set(s) == set(data["spins"][0]) for s in data["spins"])  # keys as fixed
    # one wheel throughout: no change shown
    f = _write(tmp_path / "one.csv", _wheel_spins(10))
    assert main(["rnvp", str(f)]) == 0
    assert "learned afresh" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "text",
    [
        ("0.6,abc,0.7\n", "lap 2 is not a number"),
        ("0.6,-0.5\n", "lap 2 is -0.5"),
        ("0.6,nan\n", "lap 2 is nan"),
        ("0.6,0.7,1e9\n", "lap 3 is 1e9"),
        ("0.6,,0.7\n", "lap 2 is empty"),  # a lap missing, not a lap less
        ("600,700,800\n", "lap 1 is 600 (milliseconds?)"),
        ("0,61;0,65;0,70\n", "separated by semicolons and decimal commas"),
        ("0.61;0.65;0.70\n", "separated by semicolons: write them"),
        ("0.61\t0.65\t0.70\n", "separated by tabs"),
    ],
)
def test_bad_lines_are_refused_with_their_number(tmp_path, capsys, text) -> None:
    text, why = text
    f = tmp_path / "bad.csv"
    f.write_text("0.6,0.7,0.8\n" + text)
    assert main(["rnvp", str(f), "--json"]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and why in err, err


def test_trailing_empty_cells_are_no_laps(tmp_path) -> None:
    from rmc.rnvp import read_laps

    f = tmp_path / "cells.csv"
    f.write_text("0.6,0.7,0.8,,\n,,,\n0.6, 0.7 ,0.9,\n")  # an empty row: no spin
    assert read_laps(f) == [[0.6, 0.7, 0.8], [0.6, 0.7, 0.9]]


def test_missing_file_and_bad_lead(tmp_path, capsys) -> None:
    assert main(["rnvp", str(tmp_path / "none.csv")]) == 2
    f = _write(tmp_path / "l.csv", [[0.6, 0.7]])
    assert main(["rnvp", str(f), "--lead", "-1"]) == 2


def test_the_noise_kind_is_shown(tmp_path, capsys) -> None:
    # laps clocked one by one (20 ms on each lap): the lap times are fitted, and said so
    w = lapgen.Wheel(lapgen.Rng(3), 1.4)
    spins = [lapgen.laps(w.spin(noise_s=0.0, lap_noise_s=0.02)) for _ in range(12)]
    f = _write(tmp_path / "laps.csv", spins)
    assert main(["rnvp", str(f)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "timing noise on each lap" in out and "10 spins, the first spin 2" in out, out
    # a wheel timed on each pass: not said
    w = lapgen.Wheel(lapgen.Rng(5), 1.1)
    f = _write(tmp_path / "pass.csv", [lapgen.laps(w.spin(noise_s=0.02)) for _ in range(12)])
    assert main(["rnvp", str(f)]) == 0
    assert "timing noise on each lap" not in capsys.readouterr().out


def test_a_header_line_is_skipped_and_only_that(tmp_path, capsys) -> None:
    spins = _wheel_spins(3)
    body = "".join(",".join(f"{x:.4f}" for x in sp) + "\n" for sp in spins)
    plain = tmp_path / "plain.csv"
    plain.write_text(body)
    headed = tmp_path / "headed.csv"
    # a spreadsheet's export: byte-order mark, column names, CRLF
    headed.write_bytes(("\ufefflap 1,lap 2,lap 3\r\n" + body.replace("\n", "\r\n")).encode())
    assert _run_json(capsys, str(headed)) == _run_json(capsys, str(plain))
    # a non-number anywhere else still refuses the file: a lap left out would move the passes
    late = tmp_path / "late.csv"
    late.write_text(body + "lap 1,lap 2\n")
    assert main(["rnvp", str(late), "--json"]) == 2
    assert "line 4" in capsys.readouterr().err


def test_a_lead_in_revolutions(tmp_path, capsys) -> None:
    from rmc.rnvp import read_laps, replay, revs_aimed

    f = _write(tmp_path / "laps.csv", _wheel_spins(20, noise=0.01))
    data = _run_json(capsys, str(f), "--lead-revs", "2")
    assert data["summary"]["late"] == 0
    spins = read_laps(f)
    calls = replay(spins, lead_revs=2)
    assert [c.as_dict() for c in calls] == data["spins"]
    aimed = sum(revs_aimed(c, laps, 2) for c, laps in zip(calls, spins, strict=True))
    assert aimed >= 15, aimed  # measured: 17 of 20
    # two laps before the last pass, not a second: the leads are those of two laps
    leads = sorted(c.lead_s for c in calls[4:])
    assert 1.6 < leads[len(leads) // 2] < 3.5, leads
    assert main(["rnvp", str(f), "--lead-revs", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # as rich folds it, on one line
    assert "(lead asked 2 revolutions)" in out
    assert f"{aimed} called 2 revolutions before the last pass" in out
    assert main(["rnvp", str(f), "--lead-revs", "-1"]) == 2
    assert "--lead-revs" in capsys.readouterr().err


def test_a_line_of_fewer_than_4_laps_is_shown_void(tmp_path, capsys) -> None:
    spins = _wheel_spins(6)
    f = _write(tmp_path / "short.csv", [*spins[:5], spins[5][-3:]])
    data = _run_json(capsys, str(f))
    # the interface counts a call that never came as late; the table output says why
    assert data["spins"][5]["late"] is True and data["spins"][5]["rnvp_s"] is None
    assert main(["rnvp", str(f)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "LATE (void)" in out, out
    assert "taken for void spins (decree: fewer than 4 revolutions) and not called: spin 6" in out


def test_the_wheels_drop_period_is_taken_as_the_table_takes_it(tmp_path, capsys) -> None:
    """--drop-s / --wheel: the prior the board takes from its drop_ms or its wheel.json."""
    from rmc import HARDWARE_DIR
    from rmc.rnvp import replay
    from rmcfw import config

    spins = _wheel_spins(12, noise=0.02)
    f = _write(tmp_path / "laps.csv", spins)
    learned = _run_json(capsys, str(f))["spins"]
    prior = _run_json(capsys, str(f), "--drop-s", "1.2")["spins"]
    want = [c.as_dict() for c in replay(_read(f), lead_s=1.0, drop_s=1.2)]
    assert prior == json.loads(json.dumps(want))
    assert prior != learned  # the option reaches the predictor
    wheel = HARDWARE_DIR / "wheel.json"
    drop_s = config.drop_ms_of(json.loads(wheel.read_text())) / 1000
    by_wheel = _run_json(capsys, str(f), "--wheel", str(wheel))["spins"]
    assert by_wheel == _run_json(capsys, str(f), "--drop-s", str(drop_s))["spins"]
    assert main(["rnvp", str(f), "--drop-s", "1.2"]) == 0
    assert "the wheel's drop period 1.2 s" in " ".join(capsys.readouterr().out.split())


def _read(path: Path) -> list[list[float]]:
    from rmc.rnvp import read_laps

    return read_laps(path)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--drop-s", "0"), "--drop-s must be above 0"),
        (("--drop-s", "-1.2"), "--drop-s must be above 0"),
        (("--drop-s", "6"), "at most 5 seconds"),
        (("--drop-s", "nan"), "--drop-s must be above 0"),
        (("--wheel", "missing.json"), "missing.json: No such file"),
        (("--wheel", "{bad}"), "is not JSON"),
        (("--wheel", "{}"), "gives no drop period"),
    ],
)
def test_a_bad_drop_prior_is_refused(tmp_path, capsys, args, said) -> None:
    f = _write(tmp_path / "laps.csv", _wheel_spins(2))
    opt, value = args
    if value.startswith("{"):
        (tmp_path / "w.json").write_text(value)
        value = str(tmp_path / "w.json")
    elif value == "missing.json":
        value = str(tmp_path / value)
    assert main(["rnvp", str(f), opt, value]) == 2
    assert said in " ".join(capsys.readouterr().err.split())
    capsys.readouterr()
    with pytest.raises(SystemExit):  # one or the other
        main(["rnvp", str(f), "--drop-s", "1.2", "--wheel", "w.json"])


def test_the_plot_shows_what_the_summary_says(tmp_path, capsys) -> None:
    """--plot FILE: the leads against the one asked, to PNG or SVG; its title carries the
    count within ±0.5 s that the JSON gives, and the void lines are marked apart."""
    spins = [*_wheel_spins(20, noise=0.02), [0.6, 0.7, 0.8]]  # ... and a void line
    f = _write(tmp_path / "laps.csv", spins)
    svg = tmp_path / "leads.svg"
    out = _run_json(capsys, str(f), "--plot", str(svg))
    within = sum(s["lead_s"] is not None and abs(s["lead_s"] - 1.0) <= 0.5 for s in out["spins"])
    text = svg.read_text()
    assert f"laps.csv: {within} of 21 spins within ±0.5 s of 1 s" in text
    assert "void (fewer than 4 laps): 1" in text
    png = tmp_path / "leads.png"
    assert main(["rnvp", str(f), "--plot", str(png), "--lead-revs", "1"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot: {png}" in " ".join(capsys.readouterr().out.split())


def test_a_plot_file_of_another_kind_is_refused_before_any_work(tmp_path, capsys) -> None:
    f = _write(tmp_path / "laps.csv", _wheel_spins(2))
    assert main(["rnvp", str(f), "--plot", str(tmp_path / "leads.pdf")]) == 2
    assert "give a .png or .svg file" in capsys.readouterr().err
    assert not (tmp_path / "leads.pdf").exists()
    assert main(["rnvp", str(f), "--plot", str(tmp_path / "no" / "dir" / "x.png")]) == 2
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "why"),
    [
        # a first line of numbers that another separator joined: no header to skip, and no
        # file of "0 spins" (it was exit 0)
        ("0.61;0.65;0.70;0.78\n0.60;0.66;0.72;0.80\n", "line 1: laps separated by semicolons"),
        ("0.61\t0.65\t0.70\t0.78\n", "line 1: laps separated by tabs"),
        ("", "no spin in the file"),
        ("# clocked by hand\n\nlap 1,lap 2\n", "no spin in the file"),
    ],
)
def test_a_file_that_gives_no_spin_is_refused(tmp_path, capsys, text, why) -> None:
    f = tmp_path / "laps.csv"
    f.write_text(text)
    assert main(["rnvp", str(f), "--json"]) == 2
    assert why in capsys.readouterr().err


def test_copies_of_spins_are_told_and_left_out_with_distinct(tmp_path, capsys) -> None:
    """A file whose lines repeat a spin, or cut one short (a data set built to ask "how long
    is left?" at every lap), is no file of spins of their own: said, and --distinct replays
    only the spins of their own, under their line's number."""
    spins = _wheel_spins(8)
    a, b = spins[1], spins[2]
    lines = [*spins, a[:-2], b, a[:5]]
    f = _write(tmp_path / "laps.csv", lines)
    whole = _run_json(capsys, str(f))
    assert whole["summary"]["spins"] == 11  # the interface's figures: every line, as given
    main(["rnvp", str(f), "--json"])
    err = capsys.readouterr().err
    assert "3 of 11 lines are copies of another spin, 2 of them cut short" in err
    assert f"spin 9 is the first {len(a) - 2} laps of spin 2" in err
    assert "--distinct leaves them out" in err
    out = _run_json(capsys, str(f), "--distinct")
    assert [s["spin"] for s in out["spins"]] == list(range(1, 9))
    assert main(["rnvp", str(_write(tmp_path / "own.csv", spins)), "--json"]) == 0
    alone = capsys.readouterr()
    assert "copies" not in alone.err  # a file of spins of their own: nothing to say
    # the copies taught the predictor nothing either
    assert out["spins"] == json.loads(alone.out)["spins"]
    main(["rnvp", str(_write(tmp_path / "twice.csv", spins + spins[:3])), "--json"])
    err = capsys.readouterr().err  # repeats alone: whole spins again, none cut short
    assert "3 of 11 lines are copies of another spin, 0 of them cut short" in err
    assert "spin 9 repeats spin 1" in err and "on time" not in err


def test_copies_are_told_from_chance_by_the_clock() -> None:
    """Spins agree lap for lap by chance over a few laps of a coarse clock: a copy holds 4
    laps on a millisecond clock, 6 on a 10 ms one, and none is looked for on video frames."""
    from rmc.rnvp import Copy, clock_grid, copies

    ms = [[0.612, 0.651, 0.702, 0.803, 0.9], [0.612, 0.651, 0.702], [0.612, 0.651, 0.702, 0.803]]
    assert clock_grid(ms) == 0.0
    assert copies(ms) == [Copy(3, 1, 1)]  # 3 laps alike may be chance; 4 are a copy
    assert copies([[0.6123, 0.7, 0.8, 0.9]] * 3) == [Copy(2, 1, 0), Copy(3, 1, 0)]
    cs = [[0.61, 0.65, 0.7, 0.8, 0.9, 1.0, 1.2], [0.61, 0.65, 0.7, 0.8, 0.9], [0.61] + [0.65] * 5]
    assert clock_grid(cs) == 0.01
    assert copies([*cs, cs[0][:6]]) == [Copy(4, 1, 1)]  # 6 laps, not 5
    frames = [[k / 25 for k in (11, 12, 13, 15)], [k / 25 for k in (11, 12, 13, 15, 17, 20)]]
    assert clock_grid(frames) == 0.04
    assert copies(frames + frames) == []  # 25 fps: spins of 4-6 laps agree by chance


def test_a_file_of_laps_newest_first(tmp_path, capsys) -> None:
    """Laps written newest first (some clocking tools do) read as a ball that speeds up:
    said; --newest-first reads each line backwards."""
    spins = _wheel_spins(10)
    f = _write(tmp_path / "laps.csv", spins)
    back = _write(tmp_path / "back.csv", [laps[::-1] for laps in spins])
    main(["rnvp", str(back), "--json"])
    assert "try with --newest-first" in capsys.readouterr().err
    assert main(["rnvp", str(back), "--newest-first", "--json"]) == 0
    read = capsys.readouterr()
    assert "newest first" not in read.err
    assert json.loads(read.out) == _run_json(capsys, str(f))
    main(["rnvp", str(f), "--newest-first", "--json"])
    assert "try without --newest-first" in capsys.readouterr().err
