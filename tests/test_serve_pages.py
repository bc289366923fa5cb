"""The web pages of `rmc serve` in a real browser: headless Chromium driven by Selenium.

One virtual board runs the firmware, one `rmc serve` reads it (a real process, on SQLite),
and one browser holds the three pages of its table, through a TCP relay that the test can
pull out (the pages' connection lost). A simulated session is played: its orders (open,
« les trois derniers coups », close) are clicked in the console; its first spins stream to
the display live, the next ones are played while the service is killed (and started again
on the same database and port), the next ones while the pages are cut off. After each, the
display must show exactly what the API holds. The engineer's view must draw the last spin's
laps and its call. The screenshots of docs/img/ are taken here, with RMC_SCREENSHOTS=docs/img.

The tests skip, saying why, only when Chromium (or its driver) is not installed: `make setup`
installs Debian's `chromium` and `chromium-driver`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_support import rmc
from serve_support import (
    TABLE,
    TAIL_US,
    Served,
    Tokens,
    answered,
    board,
    find_chromium,
    order_args,
    power_up,
    wait_for,
)

from rmc.demo import deploy as fwdeploy
from rmc.demo.run import truth_outcomes
from rmc.demo.session import Segment, plan
from rmc.serve import pages
from rmc.serve.client import Client
from rmc.sim import simulate_session
from rmcfw import config as fwconfig
from rmcfw import numbers, proto

# The screenshots go to build/screenshots, so that a test run leaves the work tree as it
# was; RMC_SCREENSHOTS=docs/img makes the ones the docs and the README show.
DOCS_IMG = Path(__file__).resolve().parent.parent / os.environ.get(
    "RMC_SCREENSHOTS", "build/screenshots"
)
# a session whose results hold the three zeros (00 on spin 4, CMC on spin 6, 0 on spin 11)
SEED, SPINS = 21, 12
ROOM = (1920, 1080)  # a display screen across the room
PHONE = (390, 844)  # a phone, held upright
LATENCY_BOUND_S = 5.0  # what no load may exceed: the aim (under 1 s) is measured and reported
CMD = {"open": proto.C_OPEN, "last3": proto.C_LAST_THREE, "close": proto.C_CLOSE}


# --- the pieces ---------------------------------------------------------------------------------


class Relay:
    """A TCP relay between the browser and the service: pulled out, every connection through
    it drops and new ones are refused until it is put back. No timeouts of its own: a quiet
    event stream stays open as long as both ends keep it."""

    def __init__(self, port: int) -> None:
        self.target = ("127.0.0.1", port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.plugged = True
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.plugged:
                client.close()
                continue
            try:
                service = socket.create_connection(self.target)
            except OSError:  # the service is down: the browser sees a closed connection
                client.close()
                continue
            with self._lock:
                self._socks += [client, service]
            for a, b in ((client, service), (service, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def pull(self) -> None:
        self.plugged = False
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def plug(self) -> None:
        self.plugged = True

    def close(self) -> None:
        self.pull()
        self.server.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split(seg: Segment, cuts_us: list[int]) -> list[Segment]:
    """A segment cut at these instants (of the session's clock) into segments of their own:
    the board idles at each cut until the test goes on (a command's way of cutting)."""
    bounds = [seg.t0_us, *[c for c in cuts_us if seg.t0_us < c], seg.t1_us]
    out = []
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        recs = [
            {**r, "t_us": r["t_us"] + seg.t0_us - lo}
            for r in seg.records
            if lo <= r["t_us"] + seg.t0_us and (hi is None or r["t_us"] + seg.t0_us < hi)
        ]
        out.append(Segment(lo, hi, seg.command if i == 0 else None, recs))
    return out


@dataclass
class Rig:
    """The board, the service, the relay, the browser and its three windows."""

    vb: Any
    served: Served
    relay: Relay
    driver: Any
    tmp: Path
    windows: dict[str, str] = field(default_factory=dict)
    latencies_s: list[float] = field(default_factory=list)
    phases: dict[str, Any] = field(default_factory=dict)

    def api(self, role: str = "chef") -> Client:
        """The service itself (not through the relay)."""
        return self.served.client(role)

    def page(self, name: str) -> None:
        self.driver.switch_to.window(self.windows[name])

    def js(self, name: str, script: str, *args: Any) -> Any:
        self.page(name)
        return self.driver.execute_script(script, *args)

    def viewport(self, size: tuple[int, int], mobile: bool = False) -> None:
        w, h = size
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": mobile},
        )

    def shot(self, name: str, page: str, size: tuple[int, int] = ROOM, mobile: bool = False):
        self.page(page)
        self.viewport(size, mobile)
        time.sleep(0.3)  # a layout after a resize: no outcome depends on it
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(DOCS_IMG / name))
        self.viewport(ROOM)


