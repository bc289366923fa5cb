"""A table's frames from the table service's database, written as a trace (`rmc export`).

The trace holds what `rmc record` would have written at the table: the header, every frame
line exactly as the service received it (a resent frame with its `~`) with its receive time,
in (boot, seq) order, then the end record. The operators' commands the database keeps are
`command` records (with who sent them and in which role), and the board's answers to them
are `frame` records at the time they came, both placed among the frames by time. So
`rmc check` of the export runs the checker's rules over the same frames in the same order as
the service did live, and finds the same results and the same violations.

What the database does not keep as frames is not in the export: damaged lines (the
service files them apart), and the host's own RESEND requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from rmc.timestamps import format_instant
from rmc.trace import TraceWriter, make_header

ALL = 2**62  # every command: the store's `last` is a LIMIT


class ExportError(ValueError):
    """Nothing to export: a one-line reason."""


@dataclass
class Exported:
    frames: int = 0
    commands: int = 0
    answers: int = 0
    first_us: int | None = None  # the first and last frame's receive time
    last_us: int | None = None
    boots: tuple[int, ...] = ()


def export_trace(
    store: Any,
    table: str,
    out: IO[str],
    since_us: int | None = None,
    until_us: int | None = None,
    wheel: Any = "unknown",
    db: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Exported:
    """Write the trace of `table`'s frames received in since_us <= rx_us < until_us to `out`
    (a text stream), ended with its end record. `wheel`: the header's wheel definition (a
    wheel.json dict, checked by `rmc check` against the BOOT frames; "unknown": not checked,
    as the service does not). ExportError when no frame is there, StoreError when the
    database fails on the way (the stream then holds part of a trace)."""
    rows = iter(store.frames(table, since_us, until_us))
    first = next(rows, None)
    if first is None:
        raise _nothing_to_export(store, table, since_us, until_us)
    extras = _command_records(store, table, since_us, until_us)
    header = make_header(
        table,
        "record",
        firmware=None,
        wheel=wheel,
        export={
            "db": db,
            "since": format_instant(since_us),
            "until": format_instant(until_us),
        },
    )
    done = Exported()
    boots: set[int] = set()
    with TraceWriter(out, header, flush=False) as w:
        merge = _Extras(extras, w, done)
        row = first
        while row is not None:
            merge.until(row.rx_us)
            w.frame(row.line.encode("latin-1", "replace"), row.rx_us / 1000)
            _count_frame(done, row.rx_us)
            boots.add(row.boot)
            if progress is not None and done.frames % 5000 == 0:
                progress(done.frames)
            row = next(rows, None)
        merge.until(float("inf"))
    done.boots = tuple(sorted(boots))
    if progress is not None:
        progress(done.frames)
    return done


def _nothing_to_export(
    store: Any, table: str, since_us: int | None, until_us: int | None
) -> ExportError:
    """Why no frame is there: no such table, or none of its frames in the window."""
    if (since_us is None and until_us is None) or next(iter(store.frames(table)), None) is None:
        return ExportError(f"no table {table!r} in the database: no frame of it is stored")
    return ExportError(
        f"no frame of table {table!r} received {_window(since_us, until_us)}: nothing to export"
    )


def _command_records(
    store: Any, table: str, since_us: int | None, until_us: int | None
) -> list[tuple[int, int, dict[str, Any]]]:
    """The operators' commands (0) and the board's answers (1) in the window, as (time,
    kind, record) in time order: they are merged with the frames (there are few)."""
    extras: list[tuple[int, int, dict[str, Any]]] = []
    for c in store.commands(table, last=ALL):
        sent = c.get("sent_us")
        if isinstance(sent, int) and _within(sent, since_us, until_us) and c.get("line"):
            record = {"kind": "command", "tx_ms": round(sent / 1000, 3), "line": c["line"]}
            record.update({k: c[k] for k in ("by", "role") if c.get(k) is not None})
            extras.append((sent, 0, record))
        answered, answer = c.get("answered_us"), c.get("answer_line")
        if isinstance(answered, int) and answer and _within(answered, since_us, until_us):
            extras.append((answered, 1, {"rx_ms": answered / 1000, "line": answer}))
    extras.sort(key=lambda e: (e[0], e[1]))
    return extras


class _Extras:
    """The commands and answers written among the frames, each before the first frame
    received after it."""

    def __init__(
        self, extras: list[tuple[int, int, dict[str, Any]]], w: TraceWriter, done: Exported
    ) -> None:
        self.extras = extras
        self.w = w
        self.done = done
        self.k = 0  # the next to write

    def until(self, t: float) -> None:
        """Write those up to time `t` (µs), included."""
        extras, k = self.extras, self.k
        while k < len(extras) and extras[k][0] <= t:
            _, kind, record = extras[k]
            if kind == 0:
                self.w.write(record)
                self.done.commands += 1
            else:
                self.w.frame(record["line"].encode("latin-1", "replace"), record["rx_ms"])
                self.done.answers += 1
            k += 1
        self.k = k


def _count_frame(done: Exported, rx_us: int) -> None:
    done.frames += 1
    if done.first_us is None or rx_us < done.first_us:
        done.first_us = rx_us
    if done.last_us is None or rx_us > done.last_us:
        done.last_us = rx_us


def _within(t: int, since_us: int | None, until_us: int | None) -> bool:
    return (since_us is None or t >= since_us) and (until_us is None or t < until_us)


def _window(since_us: int | None, until_us: int | None) -> str:
    if since_us is None:
        return f"before {format_instant(until_us)}"
    if until_us is None:
        return f"since {format_instant(since_us)}"
    return f"from {format_instant(since_us)} to {format_instant(until_us)}"
