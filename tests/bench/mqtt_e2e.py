"""End-to-end latency of the MQTT path (issue 23), for tests/bench/bench_mqtt.py.

N simulated tables at line rate (`rmc.serve.simtable` in a process of its own, as
tests/bench/bench_serve.py runs them: the firmware's encoder and journal, 115200 baud, each
table's own HMAC key), `rmc serve --config FILE` as a real process (SQLite or PostgreSQL,
`mqtt = ` a Mosquitto of the bench's own on loopback), and `rmc.subscribe.Subscriber` in
this process (the code `rmc subscribe` runs: every frame's CRC, HMAC tag, place in its table's
sequence, the decree's rules), subscribed before the service starts.

What is measured, and how, without changing it:

- the start of a frame's way: when the service read it off the table's link, the `rx_us`
  the service stores with every frame row (read from the database once the run is over);
  and when the table wrote it to its socket (the simulated tables' `--sent` file);
- the end: when the subscriber has checked the frame (CRC, tag, its place in the table's
  sequence): `Subscriber.on_verified`, a hook that is None outside benchmarks, here
  `time.time_ns()` kept by (table, boot, seq);
- both clocks are this machine's wall clock (time.time_ns in every process);
- frames read by the service in the steady window (WARMUP_S after the start to the end of
  the sending) make the latencies; a frame of the window not verified by the end of the
  grace counts as an infinite latency (so a p99 shown is never flattered by a backlog);
- CPU over the window: the service's process, the broker's, the subscriber's paho thread
  (it verifies in its message callback), the simulated tables' (their own count).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "host"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: mqtt_support, pgserver
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_serve

from bench_serve import SECRET, Sim, frames_needed

from rmc.serve.mqtt import client, parse_url
from rmc.serve.simtable import table_ids, table_key
from rmc.subscribe import Subscriber

TICK = os.sysconf("SC_CLK_TCK")
WARMUP_S = 2.0
GRACE_S = 15.0  # after the lines stop: time for what was sent to be verified
START_TIMEOUT_S = 180.0  # the service connected to every table


def pid_cpu(pid: int | None) -> float:
    """CPU seconds of a process (all its threads); 0 when it is gone."""
    return _ticks(f"/proc/{pid}/stat") if pid else 0.0


def tid_cpu(tid: int | None) -> float:
    """CPU seconds of one thread of this process; 0 when it is gone."""
    return _ticks(f"/proc/self/task/{tid}/stat") if tid else 0.0


def _ticks(path: str) -> float:
    try:
        with open(path) as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(rest[11]) + int(rest[12])) / TICK


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank); inf values sort last; nan when empty."""
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


@dataclass
class E2E:
    """One run's figures (latencies in ms)."""

    db: str
    tables: int
    duration_s: float
    linger_s: float | None = None  # the publisher's (None: its default, LINGER_S)
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)  # the load average at the end
    frames_sent: int = 0  # every live frame the tables sent
    frames_stored: int = 0  # rows in the service's database at the end
    frames_verified: int = 0  # distinct frames the subscriber verified
    missing: int = 0  # sent, not verified by the end of the grace
    duplicates: int = 0  # frames the subscriber dropped as heard twice
    sent_per_s: float = 0.0  # in the steady window
    read_per_s: float = 0.0  # read by the service in the window (rx_us)
    verified_per_s: float = 0.0  # verified by the subscriber in the window
    window_frames: int = 0  # frames read by the service in the window: the latencies'
    window_unverified: int = 0  # ... of them not verified by the end (infinite latency)
    p50_ms: float = float("nan")  # read by the service -> verified by the subscriber
    p99_ms: float = float("nan")
    max_ms: float = float("nan")
    min_ms: float = float("nan")
    send_p50_ms: float = float("nan")  # written by the table -> verified
    send_p99_ms: float = float("nan")
    to_sub_p50_ms: float = float("nan")  # read by the service -> its message at the subscriber
    to_sub_p99_ms: float = float("nan")
    in_sub_p50_ms: float = float("nan")  # its message at the subscriber -> verified
    in_sub_p99_ms: float = float("nan")
    service_cores: float = 0.0
    broker_cores: float = 0.0
    subscriber_cores: float = 0.0
    sim_cores: float = 0.0
    service_us_per_frame: float = 0.0  # the service's CPU per frame it read
    subscriber_us_per_frame: float = 0.0  # the subscriber's CPU per frame it verified
    all_s: float = 0.0  # from the start of the sending to the last frame verified (or grace)
    service_us: float = 0.0  # CPU µs a frame sent, over all_s: the service's process
    broker_us: float = 0.0  # ... the broker's
    subscriber_us: float = 0.0  # ... the subscriber's thread
    messages: int = 0  # acknowledged by the broker (the service's health)
    frame_messages: int = 0
    took_s: float = 0.0  # the whole run, start to stop
    notes: list[str] = field(default_factory=list)

    @property
    def keeps_up(self) -> bool:
        return self.missing == 0 and self.verified_per_s >= 0.97 * self.sent_per_s


