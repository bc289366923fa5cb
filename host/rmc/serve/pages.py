"""What the service's web pages show, computed here from the store and the tables' state.

Three pages (`rmc.serve.web`: plain HTML, CSS and JavaScript modules, no build step) read
the HTTP API and follow its event stream: the players' results display, the chef de table's
console and the engineer's live view (docs/pages.md). What they show that is not a column of
the store is computed here, once, in Python, so that the pages only draw:

- a result's announcement (« 17, noir, impair et manque »): `rmc.settle.announce_result`,
  the croupier's words of the settlement;
- the session's figures: hot and cold numbers, the shares of the chances simples and of the
  three zeros;
- « les trois derniers coups » and the coups left;
- the spin in progress as the engineer sees it: the ball's laps, a fit of them with the
  predictor's model, the call, the predicted and the real drop, the rotor;
- the wheel's pockets in the order of `hardware/wheel.json`, each with its colour.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmc.frames import FrameError, decode
from rmc.settle import ResultError, announce_result
from rmcfw import config as fwconfig
from rmcfw import lead as fwlead
from rmcfw import numbers, proto
from rmcfw.frames import pocket_labels

WEB_DIR = Path(__file__).parent / "web"
PAGES = {"display": "display.html", "console": "console.html", "engineer": "engineer.html"}

MARQUEE = 20  # results on the display
FIGURES_MAX = 1000  # results read for a session's figures (a session has a few hundred)
HOT_COLD = 5  # hot and cold numbers shown
TAIL = 40  # frames in the engineer's log
TAIL_WINDOWS_US = (10_000_000, 600_000_000)  # looked for before the last reception
FIT_AHEAD = 40  # laps extrapolated at most
A_MIN = 0.8  # the per-lap drag factor's bounds, as the firmware's predictor keeps them
WRAP_MS = 1 << 32  # the firmware's millisecond clock wraps there

# the events a display may see: nothing of the operators, the link's errors or the faults
# (of the settings, only a change of the lead, without who made it: the display shows it)
_PUBLIC = ("result", "state", "last3", "session_open", "session_close", "void", "incident")
PUBLIC_TYPES = frozenset((*_PUBLIC, "link", "setting"))


def now_us() -> int:
    return time.time_ns() // 1000


def announcement(result: str) -> str | None:
    """The croupier's call (« 17, noir, impair et manque », « Zéro », « Double zéro »,
    « CMC »); None for what is no pocket of the wheel."""
    try:
        return announce_result(result)
    except ResultError:
        return None


def _int(text: Any) -> int | None:
    s = str(text) if text is not None else ""
    return int(s) if s.isdigit() else None


# --- the display ------------------------------------------------------------------------------


def public_result(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("spin", "result", "colour", "parity", "half", "at_us", "boot", "seq", "session")
    out = {k: r.get(k) for k in keys if k in r}
    out["announcement"] = announcement(str(r.get("result", "")))
    return out


def public_event(ev: dict[str, Any], table: str) -> dict[str, Any] | None:
    """An event of the bus as a display may see it, or None: valid results (with their
    announcement), the table's state, the session and its last three coups, voids and
    incidents, and whether the table is connected."""
    kind = ev.get("type")
    if kind not in PUBLIC_TYPES or ev.get("table") != table:
        return None
    base = {"id": ev.get("id"), "type": kind, "table": table, "at_us": ev.get("at_us")}
    if kind == "result":
        if not ev.get("valid", True):
            return None  # a result the rules rejected is no coup
        return {**base, **public_result(ev)}
    if kind == "state":
        return {**base, **{k: ev.get(k) for k in ("state", "spin", "lid", "session")}}
    if kind == "link":
        return {**base, "connected": bool(ev.get("connected")), "silent": bool(ev.get("silent"))}
    data = ev.get("data") or {}
    if kind == "setting" and data.get("key") not in fwlead.KEYS:
        return None
    keep = {
        "last3": ("last", "left"),
        "session_open": ("session",),
        "session_close": ("session", "spins"),
        "void": ("spin", "reason"),
        "incident": ("spin", "step", "num"),
        "setting": ("key", "new"),
    }[kind]
    return {
        **base,
        "boot": ev.get("boot"),
        "seq": ev.get("seq"),
        "data": {k: data[k] for k in keep if k in data},
    }


@dataclass
class Figures:
    """A session's figures, over its valid results."""

    coups: int
    hot: list[dict[str, Any]]  # the most frequent numbers, with their counts
    cold: list[dict[str, Any]]  # the least frequent, the ones not out for longest first
    shares: dict[str, dict[str, Any]]  # rouge, noir, pair, impair, manque, passe, 0, 00, CMC

    def as_dict(self) -> dict[str, Any]:
        return {"coups": self.coups, "hot": self.hot, "cold": self.cold, "shares": self.shares}


