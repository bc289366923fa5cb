"""`rmc rig`: the hardware-in-the-loop rig (docs/rig.md).

rmc rig selftest --rig RIG.json            drive each line, read it back through the board
rmc rig play TRACE --rig RIG.json          play a trace into the board, compare with truth
rmc rig virtual TRACE                      the same against the virtual board (no hardware)
rmc rig jitter --host HOST                 timing of the Blinka path (and the generator)
rmc rig deploy-pulsegen --port URL         copy firmware/pulsegen/ to the generator Pico
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from rmc import FIRMWARE_DIR, HARDWARE_DIR, infile
from rmc.console import fail, out_console
from rmc.rig import edges as edgemod
from rmc.rig import pins as pinmod
from rmc.rig.backends import RigError
from rmc.rig.compare import Comparison, Tolerances
from rmc.trace import Trace, TraceError, read_trace

EXIT_FAIL = 1
EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rig",
        help="hardware-in-the-loop rig: self-test, play traces into a board, timing",
        description="Drive a table board's sensor harness from a trace (Blinka GPIO, MCP23017 "
        "expanders, a pulse-generator Pico), read its frames and compare them with the "
        "trace's ground truth. See docs/rig.md.",
    )
    rs = p.add_subparsers(dest="rig_command", metavar="ACTION")
    rs.required = True

    s = rs.add_parser("selftest", help="check the rig's wiring through the board")
    s.add_argument("--rig", required=True, metavar="RIG.json", help="rig configuration")
    s.add_argument("--repl", metavar="URL", help="board REPL (default: board_repl of --rig)")
    s.add_argument("--json", action="store_true", help="JSON report on stdout")
    s.set_defaults(func=_selftest)

    pl = rs.add_parser("play", help="play a trace into the board and compare with its truth")
    pl.add_argument("trace", metavar="TRACE.jsonl")
    pl.add_argument("--rig", required=True, metavar="RIG.json", help="rig configuration")
    pl.add_argument("--port", metavar="URL", help="frame line (default: frame_port of --rig)")
    _play_options(pl)
    pl.set_defaults(func=_play)

    v = rs.add_parser("virtual", help="play a trace into the virtual board (no hardware)")
    v.add_argument("trace", metavar="TRACE.jsonl")
    v.add_argument("--speed", type=float, default=5.0, help="virtual seconds per second")
    _play_options(v)
    v.set_defaults(func=_virtual)

    j = rs.add_parser("jitter", help="measure the timing of the rig's paths")
    j.add_argument("--host", default="os_agnostic", choices=pinmod.HOSTS)
    j.add_argument("--line", default="ball_a", choices=pinmod.PULSE_LINES)
    j.add_argument("--edges", type=int, default=2000)
    j.add_argument("--period-us", type=int, default=2000)
    j.add_argument("--spin-us", type=int, default=300, help="busy-wait before each edge")
    j.add_argument("--pulsegen", metavar="URL", help="also time the pulse generator there")
    j.add_argument("--json", action="store_true")
    j.set_defaults(func=_jitter)

    d = rs.add_parser("deploy-pulsegen", help="copy the pulse generator firmware with mpremote")
    d.add_argument("--port", required=True, metavar="URL", help="the generator Pico")
    d.set_defaults(func=_deploy)


def _play_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--record", metavar="OUT.jsonl", help="write the run as a trace")
    p.add_argument("--start", type=float, default=0.0, metavar="S", help="from S seconds")
    p.add_argument("--end", type=float, metavar="S", help="up to S seconds")
    p.add_argument("--key", metavar="KEYFILE", help="the table's HMAC key file")
    p.add_argument("--rnvp-late-ms", type=float, default=Tolerances.rnvp_late_ms)
    p.add_argument("--json", action="store_true", help="JSON report on stdout")


def _err(msg: str) -> int:
    return fail("rig", msg, EXIT_BAD_INPUT)


def _ok(ok: bool, yes: str, no: str) -> Text:
    return Text(yes, style="green") if ok else Text(no, style="red")


def _key(path: str | None) -> bytes | None:
    if path is None:
        return None
    from rmc.frames import load_key

    try:
        return load_key(infile.read_text(path, "ascii"))
    except ValueError as e:  # not hex, not ASCII: one line of reason, not a traceback
        raise RigError(f"--key {path}: {e}") from None


# --- selftest ---


def _selftest(args: argparse.Namespace) -> int:
    from rmc.rig.config import load_config, open_rig
    from rmc.rig.selftest import open_mpremote_probe, selftest

    try:
        cfg = load_config(args.rig)
        url = args.repl or cfg.board_repl
        if not url:
            return _err("no board REPL: give --repl or board_repl in the rig config")
        with open_rig(cfg) as rig:
            probe = open_mpremote_probe(url, pinmod.board_pins(cfg.board_pins))
            try:
                rep = selftest(rig.routes, probe, rig.pins.levels)
            finally:
                probe.close()
    except (RigError, pinmod.PinMapError, OSError) as e:
        return _err(str(e))
    if args.json:
        print(json.dumps(rep.to_json(), indent=2))
    else:
        t = Table(title="rig self-test", box=box.SIMPLE_HEAD, title_justify="left")
        t.add_column("line")
        t.add_column("ok")
        t.add_column("detail")
        for c in rep.checks:
            t.add_row(Text(c.line), _ok(c.ok, "yes", "NO"), Text(c.detail))
        con = out_console()
        con.print(t)
        for p in rep.idle_problems:
            con.print(Text.assemble(("idle:", "red"), f" {p}"))
        con.print(Text.assemble(_ok(rep.ok, "wiring OK", "wiring FAULTY"), f" ({rep.reads} reads)"))
    return 0 if rep.ok else EXIT_FAIL


# --- play ---


def _read_whole(path: str) -> Trace:
    """The trace to play, refused when damaged or cut: its truth would not be the sensors'."""
    trace = read_trace(path)
    if trace.errors:
        more = f" (and {len(trace.errors) - 2} more)" if len(trace.errors) > 2 else ""
        raise TraceError(
            f"{path} is damaged, not played: "
            + "; ".join(trace.errors[:2])
            + more
            + " (rmc check tells more)"
        )
    return trace