class Probe:
    """The subscriber's side: `rmc.subscribe.Subscriber` with its latency hook on."""

    def __init__(self, url: str, prefix: str, keys: dict[str, bytes]) -> None:
        self.sub = Subscriber(parse_url(url), prefix, keys)
        self.at: dict[tuple[str, int, int], int] = {}  # verified
        self.arrived: dict[tuple[str, int, int], int] = {}  # its message taken from the socket
        self.repeats = 0  # the hook called twice for one key (never, if the dedup works)
        self.subscribed = threading.Event()
        self._msg_ns = 0
        at, arrived, now = self.at, self.arrived, time.time_ns

        def verified(table: str, boot: int, seq: int) -> None:
            k = (table, boot, seq)
            if k in at:
                self.repeats += 1
            else:
                at[k] = now()
                arrived[k] = self._msg_ns

        self.sub.on_verified = verified

    def _on_message(self, c: Any, userdata: Any, msg: Any) -> None:
        self._msg_ns = time.time_ns()  # when paho handed the message over
        self.sub._on_message(c, userdata, msg)

    def start(self, timeout: float = 30.0) -> Probe:
        """Connected and subscribed (the SUBACK heard): nothing published after is missed.
        Subscriber.start with paho's on_subscribe added."""
        s = self.sub
        c = s._mqtt = client(s.broker, s.client_id, clean=False)
        c.on_connect = s._on_connect
        c.on_disconnect = s._on_disconnect
        c.on_message = self._on_message
        c.on_subscribe = lambda *a: self.subscribed.set()
        c.connect(s.broker.host, s.broker.port, keepalive=30)
        c.loop_start()
        if not self.subscribed.wait(timeout):
            raise RuntimeError("the subscriber was not subscribed in time")
        return self

    @property
    def tid(self) -> int | None:
        th = getattr(self.sub._mqtt, "_thread", None)
        return th.native_id if th is not None else None

    def count(self) -> int:
        return len(self.at)

    def stop(self) -> None:
        self.sub.stop()


# `rmc serve` with the publisher's LINGER_S set first (the bench's knob: the CLI has none)
_LAUNCH = (
    "import sys; import rmc.serve.mqtt as m; m.LINGER_S = float(sys.argv.pop(1)); "
    "from rmc.cli import main; raise SystemExit(main())"
)


def serve_process(folder: Path, urls: dict[str, str], keys: dict[str, bytes], db: str,
                  mqtt: str, prefix: str, linger: float | None) -> Any:  # fmt: skip
    """tests/mqtt_support.ServeProcess, started as `python -m rmc serve`, or through
    _LAUNCH when `linger` is given."""
    from mqtt_support import ServeProcess

    class Serve(ServeProcess):
        def argv(self) -> list[str]:
            if linger is None:
                return super().argv()
            return [sys.executable, "-c", _LAUNCH, str(linger), "serve", "--config",
                    str(self.config)]  # fmt: skip

    return Serve(folder, urls, keys, db, mqtt, prefix)


def established(ports: set[int]) -> int:
    """Loopback TCP connections established to these local ports (/proc/net/tcp): the
    service connected to the simulated tables."""
    n = 0
    with contextlib.suppress(OSError), open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[3] == "01" and int(parts[1].rsplit(":", 1)[1], 16) in ports:
                n += 1
    return n


def _wait(cond: Any, timeout: float, what: str, state: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}" + (f": {state()}" if state else ""))
        time.sleep(0.05)


