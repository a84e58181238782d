"""The estimator held to a bandwidth curve (issue 54 item 3): on curves the estimator generates at a
known read efficiency with noise, the calibration recovers it and every point is within 15%; points
that errored, were not run or are INCONCLUSIVE never move the fit, yet an INCONCLUSIVE point still
counts in the worst error; what cannot be calibrated says why; a campaign's calibration is read
back, and a campaign without one is refused naming the file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import InputError
from harness.estimate import calibrate_curve, load_calibration
from harness.estimate.calibration import GOAL, curve_model
from harness.store.campaign import result_bytes
from tests.report.budget import demo_result
from tests.support.bandwidthcurve import demo_profile, synthetic_curve


@pytest.mark.parametrize("efficiency", [0.35, 0.6, 0.9])
def test_recovers_the_efficiency_the_curve_was_made_with(efficiency: float) -> None:
    curve = synthetic_curve(efficiency)
    out = calibrate_curve(demo_profile(), None, curve)
    json.dumps(out)  # JSON-able, as result.json stores it
    assert out["parameter"] == "read_efficiency" and out["reason"] is None
    assert out["value"] == pytest.approx(efficiency, rel=0.03)  # +-4% noise on the TTFTs
    assert len(out["points"]) == 5 and all(p["storage_bound"] for p in out["points"])
    fitted = [p["verdicts"]["ttft_p50_reduction"] != "INCONCLUSIVE" for p in curve["points"]]
    assert [p["fitted"] for p in out["points"]] == fitted and sum(fitted) >= 3
    assert out["worst_calibrated_rel_error"] <= GOAL and out["within_goal"] is True
    # uncalibrated (efficiency 1) the prediction is too fast by about 1 - efficiency
    assert all(p["rel_error"] == pytest.approx(efficiency - 1, abs=0.08) for p in out["points"])
    assert len(out["residuals_ms"]) == sum(fitted) and out["limits"] is None


def test_prediction_uses_the_delivered_rate_else_the_provisioned() -> None:
    curve = synthetic_curve(0.6)
    curve["points"][2]["fio_read_bps"] = None
    out = calibrate_curve(demo_profile(), None, curve)
    used = [(p["read_bps_used"], p["read_bps_source"]) for p in out["points"]]
    assert used[0] == (curve["points"][0]["fio_read_bps"], "fio")
    assert used[2] == (curve["points"][2]["provisioned_read_bps"], "provisioned")


def _poisoned() -> dict[str, Any]:
    """The 0.6 curve plus three points whose TTFT is 3x what the tier allows: one errored, one
    NOT_RUN, one INCONCLUSIVE."""
    curve = synthetic_curve(0.6)
    extra = []
    for k, (verdict, error) in enumerate([("ERROR", "fio delivered 40% of the provisioned rate"),
                                          ("NOT_RUN", None), ("INCONCLUSIVE", None)]):
        p = copy.deepcopy(curve["points"][1 + k])
        p["provisioned_read_bps"] *= 0.9
        p["fio_read_bps"] *= 0.9
        p["ttft_p50_ms"] *= 3
        p["verdicts"] = {"ttft_p50_reduction": verdict, "throughput_gain": "FAIL"}
        p["error"] = error
        extra.append(p)
    curve["points"] += extra
    return curve


def test_errored_not_run_and_inconclusive_points_never_move_the_fit() -> None:
    out = calibrate_curve(demo_profile(), None, _poisoned())
    assert out["value"] == pytest.approx(0.6, rel=0.03)
    assert [e["reason"].split(":")[0] for e in out["excluded"]] == ["the point errored", "verdict NOT_RUN"]
    inconclusive = [p for p in out["points"] if not p["fitted"]]
    assert len(inconclusive) == 1 and len(out["residuals_ms"]) == 5


def test_a_point_left_out_of_the_fit_still_counts_in_the_worst_error() -> None:
    """Wrong-PASS scenario: the INCONCLUSIVE point is 3x off; were the worst error taken over the
    fitted points only, the estimator would read as within 15% everywhere."""
    out = calibrate_curve(demo_profile(), None, _poisoned())
    assert out["worst_calibrated_rel_error"] > 0.6
    assert out["within_goal"] is False
    assert "beyond 15% at" in out["limits"].lower()


def test_one_fitted_point_proves_nothing() -> None:
    """Wrong-PASS scenario: one point fits any one-parameter model exactly (0% error)."""
    curve = synthetic_curve(0.6)
    curve["points"] = curve["points"][:1]
    out = calibrate_curve(demo_profile(), None, curve)
    assert out["value"] is not None and out["worst_calibrated_rel_error"] < 1e-6
    assert out["within_goal"] is None
    assert "fewer than two fitted points" in out["limits"].lower()


def test_a_curve_served_from_a_cache_is_never_within_the_goal() -> None:
    """Wrong-PASS scenario: restores 2.4 times faster than the tier's fio allows (reads from the page
    cache) fit an efficiency of 2.4 within the noise; the agreement must not read as the estimator's."""
    out = calibrate_curve(demo_profile(), None, synthetic_curve(2.4))
    assert out["value"] == pytest.approx(2.4, rel=0.05) and out["worst_calibrated_rel_error"] <= GOAL
    assert out["within_goal"] is False
    assert "is not plausible" in out["limits"] and "cold-restore counters" in out["limits"]


