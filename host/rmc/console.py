"""The consoles every command prints on: user text is printed literally, never as markup.

A player's name, a file name or a URL may hold square brackets; rich would read them as
markup (a traceback, or text changed). Every console here has markup and highlighting off;
style comes from `rich.text.Text` objects built by the caller, never from user text.
"""

from __future__ import annotations

import json
import os
import sys

from rich.console import Console
from rich.text import Text


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich's own answer is SystemExit(1): a lost output must reach `rmc.cli.main`, which
        # exits 2 and says so
        raise BrokenPipeError(32, "Broken pipe")


def out_console(**kw) -> Console:
    """Standard output, literal. Lines are not folded (soft wrap): a file name or a URL
    stays whole, to be copied; tables still fit the width."""
    kw.setdefault("soft_wrap", True)
    return _Console(markup=False, highlight=False, **kw)


def err_console(**kw) -> Console:
    """Standard error, literal."""
    return _Console(stderr=True, markup=False, highlight=False, soft_wrap=True, **kw)


def fail(command: str, message: str, code: int = 2) -> int:
    """Print `rmc COMMAND: message` in red on stderr, literally; return the exit status."""
    err_console().print(Text(f"rmc {command}: {message}", style="red"))
    return code


def stdout_broken() -> bool:
    """True when standard output cannot take what is written to it: what it holds yet is
    flushed again (a failed flush keeps it), and a closed one refuses even nothing."""
    try:
        sys.stdout.flush()
        os.write(sys.stdout.fileno(), b"")
    except ValueError as e:  # closed, or no file descriptor (a test's capture)
        return "closed" in str(e)
    except OSError:
        return True
    return False


def unusable(command: str, e: OSError | ValueError, as_json: bool, err: Console) -> int:
    """Report input that cannot be used (exit 2): a JSON error object too when asked."""
    msg = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    if as_json:
        print(json.dumps({"error": msg, "usable": False}))
    err.print(Text(f"rmc {command}: {msg}", style="red"))
    return 2
