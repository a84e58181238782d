"""The one verdict function: every combination of 2-3 blockers over the 6 verdicts, with and
without faults and advisories, and JUnit red exactly when the exit code is not 0."""

from __future__ import annotations

import functools
import itertools
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.config.gatespec import GateSpec
from harness.config.loader import load_gate
from harness.exitcodes import ExitCode
from harness.gates.evaluate import evaluate_gate
from harness.gates.result import build_gate_result
from harness.gates.verdict import decide
from harness.report.junit import junit_xml
from harness.store.schema import CheckResult, GateResult, Verdict

GATES = Path(__file__).resolve().parents[2] / "gates"
ALL = list(Verdict)
COMBOS = [c for n in (2, 3) for c in itertools.product(ALL, repeat=n)]


def _cr(verdict: Verdict, severity: str = "blocker", i: int = 0) -> CheckResult:
    return CheckResult(id=f"{severity}{i}", description="x", metric=f"m{i}", comparator="is_true",
                       severity=severity, statistic="point", verdict=verdict)  # type: ignore[arg-type]


def _expected(blockers: tuple[Verdict, ...], faulted: bool) -> tuple[Verdict, ExitCode]:
    """The written rules, restated independently of the implementation."""
    applicable = [v for v in blockers if v is not Verdict.NOT_APPLICABLE]
    if Verdict.FAIL in applicable:
        return Verdict.FAIL, ExitCode.GATE_FAILED
    if not applicable:
        verdict, code = Verdict.NOT_RUN, ExitCode.GATE_FAILED
    elif Verdict.ERROR in applicable:
        verdict, code = Verdict.ERROR, ExitCode.GATE_FAILED
    elif Verdict.NOT_RUN in applicable:
        verdict, code = Verdict.NOT_RUN, ExitCode.GATE_FAILED
    elif Verdict.INCONCLUSIVE in applicable:
        verdict, code = Verdict.INCONCLUSIVE, ExitCode.INCONCLUSIVE
    else:
        verdict, code = (Verdict.ERROR, ExitCode.INFRA_FAULT) if faulted else (Verdict.PASS, ExitCode.OK)
    return verdict, (ExitCode.INFRA_FAULT if faulted else code)


@functools.lru_cache(maxsize=1)
def _spec() -> GateSpec:
    return load_gate(GATES / "G2.yaml")


def _result(checks: list[CheckResult], faults: list[str]) -> GateResult:
    return build_gate_result(_spec(), checks, campaign="c", started_at="2026-01-01T00:00:00Z",
                             finished_at="2026-01-01T00:01:00Z", faults=faults)


@pytest.mark.parametrize("faulted", [False, True], ids=["no-fault", "fault"])
@pytest.mark.parametrize("advisory", [None, Verdict.FAIL, Verdict.NOT_RUN], ids=["no-adv", "adv-fail", "adv-notrun"])
def test_every_combination_follows_the_rules_and_junit_is_red_iff_exit_nonzero(
        faulted: bool, advisory: Verdict | None) -> None:
    faults = ["node1: engine did not start"] if faulted else []
    for combo in COMBOS:
        checks = [_cr(v, i=i) for i, v in enumerate(combo)]
        if advisory is not None:
            checks.append(_cr(advisory, "advisory"))
        decision = decide(checks, faults)
        assert (decision.verdict, decision.exit_code) == _expected(combo, faulted), combo
        assert decision.passed == (decision.exit_code is ExitCode.OK)
        assert (decision.verdict is Verdict.PASS) == decision.passed, combo
        assert decision.reason
        result = _result(checks, faults)
        assert (result.verdict, result.exit_code, result.verdict_reason) == (
            decision.verdict, int(decision.exit_code), decision.reason)
        root = ET.fromstring(junit_xml([result]))
        red = int(root.get("failures", "0")) + int(root.get("errors", "0")) > 0
        assert red == (result.exit_code != 0), (combo, faulted, advisory)


def test_the_reason_names_the_cause() -> None:
    d = decide([_cr(Verdict.PASS, i=0), _cr(Verdict.NOT_RUN, i=1)])
    assert "not run" in d.reason and "blocker1" in d.reason and "blocker0" not in d.reason
    d = decide([_cr(Verdict.NOT_APPLICABLE, i=0), _cr(Verdict.NOT_APPLICABLE, i=1)])
    assert (d.verdict, d.exit_code) == (Verdict.NOT_RUN, ExitCode.GATE_FAILED)
    assert "no applicable blocker" in d.reason
    d = decide([_cr(Verdict.FAIL, i=0)], ["node2 unreachable"])
    assert (d.verdict, d.exit_code) == (Verdict.FAIL, ExitCode.GATE_FAILED)
    assert "blocker0" in d.reason and "node2 unreachable" in d.reason
    d = decide([_cr(Verdict.PASS, i=0)], ["disk full"])
    assert (d.verdict, d.exit_code) == (Verdict.ERROR, ExitCode.INFRA_FAULT) and "disk full" in d.reason


def test_no_checks_at_all_decide_nothing() -> None:
    d = decide([])
    assert (d.verdict, d.exit_code) == (Verdict.NOT_RUN, ExitCode.GATE_FAILED)
    d = decide([_cr(Verdict.PASS, "advisory")])
    assert (d.verdict, d.exit_code) == (Verdict.NOT_RUN, ExitCode.GATE_FAILED)


def test_junit_flags_a_result_whose_recorded_exit_code_disagrees_with_its_checks() -> None:
    result = _result([_cr(Verdict.NOT_RUN)], [])
    forged = result.model_copy(update={"verdict": Verdict.PASS, "exit_code": 0})
    root = ET.fromstring(junit_xml([forged]))
    gate_case = root.find("testsuite/testcase[@name='gate_verdict']")
    assert gate_case is not None
    failure = gate_case.find("failure")
    assert failure is not None and "give exit 1" in failure.get("message", "")