def run(
    n: int,
    broker: Any,
    duration: float,
    db: str = "sqlite",
    pg_url: str | None = None,
    warmup: float = WARMUP_S,
    grace: float = GRACE_S,
    log: Any = None,
    linger: float | None = None,
    keep: dict[str, Any] | None = None,
) -> E2E:
    """One run: n tables for `duration` s through the service, the broker, the subscriber.
    `keep` (a dict) gets what the figures come from: "sent" (the tables' send times),
    "rows" (the stored frames' rx_us), "verified" and "arrived" (ns), "repeats"."""
    res = E2E(db, n, duration, linger)
    t_start = time.monotonic()
    prefix = f"bench/e2e-{n}-{time.time_ns() % 10**9}"
    ids = table_ids(n)
    keys = {t: table_key(SECRET, t) for t in ids}
    say = log or (lambda s: None)
    with tempfile.TemporaryDirectory(prefix="rmc-bench-mqtt-e2e-") as tmp:
        folder = Path(tmp)
        sim = Sim(n, duration, folder, frames_needed(duration))
        serve = probe = None
        try:
            urls = sim.next(600)["tables"]
            probe = Probe(broker.url, prefix, keys).start()
            url = pg_url or f"sqlite:///{folder / 'rmc.db'}"
            serve = serve_process(folder / "serve", urls, keys, url, broker.url, prefix, linger)
            say(f"{n} tables: starting rmc serve")
            serve.start(timeout=START_TIMEOUT_S)
            ports = {int(u.rsplit(":", 1)[1]) for u in urls.values()}
            _wait(lambda: established(ports) >= n, START_TIMEOUT_S, "the service's connections",
                  lambda: f"{established(ports)} of {n}")  # fmt: skip
            w = _drive(sim, serve, broker, probe, duration, warmup, grace, say)
            m = (serve.health() or {}).get("mqtt") or {}
            res.messages, res.frame_messages = m.get("published", 0), m.get("frame_messages", 0)
        finally:
            if serve is not None:
                serve.stop()
            if probe is not None:
                probe.stop()
            sim.close()
        rows = _stored(url)
        res.sim_cores = sim.cpu_s / duration
        res.duplicates = sum(t.dropped for t in probe.sub.feeds.values())
        if probe.repeats:
            res.notes.append(f"{probe.repeats} frames verified twice")
        verified, arrived = dict(probe.at), dict(probe.arrived)
        whole(res, w.go, w.end, len(rows), len(verified))
        figures(res, w.sent, rows, verified, w.a, w.b, w.grace_ns, arrived)
        if keep is not None:
            keep.update(sent=w.sent, rows=rows, verified=verified, arrived=arrived,
                        repeats=probe.repeats)  # fmt: skip
    res.load = os.getloadavg()
    res.took_s = time.monotonic() - t_start
    return res


@dataclass
class Watched:
    """What `_drive` saw: CPU samples at the start of the sending (go), at the steady
    window's ends (a, b) and at the end (end); the tables' send times; the grace's end."""

    go: Sample
    a: Sample
    b: Sample
    end: Sample
    sent: dict[str, Any]
    grace_ns: int


def _drive(sim: Sim, serve: Any, broker: Any, probe: Probe, duration: float, warmup: float,
           grace: float, say: Any) -> Watched:  # fmt: skip
    """The tables started together, CPU sampled, then the subscriber waited for until it
    has verified every frame sent (or the grace is over)."""
    pid = serve.proc.pid if serve.proc else None
    go = _sample(pid, broker, probe)
    sim.go()
    t_go = time.monotonic()
    time.sleep(warmup)
    a = _sample(pid, broker, probe)
    time.sleep(max(0.0, t_go + duration - time.monotonic()))
    b = _sample(pid, broker, probe)
    sim.wait_done(duration + 120)
    sent = sim.sent()
    want = [(t, s["boot"], i + 1) for t, s in sent.items()
            for i, ns in enumerate(s["t_ns"]) if ns]  # fmt: skip
    say(f"{len(sent)} tables: sent {len(want):,} frames; waiting for the subscriber")
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if probe.count() >= len(want):  # (the journals' resends are verified too)
            want = [k for k in want if k not in probe.at]
            if not want:
                break
        time.sleep(0.1)
    grace_ns = time.time_ns()
    return Watched(go, a, b, _sample(pid, broker, probe), sent, grace_ns)