def login(
    rig: Rig, page: str, token_file: str | None, token: str | None = None, base: str = ""
) -> str:
    """Open `page` in its window (of the service at `base`, else through the relay), give the
    token; the login form's message (empty if in)."""
    from selenium.webdriver.common.by import By

    rig.page(page)
    d = rig.driver
    base = base or rig.relay.url
    # this tab's token from a login before, forgotten on a page of the same origin that
    # does not use it (the page itself would store it again once its check came back)
    d.get(f"{base}/api/health")
    d.execute_script("sessionStorage.clear()")
    d.get(f"{base}/{page}/{TABLE}")
    shown = "const f = document.getElementById('login'); return !!f && !f.hidden"
    try:
        wait_for(lambda: d.execute_script(shown), 30, "the login form")
    except AssertionError:
        state = d.execute_script(
            "return [location.href, document.readyState, document.body.innerText.slice(0, 300)]"
        )
        raise AssertionError(f"no login form on {page}: {state}, {d.get_log('browser')}") from None
    box = d.find_element(By.NAME, "token")
    box.clear()
    box.send_keys(token if token is not None else Path(token_file).read_text().strip())
    d.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    settled = """const msg = document.getElementById('login-msg').textContent;
      if (!document.getElementById('app').hidden) return 'in';
      return msg && msg !== 'Vérification…' ? msg : null;"""
    got = wait_for(lambda: d.execute_script(settled), 30, f"{page}'s login")
    return "" if got == "in" else got


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium():
    found = find_chromium()
    if found is None:
        pytest.skip("Chromium or its chromedriver is not installed (`make setup` installs them)")
    pytest.importorskip("selenium", reason="selenium is not installed in the venv")
    return found


@pytest.fixture(scope="module")
def driver(chromium):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    binary, chromedriver = chromium
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--window-size=1920,1080",
        # the three windows are all "visible": none is slowed down as a background tab
        "--disable-background-timer-throttling",
        "--disable-backgrounding-occluded-windows",
        "--disable-renderer-backgrounding",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=DriverService(chromedriver))
    d.set_script_timeout(30)
    yield d
    d.quit()


@pytest.fixture(scope="module")
def firmware(tmp_path_factory):
    return fwdeploy.build(tmp_path_factory.mktemp("fw") / "mpy")


