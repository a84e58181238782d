"""The least-passing-bandwidth bracket from the points' verdicts: only a measured PASS counts as
passing, with every measured rate above it PASS too; INCONCLUSIVE, NOT_RUN, ERROR and error points
(a rate the kernel did not deliver) never do, and nothing is interpolated between points."""

from __future__ import annotations

from typing import Any, Optional

from harness.pipelines.bandwidth.bracket import bracket, next_rate

T = "ttft_p50_reduction"


def _p(rate: float, verdict: str, error: Optional[str] = None) -> dict[str, Any]:
    return {"provisioned_read_bps": rate, "verdicts": {T: verdict, "throughput_gain": verdict}, "error": error}


def test_pass_above_fail_is_bracketed_whatever_order_the_points_came_in() -> None:
    pts = [_p(50, "FAIL"), _p(150, "PASS"), _p(100, "PASS"), _p(75, "FAIL")]
    b = bracket(pts, T)
    assert b == {"status": "bracketed", "lowest_pass_bps": 100.0, "highest_not_pass_bps": 75.0,
                 "relative_width": (100 - 75) / 75}
    assert next_rate(pts, T, 0.15) == 87.5  # the midpoint; within 15% it stops
    # (87.5 - 75) / 75 = 16.7% > 15%: one more midpoint; then (81.25 - 75) / 75 = 8.3%: done
    assert next_rate([*pts, _p(87.5, "PASS")], T, 0.15) == 81.25
    assert next_rate([*pts, _p(87.5, "PASS"), _p(81.25, "PASS")], T, 0.15) is None
    assert next_rate([*pts, _p(87.5, "FAIL")], T, 0.15) is None  # 100 .. 87.5: 14.3%


def test_all_pass_and_none_pass() -> None:
    assert bracket([_p(150, "PASS"), _p(40, "PASS")], T)["status"] == "all_pass"
    assert bracket([_p(150, "PASS"), _p(40, "PASS")], T)["lowest_pass_bps"] == 40.0
    none = bracket([_p(150, "FAIL"), _p(40, "INCONCLUSIVE")], T)
    assert none["status"] == "none_pass" and none["lowest_pass_bps"] is None
    assert next_rate([_p(150, "FAIL"), _p(40, "FAIL")], T, 0.15) is None  # nothing to bisect


def test_an_inconclusive_point_is_never_a_pass_nor_interpolated_into_one() -> None:
    """The wrong-PASS scenario: INCONCLUSIVE between a PASS and a FAIL. Counting it as passing (or
    interpolating between its neighbours) would report a least bandwidth nobody measured passing."""
    pts = [_p(150, "PASS"), _p(100, "INCONCLUSIVE"), _p(50, "FAIL")]
    b = bracket(pts, T)
    assert b["lowest_pass_bps"] == 150.0 and b["highest_not_pass_bps"] == 100.0
    assert b["status"] == "inconclusive"
    assert next_rate(pts, T, 0.15) == 125.0  # bisect between the PASS and the INCONCLUSIVE


def test_error_and_not_run_points_are_left_out_never_counted_as_passing() -> None:
    # a rate the kernel did not deliver: its verdict says ERROR and its error says why
    errored = _p(75, "PASS", error="the rate was not delivered under its cgroup")
    pts = [_p(150, "PASS"), errored, _p(60, "NOT_RUN"), _p(50, "FAIL")]
    b = bracket(pts, T)
    assert b["lowest_pass_bps"] == 150.0 and b["highest_not_pass_bps"] == 50.0 and b["status"] == "bracketed"
    # its midpoint was tried already (the error point): bisecting again would only repeat it
    assert next_rate([_p(100, "PASS"), _p(75, "ERROR", error="not delivered"), _p(50, "FAIL")], T, 0.15) is None


def test_a_pass_below_a_point_that_did_not_pass_makes_it_inconclusive() -> None:
    """Non-monotone: a FAIL between PASSes; the answer's upper end stays the unbroken PASS run from
    the top (a lucky lower PASS never lowers it)."""
    pts = [_p(150, "PASS"), _p(100, "FAIL"), _p(75, "PASS"), _p(50, "FAIL")]
    b = bracket(pts, T)
    assert b["status"] == "inconclusive" and b["lowest_pass_bps"] == 150.0 and b["highest_not_pass_bps"] == 100.0
    top_not_pass = bracket([_p(150, "FAIL"), _p(100, "PASS")], T)
    assert top_not_pass["status"] == "inconclusive" and top_not_pass["lowest_pass_bps"] is None
    assert bracket([], T)["status"] == "inconclusive"
