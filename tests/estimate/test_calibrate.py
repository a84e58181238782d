"""Calibrating compute from a measured recompute arm: the rate found reproduces the measurement."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.loader import load_profile
from harness.estimate import Compute, EstimateInputs, estimate_profile, preset_geometry
from harness.estimate.plan import calibrate_compute

ROOT = Path(__file__).resolve().parents[2]


def test_real_engine_calibration_gives_effective_flops() -> None:
    profile = load_profile(ROOT / "profiles" / "moe-480b-tp8.yaml")
    geom = preset_geometry("moe-480b")
    inp = EstimateInputs(geometry=geom, decode_tokens_per_s=20.0)
    # the vendor's R2: recompute TTFT p50 at c16 was 149.5 s
    rate = calibrate_compute(profile, inp, 16, 149.5)
    assert rate is not None
    inp.compute_flops_per_s = rate
    est = estimate_profile(profile, inp).as_dict()
    assert est["arms"]["recompute"]["points"]["16"]["ttft_s"] == pytest.approx(149.5, rel=1e-6)
    # at c16 prefills share the accelerator: 16 x one prefill - the decode, so one prefill takes
    # (149.5 + 255/20) / 16 s, and the rate is the FLOPs of one prefill over that
    one = (149.5 + 255 / 20.0) / 16
    assert rate == pytest.approx(Compute(flops_per_s=1.0).seconds(geom, 65552) / one, rel=1e-6)


def test_emulator_calibration_recovers_its_prefill_rate() -> None:
    profile = load_profile(ROOT / "profiles" / "demo.yaml")
    inp = EstimateInputs(geometry=preset_geometry("tiny"))
    rate = calibrate_compute(profile, inp, 2, 4112 / 20000)
    assert rate == pytest.approx(20000, rel=1e-6)
    assert calibrate_compute(profile, inp, 2, 0.0) is None  # nothing reproduces a zero TTFT
