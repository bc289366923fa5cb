"""Trace files (docs/traces.md): JSON Lines, one record per line, each with a "kind".

A trace holds a header, the frames exactly as received (with host receive times), and
optionally raw sensor events, ground truth from a simulator, bets, power events. Frame bytes
are stored as text decoded as Latin-1, so any byte a line carried (noise included) survives
the round trip: `line.encode("latin-1")` gives the bytes back.

A raw capture (the bytes of the serial line, e.g. `cat /dev/ttyACM0 > capture.log`) is told
apart from a trace by its first non-blank line: a trace's is a JSON object of kind "header".

A writer closes the trace with an "end" record: how many lines came before it and their
SHA-256. A trace without one was cut (the recorder killed, the host's power lost, a copy made
while it was written): a cut at a line boundary would otherwise leave a shorter trace that
reads as whole. The digest shows a line changed, lost, doubled or added after writing (it is
no signature: the frames carry their own MACs).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rmc import HARDWARE_DIR, infile
from rmcfw.frames import wheel_id as _labels_id

FORMAT = "rmc-trace/1"
KINDS = (
    "header",
    "frame",
    "sensor",
    "truth",
    "bet",
    "power",
    "command",
    "note",
    "slingshot",
    "end",
)
SOURCES = ("sim", "record", "slingshot", "rig")


class TraceError(ValueError):
    """The input cannot be used as a trace or a capture at all."""


@dataclass
class Trace:
    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # bad lines; a cut or changed trace
    end: dict[str, Any] | None = None  # the writer's end record, when the file holds it

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def frame_lines(self) -> Iterator[tuple[bytes, float | None]]:
        """(bytes, rx_ms) of every frame record, in file order."""
        for r in self.records:
            if r.get("kind") == "frame":
                line = r.get("line")
                if isinstance(line, str):
                    rx = r.get("rx_ms")
                    yield line.encode("latin-1", "replace"), rx if _is_num(rx) else None


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def default_wheel() -> dict[str, Any]:
    return json.loads((HARDWARE_DIR / "wheel.json").read_text())


def wheel_id(wheel: Any = None) -> str | None:
    """The id a board given this wheel definition sends in its BOOT frames: a wheel.json
    as a dict (a trace header's `wheel`), or None for hardware/wheel.json; None for a wheel
    without pockets (an import's "unknown")."""
    if wheel is None:
        wheel = default_wheel()
    pockets = wheel.get("pockets") if isinstance(wheel, dict) else None
    if not isinstance(pockets, list) or not pockets:
        return None
    return _labels_id([str(x) for x in pockets])


def make_header(
    table: str, source: str, firmware: str | None = None, wheel: Any = None, **extra: Any
) -> dict[str, Any]:
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}")
    return {
        "kind": "header",
        "format": FORMAT,
        "table": table,
        "wheel": wheel if wheel is not None else default_wheel(),
        "firmware": firmware,
        "source": source,
        **extra,
    }


def looks_like_trace(head: bytes) -> bool:
    """True when the first non-blank line of `head` is a trace record: its header, or any
    other record of a trace that lost its header (which parse_trace then refuses)."""
    for raw in head.splitlines():
        if raw.strip():
            try:
                obj = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                return False
            return isinstance(obj, dict) and isinstance(obj.get("kind"), str)
    return False


def read_trace(path: Path | str) -> Trace:
    """Read a trace. TraceError when there is no valid header; bad later lines are kept as
    `errors` (a damaged trace is reported, never silently mended)."""
    try:
        data = infile.read_bytes(path)
    except OSError as e:
        raise TraceError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_trace(data)


def parse_trace(data: bytes) -> Trace:
    reader = _TraceReader()
    for n, raw in enumerate(data.splitlines(), 1):
        if raw.strip():
            reader.line(n, raw)
    return reader.trace()


class _TraceReader:
    """parse_trace's reading, a line at a time: the header first, the records, the end
    record, and what is wrong with them (TraceError when there is no trace at all)."""

    def __init__(self) -> None:
        self.header: dict[str, Any] | None = None
        self.records: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.end: dict[str, Any] | None = None
        # the count and digest of the lines before the end record, as the writer made them
        # (it writes no blank line: one carries nothing, and is not counted)
        self.digest = hashlib.sha256()
        self.lines = 0
        self.last = 0  # the last line that holds anything
        self.after_end = 0

    def line(self, n: int, raw: bytes) -> None:
        """Line `n`, not blank."""
        self.last = n
        before = self._count(n, raw)
        obj = self._record_of(n, raw)
        if obj is None:
            return
        if self.header is None:
            self._header(n, obj)
        elif obj["kind"] == "end":
            self._end(n, obj, before)
        elif obj["kind"] == "frame" and not isinstance(obj.get("line"), str):
            self.errors.append(f"line {n}: frame record without a line")
        elif bad := record_error(obj):
            self.errors.append(f"line {n}: {bad}")  # reported, and not played as if it were right
        else:
            self.records.append(obj)

    def _count(self, n: int, raw: bytes) -> str:
        """Counts the line into the digest before the end record; returns the digest of the
        lines before it when it may be the end record."""
        if self.end is None:
            before = self.digest.hexdigest() if b'"end"' in raw else ""
            self.digest.update(raw + b"\n")
            self.lines += 1
            return before
        self.after_end += 1
        if self.after_end == 1:
            self.errors.append(f"line {n}: records after the end record")
        return ""

    def _record_of(self, n: int, raw: bytes) -> dict[str, Any] | None:
        """The line's record: a JSON object with a kind (None, said, otherwise)."""
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            if self.header is None:
                raise TraceError(f"line {n}: not JSON ({e})") from None
            self.errors.append(f"line {n}: not JSON")
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            if self.header is None:
                raise TraceError(f"line {n}: not a trace record")
            self.errors.append(f"line {n}: not a record with a kind")
            return None
        return obj

    def _header(self, n: int, obj: dict[str, Any]) -> None:
        if obj["kind"] != "header":
            raise TraceError(f"line {n}: a trace starts with its header")
        if obj.get("format") != FORMAT:
            raise TraceError(f"unknown trace format {obj.get('format')!r}")
        self.header = obj

    def _end(self, n: int, obj: dict[str, Any], before: str) -> None:
        if self.end is not None:
            self.errors.append(f"line {n}: a second end record")
            return
        self.end = obj
        self.lines -= 1  # the end record counts the lines before it
        self.errors.extend(_end_errors(n, obj, self.lines, before))

    def trace(self) -> Trace:
        if self.header is None:
            raise TraceError("empty trace")
        if self.end is None:
            self.errors.append(
                f"no end record after line {self.last}: the recording stopped without closing "
                "the trace (recorder killed, host power lost, or copied while written); what "
                "came after that line is not in the file"
            )
        return Trace(self.header, self.records, self.errors, self.end)


def _is_time(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def record_error(r: dict[str, Any]) -> str | None:
    """What is wrong with a sensor, power or truth record (None: nothing). These records
    are played into the firmware core and compared with the truth: a wrong one is damage."""
    kind = r["kind"]
    if kind not in ("sensor", "power", "truth"):
        return None
    if not _is_time(r.get("t_us")):
        return f"{kind} record without a time (t_us: {r.get('t_us')!r})"
    if kind == "sensor":
        from rmcfw import channels

        try:
            channels.parse(r.get("ch"))  # type: ignore[arg-type]
        except (TypeError, ValueError, AttributeError):
            return f"sensor record on no channel of the table ({r.get('ch')!r})"
        if r.get("v") not in (0, 1) or isinstance(r.get("v"), bool):
            return f"sensor record with a value that is not 0 or 1 ({r.get('v')!r})"
    elif kind == "power" and r.get("event") not in ("cut", "restore"):
        return f"power record whose event is not cut or restore ({r.get('event')!r})"
    elif kind == "truth" and not isinstance(r.get("event"), str):
        return f"truth record without an event ({r.get('event')!r})"
    return None


def _end_errors(n: int, end: dict[str, Any], lines: int, sha256: str) -> list[str]:
    """What an end record at line n says against the `lines` lines before it."""
    want_lines, want_sha = end.get("lines"), end.get("sha256")
    if (
        not isinstance(want_lines, int)
        or isinstance(want_lines, bool)
        or not isinstance(want_sha, str)
    ):
        return [f"line {n}: end record without its line count and digest"]
    if want_lines != lines:
        return [
            f"line {n}: the end record counts {want_lines} lines before it, the file holds "
            f"{lines} (blank ones aside): lines were lost or added after writing"
        ]
    if want_sha != sha256:
        return [
            f"line {n}: the lines before the end record are not the ones written (SHA-256 "
            "differs): the trace was changed after writing"
        ]
    return []


class TraceWriter:
    """Writes a trace line by line, flushed, so that a recording cut short is still usable;
    `close()`, or leaving the `with` block (on an error too, after a note saying which),
    ends it with the end record."""

    def __init__(
        self, out: IO[str] | Path | str, header: dict[str, Any], flush: bool = True
    ) -> None:
        # flush=False for a trace written at once (a simulation): nothing live to lose
        self._flush = flush
        self._own = not hasattr(out, "write")
        self.out: IO[str] = open(out, "w", encoding="utf-8") if self._own else out  # type: ignore[arg-type]
        self._digest = hashlib.sha256()
        self.lines = 0
        self.ended = False
        self.write(header)

    def _put(self, record: dict[str, Any]) -> str:
        # ensure_ascii: the text is its own bytes, as the reader digests them
        text = json.dumps(record, ensure_ascii=True, separators=(",", ":"))
        self.out.write(text + "\n")
        if self._flush:
            self.out.flush()
        return text

    def write(self, record: dict[str, Any]) -> None:
        if self.ended:
            raise ValueError("the trace is ended: nothing can follow its end record")
        if record.get("kind") == "end":
            raise ValueError("the end record is the writer's own: call end()")
        text = self._put(record)
        self._digest.update(text.encode("ascii") + b"\n")
        self.lines += 1

    def frame(self, line: bytes, rx_ms: float | None = None) -> None:
        if rx_ms is None:
            rx_ms = time.time() * 1000
        text = line.rstrip(b"\r\n").decode("latin-1")
        self.write({"kind": "frame", "rx_ms": round(rx_ms, 3), "line": text})

    def command(self, line: bytes, tx_ms: float | None = None) -> None:
        if tx_ms is None:
            tx_ms = time.time() * 1000
        text = line.rstrip(b"\r\n").decode("latin-1")
        self.write({"kind": "command", "tx_ms": round(tx_ms, 3), "line": text})

    def end(self) -> None:
        """Write the end record (once): how many lines came before it and their SHA-256."""
        if not self.ended:
            self._put({"kind": "end", "lines": self.lines, "sha256": self._digest.hexdigest()})
            self.ended = True

    def close(self) -> None:
        try:
            self.end()
        finally:
            if self._own:
                self.out.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
            return
        # Every line written stands: the trace is ended on an error too, saying which (Ctrl-C
        # is how a recording stops). Should the output itself have failed, the error being
        # raised says more than this writer's own.
        try:
            if not issubclass(exc_type, KeyboardInterrupt) and not self.ended:
                note = f"writer stopped by {exc_type.__name__}: {exc}"
                self.write({"kind": "note", "t_ms": round(time.time() * 1000, 3), "text": note})
            self.end()
        except (OSError, ValueError):
            pass
        finally:
            if self._own:
                self.out.close()
