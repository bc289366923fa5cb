"""`rmc vboard --pico`: the firmware on an emulated RP2040 (rp2040js) running MicroPython's own
RP2040 build (docs/vpico.md). Not a command of its own: `rmc vboard` hands over to it."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rmc.vboard import VirtualBoardError
from rmc.vpico import VirtualPico, build_image, firmware_files, missing

EXIT_BAD_INPUT = 2


def run_pico(args: argparse.Namespace) -> int:
    for given, what in ((args.sensors, "trace file"), (args.pins, "pin map")):
        if given is not None and not given.is_file():
            print(f"rmc vboard: no {what} {given}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.flash is not None or args.pty:
        print("rmc vboard: --pico takes --image FS.img, not --flash or --pty", file=sys.stderr)
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
        try:
            vp.start()
        except VirtualBoardError as e:
            print(f"rmc vboard: {e}", file=sys.stderr)
            return 1
        from rmc.commands.vboard import serve_until_stopped

        print(f"REPL  {vp.repl_url}   (mpremote connect {vp.repl_url} ...)", flush=True)
        print(f"UART  {vp.uart_url}   (rmc record --port {vp.uart_url})", flush=True)
        print(f"FLASH {image}   (LittleFS image, written as the chip writes)", flush=True)
        return serve_until_stopped(vp)
