"""G2 on the emulator with a hash-trace load (issue 19): the authored Mooncake snippet replays
through the gate sweep, and result.json and the report give the trace's expected reuse beside the
hit rate measured from the engine's counters, per point."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import run
from harness.ports import free_port
from tests.pipelines.conftest import small_profile
from tests.support.campaign import PassedBaseline

pytestmark = [pytest.mark.fio, pytest.mark.slow]

SNIPPET = Path(__file__).resolve().parents[1] / "data" / "load" / "mooncake_snippet.jsonl"


def test_g2_replays_a_hash_trace_and_reports_expected_beside_measured_reuse(
        tmp_path: Path, local_inventory: Path, write_yaml: Callable[[str, dict[str, Any]], Path],
        passed_baseline: PassedBaseline) -> None:
    data = small_profile(free_port())
    data["arms"][0] = {"name": "baseline", "storage": "tier", "lmcache": {"max_local_disk_size": 1}}
    data["recompute"] = None
    data["load"] = {"workload": "hash-trace", "trace": str(SNIPPET), "trace_block_size": 512, "output_len": 4,
                    "concurrency": [2], "prompts_per_point": 8, "repetitions": 1, "seed": 3}
    prof = write_yaml("profile.yaml", data)
    reports = tmp_path / "reports"
    argv = ["--inventory", str(local_inventory), "--profile", str(prof), "--campaign", "h",
            "--reports", str(reports), "--no-progress"]
    passed_baseline.copy_into(reports, "h", gates=("G1",))  # a passed G1: G2's prerequisite
    run(["gate", "G2", *argv])
    g2_dir = reports / "h" / "G2"
    g2 = json.loads((g2_dir / "result.json").read_text())
    # the first 8 trace lines, replayed as the gate's measured requests
    measured = [json.loads(x) for x in
                (g2_dir / "evidence/sweep/baseline/c2/rep1/measure/records.jsonl").read_text().splitlines()]
    assert sorted(r["trace_line"] for r in measured) == list(range(1, 9))
    assert all(r["workload"] == "hash-trace" and r["status"] == "ok" for r in measured)
    # built when sent, by the runner (every snippet request is long enough to be deferred)
    assert all(isinstance(r["build_ms"], float) for r in measured)
    workload = json.loads((g2_dir / "evidence/sweep/baseline/workload.json").read_text())
    assert workload["kind"] == "hash-trace" and workload["expected"]["trace_requests"] == 8
    rows = g2["measurements"]["expected_reuse"]["baseline"]
    assert [r["point"] for r in rows] == ["c2 rep1"]
    for row in rows:
        # the disk tier kept the populate pass: every full block of a measured request is reusable
        assert row["basis"] == "after_populate" and row["lru_capacity_blocks"] == 0
        assert 0.5 < row["expected_hit_rate"] < 1.0
        assert row["measured_hit_rate"] is not None
        assert abs(row["measured_hit_rate"] - row["expected_hit_rate"]) <= 0.05, row
    html = (g2_dir / "report.html").read_text()
    assert 'id="expected-reuse"' in html and "after populate" in html
    md = (g2_dir / "report.md").read_text()
    assert "## Expected and measured reuse" in md and "| baseline | c2 rep1 | after populate | 0 |" in md
