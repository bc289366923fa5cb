"""A table's HMAC key file (hex), as every command and the service read it."""

from __future__ import annotations

from pathlib import Path

from rmc import infile


def read_key(path: str | Path | None) -> bytes | None:
    """The key of a key file (None for no file); ValueError with a clear message when
    unusable."""
    if path is None:
        return None
    from rmc.frames import load_key

    try:
        text = infile.read_text(path, "ascii")
    except OSError as e:
        raise ValueError(f"cannot read key file {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"key file {path} is not hex text") from None
    return load_key(text)
