"""`rmc record` over a real socket (pyserial's socket:// URL) from a firmware Wire in a thread.

The table loses some frames on the way out; the recorder must ask for them again, and the
trace it writes must check clean with every result.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time

from rmc.cli import main
from rmc.framegen import ScriptedTable
from rmc.trace import wheel_id
from rmcfw.commands import Wire
from rmcfw.frames import Encoder
from rmcfw.journal import Journal

KEY = bytes(range(7, 39))


class Table(threading.Thread):
    def __init__(self, folder: str, key: bytes | None) -> None:
        super().__init__(daemon=True)
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.port = self.srv.getsockname()[1]
        self.folder = folder
        self.key = key
        self.results: list[tuple[int, str]] = []
        self.done = threading.Event()

    def run(self) -> None:
        conn, _ = self.srv.accept()
        conn.settimeout(0.02)
        journal = Journal(self.folder)
        journal.start()
        n = [0]

        def write(data) -> None:
            try:
                conn.sendall(bytes(data))
            except OSError:
                pass  # the recorder has gone: the table talks on, to nobody

        wire = Wire(Encoder("T07", 3, self.key), journal, write, key=self.key)

        def emit(ftype, fields) -> None:
            n[0] += 1
            line = wire.enc.frame(ftype, fields)
            journal.append(line)
            if n[0] % 7 != 3:  # every 7th frame lost on the way
                write(line)
            self._serve(conn, wire)

        wire.boot("0.1.0", wheel_id(), "power")
        t = ScriptedTable(emit, seed=5, revs=5)
        t.session(12)
        self.results = t.results
        end = time.monotonic() + 8
        while time.monotonic() < end and not self.done.is_set():
            self._serve(conn, wire)
        conn.close()
        self.srv.close()

    def _serve(self, conn, wire) -> None:
        try:
            data = conn.recv(4096)
        except TimeoutError:
            return
        except OSError:
            return
        if data:
            wire.feed(data)


def test_record_fills_gaps_and_checks_clean(tmp_path, capsys):
    table = Table(str(tmp_path / "journal"), KEY)
    table.start()
    keyfile = tmp_path / "k"
    keyfile.write_text(KEY.hex())
    out = tmp_path / "rec.jsonl"
    rc = main(
        [
            "record",
            "--port",
            f"socket://127.0.0.1:{table.port}",
            "-o",
            str(out),
            "--key-file",
            str(keyfile),
            "--duration",
            "3",
        ]
    )
    table.done.set()
    table.join(10)
    assert rc == 0, capsys.readouterr()
    capsys.readouterr()
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert records[0]["kind"] == "header" and records[0]["source"] == "record"
    assert any(r["kind"] == "command" and ",RESEND," in r["line"] for r in records)
    assert main(["check", str(out), "--key-file", str(keyfile), "--json"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(r["spin"], r["result"]) for r in got["results"]] == table.results
    assert got["resent"] > 0 and got["gaps"] == []


def test_record_bad_port_exit_2(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there
    assert main(["record", "--port", f"socket://127.0.0.1:{port}", "-o", str(tmp_path / "x")]) == 2


def _record(tmp_path, table: Table, key: bytes | None) -> int:
    args = ["record", "--port", f"socket://127.0.0.1:{table.port}", "-o", str(tmp_path / "r")]
    if key is not None:
        keyfile = tmp_path / "k"
        keyfile.write_text(key.hex())
        args += ["--key-file", str(keyfile)]
    rc = main([*args, "--duration", "3", "--grace", "1"])
    table.done.set()
    table.join(10)
    return rc


def test_record_with_the_wrong_key_says_so_and_fails(tmp_path, capsys):
    # Every line fails its tag: nothing is missing that the recorder knows of, but nothing
    # can be trusted either. It was "0 frames ... exit 0".
    table = Table(str(tmp_path / "journal"), KEY)
    table.start()
    assert _record(tmp_path, table, bytes(range(32))) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "lines failed their authentication (the key is not the table's)" in err, err


def test_record_without_the_key_of_a_keyed_table_says_why_gaps_stay(tmp_path, capsys):
    table = Table(str(tmp_path / "journal"), KEY)
    table.start()
    assert _record(tmp_path, table, None) == 1  # the lost frames cannot be asked again
    out = capsys.readouterr()
    err = " ".join(out.err.split())
    assert "the table refused" in err and "(auth): it takes only commands tagged" in err, err
    assert "tagged frames taken unverified" in out.out, out.out


class Dropping(Table):
    """A table whose line goes away: it sends its session, then closes the connection."""

    def run(self) -> None:
        self.done.set()  # serve nothing after the session: close at once
        super().run()


def test_a_port_lost_mid_recording_ends_the_trace_and_says_so(tmp_path, capsys):
    table = Dropping(str(tmp_path / "journal"), None)
    table.start()
    out = tmp_path / "rec.jsonl"
    args = ["record", "--port", f"socket://127.0.0.1:{table.port}", "-o", str(out)]
    rc = main([*args, "--duration", "10", "--grace", "1"])
    table.join(10)
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 1, err
    assert "the port failed, recording stopped: SerialException" in err, err
    assert "cannot open" not in err
    lines = out.read_text().splitlines()
    note, end = json.loads(lines[-2]), json.loads(lines[-1])
    assert note["kind"] == "note" and note["text"].startswith("port lost, recording stopped")
    assert end["kind"] == "end"
    # what came before the cable was pulled stands, whole (the gaps were filled on the way)
    assert main(["check", str(out), "--json"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert got["trace_errors"] == [] and got["gaps"] == []
    assert [(r["spin"], r["result"]) for r in got["results"]] == table.results


def test_a_trace_that_cannot_be_written_is_not_taken_for_a_port_error(tmp_path, capsys):
    table = Table(str(tmp_path / "journal"), None)
    table.start()
    out = tmp_path / "no" / "such" / "folder" / "rec.jsonl"
    rc = main(["record", "--port", f"socket://127.0.0.1:{table.port}", "-o", str(out)])
    table.done.set()
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and "cannot write" in err and "No such file" in err, err
    assert "cannot open" not in err


def _recorder(tmp_path, table: Table, *extra: str) -> subprocess.Popen:
    out = tmp_path / "rec.jsonl"
    cmd = [sys.executable, "-m", "rmc", "record", "--port", f"socket://127.0.0.1:{table.port}"]
    return subprocess.Popen(
        [*cmd, "-o", str(out), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for_results(path, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count(",RES,") >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"no {n} results recorded in {timeout} s")


def test_sigterm_stops_a_recording_like_ctrl_c_and_ends_its_trace(tmp_path, capsys):
    """A recorder run as a service is stopped by SIGTERM: the trace must end whole."""
    table = Table(str(tmp_path / "journal"), None)
    table.start()
    proc = _recorder(tmp_path, table, "--grace", "5")
    out = tmp_path / "rec.jsonl"
    _wait_for_results(out, len(table.results) or 12)
    time.sleep(1.0)  # the gaps asked again and filled
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    table.done.set()
    table.join(10)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert main(["check", str(out), "--json"]) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert got["trace_errors"] == [] and got["gaps"] == []
    assert [(r["spin"], r["result"]) for r in got["results"]] == table.results


def test_a_second_signal_skips_the_grace_period(tmp_path):
    # Without the key, the keyed table refuses every RESEND: the gaps stay, and the grace
    # period would run its whole 60 s.
    table = Table(str(tmp_path / "journal"), KEY)
    table.start()
    proc = _recorder(tmp_path, table, "--grace", "60")
    _wait_for_results(tmp_path / "rec.jsonl", 5)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    t = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    table.done.set()
    table.join(10)
    assert time.monotonic() - t < 10 and proc.returncode == 1, stderr
    assert "Traceback" not in stderr and "still missing" in " ".join(stderr.split())
    last = json.loads((tmp_path / "rec.jsonl").read_text().splitlines()[-1])
    assert last["kind"] == "end"
