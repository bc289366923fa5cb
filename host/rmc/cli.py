"""The `rmc` command: one entry point, one sub-command per job.

Each sub-command lives in its own module, which defines `register(subparsers)`; the module
adds its parser and sets `func` (taking the parsed arguments, returning an exit status).
Modules are imported only when listed here, so adding a command is one line.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# (module, help) in the order `rmc --help` shows them.
COMMANDS: list[str] = [
    "rmc.commands.settle",
    "rmc.commands.check",
    "rmc.commands.import_slingshot",
    "rmc.commands.record",
    "rmc.commands.replay",
    "rmc.commands.sim",
    "rmc.commands.rnvp",
    "rmc.commands.vboard",
    "rmc.commands.rig",
    "rmc.commands.demo",
]


def build_parser() -> argparse.ArgumentParser:
    from rmc import __version__

    parser = argparse.ArgumentParser(
        prog="rmc",
        description="Host tools for the Roulette Monte-Carlo table (A.M. n° 2019-819).",
    )
    parser.add_argument("--version", action="version", version=f"rmc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
