"""Issue 15 item 2, the capacity plan: the KV footprint against HBM, how many requests' KV the CPU
and disk tiers hold, and what falls back to recompute (the share of a point's contexts the disk
tier cannot hold lowers that arm's hit ratio in its prediction)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.loader import load_profile
from harness.estimate import EstimateInputs, estimate_profile, find_accelerator
from harness.estimate.loader import geometry_for_profile
from harness.estimate.plan import LMCACHE_GIB

ROOT = Path(__file__).resolve().parents[2]


def _profile(tmp_path: Path, baseline_disk_gb: int):
    text = (ROOT / "profiles" / "moe-480b-tp8.yaml").read_text()
    assert "max_local_disk_size: 3000" in text
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("max_local_disk_size: 3000", f"max_local_disk_size: {baseline_disk_gb}"))
    return load_profile(path)


def _estimate(profile, peak: float = 300e12) -> dict:
    inp = EstimateInputs(geometry=geometry_for_profile(profile), accelerator=find_accelerator("MI308X"),
                         peak_flops=peak, read_bw={"baseline": 3e9, "candidate": 3e9})
    return estimate_profile(profile, inp).as_dict()


def test_disk_tier_holds_what_its_size_allows_and_the_rest_is_recomputed(tmp_path: Path) -> None:
    full = _estimate(_profile(tmp_path, 3000))
    small = _estimate(_profile(tmp_path, 1000))
    req = small["kv"]["per_request"]
    assert req == 253_952 * 65_552  # the 480B preset's bytes per token x (input + the long-doc question)
    base = small["capacity"]["arms"]["baseline"]
    assert base["disk_bytes"] == 1000 * LMCACHE_GIB
    assert base["disk_requests"] == int(1000 * LMCACHE_GIB // req) == 64
    assert base["working_set_requests"] == 128  # prompts_per_point: contexts one point populates
    assert base["recompute_share"] == pytest.approx(1 - 64 / 128)
    assert full["capacity"]["arms"]["baseline"]["recompute_share"] == 0.0  # 3000 GB holds 193 > 128
    # the candidate's tier (12 TB) is unchanged, and so is its prediction
    assert small["arms"]["candidate"]["points"] == full["arms"]["candidate"]["points"]
    # half of the baseline's contexts now come from recompute: slower than a full-hit baseline,
    # faster than recomputing everything, at every concurrency
    for c in ("8", "16", "32"):
        small_t = small["arms"]["baseline"]["points"][c]["ttft_s"]
        full_t = full["arms"]["baseline"]["points"][c]["ttft_s"]
        rec_t = small["arms"]["recompute"]["points"][c]["ttft_s"]
        assert full_t < small_t < rec_t, c


def test_hbm_budget_after_weights(tmp_path: Path) -> None:
    est = _estimate(_profile(tmp_path, 3000))
    hbm = est["capacity"]["hbm"]
    acc = find_accelerator("MI308X")
    assert acc is not None and hbm["per_device"] == acc.memory_bytes and hbm["devices"] == 8
    assert hbm["utilization"] == pytest.approx(0.90)  # --gpu-memory-utilization of the profile
    # the KV budget is what the utilization leaves after the BF16 weights of every parameter
    assert hbm["kv_budget"] == pytest.approx(hbm["per_device"] * 8 * 0.90 - hbm["weights"])
    assert hbm["requests_fit"] == int(hbm["kv_budget"] // est["kv"]["per_request"])
    # the profile's concurrencies against it: 8 contexts of 15.5 GiB fit, 32 do not
    assert hbm["fits"] == {"8": 8 <= hbm["requests_fit"], "16": 16 <= hbm["requests_fit"],
                           "32": 32 <= hbm["requests_fit"]}
    assert hbm["fits"]["8"] and not hbm["fits"]["32"]