def figures(results: list[dict[str, Any]]) -> Figures:
    """Hot and cold numbers and the shares of the chances simples and of the zeros, over
    results given newest first (the store's order). Hot: the most frequent numbers out twice
    or more (ties: the latest out first). Cold: the numbers out least often, the ones not
    out for longest first (ties: the wheel's canonical order). Shares count a zero in none of
    the chances simples: rouge + noir + the three zeros make 100 %."""
    labels = [str(r["result"]) for r in results if str(r.get("result")) in numbers.INDEX]
    n = len(labels)
    count = collections.Counter(labels)
    since = {}  # label -> coups since it last came out (0: the newest)
    for i, label in enumerate(labels):
        since.setdefault(label, i)
    hot_order = sorted(count, key=lambda x: (-count[x], since[x]))
    hot = [
        {"result": x, "colour": numbers.colour(x), "count": count[x]}
        for x in hot_order
        if count[x] >= 2
    ][:HOT_COLD]
    never = n + 1  # not out in the session: colder than any that was
    cold_order = sorted(
        numbers.NUMBERS, key=lambda x: (count[x], -since.get(x, never), numbers.INDEX[x])
    )
    cold = [
        {"result": x, "colour": numbers.colour(x), "count": count[x], "since": since.get(x)}
        for x in cold_order[:HOT_COLD]
    ]
    tally: collections.Counter[str] = collections.Counter()
    for label in labels:
        ch = numbers.chances(label)
        if ch is None:
            tally[label] += 1
        else:
            tally.update(ch)
    names = (
        numbers.ROUGE,
        numbers.NOIR,
        numbers.PAIR,
        numbers.IMPAIR,
        numbers.MANQUE,
        numbers.PASSE,
        numbers.ZERO,
        numbers.DOUBLE_ZERO,
        numbers.CMC,
    )
    shares = {k: {"n": tally[k], "pct": round(100 * tally[k] / n, 1) if n else 0.0} for k in names}
    return Figures(n, hot, cold, shares)


def _after(ev: dict[str, Any], other: dict[str, Any] | None) -> bool:
    return other is None or (ev["boot"], ev["seq"]) > (other["boot"], other["seq"])


