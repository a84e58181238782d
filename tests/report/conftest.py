"""Hand-built gate results covering every verdict, for the report tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.store.schema import CheckResult, GateResult, Interval, Observation, Verdict

SWEEP: dict[str, Any] = {
    "baseline": {
        "c1": {"ttft_p50_ms": 210.0, "ttft_p99_ms": 380.0, "output_throughput": 95.0,
               "request_throughput": 0.9, "completed": 40, "failed": 0},
        "c8": {"ttft_p50_ms": 640.0, "ttft_p99_ms": 1200.0, "output_throughput": 610.0,
               "request_throughput": 5.1, "completed": 40, "failed": 0},
        "c16": {"ttft_p50_ms": 1100.0, "ttft_p99_ms": 2300.0, "output_throughput": 900.0,
                "request_throughput": 7.5, "completed": 40, "failed": 1},
    },
    "candidate": {
        "c1": {"ttft_p50_ms": 150.0, "ttft_p99_ms": 260.0, "output_throughput": 120.0,
               "request_throughput": 1.1, "completed": 40, "failed": 0},
        "c8": {"ttft_p50_ms": 450.0, "ttft_p99_ms": 800.0, "output_throughput": 800.0,
               "request_throughput": 6.6, "completed": 40, "failed": 0},
        "c16": {"ttft_p50_ms": 760.0, "ttft_p99_ms": 1500.0, "output_throughput": 1210.0,
                "request_throughput": 10.0, "completed": 40, "failed": 0},
    },
}
FIO: dict[str, Any] = {
    "node-a": {"nvmeof-raid0": {"seq_read_bw": 5.6e9, "seq_write_bw": 3.2e9},
               "local-nvme": {"seq_read_bw": 2.9e9, "seq_write_bw": 1.8e9}},
}


def _iv(low: float, high: float) -> Interval:
    return Interval(low=low, high=high, confidence=0.95, resamples=2000)


def make_result(*, emulated: bool = True, with_data: bool = True, verdict: Verdict = Verdict.FAIL,
                exit_code: int = 1) -> GateResult:
    checks = [
        CheckResult(
            id="ttft_p50_reduction", description="TTFT p50 reduction vs baseline, at every concurrency",
            metric="compare.ttft_p50_reduction.*", comparator=">=", threshold="25%", threshold_value=0.25,
            unit_kind="percent", severity="blocker", statistic="interval", confidence=0.95,
            verdict=Verdict.INCONCLUSIVE, reason="c8: interval straddles the threshold",
            observations=[
                Observation(path="compare.ttft_p50_reduction.c1", measured=0.286, measured_text="28.6%",
                            expected_text=">= 25%", interval=_iv(0.262, 0.31), n_samples=40,
                            verdict=Verdict.PASS, evidence=["evidence/candidate/c1.jsonl"]),
                Observation(path="compare.ttft_p50_reduction.c8", measured=0.297, measured_text="29.7%",
                            expected_text=">= 25%", interval=_iv(0.21, 0.36), n_samples=40,
                            needed_samples=160, verdict=Verdict.INCONCLUSIVE,
                            reason="interval [21.0%, 36.0%] straddles 25%"),
                Observation(path="compare.ttft_p50_reduction.c16", measured=0.309, measured_text="30.9%",
                            expected_text=">= 25%", interval=_iv(0.27, 0.35), n_samples=40,
                            verdict=Verdict.PASS),
            ]),
        CheckResult(
            id="throughput_gain", description="Output throughput gain at the best operating point",
            metric="compare.throughput_gain_best", comparator=">=", threshold="20%", threshold_value=0.20,
            unit_kind="percent", severity="blocker", statistic="interval", confidence=0.95,
            override_reason="Customer contract 2026-11 accepts 20% on this cluster (ticket OPS-1234)",
            verdict=Verdict.PASS,
            observations=[Observation(path="compare.throughput_gain_best", measured=0.344,
                                      measured_text="34.4%", interval=_iv(0.30, 0.39), n_samples=80,
                                      verdict=Verdict.PASS)]),
        CheckResult(
            id="read_bandwidth", description="Candidate storage read bandwidth",
            metric="candidate.fio.seq_read_bw", comparator=">=", threshold="5 GB/s", threshold_value=5e9,
            unit_kind="bandwidth", severity="blocker", statistic="point", verdict=Verdict.FAIL,
            reason="measured 2.90 GB/s, below 5 GB/s",
            observations=[Observation(path="candidate.fio.seq_read_bw", measured=2.9e9,
                                      verdict=Verdict.FAIL, reason="measured 2.90 GB/s, below 5 GB/s",
                                      evidence=["evidence/fio/node-a-read.json"])]),
        CheckResult(
            id="candidate_failed_requests", description="At most 1% of candidate requests failed",
            metric="candidate.failed_ratio", comparator="<=", threshold="1%", threshold_value=0.01,
            unit_kind="percent", severity="blocker", statistic="point", verdict=Verdict.NOT_RUN,
            reason="candidate.failed_ratio was not measured (the candidate sweep did not run)"),
        CheckResult(
            id="checkpoint_bw", description="Checkpoint write bandwidth <script>alert(1)</script> | pipe",
            metric="baseline.checkpoint.write_bw", comparator=">=", threshold="2 GB/s", threshold_value=2e9,
            unit_kind="bandwidth", severity="blocker", statistic="point", verdict=Verdict.ERROR,
            reason="ZeroDivisionError while evaluating: no samples"),
        CheckResult(
            id="recompute_speedup", description="TTFT speed-up against the recompute arm",
            metric="compare.recompute_speedup.*", comparator=">=", threshold="1x", threshold_value=1.0,
            unit_kind="ratio", severity="advisory", statistic="point", verdict=Verdict.NOT_RUN,
            reason="the profile has no recompute arm"),
        CheckResult(
            id="throughput_gain_plausible", description="Throughput gain above the reference range",
            metric="compare.throughput_gain_best", comparator="<=", threshold="40%", threshold_value=0.40,
            unit_kind="percent", severity="advisory", statistic="point", verdict=Verdict.FAIL,
            reason="44% is above 40%: confirm the baseline was healthy",
            observations=[Observation(path="compare.throughput_gain_best", measured=0.44,
                                      verdict=Verdict.FAIL, reason="44% > 40%")]),
    ]
    measurements: dict[str, Any] = {}
    if with_data:
        measurements = {"sweep": SWEEP, "fio": FIO,
                        "checkpoint": {"node-a": {"write_bw": 2.1e9, "bytes": 8_000_000_000, "seconds": 3.8}}}
    return GateResult(
        gate="G3", title="Main gate (candidate vs baseline)", campaign="camp-1", verdict=verdict,
        exit_code=exit_code, started_at="2026-11-29T20:00:00+00:00", finished_at="2026-11-29T20:41:30+00:00",
        kvgate_version="0.1.0", git_commit="cede15b", operator="alice@vendor",
        # the layout of harness.pipelines.shared.context.summary_of, plus recorded software versions
        inventory={"cluster": "lab-mi308x", "nodes": [
            {"name": "node-a", "host": "10.0.0.11", "platform": "mi308x", "roles": ["server"],
             "accelerators": {"model": "MI308X", "count": 8}, "storage": ["local-nvme", "nvmeof-raid0"],
             "versions": {"vllm": "0.11.0", "lmcache": "0.3.9"}}]},
        profile={"name": "demo", "model": "Qwen/Qwen3-8B", "engine": "vllm", "tensor_parallel_size": 4,
                 "arms": [{"name": "baseline", "description": "local NVMe", "storage": "local-nvme",
                           "offload": True, "lmcache": {"chunk_size": 256}},
                          {"name": "candidate", "description": "NVMe-oF RAID0", "storage": "nvmeof-raid0",
                           "offload": True, "lmcache": {"chunk_size": 256}}],
                 "baseline": "baseline", "candidate": "candidate", "recompute": None},
        emulated=emulated, checks=checks, measurements=measurements,
        faults=["node-b: ssh: connection refused (exit 255)"] if with_data else [],
        notes=["demo run"])


def write_gate(dirpath: Path, result: GateResult) -> Path:
    dirpath.mkdir(parents=True, exist_ok=True)
    (dirpath / "result.json").write_text(result.model_dump_json(indent=2), encoding="utf-8")
    return dirpath


@pytest.fixture
def gate_dir(tmp_path: Path) -> Path:
    return write_gate(tmp_path / "camp-1" / "G3", make_result())