def test_a_flat_curve_is_not_followed_and_says_where() -> None:
    """A tier whose TTFT does not move with the rate (here: measured flat at the 100% point's
    value, as a compute- or queue-bound engine would be) is beyond 15% somewhere, said so."""
    curve = synthetic_curve(0.6)
    for p in curve["points"]:
        p["ttft_p50_ms"] = curve["points"][0]["ttft_p50_ms"]
    out = calibrate_curve(demo_profile(), None, curve)
    assert out["within_goal"] is False and out["worst_calibrated_rel_error"] > GOAL
    assert out["limits"].startswith("Beyond 15% at")


@pytest.mark.parametrize("case", ["no points", "all errored", "no restore"])
def test_what_cannot_be_calibrated_says_why(case: str) -> None:
    profile = demo_profile()
    curve = synthetic_curve(0.6)
    if case == "no points":
        curve["points"] = []
    elif case == "all errored":
        for p in curve["points"]:
            p["error"] = "the kernel did not deliver the rate"
    else:  # every request misses the tier: TTFT is recompute whatever the rate, any efficiency fits
        profile = profile.model_copy(update={"load": profile.load.model_copy(update={"hit_ratio": 0.0})})
    out = calibrate_curve(profile, None, curve)
    assert out["value"] is None and out["within_goal"] is None and out["worst_calibrated_rel_error"] is None
    assert out["limits"].startswith("Cannot be calibrated: ")
    expect = {"no points": "no point to fit on", "all errored": "no point to fit on",
              "no restore": "any efficiency fits"}[case]
    assert expect in out["reason"]


def test_an_unknown_compute_cannot_be_predicted() -> None:
    """A real-engine profile and no inventory: no accelerator peak, so no TTFT prediction and no
    calibration, and the reason names what is missing."""
    from harness.config.loader import load_profile

    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "tp4x2.yaml")
    out = calibrate_curve(profile, None, synthetic_curve(0.6))
    assert out["value"] is None and out["points"] == [] and out["within_goal"] is None
    assert out["reason"].startswith("the estimator cannot predict this profile: no compute figure")
    assert "--peak-tflops" in out["reason"]


def _campaign(tmp_path: Path, curve: Any) -> Path:
    result = demo_result()
    if curve is not None:
        result.measurements["bandwidth_curve"] = curve
    gate = tmp_path / "camp" / "BW"
    gate.mkdir(parents=True)
    (gate / "result.json").write_bytes(result_bytes(result))
    return tmp_path / "camp"


def test_load_calibration_reads_the_campaigns_estimator(tmp_path: Path) -> None:
    curve = synthetic_curve(0.6)
    curve["estimator"] = calibrate_curve(demo_profile(), None, curve)
    cal = load_calibration(_campaign(tmp_path, curve))
    assert cal.parameter == "read_efficiency" and cal.value == pytest.approx(0.6, rel=0.03)
    assert cal.source.name == "result.json" and cal.worst_calibrated_rel_error is not None


@pytest.mark.parametrize("case,message", [
    ("no curve", "no result.json in it has measurements.bandwidth_curve"),
    ("no estimator", "estimator is missing"),
    ("uncalibrated", "cannot be calibrated: no point to fit on"),
])
def test_load_calibration_refuses_naming_the_file(tmp_path: Path, case: str, message: str) -> None:
    curve: Any = None if case == "no curve" else synthetic_curve(0.6)
    if case == "uncalibrated":
        curve["points"] = []
        curve["estimator"] = calibrate_curve(demo_profile(), None, curve)
    camp = _campaign(tmp_path, curve)
    with pytest.raises(InputError) as err:
        load_calibration(camp)
    assert message in str(err.value)
    assert str(camp) in str(err.value)
    if case != "no curve":
        assert str(camp / "BW" / "result.json") in str(err.value)