def whole(res: E2E, g: Sample, e: Sample, stored: int, verified: int) -> None:
    """CPU µs a frame over the whole run (from the start of the sending to the last frame
    verified, or the end of the grace), each part's CPU over the frames it handled (the
    service: stored; the broker and the subscriber: verified): what a frame costs, its
    backlog included, whatever share of the machine the part got."""
    res.all_s = e.t - g.t
    res.service_us = (e.service - g.service) / max(1, stored) * 1e6
    res.broker_us = (e.broker - g.broker) / max(1, verified) * 1e6
    res.subscriber_us = (e.subscriber - g.subscriber) / max(1, verified) * 1e6


@dataclass
class Sample:
    t: float  # monotonic
    wall_ns: int
    service: float
    broker: float
    subscriber: float


def _sample(pid: int | None, broker: Any, probe: Probe) -> Sample:
    return Sample(
        time.monotonic(),
        time.time_ns(),
        pid_cpu(pid),
        pid_cpu(broker.proc.pid if broker.proc else None),
        tid_cpu(probe.tid),
    )


def _stored(url: str) -> dict[tuple[str, int, int], int]:
    """(table, boot, seq) -> rx_us of every frame row the service stored."""
    sql = "SELECT table_id, boot, seq, rx_us FROM frames"
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url[len("sqlite:///") :])) as conn:
            return {(t, b, s): rx for t, b, s, rx in conn.execute(sql)}
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        return {(t, b, s): rx for t, b, s, rx in conn.execute(sql)}


def figures(
    res: E2E,
    sent: dict[str, Any],
    rows: dict[tuple[str, int, int], int],
    verified: dict[tuple[str, int, int], int],
    a: Sample,
    b: Sample,
    grace_ns: int,
    arrived: dict[tuple[str, int, int], int] | None = None,
) -> None:
    """The run's rates, latencies and CPU from what each side kept (pure: tested)."""
    lo, hi = a.wall_ns, b.wall_ns
    span = max(1e-9, (hi - lo) / 1e9)
    sent_keys = {}
    for table, s in sent.items():
        for i, t in enumerate(s["t_ns"]):
            if t:
                sent_keys[(table, s["boot"], i + 1)] = t
    res.frames_sent = len(sent_keys)
    res.frames_stored = len(rows)
    res.frames_verified = len(verified)
    res.missing = sum(1 for k in sent_keys if not 0 < verified.get(k, 0) <= grace_ns)
    res.sent_per_s = sum(1 for t in sent_keys.values() if lo <= t < hi) / span
    res.verified_per_s = sum(1 for t in verified.values() if lo <= t < hi) / span
    _latencies(res, sent_keys, rows, verified, arrived or {}, lo, hi, grace_ns)
    res.read_per_s = res.window_frames / span
    wall = max(1e-9, b.t - a.t)
    res.service_cores = (b.service - a.service) / wall
    res.broker_cores = (b.broker - a.broker) / wall
    res.subscriber_cores = (b.subscriber - a.subscriber) / wall
    res.service_us_per_frame = (b.service - a.service) / max(1, res.window_frames) * 1e6
    done = sum(1 for t in verified.values() if lo <= t < hi)
    res.subscriber_us_per_frame = (b.subscriber - a.subscriber) / max(1, done) * 1e6


def _latencies(
    res: E2E,
    sent_keys: dict[tuple[str, int, int], int],
    rows: dict[tuple[str, int, int], int],
    verified: dict[tuple[str, int, int], int],
    arrived: dict[tuple[str, int, int], int],
    lo: int,
    hi: int,
    grace_ns: int,
) -> None:
    """The latencies of the frames the service read in [lo, hi) (wall ns)."""
    res.window_frames = res.window_unverified = 0
    lat: list[float] = []
    send_lat: list[float] = []
    to_sub: list[float] = []
    in_sub: list[float] = []
    for k, rx_us in rows.items():
        rx = rx_us * 1000
        if not lo <= rx < hi:
            continue
        res.window_frames += 1
        v = verified.get(k)
        if v is None or v > grace_ns:
            lat.append(math.inf)
            send_lat.append(math.inf)
            res.window_unverified += 1
            continue
        lat.append((v - rx) / 1e6)
        m = arrived.get(k)
        if m:
            to_sub.append((m - rx) / 1e6)
            in_sub.append((v - m) / 1e6)
        t = sent_keys.get(k)
        if t is not None:
            send_lat.append((v - t) / 1e6)
    res.p50_ms, res.p99_ms = pct(lat, 0.5), pct(lat, 0.99)
    res.max_ms = max(lat, default=float("nan"))
    res.min_ms = min(lat, default=float("nan"))
    res.send_p50_ms, res.send_p99_ms = pct(send_lat, 0.5), pct(send_lat, 0.99)
    res.to_sub_p50_ms, res.to_sub_p99_ms = pct(to_sub, 0.5), pct(to_sub, 0.99)
    res.in_sub_p50_ms, res.in_sub_p99_ms = pct(in_sub, 0.5), pct(in_sub, 0.99)


