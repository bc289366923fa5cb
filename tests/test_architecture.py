"""The rules that keep the project's parts apart and readable (docs/architecture.md).

Every module's imports are read from its source (no module is imported), resolved to the
project's modules, and held against the rules below. A rule broken names the module, the
import and the rule, so the fix is plain.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOST = ROOT / "host" / "rmc"
FIRMWARE = ROOT / "firmware"

# What the firmware core may import: MicroPython's own modules and itself. Never `machine`
# (the board module binds the pins and hands them in), never the host.
FIRMWARE_CORE_MAY = {"array", "binascii", "hashlib", "json", "math", "micropython", "os", "rmcfw"}

# The settlement: pure arithmetic on the decree's bets, no I/O, no terminal, no command line.
SETTLEMENT = {"rmc.settle", "rmc.bets", "rmc.money", "rmc.layout", "rmc.limits"}
SETTLEMENT_MAY = SETTLEMENT | {"rmcfw"}

# The wire: frames, traces, the checker and the link. They know nothing of the applications
# built on them.
WIRE = {"rmc.frames", "rmc.trace", "rmc.checker", "rmc.link"}
WIRE_MUST_NOT = {
    "rmc.serve", "rmc.sim", "rmc.rig", "rmc.demo", "rmc.vboard", "rmc.settle", "rmc.edge",
}  # fmt: skip

# The command line is the top: nothing below it imports it.
TOP = {"rmc.cli", "rmc.__main__", "rmc.commands"}

# The table service runs tables; the test benches, the virtual board and the attacker
# (rmc.edge, a measuring tool) are not part of it.
SERVICE_MUST_NOT = {"rmc.demo", "rmc.rig", "rmc.vboard", "rmc.edge"}

THIRD_PARTY_UI = {"rich", "matplotlib", "argparse"}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    name: str  # what it imports, dotted (absolute)
    line: int


def module_name(path: Path, base: Path, package: str) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts]) if parts else package


def imports_of(source: str, module: str, is_package: bool = False) -> list[Import]:
    """Every import in `source`, resolved to absolute names (relative ones too)."""
    out: list[Import] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [Import(module, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split(".")
                keep = len(here) - node.level + (1 if is_package else 0)
                base = ".".join(here[:keep])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            # `from pkg import mod` imports pkg.mod when mod is a module: count both
            out.append(Import(module, name, node.lineno))
            out += [Import(module, f"{name}.{a.name}", node.lineno) for a in node.names]
    return out


def host_imports() -> list[Import]:
    out = []
    for p in sorted(HOST.rglob("*.py")):
        if "migrations" in p.parts:
            continue
        name = module_name(p, HOST, "rmc")
        out += imports_of(p.read_text(), name, p.name == "__init__.py")
    return out


def firmware_core_imports() -> list[Import]:
    out = []
    for p in sorted((FIRMWARE / "rmcfw").glob("*.py")):
        out += imports_of(p.read_text(), module_name(p, FIRMWARE / "rmcfw", "rmcfw"))
    return out


def within(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _command(name: str) -> str | None:
    """The sub-command module that name is in (rmc.commands.X), or None."""
    parts = name.split(".")
    return ".".join(parts[:3]) if parts[:2] == ["rmc", "commands"] and len(parts) > 2 else None


def broken(host: list[Import], firmware: list[Import]) -> list[str]:
    """Every rule broken, one line each."""
    out = []
    for i in firmware:
        if not within(i.name, FIRMWARE_CORE_MAY):
            out.append(f"{i.module}:{i.line} imports {i.name}: the firmware core may import")
    for i in host:
        where = f"{i.module}:{i.line} imports {i.name}"
        if within(i.name, TOP) and not within(i.module, TOP):
            out.append(f"{where}: only the command line imports the command line")
        if _command(i.module) and _command(i.name) and _command(i.name) != _command(i.module):
            out.append(f"{where}: a command uses no other command; shared helpers live below")
        if within(i.module, SETTLEMENT) and (
            within(i.name, {"rmc"}) and not within(i.name, SETTLEMENT_MAY) and i.name != "rmc"
        ):
            out.append(f"{where}: the settlement imports only the settlement")
        if within(i.module, SETTLEMENT) and within(i.name, THIRD_PARTY_UI):
            out.append(f"{where}: the settlement has no user interface")
        if within(i.module, WIRE) and within(i.name, WIRE_MUST_NOT):
            out.append(f"{where}: the wire knows nothing of what is built on it")
        if within(i.module, {"rmc.serve"}) and within(i.name, SERVICE_MUST_NOT):
            out.append(f"{where}: the table service does not use the test benches")
    return out


def test_the_parts_keep_to_their_import_rules():
    problems = broken(host_imports(), firmware_core_imports())
    assert not problems, "\n".join(problems)


def test_every_part_is_read():
    # the rules above would pass vacuously on a tree they do not find
    modules = {i.module for i in host_imports()}
    assert {"rmc.checker", "rmc.settle", "rmc.serve.service", "rmc.commands.check"} <= modules
    assert {i.module for i in firmware_core_imports()} >= {"rmcfw.spin", "rmcfw.rnvp"}


@pytest.mark.parametrize(
    ("module", "source", "rule"),
    [
        ("rmcfw.spin", "import machine\n", "the firmware core may import"),
        ("rmcfw.spin", "from rmc import frames\n", "the firmware core may import"),
        ("rmc.checker", "from rmc.commands.check import read_key\n", "only the command line"),
        ("rmc.serve.config", "from ..commands import check\n", "only the command line"),
        ("rmc.commands.replay", "from rmc.commands.check import x\n", "no other command"),
        ("rmc.commands.replay", "from .check import unusable\n", "no other command"),
        ("rmc.settle", "from rmc.console import out\n", "the settlement imports only"),
        ("rmc.bets", "import rich\n", "the settlement has no user interface"),
        ("rmc.link", "from rmc.serve.store import Store\n", "the wire knows nothing"),
        ("rmc.serve.tables", "import rmc.vboard\n", "the table service does not use"),
    ],
)
def test_a_broken_rule_is_found(module, source, rule):
    found = imports_of(source, module)
    firmware = found if module.startswith("rmcfw") else []
    host = [] if firmware else found
    problems = broken(host, firmware)
    assert problems and all(rule in p for p in problems), problems


# --- function length (issue 25): a function a reader can hold in mind ---

LONGEST = 60  # lines, decorators left out
LONG_WHY = "Long, and left so:"  # a longer function's docstring says why with these words


def long_functions(source: str, name: str) -> list[str]:
    """The functions of `source` over LONGEST lines whose docstring does not say why."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
            if lines > LONGEST and LONG_WHY not in (ast.get_docstring(node) or ""):
                out.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    return out


def test_no_function_is_longer_than_a_screen_unless_it_says_why():
    files = [*HOST.rglob("*.py"), *FIRMWARE.rglob("*.py")]
    assert len(files) > 100  # the tree was found
    found = [x for p in files for x in long_functions(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "\n".join(found)


def test_a_long_function_is_found_and_one_that_says_why_is_not():
    body = "".join(f"    x{i} = {i}\n" for i in range(LONGEST))
    assert long_functions(f"def f():\n{body}", "m") == [f"m:1 f: {LONGEST + 1} lines"]
    why = f'    """{LONG_WHY} a table of cases."""\n'
    assert long_functions(f"def f():\n{why}{body}", "m") == []
