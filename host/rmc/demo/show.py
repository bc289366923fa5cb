"""The demo on the terminal (rich): a progress bar, each spin's announcements, the summary."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rmc.demo.report import Summary, _q, player_lines, write_report
from rmc.demo.run import DemoConfig, DemoRun, SpinPlay, play
from rmc.money import fmt
from rmc.settle import announce_result

VOID_FR = {
    "same_dir": "bille lancée dans le sens du cylindre",
    "not_reversed": "cylindre non inversé",
    "few_revs": "moins de 4 tours de bille",
    "object": "objet dans le cylindre",
    "ball_out": "bille sortie du cylindre",
    "sensors": "capteurs",
}


def spin_block(sp: SpinPlay) -> list[str]:
    """What the croupier says for one spin, as console markup lines."""
    truth = sp.truth or "?"
    mine = f"result:{sp.result}" if sp.result is not None else f"void:{sp.void}"
    agree = "[green]✓ vérité[/]" if truth == mine else f"[red]✗ vérité {truth}[/]"
    rnvp = f"rnvp {sp.rnvp_why}" if sp.rnvp_why else "pas de rnvp"
    head = f"[bold]Coup {sp.spin}[/] "
    if sp.result is not None:
        out = [f"{head}« {announce_result(sp.result)} »  {agree}  [dim]{rnvp}[/]"]
        st = sp.statement
        if st is None:
            out.append("   aucune mise")
            return out
        if sp.carried:
            out.append(f"   [dim]dont {sp.carried} mise(s) restée(s) du coup annulé[/]")
        for player, text in player_lines(st):
            colour = "dim" if text.startswith("perd") else "cyan"
            colour = "magenta" if "par exception" in text else colour
            out.append(f"   [{colour}]{player:7} {text}[/]")
        out.append(f"   [dim]misé {fmt(st.staked)}, payé {fmt(st.paid)}, banque {st.house:+}[/]")
        return out
    reason = VOID_FR.get(sp.void or "", sp.void)
    out = [f"{head}[yellow]annulé: {reason}[/]  {agree}  [dim]{rnvp}[/]"]
    if sp.bets:
        out.append(
            f"   [yellow]les {len(sp.bets)} mise(s) restent sur le tapis pour le coup suivant[/]"
        )
    return out


def summary_tables(run: DemoRun, s: Summary) -> list[Table]:
    t = Table(title="Séance", box=box.SIMPLE_HEAD, title_justify="left", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("coups (lancers)", str(s.spins))
    t.add_row("résultats", str(s.results))
    voids = ", ".join(f"{n}: {r}" for n, r in s.voids) or "–"
    t.add_row("annulés", f"{len(s.voids)} ({voids})")
    t.add_row("incidents", ", ".join(f"coup {n}" for n in s.incidents) or "–")
    faults = ", ".join(f"{f.get('code')} on={f.get('on')}" for f in s.faults) or "–"
    t.add_row("faults", faults)
    t.add_row(
        "check (trace / capture)",
        f"{_verdict(s.trace_check.clean)} / {_verdict(s.capture_check.clean)}"
        f"  ({s.trace_check.valid} frames, {len(s.trace_check.violations)} violations)",
    )
    t.add_row(
        "résultats vs vérité",
        f"{'[green]' if s.agree == s.compared else '[red]'}{s.agree}/{s.compared}[/]",
    )
    r = s.rnvp
    t.add_row(
        "« rien ne va plus »",
        f"lead {_q(r)}; late {len(r.late)}; ±0.5 s of asked {r.within}/{r.asked}",
    )
    t.add_row("settlement", "[green]conserved[/]" if s.conserved else "[red]NOT conserved[/]")
    tm = run.timings
    t.add_row(
        "wall time",
        f"{tm.get('total', 0):.1f} s (deploy {tm.get('deploy', 0):.1f} s, table "
        f"{tm.get('session', 0):.1f} s for {run.virtual_s:.0f} virtual s)",
    )
    p = Table(title="Joueurs", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("joueur", "mises", "misé", "payé", "net"):
        p.add_column(col, justify="left" if col == "joueur" else "right")
    for name, pt in s.players.items():
        p.add_row(name, str(pt.bets), fmt(pt.staked), fmt(pt.paid), f"{pt.net:+}")
    p.add_row("[bold]banque[/]", "", fmt(s.staked), fmt(s.paid), f"[bold]{s.house:+}[/]")
    if s.unsettled:
        p.caption = f"{fmt(s.unsettled)} encore sur le tapis (coup annulé en fin de séance)"
    return [t, p]


def _verdict(clean: bool) -> str:
    return "[green]clean[/]" if clean else "[red]NOT clean[/]"


def run_and_show(cfg: DemoConfig, console: Console) -> tuple[DemoRun, Summary]:
    from rmc.demo.report import summarize

    console.print(
        f"[bold]rmc demo[/] — seed {cfg.seed}, {cfg.spins} spins, virtual board speed "
        f"{cfg.speed:g}, output {cfg.out}"
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} coups"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("préparation", total=cfg.spins)

        def on_phase(name: str) -> None:
            progress.update(task, description=name)

        def on_spin(sp: SpinPlay) -> None:
            for line in spin_block(sp):
                progress.console.print(line, highlight=False)
            progress.update(task, completed=sp.launch_no)

        def on_event(text: str) -> None:
            progress.console.print(f"[magenta]{text}[/]", highlight=False)

        run = play(cfg, on_spin, on_phase, on_event)
        progress.update(task, description="report")
        s = summarize(run)
        files = write_report(run, s)
    for tb in summary_tables(run, s):
        console.print(tb)
    for p in s.problems:
        console.print(f"[red]problem:[/] {p}", highlight=False)
    console.print(
        f"Files: {run.trace_path}, {run.capture_path}, " + ", ".join(str(f) for f in files)
    )
    console.print("[green]PASS[/]" if s.ok else "[red]FAIL[/] (see problems above)")
    return run, s
