"""`rmc vboard`: run the virtual board, the firmware on MicroPython's WebAssembly port; with
`--pico`, on an emulated RP2040 running MicroPython's own RP2040 build (docs/vpico.md)."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from rmc.vboard import VirtualBoard, VirtualBoardError
from rmc.vpico import (
    BLOCK_COUNT,
    BLOCK_SIZE,
    VirtualPico,
    build_image,
    firmware_files,
    missing,
)

EXIT_BAD_INPUT = 2


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {n}")
    return n


def _speed(text: str) -> float:
    if text == "max":
        return 0.0
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a speed: {text!r}") from None
    if not x >= 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"speed must be 0 (max) or a positive factor: {text}")
    return x


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "vboard",
        help="run the virtual board: firmware on WebAssembly MicroPython, REPL for mpremote",
        description="Serve a virtual table controller on loopback sockets: its REPL (use "
        "`mpremote connect socket://127.0.0.1:PORT ...`) and its frame UART (use `rmc record "
        "--port socket://127.0.0.1:PORT`). Runs until interrupted (Ctrl-C).",
    )
    p.add_argument("--repl-port", type=_port, default=0, help="REPL port (default: any free)")
    p.add_argument("--uart-port", type=_port, default=0, help="frame UART port (default: any)")
    p.add_argument(
        "--sensors", metavar="TRACE.jsonl", type=Path, help="sensor edges played from power-up"
    )
    p.add_argument(
        "--speed",
        type=_speed,
        default=0.0,
        help="virtual seconds per wall second: 1 = real time, 0 or 'max' = as fast as it goes",
    )
    p.add_argument("--flash", metavar="DIR", type=Path, help="folder keeping the flash image")
    p.add_argument("--pins", metavar="PINS.json", type=Path, help="pin map (default: Pico)")
    p.add_argument("--pty", action="store_true", help="also serve the REPL on a pseudo-terminal")
    p.add_argument(
        "--pico",
        action="store_true",
        help="an emulated RP2040 (rp2040js) running MicroPython's own RP2040 build instead "
        "(docs/vpico.md); the emulated chip's own clock, --speed and --pty do not apply",
    )
    p.add_argument(
        "--image",
        metavar="FS.img",
        type=Path,
        help="with --pico: the flash file system's LittleFS image, kept between runs "
        "(created with the firmware, as make deploy puts it, when missing)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for given, what in ((args.sensors, "trace file"), (args.pins, "pin map")):
        if given is not None and not given.is_file():
            print(f"rmc vboard: no {what} {given}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.pico or args.image is not None:
        return _run_pico(args)
    vb = VirtualBoard(
        sensors=args.sensors,
        speed=args.speed,
        flash=args.flash,
        repl_port=args.repl_port,
        uart_port=args.uart_port,
        pins=args.pins,
        pty=args.pty,
    )
    return _serve(vb)


def _run_pico(args: argparse.Namespace) -> int:
    if args.flash is not None or args.pty:
        print("rmc vboard: --pico takes --image FS.img, not --flash or --pty", file=sys.stderr)
        return EXIT_BAD_INPUT
    bad = _bad_image(args.image)
    if bad:
        print(f"rmc vboard: --image {args.image}: {bad}", file=sys.stderr)
        return EXIT_BAD_INPUT
    why = missing()
    if why:
        print(f"rmc vboard: the virtual Pico cannot run: {why}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="rmc-vpico-") as tmp:
        image = args.image
        try:
            if image is None or not image.exists():
                # the firmware as `make deploy` puts it, on a fresh file system
                image = build_image(
                    image or Path(tmp) / "flash.img", firmware_files(Path(tmp) / "fw")
                )
        except (OSError, RuntimeError) as e:
            print(f"rmc vboard: cannot build the flash image: {e}", file=sys.stderr)
            return 1
        vp = VirtualPico(
            image=image,
            sensors=args.sensors,
            pins=args.pins,
            repl_port=args.repl_port,
            uart_port=args.uart_port,
        )
        return _serve(vp, f"FLASH {image}   (LittleFS image, written as the chip writes)")


def _bad_image(image: Path | None) -> str:
    """Why a flash image given cannot be used (empty: it can, or it is made when missing)."""
    if image is None:
        return ""
    if not image.exists():
        return "" if image.parent.is_dir() else f"no folder {image.parent}"
    if not image.is_file():
        return "not a file"
    size = image.stat().st_size
    if size != BLOCK_SIZE * BLOCK_COUNT:
        return f"{size:,} bytes, not a flash image of {BLOCK_SIZE * BLOCK_COUNT:,}"
    return ""


def _serve(vb: VirtualBoard, also: str = "") -> int:
    """Start the board, print where to reach it, and serve it until stopped."""
    try:
        vb.start()
    except VirtualBoardError as e:
        print(f"rmc vboard: {e}", file=sys.stderr)
        return 1
    print(f"REPL  {vb.repl_url}   (mpremote connect {vb.repl_url} ...)", flush=True)
    print(f"UART  {vb.uart_url}   (rmc record --port {vb.uart_url})", flush=True)
    if vb.repl_pty:
        print(f"PTY   {vb.repl_pty}   (mpremote connect {vb.repl_pty} ...)", flush=True)
    if also:
        print(also, flush=True)
    return serve_until_stopped(vb)


def serve_until_stopped(vb: VirtualBoard) -> int:
    """Print the board's events until Ctrl-C or SIGTERM, then stop it."""
    # Stop cleanly on SIGTERM and on SIGINT even when started in the background (SIGINT
    # ignored): vb.stop() saves the flash and ends the node process.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    seen = 0
    try:
        while vb.running:
            vb.wait_event("exit", timeout=0.5)
            for ev in vb.events[seen:]:
                if ev.get("event") in ("boot", "reset", "power", "irq_error", "crash"):
                    print(_describe(ev), flush=True)
            seen = len(vb.events)
    except KeyboardInterrupt:
        pass
    finally:
        vb.stop()
    return 0


def _describe(ev: dict) -> str:
    t = ev.get("t_us", 0) / 1e6
    rest = ", ".join(f"{k}={v}" for k, v in ev.items() if k not in ("event", "t_us"))
    return f"[{t:10.3f} s] {ev['event']}: {rest}"
