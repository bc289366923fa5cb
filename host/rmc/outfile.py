"""Output files named on the command line (`-o`, `--laps`, `--plot`): checked before any
work, then written whole or not at all.

A file is written beside its target under a temporary name, and renamed onto the target
once complete. So a full disk, an error or Ctrl-C never leaves half a file where a good one
was. A target that is no regular file (/dev/null, /dev/full, a named pipe) cannot be renamed
onto: it is written in place.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class OutputError(Exception):
    """The output cannot be written: a one-line reason, naming the file."""


def reason(path: Path | str, e: OSError) -> str:
    return f"cannot write {path}: {e.strerror or e}"


def check(path: Path | str, force: bool = True) -> Path:
    """The target, refused (OutputError) when it cannot be written: a folder, a missing
    folder, a file or folder without permission, an existing file without `force`."""
    p = Path(os.path.realpath(path))  # through a symlink, onto the file it names
    if p.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder")
    parent = p.parent
    if not parent.is_dir():
        raise OutputError(f"cannot write {path}: No such file or directory (its folder)")
    if p.exists():
        if not force:
            raise OutputError(f"{path} exists: give --force to replace it")
        # a rename would replace a read-only file: its mode is honoured, for root too
        if not os.access(p, os.W_OK) or (p.is_file() and not p.stat().st_mode & 0o222):
            raise OutputError(f"cannot write {path}: permission denied (read-only)")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {path}: permission denied in {parent}")
    return p


def _mode(p: Path) -> int:
    """The mode the written file gets: the replaced file's, or what `open` would give."""
    try:
        return stat.S_IMODE(p.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def replacing(path: Path | str, force: bool = True) -> Iterator[Path]:
    """Yield the path to write instead of `path`; once the block ends without an error it
    becomes `path`. An OSError, in the block or in the renaming, comes out as OutputError;
    any error leaves `path` as it was and no temporary file behind."""
    p = check(path, force)
    if p.exists() and not p.is_file():
        try:
            yield p
        except OSError as e:
            raise OutputError(reason(path, e)) from None
        return
    mode = _mode(p)
    try:
        # the suffix stays last: a writer may choose the format by it (matplotlib)
        fd, name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=f".part{p.suffix}")
        os.close(fd)
    except OSError as e:
        raise OutputError(reason(path, e)) from None
    tmp = Path(name)
    try:
        yield tmp
        _sync(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except OSError as e:
        raise OutputError(reason(path, e)) from None
    finally:
        tmp.unlink(missing_ok=True)


def _sync(path: Path) -> None:
    # a full disk may show only when the data goes to it: before the good file is replaced
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
