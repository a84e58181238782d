"""G1 -> G2 -> G3 end to end on this machine: the KV emulator, real fio, real files.

The emulator stands in for vLLM (no GPU here); its storage I/O is real, so the candidate's disk
tier really is faster than recomputing the prefill.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import run
from harness.ports import free_port
from tests.pipelines.conftest import small_profile
from tests.support.campaign import PassedBaseline
from tests.support.storagenoise import NOT_STEADY, not_passed_beyond_unsteady_storage

pytestmark = [pytest.mark.fio, pytest.mark.slow]


def gate(gate_id: str, inv: Path, prof: Path, reports: Path, campaign: str, *extra: str) -> int:
    return run(["gate", gate_id, "--inventory", str(inv), "--profile", str(prof), "--campaign", campaign,
                "--reports", str(reports), "--no-progress", *extra])


def result(reports: Path, campaign: str, gate_id: str) -> dict[str, Any]:
    return json.loads((reports / campaign / gate_id / "result.json").read_text())


def check(res: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in res["checks"] if c["id"] == check_id)


def start_g2(inv: Path, prof: Path, reports: Path, campaign: str, **popen: Any) -> subprocess.Popen[str]:
    """`kvgate gate G2` in its own process, to be killed or watched from the test."""
    argv = [sys.executable, "-m", "harness.cli.main", "gate", "G2", "--inventory", str(inv), "--profile", str(prof),
            "--campaign", campaign, "--reports", str(reports), "--no-progress"]
    return subprocess.Popen(argv, text=True, **popen)  # noqa: S603


def wait_for_steps(state: Path, n: int, timeout: float = 120.0) -> None:
    """Until ``state`` (a gate's state.jsonl) records ``n`` completed sweep repetitions."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = state.read_text().splitlines() if state.exists() else []
        done = [json.loads(x) for x in lines if x.endswith("}")]
        if sum(1 for r in done if r["step"].startswith("sweep/")) >= n:
            return
        time.sleep(0.1)
    pytest.fail(f"the sweep recorded fewer than {n} repetitions in {timeout:g} s")


def test_g1_g2_g3_pass_with_real_disk_reads(tmp_path: Path, local_inventory: Path,
                                              write_yaml: Callable[[str, dict[str, Any]], Path],
                                              capsys: pytest.CaptureFixture[str],
                                              passed_baseline: PassedBaseline) -> None:
    # G1 and G2 ran for real once per session (passed_baseline, the same small profile and a local
    # inventory of the same shape); this test checks them in its own copy, then runs G3 on it
    prof = write_yaml("profile.yaml", passed_baseline.profile())
    reports = tmp_path / "reports"
    assert gate("G3", local_inventory, prof, reports, "c1") == 2  # G3 before G2: refused, nothing run
    assert "G3 needs a passed G2" in capsys.readouterr().err
    assert not (reports / "c1" / "G3").exists()
    passed_baseline.copy_into(reports, "c1", started_with=(local_inventory, prof))
    g1 = result(reports, "c1", "G1")
    assert g1["verdict"] == "PASS"
    assert check(g1, "accelerators")["verdict"] == "NOT_APPLICABLE"  # a CPU node expects none
    assert g1["emulated"] is False  # G1 runs no engine: its figures are real
    # page one's system under test: the inventory's targets as declared, the node's facts as measured
    node = g1["inventory"]["nodes"][0]
    assert node["declared"]["storage_targets"][0]["name"] == "tier" and node["measured"]["cpu"]
    assert node["measured"]["memory_bytes"] > 0 and node["measured"]["storage"]["tier"]["filesystem"]
    fio = check(g1, "fio_read")["observations"][0]
    assert fio["verdict"] == "PASS" and fio["measured"] > 1e6
    # the figure reported is the median of the last 5 rounds of one continuous fio run, each round
    # the bytes fio's status dumps (kept as evidence, in one JSON file) say moved since the previous
    # dump over the time the jobs ran
    (raw,) = [reports / "c1" / "G1" / e for e in fio["evidence"] if e.endswith("seq-read.json")]
    measured = json.loads((reports / "c1" / "G1" / "evidence" / "measured.json").read_text())
    protocol = next(iter(measured["nodes"].values()))["storage"]["tier"]["fio"]["seq_read_bw"]["protocol"]
    judged = protocol["rounds"]  # the dumps up to the steady window; fio may write one more as it stops
    in_file = _status_dump_rounds(raw.read_text(), "seq-read", round_ms=1000)
    assert len(in_file) >= judged >= 5
    assert in_file[:judged] == pytest.approx(protocol["series"]["read"], rel=1e-9)
    fio_bw = in_file[:judged][-5:]
    assert fio["measured"] == pytest.approx(statistics.median(fio_bw), rel=1e-6)
    interval = fio["interval"]  # five rounds: the bootstrap interval of their median is [min, max]
    assert (interval["low"], interval["high"]) == pytest.approx((min(fio_bw), max(fio_bw)))

    g2 = result(reports, "c1", "G2")
    assert g2["verdict"] == "PASS"
    assert check(g2, "complete")["verdict"] == "PASS"
    assert check(g2, "baseline_read_bw")["verdict"] == "NOT_APPLICABLE"  # recompute has no storage

    code = gate("G3", local_inventory, prof, reports, "c1", "--allow-unsigned-baseline")
    g3 = result(reports, "c1", "G3")
    assert g3["emulated"] is True
    red = check(g3, "ttft_p50_reduction")
    assert red["verdict"] == "PASS", red
    obs = red["observations"][0]
    assert obs["interval"]["low"] >= 0.25 and obs["n_samples"] >= 5
    assert check(g3, "recompute_speedup")["observations"][0]["measured"] > 1.5
    # G3's read_bandwidth runs its own fio rounds while other timing tests read and write the same
    # VM disk: they may never steady (a fresh-clone run saw 25 rounds of 0.81-2.28 GB/s), and the
    # honest verdict is then INCONCLUSIVE (exit 3) with that reason, never PASS; nothing else may
    # fall short of PASS, and a steady read_bandwidth must PASS
    assert not_passed_beyond_unsteady_storage(g3["checks"]) == [], [(c["id"], c["verdict"]) for c in g3["checks"]]
    bw = check(g3, "read_bandwidth")
    assert bw["observations"][0]["measured"] > 1e6
    unsteady = bw["verdict"] == "INCONCLUSIVE"
    assert (code, g3["verdict"]) == ((3, "INCONCLUSIVE") if unsteady else (0, "PASS")), bw["reason"]
    # the candidate's disk tier was really read: the engine's own counters say how many prompt tokens
    # it served in every repetition, and the gate reports the lowest of them
    deltas = sorted((reports / "c1" / "G3" / "evidence" / "sweep" / "candidate").glob("c2/rep*/metrics-delta.json"))
    assert len(deltas) == 5
    hits = [json.loads(p.read_text())[0]["key_figures"]["offload_hit_tokens"] for p in deltas]
    # 8 requests, each reusing its whole 2048-token document (8 chunks) but its last token, which vLLM
    # computes itself to sample from (the emulator does the same)
    assert min(hits) >= 8 * 2047
    hit_check = check(g3, "candidate_offload_hits")
    assert hit_check["verdict"] == "PASS" and hit_check["observations"][0]["measured"] == min(hits)
    assert check(g3, "recompute_offload_hits")["observations"][0]["measured"] == 0
    # hit rate per tier per measured point (issue 19 item 6), from the counters scraped around it
    tiers = g3["measurements"]["tier_hits"]
    assert [r["point"] for r in tiers["candidate"]] == [f"c2 rep{i}" for i in range(1, 6)]
    assert all(r["rates"]["local_disk"] > 0.9 and r["rates"]["local_cpu"] == 0 for r in tiers["candidate"])
    assert tiers["baseline"] and all(r["rates"]["offload"] == 0 for r in tiers["baseline"])

    gate_dir = reports / "c1" / "G3"
    for name in ("result.json", "report.html", "report.md", "junit.xml", "MANIFEST.sha256"):
        assert (gate_dir / name).is_file(), name
    html = (gate_dir / "report.html").read_text()
    assert "emulat" in html.lower()
    assert 'id="tier-hits-candidate"' in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    suite = ET.parse(gate_dir / "junit.xml").getroot()
    cases = suite.findall(".//testcase")
    assert cases and all(c.get("classname") == "kvgate.G3" for c in cases)
    assert (reports / "c1" / "report.html").is_file()  # the campaign page

    # a later campaign compares against this one's G2 (--baseline), and says so; its own G1 came first
    passed_baseline.copy_into(reports, "c2", gates=("G1",), started_with=(local_inventory, prof))
    code_b = gate("G3", local_inventory, prof, reports, "c2", "--baseline", "c1", "--allow-unsigned-baseline")
    g3b = result(reports, "c2", "G3")
    assert code_b == 0 and g3b["verdict"] == "PASS", [(c["id"], c["verdict"]) for c in g3b["checks"]]
    assert g3b["baseline"]["digest"] == g2["fingerprint"]["digest"] and g3b["baseline"]["accepted_mismatches"] == []
    assert check(g3b, "ttft_p50_reduction")["verdict"] == "PASS"
    assert "baseline: G2 of campaign 'c1'" in g3b["notes"]
    assert not (reports / "c2" / "G2").exists()


def test_candidate_that_cannot_meet_the_threshold_fails(tmp_path: Path, local_inventory: Path,
                                                        write_yaml: Callable[[str, dict[str, Any]], Path],
                                                        passed_baseline: PassedBaseline) -> None:
    # a TTFT reduction no storage gives: the candidate's measured reduction falls short of it
    prof_data = passed_baseline.profile()
    prof_data["overrides"].append({"gate": "G3", "check": "ttft_p50_reduction", "threshold": "99.9%",
                                   "reason": "a bar no real storage can clear, to see the FAIL path"})
    prof = write_yaml("profile.yaml", prof_data)
    reports = tmp_path / "reports"
    # a passed G1 and G2 (thresholds are not in the workload)
    passed_baseline.copy_into(reports, "f", started_with=(local_inventory, prof))
    assert gate("G3", local_inventory, prof, reports, "f", "--allow-unsigned-baseline") == 1
    g3 = result(reports, "f", "G3")
    assert g3["verdict"] == "FAIL"
    red = check(g3, "ttft_p50_reduction")
    assert red["verdict"] == "FAIL"
    md = (reports / "f" / "G3" / "report.md").read_text()
    assert "ttft_p50_reduction" in md and "FAIL" in md
    failures = ET.parse(reports / "f" / "G3" / "junit.xml").getroot().findall(".//failure")
    assert any("ttft_p50_reduction" in (f.text or "") and ">= 99.9%" in (f.get("message") or "") for f in failures)


def test_unreachable_node_exits_4_and_is_named(tmp_path: Path, write_yaml: Callable[[str, dict[str, Any]], Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    inv = write_yaml("inventory.yaml", {
        "cluster": "down",
        "defaults": {"known_hosts": str(known), "connect_timeout": "3s", "user": "root"},
        "nodes": [{"name": "ghost", "host": "127.0.0.1", "port": free_port()}],  # nothing listens there
    })
    prof = write_yaml("profile.yaml", small_profile(free_port(), arms=[{"name": "baseline", "offload": False},
                                                                      {"name": "candidate", "offload": False}]))
    reports = tmp_path / "reports"
    assert gate("G1", inv, prof, reports, "u") == 4
    g1 = result(reports, "u", "G1")
    assert any("ghost" in f for f in g1["faults"])
    assert check(g1, "nodes_reachable")["verdict"] == "FAIL"
    assert "ghost" in (reports / "u" / "G1" / "report.html").read_text()
    assert "G1 Arrival acceptance: FAIL (exit 4)" in capsys.readouterr().out


def test_g2_killed_and_resumed_loses_nothing_repeats_nothing(tmp_path: Path, local_inventory: Path,
                                                           write_yaml: Callable[[str, dict[str, Any]], Path],
                                                           passed_baseline: PassedBaseline) -> None:
    prof = write_yaml("profile.yaml", small_profile(free_port()))
    reports = tmp_path / "reports"
    passed_baseline.copy_into(reports, "r", gates=("G1",))  # a passed G1: G2's prerequisite
    state = reports / "r" / "G2" / "state.jsonl"
    proc = start_g2(local_inventory, prof, reports, "r", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)
    try:
        wait_for_steps(state, 2)
        os.kill(proc.pid, signal.SIGKILL)  # a crash: no cleanup at all
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    # a kill mid-append may leave a torn last line, which the store ignores; so does this test
    before = [json.loads(line) for line in state.read_text().splitlines() if line.endswith("}")]
    done_before = {r["step"]: r for r in before if r["step"].startswith("sweep/")}
    first = next(iter(done_before.values()))
    records = reports / "r" / "G2" / first["data"]["evidence"][0]
    digest = hashlib.sha256(records.read_bytes()).hexdigest()

    # without --resume the recorded steps are protected
    assert gate("G2", local_inventory, prof, reports, "r") == 2
    assert gate("G2", local_inventory, prof, reports, "r", "--resume") == 0
    after = [json.loads(line) for line in state.read_text().splitlines() if line.strip()]
    steps = [r["step"] for r in after if r["step"].startswith("sweep/")]
    assert len(steps) == len(set(steps)) == 5  # one concurrency x 5 repetitions, none twice
    assert set(done_before) <= set(steps)
    assert hashlib.sha256(records.read_bytes()).hexdigest() == digest  # earlier samples untouched
    g2 = result(reports, "r", "G2")
    assert g2["verdict"] == "PASS"
    assert any("interrupted run" in n for n in g2["notes"])  # the orphaned emulator was stopped


def test_g2_on_a_storage_baseline_runs_fio_checkpoint_and_model_load(
        tmp_path: Path, local_inventory: Path, write_yaml: Callable[[str, dict[str, Any]], Path],
        passed_baseline: PassedBaseline) -> None:
    data = small_profile(free_port())
    data["arms"][0] = {"name": "baseline", "storage": "tier", "lmcache": {"max_local_disk_size": 1}}
    data["recompute"] = None
    data["load"]["repetitions"] = 2
    data["probes"]["checkpoint"] = {"size": "16 MiB", "files": 2, "writers": 2}
    data["probes"]["modelload"] = {"readers": 2, "synthetic_size": "16 MiB"}
    prof = write_yaml("profile.yaml", data)
    reports = tmp_path / "reports"
    passed_baseline.copy_into(reports, "s", gates=("G1",))  # a passed G1: G2's prerequisite
    code = gate("G2", local_inventory, prof, reports, "s")
    g2 = result(reports, "s", "G2")
    # Two repetitions of six ~12 ms disk-tier requests on a shared VM disk do not always repeat
    # within 10%: that check may honestly fail here; nothing else may.
    # The advisory estimate_agreement may too: the estimator predicts the disk tier from its fio
    # figure, which one request's small synchronous chunk reads on a shared VM disk do not reach.
    # The bandwidth figures are decided only on steady fio rounds (SNIA); on this VM's shared disk
    # they may never steady: INCONCLUSIVE with that reason, never FAIL and never PASS.
    allowed = frozenset({"ttft_repeatability", "throughput_repeatability", "estimate_agreement"})
    assert not_passed_beyond_unsteady_storage(g2["checks"], allowed, blockers_only=False) == [], g2["checks"]
    blockers = [c for c in g2["checks"] if c["severity"] == "blocker"]
    failed = any(c["verdict"] == "FAIL" for c in blockers)
    assert code == (1 if failed else 3 if any(c["verdict"] == "INCONCLUSIVE" for c in blockers) else 0)
    for check_id in ("baseline_read_bw", "checkpoint_write", "model_load"):
        c = check(g2, check_id)
        assert c["verdict"] == "PASS" or NOT_STEADY in c["reason"], c
        assert c["observations"][0]["measured"] > 1e6
        assert (reports / "s" / "G2" / c["observations"][0]["evidence"][0]).is_file()
    assert set(g2["measurements"]) >= {"fio", "checkpoint", "modelload", "sweep"}


def test_engine_crash_mid_sweep_is_a_recorded_fault(tmp_path: Path, local_inventory: Path,
                                                    write_yaml: Callable[[str, dict[str, Any]], Path],
                                                    passed_baseline: PassedBaseline) -> None:
    prof = write_yaml("profile.yaml", small_profile(free_port()))
    reports = tmp_path / "reports"
    passed_baseline.copy_into(reports, "x", gates=("G1",))  # a passed G1: G2's prerequisite
    state = reports / "x" / "G2" / "state.jsonl"
    handle_file = reports / "x" / "G2" / "evidence" / "engine" / "baseline" / "instance0.json"
    proc = start_g2(local_inventory, prof, reports, "x", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_steps(state, 1)
        handle = json.loads(handle_file.read_text())["handle"]
        os.killpg(handle["pgid"], signal.SIGKILL)  # the engine dies; kvgate goes on
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 4, (out[-2000:], err[-2000:])
    g2 = result(reports, "x", "G2")
    # named by the arm: the sweep's own fault, or (when the crash lands in a cold restore) the
    # drain that could no longer reach the engine
    assert g2["faults"] and any(f.startswith("baseline") or "baseline sweep" in f for f in g2["faults"]), g2["faults"]
    assert check(g2, "complete")["verdict"] == "FAIL"
    kept = [json.loads(line)["step"] for line in state.read_text().splitlines() if line.strip()]
    assert kept and all(k.startswith("sweep/baseline/c2/") for k in kept)  # taken before the crash: kept
    assert "Traceback" not in err


def test_without_cold_restore_warm_up_requests_are_sent_and_not_measured(
        tmp_path: Path, local_inventory: Path, write_yaml: Callable[[str, dict[str, Any]], Path],
        passed_baseline: PassedBaseline) -> None:
    data = small_profile(free_port())
    data["load"].update({"cold_restore": False, "warmup": 2, "repetitions": 2})
    data["engine"]["env"] = {"HF_TOKEN": "hf-e2e-secret-value"}  # reaches the engine, never the evidence
    prof = write_yaml("profile.yaml", data)
    reports = tmp_path / "reports"
    passed_baseline.copy_into(reports, "w", gates=("G1",))  # a passed G1: G2's prerequisite
    gate("G2", local_inventory, prof, reports, "w")
    point = reports / "w" / "G2" / "evidence" / "sweep" / "baseline" / "c2" / "rep1"
    protocol = json.loads((point / "protocol.json").read_text())
    assert protocol["cold_restore"] is False and protocol["warmup_requests"] == 2
    assert not (point / "populate").exists()
    warm = [json.loads(x) for x in (point / "warmup" / "records.jsonl").read_text().splitlines()]
    measured = [json.loads(x) for x in (point / "measure" / "records.jsonl").read_text().splitlines()]
    assert len(warm) == 2 and len(measured) == data["load"]["prompts_per_point"]
    assert not {r["request_id"] for r in warm} & {r["request_id"] for r in measured}
    leaked = [p for p in (reports / "w").rglob("*") if p.is_file() and b"hf-e2e-secret-value" in p.read_bytes()]
    assert not leaked


def _status_dump_rounds(text: str, job: str, *, round_ms: int) -> list[float]:
    """Bytes/s between consecutive fio status dumps (cumulative io_bytes over the jobs' runtime),
    read straight from the JSON text; a step shorter than half a round (fio stopped) is no round."""
    decoder, docs, at = json.JSONDecoder(), [], text.find("{")
    while at >= 0:
        doc, end = decoder.raw_decode(text, at)
        docs.append(doc)
        at = text.find("{", end)
    out, prev_bytes, prev_ms = [], 0, 0
    for doc in docs:
        jobs = [j for j in doc["jobs"] if j["jobname"] == job]
        moved, ms = sum(j["read"]["io_bytes"] for j in jobs), max(j["read"]["runtime"] for j in jobs)
        if ms - prev_ms >= round_ms / 2:
            out.append((moved - prev_bytes) / ((ms - prev_ms) / 1000))
            prev_bytes, prev_ms = moved, ms
    return out
