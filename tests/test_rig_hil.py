"""On real hardware (`make hil PORT=... RIG=...`): the rig's self-test, then the simulator's
scenario set played into the table board, each compared with its ground truth.

Skipped, with the reason, when no rig is given (tests/conftest.py): the only skip allowed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmc.rig import edges as edgemod
from rmc.rig import pins as pinmod
from rmc.rig.compare import Tolerances
from rmc.rig.config import load_config, open_rig
from rmc.rig.link import open_port
from rmc.rig.run import Rig
from rmc.rig.scenarios import scenario_set, write_trace
from rmc.rig.selftest import open_mpremote_probe, selftest

pytestmark = pytest.mark.hil


@pytest.fixture(scope="module")
def rig_config(request):
    return load_config(request.config.getoption("--rig"))


@pytest.fixture(scope="module")
def frame_url(request):
    return request.config.getoption("--hil-port")


def test_rig_wiring(rig_config):
    assert rig_config.board_repl, "the rig config needs board_repl for the self-test"
    with open_rig(rig_config) as rig:
        probe = open_mpremote_probe(rig_config.board_repl, pinmod.board_pins(rig_config.board_pins))
        try:
            rep = selftest(rig.routes, probe, rig.pins.levels)
        finally:
            probe.close(restart=True)
    assert rep.ok, json.dumps(rep.to_json(), indent=1)


# As in tests/test_rig_virtual.py: the lead share is checked over the whole set.
PER_RUN = Tolerances(rnvp_within_fraction=0.0)
_runs: dict[str, object] = {}


def run_scenario(sc, rig_config, frame_url, tmp: Path):
    if sc.name not in _runs:
        folder = tmp / sc.name
        folder.mkdir(parents=True, exist_ok=True)
        trace = write_trace(sc, folder)
        initial = edgemod.initial_levels(edgemod.from_trace(trace))
        with open_rig(rig_config, initial) as rig:
            port = open_port(frame_url, rig_config.frame_baud, timeout=0.02)
            try:
                rig_run = Rig(
                    rig.routes, rig.pins.levels, rig.pulsegen, tolerances=PER_RUN,
                    table=rig_config.table,
                )  # fmt: skip
                _runs[sc.name] = rig_run.run(trace, port, record=folder / "run.jsonl")
            finally:
                port.close()
    return _runs[sc.name]


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("rig-hil")


@pytest.mark.parametrize("sc", scenario_set(), ids=lambda s: s.name)
def test_scenario_on_the_board(sc, rig_config, frame_url, runs_dir):
    result = run_scenario(sc, rig_config, frame_url, runs_dir)
    cmp = result.comparison
    assert cmp.ok, json.dumps(
        {"problems": cmp.problems, "spins": [s.__dict__ for s in cmp.spins if not s.ok],
         "notes": result.notes}, indent=1, default=str,
    )  # fmt: skip


def test_rnvp_lead_over_the_scenario_set(rig_config, frame_url, runs_dir):
    within = asked = 0
    for sc in scenario_set():
        cmp = run_scenario(sc, rig_config, frame_url, runs_dir).comparison
        within += cmp.rnvp_within
        asked += cmp.rnvp_asked
    assert asked >= 20
    assert within >= Tolerances().rnvp_within_fraction * asked, f"{within}/{asked} spins"