def test_build_gate_result_from_an_evaluated_gate() -> None:
    spec = load_gate(GATES / "G3.yaml")
    checks = evaluate_gate(spec, {})
    res = build_gate_result(spec, checks, campaign="c", started_at="2026-01-01T00:00:00Z",
                            campaign_meta={"git_commit": "a" * 40, "operator": "bob"})
    assert (res.verdict, res.exit_code, res.git_commit, res.operator) == (Verdict.NOT_RUN, 1, "a" * 40, "bob")
    res = build_gate_result(spec, checks, campaign="c", started_at="s", faults=["node1: engine did not start"])
    assert res.exit_code == ExitCode.INFRA_FAULT and res.faults == ["node1: engine did not start"]
    rounds = {"kind": "percentile", "x": [1e9] * 5, "q": 50}  # five steady rounds, all below 5 GB/s
    failing = evaluate_gate(spec, {"candidate": {"fio": {"seq_read_bw": {"value": 1e9, "samples": rounds}}}})
    res = build_gate_result(spec, failing, campaign="c", started_at="s", faults=["a fault"])
    assert res.verdict is Verdict.FAIL and res.exit_code == ExitCode.GATE_FAILED
    assert type(res).model_validate_json(res.model_dump_json()) == res


def _obs_fail(caused_by_fault: bool) -> CheckResult:
    from harness.store.schema import Observation

    c = _cr(Verdict.FAIL, i=9)
    return c.model_copy(update={"observations": [
        Observation(path="nodes.n2.reachable", verdict=Verdict.FAIL, caused_by_fault=caused_by_fault),
        Observation(path="nodes.n1.reachable", verdict=Verdict.PASS)]})


def test_a_fail_that_only_records_the_fault_exits_4_and_measured_fail_exits_1() -> None:
    d = decide([_obs_fail(True), _cr(Verdict.PASS)], ["n2 unreachable"])
    assert (d.verdict, d.exit_code) == (Verdict.FAIL, ExitCode.INFRA_FAULT)
    d = decide([_obs_fail(True), _cr(Verdict.FAIL, i=1)], ["n2 unreachable"])  # another blocker failed on evidence
    assert (d.verdict, d.exit_code) == (Verdict.FAIL, ExitCode.GATE_FAILED)
    d = decide([_obs_fail(False)], ["n2 unreachable"])
    assert (d.verdict, d.exit_code) == (Verdict.FAIL, ExitCode.GATE_FAILED)
    d = decide([_obs_fail(True)])  # marked, but no fault recorded: the FAIL stands as evidence
    assert (d.verdict, d.exit_code) == (Verdict.FAIL, ExitCode.GATE_FAILED)
    for checks in ([_obs_fail(True)], [_obs_fail(False)]):
        result = _result(checks, ["n2 unreachable"])
        red = int(ET.fromstring(junit_xml([result])).get("failures", "0")) > 0
        assert red and result.exit_code != 0


def test_reasons_are_exact_sentences() -> None:
    two = [_cr(Verdict.ERROR, i=0), _cr(Verdict.ERROR, i=1)]
    assert decide(two).reason == "blocker(s) could not be evaluated: blocker0, blocker1"
    assert decide([_cr(Verdict.NOT_RUN)]).reason == "blocker(s) not run: blocker0"
    assert decide([_cr(Verdict.INCONCLUSIVE)]).reason == "blocker(s) inconclusive: blocker0"
    assert decide([_cr(Verdict.PASS)]).reason == "all 1 applicable blocker(s) passed"
    assert decide([_cr(Verdict.FAIL)]).reason == "blocker(s) failed: blocker0"
    assert decide([]).reason == "no applicable blocker check: the gate decided nothing"
    assert decide([_cr(Verdict.FAIL)], ["disk full", "node down"]).reason == (
        "blocker(s) failed: blocker0; 2 infrastructure fault(s): disk full")
    assert decide([_cr(Verdict.PASS)], ["disk full"]).reason == (
        "every applicable blocker passed, but the run recorded 1 infrastructure fault(s): disk full")


def test_build_gate_result_keeps_every_field_it_is_given() -> None:
    import datetime as dt

    from harness import __version__
    from harness.gates.result import utc_now

    fp = {"digest": "d" * 64, "fields": {"load.seed": 1}}
    res = build_gate_result(
        _spec(), [_cr(Verdict.PASS)], campaign="c", started_at="s", finished_at="f",
        campaign_meta={"kvgate_version": "9.9", "git_commit": "abc", "operator": "op"},
        inventory={"cluster": "k"}, profile={"name": "p"}, measurements={"sweep": {}}, faults=[],
        notes=["n"], emulated=True, fingerprint=fp, baseline={"where": "w"})
    assert (res.kvgate_version, res.git_commit, res.operator, res.emulated) == ("9.9", "abc", "op", True)
    assert (res.inventory, res.profile, res.measurements, res.notes) == (
        {"cluster": "k"}, {"name": "p"}, {"sweep": {}}, ["n"])
    assert (res.fingerprint, res.baseline, res.started_at, res.finished_at) == (fp, {"where": "w"}, "s", "f")
    plain = build_gate_result(_spec(), [], campaign="c", started_at="s")
    assert plain.kvgate_version == __version__ and plain.emulated is False
    assert plain.fingerprint is None and plain.baseline is None and plain.inventory == {}
    now = utc_now()
    assert now.endswith("Z") and "+" not in now
    parsed = dt.datetime.fromisoformat(now.replace("Z", "+00:00"))
    assert abs((dt.datetime.now(dt.timezone.utc) - parsed).total_seconds()) < 60
