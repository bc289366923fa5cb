"""The host's side of the lead (issue 26, rmcfw.lead), without a table: the service's SET
carries the role, the display's stream lets a lead change through without its author, and
`rmc table` says a refusal and the lead in one line each."""

from __future__ import annotations

import argparse

import pytest

from rmc.commands import table as table_cmd
from rmc.serve import orders, pages
from rmcfw import lead


def test_an_engineers_set_is_sent_with_the_role():
    got = orders.fields("set", {"key": "lead_ms", "value": "1500"}, "paul", "engineer")
    assert got == ("key", "lead_ms", "value", 1500, "by", "paul", "role", lead.ROLE)
    assert orders.allowed("engineer", "set") and not orders.allowed("chef", "set")
    with pytest.raises(orders.OrderError):
        orders.fields("set", {"key": "lead_window_ms", "value": "10001"}, "paul", "engineer")


def test_the_display_sees_a_change_of_the_lead_and_nobody_s_name():
    ev = {"id": 7, "type": "setting", "table": "T01", "boot": 1, "seq": 40, "at_us": 5,
          "data": {"key": "lead_window_ms", "old": "0", "new": "500", "by": "paul",
                   "role": "engineer"}}  # fmt: skip
    out = pages.public_event(ev, "T01")
    assert out["data"] == {"key": "lead_window_ms", "new": "500"}
    other = {**ev, "data": {**ev["data"], "key": "settle_ms"}}
    assert pages.public_event(other, "T01") is None  # other thresholds stay the operators'
    assert pages.public_event(ev, "T02") is None
    full = {"lead_ms": 1000, "lead_revs": 0, "window_ms": 500, "unit": "ms", "text": "t",
            "from_cfg": ["lead_window_ms"], "set": {"lead_window_ms": {"by": "paul"}}}  # fmt: skip
    assert pages.public_lead(full) == {
        "lead_ms": 1000, "lead_revs": 0, "window_ms": 500, "unit": "ms", "text": "t"
    }  # fmt: skip


def _args(verb: str) -> argparse.Namespace:
    return argparse.Namespace(id="T01", verb=verb, json=False)


def test_rmc_table_says_a_refusal_for_want_of_an_engineer_in_one_line(capsys):
    assert table_cmd._show_answer(_args("set"), {"ok": False, "detail": "engineer"}) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        "T01 set: refused by the table (engineer: a later call of « rien ne va plus » needs an "
        "engineer)"
    ]
    assert table_cmd._show_answer(_args("set"), {"ok": False, "detail": "bad"}) == 1
    assert capsys.readouterr().out.strip() == "T01 set: refused by the table (bad)"


def test_rmc_table_status_says_the_lead_in_force(capsys):
    lead_set = {
        "text": "3 revs + 0-500 ms",
        "set": {
            "lead_revs": {"value": 3, "by": "paul", "role": "engineer"},
            "lead_window_ms": {"value": 500, "by": "[bold]eve[/bold]", "role": None},
        },
    }
    assert table_cmd.lead_line(lead_set) == (
        "lead 3 revs + 0-500 ms before the drop (lead_revs set by paul, engineer; "
        "lead_window_ms set by [bold]eve[/bold])"
    )
    assert table_cmd.lead_line({"text": "1000 ms", "set": {}}) == (
        "lead 1000 ms before the drop (defaults: no CFG frame)"
    )
    out = {"id": "T01", "url": "u", "link": {"connected": True}, "lead": lead_set}
    assert table_cmd._show_status(_args("status"), out) == 0
    shown = capsys.readouterr().out
    assert "lead_window_ms set by [bold]eve[/bold]" in shown  # printed literally
