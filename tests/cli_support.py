"""`rmc` run as a user runs it: a process of its own, its exit status, stdout and stderr."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def rmc(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdout=subprocess.PIPE,
    timeout: float = 300,
    **kw,
) -> subprocess.CompletedProcess:
    """`python -m rmc ARGS`; stdout captured unless another file is given."""
    return subprocess.run(
        [sys.executable, "-m", "rmc", *args],
        cwd=cwd,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        timeout=timeout,
        **kw,
    )
