"""Run every firmware test (tests/fw/test_*.py) a second time, under real MicroPython.

pytest already runs those files under CPython. Here each file is run once in MicroPython's
official WebAssembly port (host/node/mprun.mjs), with firmware/ and tests/fw/ copied into its
file system, and each test function becomes one pytest case that passes only if it passed there.

RMC_MICROPYTHON=/path/to/micropython runs them under that MicroPython binary instead, e.g. a
unix port built with single-precision floats as on an RP2040 (`make test-float32`).
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from rmc import FIRMWARE_DIR, ROOT

FW_TESTS = Path(__file__).parent / "fw"
MPRUN = ROOT / "host" / "node" / "mprun.mjs"
MARK = "@@RMC-TEST"


def _cases() -> list[tuple[str, str]]:
    cases = []
    for path in sorted(FW_TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                cases.append((path.stem, node.name))
    return cases


def run_micropython(
    script: Path, *args: str, heap: str = "2M", timeout: float = 1200
) -> subprocess.CompletedProcess:
    """Run a script under MicroPython with firmware/ at /fw and tests/fw/ at /tests on sys.path."""
    native = os.environ.get("RMC_MICROPYTHON")
    if native:  # a MicroPython binary: the folders on MICROPYPATH, a scratch folder as cwd
        native = os.path.abspath(native)
        env = dict(os.environ, MICROPYPATH=f"{FIRMWARE_DIR}:{FW_TESTS}")
        with tempfile.TemporaryDirectory() as cwd:
            return subprocess.run(
                [native, "-X", f"heapsize={heap}", str(script), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                cwd=cwd,
                env=env,
            )
    cmd = [
        "node",
        str(MPRUN),
        "--heap",
        heap,
        "--mount",
        f"{FIRMWARE_DIR}:/fw",
        "--mount",
        f"{FW_TESTS}:/tests",
        "--path",
        "/fw,/tests",
        "--cwd",
        "/tests",
        "--script",
        str(script),
        "--",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@functools.cache
def _module_results(module: str) -> tuple[dict[str, str], str]:
    proc = run_micropython(FW_TESTS / "mpyrun.py", module)
    results: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if line.startswith(MARK + " "):
            _, name, status, *rest = line.split(" ", 3)
            results[name] = status if status != "FAIL" else "FAIL " + " ".join(rest)
    return results, proc.stdout + proc.stderr


def check(module: str, test: str) -> None:
    results, output = _module_results(module)
    assert "__end__" in results, f"MicroPython run of {module} did not finish:\n{output[-3000:]}"
    assert test in results, f"{test} not run under MicroPython:\n{output[-3000:]}"
    status = results[test]
    assert status == "PASS", status.replace("\\n", "\n")


def _module_class(module: str, tests: list[str]) -> type:
    """One test class per firmware module: `make test` (pytest-xdist --dist loadscope) keeps
    a class on one worker, so the module's MicroPython run is made once, and spreads the
    modules over the workers."""

    @pytest.mark.parametrize("test", tests)
    def test_under_micropython(self, test: str) -> None:
        check(module, test)

    name = f"TestMicroPython_{module}"
    return type(
        name, (), {"test_under_micropython": test_under_micropython, "__module__": __name__}
    )


def _classes() -> dict[str, type]:
    by_module: dict[str, list[str]] = {}
    for module, test in _cases():
        by_module.setdefault(module, []).append(test)
    return {f"TestMicroPython_{m}": _module_class(m, t) for m, t in by_module.items()}


globals().update(_classes())
