"""Replay ball lap times through the firmware's own predictor (rmcfw.rnvp).

One spin per line of a LAPS.csv file: the ball's successive revolution times in seconds, the
last one the last full lap before the ball left the track. The predictor runs exactly as on
the table: after each pass it sets a deadline; the call happens at that deadline if the next
pass has not come first. It learns the wheel from spin to spin, in file order, and learns
afresh after a spin whose laps show another wheel (a file of several wheels, a ball or wheel
changed). It also tells from the spins whether their timing noise is on each pass (sensors,
video) or on each lap (laps clocked one by one), and fits the pass or the lap times.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rmc import infile
from rmcfw import rnvp, ticks


class LapsError(ValueError):
    """A LAPS.csv line that is not a list of positive lap times."""


@dataclass
class SpinCall:
    spin: int
    rnvp_s: float | None  # when "rien ne va plus" was called (s from the first pass)
    predicted_drop_s: float | None  # the predicted last pass in force at the call
    last_pass_s: float  # the real last pass
    lead_s: float | None  # last_pass_s - rnvp_s
    late: bool  # called after the last pass, or never
    why: str | None  # "fit" or "limit"
    new_wheel: bool = False  # this spin's laps showed another wheel: it is learned afresh
    lap_noise: bool = False  # called with the lap times fitted (noise on each lap, not pass)

    def as_dict(self) -> dict:
        return {
            "spin": self.spin,
            "rnvp_s": _r(self.rnvp_s),
            "predicted_drop_s": _r(self.predicted_drop_s),
            "last_pass_s": _r(self.last_pass_s),
            "lead_s": _r(self.lead_s),
            "late": self.late,
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def read_laps(path: str | Path) -> list[list[float]]:
    """The spins of a LAPS.csv file; LapsError (with the line number) for a bad line.

    Blank lines and lines starting with # are skipped, and so is a header: a first line
    none of whose fields is a number (a spreadsheet's column names). Any other field that
    is not a number refuses the file: a lap left out would move every pass after it. So do
    laps separated by semicolons or tabs (a spreadsheet's export in a locale with decimal
    commas: "0,61;0,65" is not two laps) and a file without any spin."""
    spins = []
    first = True
    for n, line in enumerate(infile.read_text(path, "utf-8-sig").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        _other_separator(n, line)
        fields = [x.strip() for x in line.split(",")]
        while fields and not fields[-1]:
            fields.pop()  # a spreadsheet's trailing empty cells
        if not fields:
            continue  # ... or a row of empty cells: a blank line
        if first and fields and not any(_number(x) for x in fields):
            first = False
            continue
        first = False
        laps = []
        for k, x in enumerate(fields, 1):
            if not x:
                raise LapsError(
                    f"line {n}: lap {k} is empty (a lap missing would move every pass after it)"
                )
            try:
                lap = float(x)
            except ValueError:
                raise LapsError(f"line {n}: lap {k} is not a number: {x!r}") from None
            if not (math.isfinite(lap) and 0 < lap <= 60):
                unit = " (milliseconds?)" if 60 < lap < 60_000 else ""
                raise LapsError(
                    f"line {n}: lap {k} is {x}{unit}: lap times are seconds, above 0 and at most 60"
                )
            laps.append(lap)
        spins.append(laps)
    if not spins:
        raise LapsError("no spin in the file: one spin a line, its lap times in seconds")
    return spins


@dataclass
class Copy:
    """A line that is not a spin of its own: the same laps as `of` (a spin number, 1-based),
    whole (`cut` 0) or with its last `cut` laps left out."""

    spin: int
    of: int
    cut: int


def copies(spins: list[list[float]]) -> list[Copy]:
    """The lines that repeat another spin, or are the start of a longer one (the same laps,
    the last ones cut off). Such a file is not one of spins of their own (a data set built to
    ask "how long is left?" at every lap, say): each copy ends its spin earlier on the very
    laps another line goes on with, so no predictor can be both early enough for the copy
    and near enough for the whole spin. Spins agree lap for lap by chance only over a few
    laps of a fine clock: a copy holds copy_laps(spins) laps at least, and none is looked for
    on a coarse grid (video frames)."""
    least = copy_laps(spins)
    if least is None:
        return []
    whole = {}  # laps -> the first spin that has them whole
    starts = {}  # the first k laps of a spin -> that spin, the longest one
    for i, laps in enumerate(spins, 1):
        key = tuple(laps)
        whole.setdefault(key, i)
        for k in range(least, len(laps)):
            j = starts.get(key[:k])
            if j is None or len(spins[j - 1]) < len(laps):
                starts[key[:k]] = i
    out = []
    for i, laps in enumerate(spins, 1):
        if len(laps) < least:
            continue
        key = tuple(laps)
        j = starts.get(key)
        if j is not None:
            out.append(Copy(i, j, len(spins[j - 1]) - len(laps)))
        elif whole[key] != i:
            out.append(Copy(i, whole[key], 0))
    return out


def distinct(spins: list[list[float]], found: list[Copy]) -> tuple[list[int], list[list[float]]]:
    """(their numbers in the file, the spins) without the copies `found` (copies(spins))."""
    out = {c.spin for c in found}
    numbers = [n for n in range(1, len(spins) + 1) if n not in out]
    return numbers, [spins[n - 1] for n in numbers]


def ceiling(spins: list[list[float]], lead_s: float, tolerance_s: float = 0.5) -> int:
    """The most lines any predictor could call within tolerance_s of lead_s before the last
    pass with none late (a call after the last pass, or none): its bound on this file.

    A predictor sees only the laps so far, so lines that share their first laps are told
    apart only when they part: until then each gets the same call. A line that ends where
    another goes on (a copy cut short, or two short spins alike on a coarse clock) must be
    called before its own end, which may be far too early for the longer one. Where every
    line has parted from the others by the time its call is due (lead_s + tolerance_s
    before its end), it is every line. Times are replay's (pass_times_us)."""
    root = _Node(0)
    for laps in spins:
        node = root
        passes = pass_times_us(laps)
        for a, b in itertools.pairwise(passes):
            node = node.children.setdefault(b - a, _Node(b))
        node.ends += 1
    lo = round((lead_s - tolerance_s) * 1e6)
    hi = round((lead_s + tolerance_s) * 1e6)
    # children before parents, without recursion (a line may hold any number of laps)
    order = [root]
    for node in order:
        order.extend(node.children.values())
    for node in reversed(order):
        _best(node, lo, hi)
    return root.best


@dataclass
class _Node:
    """The lines that share their laps up to the pass at t (us from the first pass)."""

    t: int
    ends: int = 0  # lines whose last pass this is
    children: dict = field(default_factory=dict)  # the next lap (us) -> node
    best: int = 0  # set by _best
    last: list = field(default_factory=list)  # ... and the last passes of its lines, sorted


def _best(node: _Node, lo: int, hi: int) -> None:
    """node.best: the most lines below node within [lo, hi] of the lead, called no earlier
    than its pass and none late (its children's already set); node.last."""
    kids = sorted(node.children.values(), key=lambda c: c.t)
    below = [(c.best, c.last) for c in kids]
    node.last = sorted([node.t] * node.ends + [e for _, es in below for e in es])
    for c in kids:
        c.last = []  # only the parent needs them
    if node.ends:
        node.best = 0  # uncalled here, a line ending here is late: a call came before
        return
    # a deadline x: the lines whose next pass comes after x are called at x; the others go
    # on uncalled. For x from one next pass to the next, the best x puts an edge of the
    # window [x + lo, x + hi] on a last pass, or is at an end of the interval.
    gone = best = sum(b for b, _ in below)  # no call before any next pass
    called: list[int] = []
    for j in range(len(kids) - 1, -1, -1):
        called = sorted(called + below[j][1])
        gone -= below[j][0]  # ... the lines of kids[:j], whose passes came first
        start = kids[j - 1].t if j else node.t
        stop = kids[j].t  # a pass at the deadline comes first: x < stop
        for x in [start, stop - 1] + [e - d for e in called for d in (lo, hi)]:
            if start <= x < stop:
                n = bisect.bisect_right(called, x + hi) - bisect.bisect_left(called, x + lo)
                best = max(best, gone + n)
    node.best = best


# the clock grids a lap file may be on (s), coarsest first: 1/30 and 1/25 s are video frames
_GRIDS = (0.1, 0.05, 0.04, 1 / 30, 0.02, 0.01, 0.005)


def clock_grid(spins: list[list[float]]) -> float:
    """The coarsest grid all laps lie on (to half a millisecond, as printed), 0 for a clock
    of a millisecond or finer."""
    laps = [x for spin in spins for x in spin]
    for step in _GRIDS:
        tol = min(0.0006, step / 10)
        if all(abs(x - round(x / step) * step) <= tol for x in laps):
            return step
    return 0.0


def copy_laps(spins: list[list[float]]) -> int | None:
    """The fewest laps a line must share with another to be taken for a copy, by the clock's
    grid: 4 on a millisecond clock, 6 on one of 5-10 ms (a lap of two spins then agrees by
    chance about once in 20), None on a coarser grid, where spins agree too often to tell."""
    grid = clock_grid(spins)
    if grid == 0.0:
        return 4
    return 6 if grid < 0.015 else None


def newest_first(spins: list[list[float]]) -> bool:
    """Most spins of 4 laps or more get faster lap after lap: the file most likely holds each
    spin's laps newest first (a ball only slows on the track)."""
    long = [laps for laps in spins if len(laps) >= 4]
    faster = sum(laps[-1] < laps[0] for laps in long)
    return bool(long) and faster * 2 > len(long)


def _other_separator(n: int, line: str) -> None:
    """LapsError for a line of numbers separated by semicolons or tabs: split at its commas
    it would read as other laps (decimal commas) or as a header, and be skipped."""
    for sep, name in ((";", "semicolons"), ("\t", "tabs")):
        cells = [x.strip() for x in line.split(sep) if x.strip()]
        if len(cells) < 2 or not any(_number(x.replace(",", ".")) for x in cells):
            continue
        decimal = " and decimal commas" if any("," in x for x in cells) else ""
        raise LapsError(
            f"line {n}: laps separated by {name}{decimal}: write them in seconds with a "
            "decimal point, separated by commas (0.61,0.65,0.70)"
        )


def _number(x: str) -> bool:
    try:
        float(x)
    except ValueError:
        return False
    return True


def pass_times_us(laps: list[float]) -> list[int]:
    """The ball's passes (us from the first) after laps of these seconds: replay's clock,
    on which laps alike give passes alike."""
    passes = [0]
    for lap in laps:
        passes.append(passes[-1] + round(lap * 1e6))
    return passes


def replay(
    spins: Iterable[list[float]],
    lead_s: float = 1.0,
    progress: Callable[[int], None] | None = None,
    **options,
) -> list[SpinCall]:
    """Run the predictor over the spins in order (it learns from each). `progress` is told
    how many spins are done, now and then: the predictor's own work is most of the time of
    a large file (some 0.3 ms a pass under CPython, issue 20), which the host cannot cut
    without changing its results."""
    p = rnvp.Predictor(lead_s=lead_s, **options)
    out = []
    for i, laps in enumerate(spins, 1):
        if progress is not None and i % _PROGRESS_EVERY == 0:
            progress(i)
        passes = pass_times_us(laps)
        p.reset(0)
        lap_noise = p.lap_noise  # the noise's kind the earlier spins told
        call = drop = why = None
        for k in range(1, len(passes)):
            if call is None and ticks.diff(passes[k], p.deadline) > 0:
                # the deadline came before this pass: called then (never before the last pass
                # seen, since the deadline is set at a pass)
                call = max(ticks.diff(p.deadline, 0), passes[k - 1]) / 1e6
                drop, why = p.drop_s, p.why
            p.lap(passes[k])
        last = passes[-1] / 1e6
        wheels = p.wheels
        p.learn_drop()
        late = call is None or call > last
        lead = None if call is None else last - call
        out.append(SpinCall(i, call, drop, last, lead, late, why, p.wheels != wheels, lap_noise))
    return out


_PROGRESS_EVERY = 50  # spins


def revs_aimed(call: SpinCall, laps: list[float], revs: int) -> bool:
    """For a lead in revolutions: the call came at the pass `revs` laps before the last one,
    or in the lap that ends there (`revs` or `revs` + 1 passes after it; a call within 1 ms
    of a pass counts as at it)."""
    if call.late or call.rnvp_s is None:
        return False
    after = 0
    t = call.last_pass_s
    for lap in reversed(laps):
        if t > call.rnvp_s + 0.001:
            after += 1
        t -= lap
    return revs <= after <= revs + 1


TOLERANCE_S = 0.5  # the issue's: a lead within ±0.5 s of the one asked


def on_target(call: SpinCall, laps: list[float], lead_s: float, revs: int = 0) -> bool:
    """The call came where it was asked: `revs` laps before the last pass (revs_aimed), or,
    for a lead in seconds, within TOLERANCE_S of `lead_s` before it."""
    if revs:
        return revs_aimed(call, laps, revs)
    return call.lead_s is not None and abs(call.lead_s - lead_s) <= TOLERANCE_S


def summary(calls: list[SpinCall]) -> dict:
    leads = [c.lead_s for c in calls if c.lead_s is not None]
    return {
        "spins": len(calls),
        "late": sum(c.late for c in calls),
        "median_lead_s": _r(statistics.median(leads)) if leads else None,
        "called": sum(c.rnvp_s is not None for c in calls),
    }