@pytest.fixture(scope="module")
def rig(driver, firmware, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pages")
    session = simulate_session(SEED, SPINS)
    tokens = Tokens.make(tmp / "tokens")
    with board(tmp, firmware) as vb:
        power_up(vb, session)
        served = Served(tmp, vb.uart_url, f"sqlite:///{tmp / 'rmc.db'}", tokens, key=True)
        # one port for the service's whole life: the pages reconnect to it after a restart
        port = _free_port()
        served.config.write_text(
            served.config.read_text().replace('"127.0.0.1:0"', f'"127.0.0.1:{port}"')
        )
        served.start()
        relay = Relay(port)
        r = Rig(vb, served, relay, driver, tmp)
        r.phases["session"] = session
        r.windows["display"] = driver.current_window_handle
        for name in ("console", "engineer"):
            driver.switch_to.new_window("window")
            r.windows[name] = driver.current_window_handle
        try:
            yield r
        finally:
            served.stop()
            relay.close()


# --- what the pages show ----------------------------------------------------------------------


MARQUEE_JS = """return [...document.querySelectorAll('#marquee li')].map(li => {
  const c = li.querySelector('.chip');
  return {key: li.dataset.key, result: c.dataset.result, row: li.className, chip: c.className};
});"""


def api_marquee(rig: Rig) -> list[dict[str, Any]]:
    rows = rig.api().results(TABLE, 100)
    return [r for r in rows if r["valid"]][: pages.MARQUEE]


def display_is_api(rig: Rig, what: str, timeout: float = 60) -> list[dict[str, Any]]:
    """The display's marquee, once it shows what the API holds (newest first)."""
    want: list[tuple[str, str]] = []

    def same():
        nonlocal want
        want = [(f"{r['boot']}.{r['seq']}", r["result"]) for r in api_marquee(rig)]
        shown = rig.js("display", MARQUEE_JS)
        return shown if [(s["key"], s["result"]) for s in shown] == want else None

    try:
        return wait_for(same, timeout, what, every=0.2)
    except AssertionError:
        shown = rig.js("display", MARQUEE_JS)
        raise AssertionError(f"{what}: the display shows {shown}, the API {want}") from None


def probe(rig: Rig, page: str = "display") -> dict[str, Any]:
    """What the page's script has recorded ({} while it loads)."""
    name = {"display": "rmcDisplay", "console": "rmcConsole", "engineer": "rmcEngineer"}[page]
    return rig.js(page, f"return window.{name} || {{}}")


def console_order(rig: Rig, verb: str, args: dict[str, Any]) -> dict[str, Any]:
    """An order clicked in the console (with its confirmation), and the table's answer as
    the page reports it. Tried again while the service answers 503 (a table reconnecting)."""
    from selenium.webdriver.common.by import By

    d = rig.driver
    for _ in range(20):
        rig.page("console")
        before = len(probe(rig, "console").get("answers", []))
        if verb == "open":
            box = d.find_element(By.ID, "chef")
            box.clear()
            box.send_keys(args["chef"])
            d.find_element(By.ID, "do-open").click()
        elif verb == "last3":
            d.find_element(By.ID, "do-last3").click()
            wait_for(lambda: d.find_element(By.ID, "confirm-yes").is_displayed(), 10, "confirm")
            d.find_element(By.ID, "confirm-yes").click()
        elif verb == "close":
            box = d.find_element(By.ID, "reason")
            box.clear()
            if args.get("reason"):
                box.send_keys(args["reason"])
            d.find_element(By.ID, "do-close").click()
            wait_for(lambda: d.find_element(By.ID, "confirm-yes").is_displayed(), 10, "confirm")
            d.find_element(By.ID, "confirm-yes").click()
        answers = wait_for(
            lambda n=before: (a := probe(rig, "console").get("answers", []))[n:] and a,
            60,
            f"{verb}'s answer",
        )
        got = answers[-1]
        if got["status"] in (0, 503):
            time.sleep(0.5)
            continue
        return {"command": verb, "cmd": CMD[verb], "ok": got["ok"], "detail": got["detail"]}
    raise AssertionError(f"{verb}: the service never took it: {got}")


def board_at(rig: Rig, until_us: float, what: str) -> None:
    wait_for(lambda: float(rig.vb.status()["t_us"]) >= until_us, 600, what, every=0.1)


def feed(rig: Rig, seg: Segment) -> float:
    """Give the board a segment; the board's instant its last edge is played."""
    n = len(rig.vb.events)
    rig.vb.feed(seg.records)
    base = wait_for(
        lambda: next(
            (e["base_us"] for e in rig.vb.events[n:] if e.get("event") == "sensors"), None
        ),
        60,
        "the board to take the edges",
    )
    return float(base) + seg.span_us


# --- the tests --------------------------------------------------------------------------------


def test_a_bad_login_is_refused_with_a_message(rig):
    assert "Jeton refusé" in login(rig, "console", None, token="not-a-token-of-anyone-at-all")
    assert login(rig, "console", None, token="") == "Donnez votre jeton."
    msg = login(rig, "console", rig.served.tokens.names["display"])
    assert msg.startswith("Refusé") and "écran" in msg
    assert "Jeton refusé" in login(rig, "engineer", None, token="0123456789abcdef-wrong")
    # the service kept the refusals: the audit log, with the route the page asked
    audit = rig.api("engineer").get("/api/audit?last=50")["audit"]
    assert any(a["status"] == 401 and a["path"] == "/api/whoami" for a in audit)
    # a display token may not give orders, whatever a page would try
    assert rig.served.client("display").get("/api/whoami")["role"] == "display"


def test_a_session_clicked_in_the_console_shows_on_the_display(rig):
    """The orders clicked in the console; the results on the display as they come, after the
    service was killed and started again, after the pages lost their connection; « les trois
    derniers coups » from the console to the board and onto the display."""
    session = rig.phases["session"]
    want = truth_outcomes(session)
    assert {want[s] for s in (4, 6, 11)} == {"result:00", "result:0", "result:CMC"}
    assert login(rig, "console", rig.served.tokens.names["chef"]) == ""
    assert login(rig, "engineer", rig.served.tokens.names["engineer"]) == ""
    rig.page("display")
    rig.driver.get(f"{rig.relay.url}/display/{TABLE}")
    wait_for(lambda: probe(rig).get("conn"), 30, "the display's stream")
    # the session cut at the croupier's pick-up of spins 3 and 6: spins 1-3 stream live,
    # 4-6 are played with the service down, 7-9 with the pages cut off, 10-12 live again
    pickups = {t["spin"]: t["pickup_us"] for t in session.truth if t["event"] == "rest"}
    segs = plan(session, chef="marie")
    assert [s.command.cmd if s.command else None for s in segs] == [
        None, proto.C_OPEN, proto.C_LAST_THREE, proto.C_CLOSE
    ]  # fmt: skip
    a, b, c = split(segs[1], [pickups[3], pickups[6]])
    parts = [("boot", segs[0]), ("live", a), ("killed", b), ("cut", c)]
    parts += [("last3", segs[2]), ("close", segs[3])]
    answers = []
    end = 0.0
    for name, seg in parts:
        board_at(rig, end, f"the board to play before {name}")
        if seg.command is not None:
            verb, args = order_args(seg.command.cmd, seg.command.fields)
            out = console_order(rig, verb, args)
            assert answered(out), out
            answers.append(out)
        if name == "killed":
            shown_live = display_is_api(rig, "the first spins, live")
            assert len(shown_live) == 3
            rig.served.kill()
            wait_for(lambda: probe(rig)["conn"][-1]["state"] == "down", 60, "the display's loss")
            end = feed(rig, seg)
            board_at(rig, end, "the spins played while the service is down")
            t_restart = time.time_ns() // 1000
            rig.served.start()
            wait_for(lambda: len(api_marquee(rig)) == 6, 120, "the service to catch up")
            shown = display_is_api(rig, "the display after the service's restart", 120)
            assert len(shown) == 6
            conn = probe(rig)["conn"]
            assert [x["state"] for x in conn].count("live") >= 2, conn
            rig.phases["restart_us"] = t_restart
            continue
        if name == "cut":
            rig.relay.pull()
            wait_for(lambda: probe(rig)["conn"][-1]["state"] == "down", 60, "the display's loss")
            end = feed(rig, seg)
            board_at(rig, end, "the spins played while the pages are cut off")
            wait_for(lambda: len(api_marquee(rig)) == 9, 120, "the service to store them")
            assert len(rig.js("display", MARQUEE_JS)) == 6  # the display heard nothing
            wait_for(
                lambda: rig.js("display", "return !document.getElementById('offline').hidden"),
                30,
                "the display to say its connection is lost",
            )
            rig.relay.plug()
            shown = display_is_api(rig, "the display after its connection came back", 120)
            assert len(shown) == 9
            assert rig.js("display", "return document.getElementById('offline').hidden")
            continue
        if name == "last3":
            # the order reached the board: its LAST3 frame, and the display announces it
            wait_for(
                lambda: not rig.js("display", "return document.getElementById('last3').hidden"),
                60,
                "« les trois derniers coups » on the display",
            )
            left = rig.js("display", "return document.getElementById('last3-left').textContent")
            assert left == "encore 3 coups", left
            rig.shot("display.png", "display")
            rig.shot("display-phone.png", "display", PHONE, mobile=True)
            rig.shot("console.png", "console")
        end = feed(rig, seg)
    board_at(rig, end + TAIL_US, "the board to play the end of the session")

    assert [a["command"] for a in answers] == ["open", "last3", "close"]
    chef = rig.api()
    n_results = sum(1 for v in want.values() if v.startswith("result"))
    wait_for(lambda: len(api_marquee(rig)) == n_results, 120, "every result stored")
    shown = display_is_api(rig, "the display at the end")
    # the marquee and the zeros: each in the middle column, each its own look
    results = {s["result"]: s for s in shown}
    assert [f"result:{s['result']}" for s in reversed(shown)] == [
        want[k] for k in sorted(want) if want[k].startswith("result")
    ]
    for label, cls in (("0", "z0"), ("00", "z00"), ("CMC", "zcmc")):
        assert "vert" in results[label]["row"] and cls in results[label]["chip"].split()
    looks = rig.js(
        "display",
        """return ['0', '00', 'CMC'].map(x => {
             const c = document.querySelector(`#marquee .chip[data-result="${x}"]`);
             const s = getComputedStyle(c);
             return [s.borderRadius, s.boxShadow, s.color].join('|');
           });""",
    )
    assert len(set(looks)) == 3, looks
    for s in shown:
        assert numbers.colour(s["result"]) in s["row"].split(), s
    # the board got « les trois derniers coups » from the console: on record, by marie
    cmds = chef.get(f"/api/tables/{TABLE}/commands?last=50")["commands"]
    last3 = [c for c in cmds if c["cmd"] == proto.C_LAST_THREE]
    assert len(last3) == 1 and last3[0]["by"] == "marie" and last3[0]["ok"]
    events = chef.get(f"/api/tables/{TABLE}/events?last=500")["events"]
    marks = [e for e in events if e["kind"] == "last3"]
    assert marks and {int(m["data"]["left"]) for m in marks} >= {3}
    seen_left = {x["left"] for x in probe(rig)["last3"]}
    assert 3 in seen_left, seen_left

    # every result showed; those that came on the stream, how soon after the service read them
    p = probe(rig)
    keys = {s["key"] for s in p["shown"]}
    assert {s["key"] for s in shown} <= keys
    live = [x for x in p["shown"] if x["via"] == "stream"]
    lat = [x["shown_ms"] / 1000 - x["at_us"] / 1e6 for x in live]
    assert len(live) >= 6, p["shown"]  # spins 1-3 and 10-12 at least
    assert all(-0.05 < x < LATENCY_BOUND_S for x in lat), lat
    rig.latencies_s = lat
    print(
        f"\ndisplay latency (service's reception of RES -> the page's DOM), {len(lat)} results:"
        f" median {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms"
    )
    report = rig.tmp / "latency.json"
    report.write_text(json.dumps({"latencies_s": lat}))


def test_the_engineer_sees_the_last_spin_its_laps_and_its_call(rig):
    """After the session: the last spin's laps, its call and its drop drawn; the pocket where
    the ball rests lit on the wheel; the link's health and the frame log."""
    chef = rig.api()
    spin = int(chef.table(TABLE)["spin"])
    rec = chef.get(f"/api/tables/{TABLE}/spins/{spin}")
    revs = [f for f in rec["frames"] if f["type"] == "REV"]
    assert revs and any(f["type"] == "RNVP" for f in rec["frames"])
    rig.page("engineer")

    def drawn():
        p = probe(rig, "engineer")
        return p if p["spin"] == spin and p["laps"] == len(revs) and p["call"] else None

    wait_for(drawn, 60, "the last spin on the engineer's view")
    n_dots = rig.js("engineer", "return document.querySelectorAll('#laps circle').length")
    assert n_dots == len(revs)
    marks = ["mark-call", "mark-drop"]
    rnvp = next(f for f in rec["frames"] if f["type"] == "RNVP")
    if ",why=fit" in rnvp["line"]:
        marks.append("mark-predicted")
    for mark in marks:
        assert rig.js("engineer", f"return !!document.getElementById('{mark}')"), mark
    assert rig.js("engineer", "return document.querySelectorAll('#chart polyline.fit').length")
    result = rec["result"]["result"]
    lit = rig.js(
        "engineer",
        "return [...document.querySelectorAll('#wheel path.lit')].map(p => p.dataset.result)",
    )
    assert lit == [result]
    # the pockets in wheel.json's order, clockwise from sensor 0
    order = rig.js(
        "engineer",
        "return [...document.querySelectorAll('#wheel path.pocket')].map(p => p.dataset.result)",
    )
    assert order == [p["result"] for p in pages.wheel()["pockets"]]
    crc = rig.js(
        "engineer", "return document.querySelector('#link tr[data-k=damage-crc] td').textContent"
    )
    assert crc.isdigit()
    logged = rig.js("engineer", "return document.querySelectorAll('#log li').length")
    assert logged > 10
    # the frames came live on its stream, while the session was played (not only its tail)
    assert probe(rig, "engineer")["frames"] > 100
    # the ball among the pockets (HOP frames): the last one the resting pocket, and none lit
    # as bouncing once the result is in
    hops = [f for f in rec["frames"] if f["type"] == proto.T_HOP]
    assert hops and hops[-1]["line"].split(",lit=")[1].split("*")[0].split("#")[0] == result
    assert rig.js("engineer", "return document.querySelectorAll('#wheel path.hop').length") == 0
    rig.shot("engineer.png", "engineer")


def test_the_engineer_saw_the_pockets_lit_as_the_ball_bounced(rig):
    """During the live spins, each HOP frame heard on the stream lit its pockets on the wheel
    at once, in the spin's bounce (between its DROP and its result)."""
    heard = probe(rig, "engineer")["hops"]
    lit = [h for h in heard if h["lit"] and h["shown"] == h["lit"]]
    assert lit, heard[-20:]
    assert all(set(h["lit"]) <= set(numbers.NUMBERS) for h in heard)
    spins = {h["spin"] for h in lit}
    assert len(spins) >= 3, spins  # live: spins 1-3 and 10-12 at least
    n_hops = {}
    for spin in spins:
        rec = rig.api().get(f"/api/tables/{TABLE}/spins/{spin}")
        types = [f["type"] for f in rec["frames"]]
        n_hops[spin] = types.count(proto.T_HOP)
        first, last = types.index(proto.T_HOP), len(types) - types[::-1].index(proto.T_HOP) - 1
        assert types.index(proto.T_DROP) < first and last < types.index(proto.T_RESULT), types
    print(f"\nHOP frames per live spin: {n_hops}; {len(lit)} heard lit a pocket at once")


def test_a_recorded_night_replays_on_the_same_pages(rig, tmp_path):
    """`rmc serve --replay TRACE`: the session exported from the database, played again as a
    table of its own: the display shows the same results."""
    trace = tmp_path / "night.jsonl"
    db = f"sqlite:///{rig.tmp / 'rmc.db'}"
    p = rmc("export", "--db", db, "--table", TABLE, "-o", str(trace))
    assert p.returncode == 0, p.stderr
    # a bad replay: one line, exit 2
    for args, says in (
        (("--replay", str(tmp_path / "nosuch.jsonl")), "cannot read"),
        (("--replay", str(trace), "--table", "T9=loop://"), "no --table"),
        (("--replay", str(trace), "--speed", "-1"), "--speed"),
    ):
        bad = rmc("serve", *args, "--http", "127.0.0.1:0", cwd=tmp_path, timeout=60)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
        assert says in bad.stderr and "Traceback" not in bad.stderr
    with serve_replay(rig, trace, tmp_path) as (proc, url):
        second = proc.stdout.readline()
        assert f"of table {TABLE}" in second and f"{url}/display/{TABLE}" in second
        want = [(r["spin"], r["result"]) for r in api_marquee(rig)]
        replay = Client(url, None)

        def replayed():
            return [
                (r["spin"], r["result"]) for r in replay.get(f"/api/display/{TABLE}")["results"]
            ]

        wait_for(lambda: replayed() == want, 60, "the replayed results")
        rig.page("display")
        rig.driver.get(f"{url}/display/{TABLE}")
        got = wait_for(
            lambda: (m := rig.js("display", MARQUEE_JS)) and len(m) == len(want) and m,
            60,
            "the replay on the display",
        )
        assert [g["result"] for g in got] == [r for _, r in replayed()]
    assert proc.returncode == 0


@contextlib.contextmanager
def serve_replay(rig: Rig, trace: Path, tmp_path: Path) -> Iterator[tuple[Any, str]]:
    """`rmc serve --replay TRACE --speed 0` with the rig's operators: (process, its URL) once
    it listens; stopped with SIGTERM on the way out."""
    cfg = tmp_path / "ops.toml"
    cfg.write_text(rig.served.tokens.operators_toml())
    err = open(tmp_path / "replay.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmc", "serve", "--replay", str(trace), "--speed", "0",
         "--config", str(cfg), "--http", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp_path,
    )  # fmt: skip
    err.close()
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "listening on " in first, (first, (tmp_path / "replay.log").read_text())
        yield proc, first.rsplit("listening on ", 1)[1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


HOP_JS = "return [...document.querySelectorAll('#wheel path.hop')].map(p => p.dataset.result)"


def test_a_replay_stopped_in_a_bounce_shows_the_pockets_lit(rig, tmp_path):
    """`rmc serve --replay TRACE` of a night cut during the last spin's bounce: the engineer's
    wheel lights the pockets of its last HOP frame, as the live view did."""
    trace = tmp_path / "night.jsonl"
    db = f"sqlite:///{rig.tmp / 'rmc.db'}"
    assert rmc("export", "--db", db, "--table", TABLE, "-o", str(trace)).returncode == 0
    records = [json.loads(x) for x in trace.read_text().splitlines() if x.strip()]
    frames = [(i, r) for i, r in enumerate(records) if r.get("kind") == "frame"]
    hops = [(i, r["line"]) for i, r in frames if f",{proto.T_HOP}," in r["line"]]
    lit = [(i, x) for i, x in hops if ",lit=-" not in x]
    assert lit, "no HOP lighting a pocket in the night"
    cut, line = lit[-1]
    want = line.split(",lit=")[1].split("*")[0].split("#")[0].split(";")
    spin = int(line.split(",spin=")[1].split(",")[0])
    cut_trace = tmp_path / "bounce.jsonl"
    cut_trace.write_text("".join(json.dumps(r) + "\n" for r in records[: cut + 1]))
    with serve_replay(rig, cut_trace, tmp_path) as (_proc, url):
        replay = Client.from_token_file(url, rig.served.tokens.names["engineer"])
        view = wait_for(
            lambda: (
                (v := replay.get(f"/api/tables/{TABLE}/live")["spin"])
                and v["spin"] == spin
                and v["hop"]
                and v
            ),
            60,
            "the replayed bounce",
        )
        assert view["spin"] == spin and view["outcome"] is None and view["hop"]["lit"] == want
        assert login(rig, "engineer", rig.served.tokens.names["engineer"], base=url) == ""
        shown = wait_for(
            lambda: rig.js("engineer", HOP_JS) or None,
            60,
            "the pockets lit on the replay's wheel",
        )
        assert shown == [p["result"] for p in pages.wheel()["pockets"] if p["result"] in want]


def test_an_engineer_sets_a_threshold_and_a_chef_forces_a_close(rig):
    """The console's other orders: a threshold changed by an engineer after a confirmation
    (cancelled once: nothing sent), which a chef's console does not offer; a session opened
    and closed by force with a reason, the close shown in the journal as it happens."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    d = rig.driver
    chef = rig.api()

    def sets() -> int:
        return sum(
            1 for c in chef.get(f"/api/tables/{TABLE}/commands")["commands"] if c["cmd"] == "SET"
        )

    assert login(rig, "console", rig.served.tokens.names["engineer"]) == ""
    wait_for(lambda: d.find_element(By.ID, "thresholds").is_displayed(), 30, "the thresholds")
    wait_for(lambda: d.find_elements(By.CSS_SELECTOR, "#set-key option"), 30, "their list")
    Select(d.find_element(By.ID, "set-key")).select_by_value("lead_ms")
    box = d.find_element(By.ID, "set-value")
    box.clear()
    # a lead 200 ms shorter than the firmware's default (a later call: an engineer's order)
    default = str(fwconfig.Config().lead_ms)
    later = str(fwconfig.Config().lead_ms - 200)
    box.send_keys(later)
    before = sets()
    d.find_element(By.ID, "do-set").click()
    wait_for(lambda: d.find_element(By.ID, "confirm").is_displayed(), 10, "the confirmation")
    asked = d.find_element(By.ID, "confirm-text").text
    assert "lead_ms" in asked and later in asked and default in asked, asked
    d.find_element(By.ID, "confirm-no").click()
    assert not d.find_element(By.ID, "confirm").is_displayed()
    assert sets() == before  # cancelled: nothing went to the table
    d.find_element(By.ID, "do-set").click()
    wait_for(lambda: d.find_element(By.ID, "confirm").is_displayed(), 10, "the confirmation")
    d.find_element(By.ID, "confirm-yes").click()
    row = "return [...document.querySelectorAll('#set-table tr[data-key=lead_ms] td')]"
    cells = wait_for(
        lambda: (c := d.execute_script(row + ".map(td => td.textContent)"))[3] == later and c,
        60,
        "the threshold set",
    )
    assert cells[4] == "paul"
    # the page shows the table's CFG frame as it comes; the database has it once written
    settings = wait_for(
        lambda: chef.get(f"/api/tables/{TABLE}/settings")["settings"], 30, "the setting stored"
    )
    assert settings[0]["data"]["key"] == "lead_ms" and str(settings[0]["data"]["new"]) == later
    assert settings[0]["data"]["by"] == "paul"
    # a chef's console offers no threshold
    assert login(rig, "console", rig.served.tokens.names["chef"]) == ""
    assert not d.find_element(By.ID, "thresholds").is_displayed()
    # a session opened and closed by force: the reason on record, and in the journal
    assert console_order(rig, "open", {"chef": "marie"})["ok"]
    out = console_order(rig, "close", {"reason": "roue à vérifier"})
    assert out["ok"], out
    journal = wait_for(
        lambda: [x for x in probe(rig, "console")["journal"] if x["type"] == "forced_close"],
        60,
        "the forced close in the journal",
    )
    assert "roue à vérifier" in journal[0]["text"]
    closed = wait_for(
        lambda: [
            x
            for x in chef.get(f"/api/tables/{TABLE}/sessions?last=1")["sessions"]
            if x.get("reason")
        ],
        30,
        "the forced close stored",
    )
    assert closed[0]["reason"] == "roue à vérifier"


def test_the_console_recalls_the_last_results(rig):
    """« Rappeler »: the table's own record of its last results, newest first, through the
    API's recall (the firmware sends the RECALL frame before its ACK)."""
    from selenium.webdriver.common.by import By

    d = rig.driver
    assert login(rig, "console", rig.served.tokens.names["chef"]) == ""
    before = len(probe(rig, "console").get("answers", []))
    box = d.find_element(By.ID, "recall-n")
    box.clear()
    box.send_keys("10")
    d.find_element(By.ID, "do-recall").click()
    answers = wait_for(
        lambda: (a := probe(rig, "console").get("answers", []))[before:] and a, 60, "the recall"
    )
    got = answers[-1]
    assert got["verb"] == "recall"
    chef = rig.api()
    sent = wait_for(  # the command and its answer on record, once written
        lambda: [
            c
            for c in chef.get(f"/api/tables/{TABLE}/commands")["commands"]
            if c["cmd"] == "RECALL" and c["answered_us"]
        ],
        30,
        "the recall on record",
    )
    assert sent[0]["by"] == "marie" and sent[0]["ok"]  # the table took it
    assert got["ok"], got  # the RECALL frame comes before its ACK: the service takes it up
    recalled = (
        "return [...document.querySelectorAll('#recall li')]"
        ".map(li => [li.dataset.spin, li.querySelector('.chip').textContent])"
    )
    games = wait_for(lambda: d.execute_script(recalled), 30, "the recalled results")
    newest = api_marquee(rig)
    assert len(games) >= 10
    assert [r for _, r in games[:10]] == [r["result"] for r in newest[:10]]


# --- what the pages are given (no browser) -----------------------------------------------------


def test_figures_hot_cold_and_shares():
    rows = [{"result": x} for x in ["17", "0", "17", "CMC", "00", "3", "3", "5", "32", "17"]]
    f = pages.figures(rows)  # newest first
    assert f.coups == 10
    assert [h["result"] for h in f.hot] == ["17", "3"] and f.hot[0]["count"] == 3
    assert f.hot[0]["colour"] == "noir" and f.hot[1]["colour"] == "rouge"
    assert all(c["count"] == 0 for c in f.cold) and len(f.cold) == pages.HOT_COLD
    s = f.shares
    assert s["rouge"]["n"] + s["noir"]["n"] + s["0"]["n"] + s["00"]["n"] + s["CMC"]["n"] == 10
    assert (s["0"]["n"], s["00"]["n"], s["CMC"]["n"]) == (1, 1, 1)
    assert s["impair"]["n"] == 6 and s["pair"]["n"] == 1 and s["passe"]["n"] == 1
    assert s["rouge"]["pct"] == 40.0
    empty = pages.figures([])
    assert empty.coups == 0 and empty.hot == [] and empty.shares["rouge"]["pct"] == 0.0


def test_announcements_are_the_settlements():
    assert pages.announcement("17") == "17, noir, impair et manque"
    assert [pages.announcement(x) for x in ("0", "00", "CMC")] == ["Zéro", "Double zéro", "CMC"]
    assert pages.announcement("37") is None


def test_the_public_stream_shows_no_operator_nor_fault():
    ev = {"id": 1, "type": "command", "table": "T01", "by": "marie"}
    assert pages.public_event(ev, "T01") is None
    assert pages.public_event({"type": "fault", "table": "T01", "data": {}}, "T01") is None
    res = {"type": "result", "table": "T01", "result": "CMC", "colour": "vert", "valid": True,
           "spin": 4, "boot": 1, "seq": 9, "at_us": 5}  # fmt: skip
    out = pages.public_event(res, "T01")
    assert out["announcement"] == "CMC" and out["spin"] == 4
    assert pages.public_event({**res, "valid": False}, "T01") is None
    assert pages.public_event(res, "T02") is None
    link = {"type": "link", "table": "T01", "connected": True, "error": "/dev/ttyUSB0 gone"}
    assert "error" not in pages.public_event(link, "T01")


def test_the_lap_fit_follows_the_model():
    a, b = 0.99, 0.2
    periods = [0.5]
    for _ in range(10):
        u = a / periods[-1] ** 2 - b
        periods.append(1 / u**0.5)
    fit = pages.lap_fit(periods)
    assert fit is not None and abs(fit.a - a) < 1e-6 and abs(fit.b - b) < 1e-6
    assert pages.lap_fit(periods[:2]) is None
    short = pages.lap_fit(periods[:4])  # too few laps for the drag: none assumed
    assert short is not None and short.a == 1.0
