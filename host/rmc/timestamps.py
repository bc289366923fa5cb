"""Instants as the host's clock gives them: whole microseconds since the Unix epoch, UTC.

The table service stores every frame's receive time as such an integer (`rx_us`); a trace
holds it in milliseconds (`rx_ms`, three decimals). People give an instant as ISO 8601 text
with its offset (`2024-05-01T21:30:00+02:00`, `...Z`) or as seconds since the epoch
(`1714591800`, `1714591800.25`). A time without an offset is refused: read as UTC or as the
machine's local time, a casino's evening could move by an hour or two in silence, and with it
which bets came before « rien ne va plus ».
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
# seconds since the epoch: ASCII digits, an optional point and up to six decimals (a µs)
_SECONDS = re.compile(r"(0|[1-9][0-9]{0,11})(?:\.([0-9]{1,6}))?", re.ASCII)
MAX_TEXT = 64  # no instant is spelt longer


class InstantError(ValueError):
    """Text that names no instant: the one-line reason."""


def parse_instant(value: object, what: str = "time") -> int:
    """Microseconds since the epoch from ISO 8601 text with an offset, or from seconds since
    the epoch (text of digits, a JSON integer, or an exact JSON decimal); InstantError."""
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise InstantError(
            f"{what} must be ISO 8601 text with its offset or seconds since the epoch, "
            f"not {type(value).__name__}"
        )
    if isinstance(value, int | Decimal):
        value = str(value)
        if "E" in value or "e" in value:
            raise InstantError(f"{what} {value} is not plain seconds since the epoch")
    if len(value) > MAX_TEXT:
        raise InstantError(f"{what} is {len(value)} characters long: no instant is")
    m = _SECONDS.fullmatch(value)
    if m is not None:
        return int(m.group(1)) * 1_000_000 + int((m.group(2) or "").ljust(6, "0"))
    if not value.isascii() or value.strip() != value:
        raise InstantError(f"{what} {value!r} is not an ISO 8601 time")
    if re.fullmatch(r"-?[0-9.]+", value):
        raise InstantError(
            f"{what} {value!r}: seconds since the epoch are digits with up to six decimals"
        )
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise InstantError(
            f"{what} {value!r} is not an ISO 8601 time (such as 2024-05-01T21:30:00+02:00)"
        ) from None
    if t.tzinfo is None or t.utcoffset() is None:
        raise InstantError(
            f"{what} {value!r} has no offset: write it with one (Z for UTC, +02:00 ...)"
        )
    us = (t - EPOCH) // _US
    if us < 0:
        raise InstantError(f"{what} {value!r} is before 1970")
    return us


def ms_to_us(ms: float) -> int:
    """A trace's receive time (ms, three decimals) in whole microseconds."""
    return round(ms * 1000)


def format_instant(us: int | None) -> str | None:
    """ISO 8601 in UTC to the microsecond ('...Z'), None for None."""
    if us is None:
        return None
    t = EPOCH + timedelta(microseconds=us)
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")
