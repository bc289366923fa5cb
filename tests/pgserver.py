"""A throwaway PostgreSQL server for tests (not a test module).

`PgServer` runs Debian's `initdb` and `pg_ctl` (the `postgresql` package, which `make setup`
installs when missing) on a temporary folder, listening on 127.0.0.1 and a free port, and gives
each caller a fresh database (`new_database()` -> URL). PostgreSQL refuses to run as root: as
root, its programs run as the `postgres` system user. `pg_server` is a session-scoped pytest
fixture (one server per test process, i.e. per xdist worker); it skips, with the reason, when
the binaries are missing. Use it as `request.getfixturevalue("pg_server")`, or import it into
a test module.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

START_TIMEOUT_S = 60.0
USER = "rmc"


def _version_key(path: str) -> tuple[int, ...]:
    # /usr/lib/postgresql/15/bin -> (15,)
    parts = Path(path).parent.name.split(".")
    return tuple(int(p) for p in parts if p.isdigit())


def find_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl: on PATH, else the newest
    /usr/lib/postgresql/*/bin."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl and Path(initdb).parent == Path(pg_ctl).parent:
        return Path(initdb).parent
    found = [
        d
        for d in glob.glob("/usr/lib/postgresql/*/bin")
        if os.access(os.path.join(d, "initdb"), os.X_OK)
        and os.access(os.path.join(d, "pg_ctl"), os.X_OK)
    ]
    return Path(max(found, key=_version_key)) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """A PostgreSQL server in a temporary folder; a context manager."""

    def __init__(self) -> None:
        self.bindir: Path | None = None
        self.folder: Path | None = None
        self.port: int | None = None
        self._names = itertools.count(1)
        self._as: list[str] = []  # prefix that runs a program as the postgres user

    @staticmethod
    def missing_reason() -> str | None:
        """Why no server can be started here, or None."""
        if find_bindir() is None:
            return (
                "PostgreSQL not installed: no initdb/pg_ctl on PATH nor in "
                "/usr/lib/postgresql/*/bin (`make setup` installs Debian's postgresql)"
            )
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return "psycopg (3) is not installed"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no `postgres` user to run PostgreSQL as"
            if not (shutil.which("runuser") or shutil.which("setpriv")):
                return "running as root and neither runuser nor setpriv is there"
        return None

    # --- life ---

    def start(self) -> PgServer:
        reason = self.missing_reason()
        if reason:
            raise RuntimeError(reason)
        self.bindir = find_bindir()
        self.folder = Path(tempfile.mkdtemp(prefix="rmc-pg-"))
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.folder, pw.pw_uid, pw.pw_gid)
            if shutil.which("runuser"):
                self._as = ["runuser", "-u", "postgres", "--"]
            else:
                self._as = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}",
                            "--init-groups"]  # fmt: skip
        try:
            self._run(
                "initdb", "-D", str(self.data), "-A", "trust", "-U", USER, "--no-sync",
                "-E", "UTF8", "--locale=C",
            )  # fmt: skip
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def data(self) -> Path:
        assert self.folder is not None
        return self.folder / "data"

    def _run(self, program: str, *args: str, timeout: float = 120) -> None:
        assert self.bindir is not None and self.folder is not None
        cmd = [*self._as, str(self.bindir / program), *args]
        # cwd: a folder the postgres user can enter
        p = subprocess.run(
            cmd, cwd=self.folder, capture_output=True, text=True, timeout=timeout, check=False
        )
        if p.returncode:
            out = (p.stderr or p.stdout).strip()
            raise RuntimeError(f"{program} failed ({p.returncode}): {out}")

    def _start(self, port: int | None = None) -> None:
        assert self.folder is not None
        last = ""
        for _attempt in range(1 if port else 5):  # a free port may be taken before start
            port = port or _free_port()
            log = self.folder / f"log-{port}"
            opts = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {self.folder} -c fsync=off "
                "-c full_page_writes=off"
            )
            try:
                self._run(
                    "pg_ctl", "start", "-D", str(self.data), "-l", str(log), "-w",
                    "-t", str(int(START_TIMEOUT_S)), "-o", opts,
                    timeout=START_TIMEOUT_S + 30,
                )  # fmt: skip
            except RuntimeError as e:
                last = f"{e}; log: {_tail(log)}"
                port = None
                continue
            self.port = port
            self._wait_ready()
            return
        raise RuntimeError(f"PostgreSQL did not start: {last}")

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with psycopg.connect(self._dsn("postgres"), connect_timeout=5):
                    return
            except psycopg.OperationalError as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL does not accept connections: {e}") from e
                time.sleep(0.1)

    def kill(self) -> None:
        """Stop the server at once (as a crash would), keeping its data: `restart()` brings it
        back on the same port."""
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", timeout=60)

    def restart(self) -> None:
        assert self.port is not None
        self._start(self.port)

    def stop(self) -> None:
        if self.folder is None:
            return
        if self.port is not None and (self.data / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w",
                          timeout=60)  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = self.port = None

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- databases ---

    def _dsn(self, db: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={db}"

    def url(self, db: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL (postgresql://rmc@127.0.0.1:PORT/NAME)."""
        import psycopg

        name = f"rmc_test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self._dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def pg_server():
    """A running throwaway PostgreSQL for the whole test session; skipped, with the reason,
    where PostgreSQL is not installed."""
    reason = PgServer.missing_reason()
    if reason:
        pytest.skip(reason)
    with PgServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> str:
    """A database URL: the same test on the embedded default and on a throwaway PostgreSQL
    database (import `pg_server` beside it)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'rmc.db'}"
    return request.getfixturevalue("pg_server").new_database()
