"""The engine node's own watchdog (``soak-watch``) and how G4 counts restarts from it, when the
engine runs on another node than the soak's load.

The scenarios that would PASS ``no_restarts`` wrongly are each here with the verdict they must get
instead: the watchdog never started, its events never pulled (or pulled only part way), it ended
before the soak did, and an engine found alive at the end (which says nothing of a crash and a
restart in between). The watcher itself is run for real on processes of this machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import run
from harness.engines.base import EnginePlan
from harness.load.soak import EVENTS, process_start_time
from harness.load.soakwatch import RELAUNCHED, WatchConfig, run_watch
from harness.pipelines.g4.soakdata import engine_restarts, soak_measured
from harness.ports import free_ports
from tests.pipelines.test_g4_faults import (
    engine_process,
    gates_without_prerequisites,
    soak_profile,
    wait_for,
    window_count,
)
from tests.pipelines.test_g4_soakdata import MD_OK, SMART_OK, T0, verdicts, write_soak
from tests.support.background import Background


@contextmanager
def watching(cfg: WatchConfig) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """The engine node's watcher running in a thread, past its ``watch_start``; yields a reader of
    its events so far. Leaving the block writes STOP and the watcher must end by itself."""
    out = Path(cfg.out)
    ended = threading.Event()

    def watch(stop: threading.Event) -> None:
        try:
            run_watch(cfg, stop)
        finally:
            ended.set()

    def events() -> list[dict[str, Any]]:
        path = out / EVENTS
        if not path.exists():
            return []
        return [json.loads(x) for x in path.read_text().splitlines(keepends=True) if x.endswith("\n")]

    with Background(watch, name="engine-watcher", join_timeout=10) as bg:
        wait_for(lambda: any(r["event"] == "watch_start" for r in events()) or ended.is_set(), 10,
                 "the watcher's watch_start")
        bg.check()
        yield events
        (out / "STOP").write_text("")
        assert ended.wait(10), "the watcher did not end by itself after STOP"


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
    assert leaf["value"] == 1 and "instance 1: 1" in leaf["text"]
    assert "instance 1: engine process gone" in leaf["detail"]
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
    cfg = WatchConfig(out=str(tmp_path / "w"), engines=[(p.pid, process_start_time(p.pid)) for p in procs],
                      health_urls=[], until_unix=time.time() + 60, interval_s=0.2)
    try:
        with watching(cfg) as events:
            procs[1].kill()
            procs[1].wait()
            by_hand = subprocess.Popen(sleeper)  # noqa: S603 - "restarted by hand": another process
            wait_for(lambda: any(r["event"] == "restart" for r in events()), 10, "the watcher's restart event")
            time.sleep(0.5)  # a few more looks (interval 0.2 s): the restart must still be counted once
    finally:
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


def _answers(url: str) -> bool:
    from urllib import request

    try:
        with request.urlopen(url, timeout=1) as resp:  # noqa: S310 - a test engine on loopback
            return bool(resp.status == 200)
    except OSError:
        return False


def _stop_when(path: Path, proc: subprocess.Popen[bytes], stop: threading.Event) -> None:
    while not path.exists() and not stop.wait(0.1):
        pass
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.ssh
@pytest.mark.fio
@pytest.mark.slow
def test_g4_with_the_engine_on_another_node_sees_an_instance_killed_and_restarted_by_hand(
        tmp_path: Path, ssh_cluster: Any, write_yaml: Callable[[str, dict[str, Any]], Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two loopback "nodes": node0 runs the engine (two instances) and holds the KV target, node1
    runs the soak's load. Mid-soak instance 1 is killed on node0 and started again by hand, on
    its port, so the soak's load goes on and the engine is alive at the end: only node0's
    watchdog can tell. G4 FAILs naming ``no_restarts`` with instance 1, and instance 0 (untouched)
    is not counted."""
    cluster = ssh_cluster(2)
    # Both "nodes" are this machine, so node1 reaches node0's engine on loopback; on a real
    # cluster url_for refuses that (a remote client's loopback is not the engine's node).
    monkeypatch.setattr(EnginePlan, "url_for", lambda self, client_node: self.endpoint_url)
    tier = tmp_path / "tier"
    tier.mkdir()
    inv_data = cluster.inventory.model_dump(mode="json", exclude_none=True)
    n0, n1 = inv_data["nodes"]
    n0.update(roles=["server", "storage"], storage=[{"name": "tier", "path": str(tier)}],
              workdir=str(tmp_path / "work0"))
    n1.update(roles=["client"], workdir=str(tmp_path / "work1"))
    inv = write_yaml("inventory.yaml", inv_data)
    # a soak far longer than the test, stopped once the engine started by hand has served a window: on a
    # loaded machine its start-up can outlast a short soak's remaining seconds (seen: the end probes found
    # instance 1 not yet listening, so probe_identity was NOT_RUN); duration FAILs as well, as stopped
    data = soak_profile(free_ports(2), "300s", "2s")  # instance i listens on port + i
    data["model"]["instances_per_node"] = 2
    prof = write_yaml("profile.yaml", data)
    reports = tmp_path / "reports"
    common = ["--inventory", str(inv), "--profile", str(prof), "--campaign", "split", "--reports", str(reports),
              "--gates", str(gates_without_prerequisites(tmp_path))]
    gate = reports / "split" / "G4"
    soak_dir = gate / "evidence" / "soak"
    by_hand: subprocess.Popen[bytes] | None = None
    try:
        assert run(["gate", "G4", *common]) == 0
        state = next(r["data"] for r in map(json.loads, (gate / "state.jsonl").read_text().splitlines())
                     if r["step"] == "soak/start")
        assert state["engine_watched"] is False and state["watch"]["node"] == "node0"
        assert state["handle"]["node"] == "node1"
        wait_for(lambda: run(["soak", "status", "split", "--reports", str(reports)]) == 0
                 and window_count(soak_dir) >= 1, 40, "a first window")
        engine = gate / "evidence" / "engine" / "candidate"
        plan = json.loads((engine / "instance1-plan.json").read_text())
        wrapper = int(json.loads((engine / "instance1.json").read_text())["handle"]["pid"])
        os.kill(engine_process(wrapper), signal.SIGKILL)
        wait_for(lambda: not Path(f"/proc/{wrapper}").exists(), 10, "the wrapper of the killed engine to end")
        with open(tmp_path / "by-hand.log", "wb") as log:
            by_hand = subprocess.Popen(plan["argv"], env={**os.environ, **plan["env"]},  # noqa: S603 - the plan's argv
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        # back before the soak ends, so it answers the end probes like instance 0
        wait_for(lambda: _answers(f"http://127.0.0.1:{plan['port']}/health"), 60, "the engine started by hand")
        served = window_count(soak_dir)
        wait_for(lambda: run(["soak", "status", "split", "--reports", str(reports)]) == 0
                 and window_count(soak_dir) > served, 60, "a window after the engine was started by hand")
        assert run(["soak", "stop", "split", "--reports", str(reports)]) == 0
        # once the soak has ended, the engine started by hand goes (else the gate's stop of
        # instance 1 waits 10 s for its port)
        with Background(lambda stop: _stop_when(soak_dir / "done.json", by_hand, stop), name="ender"):
            assert run(["gate", "G4", "--resume", *common]) == 1
    finally:
        if by_hand is not None:
            if by_hand.poll() is None:
                os.killpg(by_hand.pid, signal.SIGKILL)
            by_hand.wait(10)
    result = json.loads((gate / "result.json").read_text())
    checks = {c["id"]: c for c in result["checks"]}
    obs = checks["no_restarts"]["observations"][0]
    assert checks["no_restarts"]["verdict"] == "FAIL" and obs["measured"] == 1, obs
    assert "instance 1: 1" in obs["measured_text"] and "instance 0" not in obs["measured_text"]
    rows = [json.loads(x) for x in (soak_dir / "watch" / "events.jsonl").read_text().splitlines()]
    assert rows[0]["event"] == "watch_start" and rows[-1]["event"] == "watch_end" and rows[-1]["reason"] == "stopped"
    assert [r["instance"] for r in rows if r["event"] == "restart"] == [1]
    # the same soak's evidence, had node0's watchdog never started or never been pulled past the
    # kill: the engine was alive at the end (started by hand), and that alone is never a PASS
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows
                                              if r["event"] not in ("restart", "watch_end")))
    for watch in (None, cut):
        m, _ = soak_measured(soak_dir, duration_target_s=12.0, window_s=2.0, engine_watched=False, watch=watch,
                             engine_alive_at_end=True, engine_node="node0")
        assert m["soak"]["engine_restarts"]["value"] is None, m["soak"]["engine_restarts"]
    # node0's health (its KV target, its kernel log) was sampled there and decided storage_errors
    assert (soak_dir / "watch" / "health.jsonl").read_text().count("\n") >= 2
    assert checks["storage_errors"]["observations"][0]["evidence"] == ["evidence/soak/watch/health.jsonl"]
    # the soak's own events (node1) saw no process: the engine is not on its node
    assert not any(e["event"] == "restart" for e in
                   (json.loads(x) for x in (soak_dir / "events.jsonl").read_text().splitlines()))
    # the probe set went to both instances, and both answered the same at the end
    assert checks["probe_identity"]["verdict"] == "PASS"
    assert "over 2 instances" in checks["probe_identity"]["observations"][0]["measured_text"]
    end = json.loads((soak_dir / "probe-end.json").read_text())
    assert end["instances"] == 2 and {a["instance"] for a in end["answers"]} == {0, 1}
    # the load went on against the engine started by hand, on both instances
    windows = [json.loads(x) for x in (soak_dir / "windows.jsonl").read_text().splitlines()]
    assert windows[-1]["ok"] > 0
    # the watchdog's directory on node0 was removed once pulled to its end (by containment)
    assert list((tmp_path / "work0").rglob("split-watch-*")) == []