# --- the broker alone: a trivial publisher and subscriber at a given message rate ----------


@dataclass
class BrokerAlone:
    messages_per_s: float  # asked
    payload: int  # bytes a message
    sent: int = 0
    received: int = 0
    achieved_per_s: float = 0.0
    p50_ms: float = float("nan")  # publish -> received
    p99_ms: float = float("nan")
    broker_cores: float = 0.0
    publisher_cores: float = 0.0  # paho, this process: its sending thread and network thread
    subscriber_cores: float = 0.0  # paho's network thread (the callback counts only)
    frames_per_s: float = 0.0  # the frames those messages stand for (the ceiling's)


def _alone_clients(broker: Any, topic: str, lat: list[float], got: list[int]) -> tuple[Any, Any]:
    """A paho publisher and a subscriber to topic/# (QoS 1, its SUBACK heard) that notes
    each message's latency (its payload starts with its send time, ns) in `lat`."""
    import paho.mqtt.client as mqtt

    subscribed = threading.Event()

    def on_message(c: Any, u: Any, msg: Any) -> None:
        lat.append((time.time_ns() - int(msg.payload[:19])) / 1e6)
        got[0] += 1

    def mk(cid: str) -> Any:
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid, protocol=mqtt.MQTTv311)
        c.max_inflight_messages_set(0)
        return c

    sub = mk(f"alone-sub-{os.getpid()}")
    sub.on_message = on_message
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.on_connect = lambda c, *a: c.subscribe(topic + "/#", 1)
    sub.connect("127.0.0.1", broker.port)
    sub.loop_start()
    pub = mk(f"alone-pub-{os.getpid()}")
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()
    if not subscribed.wait(30):
        raise RuntimeError("the broker-alone subscriber was not subscribed")
    return pub, sub


def broker_alone(broker: Any, rate: float, payload: int, seconds: float) -> BrokerAlone:
    """Paho publishes `rate` QoS 1 messages a second of `payload` bytes (stamped with their
    send time) to the broker for `seconds`; a paho subscriber (QoS 1) notes each arrival.
    The broker's CPU and the publish -> receive latency: what the broker itself costs at a
    message rate, nothing of ours in the way."""
    out = BrokerAlone(rate, payload)
    topic = f"bench/alone-{time.time_ns() % 10**9}"
    lat: list[float] = []
    got = [0]
    pub, sub = _alone_clients(broker, topic, lat, got)
    pad = b"x" * max(0, payload - 20)
    bpid = broker.proc.pid if broker.proc else None
    b0, p0, s0 = pid_cpu(bpid), time.thread_time(), tid_cpu(sub._thread.native_id)
    pn0 = tid_cpu(pub._thread.native_id)
    t0 = time.monotonic()
    step = 0.01  # a tick's messages at once, as the publisher sends a page's
    per = rate * step
    n = 0
    while (now := time.monotonic()) < t0 + seconds:
        due = int((now - t0) * rate) + 1
        while n < due:
            pub.publish(f"{topic}/{n % 500}", b"%019d " % time.time_ns() + pad, qos=1)
            n += 1
        time.sleep(max(0.0, t0 + (n + per) / rate - time.monotonic()) if per else step)
    wall = time.monotonic() - t0
    pub_cpu = time.thread_time() - p0 + tid_cpu(pub._thread.native_id) - pn0
    deadline = time.monotonic() + 20
    while got[0] < n and time.monotonic() < deadline:
        time.sleep(0.05)
    out.broker_cores = (pid_cpu(bpid) - b0) / wall
    out.subscriber_cores = (tid_cpu(sub._thread.native_id) - s0) / wall
    out.publisher_cores = pub_cpu / wall
    out.sent, out.received = n, got[0]
    out.achieved_per_s = n / wall
    lat += [math.inf] * (n - got[0])
    out.p50_ms, out.p99_ms = pct(lat, 0.5), pct(lat, 0.99)
    for c in (pub, sub):
        c.disconnect()
        c.loop_stop()
    return out
