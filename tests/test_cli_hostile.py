"""Issue 20: every `rmc` command holds up against a hostile command line.

User text holding square brackets (a player's name, a file name, a URL, a key path) is
printed literally, never read as console markup; a non-UTF-8 input file is one line of
reason; a missing input file is named. Each command runs as a subprocess, as a user runs it.

A closing tag such as `[/x]` can be in a path: `[` is then a folder, `x]...` a file in it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import cli_support
import pytest

WIDE = {**os.environ, "COLUMNS": "200"}  # no table squeezed: what is printed is whole


def rmc(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return cli_support.rmc(*args, cwd=cwd, env=WIDE, **kw)


def one_line_reason(proc: subprocess.CompletedProcess, command: str) -> str:
    """The stderr of a refused command: one line `rmc COMMAND: ...`, no traceback."""
    err = proc.stderr
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rmc {command}: "), err
    return lines[0]


def laps_csv(path: Path) -> Path:
    rows = [",".join(f"{0.5 + 0.06 * i + 0.01 * s:.3f}" for i in range(12)) for s in range(4)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def bracket_dir(tmp_path: Path) -> Path:
    """tmp_path with a folder `[`: paths like `[/x]` exist there."""
    (tmp_path / "[").mkdir()
    return tmp_path


# --- markup in user text ---


def test_settle_prints_player_names_literally(tmp_path: Path) -> None:
    names = ["[bold]B[/bold]", "[/x]", "[red]"]
    bets = {
        "bets": [{"player": n, "type": "plein", "numbers": ["17"], "stake": "10"} for n in names]
    }
    (tmp_path / "bets.json").write_text(json.dumps(bets))
    proc = rmc("settle", "--result", "17", "bets.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for n in names:
        assert n in proc.stdout, proc.stdout


def test_rnvp_prints_the_file_name_literally(tmp_path: Path) -> None:
    laps_csv(tmp_path / "[red]L.csv")
    proc = rmc("rnvp", "[red]L.csv", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[red]L.csv" in proc.stdout, proc.stdout


def test_rnvp_plot_name_printed_literally(bracket_dir: Path) -> None:
    laps_csv(bracket_dir / "laps.csv")
    proc = rmc("rnvp", "laps.csv", "--plot", "[/x].svg", cwd=bracket_dir)
    assert proc.returncode == 0, proc.stderr
    assert "plot: [/x].svg" in proc.stdout
    assert (bracket_dir / "[" / "x].svg").read_text().lstrip().startswith("<?xml")


def test_sim_output_name_printed_literally_and_the_file_written(bracket_dir: Path) -> None:
    proc = rmc(
        "sim", "--spins", "1", "--quiet", "-o", "[/x].jsonl", "--laps", "[/y].csv", cwd=bracket_dir
    )
    assert proc.returncode == 0, proc.stderr
    assert "[/x].jsonl" in proc.stderr and "[/y].csv" in proc.stderr, proc.stderr
    last = (bracket_dir / "[" / "x].jsonl").read_text().splitlines()[-1]
    assert json.loads(last)["kind"] == "end"
    assert (bracket_dir / "[" / "y].csv").exists()


def test_record_port_url_printed_literally(tmp_path: Path) -> None:
    proc = rmc("record", "--port", "socket://[/x]:1", "-o", "r.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    assert "[/x]" in one_line_reason(proc, "record")
    assert not (tmp_path / "r.jsonl").exists()


def test_record_key_file_printed_literally(bracket_dir: Path) -> None:
    proc = rmc("record", "--port", "loop://", "--key-file", "[/x]", "-o", "r", cwd=bracket_dir)
    assert proc.returncode == 2
    assert "[/x]" in one_line_reason(proc, "record")


def test_rig_virtual_names_a_missing_trace_literally(bracket_dir: Path) -> None:
    proc = rmc("rig", "virtual", "[/x].jsonl", cwd=bracket_dir)
    assert proc.returncode == 2
    assert "[/x].jsonl" in one_line_reason(proc, "rig")


def test_rig_virtual_bad_key_file_is_one_line(tmp_path: Path) -> None:
    assert rmc("sim", "--spins", "1", "--quiet", "-o", "t.jsonl", cwd=tmp_path).returncode == 0
    (tmp_path / "[k]").write_text("not hex\n")
    proc = rmc("rig", "virtual", "t.jsonl", "--key", "[k]", cwd=tmp_path)
    assert proc.returncode == 2
    assert "[k]" in one_line_reason(proc, "rig")


def test_demo_out_not_a_folder_named_literally(bracket_dir: Path) -> None:
    (bracket_dir / "[" / "x]").write_text("a file")
    proc = rmc("demo", "--out", "[/x]", cwd=bracket_dir)
    assert proc.returncode == 2
    assert "[/x]" in one_line_reason(proc, "demo")


def test_demo_heading_shows_the_output_folder_literally() -> None:
    import io

    from rmc.console import out_console
    from rmc.demo.run import DemoConfig
    from rmc.demo.show import heading

    buf = io.StringIO()
    out_console(file=buf, width=200).print(heading(DemoConfig(spins=3, out=Path("[/x]"))))
    assert "output [/x]" in buf.getvalue()


def test_demo_spin_lines_print_player_names_literally() -> None:
    """The demo's announcements are Text, so a player's name cannot be markup."""
    import io

    from rich.text import Text

    from rmc.console import out_console
    from rmc.demo import show

    line = show.player_line("[/x]", "gagne 35")
    assert isinstance(line, Text)
    buf = io.StringIO()
    out_console(file=buf, width=200).print(line)
    assert "[/x]" in buf.getvalue()


# --- input files ---


def test_rnvp_on_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_bytes(b"\xff\xfe0.5,0.6\n")
    proc = rmc("rnvp", "bad.csv", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bad.csv" in one_line_reason(proc, "rnvp")


# --- rmc check and rmc replay (the checker's commands) ---


def test_check_names_the_file_it_cannot_open(tmp_path: Path) -> None:
    proc = rmc("check", "nosuch.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    assert "nosuch.jsonl" in one_line_reason(proc, "check")


def test_check_key_file_printed_literally(bracket_dir: Path) -> None:
    (bracket_dir / "cap.log").write_text("hello\n")
    proc = rmc("check", "cap.log", "--key-file", "[/x]", cwd=bracket_dir)
    assert proc.returncode == 2
    assert "[/x]" in one_line_reason(proc, "check")


def test_replay_key_file_printed_literally(bracket_dir: Path) -> None:
    (bracket_dir / "cap.log").write_text("hello\n")
    proc = rmc("replay", "cap.log", "--key-file", "[/x]", cwd=bracket_dir)
    assert proc.returncode == 2
    assert "[/x]" in one_line_reason(proc, "replay")


def test_replay_bad_table_file_printed_literally(bracket_dir: Path) -> None:
    assert rmc("sim", "--spins", "1", "--quiet", "-o", "t.jsonl", cwd=bracket_dir).returncode == 0
    lines = (bracket_dir / "t.jsonl").read_text().splitlines()
    bet = {"kind": "bet", "t_ms": 0, "player": "A", "type": "rouge", "stake": "10"}
    lines.insert(1, json.dumps(bet))  # the trace is changed: replay says so, and goes on
    (bracket_dir / "t.jsonl").write_text("\n".join(lines) + "\n")
    proc = rmc("replay", "t.jsonl", "--table", "[/x].toml", cwd=bracket_dir)
    assert proc.returncode == 2, proc.stderr
    assert "[/x].toml" in one_line_reason(proc, "replay")
