"""The MQTT bench's accounting (tests/bench/mqtt_e2e.py): every frame counted once, latencies
never negative. No timing is asserted: the machine's load changes every figure, not these."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import mqtt_e2e
from mqtt_e2e import E2E, Sample, figures
from mqtt_support import mosquitto_fixture  # noqa: F401

MS = 1_000_000  # ns


def test_figures_count_each_frame_once() -> None:
    """Synthetic sides: 2 tables x 5 frames; one frame never verified, one verified after
    the grace; the window holds the frames read from t=100 ms to t=400 ms."""
    base = 1_000_000_000_000
    sent = {"A": {"boot": 1, "t_ns": [base + i * 100 * MS for i in range(5)]},
            "B": {"boot": 2, "t_ns": [base + i * 100 * MS for i in range(4)] + [0]}}  # fmt: skip
    rows = {}
    verified = {}
    arrived = {}
    for t, s in sent.items():
        for i in range(5):
            k = (t, s["boot"], i + 1)
            rows[k] = (base + i * 100 * MS + 5 * MS) // 1000  # read 5 ms after sent
            arrived[k] = base + i * 100 * MS + 20 * MS
            verified[k] = base + i * 100 * MS + 25 * MS  # 20 ms after read
    del verified[("A", 1, 3)]  # never verified
    grace = base + 10_000 * MS
    verified[("B", 2, 4)] = grace + 1  # verified too late: missing
    a = Sample(0.0, base + 100 * MS, 0.0, 0.0, 0.0)
    b = Sample(0.3, base + 400 * MS, 0.3, 0.03, 0.06)
    r = E2E("SQLite", 2, 1.0)
    figures(r, sent, rows, verified, a, b, grace, arrived)
    assert r.frames_sent == 9  # B's 5th frame was not sent live (t_ns 0)
    assert r.frames_stored == 10
    assert r.frames_verified == 9
    assert r.missing == 2  # A3 never, B4 too late
    assert r.window_frames == 6  # read at 105, 205, 305 ms, each table
    assert r.window_unverified == 2  # A3 and B4
    assert r.min_ms == 20.0 and r.p50_ms == 20.0
    assert r.p99_ms == math.inf  # 2 of 6 never verified in time: the p99 says so
    assert r.to_sub_p50_ms == 15.0 and r.in_sub_p50_ms == 5.0
    assert r.send_p50_ms == 25.0
    assert abs(r.service_cores - 1.0) < 1e-9
    assert abs(r.subscriber_cores - 0.2) < 1e-9


def test_tiny_run_counts_every_frame_once(mosquitto, tmp_path: Path) -> None:
    """3 simulated tables, 1.5 s, through rmc serve, the broker and the subscriber: each
    frame sent is stored and verified, once; each latency is >= 0."""
    keep: dict = {}
    r = mqtt_e2e.run(3, mosquitto, 1.5, warmup=0.5, grace=180.0, keep=keep)
    sent = {(t, s["boot"], i + 1) for t, s in keep["sent"].items()
            for i, ns in enumerate(s["t_ns"]) if ns}  # fmt: skip
    rows, verified, arrived = keep["rows"], keep["verified"], keep["arrived"]
    assert sent and r.frames_sent == len(sent)
    assert keep["repeats"] == 0 and r.duplicates == 0  # none verified twice
    assert sent <= set(verified)  # every frame sent verified (missing: none)
    assert r.missing == 0
    assert set(verified) <= set(rows)  # nothing verified that the service did not store
    assert r.frames_verified == len(verified) and r.frames_stored == len(rows)
    for k, v in verified.items():
        assert v >= rows[k] * 1000, k  # verified after read
        assert arrived[k] <= v, k
    for x in (r.min_ms, r.p50_ms, r.p99_ms):
        assert x != x or x >= 0  # nan when the window held none (a very busy machine)
    assert r.window_unverified == 0
    assert r.service_cores >= 0 and r.broker_cores >= 0 and r.subscriber_cores >= 0
