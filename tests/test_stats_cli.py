"""`rmc stats` as a command (issue 24): traces, the service's database, --by, --json,
--plot, --power, and hostile input (one line of reason, exit 2, never a traceback)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

import cli_support
import pytest
from recorded_support import BASE_MS, Table

from rmc.cli import main
from rmc.frames import decode
from rmc.serve.derive import Deriver
from rmc.serve.store import Batch, Store

PREFIX = "rmc stats: "


def rmc(*args: str) -> subprocess.CompletedProcess:
    """`rmc stats ARGS` in this process (scipy imported once): its status and outputs."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["stats", *args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_as_a_process_no_traceback(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json at all\n")
    r = cli_support.rmc("stats", str(bad), "--by", "croupier")
    refused(r)


def refused(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def night(spins: int = 30) -> Table:
    """Two sessions of two chefs (one with brackets in the name: printed literally)."""
    t = Table()
    t.st.boot()
    t.st.open(chef="marie [b]", session=1)
    for _ in range(spins):
        t.play()
    t.last_three()
    for _ in range(3):
        t.play()
    t.close()
    t.st.open(chef="paul", session=2)
    for _ in range(spins):
        t.play()
    t.last_three()
    for _ in range(3):
        t.play()
    t.st.close(chef="paul", session=2)
    return t


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    return night().trace(tmp_path_factory.mktemp("t") / "night.jsonl")


def test_a_trace_as_json(trace):
    r = rmc(str(trace), "--json")
    assert r.returncode in (0, 1), r.stderr
    out = json.loads(r.stdout)
    a = out["all"]
    assert a["n"] == 66 and a["alpha"] == 0.01
    assert sum(x["count"] for x in a["pockets"]["table"]) == 66
    assert a["pockets"]["small_sample"] is True
    assert {"chi2", "g", "table"} <= set(a["pockets"])
    assert a["monitor"]["alarms"] == [] and "history" not in a["monitor"]
    assert r.returncode == (1 if a["flags"] else 0)


def test_by_croupier_session_direction(trace):
    for by, groups in (
        ("croupier", {"marie [b]", "paul"}),
        ("session", {"1", "2"}),
        ("direction", {"cw", "ccw"}),
    ):
        out = json.loads(rmc(str(trace), "--json", "--by", by).stdout)
        assert set(out["by"]["groups"]) == groups, by
        assert sum(g["n"] for g in out["by"]["groups"].values()) == 66
        assert out["by"]["homogeneity"]["dof"] > 0


def test_text_output_is_literal(trace):
    r = rmc(str(trace), "--by", "croupier")
    assert "marie [b]" in r.stdout and "Traceback" not in r.stderr
    assert "chi-square (38 dof)" in r.stdout and "sector scan" in r.stdout


def test_since_on_a_trace(trace):
    # the first session's 33 results come before BASE + 33 spins' frames
    since = str((BASE_MS + 250 * 14 * 34) // 1000)
    out = json.loads(rmc(str(trace), "--json", "--since", since).stdout)
    assert 0 < out["all"]["n"] < 66


def test_plot(trace, tmp_path):
    png = tmp_path / "w.png"
    r = rmc(str(trace), "--plot", str(png))
    assert r.returncode in (0, 1) and png.stat().st_size > 10_000
    svg = tmp_path / "w.svg"
    rmc(str(trace), "--plot", str(svg), "--json")
    assert svg.read_text().lstrip().startswith("<?xml")


def served(url: str, t: Table) -> None:
    store = Store.open(url)
    store.ensure_table(t.table)
    deriver = Deriver(t.table)
    for row in t.rows():
        deriver.add(decode(row.line.encode()), row.rx_us)
        d = deriver.advance(None)
        store.write(
            Batch(frames=[row], events=d.events, results=d.results, opens=d.opens, closes=d.closes)
        )
    store.close()


def test_the_database_gives_what_the_trace_gives(trace, tmp_path):
    url = f"sqlite:///{tmp_path}/rmc.db"
    served(url, night())
    from_db = json.loads(rmc("--db", url, "--table", "T01", "--json", "--by", "direction").stdout)
    from_trace = json.loads(rmc(str(trace), "--json", "--by", "direction").stdout)
    assert from_db["all"]["pockets"] == from_trace["all"]["pockets"]
    # the dealer's signature: the pockets under the ball sensor from the stored frames
    assert from_db["all"]["signature"] == from_trace["all"]["signature"]
    assert from_db["all"]["signature"]["first"]["n"] == 66
    assert from_db["by"]["groups"].keys() == from_trace["by"]["groups"].keys()
    out = json.loads(rmc("--db", url, "--table", "T01", "--json", "--by", "croupier").stdout)
    assert set(out["by"]["groups"]) == {"marie [b]", "paul"}
    assert "no table 'T9'" in refused(rmc("--db", url, "--table", "T9"))


def test_power_alone():
    r = rmc("--power", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["power"]["rows"]
    assert {row["test"] for row in rows} >= {"chi-square (38 dof)", "sector scan"}
    assert all(row["spins"] > 100 for row in rows)


# --- hostile input ---------------------------------------------------------------------


def test_hostile_inputs(tmp_path, trace):
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_bytes(b'{"kind": "header", "format": "rmc-trace/1"\n\x00\xff garbage\n')
    refused(rmc(str(garbled)))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert "empty" in refused(rmc(str(empty)))
    noresult = tmp_path / "none.jsonl"
    lines = night().lines[:5]  # BOOT, LID, SOPEN, LAUNCH, REV: no result yet
    t = Table()
    t.lines = lines
    t.trace(noresult)
    assert "no valid result" in refused(rmc(str(noresult)))
    assert "--since" in refused(rmc(str(trace), "--since", "yesterday"))
    assert ".png or .svg" in refused(rmc(str(trace), "--plot", str(tmp_path / "w.pdf")))
    refused(rmc(str(tmp_path / "missing.jsonl")))
    assert "no database file" in refused(rmc("--db", str(tmp_path / "no.db"), "--table", "T1"))
    refused(rmc())
    refused(rmc(str(trace), "--db", "x.db", "--table", "T1"))


def test_a_field_not_in_the_source_is_one_line(tmp_path):
    log = tmp_path / "wheel.log"
    log.write_text(
        "*X;3;1;0;0;270;0\n*X;4;1;0;0;270;0\n*X;5;1;5;0;270;0\n"
        "*X;3;2;5;0;270;1\n*X;4;2;5;0;270;1\n*X;5;2;17;0;270;1\n"
    )
    out = tmp_path / "s.jsonl"
    assert cli_support.rmc("import-slingshot", str(log), "-o", str(out)).returncode == 0
    assert "chef" in refused(rmc(str(out), "--by", "croupier"))
    assert "SOPEN" in refused(rmc(str(out), "--by", "session"))
    by = json.loads(rmc(str(out), "--json", "--by", "direction").stdout)
    assert set(by["by"]["groups"]) == {"cw", "ccw"}
