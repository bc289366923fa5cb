"""`rmc rig` from the command line: bad input is refused clearly (exit 2), a virtual run
prints its comparison as JSON, and the self-test through Blinka's mock board finds that the
mock's pins are wired to nothing (exit 1, every line "not seen")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rmc.rig.scenarios import RigScenario, write_trace
from rmc.rig.virtual import firmware_flash
from rmc.trace import TraceWriter
from rmc.vboard import VirtualBoard


def rmc(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rmc", "rig", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_bad_input_is_refused_with_a_reason(tmp_path):
    p = rmc("play", "nothing.jsonl", "--rig", str(tmp_path / "none.json"))
    assert p.returncode == 2 and "cannot read" in p.stderr
    cfg = tmp_path / "rig.json"
    cfg.write_text(json.dumps({"host": "raspberry_pi", "pulses": "blinka", "speed": 3}))
    trace = tmp_path / "t.jsonl"
    header = '{"kind":"header","format":"rmc-trace/1","table":"x","source":"sim"}\n'
    trace.write_text(header)  # cut: no end record, so its truth may be short
    for action in (("play", str(trace), "--rig", str(cfg)), ("virtual", str(trace))):
        p = rmc(*action)
        assert p.returncode == 2 and "damaged, not played: no end record" in p.stderr
    with TraceWriter(trace, json.loads(header)):
        pass
    p = rmc("play", str(trace), "--rig", str(cfg))
    assert p.returncode == 2 and "unknown keys speed" in p.stderr
    cfg.write_text(json.dumps({"host": "raspberry_pi", "pulses": "pulsegen"}))
    p = rmc("play", str(trace), "--rig", str(cfg))
    assert p.returncode == 2 and "needs pulsegen_port" in p.stderr
    p = rmc("virtual", str(tmp_path / "missing.jsonl"))
    assert p.returncode == 2 and "cannot read" in p.stderr


def test_virtual_run_prints_the_comparison(tmp_path):
    trace = tmp_path / "normal.jsonl"
    write_trace(RigScenario("normal", 1000, 1, ()), tmp_path)
    rec = tmp_path / "run.jsonl"
    p = rmc("virtual", str(trace), "--json", "--record", str(rec))
    assert p.returncode in (0, 1), p.stderr
    out = json.loads(p.stdout)
    assert out["ok"] is (p.returncode == 0)
    [spin] = out["spins"]
    assert spin["got"] == [spin["expected"]], out  # the board's result is the truth's
    assert out["checker_clean"] is True
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    assert lines[0]["source"] == "rig" and any(r["kind"] == "frame" for r in lines)


def test_selftest_with_the_mock_rig_sees_no_wiring(tmp_path):
    flash = firmware_flash(tmp_path / "flash")
    os.remove(flash / "main.py")
    with VirtualBoard(flash=flash, speed=1) as vb:
        cfg = tmp_path / "rig.json"
        cfg.write_text(
            json.dumps(
                {"host": "os_agnostic", "pulses": "blinka", "pockets": False,
                 "board_repl": vb.repl_url}
            )
        )  # fmt: skip
        p = rmc("selftest", "--rig", str(cfg), "--json", env={"BLINKA_OS_AGNOSTIC": "1"})
    assert p.returncode == 1, p.stderr
    rep = json.loads(p.stdout)
    assert rep["ok"] is False and rep["reads"] == 7
    # The mock's pins drive nothing: a line at its active level is never seen by the board.
    assert {c["line"] for c in rep["lines"]} == {
        "lid", "incident", "ball_a", "ball_b", "rotor_a", "rotor_b"
    }  # fmt: skip
    assert all("not seen" in c["detail"] for c in rep["lines"])
