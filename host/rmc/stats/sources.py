"""Where the results come from: traces (their frames, else a simulator's truth) and the
table service's database, each result with what is on record about it.

- **number**: the pocket of a valid result (`rmc check`'s results: rejected ones left out).
- **direction**: the rotor's direction of the spin: the `rdir` of its LAUNCH frame (a
  simulator trace: its `launch` truth record; the database: the stored LAUNCH frame).
- **croupier**: the chef de table of the session the result fell in, as the SOPEN frame
  (database: `sessions.chef`) names him — the person on record for the table. The croupier
  working the wheel is on no frame yet.
- **under_first**, **under_drop**: the pocket under ball sensor A at the ball's first pass
  and at its last pass before the drop (the `under` of its LAUNCH and DROP frames; a
  simulator's `launch` and `drop` truth records), for the dealer's signature
  (`rmc.stats.signature`); None when not on record (an older firmware, `-`: the rotor's
  place not known).
- **session**: the session's number (SOPEN's `session`; database: `results.session`).
- **t_us**: when the result was received, µs since the epoch (a frame's `rx_ms`; database:
  `results.rx_us`), for --since.

A field a source does not hold is None; `Source.missing(field)` says why in one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rmc import infile
from rmc.stats.wheel_order import WheelOrder, order_of

FIELDS = ("direction", "croupier", "session")


class SourceError(ValueError):
    """A source that gives no results to analyse: the one-line reason."""


@dataclass(frozen=True)
class Result:
    number: str
    spin: int | None = None
    t_us: int | None = None
    direction: str | None = None
    croupier: str | None = None
    session: str | None = None
    under_first: str | None = None
    under_drop: str | None = None


@dataclass
class Source:
    name: str  # shown: a file name or "URL table ID"
    kind: str  # "frames", "truth", "database"
    results: list[Result]
    wheel: WheelOrder | None = None  # the order the trace's header gives, if any
    notes: list[str] = field(default_factory=list)  # warnings, one line each

    def missing(self, what: str) -> str | None:
        """Why `what` ("direction", "croupier", "session", "time") is on no result; None
        when some result has it."""
        attr = "t_us" if what == "time" else what
        if any(getattr(r, attr) is not None for r in self.results):
            return None
        why = {
            ("frames", "direction"): "no LAUNCH frame of its results",
            ("frames", "croupier"): "no session opened (SOPEN frame: the chef) before its results",
            ("frames", "session"): "no session opened (SOPEN frame) before its results",
            ("frames", "time"): "its frames carry no receive time (rx_ms)",
            ("truth", "croupier"): "a simulator's truth names no chef",
            ("truth", "time"): "a simulator's times are from the trace's start, not the clock",
            ("database", "direction"): "no LAUNCH frame of its results is stored",
            ("database", "croupier"): "no chef on record for its results' sessions",
            ("database", "session"): "its results fell in no session",
        }.get((self.kind, what), f"no {what} on record")
        return f"{self.name}: {why}"


# --- traces ---------------------------------------------------------------------------

_RES = b",RES,"


def read_trace_file(path: str) -> Source:
    """The results of a trace or a raw capture; SourceError when unusable."""
    try:
        data = infile.read_bytes(path)
    except OSError as e:
        raise SourceError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_source(data, path)


def parse_source(data: bytes, name: str) -> Source:
    from rmc.checker import Checker
    from rmc.trace import TraceError, looks_like_trace, parse_trace, wheel_id

    if not data.strip():
        raise SourceError(f"{name}: empty file")
    try:
        if looks_like_trace(data[:65536]):
            trace = parse_trace(data)
            table = trace.header.get("table")
            table = table if isinstance(table, str) and table != "unknown" else None
            checker = Checker(None, table=table, wheel=wheel_id(trace.header.get("wheel")))
            checker.feed_many(line for line, _ in trace.frame_lines())
            rx = _rx_of_results(trace.frame_lines())
            errors = list(trace.errors)
            wheel = order_of(trace.header.get("wheel"))
            other = trace.header.get("slingshot_pockets")
        else:
            if b"$" not in data:
                raise SourceError(f"{name}: neither a trace nor a capture of the table's line")
            trace, rx, errors, wheel, other = None, {}, [], None, None
            checker = Checker(None)
            checker.feed_many(data.split(b"\n"))
    except TraceError as e:
        raise SourceError(f"{name}: {e}") from None
    report = checker.report()
    notes = []
    if other is not None:
        # 37 or 38 pockets, not our 39: every test here assumes 39 equally likely pockets
        notes.append(
            f"{name}: a SlingShot wheel of {other} pockets: the tests assume 39 equally likely"
            " pockets (00 and CMC never come out of it): read its flags accordingly"
        )
    if errors:
        notes.append(
            f"{name}: {len(errors)} trace error(s) (rmc check lists them); read all the same"
        )
    if report.rejected:
        notes.append(f"{name}: {len(report.rejected)} result(s) rejected by the checker, left out")
    if report.results:
        return Source(name, "frames", _from_frames(checker, report.results, rx), wheel, notes)
    if trace is not None:
        truth = _from_truth(trace.records)
        if truth:
            notes.append(f"{name}: no result frame: the simulator's truth (rest records) is read")
            return Source(name, "truth", truth, wheel, notes)
    if report.valid or report.frames:
        raise SourceError(f"{name}: no valid result in its {report.valid} valid frame(s)")
    raise SourceError(f"{name}: no result in it")


def _rx_of_results(lines: Any) -> dict[tuple[int, int], float]:
    """(boot, seq) -> first receive time (ms) of each RES frame line."""
    out: dict[tuple[int, int], float] = {}
    for line, rx in lines:
        if rx is None or _RES not in line:
            continue
        start = line.find(b"$1,")
        parts = line[start:].split(b",", 4) if start >= 0 else []
        if len(parts) == 5 and parts[2].isdigit() and parts[3].isdigit():
            out.setdefault((int(parts[2]), int(parts[3])), float(rx))
    return out


def _from_frames(checker: Any, results: list[dict], rx: dict) -> list[Result]:
    from rmc.frames import FrameError

    rdir: dict[int, str] = {}
    under: dict[tuple[str, int], str] = {}
    where: dict[int, tuple[str | None, str | None, int | None]] = {}
    session: tuple[str | None, str | None] | None = None
    for key in checker.keys():
        f = checker.frames[key]
        t = f.type
        if t not in ("LAUNCH", "DROP", "SOPEN", "SCLOSE", "RES"):
            continue
        try:
            fl = f.fields
            if t in ("LAUNCH", "DROP"):
                if _pocket(fl.get("under")):
                    under[t, int(fl["spin"])] = fl["under"]
                if t == "LAUNCH" and fl.get("rdir") in ("cw", "ccw"):
                    rdir[int(fl["spin"])] = fl["rdir"]
            elif t == "SOPEN":
                session = (fl.get("session"), fl.get("chef"))
            elif t == "SCLOSE":
                session = None
            else:
                n = int(fl["spin"])
                at = rx.get(key)
                where.setdefault(
                    n, (*(session or (None, None)), None if at is None else round(at * 1000))
                )
        except (FrameError, KeyError, ValueError):
            continue
    out = []
    for r in results:
        n = r["spin"]
        sess, chef, t_us = where.get(n, (None, None, None))
        first, drop = under.get(("LAUNCH", n)), under.get(("DROP", n))
        out.append(Result(r["result"], n, t_us, rdir.get(n), chef, sess, first, drop))
    return out


def _pocket(v: Any) -> bool:
    """A pocket label (an `under` field's value that names one; "-" does not)."""
    from rmcfw import numbers

    return isinstance(v, str) and v in numbers.INDEX


def _from_truth(records: list[dict[str, Any]]) -> list[Result]:
    rdir: dict[Any, str] = {}
    under: dict[tuple[str, Any], str] = {}
    sessions = 0
    out = []
    for r in records:
        if r.get("kind") != "truth":
            continue
        ev = r.get("event")
        if ev == "session_open":
            sessions += 1
        elif ev in ("launch", "drop"):
            if ev == "launch" and r.get("rotor_dir") in ("cw", "ccw"):
                rdir[r.get("spin")] = r["rotor_dir"]
            if _pocket(r.get("under")):
                under[ev, r.get("spin")] = r["under"]
        elif ev == "rest" and not r.get("void") and isinstance(r.get("pocket"), str):
            spin = r.get("spin")
            out.append(
                Result(
                    r["pocket"],
                    spin if isinstance(spin, int) else None,
                    None,
                    rdir.get(spin),
                    None,
                    str(sessions) if sessions else None,
                    under.get(("launch", spin)),
                    under.get(("drop", spin)),
                )
            )
    return out


# --- the service's database -------------------------------------------------------------

_RDIR = re.compile(r",rdir=(cw|ccw)[,#*]")
_SPIN = re.compile(r",spin=(0|[1-9][0-9]{0,9})[,#*]")
_UNDER = re.compile(r",under=([0-9]{1,2}|CMC)[,#*]")  # a pocket ("-": not known)


def read_database(url: str, table: str, since_us: int | None, directions: bool = True) -> Source:
    """A table's valid results from the service's database (`rmc serve`), oldest first,
    with the rotor directions and the pockets under the ball sensor from the stored LAUNCH
    and DROP frames (it reads every frame of the table; `directions` False: none of it)."""
    from rmc.serve.store import StoreError
    from rmc.served_db import DatabaseError, open_store, shown_url

    name = f"{shown_url(url)} table {table}"
    try:
        store = open_store(url)
    except DatabaseError as e:
        raise SourceError(str(e)) from None
    try:
        if table not in {t["id"] for t in store.tables()}:
            raise SourceError(f"no table {table!r} in the database")
        rows = store.results(table, last=2**62, valid_only=True)
        chefs = {s["session"]: s["chef"] for s in reversed(store.sessions(table, last=2**62))}
        rdir: dict[int, str] = {}
        under: dict[tuple[str, int], str] = {}
        if directions:
            for f in store.frames(table):
                if f.type == "LAUNCH" or f.type == "DROP":
                    s = _SPIN.search(f.line)
                    if s is None:
                        continue
                    u = _UNDER.search(f.line)
                    if u and _pocket(u.group(1)):
                        under[f.type, int(s.group(1))] = u.group(1)
                    d = _RDIR.search(f.line) if f.type == "LAUNCH" else None
                    if d:
                        rdir[int(s.group(1))] = d.group(1)
    except StoreError as e:
        raise SourceError(str(e)) from None
    finally:
        store.close()
    rows.reverse()  # oldest first: the order played
    if since_us is not None:
        rows = [r for r in rows if r["at_us"] >= since_us]
    if not rows:
        when = " since that time" if since_us is not None else ""
        raise SourceError(f"{name}: no valid result{when}")
    out = [
        Result(
            r["result"],
            r["spin"],
            r["at_us"],
            rdir.get(r["spin"]),
            chefs.get(r["session"]),
            None if r["session"] is None else str(r["session"]),
            under.get(("LAUNCH", r["spin"])),
            under.get(("DROP", r["spin"])),
        )
        for r in rows
    ]
    return Source(name, "database", out)
