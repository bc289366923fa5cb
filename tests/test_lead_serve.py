"""The lead of « rien ne va plus » through the service (issue 26, rmcfw.lead): on the virtual
board running the firmware under MicroPython, with `rmc serve` as a real process.

Every path that can send SET: the API and `rmc table` refuse a chef (an engineer only); the
service sends an engineer's SET with role=engineer, and the table's CFG frame says who and as
what; straight on the board's line (what the rig, a script with the table's key or anyone on
the virtual board's UART would do) a later call without role=engineer is refused by the
firmware itself. The display, the console (`rmc table status`) and the engineer's view show
the lead in force: the JSON they read, and the display's line in Chromium.
"""

from __future__ import annotations

import json

import pytest
import serial
from cli_support import rmc
from serve_support import KEY_HEX, TABLE, Served, Tokens, board, find_chromium, power_up, wait_for

from rmc.demo import deploy as fwdeploy
from rmc.frames import FrameError, Verifier, decode
from rmc.serve.client import ClientError
from rmc.sim import simulate_session
from rmcfw import commands, frames, lead, proto
from rmcfw import config as fwconfig

LEAD_JS = "return document.getElementById('lead-line').textContent"
# whatever the default lead is (seconds or revolutions), these tests follow it
DEFAULT_MS = fwconfig.Config().lead_ms
DEFAULT_REVS = fwconfig.Config().lead_revs


@pytest.fixture(scope="module")
def firmware(tmp_path_factory):
    return fwdeploy.build(tmp_path_factory.mktemp("fw") / "mpy")


@pytest.fixture(scope="module")
def served(firmware, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lead")
    tokens = Tokens.make(tmp / "tokens")
    with board(tmp, firmware) as vb:
        power_up(vb, simulate_session(3, 2))
        s = Served(tmp, vb.uart_url, f"sqlite:///{tmp / 'rmc.db'}", tokens, key=True).start()
        s.vb = vb
        try:
            chef = s.client("chef")
            wait_for(lambda: chef.table(TABLE)["link"]["frames"] > 0, 60, "the first frames")
            yield s
        finally:
            s.stop()


def _table_cli(served, role: str, *args: str):
    return rmc("table", TABLE, *args, "--token-file", served.tokens.names[role],
               "--server", served.url, timeout=60)  # fmt: skip


def test_the_lead_is_set_by_an_engineer_on_record_and_shown(served):
    chef, eng = served.client("chef"), served.client("engineer")
    lead0 = chef.get(f"/api/tables/{TABLE}/lead")
    assert (lead0["lead_ms"], lead0["lead_revs"], lead0["window_ms"]) == (
        DEFAULT_MS, DEFAULT_REVS, 0)  # fmt: skip
    assert lead0["set"] == {} and lead0["unit"] == ("revs" if DEFAULT_REVS else "ms")
    # a chef may set nothing, earlier or later: refused by the service, the API and the CLI
    with pytest.raises(ClientError) as e:
        chef.command(TABLE, "set", {"key": "lead_window_ms", "value": 400})
    assert e.value.status == 403
    p = _table_cli(served, "chef", "set", "lead_ms", "0")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "may not" in p.stderr, p.stderr
    # an engineer: a wider window (earlier), a longer lead, then back (a later call)
    for key, value in (("lead_window_ms", 400), ("lead_ms", DEFAULT_MS + 500)):
        out = eng.command(TABLE, "set", {"key": key, "value": value})
        assert out.get("ok") is True, out
    p = _table_cli(served, "engineer", "set", "lead_ms", str(DEFAULT_MS))
    assert p.returncode == 0 and "done" in p.stdout, (p.stdout, p.stderr)
    # the CFG frames: who asked, and as what
    settings = wait_for(
        lambda: (s := chef.get(f"/api/tables/{TABLE}/settings")["settings"]) and len(s) >= 3 and s,
        30,
        "the settings stored",
    )
    newest = settings[0]["data"]
    assert newest["key"] == "lead_ms" and str(newest["new"]) == str(DEFAULT_MS)
    assert str(newest["old"]) == str(DEFAULT_MS + 500)
    assert newest["by"] == "paul" and newest["role"] == "engineer"
    # the lead in force, for the console and the engineer's view
    got = chef.get(f"/api/tables/{TABLE}/lead")
    assert (got["lead_ms"], got["lead_revs"], got["window_ms"]) == (DEFAULT_MS, DEFAULT_REVS, 400)
    assert got["text"] == lead.describe(DEFAULT_MS, DEFAULT_REVS, 400)
    assert got["set"]["lead_ms"]["by"] == "paul" and got["set"]["lead_ms"]["role"] == "engineer"
    assert chef.get(f"/api/tables/{TABLE}/thresholds")["lead"] == got
    assert eng.get(f"/api/tables/{TABLE}/live")["lead"] == got
    # the display's: the values, nobody's name
    shown = chef.get(f"/api/display/{TABLE}")["lead"]
    assert shown == {k: got[k] for k in ("lead_ms", "lead_revs", "window_ms", "unit", "text")}
    # the console: `rmc table status`
    p = _table_cli(served, "chef", "status")
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("lead "))
    assert line.startswith(f"lead {lead.describe(DEFAULT_MS, DEFAULT_REVS, 400)} before the drop (")
    assert "lead_ms set by paul, engineer" in line and "lead_window_ms set by paul" in line
    p = _table_cli(served, "chef", "status", "--json")
    assert json.loads(p.stdout)["lead"]["window_ms"] == 400


