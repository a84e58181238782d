"""The soak agent's node health sampler with fake node tools first on its search path
(``KVGATE_NODE_TOOLS_PATH``) printing captured real outputs; its samples read back by G4."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from harness.load.soak import HEALTH, HealthSampler, SoakConfig, Watchdog, process_start_time
from harness.pipelines.g4.soakdata import soak_measured

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"


def tool(d: Path, name: str, body: str) -> None:
    p = d / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)


def test_health_samples_with_fake_dmesg_and_nvme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "later"
    tool(bin_dir, "dmesg", f"cat '{DATA / 'kernel_benign_dmesg.txt'}'\n"
         f"[ -e '{state}' ] && grep 'Disk failure' '{DATA / 'kernel_storage_faults_dmesg.txt'}'\nexit 0\n")
    tool(bin_dir, "nvme", f"if [ -e '{state}' ]; then cat '{DATA / 'nvme_smart_log_v1_media_errors.json'}'; "
         f"else cat '{DATA / 'nvme_smart_log_v2.11.json'}'; fi\n")
    monkeypatch.setenv("KVGATE_NODE_TOOLS_PATH", str(bin_dir))
    out = tmp_path / "soak"
    out.mkdir()
    cfg = SoakConfig(out=str(out), endpoint="http://127.0.0.1:9", model="m", trace="t", duration_s=1, window_s=1,
                     target_path=str(tmp_path), nvme=["/dev/nvme0n1"])
    sampler = HealthSampler(cfg, out, threading.Event())
    sampler.sample_and_write()  # baseline: the benign boot lines are not faults of the soak
    state.write_text("1")
    sampler.sample_and_write()
    samples = [json.loads(x) for x in (out / HEALTH).read_text().splitlines()]
    assert samples[0]["kernel"]["baseline"] is True and samples[0]["kernel"]["new"] == []
    assert samples[1]["kernel"]["new"] == ["[1158185.737571] md/raid:md1: Disk failure on nvme2n1p4, "
                                           "disabling device."]
    assert samples[1]["target_free_bytes"] > 0 and samples[1]["mem_available_bytes"] > 0
    measured, _ = soak_measured(out, duration_target_s=1, window_s=1, nvme=["/dev/nvme0n1"])
    assert measured["soak"]["storage_errors"]["value"] == 1
    assert measured["soak"]["media_errors_delta"]["value"] == 3


def test_a_missing_tool_is_recorded_not_taken_for_silence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dmesg, journalctl or nvme anywhere
    monkeypatch.delenv("KVGATE_NODE_TOOLS_PATH", raising=False)
    cfg = SoakConfig(out=str(tmp_path), endpoint="x", model="m", trace="t", duration_s=1, window_s=1,
                     nvme=["/dev/nvme0n1"])
    s = HealthSampler(cfg, tmp_path, threading.Event()).sample()
    assert "not found" in s["kernel"]["error"] and "not found" in s["smart"]["/dev/nvme0n1"]["error"]


def test_the_watchdog_counts_the_end_of_the_watched_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # noqa: S603
    try:
        cfg = SoakConfig(out=str(tmp_path), endpoint="x", model="m", trace="t", duration_s=1, window_s=1,
                         engine_pid=proc.pid, engine_start=process_start_time(proc.pid))
        wd = Watchdog(cfg, tmp_path, threading.Event())
        wd.check_once()
        assert wd.restarts == 0
        proc.kill()
        proc.wait()
        wd.check_once()
        wd.check_once()
        assert wd.restarts == 1  # counted once, not at every look
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["restart"]


def test_accelerator_tools_sampled_with_fake_amd_smi_and_npu_smi(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "later"
    tool(bin_dir, "dmesg", f"cat '{DATA / 'kernel_benign_dmesg.txt'}'\n")
    # amd-smi is asked for exactly `metric --ecc --json`; anything else is an error
    tool(bin_dir, "amd-smi", '[ "$*" = "metric --ecc --json" ] || { echo "bad args: $*" >&2; exit 2; }\n'
         f"if [ -e '{state}' ]; then cat '{DATA / 'amdsmi_metric_ecc_gpu_data_uncorrectable.json'}'; "
         f"else cat '{DATA / 'amdsmi_metric_ecc_gpu_data_amdsmi26.json'}'; fi\n")
    tool(bin_dir, "npu-smi", '[ "$*" = "info" ] || exit 2\n'
         f"if [ -e '{state}' ]; then cat '{DATA / 'npusmi_info_910b3_alarm.txt'}'; "
         f"else cat '{DATA / 'npusmi_info_910b3_23.0.rc2.txt'}'; fi\n")
    monkeypatch.setenv("KVGATE_NODE_TOOLS_PATH", str(bin_dir))
    out = tmp_path / "soak"
    out.mkdir()
    cfg = SoakConfig(out=str(out), endpoint="http://127.0.0.1:9", model="m", trace="t", duration_s=1, window_s=1,
                     accel_tools=["amd-smi", "npu-smi"])
    sampler = HealthSampler(cfg, out, threading.Event())
    sampler.sample_and_write()
    sampler.sample_and_write()
    measured, _ = soak_measured(out, duration_target_s=1, window_s=1, accel_tools=["amd-smi", "npu-smi"])
    assert measured["soak"]["accelerator_errors"]["value"] == 0  # healthy: read twice, nothing grew
    state.write_text("1")
    sampler.sample_and_write()
    samples = [json.loads(x) for x in (out / HEALTH).read_text().splitlines()]
    assert set(samples[-1]["accel"]) == {"amd-smi", "npu-smi"}
    measured, charts = soak_measured(out, duration_target_s=1, window_s=1, accel_tools=["amd-smi", "npu-smi"])
    leaf = measured["soak"]["accelerator_errors"]
    assert leaf["value"] == 3, leaf  # uncorrectable 0 -> 3, deferred 0 -> 1, NPU 1 Alarm
    kinds = {f["kind"] for f in charts["faults"]}
    assert kinds == {"accelerator (amd-smi)", "accelerator (npu-smi)"}


def test_an_accelerator_tool_that_fails_makes_the_check_not_run_not_pass(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool(bin_dir, "dmesg", f"cat '{DATA / 'kernel_benign_dmesg.txt'}'\n")
    tool(bin_dir, "amd-smi", "echo 'ERROR: amdgpu driver not loaded' >&2\nexit 1\n")
    monkeypatch.setenv("KVGATE_NODE_TOOLS_PATH", str(bin_dir))
    out = tmp_path / "soak"
    out.mkdir()
    cfg = SoakConfig(out=str(out), endpoint="x", model="m", trace="t", duration_s=1, window_s=1,
                     accel_tools=["amd-smi"])
    sampler = HealthSampler(cfg, out, threading.Event())
    for _ in range(3):
        sampler.sample_and_write()
    measured, _ = soak_measured(out, duration_target_s=1, window_s=1, accel_tools=["amd-smi"])
    leaf = measured["soak"]["accelerator_errors"]
    assert leaf["value"] is None and "amd-smi answered 0 time(s)" in leaf["detail"], leaf
    # without the tool asked for, the kernel log alone decides (as on a platform without one)
    assert soak_measured(out, duration_target_s=1, window_s=1)[0]["soak"]["accelerator_errors"]["value"] == 0


def test_the_watchdog_watches_every_engine_instance(tmp_path: Path) -> None:
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]  # noqa: S603
    try:
        cfg = SoakConfig(out=str(tmp_path), endpoint="x", model="m", trace="t", duration_s=1, window_s=1,
                         engine_pid=procs[0].pid, engine_start=process_start_time(procs[0].pid),
                         extra_engines=[[float(procs[1].pid), process_start_time(procs[1].pid) or 0.0]])
        wd = Watchdog(cfg, tmp_path, threading.Event())
        wd.check_once()
        assert wd.restarts == 0 and wd.engine_alive
        procs[1].kill()  # the second instance dies: counted, the first is still watched
        procs[1].wait()
        wd.check_once()
        assert wd.restarts == 1 and not wd.engine_alive
        procs[0].kill()
        procs[0].wait()
        wd.check_once()
        wd.check_once()
        assert wd.restarts == 2
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["instance"]) for e in events] == [("restart", 1), ("restart", 0)]
    assert events[0]["detail"] == "instance 1: engine process gone"


def test_each_instance_is_relaunched_with_its_own_command_and_every_restart_is_counted(tmp_path: Path) -> None:
    import subprocess
    import sys

    def sleeper(tag: str) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(60)", tag]

    procs = [subprocess.Popen(sleeper(f"first-{i}")) for i in range(2)]  # noqa: S603
    cfg = SoakConfig(out=str(tmp_path), endpoint="x", model="m", trace="t", duration_s=1, window_s=1,
                     engine_pid=procs[0].pid, engine_start=process_start_time(procs[0].pid),
                     extra_engines=[[float(procs[1].pid), process_start_time(procs[1].pid) or 0.0]],
                     restart=[{"argv": sleeper("again-0"), "env": {"KVGATE_TEST_SECRET_TOKEN": "s3cr3t"}},
                              {"argv": sleeper("again-1"), "env": {}}])
    wd = Watchdog(cfg, tmp_path, threading.Event())
    try:
        wd.check_once()
        procs[1].kill()  # instance 1 dies: relaunched with instance 1's command, instance 0 untouched
        procs[1].wait()
        wd.check_once()
        assert wd.restarts == 1 and wd.engine_alive and len(wd.relaunched) == 1
        assert Path(f"/proc/{wd.relaunched[0].pid}/cmdline").read_bytes().split(b"\0")[-2] == b"again-1"
        wd.relaunched[0].kill()  # the relaunched one dies too: counted again, relaunched again
        wd.relaunched[0].wait()
        wd.check_once()
        procs[0].kill()
        procs[0].wait()
        wd.check_once()
        assert wd.restarts == 3 and wd.engine_alive and len(wd.relaunched) == 3
        assert Path(f"/proc/{wd.relaunched[2].pid}/cmdline").read_bytes().split(b"\0")[-2] == b"again-0"
    finally:
        for p in [*procs, *wd.relaunched]:
            if p.poll() is None:
                p.kill()
                p.wait()
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["instance"]) for e in events] == [
        ("restart", 1), ("engine_relaunched", 1), ("restart", 1), ("engine_relaunched", 1),
        ("restart", 0), ("engine_relaunched", 0)]
    assert [e["restarts"] for e in events if e["event"] == "restart"] == [1, 2, 3]
    assert events[1]["detail"] == f"instance 1 relaunched as pid {wd.relaunched[0].pid} (restart 1)"
    # the relaunch environment (the engine plan's, maybe a secret) is never written to the soak's files
    from harness.load.soak import public_config

    assert "s3cr3t" not in json.dumps(public_config(cfg))
    measured, _ = soak_measured(tmp_path, duration_target_s=1, window_s=1)
    leaf = measured["soak"]["engine_restarts"]
    assert leaf["value"] == 3 and leaf["text"] == "3 (instance 0: 1, instance 1: 2)"
    assert f"instance 0 relaunched as pid {wd.relaunched[2].pid}" in leaf["detail"]
