"""The engine node's own watchdog (``soak-watch``) and how G4 counts restarts from it, when the
engine runs on another node than the soak's load.

The scenarios that would PASS ``no_restarts`` wrongly are each here with the verdict they must get
instead: the watchdog never started, its events never pulled (or pulled only part way), it ended
before the soak did, and an engine found alive at the end (which says nothing of a crash and a
restart in between). The watcher itself is run for real on processes of this machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.load.soak import EVENTS, process_start_time
from harness.load.soakwatch import WatchConfig, run_watch
from harness.pipelines.soakdata import engine_restarts, soak_measured
from tests.pipelines.test_g4_soakdata import T0, verdicts, write_soak


def watch_events(*events: dict[str, Any], end: str | None = "stopped", end_t: float = T0 + 70) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"t": T0 - 1, "event": "watch_start", "instances": 2}, *events]
    if end is not None:
        rows.append({"t": end_t, "event": "watch_end", "reason": end, "restarts": 0})
    return rows


def write_watch(d: Path, rows: list[dict[str, Any]]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / EVENTS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


RESTART_1 = {"t": T0 + 20, "event": "restart", "instance": 1, "pid": 4242, "restarts": 1,
             "detail": "instance 1: engine process gone"}


def test_the_engine_nodes_watchdog_decides_restarts(tmp_path: Path) -> None:
    soak = write_soak(tmp_path / "s")
    ok = write_watch(tmp_path / "ok", watch_events())
    v = verdicts(soak, engine_watched=False, watch=ok, engine_node="node0", engine_alive_at_end=True)
    assert v["no_restarts"] == "PASS"
    bad = write_watch(tmp_path / "bad", watch_events(RESTART_1))
    measured, charts = soak_measured(
        soak, duration_target_s=60.0, window_s=4.0, engine_watched=False, watch=bad, engine_node="node0",
        engine_alive_at_end=True)
    leaf = measured["soak"]["engine_restarts"]
    assert leaf["value"] == 1 and "instance 1: 1" in leaf["text"] and "instance 1: engine process gone" in leaf["detail"]
    assert leaf["evidence"] == ["evidence/soak/watch/events.jsonl"]
    assert any(f["kind"] == "restart" and f["what"].startswith("engine node node0: instance 1")
               for f in charts["faults"])


def test_a_watchdog_that_cannot_vouch_for_the_whole_soak_is_never_a_pass(tmp_path: Path) -> None:
    soak = write_soak(tmp_path / "s")
    done = {"ended_unix": T0 + 61}

    def leaf(rows: list[dict[str, Any]] | None, alive: bool | None = True) -> dict[str, Any]:
        return engine_restarts([], engine_watched=False, watch_events=rows or [], watched_by_node=rows is not None,
                               engine_node="node0", engine_alive_at_end=alive, done=done)

    never_started = leaf(None)
    assert never_started["value"] is None and "not started" in never_started["detail"]
    assert leaf([])["value"] is None  # its file never pulled: no watch_start here
    part_way = leaf(watch_events(end=None))
    assert part_way["value"] is None and "no watch_end" in part_way["detail"]
    early = leaf(watch_events(end="until", end_t=T0 + 30))  # it gave up before the soak's end
    assert early["value"] is None and "before the soak did" in early["detail"]
    assert leaf(watch_events(end="until", end_t=T0 + 62))["value"] == 0  # ...unless after it
    # a restart seen is a failure even when the rest was not seen; so is an engine gone at the end
    assert leaf(watch_events(RESTART_1, end=None))["value"] == 1
    assert leaf(None, alive=False)["value"] == 1
    assert leaf(watch_events(), alive=False)["value"] == 1
    # the same through the gate's evaluation: NOT_RUN, never PASS
    for rows in ([], watch_events(end=None)):
        w = write_watch(tmp_path / f"w{len(rows)}", rows)
        assert verdicts(soak, engine_watched=False, watch=w, engine_alive_at_end=True)["no_restarts"] == "NOT_RUN"
    assert verdicts(soak, engine_watched=False, engine_alive_at_end=True)["no_restarts"] == "NOT_RUN"


def test_the_watcher_sees_an_instance_killed_and_restarted_and_not_the_untouched_one(tmp_path: Path) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    procs = [subprocess.Popen(sleeper) for _ in range(2)]  # noqa: S603
    by_hand: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    cfg = WatchConfig(out=str(tmp_path / "w"), engines=[(p.pid, process_start_time(p.pid)) for p in procs],
                      health_urls=[], until_unix=time.time() + 60, interval_s=0.2)
    t = threading.Thread(target=run_watch, args=(cfg, stop))
    t.start()
    try:
        time.sleep(0.5)
        procs[1].kill()
        procs[1].wait()
        by_hand = subprocess.Popen(sleeper)  # noqa: S603 - "restarted by hand": another process
        time.sleep(0.6)
        (tmp_path / "w" / "STOP").write_text("")
        t.join(10)
        assert not t.is_alive()
    finally:
        stop.set()
        t.join(10)
        for p in [*procs, *([by_hand] if by_hand else [])]:
            if p.poll() is None:
                p.kill()
                p.wait()
    rows = [json.loads(x) for x in (tmp_path / "w" / EVENTS).read_text().splitlines()]
    assert rows[0]["event"] == "watch_start" and rows[-1]["event"] == "watch_end"
    assert rows[-1]["reason"] == "stopped"
    restarts = [r for r in rows if r["event"] == "restart"]
    assert [(r["instance"], r["pid"]) for r in restarts] == [(1, procs[1].pid)]  # once, instance 1 only
    done = json.loads((tmp_path / "w" / "done.json").read_text())
    assert done["restarts"] == 1 and done["reason"] == "stopped"
    assert "env" not in json.dumps(json.loads((tmp_path / "w" / "watch.json").read_text())["config"]["restart"])