def _ack(port, cseq: int, key: bytes, timeout_lines: int = 400) -> dict[str, str]:
    """The table's ACK of command cseq, read off the line."""
    verifier = Verifier(key)
    for _ in range(timeout_lines):
        raw = port.read_until(b"\n")
        if not raw:
            break
        try:
            f = decode(raw.rstrip(b"\r\n"), verifier)
        except FrameError:
            continue
        if f.type == proto.T_ACK and f.fields.get(proto.K_CSEQ) == str(cseq):
            return dict(f.fields)
    raise AssertionError(f"no ACK of command {cseq}")


def test_on_the_boards_own_line_a_later_call_needs_role_engineer(served):
    """The virtual board's UART as the rig or a script with the key uses it: the firmware
    refuses a later call that does not say role=engineer, whoever signs it."""
    chef = served.client("chef")
    boot = _boot_of(chef)
    served.stop()  # the line is the service's while it runs
    key = frames.load_key(KEY_HEX)
    host = commands.Commander(TABLE, key)
    host.seq = 1_000_000  # above the service's commands in this boot
    port = serial.serial_for_url(served.vb.uart_url, timeout=5)
    try:
        port.write(host.line(proto.C_SET, ("key", "lead_window_ms", "value", "0", "by", "E9"),
                             boot=boot))  # fmt: skip
        ack = _ack(port, host.seq, key)
        assert (ack["ok"], ack["detail"]) == ("0", lead.A_ENGINEER), ack
        port.write(host.line(proto.C_SET, ("key", "lead_window_ms", "value", "900", "by", "E9"),
                             boot=boot))  # fmt: skip
        ack = _ack(port, host.seq, key)
        assert (ack["ok"], ack["detail"]) == ("1", ""), ack  # a wider window: earlier
        fields = ("key", "lead_window_ms", "value", "0", "by", "E9", "role", "engineer")
        port.write(host.line(proto.C_SET, fields, boot=boot))
        ack = _ack(port, host.seq, key)
        assert (ack["ok"], ack["detail"]) == ("1", ""), ack
    finally:
        port.close()
        served.start()


def _boot_of(client) -> int:
    frames_ = client.get(f"/api/tables/{TABLE}/live")["tail"]
    return max(int(f["boot"]) for f in frames_)


def test_the_display_shows_the_lead_in_force(served):
    found = find_chromium()
    if found is None:
        pytest.skip("Chromium or chromedriver not installed: `make setup` installs them")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    binary, chromedriver = found
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    d = webdriver.Chrome(options=opts, service=DriverService(chromedriver))
    try:
        eng = served.client("engineer")
        out = eng.command(TABLE, "set", {"key": "lead_window_ms", "value": 1500})
        assert out.get("ok") is True, out
        d.get(f"{served.url}/display/{TABLE}")
        if DEFAULT_REVS:
            want = f"{DEFAULT_REVS} tour{'s' if DEFAULT_REVS > 1 else ''}"
        else:
            want = f"{DEFAULT_MS / 1000:g} s".replace(".", ",")
        text = wait_for(
            lambda: (t := d.execute_script(LEAD_JS)) and "1,5 s au hasard" in t and t,
            60,
            "the lead on the display",
        )
        assert text == f"« Rien ne va plus » {want} avant la chute, plus 0 à 1,5 s au hasard"
        # a change comes live: the display reads it again on the public event
        out = eng.command(TABLE, "set", {"key": "lead_window_ms", "value": 2000})
        assert out.get("ok") is True, out
        wait_for(
            lambda: "2 s au hasard" in d.execute_script(LEAD_JS),
            60,
            "the new lead on the display",
        )
    finally:
        d.quit()
