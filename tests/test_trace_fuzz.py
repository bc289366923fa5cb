"""Damaged traces (hypothesis): `rmc check` and `rmc replay` answer, they never crash.

A recording of a simulated table (sensor edges, the core's frames, bets) is damaged as a
disk, a copy or a hand edit damages a file: a byte changed, the file cut short, a line lost,
doubled, moved or inserted. Both commands must end with their documented exit status (0, 1
or 2) and, where they can still read the file, say what they found; a frame whose bytes
changed is never taken as it was; and no damage at all passes as clean: the writer's end
record (the lines before it and their SHA-256) tells a cut, even at a line boundary, and any
line changed, lost or added.
"""

from __future__ import annotations

import functools
import io
import json
import os
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmc.cli import main
from rmc.frames import decode
from rmc.replay import run_core
from rmc.trace import TraceWriter, read_trace
from rmcfw import proto

SETTINGS = settings(
    max_examples=int(os.environ.get("RMC_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@functools.cache
def clean_trace() -> bytes:
    """A two-spin simulated session with the frames the core sends and a bet on each spin."""
    with tempfile.TemporaryDirectory() as d:
        sim = Path(d) / "sim.jsonl"
        assert main(["sim", "--spins", "2", "--seed", "5", "-o", str(sim), "--quiet"]) == 0
        trace = read_trace(sim)
        core = run_core(trace)
        assert core is not None
        out = Path(d) / "t.jsonl"
        with TraceWriter(out, trace.header) as w:
            for r in trace.records:
                w.write(r)
            for line in core.lines:
                f = decode(line)
                w.frame(line, float(f.ms))
                if f.type == proto.T_LAUNCH:
                    bet = {"t_ms": f.ms + 100, "player": "A", "type": "rouge", "stake": "10"}
                    w.write({"kind": "bet", **bet})
        return out.read_bytes()


def _run(args: list[str]) -> tuple[int, str]:
    """The CLI in-process: its exit status (0, 1 or 2, nothing else) and its stdout."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(args)
    assert code in (0, 1, 2), (args, code, err.getvalue())
    return code, out.getvalue()


damage = st.one_of(
    st.tuples(st.just("byte"), st.integers(0, 10**9), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10**9)),
    st.tuples(st.just("drop"), st.integers(0, 10**9)),
    st.tuples(st.just("double"), st.integers(0, 10**9)),
    st.tuples(st.just("move"), st.integers(0, 10**9), st.integers(0, 10**9)),
    st.tuples(st.just("insert"), st.integers(0, 10**9), st.binary(max_size=80)),
)


def _damage(data: bytes, how: tuple) -> bytes:
    lines = data.splitlines(keepends=True)
    kind = how[0]
    if kind == "byte":
        i = how[1] % len(data)
        return data[:i] + bytes([how[2]]) + data[i + 1 :]
    if kind == "cut":
        return data[: how[1] % len(data)]
    i = how[1] % len(lines)
    if kind == "drop":
        del lines[i]
    elif kind == "double":
        lines.insert(i, lines[i])
    elif kind == "move":
        line = lines.pop(i)
        lines.insert(how[2] % (len(lines) + 1), line)
    elif kind == "insert":
        lines.insert(i, how[2] + b"\n")
    return b"".join(lines)


def test_the_clean_trace_is_clean(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(clean_trace())
    code, out = _run(["check", str(path), "--json"])
    assert code == 0 and json.loads(out)["clean"]
    code, out = _run(["replay", str(path), "--json"])
    assert code == 0, out
    assert len(json.loads(out)["bets"]["settled"]) == 2


@functools.cache
def clean_results() -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.jsonl"
        path.write_bytes(clean_trace())
        code, out = _run(["check", str(path), "--json"])
    assert code == 0
    return json.loads(out)["results"]


@SETTINGS
@given(hows=st.lists(damage, min_size=1, max_size=3))
def test_a_damaged_trace_gets_an_answer_never_a_crash(hows):
    clean = clean_trace()
    data = clean
    for how in hows:
        data = _damage(data, how) or b"\n"
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.jsonl"
        path.write_bytes(data)
        code, out = _run(["check", str(path), "--json"])
        if code != 2:
            report = json.loads(out)
            # no result but the table's: a changed frame fails its CRC
            for r in report["results"]:
                assert r in clean_results(), (r, hows)
        # any change of the text is told: line endings and blank lines alone carry none
        changed = _text_lines(data) != _text_lines(clean)
        if changed:
            assert code != 0, (hows, out)
        code, out = _run(["replay", str(path), "--json"])
        if code != 2:
            json.loads(out)  # one JSON object, as documented
        if changed:
            assert code != 0, (hows, out)


def _text_lines(data: bytes) -> list[bytes]:
    return [line for line in data.splitlines() if line.strip()]


def test_a_trace_cut_at_a_line_boundary_is_told(tmp_path):
    """The case the frames alone cannot tell: the last lines gone, every line left whole."""
    lines = clean_trace().splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    for keep in (len(lines) - 1, len(lines) // 2):
        path.write_bytes(b"".join(lines[:keep]))
        code, out = _run(["check", str(path), "--json"])
        report = json.loads(out)
        assert code == 1 and not report["clean"]
        assert any("no end record" in e for e in report["trace_errors"]), report
        code, out = _run(["replay", str(path), "--json"])
        assert code == 1 and any("no end record" in e for e in json.loads(out)["trace_errors"])
        for command in ("check", "replay"):  # the text says so too
            code, out = _run([command, str(path)])
            assert code == 1 and "problems found" in out and "\nclean" not in out, out
