"""A table's HMAC key file (hex), as every command and the service read it."""

from __future__ import annotations

from pathlib import Path


def read_key(path: str | Path | None) -> bytes | None:
    """The key of a key file (None for no file); ValueError with a clear message when
    unusable."""
    if path is None:
        return None
    from rmc.frames import load_key

    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read key file {path}: {e}") from None
    return load_key(text)
