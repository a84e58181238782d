"""Check evaluation and gate verdicts: every verdict, every edge case of the issue."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from harness.config.gatespec import Check, GateSpec
from harness.config.loader import load_gate
from harness.config.profile import ThresholdOverride
from harness.errors import InputError
from harness.gates import stats
from harness.gates.evaluate import check_overrides, evaluate_check, evaluate_gate
from harness.gates.metricpath import resolve
from harness.store.schema import Verdict

GATES = Path(__file__).resolve().parents[2] / "gates"


def _check(**kw: Any) -> Check:
    base: dict[str, Any] = {"id": "c", "description": "d", "metric": "compare.ttft_p50_reduction.*",
                            "comparator": ">=", "threshold": "25%"}
    base.update(kw)
    return Check.model_validate(base)


def _ratio(a: list[float], b: list[float], transform: str = "reduction", stat: str = "p50") -> dict[str, Any]:
    return {"value": None, "samples": {"kind": "ratio", "a": a, "b": b, "stat": stat, "transform": transform}}


def _noisy(center: float, n: int, seed: int, sd: float = 0.05) -> list[float]:
    r = random.Random(seed)
    return [center * math.exp(r.gauss(0, sd)) for _ in range(n)]


INTERVAL = {"kind": "interval", "confidence": 0.95, "resamples": 1000}


def test_resolve_wildcards_and_leaves() -> None:
    m = {"nodes": {"a": {"storage": {"t1": {"raid": {"match": {"value": True}}}, "t2": {}}},
                   "b": {"storage": {"t1": {"raid": {"match": False}}}}}}
    assert [p for p, _ in resolve(m, "nodes.*.storage.*.raid.match")] == [
        "nodes.a.storage.t1.raid.match", "nodes.b.storage.t1.raid.match"]
    assert resolve(m, "nodes.a.storage.t9.raid.match") == []
    # a measurement dict is a leaf: nothing below it resolves
    assert resolve(m, "nodes.a.storage.t1.raid.match.value") == []


def test_interval_pass_fail_inconclusive() -> None:
    check = _check(statistic=INTERVAL)
    measured = {"compare": {"ttft_p50_reduction": {
        "c8": _ratio(_noisy(60, 100, 1), _noisy(100, 100, 2)),    # ~40% reduction: clearly passes
        "c16": _ratio(_noisy(90, 100, 3), _noisy(100, 100, 4)),   # ~10%: clearly fails
        "c32": _ratio(_noisy(75, 30, 5, 0.3), _noisy(100, 30, 6, 0.3)),  # ~25% with wide noise
    }}}
    res = evaluate_check(check, measured)
    by = {o.path.rsplit(".", 1)[1]: o for o in res.observations}
    assert by["c8"].verdict is Verdict.PASS and by["c8"].interval is not None
    assert by["c8"].interval.low >= 0.25
    assert by["c16"].verdict is Verdict.FAIL and by["c16"].interval is not None
    assert by["c16"].interval.high < 0.25
    assert by["c32"].verdict is Verdict.INCONCLUSIVE
    assert by["c32"].interval is not None and by["c32"].interval.low < 0.25 < by["c32"].interval.high
    assert by["c32"].needed_samples is not None and by["c32"].needed_samples > 30
    assert "samples per group" in by["c32"].reason
    assert res.verdict is Verdict.FAIL  # the worst observation decides the check
    assert by["c8"].interval.resamples == 1000 and by["c8"].n_samples == 100


def test_interval_is_deterministic_for_a_seed() -> None:
    check = _check(statistic=INTERVAL)
    m = {"compare": {"ttft_p50_reduction": {"c8": _ratio(_noisy(70, 50, 1, 0.2), _noisy(100, 50, 2, 0.2))}}}
    a = evaluate_check(check, m, seed=3).observations[0].interval
    b = evaluate_check(check, m, seed=3).observations[0].interval
    c = evaluate_check(check, m, seed=4).observations[0].interval
    assert a == b and a != c


def test_all_equal_samples_decide_exactly_at_the_threshold() -> None:
    # 75 vs 100 everywhere: the reduction is exactly 25%, interval [25%, 25%]
    m = {"compare": {"ttft_p50_reduction": {"c8": _ratio([75.0] * 10, [100.0] * 10)}}}
    ge = evaluate_check(_check(statistic=INTERVAL), m)
    assert ge.verdict is Verdict.PASS
    gt = evaluate_check(_check(comparator=">", statistic=INTERVAL), m)
    assert gt.verdict is Verdict.FAIL


def test_threshold_exactly_met_point() -> None:
    check = _check(metric="candidate.fio.seq_read_bw", threshold="5 GB/s")
    assert evaluate_check(check, {"candidate": {"fio": {"seq_read_bw": 5e9}}}).verdict is Verdict.PASS
    assert evaluate_check(check, {"candidate": {"fio": {"seq_read_bw": 4.999e9}}}).verdict is Verdict.FAIL
    gt = _check(metric="candidate.fio.seq_read_bw", comparator=">", threshold="5 GB/s")
    assert evaluate_check(gt, {"candidate": {"fio": {"seq_read_bw": 5e9}}}).verdict is Verdict.FAIL
    # float rounding of a computed fraction does not flip an exactly-met threshold
    le = _check(metric="candidate.failed_ratio", comparator="<=", threshold="1%")
    assert evaluate_check(le, {"candidate": {"failed_ratio": 0.1 * 0.1}}).verdict is Verdict.PASS
    eq = _check(metric="candidate.failed_ratio", comparator="==", threshold="0%")
    assert evaluate_check(eq, {"candidate": {"failed_ratio": 0.0}}).verdict is Verdict.PASS
    ne = _check(metric="candidate.failed_ratio", comparator="!=", threshold="0%")
    assert evaluate_check(ne, {"candidate": {"failed_ratio": 0.0}}).verdict is Verdict.FAIL


def test_point_statistic_is_labelled() -> None:
    check = _check(metric="compare.throughput_gain_best", threshold="29%")
    m = {"compare": {"throughput_gain_best": _ratio([130.0, 131.0, 129.0], [100.0] * 3, transform="gain")}}
    res = evaluate_check(check, m)
    o = res.observations[0]
    assert res.statistic == "point" and o.interval is None
    assert "point estimate" in o.measured_text and "point estimate" in o.reason
    assert o.measured == pytest.approx(0.30) and res.verdict is Verdict.PASS


def test_one_sample_is_inconclusive_not_a_zero_width_pass() -> None:
    m = {"compare": {"ttft_p50_reduction": {"c8": _ratio([50.0], [100.0])}}}
    res = evaluate_check(_check(statistic=INTERVAL), m)
    o = res.observations[0]
    assert o.verdict is Verdict.INCONCLUSIVE and o.interval is None
    assert o.needed_samples == 5 and "1 sample" in o.reason


def test_nan_measurements_are_errors() -> None:
    check = _check(metric="candidate.fio.seq_read_bw", threshold="5 GB/s")
    res = evaluate_check(check, {"candidate": {"fio": {"seq_read_bw": float("nan")}}})
    assert res.verdict is Verdict.ERROR and "finite" in res.reason
    m = {"compare": {"ttft_p50_reduction": {"c8": _ratio([1.0, float("nan")] * 5, [2.0] * 10)}}}
    res = evaluate_check(_check(statistic=INTERVAL), m)
    assert res.verdict is Verdict.ERROR and "finite" in res.reason


def test_zero_baseline_is_an_error_with_the_reason() -> None:
    m = {"compare": {"ttft_p50_reduction": {"c8": _ratio([1.0] * 10, [0.0] * 10)}}}
    res = evaluate_check(_check(statistic=INTERVAL), m)
    assert res.verdict is Verdict.ERROR
    assert "baseline statistic is zero" in res.observations[0].reason


def test_unit_mismatch_is_an_error_naming_the_units() -> None:
    check = _check(metric="candidate.fio.seq_read_bw", threshold="5 GB/s")
    ok = evaluate_check(check, {"candidate": {"fio": {"seq_read_bw": "5.2 GB/s"}}})
    assert ok.verdict is Verdict.PASS and ok.observations[0].measured == pytest.approx(5.2e9)
    bad = evaluate_check(check, {"candidate": {"fio": {"seq_read_bw": "40 Gb/s"}}})
    assert bad.verdict is Verdict.ERROR and "unit mismatch" in bad.reason and "bitrate" in bad.reason
    boolean = evaluate_check(check, {"candidate": {"fio": {"seq_read_bw": True}}})
    assert boolean.verdict is Verdict.ERROR and "boolean" in boolean.reason


def test_missing_metric_and_value_none_are_not_run() -> None:
    check = _check(metric="candidate.fio.seq_read_bw", threshold="5 GB/s")
    res = evaluate_check(check, {})
    assert res.verdict is Verdict.NOT_RUN and "no measured value" in res.reason
    res = evaluate_check(check, {"candidate": {"fio": {"seq_read_bw": {
        "value": None, "detail": "fio exited 1: No space left on device",
        "evidence": ["evidence/fio.json"]}}}})
    assert res.verdict is Verdict.NOT_RUN and "No space left" in res.reason
    assert res.observations[0].evidence == ["evidence/fio.json"]


def test_interval_check_without_samples_is_an_error() -> None:
    m = {"compare": {"ttft_p50_reduction": {"c8": {"value": 0.3}}}}
    res = evaluate_check(_check(statistic=INTERVAL), m)
    assert res.verdict is Verdict.ERROR and "no samples" in res.reason


def test_boolean_checks() -> None:
    t = _check(metric="nodes.*.accelerators.match", comparator="is_true", threshold=None)
    m = {"nodes": {"n1": {"accelerators": {"match": {"value": True, "text": "MI308X x8"}}},
                   "n2": {"accelerators": {"match": {"value": False, "detail": "expected 8, found 7"}}},
                   "n3": {"accelerators": {"match": {"value": None, "detail": "amd-smi missing"}}}}}
    res = evaluate_check(t, m)
    v = {o.path.split(".")[1]: o for o in res.observations}
    assert v["n1"].verdict is Verdict.PASS and v["n1"].measured_text == "MI308X x8"
    assert v["n2"].verdict is Verdict.FAIL and v["n2"].reason == "expected 8, found 7"
    assert v["n3"].verdict is Verdict.NOT_RUN
    assert res.verdict is Verdict.FAIL
    f = _check(metric="nodes.*.accelerators.match", comparator="is_false", threshold=None)
    assert evaluate_check(f, {"nodes": {"n1": {"accelerators": {"match": False}}}}).verdict is Verdict.PASS
    # a number is not a boolean
    assert evaluate_check(t, {"nodes": {"n1": {"accelerators": {"match": 1}}}}).verdict is Verdict.ERROR


def test_overrides_are_applied_and_listed() -> None:
    spec = load_gate(GATES / "G3.yaml")
    ov = ThresholdOverride(gate="G3", check="read_bandwidth", threshold="3 GB/s",
                           reason="customer's 2-drive pilot system, agreed in the kickoff")
    other = ThresholdOverride(gate="G2", check="whatever", threshold="1%", reason="not this gate at all")
    measured = {"candidate": {"fio": {"seq_read_bw": {"value": 4e9, "samples": {"kind": "percentile",
                                                                           "x": [4e9] * 5, "q": 50}}}}}
    res = {c.id: c for c in evaluate_gate(spec, measured, overrides=[ov, other])}
    rb = res["read_bandwidth"]
    assert rb.verdict is Verdict.PASS and rb.threshold == "3 GB/s" and rb.threshold_value == 3e9
    assert rb.override_reason is not None
    assert "kickoff" in rb.override_reason and "5 GB/s" in rb.override_reason
    assert res["candidate_failed_requests"].override_reason is None


@pytest.mark.parametrize(("check", "threshold", "match"), [
    ("nope", "3 GB/s", "no check"),
    ("read_bandwidth", "3 Gb/s", "bitrate"),
])
def test_bad_overrides_are_input_errors(check: str, threshold: str, match: str) -> None:
    spec = load_gate(GATES / "G3.yaml")
    ov = ThresholdOverride(gate="G3", check=check, threshold=threshold, reason="a reason long enough")
    with pytest.raises(InputError, match=match):
        evaluate_gate(spec, {}, overrides=[ov])


def test_a_gate_spec_from_code_evaluates() -> None:
    spec = GateSpec.model_validate({"id": "G4", "title": "t", "checks": [
        {"id": "restarts", "description": "d", "metric": "soak.engine_restarts", "comparator": "==",
         "threshold": "0"},
        {"id": "duration", "description": "d", "metric": "soak.duration", "comparator": ">=",
         "threshold": "72h"},
    ]})
    res = evaluate_gate(spec, {"soak": {"engine_restarts": 0, "duration": 71.5 * 3600}})
    assert [c.verdict for c in res] == [Verdict.PASS, Verdict.FAIL]
    assert res[1].threshold_value == 72 * 3600


def test_interval_observations_carry_power_and_the_repetitions_for_80_percent() -> None:
    from harness.gates import stats

    check = _check(statistic=INTERVAL)
    measured = {"compare": {"ttft_p50_reduction": {
        "c8": _ratio(_noisy(60, 100, 1), _noisy(100, 100, 2)),
        "c32": _ratio(_noisy(75, 30, 5, 0.3), _noisy(100, 30, 6, 0.3)),
    }}}
    by = {o.path.rsplit(".", 1)[1]: o for o in evaluate_check(check, measured).observations}
    for o in by.values():
        assert o.interval is not None and o.measured is not None and o.n_samples is not None
        assert o.min_samples == stats.MIN_INTERVAL_SAMPLES
        assert o.power == stats.achieved_power(o.interval.low, o.interval.high, o.measured, 0.25, 0.95)
        assert o.power_repetitions == stats.repetitions_for_power(
            o.n_samples, o.interval.low, o.interval.high, o.measured, 0.25, 0.95, 0.8)
    assert by["c8"].power is not None and by["c8"].power > 0.99
    assert by["c8"].power_repetitions == stats.MIN_INTERVAL_SAMPLES  # far above the threshold
    assert by["c32"].power is not None and by["c32"].power < 0.5
    assert by["c32"].power_repetitions is not None and by["c32"].power_repetitions > 30
    # a point check has neither
    point = evaluate_check(_check(), measured).observations[0]
    assert point.power is None and point.power_repetitions is None and point.min_samples is None


def test_every_bad_override_is_named_in_one_error_and_other_gates_overrides_are_skipped() -> None:
    spec = load_gate(GATES / "G2.yaml")
    down = _check(id="node_down", metric="baseline.complete", comparator="is_false", threshold=None)
    spec = spec.model_copy(update={"checks": [*spec.checks, down]})
    why = "a reason long enough"

    def ov(gate: str, check: str, threshold: str) -> ThresholdOverride:
        return ThresholdOverride(gate=gate, check=check, threshold=threshold, reason=why)  # type: ignore[arg-type]

    good = ov("G2", "ttft_repeatability", "15%")
    # another gate's override comes first and is skipped, not the end of the list
    assert check_overrides(spec, [ov("G3", "nope", "1%"), good]) == {"ttft_repeatability": good}
    with pytest.raises(InputError) as err:
        check_overrides(spec, [ov("G3", "nope", "1%"), ov("G2", "nope", "1%"), ov("G2", "complete", "1%"),
                               ov("G2", "node_down", "1%"), ov("G2", "failed_requests", "fast"), good,
                               ov("G2", "ttft_repeatability", "20%"), ov("G2", "model_load", "2 GB/s")])
    known = ", ".join(c.id for c in spec.checks)
    assert str(err.value) == "; ".join([
        f"profile overrides: override G2.nope: gate G2 has no check 'nope'; known: {known}",
        "override G2.complete: check complete (is_true) takes no threshold",
        "override G2.node_down: check node_down (is_false) takes no threshold",
        "override G2.failed_requests: threshold: 'fast' is not a number with a unit (for example '5 GB/s', "
        "'25%', '72h')",
        "override G2.ttft_repeatability: given twice"])


def test_a_gates_intervals_are_reproducible_for_a_seed_and_change_with_it() -> None:
    spec = load_gate(GATES / "G3.yaml")
    measured = {"compare": {"ttft_p50_reduction": {"c8": _ratio(_noisy(70.0, 40, 1, 0.3), _noisy(100.0, 40, 2, 0.3))}}}

    def interval(results: list[Any]) -> tuple[float, float]:
        obs = next(c for c in results if c.id == "ttft_p50_reduction").observations[0]
        return obs.interval.low, obs.interval.high

    default = interval(evaluate_gate(spec, measured))
    assert default == interval(evaluate_gate(spec, measured, seed=0))
    assert interval(evaluate_gate(spec, measured, seed=1)) != default  # a bootstrap: the seed is used


def test_a_measured_value_that_is_no_number_is_an_error_naming_it() -> None:
    r = evaluate_check(_check(metric="x", threshold="5", comparator=">="), {"x": [1]})
    assert r.verdict is Verdict.ERROR
    assert r.observations[0].reason == "ValueError: measured value [1] is not a number"


@pytest.mark.parametrize(("x", "op", "t", "expected"), [
    # below, equal within the relative tolerance (1e-9 of max(1, |t|)), above; for every comparator
    *[(x, op, 100.0, want) for op, wants in {
        ">=": (False, True, True), ">": (False, False, True), "<=": (True, True, False),
        "<": (True, False, False), "==": (False, True, False), "!=": (True, False, True)}.items()
      for x, want in zip((99.0, 100.0 + 5e-8, 101.0), wants)],
    (0.5 + 5e-10, "==", 0.5, True),  # below 1 the tolerance is absolute (1e-9)
    (0.5 + 5e-9, "==", 0.5, False),
    (100.0 + 2e-7, "==", 100.0, False),
])
def test_compare_every_comparator_with_its_tolerance(x: float, op: str, t: float, expected: bool) -> None:
    from harness.gates.evaluate import compare

    assert compare(x, op, t) is expected


def test_compare_refuses_an_unknown_comparator() -> None:
    from harness.gates.evaluate import _interval_verdict, compare

    with pytest.raises(ValueError, match="unknown comparator '=>'"):
        compare(1.0, "=>", 1.0)
    with pytest.raises(ValueError, match="unknown comparator '=>'"):
        _interval_verdict(0.0, 2.0, "=>", 1.0)


P, F, U = Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE  # U: undecided


@pytest.mark.parametrize(("low", "high", "op", "expected"), [
    # threshold 10: an interval wholly on one side decides; one across it does not
    (11.0, 12.0, ">=", P), (10.0, 12.0, ">=", P), (8.0, 12.0, ">=", U), (8.0, 9.0, ">=", F),
    (11.0, 12.0, ">", P), (10.0, 12.0, ">", U), (8.0, 10.0, ">", F), (8.0, 9.0, ">", F),
    (8.0, 9.0, "<=", P), (8.0, 10.0, "<=", P), (8.0, 12.0, "<=", U), (11.0, 12.0, "<=", F),
    (8.0, 9.0, "<", P), (8.0, 10.0, "<", U), (10.0, 12.0, "<", F), (11.0, 12.0, "<", F),
    # equality: only an interval that is the threshold itself passes; one that holds it is undecided
    (10.0, 10.0, "==", P), (9.0, 11.0, "==", U), (10.0, 11.0, "==", U), (9.0, 10.0, "==", U),
    (11.0, 12.0, "==", F), (8.0, 9.0, "==", F),
    (10.0, 10.0, "!=", F), (9.0, 11.0, "!=", U), (10.0, 11.0, "!=", U), (9.0, 10.0, "!=", U),
    (11.0, 12.0, "!=", P), (8.0, 9.0, "!=", P), (10.0 + 5e-9, 10.0 + 5e-9, "==", P),
])
def test_interval_verdict_for_every_comparator(low: float, high: float, op: str, expected: Verdict) -> None:
    from harness.gates.evaluate import _interval_verdict

    assert _interval_verdict(low, high, op, 10.0) is expected


def test_the_sample_size_message_names_what_limits_each_interval() -> None:
    from harness.gates import messages as M
    from harness.gates import stats
    from harness.gates.evaluate import _size_msg, _unit

    grouped = stats.parse_sample_spec({"kind": "ratio", "a_groups": [[1.0, 2.0, 3.0]] * 5,
                                       "b_groups": [[1.0, 2.0]] * 6})
    assert _size_msg(grouped) == M.msg(M.SIZE_REPETITIONS, n=5, requests=12) and _unit(grouped) == "repetition"
    # fio runs (G4 retention): each run's members are its rounds, never called requests
    runs = stats.parse_sample_spec({"kind": "ratio", "a_groups": [[1.0] * 5] * 5, "b_groups": [[1.0] * 6] * 5,
                                    "members": "rounds"})
    assert _size_msg(runs) == M.msg(M.SIZE_RUNS, n=5, rounds=25) and _unit(runs) == "run"
    with pytest.raises(stats.SampleSpecError, match="members 'windows' is not one of"):
        stats.parse_sample_spec({"kind": "ratio", "a_groups": [[1.0]], "b_groups": [[1.0]], "members": "windows"})
    with pytest.raises(stats.SampleSpecError, match="members applies to a_groups/b_groups"):
        stats.parse_sample_spec({"kind": "ratio", "a": [1.0], "b": [1.0], "members": "rounds"})
    pooled = stats.parse_sample_spec({"kind": "binomial", "k": 3, "n": 80, "groups": 5})
    assert _size_msg(pooled) == M.msg(M.SIZE_BINOMIAL_GROUPS, k=3, trials=80, groups=5) and _unit(pooled) == "request"
    assert _size_msg(stats.parse_sample_spec({"kind": "binomial", "k": 3, "n": 80})) == \
        M.msg(M.SIZE_BINOMIAL, k=3, trials=80)
    cap = stats.parse_sample_spec({"kind": "capacity", "a_points": {"8": [1.0, 2.0, 3.0], "16": [1.0, 2.0, 3.0]},
                                   "b_points": {"8": [1.0, 2.0, 3.0, 4.0]}})
    assert _size_msg(cap) == M.msg(M.SIZE_CAPACITY, candidate=2, baseline=1, n=3) and _unit(cap) == "repetition"
    flat = stats.parse_sample_spec({"kind": "ratio", "a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0, 4.0]})
    assert _size_msg(flat) == M.msg(M.SIZE_N, n=3) and _unit(flat) == "sample"
    # a soak's drift: windows a third, cut into batches; more windows is a longer soak
    batched = stats.parse_sample_spec({"kind": "ratio", "a": [1.0] * 56, "b": [2.0] * 57, "batches": 5})
    assert _size_msg(batched) == M.msg(M.SIZE_WINDOWS, n=56, batches=5) and _unit(batched) == "window"


def test_a_drift_that_straddles_the_threshold_names_the_windows_that_would_decide_and_too_few_are_inconclusive(
) -> None:
    check = _check(metric="soak.ttft_p50_drift", comparator="<=", threshold="10%", statistic=INTERVAL)
    wander = [12.0 * (1.0 + 0.3 * ((i // 4) % 2)) for i in range(20)]  # levels held 4 windows each
    leaf = {"value": None, "samples": {"kind": "ratio", "a": [x * 1.08 for x in wander], "b": wander,
                                       "stat": "median", "transform": "gain", "batches": 5}}
    o = evaluate_check(check, {"soak": {"ttft_p50_drift": leaf}}).observations[0]
    assert o.verdict is Verdict.INCONCLUSIVE and o.interval is not None
    assert o.interval.method.startswith("batch-means-welch-t-log-ratio")
    assert "(95% CI, 20 windows a third in 5 batches)" in o.measured_text
    assert o.needed_samples is not None and o.needed_samples > 20
    assert f"about {o.needed_samples} windows a third would likely decide" in o.reason
    few = {"value": None, "samples": {"kind": "ratio", "a": [1.0] * 4, "b": [1.0] * 4, "stat": "median",
                                      "transform": "gain", "batches": 2}}
    o = evaluate_check(check, {"soak": {"ttft_p50_drift": few}}).observations[0]
    assert o.verdict is Verdict.INCONCLUSIVE and "4 window(s) a third: an interval needs at least 5" in o.reason


def test_a_drift_of_windows_with_long_memory_is_inconclusive_naming_the_hurst_exponent() -> None:
    # Issue 52 item 4: a level that moves once every 8 windows and then once a third (memory as long
    # as the soak): the interval is widened for the Hurst exponent the windows show, and what would
    # decide scales as n^(1 / (1 - H)) windows, not as n, never a PASS of a 3% drift in 40 windows.
    check = _check(metric="soak.ttft_p50_drift", comparator="<=", threshold="10%", statistic=INTERVAL)
    rng = random.Random(3)
    level, first = 0.0, []
    for i in range(40):
        level = 0.9 * level + rng.gauss(0.0, 0.1) if i % 8 == 0 else level
        first.append(12.0 * math.exp(level + rng.gauss(0.0, 0.02)))
    last = [x * 1.03 for x in reversed(first)]
    spec = {"kind": "ratio", "a": last, "b": first, "stat": "median", "transform": "gain", "batches": 5}
    leaf = {"value": None, "samples": {**spec, "long_memory": True}}
    o = evaluate_check(check, {"soak": {"ttft_p50_drift": leaf}}).observations[0]
    plain = evaluate_check(check, {"soak": {"ttft_p50_drift": {"value": None, "samples": spec}}}).observations[0]
    hurst, _ = stats.hurst_estimate(stats.parse_sample_spec(leaf["samples"]))
    assert hurst > 0.8 and o.interval is not None and plain.interval is not None
    assert o.interval.high - o.interval.low > plain.interval.high - plain.interval.low
    assert "widened for long memory" in o.interval.method
    assert o.verdict is Verdict.INCONCLUSIVE, o.reason
    assert f"Hurst exponent {hurst:.2f}" in o.reason and o.needed_samples is not None
    assert f"about {o.needed_samples} windows a third would likely decide" in o.reason
    assert o.needed_samples > (plain.needed_samples or 0)


def test_a_retention_that_straddles_the_threshold_names_the_runs_a_side_that_would_decide() -> None:
    check = _check(metric="soak.read_bw_retention", comparator=">=", threshold="90%", statistic=INTERVAL)
    before = [[4.0e9 * (1.0 + 0.1 * (i % 2))] * 5 for i in range(6)]
    after = [[r[0] * 0.93] * 5 for r in before]
    leaf = {"value": None, "samples": {"kind": "ratio", "a_groups": after, "b_groups": before, "stat": "median",
                                       "transform": "ratio", "members": "rounds"}}
    o = evaluate_check(check, {"soak": {"read_bw_retention": leaf}}).observations[0]
    assert o.verdict is Verdict.INCONCLUSIVE and "(95% CI, 6 runs, 30 rounds)" in o.measured_text
    assert f"about {o.needed_samples} runs a side would likely decide" in o.reason
    few = {**leaf, "samples": {**leaf["samples"], "a_groups": after[:3], "b_groups": before[:3]}}
    o = evaluate_check(check, {"soak": {"read_bw_retention": few}}).observations[0]
    assert o.verdict is Verdict.INCONCLUSIVE and "3 run(s) a side: an interval needs at least 5" in o.reason


def test_expected_text_says_true_false_or_the_comparator_and_threshold() -> None:
    assert evaluate_check(_check(metric="x", comparator="is_true", threshold=None), {"x": True}) \
        .observations[0].expected_text == "true"
    assert evaluate_check(_check(metric="x", comparator="is_false", threshold=None), {"x": False}) \
        .observations[0].expected_text == "false"
    assert evaluate_check(_check(metric="x", comparator="<", threshold="25"), {"x": 0.1}) \
        .observations[0].expected_text == "< 25"


_S = {"kind": "ratio", "a": [70.0, 71.0, 69.0, 72.0, 70.5], "b": [100.0, 101.0, 99.0, 102.0, 100.5], "stat": "mean",
      "transform": "reduction"}


@pytest.mark.parametrize(("check", "leaf", "expected"), [
    # not measured: the pipeline's words, else the catalog's
    ({}, {"value": None, "text": "not run here", "detail": "no samples at c8"},
     {"verdict": "NOT_RUN", "measured": None, "measured_text": "not run here", "reason": "no samples at c8"}),
    ({}, {"value": None}, {"verdict": "NOT_RUN", "measured_text": "not measured", "reason": "no measured value"}),
    # a pipeline that says it could not decide
    ({}, {"value": 3, "text": "3 of 9", "detail": "storage unsteady", "inconclusive": "rounds never steadied"},
     {"verdict": "INCONCLUSIVE", "measured": 3.0, "measured_text": "3 of 9",
      "reason": "rounds never steadied; storage unsteady"}),
    ({}, {"value": "n/a", "inconclusive": "rounds never steadied"},
     {"verdict": "INCONCLUSIVE", "measured": None, "measured_text": "measured", "reason": "rounds never steadied"}),
    # a value that only records a fault says so
    ({}, {"value": 1, "caused_by_fault": True},
     {"verdict": "FAIL", "measured": 1.0, "measured_text": "1 (point estimate)", "caused_by_fault": True,
      "reason": "point estimate, no confidence interval"}),
    ({}, {"value": 7, "text": "7 GB", "detail": "from fio"},
     {"verdict": "PASS", "measured": 7.0, "measured_text": "7 GB (point estimate)", "caused_by_fault": False,
      "reason": "point estimate, no confidence interval; from fio", "n_samples": None}),
    ({}, 7,
     {"verdict": "PASS", "measured_text": "7 (point estimate)", "reason": "point estimate, no confidence interval"}),
    ({"comparator": "is_true", "threshold": None}, False,
     {"verdict": "FAIL", "measured": 0.0, "measured_text": "false", "expected_text": "true"}),
    ({"comparator": "is_true", "threshold": None}, {"value": True, "text": "all points measured"},
     {"verdict": "PASS", "measured": 1.0, "measured_text": "all points measured", "expected_text": "true"}),
    # samples: a point check still says how many; an interval check decides on them
    ({"threshold": "0.25"}, {"value": None, "samples": _S},
     {"verdict": "PASS", "measured": pytest.approx(0.2985075), "measured_text": "0.298507 (point estimate)",
      "n_samples": 5}),
    ({"threshold": "0.25", "statistic": INTERVAL}, {"value": None, "samples": {**_S, "a": [70.0, 71.0, 69.0]}},
     {"verdict": "INCONCLUSIVE", "measured": pytest.approx(0.3034826), "measured_text": "0.303483", "n_samples": 3,
      "needed_samples": 5, "reason": "3 sample(s): an interval needs at least 5 per group"}),
    ({"threshold": "0.25", "statistic": INTERVAL}, {"value": None, "samples": _S},
     {"verdict": "PASS", "measured_text": "0.298507 [0.284059, 0.312664] (95% CI, n=5)", "n_samples": 5,
      "min_samples": 5, "reason": ""}),
    ({"threshold": "0.25", "statistic": {**INTERVAL, "confidence": 0.9}},
     {"value": None, "text": "29.8% lower", "detail": "c8", "samples": _S},
     {"verdict": "PASS", "measured_text": "29.8% lower [0.28694, 0.309887] (90% CI, n=5)", "reason": "c8"}),
    ({"threshold": "0.25", "statistic": INTERVAL}, {"value": 0.3},
     {"verdict": "ERROR", "reason": "ValueError: the check asks for a confidence interval but the measurement "
                                    "carries no samples"}),
])
def test_each_kind_of_leaf_becomes_the_observation_a_reader_sees(
        check: dict[str, Any], leaf: Any, expected: dict[str, Any]) -> None:
    base: dict[str, Any] = {"metric": "x", "threshold": "5", **check}
    obs = evaluate_check(_check(**base), {"x": leaf}).observations[0].model_dump(mode="json")
    assert {k: obs[k] for k in expected} == expected
    assert obs["expected_text"] == expected.get("expected_text", f">= {base['threshold']}")
