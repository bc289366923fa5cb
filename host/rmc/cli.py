"""The `rmc` command: one entry point, one sub-command per job.

Each sub-command lives in its own module, which defines `register(subparsers)`; the module
adds its parser and sets `func` (taking the parsed arguments, returning an exit status).
Modules are imported only when listed here, so adding a command is one line.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys

# The sub-commands' modules, in the order `rmc --help` shows them.
COMMANDS: list[str] = [
    "rmc.commands.settle",
    "rmc.commands.check",
    "rmc.commands.import_slingshot",
    "rmc.commands.record",
    "rmc.commands.export",
    "rmc.commands.replay",
    "rmc.commands.serve",
    "rmc.commands.table",
    "rmc.commands.subscribe",
    "rmc.commands.sim",
    "rmc.commands.rnvp",
    "rmc.commands.edge",
    "rmc.commands.stats",
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
        code = int(args.func(args) or 0)
        # Flushed here, not at the interpreter's exit: a full disk or a reader gone shows
        # now, while the command can still say so and fail.
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:
        # a plain rich console ends the program on a broken pipe (exit 1): the output is lost
        if isinstance(e.__context__, BrokenPipeError):
            return _lost_output(args.command, e.__context__)
        raise
    except OSError as e:
        if isinstance(e, BrokenPipeError) or (e.filename is None and e.errno in _WRITE_ERRORS):
            return _lost_output(args.command, e)
        raise


# what a write to a full disk, a device or a pipe with no reader fails with
_WRITE_ERRORS = {errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT}


def _lost_output(command: str, e: OSError) -> int:
    """A write failed: say so on stderr, exit 2. When standard output is what failed, it is
    pointed at /dev/null, so that the interpreter's last flush prints no second error."""
    from rmc.console import fail, stdout_broken

    why = e.strerror or str(e)
    # a broken pipe is standard output's: the only pipe a command writes to
    if isinstance(e, BrokenPipeError) or stdout_broken():
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return fail(command, f"cannot write standard output: {why}")
    return fail(command, f"cannot write: {why}")
