"""The table service's database as the offline commands open it (`rmc export`, `rmc settle
--db`): the URL as it may be shown, and a store opened only when it exists.

`rmc.serve.store.Store.open` creates a SQLite file that is not there (the service starts
that way). A command that reads the database must not: a misspelt path would leave an empty
database behind and report "no such table" instead of the missing file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_SQLITE = re.compile(r"^sqlite(?:\+pysqlite)?:///([^?]*)")


class DatabaseError(ValueError):
    """The database cannot be read: a one-line reason."""


def shown_url(url: str) -> str:
    """The URL with its password masked (it is printed, and written into exports)."""
    from rmc.serve.store import display_url

    return display_url(url)


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL or a bare path names; None for anything else (a server, an
    in-memory database, a `file:` URI)."""
    if not _SCHEME.match(url):
        return Path(url).expanduser()
    m = _SQLITE.match(url)
    if m is None or not m.group(1) or m.group(1) == ":memory:" or m.group(1).startswith("file:"):
        return None
    return Path(unquote(m.group(1))).expanduser()


def open_store(url: str) -> Any:
    """`rmc.serve.store.Store.open(url)` for a database that exists; DatabaseError."""
    from rmc.serve.store import Store, StoreError

    path = sqlite_file(url)
    if path is not None and not path.is_file():
        raise DatabaseError(f"no database file {path}")
    try:
        return Store.open(url)
    except StoreError as e:
        raise DatabaseError(str(e)) from None
