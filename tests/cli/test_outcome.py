"""What a finished gate prints: beside the table, why each blocker kept the gate from passing."""

from __future__ import annotations

from typing import Any

from harness.cli.outcome import WHY_WIDTH, why_lines
from harness.records.outcome import CheckResult, Verdict


def _check(id: str, verdict: Verdict, reason: str, severity: str = "blocker") -> CheckResult:
    base: dict[str, Any] = {"id": id, "description": "d", "metric": "m", "comparator": "<=", "severity": severity,
                            "statistic": "interval", "verdict": verdict, "reason": reason}
    return CheckResult.model_validate(base)


def test_blockers_that_did_not_pass_say_why_and_nothing_else_does() -> None:
    checks = [
        _check("ttft_drift", Verdict.INCONCLUSIVE, "soak.ttft_p50_drift: the 95% interval straddles the threshold "
               "10%; about 82 windows a third would likely decide"),
        _check("failed_requests", Verdict.PASS, ""),
        _check("storage_errors", Verdict.FAIL, "3 nvme timeout lines"),
        _check("estimate_agreement", Verdict.FAIL, "measured far slower than predicted", severity="advisory"),
        _check("raid_healthy", Verdict.NOT_APPLICABLE, "no RAID in the inventory"),
        _check("duration", Verdict.NOT_RUN, "no window"),
    ]
    assert why_lines(checks) == [
        "why ttft_drift is INCONCLUSIVE: soak.ttft_p50_drift: the 95% interval straddles the threshold 10%; "
        "about 82 windows a third would likely decide",
        "why storage_errors is FAIL: 3 nvme timeout lines",
        "why duration is NOT_RUN: no window",
    ]


def test_a_long_reason_is_cut_to_the_terminal_width() -> None:
    (line,) = why_lines([_check("c", Verdict.ERROR, "x" * 1000)])
    assert line.startswith("why c is ERROR: xxx") and line.endswith("...")
    assert len(line) == len("why c is ERROR: ") + WHY_WIDTH
