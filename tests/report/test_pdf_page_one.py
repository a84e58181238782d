"""Page one of a full G3's PDF is the sign-off sheet (issue 53): with 16 checks swept at three
concurrencies, a baseline with accepted mismatches, faults, a threshold override and the power
table, page one carries, in this order, the verdict and why, the headline (every blocker check with
its threshold and figure), the system under test, the workload and the sign-off block; the checks
table and the details (intervals, power, baseline, notes, who ran it and when) come after it.
Checked on a real WeasyPrint PDF with poppler's pdftotext."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.report import render_gate_reports
from harness.report.pdf import write_pdf
from harness.store.schema import CheckResult, GateResult, Interval, Observation, Verdict

from .conftest import make_result, write_gate

# the rest of gates/G3.yaml beside make_result's seven checks, plus two more: 16 checks in all
EXTRA_CHECKS = ("candidate_offload_hits", "candidate_offload_hit_share", "candidate_prefix_cache_evicted",
                "recompute_offload_hits", "estimate_agreement", "output_identity", "write_overhead",
                "ttft_p99_reduction", "baseline_failed_requests")
ACCEPTED = [{"field": "workload.input_len", "baseline": 2048, "this_run": 256},
            {"field": "engine.version", "baseline": "0.10.2", "this_run": "0.11.0"}]


def _not_measured(cid: str) -> str:
    return (f"compare.{cid}.c8 was expected (concurrency 8 is in the profile) but not measured: the candidate "
            "sweep at concurrency 8 did not run (the engine did not start on node-a)")


def full_g3() -> GateResult:
    """16 checks, each swept at three concurrencies; the last six lost their c8 point (NOT_RUN
    with a long reason: the rows a failed candidate sweep gives, two lines each on page one)."""
    result = make_result()
    result.measurements = {}  # no sweep charts: a shorter document, laid out faster (faults stay)
    for i, cid in enumerate(EXTRA_CHECKS):
        lost = i >= 3
        obs = [Observation(path=f"compare.{cid}.c{c}", measured=None if lost and c == 8 else 0.30 + i / 100,
                           measured_text="" if lost and c == 8 else f"{30 + i}.0%", expected_text=">= 25%",
                           n_samples=10, verdict=Verdict.NOT_RUN if lost and c == 8 else Verdict.PASS,
                           reason=_not_measured(cid) if lost and c == 8 else "",
                           interval=Interval(low=0.2612, high=0.3487, confidence=0.95, resamples=2000))
               for c in (1, 8, 16)]
        result.checks.append(CheckResult(
            id=cid, description=f"{cid}, at every concurrency", metric=f"compare.{cid}.*", comparator=">=",
            threshold="25%", threshold_value=0.25, unit_kind="percent",
            severity="advisory" if i % 3 == 0 else "blocker", statistic="interval", confidence=0.95,
            verdict=Verdict.NOT_RUN if lost else Verdict.PASS, observations=obs))
    for c in result.checks:
        for o in c.observations if c.statistic == "interval" else []:
            o.min_samples, o.power, o.power_repetitions = 5, 0.83, 9
    result.baseline = {"where": "campaign 'camp-0'", "digest": "ab" * 32, "accepted_mismatches": ACCEPTED}
    return result


def _pages(pdf: Path) -> list[str]:
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,  # noqa: S603, S607
                          timeout=120, check=True).stdout
    return [re.sub(r"[ \t]+", " ", page) for page in text.split("\f")[:-1]]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    gate = write_gate(tmp_path_factory.mktemp("page-one") / "camp-1" / "G3", full_g3())
    render_gate_reports(gate)
    yield _pages(write_pdf(gate))


def test_page_one_is_the_sign_off_sheet_in_order(pages: list[str]) -> None:
    first = pages[0]
    assert len(full_g3().checks) >= 15
    assert re.search(r"^\s*FAIL\s", first, re.M) and "ttft_p50_reduction is INCONCLUSIVE" in first
    assert "Exit code 1" in first
    assert "accepted with --allow-baseline-mismatch" in first  # the notice beside the verdict
    order = [first.index(h) for h in ("FAIL", "Headline: blocker checks", "System under test", "Workload",
                                      "Sign-off")]
    assert order == sorted(order), order
    headline = first[first.index("Headline: blocker checks"):first.index("System under test")]
    for c in full_g3().checks:  # every blocker on its own row with its verdict; advisory ones after page one
        row = re.search(rf"^\s*{c.id}\s.*\s{c.verdict.value}\b", headline, re.M)
        assert bool(row) == (c.severity == "blocker"), c.id
    for item in ("MI308X x 8 (declared)", "vllm version 0.11.0 (measured)", "lmcache version 0.3.9 (measured)",
                 "Model Qwen/Qwen3-8B", "Arm candidate NVMe-oF RAID0"):
        assert item in first, item
    assert "not recorded" not in first
    assert "Vendor" in first and "Customer" in first and "accept" in first and "reject" in first
    assert "Comment" in first and "Signature, date (YYYY-MM-DD)" in first and "Electronic signatures" in first


def test_checks_and_details_come_after_page_one(pages: list[str]) -> None:
    first, rest = pages[0], "\n".join(pages[1:])
    assert "Threshold overrides" in first and "throughput_gain >= 20%" in first  # beside the verdict
    for heading in ("Checks", "When and by whom", "Repetitions and achieved power",
                    "Baseline used", "Observations per check"):
        assert heading in rest, heading
    for detail in ("When and by whom", "alice@vendor", "Repetitions and achieved power", "Baseline used", "demo run"):
        assert detail not in first, detail
    assert "[26.12%, 34.87%]" in rest  # every interval is in its check's observations
    assert "compare.candidate_prefix_cache_evicted.c16" in rest
    assert rest.count("node-a)") >= 6  # a long reason is whole in its check's observations
