"""Evaluate the checks of a gate against measured results, and decide the gate.

Rules (the report and the exit code follow from them):

* Each check's metric pattern is resolved against the measured dict (``metricpath.resolve``);
  every match is one :class:`Observation`. A check whose pattern matches nothing is NOT_RUN.
* A leaf is a number, a bool, or a measurement dict ``{"value", "text", "detail", "evidence",
  "samples", "caused_by_fault"}``; ``caused_by_fault: true`` marks a value that only records a
  fault the pipeline also recorded (a node that did not answer), so its FAIL is not measured
  evidence against the system under test (see ``harness.gates.verdict``). ``inconclusive:
  "<reason>"`` marks a measurement that ran but cannot decide (a bandwidth that never reached
  steady state, or measured before the writes drained): INCONCLUSIVE whatever its figure. ``value: None`` is
  NOT_RUN with ``detail`` as the reason. A string value is parsed
  as a quantity in the metric's unit kind (a wrong unit is an ERROR naming both units).
* When a leaf carries ``samples``, the estimate is computed from them (the same statistic the
  interval is built on), and a ``value`` next to them is ignored, so estimate and interval agree.
* Comparators ``>= > <= < == !=`` compare with a relative tolerance of 1e-9 (so a threshold met
  exactly passes ``>=`` and fails ``>``, whatever float rounding did to 25%); ``is_true`` and
  ``is_false`` need a boolean.
* ``statistic: point``: the estimate itself is compared; the observation says "point estimate".
  ``statistic: interval``: the leaf must carry samples; a bootstrap interval
  (``harness.gates.stats``: percentile, hierarchical or Welch t) is computed: PASS when the
  whole interval clears the threshold, FAIL when none of it does, INCONCLUSIVE otherwise, with ``needed_samples`` (see
  ``stats.needed_samples``). Fewer than ``stats.MIN_INTERVAL_SAMPLES`` samples per group is
  INCONCLUSIVE: one sample resamples to a zero-width interval, which would be a false certainty.
* Anything that raises while evaluating an observation (malformed samples, zero baseline, NaN,
  unit mismatch) makes it ERROR with the reason; it counts as failed.
* A check's verdict is the worst of its observations, in the order ERROR, FAIL, NOT_RUN,
  INCONCLUSIVE, PASS.
* The gate's verdict and exit code are decided by :func:`harness.gates.verdict.decide` alone,
  never here.
* Profile threshold overrides (``Profile.overrides`` for this gate) replace the check's threshold;
  the check records the new threshold and ``override_reason``. An override naming an unknown
  check, a check without threshold, or a threshold in the wrong unit is an ``InputError``
  (:func:`check_overrides` lets a pipeline find that before it touches a node).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from harness.config.gatespec import Check, GateSpec
from harness.config.profile import ThresholdOverride
from harness.errors import InputError
from harness.gates import messages as M
from harness.gates import stats
from harness.gates.metricpath import resolve
from harness.gates.outcome import CheckResult, Interval, Message, Observation, Verdict, compose
from harness.units import UnitKind, UnitParseError, format_quantity, parse_quantity

__all__ = ["evaluate_gate", "evaluate_check", "check_overrides", "compare", "REL_TOL"]

REL_TOL = 1e-9

_WORST_FIRST = (Verdict.ERROR, Verdict.FAIL, Verdict.NOT_RUN, Verdict.INCONCLUSIVE, Verdict.PASS)


class _Threshold:
    def __init__(self, text: Optional[str], value: Optional[float], reason: Optional[str]) -> None:
        self.text = text
        self.value = value
        self.override_reason = reason


def _eq(x: float, t: float) -> bool:
    return abs(x - t) <= REL_TOL * max(1.0, abs(t))


def compare(x: float, op: str, t: float) -> bool:
    """``x op t`` with a relative tolerance for equality."""
    eq = _eq(x, t)
    if op == ">=":
        return x > t or eq
    if op == ">":
        return x > t and not eq
    if op == "<=":
        return x < t or eq
    if op == "<":
        return x < t and not eq
    if op == "==":
        return eq
    if op == "!=":
        return not eq
    raise ValueError(f"unknown comparator {op!r}")


def _interval_verdict(low: float, high: float, op: str, t: float) -> Verdict:
    if op in (">=", ">", "<=", "<"):
        if compare(low, op, t) and compare(high, op, t):
            return Verdict.PASS
        if not compare(low, op, t) and not compare(high, op, t):
            return Verdict.FAIL
        return Verdict.INCONCLUSIVE
    inside = (low < t or _eq(low, t)) and (t < high or _eq(high, t))
    degenerate = _eq(low, t) and _eq(high, t)
    if op == "==":
        return Verdict.PASS if degenerate else (Verdict.INCONCLUSIVE if inside else Verdict.FAIL)
    if op == "!=":
        return Verdict.FAIL if degenerate else (Verdict.INCONCLUSIVE if inside else Verdict.PASS)
    raise ValueError(f"unknown comparator {op!r}")


def _expected_text(check: Check, thr: _Threshold) -> str:
    if check.comparator == "is_true":
        return "true"
    if check.comparator == "is_false":
        return "false"
    return f"{check.comparator} {thr.text}"


def _fmt(v: float, kind: UnitKind) -> str:
    return format_quantity(v, kind)


def _number(value: Any, kind: UnitKind) -> float:
    if isinstance(value, bool):
        raise ValueError(f"measured a boolean ({value}) where a {kind.value} was expected")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"measured value is not a finite number ({value!r})")
        return float(value)
    if isinstance(value, str):
        try:
            return parse_quantity(value, kind).value
        except UnitParseError as exc:
            raise ValueError(f"unit mismatch: {exc}") from None
    raise ValueError(f"measured value {value!r} is not a number")


@dataclass(frozen=True)
class _Leaf:
    """A measured leaf as the evaluator reads it: a bare value, or a mapping with its text, detail,
    evidence, samples and flags."""

    value: Any
    text: str = ""
    detail: str = ""
    evidence: tuple[str, ...] = ()
    samples: Any = None
    caused_by_fault: bool = False
    inconclusive: Any = None

    @staticmethod
    def read(leaf: Any) -> _Leaf:
        if not isinstance(leaf, Mapping):
            return _Leaf(leaf)
        return _Leaf(leaf.get("value"), str(leaf.get("text") or ""), str(leaf.get("detail") or ""),
                      tuple(str(e) for e in leaf.get("evidence") or []), leaf.get("samples"),
                      bool(leaf.get("caused_by_fault")), leaf.get("inconclusive"))


def _observe(check: Check, path: str, leaf: Any, thr: _Threshold, rng: random.Random) -> Observation:
    kind = check.unit_kind
    got = _Leaf.read(leaf)
    value, text, detail, samples = got.value, got.text, got.detail, got.samples
    base: dict[str, Any] = dict(path=path, expected_text=_expected_text(check, thr), evidence=list(got.evidence))
    if got.caused_by_fault:
        base["caused_by_fault"] = True

    if value is None and samples is None:
        measured = [M.text(text)] if text else [M.msg(M.NOT_MEASURED)]
        why = [M.text(detail)] if detail else [M.msg(M.NO_VALUE)]
        return Observation(**base, measured_text=compose(measured), measured_msgs=measured, verdict=Verdict.NOT_RUN,
                           reason=compose(why), reason_msgs=why)

    if got.inconclusive:
        # The measurement ran but cannot decide (e.g. a bandwidth that never reached steady state):
        # never PASS and never FAIL on it, whatever its figure says.
        return Observation(**base, measured=value if isinstance(value, (int, float)) else None,
                           measured_text=text or "measured", verdict=Verdict.INCONCLUSIVE,
                           reason=f"{got.inconclusive}; {detail}" if detail else str(got.inconclusive))

    if check.comparator in ("is_true", "is_false"):
        if not isinstance(value, bool):
            raise ValueError(f"{check.comparator} needs a boolean measurement, got {value!r}")
        want = check.comparator == "is_true"
        verdict = Verdict.PASS if value is want else Verdict.FAIL
        return Observation(**base, measured=1.0 if value else 0.0, measured_text=text or str(value).lower(),
                           verdict=verdict, reason=detail)

    assert thr.value is not None  # validated with the gate file: numeric comparators have thresholds
    spec = stats.parse_sample_spec(samples) if samples is not None else None
    if spec is not None:
        estimate = stats.point_estimate(spec)
    else:
        estimate = _number(value, kind)
    if not math.isfinite(estimate):
        raise ValueError(f"measured value is not a finite number ({estimate!r})")

    if check.statistic.kind == "point":
        verdict = Verdict.PASS if compare(estimate, check.comparator, thr.value) else Verdict.FAIL
        measured = [M.msg(M.POINT_MEASURED, value=M.text(text) if text else _fmt(estimate, kind))]
        why = [M.msg(M.POINT_REASON)] + ([M.text(detail)] if detail else [])
        return Observation(**base, measured=estimate, measured_text=compose(measured), measured_msgs=measured,
                           verdict=verdict, reason=compose(why), reason_msgs=why, n_samples=spec.n if spec else None)

    if spec is None:
        raise ValueError("the check asks for a confidence interval but the measurement carries no samples")
    return _interval_observation(check, base, got, spec, estimate, thr, rng)


def _interval_observation(check: Check, base: dict[str, Any], got: _Leaf, spec: stats.SampleSpec, estimate: float,
                          thr: _Threshold, rng: random.Random) -> Observation:
    """An interval check: too few samples is INCONCLUSIVE; else the bootstrap (or t) interval
    against the threshold, with the achieved power and what would decide it."""
    assert thr.value is not None
    kind, text, detail = check.unit_kind, got.text, got.detail
    conf = check.statistic.confidence
    unit = _unit(spec)
    if spec.n < stats.MIN_INTERVAL_SAMPLES:
        few = [M.msg(_FEW[unit], n=spec.n, min=stats.MIN_INTERVAL_SAMPLES)]
        return Observation(
            **base, measured=estimate, measured_text=(text or _fmt(estimate, kind)), n_samples=spec.n,
            needed_samples=stats.MIN_INTERVAL_SAMPLES, verdict=Verdict.INCONCLUSIVE,
            reason=compose(few), reason_msgs=few)
    low, high = stats.bootstrap_interval(spec, confidence=conf, resamples=check.statistic.resamples, rng=rng)
    verdict = _interval_verdict(low, high, check.comparator, thr.value)
    interval = Interval(low=low, high=high, confidence=conf, method=stats.interval_method(spec),
                        resamples=check.statistic.resamples)
    measured = [M.msg(M.INTERVAL, value=M.text(text) if text else _fmt(estimate, kind), low=_fmt(low, kind),
                      high=_fmt(high, kind), confidence=f"{conf * 100:g}", size=_size_msg(spec))]
    power, power_reps = _power(spec, low, high, estimate, thr.value, conf)
    needed = None
    why = [M.text(detail)] if detail else []
    if verdict is Verdict.INCONCLUSIVE:
        needed = stats.needed_samples(spec.n, low, high, estimate, thr.value)
        memory: list[Message] = []
        if spec.long_memory:  # the width shrinks as n^(H - 1): a long memory needs a much longer soak
            hurst, se = stats.hurst_estimate(spec)
            bound = stats.hurst_bound(spec)
            p_lo, p_hi, p_est, p_thr = stats.power_scale(spec, low, high, estimate, thr.value)
            needed = stats.memory_needed(spec.n, min(p_lo, p_hi), max(p_lo, p_hi), p_est, p_thr, bound)
            memory = [M.msg(M.LONG_MEMORY, hurst=f"{hurst:.2f}", bound=f"{bound:.2f}")]
        decide = M.msg(_DECIDE[unit], n=needed) if needed else M.msg(M.ON_THRESHOLD)
        why = [M.msg(M.STRADDLES, confidence=f"{conf * 100:g}", threshold=str(thr.text))] + memory + [decide] + why
    shown_n = spec.groups if spec.kind == "binomial" and spec.groups else spec.n  # repetitions, as power_reps
    return Observation(**base, measured=estimate, measured_text=compose(measured), measured_msgs=measured,
                       interval=interval, n_samples=shown_n, needed_samples=needed, verdict=verdict,
                       reason=compose(why), reason_msgs=why, power=power,
                       power_repetitions=power_reps, min_samples=stats.MIN_INTERVAL_SAMPLES)


def _power(spec: stats.SampleSpec, low: float, high: float, estimate: float, threshold: float,
           conf: float) -> tuple[Optional[float], Optional[int]]:
    """The achieved power of the interval, and the repetitions that would give POWER_TARGET."""
    # on the interval's own scale (the log ratio for the Welch t: symmetric there, not as a gain)
    p_lo, p_hi, p_est, p_thr = stats.power_scale(spec, low, high, estimate, threshold)
    p_lo, p_hi = min(p_lo, p_hi), max(p_lo, p_hi)  # a reduction's log ratio runs the other way
    power = stats.achieved_power(p_lo, p_hi, p_est, p_thr, conf)
    power_reps = stats.repetitions_for_power(spec.n, p_lo, p_hi, p_est, p_thr, conf, stats.POWER_TARGET)
    if spec.kind == "binomial":  # exact: the binomial law at the estimate, not a normal approximation
        power = stats.binomial_power(spec.trials, estimate, threshold, conf)
        need = stats.binomial_trials_for_power(estimate, threshold, conf, stats.POWER_TARGET)
        # requests -> repetitions of the same size (the report's column counts repetitions)
        power_reps = None if need is None else (
            max(math.ceil(need * spec.groups / spec.trials - 1e-9), 1) if spec.groups else need)
    return power, power_reps


def _unit(spec: stats.SampleSpec) -> str:
    if spec.kind == "binomial":
        return "request"
    if spec.batches:  # a soak's windows, a third a side: more of them is a longer soak
        return "window"
    if spec.clustered and spec.members == "rounds":  # fio runs (G4 retention), each its rounds
        return "run"
    return "repetition" if spec.clustered or spec.kind == "capacity" else "sample"


_FEW = {"request": M.FEW_REQUESTS, "repetition": M.FEW_REPETITIONS, "sample": M.FEW_SAMPLES,
        "window": M.FEW_WINDOWS, "run": M.FEW_RUNS}
_DECIDE = {"request": M.DECIDE_REQUESTS, "repetition": M.DECIDE_REPETITIONS, "sample": M.DECIDE_SAMPLES,
           "window": M.DECIDE_WINDOWS, "run": M.DECIDE_RUNS}


def _size_msg(spec: stats.SampleSpec) -> Message:
    if spec.batches:
        return M.msg(M.SIZE_WINDOWS, n=spec.n, batches=spec.batches)
    if spec.clustered and spec.members == "rounds":
        return M.msg(M.SIZE_RUNS, n=spec.n, rounds=min(len(spec.a), len(spec.b)))
    if spec.clustered:
        return M.msg(M.SIZE_REPETITIONS, n=spec.n, requests=min(len(spec.a), len(spec.b)))
    if spec.kind == "binomial":
        if spec.groups:
            return M.msg(M.SIZE_BINOMIAL_GROUPS, k=spec.k, trials=spec.trials, groups=spec.groups)
        return M.msg(M.SIZE_BINOMIAL, k=spec.k, trials=spec.trials)
    if spec.kind == "capacity":
        return M.msg(M.SIZE_CAPACITY, candidate=len(spec.a_points), baseline=len(spec.b_points), n=spec.n)
    return M.msg(M.SIZE_N, n=spec.n)


def _worst(verdicts: Iterable[Verdict]) -> Verdict:
    vs = set(verdicts)
    for v in _WORST_FIRST:
        if v in vs:
            return v
    return Verdict.NOT_RUN


def evaluate_check(check: Check, measured: Mapping[str, Any], *, threshold: Optional[str] = None,
                   override_reason: Optional[str] = None, seed: int = 0) -> CheckResult:
    """Evaluate one check; ``threshold``/``override_reason`` apply a profile override."""
    kind = check.unit_kind
    thr_text = threshold if threshold is not None else check.threshold
    header: dict[str, Any] = dict(
        id=check.id, description=check.description, metric=check.metric, comparator=check.comparator,
        threshold=thr_text, unit_kind=kind.value, severity=check.severity, statistic=check.statistic.kind,
        confidence=check.statistic.confidence if check.statistic.kind == "interval" else None,
        override_reason=override_reason,
    )
    try:
        thr_value = parse_quantity(thr_text, kind).value if thr_text is not None else None
    except UnitParseError as exc:
        return CheckResult(**header, verdict=Verdict.ERROR, reason=f"threshold {thr_text!r}: {exc}")
    header["threshold_value"] = thr_value
    thr = _Threshold(thr_text, thr_value, override_reason)

    matches = resolve(measured, check.metric)
    if not matches:
        why = [M.msg(M.NO_VALUE_AT, path=check.metric)]
        obs = Observation(path=check.metric, expected_text=_expected_text(check, thr),
                          measured_text=M.NOT_MEASURED, measured_msgs=[M.msg(M.NOT_MEASURED)],
                          verdict=Verdict.NOT_RUN, reason=compose(why), reason_msgs=why)
        return CheckResult(**header, verdict=Verdict.NOT_RUN, reason=obs.reason, reason_msgs=why, observations=[obs])

    observations: list[Observation] = []
    for path, leaf in matches:
        rng = random.Random(f"{seed}/{check.id}/{path}")
        try:
            observations.append(_observe(check, path, leaf, thr, rng))
        except Exception as exc:  # noqa: BLE001 - a check that raises is failed with its reason
            observations.append(Observation(
                path=path, expected_text=_expected_text(check, thr), measured_text="error",
                verdict=Verdict.ERROR, reason=f"{type(exc).__name__}: {exc}"))
    verdict = _worst(o.verdict for o in observations)
    bad = [o for o in observations if o.verdict is verdict and verdict is not Verdict.PASS]
    if verdict is Verdict.PASS:
        msgs = [M.msg(M.ALL_PASSED, n=len(observations))] if len(observations) > 1 else []
        return CheckResult(**header, verdict=verdict, reason=compose(msgs), reason_msgs=msgs,
                           observations=observations)
    else:
        reason = "; ".join(f"{o.path}: {o.reason or o.verdict.value}" for o in bad[:5])
        if len(bad) > 5:
            reason += f"; and {len(bad) - 5} more"
    return CheckResult(**header, verdict=verdict, reason=reason, observations=observations)


def check_overrides(spec: GateSpec, overrides: Sequence[ThresholdOverride]) -> dict[str, ThresholdOverride]:
    """The overrides that apply to ``spec``, by check id; raise ``InputError`` for a bad one."""
    out: dict[str, ThresholdOverride] = {}
    problems: list[str] = []
    for ov in overrides:
        if ov.gate != spec.id:
            continue
        try:
            check = spec.check(ov.check)
        except KeyError as exc:
            problems.append(f"override {ov.gate}.{ov.check}: {exc.args[0]}")
            continue
        if check.comparator in ("is_true", "is_false"):
            problems.append(
                f"override {ov.gate}.{ov.check}: check {check.id} ({check.comparator}) takes no threshold")
            continue
        try:
            parse_quantity(ov.threshold, check.unit_kind)
        except UnitParseError as exc:
            problems.append(f"override {ov.gate}.{ov.check}: threshold: {exc}")
            continue
        if ov.check in out:
            problems.append(f"override {ov.gate}.{ov.check}: given twice")
            continue
        out[ov.check] = ov
    if problems:
        raise InputError("profile overrides: " + "; ".join(problems))
    return out


def evaluate_gate(spec: GateSpec, measured: Mapping[str, Any], *,
                  overrides: Sequence[ThresholdOverride] = (), seed: int = 0) -> list[CheckResult]:
    """Evaluate every check of ``spec`` against ``measured`` (deterministic for a given seed)."""
    ovs = check_overrides(spec, overrides)
    results: list[CheckResult] = []
    for check in spec.checks:
        ov = ovs.get(check.id)
        results.append(evaluate_check(
            check, measured, seed=seed,
            threshold=ov.threshold if ov else None,
            override_reason=(f"threshold {check.threshold} -> {ov.threshold}: {ov.reason}" if ov else None)))
    return results