def display_snapshot(service: Any, table: str, last: int = MARQUEE) -> dict[str, Any]:
    """Everything the display shows, at once: the table's state, the last `last` valid
    results newest first (with their announcements), « les trois derniers coups » with the
    coups left, and the session's figures (the open session's, else the last one's)."""
    store = service.store
    info = service.table_info(table)
    rows = store.results(table, max(last, FIGURES_MAX))  # valid and rejected, newest first
    valid = [r for r in rows if r.get("valid")]
    open_session = info.get("session")
    sessions = store.sessions(table, 1)
    session = sessions[0] if sessions else None
    number = open_session if open_session is not None else (session or {}).get("session")
    if number is not None:
        in_session = [r for r in valid if r.get("session") == number]
        scope = "session"
    else:
        in_session, scope = valid[:MARQUEE], "recent"
    marks = store.events(table, ["last3", "session_open"], 50)
    opened = next((e for e in marks if e["kind"] == "session_open"), None)
    last3 = None
    if open_session is not None:
        ann = next((e for e in marks if e["kind"] == "last3" and _after(e, opened)), None)
        if ann is not None:
            final = _int(ann["data"].get("last"))
            # coups: spins of the session with a result (the firmware's count, decree 1-7)
            played = len({r["spin"] for r in rows if r.get("session") == open_session})
            if final is not None:
                last3 = {"last": final, "left": max(0, final - played), "played": played}
    link = info.get("link", {})
    return {
        "table": table,
        "server_us": now_us(),
        "connected": bool(link.get("connected")) and not link.get("silent"),
        "state": {
            "state": info.get("state"),
            "spin": _int(info.get("spin")),
            "lid": info.get("lid"),
            "session": open_session,
        },
        "session": None
        if session is None
        else {
            "session": session.get("session"),
            "open": open_session is not None and session.get("session") == open_session,
            "coups": len(in_session) if scope == "session" else None,
        },
        "last3": last3,
        "results": [public_result(r) for r in valid[:last]],
        "figures": {"scope": scope, **figures(in_session).as_dict()},
        "lead": public_lead(lead_in_force(store, table)),
    }


# --- the wheel --------------------------------------------------------------------------------


def wheel() -> dict[str, Any]:
    """The wheel's pockets in channel order (hardware/wheel.json: channel 0 first, clockwise
    seen from above), each with its colour, and the definition's id as a board's BOOT frame
    carries it."""
    from rmc.trace import default_wheel, wheel_id

    w = default_wheel()
    pockets = [str(p) for p in w.get("pockets", [])]
    return {
        "name": w.get("name"),
        "id": wheel_id(w),
        "pockets": [
            {"channel": i, "result": p, "colour": numbers.colour(p)} for i, p in enumerate(pockets)
        ],
        "deflectors_deg": w.get("deflectors_deg", []),
        "ball_sensor_angles_deg": w.get("geometry", {}).get("ball_sensor_angles_deg", []),
    }


# --- the spin, as the engineer sees it --------------------------------------------------------


@dataclass
class LapFit:
    """u(n+1) = a·u(n) − b over the lap means u = 1/T² (rmcfw.rnvp: air drag a, rim
    friction b), fitted on one spin's laps by least squares: the predictor's model, fitted
    here on the host (the board's own fit also weighs what it learned of earlier spins)."""

    a: float
    b: float

    def next(self, period_s: float) -> float | None:
        u = self.a / (period_s * period_s) - self.b
        return 1.0 / u**0.5 if u > 0 else None


def lap_fit(periods_s: list[float]) -> LapFit | None:
    """The model fitted on the laps so far; None with fewer than 3. Under 5 laps the drag
    is taken as none (a = 1): too few laps tell the two apart."""
    if len(periods_s) < 3 or any(p <= 0 for p in periods_s):
        return None
    u = [1.0 / (p * p) for p in periods_s]
    x, y = u[:-1], u[1:]
    m = len(x)
    mx, my = sum(x) / m, sum(y) / m
    a = 1.0
    if len(periods_s) >= 5:
        sxx = sum((xi - mx) ** 2 for xi in x)
        if sxx > 0:
            a = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y, strict=True)) / sxx
            a = min(1.0, max(A_MIN, a))
    b = a * mx - my
    return LapFit(a, b)


def _ms_since(ms: int, origin: int) -> int:
    return (ms - origin) % WRAP_MS


def _frames_of(rows: list[dict[str, Any]]) -> list[tuple[Any, dict[str, str]]]:
    out = []
    for row in rows:
        try:
            f = decode(str(row["line"]).encode("latin-1", "replace"))
            out.append((f, dict(f.fields)))
        except (FrameError, ValueError):
            continue
    return out


