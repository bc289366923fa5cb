"""`rmc subscribe URL`: hear the table service's MQTT topics and verify every frame.

  rmc subscribe mqtt://HOST[:PORT][/PREFIX] [--prefix PREFIX] [--table ID ...]
                [--key-file ID=FILE ...] [-o TRACE] [--force] [--client-id ID] [--json]

Every table's frames, as `rmc serve --mqtt` publishes them (docs/mqtt.md), go through the
checks of `rmc check`: CRC, the tag with the table's key (--key-file), numbering and gaps,
duplicates, the decree's rules. A frame published twice (a broker or a service restarted)
is dropped by its (table, boot, seq), and counted. Results are printed as they come, with
their announcement, and so are voids, violations, faults and tamper.

-o writes each table's frames as a trace that `rmc check` reads: `-o night.jsonl` for one
table (the first heard, or --table's), `-o DIR` for DIR/ID.jsonl, `-o 'night-{table}.jsonl'`
for a file each. An existing file is refused unless --force.

The session is persistent (QoS 1): what is published while the broker restarts or the line
is cut waits at the broker. --client-id ID names it, to take it up again in a later run;
without it, the session is the run's own and is dropped at the end.

Ctrl-C or SIGTERM ends it: the traces get their end records and a summary is printed.
Exit 0 when every table heard is clean, 1 when a check failed (or nothing was heard), 2 when
the broker cannot be used (bad URL, unreachable, refused) or a trace cannot be written.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "subscribe",
        help="hear the service's MQTT topics, verify every frame, write a trace",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("url", metavar="URL", help="the broker: mqtt://HOST[:PORT][/PREFIX]")
    p.add_argument("--prefix", metavar="PREFIX", help="the topics' prefix (default rmc)")
    p.add_argument(
        "--table", action="append", default=[], metavar="ID", help="only this table (repeat)"
    )
    p.add_argument(
        "--key-file", action="append", default=[], metavar="ID=FILE", help="a table's HMAC key"
    )
    p.add_argument("-o", "--out", metavar="TRACE", help="FILE, DIR or a pattern with {table}")
    p.add_argument("--force", action="store_true", help="replace existing trace files")
    p.add_argument("--client-id", metavar="ID", help="the session's name, kept at the broker")
    p.add_argument("--json", action="store_true", help="the summary as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from rmc.console import err_console, fail, out_console
    from rmc.serve.mqtt import DEFAULT_PREFIX, MqttError, check_prefix, parse_url
    from rmc.subscribe import OutputError, Subscriber

    try:
        broker = parse_url(args.url)
        prefix = check_prefix(args.prefix or broker.prefix or DEFAULT_PREFIX)
        keys = _keys(args.key_file)
        output = _output(args)
    except (MqttError, OutputError, ValueError) as e:
        return fail("subscribe", str(e))
    con = out_console()
    lock = threading.Lock()

    def show(text: Text) -> None:
        with lock:
            (err_console() if args.json else con).print(text)

    sub = Subscriber(broker, prefix, keys, output, args.table, args.client_id, show)
    refused = _listen(sub, broker, prefix, show)
    if refused:
        return fail("subscribe", refused)
    sub.stop()
    return _report(sub, con, args.json)


def _keys(key_files: list[str]) -> dict[str, bytes]:
    """Each --key-file ID=FILE's key, by table; ValueError for a bad one."""
    from rmc.keys import read_key

    keys = {}
    for text in key_files:
        tid, sep, path = text.partition("=")
        if not sep or not tid or not path:
            raise ValueError(f"--key-file must be ID=FILE, not {text!r}")
        key = read_key(path)
        assert key is not None
        keys[tid] = key
    return keys


def _output(args: argparse.Namespace) -> Any:
    """Where the traces go (None: nowhere); a single file is checked before anything is
    heard (OutputError)."""
    from rmc.subscribe import Output

    output = Output(args.out, args.force) if args.out else None
    if output is not None and "{table}" not in args.out and not Path(args.out).is_dir():
        output.check(Path(args.out))
    return output


def _listen(sub: Any, broker: Any, prefix: str, show: Any) -> str | None:
    """Hear the broker until Ctrl-C or SIGTERM; why it could not be heard (None: heard)."""
    from rich.text import Text

    done = threading.Event()
    before = signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        try:
            sub.start()
        except OSError as e:
            return f"cannot reach broker {broker.where}: {e.strerror or e}"
        if not sub.connected.wait(30):
            sub.stop()
            return f"broker {broker.where} did not answer"
        if sub.refused:
            sub.stop()
            return f"broker {broker.where} refused: {sub.refused}"
        show(Text(f"rmc subscribe: {broker.where}, topics {prefix}/...", "bold"))
        try:
            while not done.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
    finally:
        signal.signal(signal.SIGTERM, before)
    return None


def _report(sub: Any, con: Any, as_json: bool) -> int:
    """Each table's summary; the exit status."""
    from rich.text import Text

    report = sub.finish()
    if as_json:
        print(json.dumps({"tables": report, "errors": sub.errors}))
    else:
        for table, j in report.items():
            _summary(con, table, j)
        if not report:
            con.print(Text("no frame heard", "yellow"))
    if sub.errors:
        return 2
    return 0 if report and all(j["clean"] for j in report.values()) else 1


def _summary(con, table: str, j: dict) -> None:
    from rich.text import Text

    counts = (
        f"{j['valid']} frames, {j['dropped']} duplicates dropped, {len(j['gaps'])} gaps, "
        f"{len(j['results'])} results ({j['service_results']} from the service), "
        f"{len(j['rejected'])} rejected, {len(j['violations'])} violations, "
        f"{len(j['alerts'])} alerts"
    )
    if j["unverified"]:
        counts += f", {j['unverified']} tags not verified (no --key-file)"
    verdict = Text("clean", "green") if j["clean"] else Text("problems found", "red")
    con.print(Text.assemble((table, "bold"), " ", counts, ": ", verdict))
    for b, first, last in j["gaps"]:
        con.print(Text(f"  gap: boot {b}: seq {first}..{last} missing", "yellow"))
    for v in j["violations"]:
        con.print(Text(f"  {v['rule']} at {v['boot']}:{v['seq']}: {v['detail']}", "red"))
    for n in j["mismatches"]:
        con.print(Text(f"  result {n} differs from the service's", "red"))
    if j["trace"]:
        con.print(Text.assemble("  trace: ", j["trace"]))
