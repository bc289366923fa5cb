"""`rmc record` over a real socket (pyserial's socket:// URL) from a firmware Wire in a thread.

The table loses some frames on the way out; the recorder must ask for them again, and the
trace it writes must check clean with every result.
"""

from __future__ import annotations

import json
import socket
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
