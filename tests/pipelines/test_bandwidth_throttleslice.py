"""A sweep point's restore counted in blk-throttle's slices, and the curve's label when few."""

from __future__ import annotations

import pytest

from harness.pipelines.bandwidth.throttleslice import MIN_SLICES, SLICE_S, quantization, restore_slices


def _cold(hits: float) -> dict:
    return {"offload_hit_tokens": {"c2": {"value": hits, "text": f"{hits} tokens"}}}


def test_a_demo_restore_spans_under_one_slice_at_150_mb_s() -> None:
    # the demo: 16 requests of 4,096 tokens at 2,048 B/token, 150 MB/s: 8 MiB a request, 15 MB a slice
    got = restore_slices(_cold(65536), 2, 16, 2048.0, 150e6)
    assert got["restore_bytes_per_request"] == 4096 * 2048
    assert got["throttle_slices"] == pytest.approx(4096 * 2048 / (150e6 * SLICE_S))
    assert got["throttle_slices"] < 1


@pytest.mark.parametrize("cold, bpt", [({}, 2048.0), (_cold(0), 2048.0), (_cold(65536), None)])
def test_without_counters_or_geometry_nothing_is_claimed(cold: dict, bpt: float | None) -> None:
    assert restore_slices(cold, 2, 16, bpt, 150e6) == {"restore_bytes_per_request": None, "throttle_slices": None}


def test_the_curve_is_labelled_when_any_point_spans_few_slices_and_not_otherwise() -> None:
    coarse = [{"provisioned_read_bps": 150e6, "throttle_slices": 0.6},
              {"provisioned_read_bps": 37.5e6, "throttle_slices": 2.2},
              {"provisioned_read_bps": 5e6, "throttle_slices": None}]
    q = quantization(coarse)
    assert q is not None and (q["points"], q["of"]) == (2, 2) and q["slices_range"] == [0.6, 2.2]
    assert "100 ms" in q["text"] and "not those of a device" in q["text"]
    fine = [{"provisioned_read_bps": 1e9, "throttle_slices": MIN_SLICES},
            {"provisioned_read_bps": 5e8, "throttle_slices": 4 * MIN_SLICES}]
    assert quantization(fine) is None
    assert quantization([]) is None
