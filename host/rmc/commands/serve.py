"""`rmc serve`: run live tables: every frame into a database, operator commands, an HTTP API.

  rmc serve [--config FILE.toml] [--table ID=URL ...] [--db URL] [--http HOST:PORT]
            [--key-file ID=FILE ...] [--mqtt mqtt://HOST:PORT [--mqtt-prefix PREFIX]]
            [--lease NAME] [--tls-cert PEM --tls-key PEM | --plain-http]
  rmc serve --replay TRACE [--speed X] [--config FILE.toml] [--db URL] [--http HOST:PORT]

One process connects to every table it is given (serial devices, `socket://` URLs such as the
virtual board's UART), checks every frame with the table's key, asks again for every gap, and
keeps each frame once in the database with what the decree's rules derive from it. The
database is a SQLite file under var/ by default, or PostgreSQL by URL
(postgresql://user@host:port/db). The HTTP API listens on 127.0.0.1:8019 by default; with
port 0 the system picks one. The first line printed says where it listens. Operators and
their tokens come from the configuration file (docs/serve.md).
The same address serves three web pages a table: /display/ID (the players' results,
no login), /console/ID and /engineer/ID (an operator's token); docs/pages.md.
--mqtt publishes every frame as received and what the rules find on an MQTT broker, from the
database (QoS 1: a broker away, or the service killed, loses nothing); `rmc subscribe`
verifies them (docs/mqtt.md).
--lease NAME shares the database with other services: each table is served by the one that
holds its lease, and taken over within seconds when that one dies (docs/serve.md).
On an address other than loopback it serves HTTPS (--tls-cert and --tls-key, or tls_cert and
tls_key in the configuration file), or refuses to start: the operators' tokens would cross
the network in clear. --plain-http allows that, for a TLS proxy in front.
Ctrl-C or SIGTERM stops it after the rows received are written. Exit 2 on a configuration,
database or address it cannot use, with a one-line reason.

--replay TRACE plays a recorded trace (rmc record, rmc export, rmc demo) as the one table,
paced as it was received (--speed X: X times faster; 0: at once): the pages and the API show
it as it happened. Its database is a fresh temporary one unless --db is given; the
configuration file gives the operators (and the address), not its tables, its database nor
its MQTT broker.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run live tables: database, operator commands, HTTP API",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE.toml", help="tables, keys, operators, database")
    p.add_argument(
        "--table", action="append", default=[], metavar="ID=URL", help="a table and its port"
    )
    p.add_argument("--db", metavar="URL", help="database URL (default sqlite:///var/rmc.db)")
    p.add_argument("--http", metavar="HOST:PORT", help="where the API listens (127.0.0.1:8019)")
    p.add_argument(
        "--key-file", action="append", default=[], metavar="ID=FILE", help="a table's HMAC key"
    )
    p.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate chain")
    p.add_argument("--tls-key", metavar="PEM", help="... and this private key")
    p.add_argument(
        "--plain-http",
        action="store_true",
        help="allow plain HTTP on an address other than loopback (tokens in clear)",
    )
    p.add_argument("--mqtt", metavar="URL", help="publish on this MQTT broker (docs/mqtt.md)")
    p.add_argument("--mqtt-prefix", metavar="PREFIX", help="its topics' prefix (default rmc)")
    p.add_argument(
        "--lease", metavar="NAME", help="share the database: serve the tables it leases (NAME)"
    )
    p.add_argument("--replay", metavar="TRACE", help="play a recorded trace as the one table")
    p.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="--replay's pace: X times the recorded one (0: at once; default 1)",
    )
    p.set_defaults(func=run)


def _pair(text: str, what: str) -> tuple[str, str]:
    from rmc.serve.config import ConfigError

    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise ConfigError(f"{what} must be ID=VALUE, not {text!r}")
    return name, value


def build_config(args: argparse.Namespace, feed=None, replay_db: str | None = None):
    """The configuration: the file, then the options. With a replay `feed`, its table alone,
    on `replay_db` unless --db is given."""
    from rmc.serve import config as sc

    cfg = sc.load(Path(args.config) if args.config else None)
    if feed is not None:
        if args.table:
            raise sc.ConfigError("--replay serves the trace's table alone: no --table with it")
        cfg.tables = [sc.table_spec(feed.table, feed.url)]
        cfg.db = replay_db or cfg.db
        # a night replayed is not published again as live on the pit's broker (--mqtt may)
        if hasattr(cfg, "mqtt"):
            cfg.mqtt = None
    if args.db:
        cfg.db = args.db
    if args.http:
        cfg.http = args.http
    cfg.tls_cert = args.tls_cert or cfg.tls_cert
    cfg.tls_key = args.tls_key or cfg.tls_key
    cfg.plain_http = args.plain_http or cfg.plain_http
    cfg.mqtt = args.mqtt or cfg.mqtt
    cfg.mqtt_prefix = args.mqtt_prefix or cfg.mqtt_prefix
    cfg.lease = getattr(args, "lease", None) or cfg.lease
    for text in args.table:
        tid, url = _pair(text, "--table")
        known = [t for t in cfg.tables if t.id == tid]
        if known:
            known[0].url = url
        else:
            cfg.tables.append(sc.table_spec(tid, url))
    for text in args.key_file:
        tid, path = _pair(text, "--key-file")
        known = [t for t in cfg.tables if t.id == tid]
        if not known:
            raise sc.ConfigError(f"--key-file {tid}: no such table (give it with --table)")
        known[0].key = sc.read_key(Path(path))
    sc.check(cfg)
    if not cfg.tables:
        raise sc.ConfigError("no table to serve: give --table ID=URL or a --config file")
    return cfg


def run(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from rmc.console import fail
    from rmc.serve.config import ConfigError
    from rmc.serve.store import StoreError

    feed = None
    folder = None
    try:
        if getattr(args, "replay", None):
            from rmc.serve.tracefeed import ReplayError, TraceFeed

            try:
                feed = TraceFeed.open(args.replay, args.speed)
            except ReplayError as e:
                return fail("serve", str(e))
            if not args.db:
                folder = tempfile.mkdtemp(prefix="rmc-replay-")
        db = f"sqlite:///{Path(folder) / 'replay.db'}" if folder else None
        try:
            cfg = build_config(args, feed, db)
            host, port = cfg.host_port
        except ConfigError as e:
            return fail("serve", str(e))
        try:
            return _serve(cfg, host, port, feed)
        except StoreError as e:
            return fail("serve", f"database: {e}")
        except OSError as e:
            return fail("serve", f"cannot listen on {host}:{port}: {e.strerror or e}")
    finally:
        if feed is not None:
            feed.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


class _Stopped(Exception):
    pass


def _stop(sig, frame) -> None:
    raise _Stopped


def _serve(cfg, host: str, port: int, feed=None) -> int:
    import signal

    from rmc.serve.service import Service

    # The socket is bound here, before anything starts: a port in use is one clear line.
    sock = _bound_socket(host, port)
    # a SIGTERM before uvicorn takes the signals over stops the start cleanly
    signal.signal(signal.SIGTERM, _stop)
    service = Service(cfg)
    try:
        if feed is not None:
            feed.start()
        service.start()
        _say_where(cfg, service, host, sock, feed)
        _run_http(cfg, service, sock)
    except _Stopped:
        pass
    finally:
        service.stop()
        sock.close()
    sys.stdout.flush()
    return 0


def _bound_socket(host: str, port: int):
    """A listening socket on host:port (OSError, the socket closed, when it cannot be)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)  # clients wait in the queue while the service starts
    except OSError:
        sock.close()
        raise
    return sock


