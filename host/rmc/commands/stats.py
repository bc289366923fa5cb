"""`rmc stats TRACE... | --db URL --table ID [--since T] [--by direction|croupier|session]
[--json] [--plot FILE] [--power [--signature W@S]]`: is the wheel fair?

The valid results of the traces (their frames as `rmc check` reads them; a simulator's
trace without frames: its truth) or of a table in the service's database, tested at 1 %:
per pocket (chi-square with 38 dof, G-test, binomial tests with Holm's correction), sectors
of 3 to 19 neighbouring pockets in the wheel's order (a scan calibrated by simulation), the
simple chances (shares and runs, on 1-36) and the zeros' share, a CUSUM monitor run
over the results in order, and the dealer's signature: the distance of each result from the
pocket under the ball sensor at the ball's first pass and at its drop (the frames' `under`),
against uniform. --by runs them per rotor direction, chef de table or session. --power
prints the spins needed to detect a pocket at 1/34, a sector 20 % too frequent or a dealer's
signature (--signature W@S: S of the throws within W distances; 5@0.1).
See docs/stats.md. Exit status: 0 no test below 1 %, 1 a test below 1 % or a monitor alarm,
2 unusable input.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

BY = ("direction", "croupier", "session")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stats",
        help="wheel-integrity statistics: pockets, sectors, simple chances, a monitor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("traces", nargs="*", metavar="TRACE", help="traces or raw captures")
    p.add_argument("--db", metavar="URL", help="the service's database (rmc serve)")
    p.add_argument("--table", metavar="ID", help="the table's id (with --db)")
    p.add_argument("--since", metavar="T", help="results received from T (ISO 8601 or epoch s)")
    p.add_argument("--by", choices=BY, help="the tests per group as well")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument(
        "--plot", metavar="FILE", help="draw the wheel's counts and the monitor (.png/.svg)"
    )
    p.add_argument("--power", action="store_true", help="spins needed to detect three biases")
    p.add_argument(
        "--signature",
        metavar="W@S",
        help="with --power: the dealer's signature to detect, S (0-1) of the throws within W "
        "(1-39) neighbouring distances (default 5@0.1)",
    )
    p.set_defaults(func=run)


def fail(message: str, as_json: bool) -> int:
    from rmc.console import fail as _fail

    if as_json:
        print(json.dumps({"error": message, "usable": False}))
    return _fail("stats", message)


def run(args: argparse.Namespace) -> int:
    from rmc.outfile import OutputError, check
    from rmc.stats.plots import check_path
    from rmc.stats.sources import SourceError
    from rmc.timestamps import InstantError, parse_instant

    as_json = args.json
    wrong = _options_wrong(args)
    if wrong:
        return fail(wrong, as_json)
    try:
        signature = _signature(args.signature)
        since = None if args.since is None else parse_instant(args.since, "--since")
        if args.plot:
            check_path(args.plot)
            check(args.plot)  # a bad path costs no analysis
    except (InstantError, ValueError, OutputError) as e:
        return fail(str(e), as_json)
    out: dict[str, Any] = {}
    report = None
    if args.traces or args.db:
        try:
            report, sources, notes = _analyse(args, since)
        except (SourceError, ValueError) as e:
            return fail(str(e), as_json)
        out = report
        out["sources"] = sources
        out["notes"] = notes
    if args.power:
        out["power"] = _power(signature)
    if args.plot and report is not None:
        wrong = _plot(report, args.plot)
        if wrong:
            return fail(wrong, as_json)
    if as_json:
        print(json.dumps(out))
    else:
        _show(out, args.plot)
    return 1 if report is not None and _flagged(report) else 0


def _options_wrong(args: argparse.Namespace) -> str | None:
    """What is wrong with the options given together (None: nothing)."""
    if args.traces and args.db:
        return "give traces or --db, not both"
    if args.db and not args.table:
        return "--db needs --table"
    if args.table and not args.db:
        return "--table goes with --db"
    if not args.traces and not args.db and not args.power:
        return "give traces, --db URL --table ID, or --power"
    if args.signature is not None and not args.power:
        return "--signature goes with --power"
    return None


def _power(signature: tuple[int, float]) -> dict[str, Any]:
    """The spins needed to detect each bias."""
    from rmc.stats.power import ALPHA, POWER, power_table

    return {
        "alpha": ALPHA,
        "power": POWER,
        "rows": [r.__dict__ for r in power_table(signature=signature)],
    }


def _plot(report: dict[str, Any], plot: str) -> str | None:
    """Draw the report to `plot`, then drop the monitor's history it needed from the
    report; why it could not be written (None: written)."""
    from rmc.outfile import OutputError, replacing
    from rmc.stats.plots import plot_stats

    try:
        with replacing(plot) as tmp:
            plot_stats(report["all"], tmp, ", ".join(report["sources"]))
    except OutputError as e:
        return str(e)
    except OSError as e:
        return f"cannot write {plot}: {e.strerror or e}"
    report["all"]["monitor"].pop("history", None)
    return None


def _flagged(report: dict[str, Any]) -> bool:
    """Whether a test of the whole, or of a group, is below 1 % (or the monitor alarmed)."""
    return bool(
        report["all"]["flags"]
        or any(g["flags"] for g in report.get("by", {}).get("groups", {}).values())
    )


def _signature(text: str | None) -> tuple[int, float]:
    """--signature W@S -> (W, S); ValueError with a one-line reason."""
    if text is None:
        return (5, 0.1)
    w, at, strength = text.partition("@")
    try:
        width, s = int(w), float(strength)
    except ValueError:
        width, s = 0, float("nan")
    if not at or not 1 <= width <= 39 or not 0 < s <= 1:
        raise ValueError(f"--signature {text!r}: give W@S, W of 1-39 distances, S in (0, 1]")
    return width, s


def _analyse(args: argparse.Namespace, since: int | None) -> tuple[dict, list[str], list[str]]:
    from rmc.stats import analyse, analyse_groups, default_order
    from rmc.stats.report import ALPHA
    from rmc.stats.signature import analyse_signature
    from rmc.stats.signature import notes as signature_notes
    from rmc.stats.sources import SourceError, read_database, read_trace_file

    if args.db:
        srcs = [read_database(args.db, args.table, since)]
    else:
        srcs = [read_trace_file(t) for t in args.traces]
    notes = [n for s in srcs for n in s.notes]
    orders = {s.wheel for s in srcs if s.wheel is not None}
    if len(orders) > 1:
        raise SourceError("the traces name different wheels (pocket orders): give one wheel's")
    order = orders.pop() if orders else default_order()
    results = []
    for s in srcs:
        rs = s.results
        if since is not None and s.kind != "database":
            why = s.missing("time")
            if why is not None:
                raise SourceError(f"--since: {why}")
            rs = [r for r in rs if r.t_us is not None and r.t_us >= since]
        if args.by:
            why = s.missing(args.by)
            if why is not None:
                raise SourceError(f"--by {args.by}: {why}")
            if args.by == "session" and len(srcs) > 1:
                # sessions of different traces are different sessions
                rs = [replace(r, session=f"{s.name}:{r.session}") for r in rs]
        results += rs
    if not results:
        raise SourceError("no result since that time" if since is not None else "no result")
    idx = order.indices(r.number for r in results)
    report: dict[str, Any] = {"all": analyse(idx, order, history=bool(args.plot))}
    sig, flags = analyse_signature(results, order, ALPHA)
    report["all"]["signature"] = sig
    report["all"]["flags"] += flags
    notes += signature_notes(sig)
    if args.by:
        report["by"] = analyse_groups(results, order, args.by)
    return report, [s.name for s in srcs], notes


# --- text -------------------------------------------------------------------------------


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3f}"


def _show(out: dict[str, Any], plot: str | None) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from rmc.console import err_console, out_console

    con = out_console()
    if con.width < 110:
        con = out_console(width=110)  # the pockets' table: three pockets a line
    err = err_console()
    for note in out.get("notes", []):
        err.print(Text(note, style="yellow"))
    if "all" in out:
        r = out["all"]
        con.print(
            Text(
                f"rmc stats — {', '.join(out['sources'])}: {r['n']} results, wheel "
                f"{r['wheel']}, each test at {r['alpha']:.0%}"
            )
        )
        con.print(_pocket_table(r, Table, box))
        con.print(_tests_table(r, Table, box))
        con.print(_signature_table(r["signature"], Table, box))
        if r["pockets"]["small_sample"]:
            con.print(
                Text(
                    f"fewer than 5 results expected per pocket ({r['pockets']['expected']:.1f}):"
                    " the chi-square and G p-values are rough",
                    style="yellow",
                )
            )
        _verdict(con, Text, "", r["flags"])
        if "by" in out:
            _show_groups(con, out["by"], Table, Text, box)
        if plot:
            err.print(Text(f"plot: {plot}"))
    if "power" in out:
        pw = out["power"]
        t = Table(
            title=f"spins needed, at {pw['alpha']:.0%} false alarms and {pw['power']:.0%} power",
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for col in ("bias", "test", "spins", "p90", "how"):
            t.add_column(col, justify="right" if col in ("spins", "p90") else "left")
        for row in pw["rows"]:
            t.add_row(
                row["bias"],
                row["test"],
                f"{row['spins']:,}",
                "" if row["p90"] is None else f"{row['p90']:,}",
                row["method"],
            )
        con.print(t)


def _pocket_table(r: dict, Table: Any, box: Any) -> Any:
    rows = r["pockets"]["table"]
    e = r["pockets"]["expected"]
    t = Table(
        title=f"pockets in the wheel's order (expected {e:.1f} each; p: exact binomial; "
        "Holm: corrected for 39 tests)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    # three pockets a line: 13 lines instead of 39
    for _ in range(3):
        for col in ("pocket", "count", "p", "Holm"):
            t.add_column(col, justify="right")
    for i in range(0, len(rows), 3):
        cells: list[str] = []
        for x in rows[i : i + 3]:
            cells += [x["pocket"], str(x["count"]), _p(x["p"]), _p(x["p_holm"])]
        t.add_row(*cells)
    return t


def _tests_table(r: dict, Table: Any, box: Any) -> Any:
    t = Table(title="tests", title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("test")
    t.add_column("what was seen")
    t.add_column("p", justify="right")
    pk = r["pockets"]
    t.add_row("chi-square (38 dof)", f"χ² = {pk['chi2']['statistic']:.2f}", _p(pk["chi2"]["p"]))
    t.add_row("G-test (38 dof)", f"G = {pk['g']['statistic']:.2f}", _p(pk["g"]["p"]))
    best = min(pk["table"], key=lambda x: x["p_holm"])
    t.add_row(
        "pockets, binomial (Holm)",
        f"lowest: {best['pocket']}, {best['count']} times",
        _p(best["p_holm"]),
    )
    s = r["sectors"]
    t.add_row(
        f"sector scan (widths {s['widths'][0]}–{s['widths'][1]})",
        f"{'-'.join(s['pockets'])}: {s['count']} for {s['expected']:.1f}, z = {s['z']:.2f}",
        _p(s["p"]),
    )
    for c in r["chances"]:
        share = "–" if c["share"] is None else f"{c['share']:.1%}"
        t.add_row(f"{c['name']} share", f"{c['first']} {share} of {c['n']}", _p(c["p"]))
        rn = c["runs"]
        t.add_row(
            f"{c['name']} runs",
            f"{rn['runs']} runs for {rn['expected']:.1f}",
            _p(rn["p"]),
        )
    z = r["zeros"]
    t.add_row("zeros (0, 00, CMC)", f"{z['share']:.2%} for {z['expected']:.2%}", _p(z["p"]))
    m = r.get("monitor")
    if m is not None:
        seen = (
            "no alarm"
            if not m["alarms"]
            else f"{len(m['alarms'])} alarm(s), first at result {m['alarms'][0]['spin']}: "
            f"{m['alarms'][0]['detector']}"
        )
        t.add_row(
            f"monitor (CUSUM > {m['threshold']:.2f})",
            f"{seen} ({m['false_alarm']:.0%} false alarms per {m['horizon']:,} spins)",
            "",
        )
    return t


def _signature_table(sig: dict, Table: Any, box: Any) -> Any:
    from rmc.stats.signature import REFS

    t = Table(
        title="dealer's signature: each result's distance from the pocket under the ball sensor "
        "(pockets on, the ball's way over the rotor; uniform on a fair wheel and hand)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    t.add_column("from")
    t.add_column("n", justify="right")
    t.add_column("test")
    t.add_column("what was seen")
    t.add_column("p", justify="right")
    for ref, (_, name) in REFS.items():
        s = sig[ref]
        if not s["n"]:
            t.add_row(name, "0", "–", "no result with the pocket on record", "")
            continue
        rough = " (rough: few per distance)" if s["small_sample"] else ""
        t.add_row(
            name,
            str(s["n"]),
            "chi-square (38 dof)",
            f"χ² = {s['chi2']['statistic']:.2f}{rough}",
            _p(s["chi2"]["p"]),
        )
        pk = s["peak"]
        span = f"{pk['distances'][0]}–{pk['distances'][-1]}"
        t.add_row(
            "",
            "",
            f"peak scan (widths {pk['widths'][0]}–{pk['widths'][1]})",
            f"distances {span}: {pk['count']} for {pk['expected']:.1f}, z = {pk['z']:.2f}",
            _p(pk["p"]),
        )
    return t


def _verdict(con: Any, Text: Any, prefix: str, flags: list[str]) -> None:
    if flags:
        con.print(Text(f"{prefix}below 1 %: " + ", ".join(flags), style="red"))
    else:
        con.print(Text(f"{prefix}no test below 1 %", style="green"))


def _show_groups(con: Any, by: dict, Table: Any, Text: Any, box: Any) -> None:
    t = Table(title=f"by {by['by']}", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("group", "n", "χ² p", "G p", "Holm p", "scan p", "zeros p", "signature p", "flags"):
        t.add_column(col, justify="left" if col in ("group", "flags") else "right")
    for name, g in by["groups"].items():
        pk = g["pockets"]
        t.add_row(
            name,
            str(g["n"]),
            _p(pk["chi2"]["p"]),
            _p(pk["g"]["p"]),
            _p(min(x["p_holm"] for x in pk["table"])),
            _p(g["sectors"]["p"]),
            _p(g["zeros"]["p"]),
            _p(_signature_p(g["signature"])),
            ", ".join(g["flags"]) or "–",
        )
    con.print(t)
    h = by["homogeneity"]
    if h is None:
        con.print(Text("one group: no comparison between groups"))
    else:
        rough = " (few results per cell: rough)" if h["small_sample"] else ""
        con.print(
            Text(
                f"same distribution in every group? chi-square {h['statistic']:.2f}, "
                f"{h['dof']} dof, p = {_p(h['p'])}{rough}"
            )
        )


def _signature_p(sig: dict) -> float | None:
    """The lowest p of a group's signature tests (None: no result with the fields)."""
    ps = [sig[r][t]["p"] for r in ("first", "drop") if sig[r]["n"] for t in ("chi2", "peak")]
    return min(ps) if ps else None
