"""`rmc serve` and `rmc table` given what a hostile or hurried operator gives them: a one-line
reason and exit 2, never a traceback; and the service's work with no table attached yet."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from cli_support import rmc
from serve_support import Served, Tokens, wait_for

from rmc.serve.client import Client, ClientError


def one_line_exit_2(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.mark.parametrize(
    "toml, says",
    [
        ("[[table]]\nid = 'T01'\n", "no url"),
        ("[[table]]\nid = 'T 1'\nurl = 'loop://'\n", "table id"),
        (
            "[[table]]\nid = 'T01'\nurl = 'loop://'\n[[table]]\nid = 'T01'\nurl = 'loop://'\n",
            "listed twice",
        ),
        ("[[operator]]\nname = 'x'\nrole = 'boss'\ntoken_sha256 = '00'\n", "role"),
        ("[[operator]]\nname = 'x'\nrole = 'chef'\n", "no token_file"),
        ("[[operator]]\nname = 'x'\nrole = 'chef'\ntoken_file = 'nosuch'\n", "cannot read token"),
        ("[[table]]\nid = 'T01'\nurl = 'loop://'\nkey_file = 'nosuch.key'\n", "key file"),
        ("db = [1, 2\n", "serve.toml"),
        ("http = 'nowhere'\n[[table]]\nid = 'T01'\nurl = 'loop://'\n", "HOST:PORT"),
        ("table = 3\n", "list of tables"),
    ],
)
def test_a_bad_configuration_is_one_line(tmp_path, toml, says):
    cfg = tmp_path / "serve.toml"
    cfg.write_text(toml)
    line = one_line_exit_2(rmc("serve", "--config", str(cfg), cwd=tmp_path, timeout=60))
    assert says in line


def test_serve_without_a_table_missing_config_bad_pairs(tmp_path):
    assert "no table" in one_line_exit_2(rmc("serve", cwd=tmp_path, timeout=60))
    assert "cannot read" in one_line_exit_2(rmc("serve", "--config", "nosuch.toml", cwd=tmp_path))
    assert "ID=VALUE" in one_line_exit_2(rmc("serve", "--table", "T01", cwd=tmp_path))
    p = rmc("serve", "--table", "T01=loop://", "--key-file", "T02=k", cwd=tmp_path)
    assert "no such table" in one_line_exit_2(p)


def test_serve_on_an_address_in_use_or_an_unreachable_database(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = rmc("serve", "--table", "T01=loop://", "--db", f"sqlite:///{tmp_path}/a.db",
                "--http", f"127.0.0.1:{port}", cwd=tmp_path, timeout=60)  # fmt: skip
        assert "cannot listen" in one_line_exit_2(p)
    p = rmc("serve", "--table", "T01=loop://", "--db", "postgresql://rmc@127.0.0.1:1/rmc",
            "--http", "127.0.0.1:0", cwd=tmp_path, timeout=60)  # fmt: skip
    assert "database" in one_line_exit_2(p)


def test_table_command_refusals_are_one_line(tmp_path):
    tok = tmp_path / "t"
    tok.write_text("x" * 20)
    p = rmc("table", "T01", "last3", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert "no token" in one_line_exit_2(p)
    p = rmc("table", "T01", "last3", "--token-file", "nosuch", cwd=tmp_path)
    assert "cannot read token file" in one_line_exit_2(p)
    p = rmc("table", "T01", "last3", "--token-file", str(tok), "--server", "ftp://x")
    assert "http://" in one_line_exit_2(p)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        p = rmc("table", "T01", "last3", "--token-file", str(tok),
                "--server", f"http://127.0.0.1:{port}")  # fmt: skip
        assert "cannot reach" in one_line_exit_2(p)


@pytest.fixture
def idle_service(tmp_path):
    """The service with a table whose port does not answer: the API works all the same."""
    tokens = Tokens.make(tmp_path / "tokens")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"socket://127.0.0.1:{s.getsockname()[1]}"
    served = Served(tmp_path, dead, f"sqlite:///{tmp_path / 'rmc.db'}", tokens, key=False)
    served.start()
    yield served
    assert served.stop() == 0


def test_a_table_out_of_reach_is_reported_and_commands_say_so(idle_service, tmp_path):
    served = idle_service
    chef = served.client("chef")
    t = wait_for(lambda: (x := chef.table("T01"))["link"]["error"] and x, 30, "the link error")
    assert t["link"]["connected"] is False and "cannot open" in t["link"]["error"]
    with pytest.raises(ClientError) as e:
        chef.command("T01", "last3")
    assert e.value.status == 503 and "not connected" in str(e.value)
    # the command line says the same in one line, exit 2
    p = rmc("table", "T01", "last3", "--token-file", served.tokens.names["chef"],
            "--server", served.url)  # fmt: skip
    assert "not connected" in one_line_exit_2(p)
    # arguments checked before anything goes to the table
    with pytest.raises(ClientError) as e:
        chef.command("T01", "open", {"chef": "[bold]x[/bold]" * 10})
    assert e.value.status == 400 and "longer than" in str(e.value)
    with pytest.raises(ClientError) as e:
        chef.command("T01", "open", {"chef": "a\nb"})
    assert e.value.status == 400
    eng = served.client("engineer")
    with pytest.raises(ClientError) as e:
        eng.command("T01", "set", {"key": "nosuch", "value": 3})
    assert e.value.status == 400 and "no threshold" in str(e.value)
    with pytest.raises(ClientError) as e:
        chef.command("T01", "set", {"key": "min_revs", "value": 6})
    assert e.value.status == 403
    with pytest.raises(ClientError) as e:
        chef.command("T02", "last3")
    assert e.value.status == 404
    with pytest.raises(ClientError) as e:
        chef.command("T01", "explode")
    assert e.value.status == 404
    with pytest.raises(ClientError) as e:
        chef.get("/api/tables/T01/results?last=0")
    assert e.value.status == 422
    with pytest.raises(ClientError) as e:
        Client(served.url, None).get("/api/tables")
    assert e.value.status == 401
    # the status command prints user text literally
    p = rmc("table", "T01", "status", "--token-file", served.tokens.names["display"],
            "--server", served.url)  # fmt: skip
    assert p.returncode == 0 and "not connected" in p.stdout and "T01" in p.stdout


def test_a_table_that_goes_silent_is_reported(tmp_path):
    """A port that opens and then says nothing (a dead board behind a live adapter): the
    link is reported silent, and comes back when the table speaks again."""
    tokens = Tokens.make(tmp_path / "tokens")
    with socket.create_server(("127.0.0.1", 0)) as mute:
        served = Served(
            tmp_path, f"socket://127.0.0.1:{mute.getsockname()[1]}",
            f"sqlite:///{tmp_path / 'rmc.db'}", tokens, key=False,
        ).start()  # fmt: skip
        try:
            conn, _ = mute.accept()
            with conn:
                chef = served.client("display")
                t = wait_for(lambda: (x := chef.table("T01"))["link"]["silent"] and x, 60, "silent")
                assert t["link"]["connected"] is True and t["link"]["last_rx_us"] is None
                from rmcfw.frames import Encoder

                conn.sendall(bytes(Encoder("T01", 1, None).frame("LID", ("locked", 1), ms=5)))
                wait_for(lambda: not chef.table("T01")["link"]["silent"], 30, "heard again")
        finally:
            assert served.stop() == 0


def test_another_address_than_loopback_needs_tls_or_plain_http_asked_for(tmp_path):
    # refused before anything listens: the operators' tokens would cross the network in clear
    p = rmc("serve", "--table", "T01=loop://", "--db", f"sqlite:///{tmp_path}/a.db",
            "--http", "0.0.0.0:0", cwd=tmp_path, timeout=60)  # fmt: skip
    assert "needs TLS" in one_line_exit_2(p)
    p = rmc("serve", "--table", "T01=loop://", "--http", "127.0.0.1:0", "--tls-cert", "c.pem",
            cwd=tmp_path, timeout=60)  # fmt: skip
    assert "both a certificate and its key" in one_line_exit_2(p)
    (tmp_path / "c.pem").write_text("not a certificate\n")
    (tmp_path / "k.pem").write_text("not a key\n")
    p = rmc("serve", "--table", "T01=loop://", "--http", "127.0.0.1:0", "--tls-cert", "c.pem",
            "--tls-key", "k.pem", cwd=tmp_path, timeout=60)  # fmt: skip
    assert "TLS: cannot use" in one_line_exit_2(p)


def _self_signed(folder) -> tuple[str, str]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return str(cert), str(key)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl to make a certificate")
def test_serve_over_tls(tmp_path):
    cert, key = _self_signed(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmc", "serve", "--table", "T01=loop://",
         "--db", f"sqlite:///{tmp_path}/a.db", "--http", "127.0.0.1:0",
         "--tls-cert", cert, "--tls-key", key],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert "listening on https://127.0.0.1:" in line, line + proc.stderr.read()
        url = line.rsplit("listening on ", 1)[1].strip()
        ctx = ssl.create_default_context(cafile=cert)
        with urllib.request.urlopen(f"{url}/api/health", context=ctx, timeout=30) as r:
            assert json.loads(r.read())["database"]["ok"] is True
        # the same port in plain HTTP answers nothing a client could take for the API
        plain = url.replace("https://", "http://")
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(f"{plain}/api/health", timeout=30).read()
    finally:
        proc.terminate()
        proc.wait(30)
