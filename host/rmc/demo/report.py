"""The demo's verdict and report: checks, agreement with the truth, money, plots, Markdown.

Everything here is computed from files and records, not from the live run's memory alone:
the recorded trace and the raw capture are checked by the wire's checker (`rmc.checker`), the
frames are compared with the simulator's truth by the rig's comparison (`rmc.rig.compare`),
and the trace's bets are settled a second time by `rmc.replay.settle_bets` (bets assigned to
spins from their recorded times only): its totals must equal the live settlement's.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from rmc.checker import Report, check_bytes
from rmc.demo.run import DemoRun, SpinPlay
from rmc.frames import FrameError, decode
from rmc.money import EXACT, fmt, total
from rmc.rig.compare import Comparison, Tolerances, compare
from rmc.settle import Statement
from rmcfw import numbers, proto

# The rnvp lead is reported, not required per run (issue 6 asks 9 in 10 within the rig's
# window over many spins: ±0.5 s, or 20 % of the asked lead where wider, docs/rig.md;
# docs/firmware.md says where the predictor stands).
TOLERANCES = Tolerances(rnvp_within_fraction=0.0)


@dataclass
class PlayerTotal:
    bets: int = 0
    staked: Decimal = Decimal(0)
    paid: Decimal = Decimal(0)

    @property
    def net(self) -> Decimal:
        """What the player won (positive) or lost (negative) over the session."""
        return EXACT.subtract(self.paid, self.staked)


@dataclass
class RnvpStats:
    spins: int = 0  # valid spins with a call and a true drop
    leads_s: list[float] = field(default_factory=list)  # true drop - call, seconds
    late: list[int] = field(default_factory=list)  # truth spin numbers called after the drop
    within: int = 0  # calls within the rig's window of the asked instant (TOLERANCES)
    asked: int = 0
    why: dict[str, int] = field(default_factory=dict)

    def quantiles(self) -> tuple[float, float, float] | None:
        if len(self.leads_s) < 2:
            return None
        q = statistics.quantiles(self.leads_s, n=10, method="inclusive")
        return q[0], statistics.median(self.leads_s), q[-1]


@dataclass
class Summary:
    spins: int
    results: int
    voids: list[tuple[int, str]]
    incidents: list[int]
    faults: list[dict[str, str]]
    players: dict[str, PlayerTotal]
    staked: Decimal
    paid: Decimal
    unsettled: Decimal  # stakes still on the tapis at the end (a voided last spin)
    placed: Decimal  # every stake placed in the session
    trace_check: Report
    capture_check: Report
    comparison: Comparison
    agree: int
    compared: int
    rnvp: RnvpStats
    replay_staked: Decimal
    replay_paid: Decimal
    replay_refused: list[dict[str, Any]] = field(default_factory=list)  # bets the trace refuses
    problems: list[str] = field(default_factory=list)

    @property
    def house(self) -> Decimal:
        return EXACT.subtract(self.staked, self.paid)

    @property
    def conserved(self) -> bool:
        """Money neither made nor lost: players' nets and the house's sum to zero, every
        stake placed is settled or still on the tapis, and the trace settles the same."""
        nets = total(p.net for p in self.players.values())
        return (
            EXACT.add(nets, self.house) == 0
            and EXACT.add(self.staked, self.unsettled) == self.placed
            and (self.replay_staked, self.replay_paid) == (self.staked, self.paid)
        )

    @property
    def ok(self) -> bool:
        return not self.problems


def statements(run: DemoRun) -> list[tuple[SpinPlay, Statement]]:
    return [(sp, sp.statement) for sp in run.spins if sp.statement is not None]


def summarize(run: DemoRun) -> Summary:
    from rmc.replay import settle_bets
    from rmc.trace import read_trace

    trace_check, _, _ = check_bytes(run.trace_path.read_bytes())
    capture_check, _, _ = check_bytes(run.capture_path.read_bytes())
    cmp = compare(run.session.truth, run.timed, TOLERANCES)
    players: dict[str, PlayerTotal] = {}
    for _, st in statements(run):
        for p in st.payments:
            pt = players.setdefault(p.player, PlayerTotal())
            pt.bets += 1
            pt.staked = EXACT.add(pt.staked, p.bet.stake)
            pt.paid = EXACT.add(pt.paid, p.paid)
    staked = total(st.staked for _, st in statements(run))
    paid = total(st.paid for _, st in statements(run))
    placed = total(b.stake for r in run.rounds for b in r.bets)
    unsettled = total(b.stake for b in run.unsettled)
    replay = settle_bets(read_trace(run.trace_path), table_file=run.config.table_file)
    agree = sum(1 for c in cmp.spins if c.got == [c.expected])
    s = Summary(
        spins=len(run.spins),
        results=sum(1 for sp in run.spins if sp.result is not None),
        voids=[(sp.spin, sp.void) for sp in run.spins if sp.void is not None],
        incidents=[sp.spin for sp in run.spins if sp.void == proto.V_OBJECT],
        faults=run.faults,
        players=players,
        staked=staked,
        paid=paid,
        unsettled=unsettled,
        placed=placed,
        trace_check=trace_check,
        capture_check=capture_check,
        comparison=cmp,
        agree=agree,
        compared=len(cmp.spins),
        rnvp=rnvp_stats(cmp),
        replay_staked=replay.staked,
        replay_paid=replay.paid,
        replay_refused=replay.refused,
    )
    s.problems = problems(run, s)
    return s


def rnvp_stats(cmp: Comparison) -> RnvpStats:
    r = RnvpStats(within=cmp.rnvp_within, asked=cmp.rnvp_asked)
    for c in cmp.spins:
        if c.rnvp_ms is None or c.drop_ms is None or not c.expected.startswith("result:"):
            continue
        r.spins += 1
        lead = (c.drop_ms - c.rnvp_ms) / 1000
        r.leads_s.append(lead)
        if lead < 0:
            r.late.append(c.spin)
    return r


def problems(run: DemoRun, s: Summary) -> list[str]:
    """Every way the session fell short; empty when everything checks."""
    out: list[str] = []
    for c in s.comparison.spins:
        out.extend(f"spin {c.spin}: {p}" for p in c.problems)
    out.extend(s.comparison.problems)
    if not s.trace_check.clean:
        out.append("check: the recorded trace is not clean")
        out.extend(f"check: {v['rule']} ({v['detail']})" for v in s.trace_check.violations)
    if not s.capture_check.clean and s.trace_check.clean:
        out.append("check: the raw capture is not clean")
    if not s.conserved:
        out.append(
            f"settlement: not conserved (staked {s.staked}, paid {s.paid}, placed {s.placed}, "
            f"on the tapis {s.unsettled}; replay {s.replay_staked}/{s.replay_paid})"
        )
    # Settled again from the trace alone, no bet may come out refused (placed after its
    # spin's « rien ne va plus », or unacceptable to the engine).
    out.extend(
        f"bet {r.get('bet')} refused from the trace: {r.get('reason')}" for r in s.replay_refused
    )
    if s.spins != s.compared:
        out.append(f"{s.spins} launches reported, the simulator made {s.compared}")
    out.extend(f"board: {e.get('event')} {e.get('message', '')}" for e in run.board_events)
    return out


# --- plots -----------------------------------------------------------------------------


def frame_series(run: DemoRun) -> dict[str, list[tuple[float, dict[str, str]]]]:
    """(session time s, fields) of the REV, RNVP, DROP and RES frames, first copy only."""
    out: dict[str, list[tuple[float, dict[str, str]]]] = {
        proto.T_REV: [],
        proto.T_RNVP: [],
        proto.T_DROP: [],
        proto.T_RESULT: [],
    }
    seen: set[tuple[int, int]] = set()
    for t_ms, line in run.timed:
        start = line.find(b"$")
        if start < 0:
            continue
        try:
            f = decode(line[start:])
        except FrameError:
            continue
        if f.type in out and f.key not in seen:
            seen.add(f.key)
            out[f.type].append((t_ms / 1000, f.fields))
    return out


def plot_revolutions(run: DemoRun, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fs = frame_series(run)
    drops = {fl["spin"]: t for t, fl in fs[proto.T_DROP]}
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(11, 7.5), height_ratios=(1, 1.2))
    by_spin: dict[str, list[tuple[float, float]]] = {}
    for t, fl in fs[proto.T_REV]:
        by_spin.setdefault(fl["spin"], []).append((t, int(fl["period_us"]) / 1e6))
    for pts in by_spin.values():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ".-", color="tab:blue", ms=3, lw=0.8)
    for t, _ in fs[proto.T_RNVP]:
        ax.axvline(t, color="tab:red", lw=0.8, ls="--")
    for t, _ in fs[proto.T_DROP]:
        ax.axvline(t, color="black", lw=0.8, ls=":")
    ax.set_xlabel("session time (s)")
    ax.set_ylabel("ball revolution period (s)")
    ax.set_title(
        "REV frames over the session; red dashed: « rien ne va plus » (RNVP), "
        "black dotted: drop (DROP)"
    )
    # Each spin against its own drop: how far ahead the call came.
    rnvp = {fl["spin"]: (t, fl.get("why", "")) for t, fl in fs[proto.T_RNVP]}
    for spin, pts in by_spin.items():
        if spin not in drops:
            continue
        d = drops[spin]
        bx.plot([p[0] - d for p in pts], [p[1] for p in pts], "-", color="tab:blue", alpha=0.5)
        if spin in rnvp:
            t, why = rnvp[spin]
            y = min(pts, key=lambda p: abs(p[0] - t))[1]
            bx.plot([t - d], [y], "v", color="tab:red" if why == "fit" else "tab:orange", ms=7)
    bx.axvline(0, color="black", lw=1, ls=":")
    bx.axhline(1.4, color="grey", lw=0.8, ls="--")
    bx.text(bx.get_xlim()[0], 1.41, " 1.4 s limit", color="grey", va="bottom", fontsize=8)
    bx.set_xlabel("time from the drop (DROP frame) (s)")
    bx.set_ylabel("revolution period (s)")
    bx.set_title("every spin aligned on its drop; ▼ the call (red: predicted fit, orange: other)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_results(run: DemoRun, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(numbers.NUMBERS)
    counts = dict.fromkeys(labels, 0)
    for sp in run.spins:
        if sp.result is not None:
            counts[sp.result] += 1
    colours = {numbers.VERT: "tab:green", "rouge": "tab:red", "noir": "black"}
    fig, ax = plt.subplots(figsize=(11, 3.6))
    ax.bar(
        range(len(labels)),
        [counts[x] for x in labels],
        color=[colours.get(numbers.colour(x), "grey") for x in labels],
    )
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylabel("results")
    n = sum(counts.values())
    ax.set_title(f"results reported by the firmware ({n} valid spins)")
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --- Markdown ---------------------------------------------------------------------------


def _q(stats: RnvpStats) -> str:
    q = stats.quantiles()
    if q is None:
        return "–"
    return f"p10 {q[0]:.2f} s, median {q[1]:.2f} s, p90 {q[2]:.2f} s"


def outcome_text(sp: SpinPlay) -> str:
    if sp.result is not None:
        return sp.result
    if sp.void is not None:
        return f"annulé ({sp.void})"
    return "–"


def write_markdown(run: DemoRun, s: Summary, path: Path, plots: list[Path]) -> Path:
    lines = [
        *_md_verdict(run, s),
        *_md_figures(run, s),
        *_md_spins(run, s),
        *_md_players(s),
        *_md_rnvp(run, s),
        *_md_session(run, s),
        *_md_files(run, plots),
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _md_verdict(run: DemoRun, s: Summary) -> list[str]:
    """The title, what was played, and the verdict."""
    cfg = run.config
    scenarios = ", ".join(f"{n}@{k}" for k, n in run.session.scenarios.items()) or "–"
    return [
        "# Roulette Monte-Carlo — demo session",
        "",
        f"Seed {cfg.seed}, {cfg.spins} launches simulated by `rmc.sim` "
        f"(scenarios: {scenarios}), "
        f"played by the firmware on the virtual board at speed {cfg.speed:g} "
        f"({'as fast as the firmware runs' if cfg.speed == 0 else 'times real time'}).",
        "",
        f"**Verdict: {'PASS' if s.ok else 'FAIL'}** — check "
        f"{'clean' if s.trace_check.clean else 'NOT clean'}, results against the truth "
        f"{s.agree}/{s.compared}, settlement {'conserved' if s.conserved else 'NOT conserved'}.",
        "",
    ]


def _md_figures(run: DemoRun, s: Summary) -> list[str]:
    """The times, sizes and counts of the run, as a table."""
    tm = run.timings
    ratio = run.virtual_s / tm["session"] if tm.get("session") else 0.0
    return [
        "## Figures",
        "",
        "| | |",
        "|---|---|",
        f"| wall time, total | {tm.get('total', 0):.1f} s |",
        f"| mpy-cross | {tm.get('build', 0):.1f} s ({run.mpy_bytes} bytes of .mpy) |",
        f"| mpremote deploy | {tm.get('deploy', 0):.1f} s |",
        f"| table session | {tm.get('session', 0):.1f} s wall for {run.virtual_s:.0f} s "
        f"virtual ({ratio:.1f} simulated s per wall s) |",
        f"| launches / results / voids | {s.spins} / {s.results} / {len(s.voids)} |",
        f"| frames (valid) | {s.trace_check.valid} |",
        f"| RESEND asked / commands sent | {run.link_stats.get('resends_asked')} / "
        f"{run.link_stats.get('commands')} |",
        "",
    ]


def _md_spins(run: DemoRun, s: Summary) -> list[str]:
    """Every spin: the firmware's outcome, the truth, the call, the money."""
    lines = [
        "## Spins",
        "",
        "| spin | firmware | truth | agree | rnvp | bets (carried) | staked | paid | house |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    checks = {c.spin: c for c in s.comparison.spins}
    for sp in run.spins:
        c = checks.get(sp.launch_no)
        st = sp.statement
        agree = "✓" if c is not None and c.got == [c.expected] else "✗"
        lines.append(
            f"| {sp.spin} | {outcome_text(sp)} | {sp.truth or '–'} | {agree} | "
            f"{sp.rnvp_why or '–'} | {len(sp.bets)} ({sp.carried}) | "
            f"{fmt(st.staked) if st else '–'} | {fmt(st.paid) if st else '–'} | "
            f"{fmt(st.house) if st else ('carried' if sp.bets else '–')} |"
        )
    return lines


def _md_players(s: Summary) -> list[str]:
    """Each player's bets and money, then the house's."""
    lines = [
        "",
        "## Players",
        "",
        "| player | bets | staked | paid | net |",
        "|---|---|---|---|---|",
    ]
    for name, p in s.players.items():
        lines.append(f"| {name} | {p.bets} | {fmt(p.staked)} | {fmt(p.paid)} | {p.net:+} |")
    lines.append(f"| **house** | | {fmt(s.staked)} | {fmt(s.paid)} | {s.house:+} |")
    return lines


def _md_rnvp(run: DemoRun, s: Summary) -> list[str]:
    """The calls' leads against the true drops, and against the lead asked."""
    r = s.rnvp
    return [
        "",
        "## « Rien ne va plus »",
        "",
        f"Lead (true drop − call) over {r.spins} valid spins: {_q(r)}; "
        f"late calls (after the true drop): {len(r.late)}"
        + (f" (spins {', '.join(map(str, r.late))})" if r.late else "")
        + f"; within ±{TOLERANCES.rnvp_window_s(run.config.rnvp_lead_s):g} s of the asked instant"
        f" ({run.config.rnvp_lead_s:g} s before the "
        f"drop): {r.within}/{r.asked}.",
    ]


def _md_session(run: DemoRun, s: Summary) -> list[str]:
    """The session's log and the problems found."""
    return [
        "",
        "## Session",
        "",
        *[f"- {x}" for x in run.log],
        "",
        "## Problems",
        "",
        *([f"- {p}" for p in s.problems] or ["none"]),
    ]


def _md_files(run: DemoRun, plots: list[Path]) -> list[str]:
    """The plots, and what the other files hold."""
    return [
        "",
        "## Plots",
        "",
        *[f"![{p.stem}]({p.name})" for p in plots],
        "",
        f"Files: `{run.trace_path.name}` (the recorded trace: frames, commands, bets, then the "
        f"simulator's truth), `{run.capture_path.name}` (raw bytes of the frame line). "
        "`rmc check` reads either.",
        "",
    ]


def write_report(run: DemoRun, s: Summary) -> list[Path]:
    out = run.config.out
    plots = [
        plot_revolutions(run, out / "revolutions.png"),
        plot_results(run, out / "results.png"),
    ]
    return [write_markdown(run, s, out / "report.md", plots), *plots]


def player_lines(st: Statement) -> list[tuple[str, str]]:
    """(player, text) for the croupier's payments of a statement, in paying order; each
    player's losing bets summed on one line after their payments. A plaque or value chips
    on a multiple chance by exception (decree 1-6) is named as such."""
    wins: list[tuple[str, str]] = []
    lost: dict[str, list[Decimal]] = {}
    for p in st.payments:
        note = f" ({p.bet.chip} par exception)" if p.bet.exception else ""
        if p.announcement is not None:
            wins.append((p.player, p.announcement + note))
        elif note:
            wins.append((p.player, f"{p.bet.position.name}{note} : perd {fmt(p.bet.stake)}"))
        else:
            lost.setdefault(p.player, []).append(p.bet.stake)
    out: list[tuple[str, str]] = []
    for player in dict.fromkeys(p.player for p in st.payments):
        out.extend(x for x in wins if x[0] == player)
        if player in lost:
            stakes = lost[player]
            out.append((player, f"perd {len(stakes)} mise(s), {fmt(total(stakes))}"))
    return out


def to_json(s: Summary) -> dict[str, Any]:
    return {
        "ok": s.ok,
        "spins": s.spins,
        "results": s.results,
        "voids": s.voids,
        "agree": s.agree,
        "compared": s.compared,
        "staked": fmt(s.staked),
        "paid": fmt(s.paid),
        "house": fmt(s.house),
        "conserved": s.conserved,
        "check_clean": s.trace_check.clean,
        "problems": s.problems,
    }
