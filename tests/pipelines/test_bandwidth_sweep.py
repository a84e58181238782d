"""The bandwidth sweep end to end on the KV emulator over the demo's provisioned local-disk target:
real fio under real blk-throttle cgroups, G3's cold-restore protocol at each rate, once per module
(about two to three minutes on two busy cores). A profile built to cross G3's TTFT bar between its
two rates: 4,096-token documents whose restore reads 8 MiB of chunk files, two requests in flight,
so a request's TTFT is at least its restore at the whole cap (bytes / rate) and at most its restore
at half of it plus the emulator's own time; the rate at which it crosses the bar lies between the
two bounds, and both lie between the rates.

Why concurrency 2, as the demo: at concurrency 1 every restore starts on an idle cgroup, and
blk-throttle lets an idle group spend a whole slice's worth of its rate at once (rate x 100 ms, 15 MB
at 150 MB/s: more than the 8 MiB restore), so the restores beat the cap: G3's
``restore_within_storage_bandwidth`` FAILs every point (implied 0.62 GB/s against the files' 0.21
GB/s at 150 MB/s, measured) and the sweep exits 1 with no PASS in its bracket, as it must. With 8
requests a repetition at concurrency 2 the same happened at 150 MB/s (0.38 GB/s against 0.16-0.22)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config.loader import load_profile
from harness.pipelines.bandwidth.demo import run_bandwidth_demo
from harness.pipelines.shared.restoreprobe import kv_bytes_per_token

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    tmp = tmp_path_factory.mktemp("bw")
    data = yaml.safe_load((REPO / "profiles" / "demo-bandwidth.yaml").read_text())
    # the demo's load as it is (16 requests a repetition): with 8, the restores at 150 MB/s came in
    # bursts the cap let through (below) and restore_within_storage_bandwidth FAILed that point
    data["bandwidth"] = {"fractions": ["100%", "25%"], "max_points": 2}
    profile = tmp / "profile.yaml"
    profile.write_text(yaml.safe_dump(data, sort_keys=False))
    campaign = f"t{uuid.uuid4().hex[:8]}-bw"
    try:
        out, _ = run_bandwidth_demo(campaign, reports_root=tmp / "reports", progress=False, profile=profile)
        yield out, profile
    finally:  # the shipped inventory's folders: remove only what this run made
        shutil.rmtree(Path("/var/tmp/kvgate/demo") / campaign, ignore_errors=True)
        for target in ("local-disk", "fast-disk"):
            shutil.rmtree(Path("/var/tmp/kvgate/tiers") / target / campaign, ignore_errors=True)


@pytest.mark.timeout(900)
def test_every_rate_is_delivered_and_ttft_does_not_fall_with_the_rate(sweep: tuple[Any, Path]) -> None:
    out, _ = sweep
    assert int(out.exit_code) == 0, (out.result.verdict_reason, out.result.faults)
    curve = out.result.measurements["bandwidth_curve"]
    tier = curve["tier_fio_read_bps"]
    assert abs(tier / 150e6 - 1) <= 0.05  # the demo target's declared, enforced 150 MB/s
    points = curve["points"]
    assert [p["fraction"] for p in points] == [1.0, 0.25]
    for p in points:
        assert p["error"] is None and abs(p["fio_read_bps"] / p["provisioned_read_bps"] - 1) <= 0.1, p
        assert p["provisioned_read_bps"] == pytest.approx(tier * p["fraction"])
    for hi, lo in zip(points, points[1:]):  # non-decreasing as the rate falls, within the intervals
        assert lo["ttft_p50_ms"] >= hi["ttft_p50_ms"] or lo["ttft_p50_interval_ms"][1] >= hi["ttft_p50_interval_ms"][0]
    assert points[-1]["ttft_p50_ms"] > points[0]["ttft_p50_ms"]  # a quarter of the rate is slower, not equal
    assert set(curve["thresholds"]) == {"ttft_p50_reduction", "throughput_gain"}
    assert curve["thresholds"]["ttft_p50_reduction"] == 0.25  # G3's own bar
    assert (out.path / "MANIFEST.sha256").exists() and (out.path / "report.html").exists()


@pytest.mark.timeout(900)
def test_the_bracket_holds_the_rate_where_the_profile_crosses_g3s_bar(sweep: tuple[Any, Path]) -> None:
    out, profile = sweep
    curve = out.result.measurements["bandwidth_curve"]
    bpt, _ = kv_bytes_per_token(load_profile(profile))
    restored = 4096 * bpt  # every chunk of the 4,096-token document comes back from the tier
    bar_ms = (1 - curve["thresholds"]["ttft_p50_reduction"]) * curve["baseline"]["ttft_p50_ms"]
    top = curve["points"][0]
    overhead_ms = max(0.0, top["ttft_p50_ms"] - 1000 * restored / top["provisioned_read_bps"])  # the emulator's
    assert overhead_ms < bar_ms
    no_faster = restored / (bar_ms / 1000)  # below this no restore can meet the bar
    shared = 2 * restored / ((bar_ms - overhead_ms) / 1000)  # above this even two sharing the cap meet it
    b = curve["bracket"]["ttft_p50_reduction"]
    assert b["status"] == "bracketed", (b, curve["points"])
    assert b["highest_not_pass_bps"] < no_faster <= shared <= b["lowest_pass_bps"], (no_faster, shared, b)
