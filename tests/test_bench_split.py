"""`make bench`'s measure of the predictor's split (tests/bench/bench_split.py) joins the
predictor's modules into one. The joined firmware must be the same predictor, or the bench
compares two different things."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "fw"))

import bench_split
import test_rnvp_calls

from rmc import FIRMWARE_DIR


def test_the_joined_predictor_is_one_module_with_the_same_calls(tmp_path: Path):
    joined = bench_split.join(FIRMWARE_DIR, tmp_path / "joined")
    split = sorted(p.name for p in (FIRMWARE_DIR / "rmcfw").glob("rnvp*.py"))
    assert len(split) > 1
    assert sorted(p.name for p in (joined / "rmcfw").glob("rnvp*.py")) == ["rnvp.py"]
    want = test_rnvp_calls.DIGESTS["cpython"]
    assert bench_split.digest(joined) == str(want)
    assert bench_split.digest(FIRMWARE_DIR) == str(want)


def test_a_name_two_modules_define_is_spelled_apart(tmp_path: Path):
    fw = tmp_path / "fw"
    (fw / "rmcfw").mkdir(parents=True)
    (fw / "rmcfw" / "rnvp_one.py").write_text("def export(x):\n    return x + 1\n")
    (fw / "rmcfw" / "rnvp.py").write_text(
        "from rmcfw import rnvp_one\n\n\ndef export(x):\n    return rnvp_one.export(x) * 2\n"
    )
    joined = bench_split.join(fw, tmp_path / "joined") / "rmcfw" / "rnvp.py"
    scope: dict = {}
    exec(joined.read_text(), scope)  # our own generated text
    assert scope["export"](1) == 4 and scope["one_export"](1) == 2


def test_modules_that_import_each_other_in_a_circle_are_refused(tmp_path: Path):
    fw = tmp_path / "fw"
    (fw / "rmcfw").mkdir(parents=True)
    (fw / "rmcfw" / "rnvp_a.py").write_text("from rmcfw.rnvp_b import y\nx = 1\n")
    (fw / "rmcfw" / "rnvp_b.py").write_text("from rmcfw.rnvp_a import x\ny = 2\n")
    (fw / "rmcfw" / "rnvp.py").write_text("from rmcfw.rnvp_a import x\n")
    with pytest.raises(bench_split.JoinError, match="circle"):
        bench_split.join(fw, tmp_path / "joined")
