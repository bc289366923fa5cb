"""`rmc export --db URL --table ID [--since T] [--until T] -o TRACE`: a table's frames from
the service's database as a trace that `rmc check` verifies with the same results and the
same violations as the service derived live (issue 21)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pgserver import pg_server  # noqa: F401  (a fixture)
from recorded_support import BASE_MS, STEP_MS, TABLE, Table

from rmc import HARDWARE_DIR
from rmc.cli import main
from rmc.frames import decode
from rmc.serve.derive import Deriver
from rmc.serve.store import Batch, CommandAnswer, CommandRow, FrameRow, Store
from rmc.timestamps import format_instant
from rmc.trace import read_trace
from rmcfw import proto
from rmcfw.frames import Encoder

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/db/rmc.db"
    return request.getfixturevalue("pg_server").new_database()


def served(url: str, t: Table, order: list[int] | None = None) -> list:
    """Store the table's frames as `rmc serve` does, in receive order (or `order`), with
    what its rules derive live (rmc.serve.derive); returns the derived events."""
    rows = t.rows()
    deriver = Deriver(t.table)
    events = []
    store = Store.open(url)
    store.ensure_table(t.table)
    waiting = {(r.boot, r.seq) for r in rows}
    top = (0, 0)
    for i in order if order is not None else range(len(rows)):
        row = rows[i]
        deriver.add(decode(row.line.encode()), row.rx_us)
        waiting.discard((row.boot, row.seq))
        top = max(top, (row.boot, row.seq))
        # as the link holds them back: no rule runs past a frame still missing
        derived = deriver.advance(min((k for k in waiting if k < top), default=None))
        events += derived.events
        store.write(Batch(frames=[row], events=derived.events, results=derived.results))
    store.close()
    return events


def check_json(path: Path, capsys) -> dict:
    capsys.readouterr()
    main(["check", str(path), "--json"])
    return json.loads(capsys.readouterr().out)


def export(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["export", *argv])
    got = capsys.readouterr()
    return code, got.out, got.err


def with_violations() -> Table:
    """A session with two violations the live service reports: a spin whose rotor turned
    the way it did on the spin before (its result rejected), and a close without the last
    three announced."""
    t = Table()
    t.start()
    t.play()
    t.st.rdir = "cw" if t.st.rdir == "ccw" else "ccw"  # the next spin's rotor does not reverse
    t.play()
    t.play()
    t.close()
    return t


def test_the_export_checks_with_the_violations_the_service_derived(db_url, tmp_path, capsys):
    t = with_violations()
    events = served(db_url, t)
    live = [e.data for e in events if e.kind == "violation"]
    assert {v["rule"] for v in live} == {"rotor_not_reversed", "last_three_not_announced"}
    out = tmp_path / "export.jsonl"
    code, said, err = export(capsys, "--db", db_url, "--table", TABLE, "-o", str(out))
    assert code == 0, err
    assert said.startswith(f"{out}: {len(t.lines)} frames (boot 1)")
    report = check_json(out, capsys)
    assert report["trace_errors"] == []
    assert report["violations"] == live
    assert report["results"] == [e.data for e in events if e.kind == "result"]
    assert report["rejected"] == [e.data for e in events if e.kind == "rejected"]
    assert report["rejected"][0]["rules"] == ["rotor_not_reversed"]
    assert (report["valid"], report["gaps"]) == (len(t.lines), [])
    # every frame line exactly as received, with its receive time, in (boot, seq) order
    trace = read_trace(out)
    assert trace.header["table"] == TABLE and trace.header["source"] == "record"
    assert trace.header["export"]["since"] is None
    assert [(line, rx) for line, rx in trace.frame_lines()] == t.lines


def test_resent_frames_keep_their_mark_and_take_their_place(tmp_path, capsys):
    """Frames the service stored out of order (a gap filled by resends, marked ~) come out
    in (boot, seq) order: `rmc check` sees them resent, not out of order nor missing."""
    t = Table()
    t.start()
    t.play()
    t.close(reason="short")
    lines = []
    for n, (line, rx) in enumerate(t.lines):
        lines.append((b"~" + line if n in (5, 6) else line, rx))
    t.lines = lines
    url = f"sqlite:///{tmp_path}/rmc.db"
    order = [i for i in range(len(lines)) if i not in (5, 6)] + [5, 6]
    served(url, t, order)
    out = tmp_path / "export.jsonl"
    assert export(capsys, "--db", url, "--table", TABLE, "-o", str(out))[0] == 0
    report = check_json(out, capsys)
    assert (report["resent"], report["out_of_order"], report["gaps"]) == (2, 0, [])
    assert report["clean"], report
    got = [line for line, _ in read_trace(out).frame_lines()]
    assert got[5].startswith(b"~$1,T01,1,6,") and got[4].startswith(b"$1,T01,1,5,")


def test_commands_and_their_answers_are_in_the_export(tmp_path, capsys):
    t = Table()
    t.start()
    t.play()
    url = f"sqlite:///{tmp_path}/rmc.db"
    served(url, t)
    cmd = Encoder(TABLE, 1, start=ord(">")).frame(proto.C_STATUS, (), seq=1)
    cmd_line = bytes(cmd).decode().rstrip("\n")
    ack = Encoder(TABLE, 1).frame(
        proto.T_ACK,
        ("cmd", proto.C_STATUS, "cseq", 1, "ok", 1, "detail", "ok", "top", len(t.lines)),
        seq=0,
        ms=3000,
    )
    ack_line = bytes(ack).decode().rstrip("\n")
    sent = (BASE_MS + 3 * STEP_MS) * 1000 + 100  # between the third and the fourth frame
    store = Store.open(url)
    store.write(
        Batch(
            commands=[CommandRow(TABLE, 1, 1, proto.C_STATUS, [], "marie", "chef", cmd_line, sent)],
            answered=[CommandAnswer(TABLE, 1, 1, True, "ok", ack_line, sent + 20_000)],
        )
    )
    store.close()
    out = tmp_path / "export.jsonl"
    code, said, _ = export(capsys, "--db", url, "--table", TABLE, "-o", str(out))
    assert code == 0 and "1 commands, 1 answers" in said
    records = read_trace(out).records
    kinds = [(r["kind"], r.get("line", "")[:12]) for r in records[2:6]]
    assert kinds == [
        ("frame", "$1,T01,1,3,7"),
        ("command", ">1,T01,1,1,0"),
        ("frame", "$1,T01,1,0,3"),
        ("frame", "$1,T01,1,4,1"),
    ]
    command = records[3]
    assert (command["by"], command["role"], command["tx_ms"]) == ("marie", "chef", sent / 1000)
    report = check_json(out, capsys)
    assert report["answers"] == 1 and report["clean"], report


def test_since_and_until_choose_the_frames_by_receive_time(tmp_path, capsys):
    t = Table()
    t.start()
    t.play()
    t.play()
    url = f"sqlite:///{tmp_path}/rmc.db"
    served(url, t)
    since_ms, until_ms = t.lines[4][1], t.lines[10][1]
    out = tmp_path / "window.jsonl"
    since = format_instant(round(since_ms * 1000))
    until = str(until_ms / 1000)  # epoch seconds
    argv = ["--db", url, "--table", TABLE, "--since", since, "--until", until]
    code, _, err = export(capsys, *argv, "-o", str(out))
    assert code == 0, err
    trace = read_trace(out)
    assert list(trace.frame_lines()) == t.lines[4:10]  # since included, until excluded
    assert trace.header["export"] == {
        "db": url,
        "since": since,
        "until": format_instant(round(until_ms * 1000)),
    }
    assert check_json(out, capsys)["trace_errors"] == []
    # a window without frames, and bad times: one line each
    late = str(BASE_MS // 1000 + 3600)
    cases = [
        (["--since", late], "no frame of table 'T01' received since 2024-05-01T20:30:00.000000Z"),
        (["--since", "2024-05-01 21:30"], "--since '2024-05-01 21:30' has no offset"),
        (["--until", "yesterday"], "--until 'yesterday' is not an ISO 8601 time"),
        (["--since", "20", "--until", "10"], "--since must come before --until"),
    ]
    for extra, reason in cases:
        new = tmp_path / "none.jsonl"
        code, _, err = export(capsys, "--db", url, "--table", TABLE, *extra, "-o", str(new))
        assert code == 2 and err.startswith(f"rmc export: {reason}"), err
        assert err.count("\n") == 1
        assert not new.exists()


def test_an_existing_trace_is_replaced_only_with_force(tmp_path, capsys):
    t = Table()
    t.start()
    url = f"sqlite:///{tmp_path}/rmc.db"
    served(url, t)
    out = tmp_path / "[bold]export.jsonl"  # named literally
    out.write_text("keep me\n")
    code, _, err = export(capsys, "--db", url, "--table", TABLE, "-o", str(out))
    assert (code, err) == (2, f"rmc export: {out} exists: give --force to replace it\n")
    assert out.read_text() == "keep me\n"
    assert export(capsys, "--db", url, "--table", TABLE, "-o", str(out), "--force")[0] == 0
    assert read_trace(out).errors == []


def test_unusable_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    t = Table()
    t.start()
    url = f"sqlite:///{tmp_path}/rmc.db"
    served(url, t)
    out = tmp_path / "export.jsonl"
    missing = tmp_path / "typo.db"
    bad_wheel = tmp_path / "wheel.json"
    bad_wheel.write_text('{"id": "x"}')
    cases = [
        (["--db", url, "--table", "T99"], "no table 'T99' in the database: no frame of it is"),
        (["--db", str(missing), "--table", TABLE], f"no database file {missing}"),
        (["--db", "mysql://h/db", "--table", TABLE], "unsupported database URL mysql://h/db"),
        (["--db", url, "--table", TABLE, "--wheel", str(bad_wheel)], "no 'pockets' list"),
        (["--db", url, "--table", TABLE, "-o", str(tmp_path / "no" / "x")], "No such file"),
    ]
    for argv, reason in cases:
        if "-o" not in argv:
            argv = [*argv, "-o", str(out)]
        code, said, err = export(capsys, *argv)
        assert code == 2 and said == "", (argv, err)
        assert err.count("\n") == 1 and reason in err, (argv, err)
        assert not out.exists() and not missing.exists()


def test_the_wheel_given_is_checked_by_rmc_check(tmp_path, capsys):
    t = Table()
    t.start()
    url = f"sqlite:///{tmp_path}/rmc.db"
    served(url, t)
    wheel = json.loads((HARDWARE_DIR / "wheel.json").read_text())
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**wheel, "pockets": list(reversed(wheel["pockets"]))}))
    out = tmp_path / "export.jsonl"
    argv = ["--db", url, "--table", TABLE, "-o", str(out), "--wheel", str(other)]
    assert export(capsys, *argv)[0] == 0
    assert [v["rule"] for v in check_json(out, capsys)["violations"]] == ["wheel"]


def test_rmc_export_as_a_process(tmp_path):
    t = Table()
    t.start()
    t.play()
    url = f"sqlite:///{tmp_path}/rmc.db"
    served(url, t)
    out = tmp_path / "export.jsonl"
    argv = ["export", "--db", url, "--table", TABLE, "-o", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "rmc", *argv], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    check = subprocess.run(
        [sys.executable, "-m", "rmc", "check", str(out)], capture_output=True, timeout=120
    )
    assert check.returncode == 0, check.stdout


def test_frame_rows_are_the_services(tmp_path):
    """The helper stores frames as the service does (rmc.serve.tables: the frame's line,
    with '~' when resent)."""
    t = Table()
    t.start()
    row = t.rows()[0]
    assert isinstance(row, FrameRow)
    assert row.line.startswith("$1,T01,1,1,") and row.rx_us == (BASE_MS + STEP_MS) * 1000


def test_the_database_url_is_shown_without_its_password():
    from rmc.served_db import shown_url, sqlite_file

    assert shown_url("postgresql://rmc:s3cret@db:5432/rmc") == "postgresql://rmc:***@db:5432/rmc"
    assert shown_url("sqlite:////var/rmc.db") == "sqlite:////var/rmc.db"
    assert sqlite_file("sqlite:////var/rmc.db") == Path("/var/rmc.db")
    assert sqlite_file("var/rmc.db") == Path("var/rmc.db")
    assert sqlite_file("sqlite://") is None and sqlite_file("postgresql://h/db") is None