def test_the_watcher_relaunches_each_instance_with_its_own_command(tmp_path: Path) -> None:
    from harness.load.soak import restart_specs

    def sleeper(tag: str) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(60)", tag]

    procs = [subprocess.Popen(sleeper(f"first-{i}")) for i in range(2)]  # noqa: S603
    spec_file = tmp_path / "engine-restart.json"
    spec_file.write_text(json.dumps({"instances": [{"argv": sleeper("again-0"), "env": {}},
                                                   {"argv": sleeper("again-1"), "env": {"X_TOKEN": "s3cr3t"}}]}))
    cfg = WatchConfig(out=str(tmp_path / "w"), engines=[(p.pid, process_start_time(p.pid)) for p in procs],
                      health_urls=[], until_unix=time.time() + 60, interval_s=0.2,
                      restart=restart_specs(json.loads(spec_file.read_text())))
    try:
        with watching(cfg) as events:
            procs[1].kill()
            procs[1].wait()
            wait_for(lambda: any(r["event"] == "engine_relaunched" for r in events()), 10,
                     "the watcher's relaunch of instance 1")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    rows = [json.loads(x) for x in (tmp_path / "w" / EVENTS).read_text().splitlines()]
    (relaunched,) = [r for r in rows if r["event"] == "engine_relaunched"]
    try:
        assert relaunched["instance"] == 1
        assert Path(f"/proc/{relaunched['pid']}/cmdline").read_bytes().split(b"\0")[-2] == b"again-1"
        assert (tmp_path / "w" / relaunched["log"]).exists()
    finally:
        for proc in RELAUNCHED:
            proc.kill()
            proc.wait()
    assert "s3cr3t" not in (tmp_path / "w" / "watch.json").read_text()
    leaf = engine_restarts([], engine_watched=False, watch_events=rows, watched_by_node=True,
                           engine_alive_at_end=True, done={"ended_unix": 0})
    assert leaf["value"] == 1 and leaf["text"] == "1 (instance 1: 1)"


