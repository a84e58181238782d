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
