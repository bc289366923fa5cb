"""Input files named on the command line: read whole, with a bound on what is not a file.

A regular file is read whole, whatever its size. Anything else (a named pipe, a process
substitution, a device such as /dev/zero) is read up to STREAM_MAX bytes: a device that never
ends would otherwise fill the memory instead of giving a reason.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

STREAM_MAX = 256 << 20  # bytes read from what is not a regular file, at most
_CHUNK = 1 << 20


class TooLong(OSError):
    """A stream longer than STREAM_MAX: an OSError, so that callers give its reason as for
    any file that cannot be read."""


def read_bytes(path: Path | str) -> bytes:
    """The file's bytes; OSError (its strerror the reason) when it cannot be read."""
    with open(path, "rb") as f:
        if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return f.read()
        chunks: list[bytes] = []
        size = 0
        while chunk := f.read(_CHUNK):
            size += len(chunk)
            if size > STREAM_MAX:
                raise TooLong(
                    errno.EFBIG,
                    f"not a regular file, and longer than {STREAM_MAX >> 20} MiB: "
                    "write it to a file first",
                )
            chunks.append(chunk)
        return b"".join(chunks)


def read_text(path: Path | str, encoding: str = "utf-8") -> str:
    """The file's text, as Path.read_text gives it (universal newlines), read through
    read_bytes: OSError when it cannot be read, UnicodeDecodeError when it is not `encoding`."""
    text = read_bytes(path).decode(encoding)
    return text.replace("\r\n", "\n").replace("\r", "\n")