def test_curve_model_is_the_candidate_arm_at_the_curves_concurrency() -> None:
    model = curve_model(demo_profile(), None, {"concurrency": 4})
    assert model.concurrency == 4 and model.tier_name == "fast-disk" and model.read_streams == 4
    assert curve_model(demo_profile(), None, {}).concurrency == 2  # the profile's


EMULATOR_CURVE = Path(__file__).resolve().parents[1] / "data" / "estimate" / "emulator-bandwidth-curve.json"


def test_a_curve_measured_on_the_emulator() -> None:
    """A curve measured on this machine (2026-12-06, load average 16-22 beside other sessions), in the
    sweep's shape: the demo profile's candidate arm on the KV emulator (``kvgate sim serve``, prefix
    cache off, LMCache's disk tier on /dev/vda with O_DIRECT, 2048 B of KV per token), its reads capped
    by a blkio cgroup (v1 ``blkio.throttle.read_bps_device``) at 150, 112.5, 75, 52.5 and 37.5 MB/s,
    fio (2 jobs, iodepth 8, 512 KiB direct reads) under the same cap before each rate; per rate 3
    repetitions of a populate pass over 16 documents of 4,096 tokens then 32 long-doc queries at
    concurrency 2 (``kvgate load run``); the point's TTFT p50 is the median of the 3 repetitions'
    p50s, its interval their range; the baseline is the recompute arm, 3 repetitions. Uncalibrated the
    estimator is off by up to 40%. The minimax fit (read efficiency 1.20) holds every rate within 15%
    (worst +13.8% at 150 MB/s); the least-squares one (1.16) leaves 150 MB/s at +19%. The errors
    change sign with the rate (+13.8% at 150 MB/s, -2% to -12% below it): at the highest rate the
    two clients' 55 ms restores fall into turns instead of sharing the tier as the model's random
    phases assume, which one efficiency (above 1) absorbs only in part, and the limits say so."""
    curve = json.loads(EMULATOR_CURVE.read_text(encoding="utf-8"))
    out = calibrate_curve(demo_profile(), None, curve)
    assert out["value"] == pytest.approx(1.20, abs=0.01)
    assert out["value_least_squares"] == pytest.approx(1.155, abs=0.01)
    assert out["worst_rel_error"] == pytest.approx(0.405, abs=0.01)
    errors = {round(p["provisioned_read_bps"] / 1e6, 1): p["calibrated_rel_error"] for p in out["points"]}
    assert errors[150.0] == pytest.approx(0.138, abs=0.01)
    assert all(-0.15 < e < 0 for r, e in errors.items() if r != 150.0), errors
    assert out["worst_calibrated_rel_error"] == pytest.approx(0.138, abs=0.01) and out["within_goal"] is True
    assert out["limits"].startswith("A read efficiency of 1.20 > 1: the restores took less time")
    # the least-squares efficiency leaves the highest rate beyond the goal, and the limits say why
    from harness.estimate.calibration import curve_model, limits_sentence

    model = curve_model(demo_profile(), None, curve)
    ls = out["value_least_squares"]
    worst = model.ttft_ms(curve["points"][0]["fio_read_bps"], ls) / curve["points"][0]["ttft_p50_ms"] - 1
    assert worst == pytest.approx(0.19, abs=0.01)
    rows = [dict(r, calibrated_rel_error=worst) if r["provisioned_read_bps"] == 150e6 else r for r in out["points"]]
    assert limits_sentence(rows, ls).startswith(  # type: ignore[union-attr]
        "Beyond 15% at 150 MB/s (+19%, measured faster than the model: the restores shared the tier less")


def test_a_curve_stepped_by_the_throttle_leads_the_limits() -> None:
    curve = synthetic_curve(0.6)
    curve["throttle_quantization"] = {"text": "at 5 of 5 rates one request's restore spans 0.6-2.2 slices"}
    est = calibrate_curve(demo_profile(), None, curve)
    assert est["limits"].startswith("The curve is stepped: at 5 of 5 rates one request's restore spans")
    del curve["throttle_quantization"]
    assert not (calibrate_curve(demo_profile(), None, curve)["limits"] or "").startswith("The curve is stepped")
