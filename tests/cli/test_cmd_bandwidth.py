"""`kvgate bandwidth-sweep`: its help, a usage mistake named without a traceback, and the curve as the
terminal prints it (error points and INCONCLUSIVE verdicts shown as such)."""

from __future__ import annotations

import pytest

from harness.cli.cmd_bandwidth import print_curve
from harness.cli.main import run


def test_help_and_missing_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["bandwidth-sweep", "--help"]) == 0
    assert "blk-throttle" in capsys.readouterr().out
    assert run(["bandwidth-sweep", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "needs --inventory and --profile (or --demo)" in err and "Traceback" not in err


def test_the_curve_shows_every_point_as_it_was_decided(capsys: pytest.CaptureFixture[str]) -> None:
    point = {"provisioned_read_bps": 150e6, "fraction": 1.0, "fio_read_bps": 149e6, "ttft_p50_ms": 63.0,
             "ttft_p50_interval_ms": [58.3, 65.2], "throughput_tok_s": 264.0, "throughput_interval": [258.6, 269.4],
             "verdicts": {"ttft_p50_reduction": "PASS", "throughput_gain": "PASS"}, "error": None}
    inconclusive = {**point, "provisioned_read_bps": 84e6, "fraction": 0.56, "fio_read_bps": 84e6,
                    "verdicts": {"ttft_p50_reduction": "INCONCLUSIVE", "throughput_gain": "FAIL"}}
    errored = {**point, "provisioned_read_bps": 60e6, "fraction": 0.4, "fio_read_bps": 30e6, "ttft_p50_ms": None,
               "ttft_p50_interval_ms": None, "verdicts": {"ttft_p50_reduction": "ERROR", "throughput_gain": "ERROR"},
               "error": "the rate was not delivered under its cgroup"}
    print_curve({"tier_fio_read_bps": 149e6, "baseline": {"ttft_p50_ms": 213.3, "ttft_p50_interval_ms": [210.8, 215.5],
                                                          "throughput_tok_s": 124.1},
                 "thresholds": {"ttft_p50_reduction": 0.25, "throughput_gain": 0.29},
                 "points": [point, inconclusive, errored],
                 "bracket": {"ttft_p50_reduction": {"status": "inconclusive", "lowest_pass_bps": 150e6,
                                                    "highest_not_pass_bps": 84e6, "relative_width": 0.79}}})
    out = capsys.readouterr().out
    assert "reduction >= 25%, throughput gain >= 29%" in out
    assert "63.0 [58.3, 65.2]" in out and "INCONCLUSIVE" in out
    assert "error: the rate was not delivered under its cgroup" in out
    assert "least bandwidth passing ttft_p50_reduction: inconclusive; lowest PASS 150.0 MB/s" in out
    assert "estimator: not held to this curve" in out


def test_the_curve_prints_the_estimators_error_at_each_point_and_the_throttle_label(
        capsys: pytest.CaptureFixture[str]) -> None:
    point = {"provisioned_read_bps": 150e6, "fraction": 1.0, "fio_read_bps": 149e6, "ttft_p50_ms": 63.0,
             "ttft_p50_interval_ms": [58.3, 65.2], "verdicts": {"ttft_p50_reduction": "PASS",
                                                                "throughput_gain": "PASS"},
             "error": None, "throttle_slices": 0.6}
    low = {**point, "provisioned_read_bps": 37.5e6, "fraction": 0.25, "ttft_p50_ms": 370.0, "throttle_slices": 2.2,
           "error": "node said \x1b[2Jcleared"}
    est = {"parameter": "read_efficiency", "value": 1.2, "worst_rel_error": 0.405, "worst_calibrated_rel_error": 0.138,
           "goal": 0.15, "within_goal": True, "limits": None,
           "points": [{"provisioned_read_bps": 150e6, "rel_error": 0.405, "calibrated_rel_error": 0.138},
                      {"provisioned_read_bps": 37.5e6, "rel_error": 0.121, "calibrated_rel_error": -0.08}]}
    print_curve({"points": [point, low], "bracket": {}, "estimator": est,
                 "throttle_quantization": {"text": "at 2 of 2 rates one request's restore spans 0.6-2.2 slices"}})
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if "MB/s" in ln and "%" in ln]
    assert "+14% (+40%)" in rows[0] and rows[0].rstrip().endswith("0.6")
    assert "-8% (+12%)" in rows[1] and rows[1].rstrip().endswith("2.2")
    assert "read_efficiency 1.200 fitted; worst error 14% calibrated (40% uncalibrated), goal 15%" in out
    assert "note: at 2 of 2 rates one request's restore spans 0.6-2.2 slices" in out
    assert "\x1b" not in out  # a node's error text is printed inert