def _say_where(cfg, service, host: str, sock, feed) -> None:
    """The first line: where the service listens; a warning for plain HTTP off loopback;
    the trace replayed, if any."""
    import socket

    from rmc.serve.config import is_loopback

    bound = sock.getsockname()[1]
    where = f"[{host}]" if sock.family == socket.AF_INET6 else host
    scheme = "https" if cfg.tls_cert else "http"
    print(
        f"rmc serve: {len(cfg.tables)} table(s), database {service.store.url}, "  # type: ignore[union-attr]
        f"listening on {scheme}://{where}:{bound}",
        flush=True,
    )
    if not cfg.tls_cert and not is_loopback(host):
        from rmc.console import err_console

        err_console().print(
            f"rmc serve: listening on {host} in plain HTTP, as asked: the operators' "
            "tokens cross the network in clear; the display pages need none "
            "(docs/pages.md)"
        )
    if feed is not None:
        print(
            f"rmc serve: replaying {len(feed.lines)} frame(s) of table {feed.table} from "
            f"{cfg.tables[0].url} at speed {feed.speed:g}; display: "
            f"{scheme}://{where}:{bound}/display/{feed.table}",
            flush=True,
        )


def _run_http(cfg, service, sock) -> None:
    """The HTTP API and pages on `sock` until a signal stops them."""
    import uvicorn

    from rmc.serve.api import create_app

    # live event streams never end by themselves: they are cut after 2 s at shutdown
    config = uvicorn.Config(
        create_app(service),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        ssl_certfile=cfg.tls_cert,
        ssl_keyfile=cfg.tls_key,
    )
    _Server(config).run(sockets=[sock])


def _server_class():
    import contextlib
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that a SIGTERM or Ctrl-C only ends the HTTP side: the
        service then writes what it holds and `rmc serve` exits 0 (uvicorn would raise the
        signal again after its own shutdown, and the process would die with it)."""

        @contextlib.contextmanager
        def capture_signals(self):
            sigs = (signal.SIGINT, signal.SIGTERM)
            before = {s: signal.signal(s, self.handle_exit) for s in sigs}
            try:
                yield
            finally:
                for s, h in before.items():
                    signal.signal(s, h)

    return Server


def _Server(config):
    return _server_class()(config)
