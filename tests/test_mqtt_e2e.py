"""End to end: simulated tables -> the service (SQLite) -> Mosquitto -> `rmc subscribe -o`.

The broker is restarted mid-session. The subscriber's traces and the database both hold
every frame exactly once (duplicates dropped by key), `rmc check` calls each trace clean
with the table's key, and the subscriber's results are the database's. Every wait polls.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from mqtt_support import mosquitto_fixture, trace_frames  # noqa: F401  (`mosquitto`)
from test_mqtt import wait_for

from rmc.serve.config import ServeConfig
from rmc.serve.service import Service
from rmc.serve.simtable import SimSpec, SimTables, table_key
from rmc.serve.tables import TableSpec

SECRET = bytes(range(32))
PREFIX = "casino/e2e"


def test_tables_to_subscriber_through_a_restarted_broker(mosquitto, tmp_path):
    n = 2500
    ids = ["E01", "E02"]
    specs = [SimSpec(t, key=table_key(SECRET, t), frames=n, line_bps=25_000, start="go",
                     lose=frozenset({40, 41})) for t in ids]  # fmt: skip
    keys = []
    for t in ids:
        (tmp_path / f"{t}.key").write_text(table_key(SECRET, t).hex() + "\n")
        keys += ["--key-file", f"{t}={tmp_path / f'{t}.key'}"]
    out = tmp_path / "traces"
    out.mkdir()
    log = open(tmp_path / "subscribe.log", "wb")
    sub = subprocess.Popen(
        [sys.executable, "-m", "rmc", "subscribe", f"{mosquitto.url}/{PREFIX}", *keys,
         "-o", str(out / "{table}.jsonl"), "--client-id", "e2e-subscriber"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    log.close()
    sublog = (tmp_path / "subscribe.log").read_text
    wait_for(lambda: "rmc subscribe:" in sublog(), "the subscriber connected", state=sublog)
    with SimTables(specs) as sim:
        cfg = ServeConfig(
            tables=[TableSpec(t, u, table_key(SECRET, t)) for t, u in sim.urls().items()],
            db=f"sqlite:///{tmp_path / 'rmc.db'}",
            mqtt=mosquitto.url,
            mqtt_prefix=PREFIX,
        )
        svc = Service(cfg).start()
        assert svc.store is not None and svc.mqtt is not None
        events: list[dict] = []
        svc.bus.subscribe(lambda e: events.append(e) or True)
        try:
            wait_for(lambda: all(r.health.connected for r in svc.runners.values()), "connected")
            sim.call(sim.go)
            wait_for(lambda: all(len(trace_frames(out / f"{t}.jsonl")) > 500 for t in ids),
                     "frames through the broker before its restart", state=sublog)  # fmt: skip
            mosquitto.stop()
            wait_for(lambda: not svc.health()["mqtt"]["connected"], "the broker seen gone")
            mosquitto.start()

            def stored() -> bool:
                svc.flush(5)
                return all(svc.store.frame_count(t) == n for t in ids)  # type: ignore[union-attr]

            wait_for(stored, "every frame in the database")
            wait_for(svc.mqtt.idle, "every row published", state=svc.mqtt.health.as_dict)
            wait_for(lambda: all(len(trace_frames(out / f"{t}.jsonl")) == n for t in ids),
                     "every frame in the traces", state=sublog)  # fmt: skip
            assert any(e["type"] == "mqtt" and not e["connected"] for e in events)
            db_lines = {t: [r.line for r in svc.store.frames(t)] for t in ids}
            db_results = {t: svc.store.results(t, last=10**6)[::-1] for t in ids}
        finally:
            svc.stop()
    sub.send_signal(signal.SIGTERM)
    assert sub.wait(60) == 0, sublog()
    text = sublog()
    for t in ids:
        lines = trace_frames(out / f"{t}.jsonl")
        # every frame once, as the database holds it (a gap asked again: its "~" kept)
        assert len(lines) == len(set(lines)) == n
        assert sorted(lines) == sorted(db_lines[t])
        assert sorted((int(x.lstrip("~").split(",")[2]), int(x.lstrip("~").split(",")[3]))
                      for x in lines) == [(1, s) for s in range(1, n + 1)]  # fmt: skip
        check = subprocess.run(
            [sys.executable, "-m", "rmc", "check", str(out / f"{t}.jsonl"),
             "--key-file", str(tmp_path / f"{t}.key"), "--json"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        report = json.loads(check.stdout)
        assert check.returncode == 0, (report["gaps"], report["violations"], report["alerts"])
        assert report["valid"] == n and report["auth_failures"] == 0 and report["unverified"] == 0
        valid = [(r["spin"], r["result"]) for r in db_results[t] if r["valid"]]
        assert [(r["spin"], r["result"]) for r in report["results"]] == valid
        assert f"{t} spin {valid[-1][0]}: " in text
    assert "connected again" in text