@pytest.mark.ssh
def test_the_watcher_over_ssh_is_pulled_by_offset_across_a_controller_restart_and_stopped(
        shared_ssh_cluster: Any, tmp_path: Path) -> None:
    """The controller's side on a real sshd: start the zipapp's ``soak-watch`` detached, pull its
    events part way, "restart the controller" (a new executor and the handle loaded from its
    file), stop it with STOP and pull to the end: every event once, ``watch_end`` reached, and an
    untouched engine gives no restart (PASS). The same watcher never pulled to its end cannot."""
    from harness.agent.deploy import ensure_agent
    from harness.pipelines.g4.soakrun import WatchHandle, pull_watch, start_watch, stop_watch
    from harness.remote.ssh import SSHExecutor

    node = shared_ssh_cluster.nodes[0].name
    workdir = str(tmp_path / "node")
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # noqa: S603
    ex = SSHExecutor.from_inventory(shared_ssh_cluster.inventory, node)
    try:
        agent = ensure_agent(ex, workdir)
        wh = start_watch(ex, python="python3", agent=agent, workdir=workdir, local_dir=tmp_path / "ctl",
                         watch_args=["--watchdog", "0.2", "--until", repr(time.time() + 60),
                                     "--engine-pid", str(engine.pid),
                                     "--engine-start", repr(process_start_time(engine.pid))])
        wait_for(lambda: bool(pull_watch(ex, wh)[1]) or (tmp_path / "ctl" / EVENTS).exists(), 20, "watch_start")
        part = [json.loads(x) for x in (tmp_path / "ctl" / EVENTS).read_text().splitlines()]
        assert part[0]["event"] == "watch_start"
        not_yet = engine_restarts([], engine_watched=False, watch_events=part, watched_by_node=True)
        assert not_yet["value"] is None  # running, not pulled to its end: cannot vouch yet
        ex.close()
        ex = SSHExecutor.from_inventory(shared_ssh_cluster.inventory, node)  # a new controller
        again = WatchHandle.load(tmp_path / "ctl")
        state = stop_watch(ex, again, timeout_s=20)
        assert not state.running and state.exit_code == 0
    finally:
        ex.close()
        engine.kill()
        engine.wait()
    rows = [json.loads(x) for x in (tmp_path / "ctl" / EVENTS).read_text().splitlines()]
    assert [r["event"] for r in rows] == ["watch_start", "watch_end"]  # each once, nothing else
    assert rows[-1]["reason"] == "stopped" and (tmp_path / "ctl" / "done.json").exists()
    leaf = engine_restarts([], engine_watched=False, watch_events=rows, watched_by_node=True, engine_node=node,
                           engine_alive_at_end=True)
    assert leaf["value"] == 0 and "kept its identity" in leaf["detail"]