def _play(args: argparse.Namespace) -> int:
    from rmc.rig.config import load_config, open_rig
    from rmc.rig.link import open_port
    from rmc.rig.run import Rig

    try:
        trace = _read_whole(args.trace)
        cfg = load_config(args.rig)
        url = args.port or cfg.frame_port
        if not url:
            return _err("no frame port: give --port or frame_port in the rig config")
        start = round(args.start * 1e6)
        end = None if args.end is None else round(args.end * 1e6)
        initial = edgemod.state_at(edgemod.from_trace(trace), start)
        tol = Tolerances(rnvp_late_ms=args.rnvp_late_ms)
        with open_rig(cfg, initial) as rig:
            port = open_port(url, cfg.frame_baud, timeout=0.02)
            try:
                result = Rig(
                    rig.routes, rig.pins.levels, rig.pulsegen, tolerances=tol, table=cfg.table
                ).run(trace, port, args.record, start, end, key=_key(args.key))
            finally:
                port.close()
    except (TraceError, RigError, edgemod.EdgeError, pinmod.PinMapError, OSError) as e:
        return _err(str(e))
    return _report(result.comparison, result.play.lateness.summary(), args.json, result.notes)


def _virtual(args: argparse.Namespace) -> int:
    from rmc.rig.virtual import VirtualRig, firmware_flash, initial_records
    from rmc.vboard import VirtualBoard, VirtualBoardError

    try:
        trace = _read_whole(args.trace)
        if args.start or args.end is not None:
            return _err("--start/--end are for hardware runs; the virtual board plays it all")
        tol = Tolerances(rnvp_late_ms=args.rnvp_late_ms)
        with tempfile.TemporaryDirectory(prefix="rmc-rig-") as tmp:
            flash = firmware_flash(Path(tmp) / "flash")
            init = Path(tmp) / "initial.jsonl"
            init.write_text(
                "\n".join(json.dumps(r) for r in [trace.header, *initial_records(trace)]) + "\n"
            )
            with VirtualBoard(flash=flash, speed=args.speed, sensors=init) as vb:
                result = VirtualRig(vb, tolerances=tol).run(trace, args.record, _key(args.key))
    except (TraceError, RigError, edgemod.EdgeError, VirtualBoardError, OSError) as e:
        return _err(str(e))
    return _report(result.comparison, None, args.json, result.notes)


