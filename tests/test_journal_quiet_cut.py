"""A power cut at every third journal append or state save of a session polled with STATUS
(the board's journal holds the STAT answers and HOP frames in RAM at any time, and a running
ball's routine frames: firmware/rmcfw/journal.py): the frames the host heard from both boots
must read clean to the host's checker (no violation, no gap, each spin settled once), and
what the host heard past BOOT's `prev` (lost from the journal) is only routine frames."""

from __future__ import annotations

import sys

from rmc import ROOT
from rmc.checker import Checker
from rmcfw import channels, frames, numbers, proto

sys.path.insert(0, str(ROOT / "tests" / "fw"))
from fwtest import scratch_dir
from test_journal_hold import _boot, _Cut, _Power
from wheelsim import sensors_at_power_up, session_events

WHEEL = numbers.NUMBERS
POLL_US = 400_000  # the rig's STATUS polls: every 0.3-0.5 s
STEP_US = 4000
# rotor direction, ball direction, pocket channel
PLAN = ((1, -1, 12), (-1, 1, 20))


def _run(tb, events, until):
    """Events in order, the loop polled every STEP_US and STATUS answered every POLL_US."""
    now = events[0][0]
    next_poll = now
    for t, c, v in [*events, (until, None, None)]:
        while now + STEP_US < t:
            now += STEP_US
            tb.poll(now)
            if now >= next_poll:
                tb.handle(proto.C_STATUS, {})
                next_poll = now + POLL_US
        if c is not None:
            tb.feed(t, c, v)
        now = t


def _session(steps):
    """Two spins polled with STATUS, the power cut after `steps` appends and saves, back
    1 ms later. (frames heard, the journal's folder), or None when the session ended first."""
    ev, t = session_events(PLAN)
    d = scratch_dir("qc")
    heard: list[bytes] = []
    power = _Power(-1)
    tb = _boot(d, power, heard, 0)
    tb.handle(proto.C_OPEN, {"chef": "C1"})
    tb.feed(1000, channels.LID, 0)
    power.left = steps
    try:
        _run(tb, ev, t)
        return None
    except _Cut:
        t_cut = tb.now
    power.left = -1
    t_on = t_cut + 1000
    tb2 = _boot(d, power, heard, t_on)
    sensors_at_power_up(tb2, ev, t_cut, t_on)
    _run(tb2, [e for e in ev if e[0] > t_on] or [(t_on, None, None)], t + 20_000_000)
    return heard, d


def test_a_cut_at_any_append_leaves_what_the_host_heard_clean(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    steps = 0
    held_stat_lost = 0
    while True:
        got = _session(steps)
        if got is None:
            break
        heard, _folder = got
        ck = Checker()
        for line in heard:
            ck.feed(line)
        rep = ck.report()
        assert rep.violations == [], (steps, rep.violations[:3])
        assert rep.gaps == [], (steps, rep.gaps)
        assert rep.reboots == 1 and len(rep.results) + len(rep.voids) == len(PLAN), (
            steps,
            rep.results,
            rep.voids,
        )
        # BOOT's prev names the last frame the journal kept; STATs heard after it were held
        boots = [frames.decode(x) for x in heard if b",BOOT," in x]
        prev = boots[1].fields["prev"]
        b, _, n = prev.partition(":")
        after = [
            frames.decode(x)
            for x in heard
            if frames.decode(x).boot == int(b) and frames.decode(x).seq > int(n)
        ]
        assert all(
            f.type in (proto.T_STATUS, proto.T_REV, proto.T_RNVP, proto.T_HOP) for f in after
        ), (
            steps,
            [f.type for f in after],
        )
        held_stat_lost += any(f.type == proto.T_STATUS for f in after)
        steps += 3  # every third append or save (the session has about 170)
    assert steps > 150, steps
    assert held_stat_lost > 0  # some cuts lost STATs held in RAM, and the host took it