def test_the_soaks_own_watchdog_vouches_only_for_what_was_pulled(tmp_path: Path) -> None:
    """Engine on the soak's node: events never pulled (no soak_start) or cut short of the soak's
    end (no soak_end and no done.json) are NOT_RUN, never a quiet engine; a restart seen FAILs."""
    start = {"t": T0, "event": "soak_start"}
    done = {"reason": "duration", "ended_unix": T0 + 60}
    assert engine_restarts([start], engine_watched=True, done=done)["value"] == 0
    assert engine_restarts([start, {"t": T0 + 60, "event": "soak_end"}], engine_watched=True)["value"] == 0
    assert engine_restarts([], engine_watched=True, done=done)["value"] is None
    assert engine_restarts([start], engine_watched=True)["value"] is None
    assert engine_restarts([start, RESTART_1], engine_watched=True)["value"] == 1
    d = write_soak(tmp_path / "s", done=False)
    assert verdicts(d)["no_restarts"] == "NOT_RUN"


def test_the_engine_nodes_health_decides_storage_and_accelerators_never_the_load_nodes(tmp_path: Path) -> None:
    """Engine (and KV target) on node0, load on node1: node1's clean kernel log must not PASS
    storage_errors for node0's storage. node0's samples (its watchdog's) decide; none there is
    NOT_RUN; network faults count on both nodes."""
    soak = write_soak(tmp_path / "s")  # node1's samples: clean, readable
    opts: dict[str, Any] = {"engine_watched": False, "engine_alive_at_end": True, "health_from_watch": True}
    never = write_watch(tmp_path / "never", watch_events())  # watchdog ran, sampled nothing
    v = verdicts(soak, watch=never, **opts)
    assert v["storage_errors"] == v["accelerator_errors"] == v["network_errors"] == "NOT_RUN", v
    assert v["smart_media_errors"] == v["raid_healthy"] == "NOT_RUN" and v["no_restarts"] == "PASS"
    assert verdicts(soak, watch=None, **opts)["storage_errors"] == "NOT_RUN"
    node0 = write_watch(tmp_path / "node0", watch_events(RESTART_1))
    line = "[ 592.948075] nvme nvme0: I/O 407 QID 1 timeout, aborting"
    samples = [{"t": T0 + k * 10, "kernel": {"source": "dmesg", "baseline": k == 0, "new": [line] if k == 2 else []},
                "smart": {"/dev/nvme0n1": {"json": SMART_OK}}, "mdstat": MD_OK} for k in range(4)]
    (node0 / "health.jsonl").write_text("".join(json.dumps(x) + "\n" for x in samples))
    measured, charts = soak_measured(soak, duration_target_s=60.0, window_s=4.0, nvme=["/dev/nvme0n1"],
                                     md_arrays=["md0"], watch=node0, **opts)
    leaf = measured["soak"]["storage_errors"]
    assert leaf["value"] == 1 and "QID 1 timeout" in leaf["detail"]
    assert leaf["evidence"] == ["evidence/soak/watch/health.jsonl"]
    assert measured["soak"]["media_errors_delta"]["evidence"] == ["evidence/soak/watch/health.jsonl"]
    assert set(measured["soak"]["network_errors"]["evidence"]) == {"evidence/soak/watch/health.jsonl",
                                                                   "evidence/soak/health.jsonl"}
    # the report's fault table names the file each fault was read from: node0's watchdog's
    by_kind = {f["kind"]: f for f in charts["faults"]}
    assert by_kind["kernel storage"]["evidence"] == "evidence/soak/watch/health.jsonl", charts["faults"]
    assert by_kind["restart"]["evidence"] == "evidence/soak/watch/events.jsonl"
    assert "instance 1" in by_kind["restart"]["what"]
    node0 = write_watch(tmp_path / "node0", watch_events())
    assert measured["soak"]["media_errors_delta"]["value"] == 0 and measured["soak"]["network_errors"]["value"] == 0
    # the same node0 samples clean: every node-health check passes
    samples[2]["kernel"]["new"] = []
    (node0 / "health.jsonl").write_text("".join(json.dumps(x) + "\n" for x in samples))
    v = verdicts(soak, watch=node0, **opts)
    assert {v[k] for k in ("storage_errors", "network_errors", "accelerator_errors", "smart_media_errors",
                           "raid_healthy")} == {"PASS"}, v


def test_the_watcher_samples_its_nodes_health(tmp_path: Path) -> None:
    cfg = WatchConfig(out=str(tmp_path / "w"), engines=[(os.getpid(), process_start_time(os.getpid()))],
                      health_urls=[], until_unix=time.time() + 0.3, interval_s=0.1, sample_s=60.0,
                      target_path=str(tmp_path))
    run_watch(cfg)
    samples = [json.loads(x) for x in (tmp_path / "w" / "health.jsonl").read_text().splitlines()]
    assert len(samples) == 2  # the baseline and the closing sample
    assert samples[0]["target_free_bytes"] > 0 and "kernel" in samples[0]
