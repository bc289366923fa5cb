"""`rmc demo`: play a whole table session end to end on the virtual board (docs/demo.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

EXIT_FAIL = 1
EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="play a whole simulated table session on the virtual board, end to end",
        description="Compile the firmware with mpy-cross, deploy it with mpremote onto the "
        "virtual board, play a simulated session with bets from several players, record and "
        "check the frame line, settle every spin on the firmware's results, write a report.",
    )
    p.add_argument("--spins", type=int, default=30, help="launches in the session (default 30)")
    p.add_argument("--seed", type=int, default=2019, help="simulator and bets seed")
    p.add_argument("--out", default="build/demo", metavar="DIR", help="output folder")
    p.add_argument(
        "--speed",
        type=float,
        default=0.0,
        help="virtual board speed: 0 as fast as the firmware runs (default), X times real time",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmc.console import fail, out_console, stdout_broken
    from rmc.demo.bets import DemoBetsError
    from rmc.demo.deploy import DeployError
    from rmc.demo.run import DemoConfig, DemoError
    from rmc.demo.session import DemoSessionError, default_scenarios
    from rmc.demo.show import run_and_show
    from rmc.vboard import VirtualBoardError

    try:
        if args.speed < 0:
            raise DemoSessionError(f"--speed must be >= 0, not {args.speed:g}")
        if args.seed < 0:
            raise DemoSessionError(f"--seed must be a non-negative integer, not {args.seed}")
        default_scenarios(args.spins)  # checks the spin count before anything starts
        if Path(args.out).exists() and not Path(args.out).is_dir():
            raise DemoSessionError(f"--out {args.out} exists and is not a folder")
        cfg = DemoConfig(spins=args.spins, seed=args.seed, out=Path(args.out), speed=args.speed)
    except (DemoSessionError, ValueError) as e:
        return fail("demo", str(e), EXIT_BAD_INPUT)
    try:
        _, summary = run_and_show(cfg, out_console())
    except (DemoError, DeployError, DemoBetsError, VirtualBoardError, OSError) as e:
        if isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and stdout_broken()):
            raise  # the terminal's output lost: rmc.cli says so, exit 2
        return fail("demo", str(e), EXIT_FAIL)
    return 0 if summary.ok else EXIT_FAIL
