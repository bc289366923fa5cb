"""Helpers shared by the wire tests (not a test module)."""

from __future__ import annotations

import tempfile

from rmcfw.commands import Wire
from rmcfw.frames import Encoder
from rmcfw.journal import Journal


class Sink:
    def __init__(self) -> None:
        self.data = bytearray()

    def __call__(self, b: bytes) -> None:
        self.data.extend(b)


def make_wire(key: bytes | None, boot: int = 1, folder: str | None = None):
    folder = folder or tempfile.mkdtemp(prefix="rmc-journal-")
    j = Journal(folder, per_segment=64, segments=8)
    j.start()
    sink = Sink()
    w = Wire(Encoder("T01", boot, key), j, sink, key=key)
    return w, sink
