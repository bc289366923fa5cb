"""The demo on the terminal (rich): a progress bar, each spin's announcements, the summary."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

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


def player_line(player: str, text: str) -> Text:
    """One player's payment as the croupier announces it; the name is printed as is."""
    colour = "dim" if text.startswith("perd") else "cyan"
    colour = "magenta" if "par exception" in text else colour
    return Text(f"   {player:7} {text}", style=colour)


def spin_block(sp: SpinPlay) -> list[Text]:
    """What the croupier says for one spin, as styled lines (Text: nothing read as markup)."""
    truth = sp.truth or "?"
    mine = f"result:{sp.result}" if sp.result is not None else f"void:{sp.void}"
    agree = Text("✓ vérité", style="green") if truth == mine else Text(f"✗ vérité {truth}", "red")
    rnvp = Text(f"rnvp {sp.rnvp_why}" if sp.rnvp_why else "pas de rnvp", style="dim")
    head = Text.assemble((f"Coup {sp.spin}", "bold"), " ")
    if sp.result is not None:
        out = [Text.assemble(head, f"« {announce_result(sp.result)} »  ", agree, "  ", rnvp)]
        st = sp.statement
        if st is None:
            out.append(Text("   aucune mise"))
            return out
        if sp.carried:
            out.append(Text(f"   dont {sp.carried} mise(s) restée(s) du coup annulé", "dim"))
        for player, text in player_lines(st):
            out.append(player_line(player, text))
        out.append(
            Text(f"   misé {fmt(st.staked)}, payé {fmt(st.paid)}, banque {st.house:+}", "dim")
        )
        return out
    reason = VOID_FR.get(sp.void or "", sp.void)
    out = [Text.assemble(head, (f"annulé: {reason}", "yellow"), "  ", agree, "  ", rnvp)]
    if sp.bets:
        out.append(
            Text(
                f"   les {len(sp.bets)} mise(s) restent sur le tapis pour le coup suivant",
                "yellow",
            )
        )
    return out


def summary_tables(run: DemoRun, s: Summary) -> list[Table]:
    t = Table(title="Séance", box=box.SIMPLE_HEAD, title_justify="left", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("coups (lancers)", str(s.spins))
    t.add_row("résultats", str(s.results))
    voids = ", ".join(f"{n}: {r}" for n, r in s.voids) or "–"
    t.add_row("annulés", Text(f"{len(s.voids)} ({voids})"))
    t.add_row("incidents", ", ".join(f"coup {n}" for n in s.incidents) or "–")
    faults = ", ".join(f"{f.get('code')} on={f.get('on')}" for f in s.faults) or "–"
    t.add_row("faults", Text(faults))
    t.add_row(
        "check (trace / capture)",
        Text.assemble(
            _verdict(s.trace_check.clean),
            " / ",
            _verdict(s.capture_check.clean),
            f"  ({s.trace_check.valid} frames, {len(s.trace_check.violations)} violations)",
        ),
    )
    t.add_row(
        "résultats vs vérité",
        Text(f"{s.agree}/{s.compared}", "green" if s.agree == s.compared else "red"),
    )
    r = s.rnvp
    t.add_row(
        "« rien ne va plus »",
        Text(f"lead {_q(r)}; late {len(r.late)}; ±0.5 s of asked {r.within}/{r.asked}"),
    )
    t.add_row(
        "settlement",
        Text("conserved", "green") if s.conserved else Text("NOT conserved", "red"),
    )
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
        p.add_row(Text(name), str(pt.bets), fmt(pt.staked), fmt(pt.paid), f"{pt.net:+}")
    p.add_row(Text("banque", "bold"), "", fmt(s.staked), fmt(s.paid), Text(f"{s.house:+}", "bold"))
    if s.unsettled:
        p.caption = f"{fmt(s.unsettled)} encore sur le tapis (coup annulé en fin de séance)"
    return [t, p]


def _verdict(clean: bool) -> Text:
    return Text("clean", "green") if clean else Text("NOT clean", "red")


def heading(cfg: DemoConfig) -> Text:
    """The first line: what is played, and where its files go (the user's path, as is)."""
    return Text.assemble(
        ("rmc demo", "bold"),
        f" — seed {cfg.seed}, {cfg.spins} spins, virtual board speed {cfg.speed:g}, "
        f"output {cfg.out}",
    )


def run_and_show(cfg: DemoConfig, console: Console) -> tuple[DemoRun, Summary]:
    """Play the demo on `console` (rmc.console.out_console: user text printed literally)."""
    from rmc.demo.report import summarize

    console.print(heading(cfg))
    with Progress(
        TextColumn("{task.description}", markup=False),
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
                progress.console.print(line)
            progress.update(task, completed=sp.launch_no)

        def on_event(text: str) -> None:
            progress.console.print(Text(text, "magenta"))

        run = play(cfg, on_spin, on_phase, on_event)
        progress.update(task, description="report")
        s = summarize(run)
        files = write_report(run, s)
    for tb in summary_tables(run, s):
        console.print(tb)
    for p in s.problems:
        console.print(Text.assemble(("problem:", "red"), f" {p}"))
    console.print(
        Text(f"Files: {run.trace_path}, {run.capture_path}, " + ", ".join(str(f) for f in files))
    )
    console.print(
        Text("PASS", "green") if s.ok else Text.assemble(("FAIL", "red"), " (see problems above)")
    )
    return run, s
