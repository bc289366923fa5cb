"""`rmc check`: traces and raw captures, exit statuses 0 / 1 / 2, JSON keys."""

from __future__ import annotations

import json

from rmc.cli import main
from rmc.framegen import session_lines
from rmc.trace import TraceWriter, make_header

KEY = bytes(range(32))
KEYS = (
    "frames valid crc_errors auth_failures duplicates reboots gaps spins results voids violations"
).split()


def _capture(tmp_path, lines, name="cap.log"):
    p = tmp_path / name
    p.write_bytes(
        b"MicroPython v1.27.0\r\n>>> \r\n" + b"".join(x.replace(b"\n", b"\r\n") for x in lines)
    )
    return p


def _json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_clean_capture_exit_0(tmp_path, capsys):
    lines, table = session_lines(8)
    assert main(["check", str(_capture(tmp_path, lines)), "--json"]) == 0
    out = _json(capsys)
    assert set(KEYS) <= set(out)
    assert out["input"] == "capture" and out["noise"] == 2
    assert out["results"] == [{"spin": s, "result": n} for s, n in table.results]
    assert out["gaps"] == [] and out["violations"] == []


def test_trace_with_gap_and_damage_exit_1(tmp_path, capsys):
    lines, _ = session_lines(8)
    p = tmp_path / "t.jsonl"
    with TraceWriter(p, make_header("T01", "record", firmware="0.1.0")) as w:
        for i, line in enumerate(lines):
            if i == 20:
                continue  # lost
            if i == 30:
                line = line[:12] + bytes([line[12] ^ 0x04]) + line[13:]  # one bit flipped
            w.frame(line, 1000.0 + i)
    assert main(["check", str(p), "--json"]) == 1
    out = _json(capsys)
    assert out["input"] == "trace"
    assert out["gaps"] == [[1, 21, 21], [1, 31, 31]]
    assert out["crc_errors"] == 1 and out["valid"] == len(lines) - 2
    assert main(["check", str(p)]) == 1  # the rich table, same verdict


def test_keyed_capture_needs_the_right_key(tmp_path, capsys):
    lines, _ = session_lines(4, key=KEY)
    cap = _capture(tmp_path, lines)
    keyfile = tmp_path / "table.key"
    keyfile.write_text(KEY.hex() + "\n")
    assert main(["check", str(cap), "--key-file", str(keyfile), "--json"]) == 0
    assert _json(capsys)["auth_failures"] == 0
    wrong = tmp_path / "wrong.key"
    wrong.write_text(bytes(32).hex())
    assert main(["check", str(cap), "--key-file", str(wrong), "--json"]) == 1
    assert _json(capsys)["auth_failures"] == len(lines)
    # Without a key the tags cannot be verified: said so, not counted as failures.
    assert main(["check", str(cap), "--json"]) == 0
    assert _json(capsys)["unverified"] == len(lines)


def test_rule_violation_exit_1(tmp_path, capsys):
    from rmcfw import proto
    from rmcfw.frames import Encoder

    enc = Encoder("T01", 1)
    lines = [
        bytes(enc.frame(proto.T_LAUNCH, ("spin", 1, "rdir", "cw", "bdir", "cw"))),
        bytes(enc.frame(proto.T_DROP, ("spin", 1, "revs", 3))),
        bytes(enc.frame(proto.T_RESULT, ("spin", 1, "num", "17", "colour", "rouge"))),
    ]
    assert main(["check", str(_capture(tmp_path, lines)), "--json"]) == 1
    rules = [v["rule"] for v in _json(capsys)["violations"]]
    assert rules == [
        "drop_before_rnvp",
        "wrong_chances",
        "result_without_rnvp",
        "ball_with_rotor",
        "few_revs",
    ]


def test_unusable_inputs_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)).replace(b"$", b""))
    bad_header = tmp_path / "bad.jsonl"
    bad_header.write_text('{"kind": "header", "format": "other/9"}\n')
    for p in (empty, junk, bad_header, tmp_path / "missing"):
        assert main(["check", str(p), "--json"]) == 2, p
        assert _json(capsys)["usable"] is False
    lines, _ = session_lines(2)
    badkey = tmp_path / "bad.key"
    badkey.write_text("not hex")
    assert main(["check", str(_capture(tmp_path, lines)), "--key-file", str(badkey)]) == 2


def test_damaged_json_line_in_trace_is_a_problem_not_a_crash(tmp_path, capsys):
    lines, _ = session_lines(3)
    p = tmp_path / "t.jsonl"
    with TraceWriter(p, make_header("T01", "record")) as w:
        for line in lines:
            w.frame(line)
    with open(p, "a") as f:
        f.write('{"kind": "frame", "line": \n')
    assert main(["check", str(p), "--json"]) == 1
    assert _json(capsys)["trace_errors"]


def test_a_capture_of_dollars_without_a_frame_is_damage(tmp_path, capsys):
    p = tmp_path / "cap.log"
    p.write_bytes(b"price $5\r\n>>> echo $HOME\r\ntotal $$\r\n")
    assert main(["check", str(p), "--json"]) == 1
    out = _json(capsys)
    assert not out["clean"] and out["crc_errors"] == 3 and out["valid"] == 0


def test_tamper_forced_close_and_rejected_results_show_in_the_text_report(tmp_path, capsys):
    from rmcfw import proto
    from rmcfw.frames import Encoder

    lines, _ = session_lines(4)
    enc = Encoder("T01", 1, seq=len(lines))
    lines.append(bytes(enc.frame(proto.T_TAMPER, ("what", "[bold]lid[/bold]"))))
    res = ("spin", 9, "num", "4", "colour", "noir", "parity", "pair", "half", "manque")
    lines.append(bytes(enc.frame(proto.T_RESULT, res)))
    assert main(["check", str(_capture(tmp_path, lines))]) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert "tamper at 1:" in text and "what=[bold]lid[/bold]" in text
    assert "rejected spin 9: 4 (not_launched)" in text
    assert "problems found" in text


def test_a_trace_that_lost_its_header_is_unusable_for_check_and_replay(tmp_path, capsys):
    lines, _ = session_lines(4)
    p = tmp_path / "t.jsonl"
    with TraceWriter(p, make_header("T01", "record")) as w:
        for line in lines:
            w.frame(line.rstrip(b"\n"), rx_ms=0)
    headless = tmp_path / "headless.jsonl"
    headless.write_text("".join(p.read_text().splitlines(keepends=True)[1:]))
    for cmd in ("check", "replay"):
        assert main([cmd, str(headless)]) == 2, cmd
        assert "line 1: a trace starts with its header" in capsys.readouterr().err, cmd