def spin_view(spin: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A spin's frames (rows of `Store.spin`) as the engineer's chart draws them: times in
    seconds from the launch on the board's clock (the frames' `ms`), the laps, the call of
    « rien ne va plus » with its predicted drop and lead, the drop, the outcome, the rotor,
    and the fit of the laps with its extrapolation to the predicted drop."""
    frames = _frames_of(rows)
    launch = next(((f, fl) for f, fl in frames if f.type == proto.T_LAUNCH), None)
    origin = launch[0].ms if launch else (frames[0][0].ms if frames else 0)

    def t(ms: int) -> float:
        return round(_ms_since(ms, origin) / 1000, 3)

    view: dict[str, Any] = {
        "spin": spin,
        "launch": None,
        "laps": [],
        "rnvp": None,
        "drop": None,
        "outcome": None,
        "incident": [],
        "hop": None,  # the pockets lit at the last HOP (the ball among the pockets)
        "rotor": None,
        "fit": None,
        "lead_actual_ms": None,
    }
    if launch:
        fl = launch[1]
        view["launch"] = {"rdir": fl.get("rdir"), "bdir": fl.get("bdir"), "void": fl.get("void")}
    for f, fl in frames:
        take = _SPIN_FRAMES.get(f.type)
        if take is not None:
            take(view, fl, f.ms, t)
        elif f.type == proto.T_HOP:
            view["hop"] = _hop_view(f, fl, t) or view["hop"]
    if view["rnvp"] and view["drop"]:
        view["lead_actual_ms"] = round(1000 * (view["drop"]["t_s"] - view["rnvp"]["t_s"]))
    view["fit"] = _fit_view(view["laps"], view["rnvp"], view["drop"])
    return view


# How each frame of a spin enters its view: (view, the frame's fields, its `ms`, the clock
# that turns a board's `ms` into seconds from the launch). Other frames leave it as it is.
_Clock = Callable[[int], float]


def _take_lap(view: dict[str, Any], fl: dict[str, str], ms: int, t: _Clock) -> None:
    period = _int(fl.get("period_us"))
    if period:
        lap = {"n": _int(fl.get("n")), "period_ms": round(period / 1000, 1), "t_s": t(ms)}
        if fl.get("reversed") or fl.get("lone"):
            lap.update(reversed=fl.get("reversed"), lone=fl.get("lone"))
        view["laps"].append(lap)


def _take_call(view: dict[str, Any], fl: dict[str, str], ms: int, t: _Clock) -> None:
    drop_ms, lead_ms = _int(fl.get("drop_ms")), _int(fl.get("lead_ms"))
    view["rnvp"] = {
        "t_s": t(ms),
        "why": fl.get("why"),
        "lead_ms": lead_ms,
        "drop_t_s": t(drop_ms) if drop_ms and fl.get("why") in ("fit", "limit") else None,
    }


def _take_drop(view: dict[str, Any], fl: dict[str, str], ms: int, t: _Clock) -> None:
    view["drop"] = {"t_s": t(ms), "revs": _int(fl.get("revs")), "void": fl.get("void")}


def _hop_view(f: Any, fl: dict[str, str], t: _Clock) -> dict[str, Any] | None:
    """A HOP frame as the wheel lights it: its pockets (labels of the wheel only), its place
    in the stream (boot, seq: the page keeps the newest of this and its live frames) and its
    time; None for a HOP whose `lit` does not parse (the checker reports it)."""
    try:
        lit = [x for x in pocket_labels(fl.get("lit", "")) if x in numbers.INDEX]
    except FrameError:
        return None
    return {"lit": lit, "boot": f.boot, "seq": f.seq, "t_s": t(f.ms)}


def _take_result(view: dict[str, Any], fl: dict[str, str], ms: int, t: _Clock) -> None:
    num = fl.get("num", "")
    view["outcome"] = {
        "result": num,
        "colour": fl.get("colour"),
        "announcement": announcement(num),
        "t_s": t(ms),
    }


def _take_void(view: dict[str, Any], fl: dict[str, str], ms: int, t: _Clock) -> None:
    view["outcome"] = {"void": fl.get("reason"), "t_s": t(ms)}


def _take_incident(view: dict[str, Any], fl: dict[str, str], ms: int, t: _Clock) -> None:
    view["incident"].append({"step": fl.get("step"), "num": fl.get("num"), "t_s": t(ms)})


def _take_rotor(view: dict[str, Any], fl: dict[str, str], ms: int, t: _Clock) -> None:
    if _int(fl.get("rotor_ms")):
        view["rotor"] = {"period_ms": _int(fl.get("rotor_ms")), "rdir": fl.get("rdir")}


_SPIN_FRAMES: dict[str, Callable[[dict[str, Any], dict[str, str], int, _Clock], None]] = {
    proto.T_REV: _take_lap,
    proto.T_RNVP: _take_call,
    proto.T_DROP: _take_drop,
    proto.T_RESULT: _take_result,
    proto.T_VOID: _take_void,
    proto.T_INCIDENT: _take_incident,
    proto.T_STATUS: _take_rotor,
}


def _fit_view(laps: list[dict], rnvp: dict | None, drop: dict | None) -> dict | None:
    periods = [lap["period_ms"] / 1000 for lap in laps]
    fit = lap_fit(periods)
    if fit is None:
        return None
    curve = []  # the fit's one-lap-ahead values at each lap from the second
    for prev, lap in itertools.pairwise(laps):
        p = fit.next(prev["period_ms"] / 1000)
        if p is not None:
            curve.append({"t_s": lap["t_s"], "period_ms": round(1000 * p, 1)})
    # ahead: from the last lap, until the predicted drop (or the real one, or a lap of 3 s)
    end = None
    if rnvp and rnvp.get("drop_t_s") is not None:
        end = rnvp["drop_t_s"]
    if drop is not None:
        end = max(end or 0.0, drop["t_s"])
    ahead = []
    period, at = periods[-1], laps[-1]["t_s"]
    for _ in range(FIT_AHEAD):
        nxt = fit.next(period)
        if nxt is None or nxt > 3.0:
            break
        at += nxt
        ahead.append({"t_s": round(at, 3), "period_ms": round(1000 * nxt, 1)})
        period = nxt
        if end is not None and at >= end:
            break
    return {"a": round(fit.a, 5), "b": round(fit.b, 5), "curve": curve, "ahead": ahead}


def tail(store: Any, table: str, anchor_us: int | None, n: int = TAIL) -> list[dict[str, Any]]:
    """The table's last `n` frames received, oldest first, looked for in growing windows
    before `anchor_us` (the link's last reception): never the whole history."""
    end = (anchor_us or now_us()) + 1
    rows: list[Any] = []
    for window in TAIL_WINDOWS_US:
        rows = list(store.frames(table, since_us=end - window, until_us=end))
        if len(rows) >= n:
            break
    rows.sort(key=lambda r: (r.rx_us, r.boot, r.seq))
    return [frame_event(r) for r in rows[-n:]]


def frame_event(row: Any) -> dict[str, Any]:
    """A stored frame (`FrameRow`) as the engineer's log shows it."""
    return {
        "boot": row.boot,
        "seq": row.seq,
        "ms": row.ms,
        "frame": row.type,
        "line": row.line,
        "rx_us": row.rx_us,
        "resent": bool(row.resent),
    }


LIST_KINDS = (
    "fault",
    "tamper",
    "alert",
    "violation",
    "rejected",
    "forced_close",
    "void",
    "incident",
    "setting",
)


def live_snapshot(service: Any, table: str) -> dict[str, Any]:
    """The engineer's view at once: the spin in progress (or the last one), the link's
    health and its damaged lines by cause, the faults, the findings, the tail of the log."""
    store = service.store
    info = service.table_info(table)
    spin = _int(info.get("spin"))
    view = None
    if spin:
        rec = store.spin(table, spin)
        if rec is not None:
            view = spin_view(spin, rec["frames"])
    damage = store.damage(table, 1000)
    by_why = collections.Counter(d["why"] for d in damage)
    return {
        "table": table,
        "server_us": now_us(),
        "info": info,
        "spin": view,
        "damage": {"by_why": dict(by_why), "counted": len(damage), "last": damage[:5]},
        "findings": store.events(table, LIST_KINDS, 30),
        "tail": tail(store, table, info.get("link", {}).get("last_rx_us")),
        "lead": lead_in_force(store, table),
    }


# --- the thresholds (the console's engineer form) ---------------------------------------------


def thresholds(store: Any, table: str) -> list[dict[str, Any]]:
    """Every threshold the table takes with SET: its default, its range and, when one was
    set, the last value the table recorded (CFG frames), by whom."""
    from rmc.trace import default_wheel

    defaults = fwconfig.Config()
    drop_default = fwconfig.drop_ms_of(default_wheel())
    set_last: dict[str, dict[str, Any]] = {}
    for e in store.events(table, ["setting"], 1000):  # newest first
        set_last.setdefault(str(e["data"].get("key")), e)
    out = []
    for key in sorted(fwconfig.keys()):
        lo, hi = fwconfig.bounds(key)
        default = drop_default if key == "drop_ms" else getattr(defaults, key)
        e = set_last.get(key)
        out.append(
            {
                "key": key,
                "default": default,
                "min": lo,
                "max": hi,
                "value": _int(e["data"].get("new")) if e else None,
                "by": e["data"].get("by") if e else None,
                "boot": e["boot"] if e else None,  # the CFG frame that set it
                "seq": e["seq"] if e else None,
            }
        )
    return out


# --- the lead: when « rien ne va plus » comes (rmcfw.lead) -------------------------------------


def lead_in_force(store: Any, table: str) -> dict[str, Any]:
    """The lead the table calls with, as its CFG frames left it (each key's newest, else its
    default): `lead_ms`, or `lead_revs` revolutions when not 0, plus a random extra in
    0..`window_ms`; `text` says it in a few words; `set` holds each key set and by whom
    (name, role, the CFG frame). The table's own record is the CFG frames: a value set before
    the service's database began is not known here (`from_cfg` says which keys are)."""
    rows = {t["key"]: t for t in thresholds(store, table) if t["key"] in fwlead.KEYS}
    roles: dict[str, Any] = {}
    for e in store.events(table, ["setting"], 1000):  # newest first
        roles.setdefault(str(e["data"].get("key")), e["data"].get("role"))

    def value(key: str) -> int:
        t = rows[key]
        return int(t["value"]) if t["value"] is not None else int(t["default"])

    ms, revs, window = value("lead_ms"), value("lead_revs"), value("lead_window_ms")
    return {
        "lead_ms": ms,
        "lead_revs": revs,
        "window_ms": window,
        "unit": "revs" if revs > 0 else "ms",
        "text": fwlead.describe(ms, revs, window),
        "from_cfg": sorted(k for k, t in rows.items() if t["value"] is not None),
        "set": {k: _who(t, roles.get(k)) for k, t in rows.items() if t["value"] is not None},
    }


def _who(t: dict[str, Any], role: Any) -> dict[str, Any]:
    return {"value": t["value"], "by": t["by"], "role": role, "boot": t["boot"], "seq": t["seq"]}


def public_lead(lead: dict[str, Any]) -> dict[str, Any]:
    """The lead as a display shows it: the values, not who set them."""
    keep = ("lead_ms", "lead_revs", "window_ms", "unit", "text")
    return {k: lead[k] for k in keep}