def _report(
    cmp: Comparison, lateness: dict[str, float] | None, as_json: bool, notes: list[str]
) -> int:
    if as_json:
        out = cmp.to_json()
        out["lateness"] = lateness
        out["notes"] = notes
        print(json.dumps(out, indent=2))
        return 0 if cmp.ok else EXIT_FAIL
    t = Table(title="board against ground truth", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("spin", "expected", "board", "rnvp − drop (ms)", "problems"):
        t.add_column(col)
    for s in cmp.spins:
        lead = "–"
        if s.rnvp_ms is not None and s.drop_ms is not None:
            lead = f"{s.rnvp_ms - s.drop_ms:+.0f}"
        t.add_row(
            str(s.spin),
            Text(s.expected),
            Text(", ".join(s.got) or "–"),
            lead,
            _ok(s.ok, "ok", "; ".join(s.problems)),
        )
    con = out_console()
    con.print(t)
    con.print(f"faults: {cmp.faults_matched}/{cmp.faults_expected} matched")
    if cmp.rnvp_asked:
        con.print(
            f"« rien ne va plus » within the lead tolerance: {cmp.rnvp_within}/{cmp.rnvp_asked}"
        )
    if lateness:
        con.print(
            f"player lateness: median {lateness['p50_us']:.0f} µs, p99 {lateness['p99_us']:.0f} µs,"
            f" max {lateness['max_us']:.0f} µs over {lateness['n']:.0f} instants"
        )
    if not cmp.checker_clean:
        con.print(
            Text.assemble(
                ("frame stream not clean", "red"), " (rmc check on the recording tells why)"
            )
        )
    for p in [*cmp.problems, *notes]:
        con.print(Text(p, style="red"))
    con.print(_ok(cmp.ok, "PASS", "FAIL"))
    return 0 if cmp.ok else EXIT_FAIL


# --- jitter ---


def _jitter(args: argparse.Namespace) -> int:
    from rmc.rig.backends import open_blinka
    from rmc.rig.jitter import measure

    try:
        pins = pinmod.load(args.host)
        init = {ln: pins.levels.level(ln, 0) for ln in pinmod.ALL_LINES}
        out = open_blinka(pins, init, pulses=True, pockets=False)
        try:
            r = measure(
                out, args.line, pins.levels, args.edges, args.period_us, args.spin_us, "blinka"
            )
        finally:
            out.close()
        gen = _pulsegen_jitter(args) if args.pulsegen else None
    except (RigError, pinmod.PinMapError, OSError, ValueError) as e:
        return _err(str(e))
    data: dict[str, Any] = {
        "path": r.path,
        "host": args.host,
        "line": r.line,
        "edges": r.edges,
        "period_us": r.period_us,
        "lateness": r.lateness,
        "write": r.write,
        "pulsegen": gen,
    }
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    t = Table(title=f"rig timing ({args.host})", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("path", "n", "median µs", "p90 µs", "p99 µs", "max µs"):
        t.add_column(col, justify="right")
    for name, s in (("Blinka: lateness", r.lateness), ("Blinka: write", r.write)):
        t.add_row(
            name,
            f"{s['n']:.0f}",
            *(f"{s[k]:.1f}" for k in ("p50_us", "p90_us", "p99_us", "max_us")),
        )
    if gen:
        t.add_row(
            "pulse generator",
            str(gen["played"]),
            f"{gen['late_mean_us']:.1f} (mean)",
            "",
            "",
            str(gen["late_max_us"]),
        )
    out_console().print(t)
    return 0


def _pulsegen_jitter(args: argparse.Namespace) -> dict[str, Any]:
    from rmc.rig.jitter import square_wave
    from rmc.rig.link import open_port
    from rmc.rig.pulsegen import PulseGen

    port = open_port(args.pulsegen, timeout=0.1)
    try:
        gen = PulseGen(port)
        gen.load(square_wave(args.line, args.edges, args.period_us), 0)
        gen.go(100_000)
        return gen.finish(timeout=args.edges * args.period_us / 2e6 + 30).__dict__
    finally:
        port.close()


# --- deploy ---


def _deploy(args: argparse.Namespace) -> int:
    mpremote = Path(sys.executable).with_name("mpremote")
    exe = str(mpremote) if mpremote.exists() else "mpremote"
    src = FIRMWARE_DIR / "pulsegen"
    steps = [
        ["mkdir", ":pulsegen"],
        *(
            ["cp", str(f), f":pulsegen/{f.name}"]
            for f in sorted(src.glob("*.py"))
            if f.name != "main.py"
        ),
        ["cp", str(src / "main.py"), ":main.py"],
        ["cp", str(HARDWARE_DIR / "rig_pins.json"), ":rig_pins.json"],
        ["soft-reset"],
    ]
    for i, step in enumerate(steps):
        proc = subprocess.run(
            [exe, "connect", args.port, *step], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0 and not (i == 0 and "EEXIST" in proc.stdout + proc.stderr):
            return _err(f"mpremote {' '.join(step)}: {proc.stdout}{proc.stderr}")
    out_console().print(f"pulse generator deployed to {args.port}")
    return 0
