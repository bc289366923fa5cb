"""The trace's end record: a writer closes every trace with the count and SHA-256 of the lines
before it, so a reader tells a whole trace from one cut short (even at a line boundary) or
changed after writing (docs/traces.md)."""

from __future__ import annotations

import io
import json

import pytest

from rmc.trace import TraceWriter, make_header, parse_trace


def _trace(tmp_path, n: int = 3) -> bytes:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, make_header("T01", "record")) as w:
        for i in range(n):
            w.frame(f"$F{i}".encode(), 1000.0 + i)
        w.write({"kind": "note", "t_ms": 5.0, "text": 'é, \u00ff and a quote "'})
    return path.read_bytes()


def test_a_whole_trace_reads_without_error_and_keeps_its_end_apart(tmp_path):
    data = _trace(tmp_path)
    lines = data.splitlines()
    end = json.loads(lines[-1])
    assert end["kind"] == "end" and end["lines"] == len(lines) - 1 == 5
    assert set(end) == {"kind", "lines", "sha256"}
    t = parse_trace(data)
    assert t.errors == [] and t.end == end
    assert [r["kind"] for r in t.records] == ["frame"] * 3 + ["note"]
    # line endings changed by a copy (CRLF), or blank lines, carry no content
    assert parse_trace(data.replace(b"\n", b"\r\n")).errors == []
    assert parse_trace(data.replace(b"\n", b"\n\n", 2) + b"\n  \n").errors == []


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda ls: ls[:-1], "no end record after line 5"),  # cut at a line boundary
        (lambda ls: ls[:3], "no end record after line 3"),
        (lambda ls: ls[:2] + ls[3:], "counts 5 lines before it, the file holds 4"),  # lost
        (lambda ls: [*ls[:2], ls[2], *ls[2:]], "counts 5 lines before it, the file holds 6"),
        (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], "SHA-256 differs"),  # moved
        (lambda ls: [ls[0], ls[1].replace(b"1000", b"1001"), *ls[2:]], "SHA-256 differs"),
        (lambda ls: [*ls, ls[1]], "records after the end record"),
        (lambda ls: [*ls, ls[-1]], "a second end record"),
        (lambda ls: [*ls[:-1], b'{"kind":"end","lines":"5"}'], "without its line count"),
    ],
)
def test_a_cut_or_changed_trace_is_told(tmp_path, edit, said):
    lines = _trace(tmp_path).splitlines()
    t = parse_trace(b"\n".join(edit(lines)) + b"\n")
    assert any(said in e for e in t.errors), t.errors


def test_every_record_of_a_changed_trace_is_still_read(tmp_path):
    """Reported, never silently dropped: records after the end are read like the others."""
    lines = _trace(tmp_path).splitlines()
    t = parse_trace(b"\n".join([*lines, lines[1]]))
    assert sum(r["kind"] == "frame" for r in t.records) == 4


def test_the_writer_ends_once_and_refuses_records_after(tmp_path):
    path = tmp_path / "t.jsonl"
    w = TraceWriter(path, make_header("T01", "record"))
    with pytest.raises(ValueError, match="writer's own"):
        w.write({"kind": "end", "lines": 1, "sha256": "0" * 64})
    w.close()
    w.close()  # a second close adds nothing
    with pytest.raises(ValueError, match="ended"):
        w.write({"kind": "note", "text": "late"})
    assert parse_trace(path.read_bytes()).errors == []
    assert len(path.read_bytes().splitlines()) == 2


def test_a_writer_stopped_by_an_error_ends_the_trace_and_says_why(tmp_path):
    path = tmp_path / "t.jsonl"
    with pytest.raises(OSError), TraceWriter(path, make_header("T01", "record")) as w:
        w.frame(b"$F0", 1.0)
        raise OSError("serial port gone")
    t = parse_trace(path.read_bytes())
    assert t.errors == [] and t.end is not None
    assert "OSError: serial port gone" in t.records[-1]["text"]
    # Ctrl-C is how a recording is stopped: no note for it
    with pytest.raises(KeyboardInterrupt), TraceWriter(path, make_header("T01", "record")):
        raise KeyboardInterrupt
    t = parse_trace(path.read_bytes())
    assert t.errors == [] and t.records == []


class _FullDisk(io.StringIO):
    """An output with room for `room` more writes."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, s: str) -> int:
        if self.room <= 0:
            raise OSError(28, "No space left on device")
        self.room -= 1
        return super().write(s)


def test_a_failing_output_does_not_hide_the_error_that_stopped_the_writer():
    out = _FullDisk(2)
    with (
        pytest.raises(RuntimeError, match="port gone"),
        TraceWriter(out, make_header("T", "rig")) as w,
    ):
        w.frame(b"$F0", 1.0)
        raise RuntimeError("port gone")
    t = parse_trace(out.getvalue().encode())  # the two lines written: a trace cut short
    assert [r["kind"] for r in t.records] == ["frame"]
    assert any("no end record after line 2" in e for e in t.errors)
