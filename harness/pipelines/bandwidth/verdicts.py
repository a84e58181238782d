"""G3's own checks at one rate of a bandwidth sweep, and the rate check before it (no comparison of
its own: every verdict here is the gate engine's, on G3's and G1's gate files).

At each rate the candidate's measured tree is G3's (``candidate.*``, ``compare.*``, ``recompute.*``)
and is evaluated with the G3 checks that can be decided on one candidate arm at one concurrency
beside a baseline measured in the same run: the two blockers the curve is about
(``ttft_p50_reduction``, ``throughput_gain``) and the blockers that make its figures storage figures
(``VALIDITY``: cold restore proven by the engine's counters, a restore no faster than its storage,
failed requests). A point's verdict for a blocker is what G3 would decide with that blocker and
the validity blockers (``harness.gates.verdict.decide``), so a TTFT reduction measured on a warm
restore is never a PASS. The rate itself is checked first with G1's ``provisioned_read`` (fio's
read under the point's cgroup at least 90% of the rate on the rounds' interval; above 110% the cap
was not in effect): anything but PASS makes the point an error, not a point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

from harness.config.gatespec import GateSpec
from harness.config.inventory import StorageTarget
from harness.config.profile import ThresholdOverride
from harness.gates.evaluate import evaluate_check, evaluate_gate
from harness.gates.verdict import decide
from harness.pipelines.g1.provisioned import read_of_provisioned
from harness.records.outcome import CheckResult, Observation, Verdict

CURVE = ("ttft_p50_reduction", "throughput_gain")
VALIDITY = ("candidate_failed_requests", "candidate_memory_tier_hits", "restore_within_storage_bandwidth",
            "candidate_offload_hits", "candidate_offload_hit_share", "candidate_prefix_cache_evicted",
            "recompute_offload_hits")
RATE_CHECK = "provisioned_read"


def g3_subset(spec: GateSpec) -> GateSpec:
    """G3's gate file with only the checks a sweep point decides (ids in ``CURVE`` and ``VALIDITY``)."""
    keep = set(CURVE) | set(VALIDITY)
    missing = keep - {c.id for c in spec.checks}
    if missing:
        raise KeyError(f"gate file {spec.id} lacks check(s) {', '.join(sorted(missing))}")
    return spec.model_copy(update={"checks": [c for c in spec.checks if c.id in keep]})


def unfiltered(compare: dict[str, Any]) -> dict[str, Any]:
    """The sweep measures its baseline itself, so no G2 filter selected its repetitions: the
    intervals take each arm's own spread (``b_filtered`` off), as G3 does for its recompute arm."""
    for group in compare.values():
        leaves = group.values() if isinstance(group, dict) and "value" not in group else [group]
        for leaf in leaves:
            samples = leaf.get("samples") if isinstance(leaf, dict) else None
            if isinstance(samples, dict) and samples.get("b_filtered"):
                samples["b_filtered"] = False
    return compare


def evaluate_point(spec: GateSpec, measured: Mapping[str, Any], overrides: Sequence[ThresholdOverride],
                   seed: int) -> tuple[list[CheckResult], dict[str, str]]:
    """The point's evaluated G3 checks and its verdict for each curve blocker."""
    checks = evaluate_gate(spec, measured, overrides=overrides, seed=seed)
    validity = [c for c in checks if c.id in VALIDITY]
    verdicts = {}
    for cid in CURVE:
        blocker = [c for c in checks if c.id == cid]
        verdicts[cid] = decide([*blocker, *validity]).verdict.value
    return checks, verdicts


def rate_check(g1: GateSpec, target: StorageTarget, node: str, read_leaf: Any) -> CheckResult:
    """G1's ``provisioned_read`` on the fio read taken under the point's cgroup (``target`` carries the
    point's rate)."""
    leaf = read_of_provisioned(target, read_leaf)
    tree = {"nodes": {node: {"storage": {target.name: {"fio": {"read_of_provisioned": leaf}}}}}}
    return evaluate_check(g1.check(RATE_CHECK), tree)


def rate_error(check: CheckResult) -> Optional[str]:
    """Why the point is an error (the kernel did not deliver the rate, or fio could not show it), or None."""
    if check.verdict is Verdict.PASS:
        return None
    obs = check.observations[0] if check.observations else None
    what = obs.measured_text if obs and obs.measured_text else "no read figure"
    return (f"the rate was not delivered under its cgroup ({what}; G1 provisioned_read {check.verdict.value}: "
            f"{check.reason or 'not decided'}): an error, not a point of the curve")


def _worst(verdicts: Sequence[Verdict]) -> Verdict:
    for v in (Verdict.ERROR, Verdict.FAIL, Verdict.NOT_RUN, Verdict.INCONCLUSIVE, Verdict.PASS):
        if v in verdicts:
            return v
    return Verdict.NOT_APPLICABLE


def merged(check_id: str, per_point: Sequence[tuple[str, Optional[CheckResult]]], *,
           severity: Literal["blocker", "advisory"],
           missing: str = "") -> CheckResult:
    """One check of the sweep's result: every point's observations of ``check_id`` under the point's
    label (``per_point``: (label, the point's evaluated check or None when the point did not decide it));
    its verdict is the worst of them."""
    observations: list[Observation] = []
    first: Optional[CheckResult] = None
    for label, check in per_point:
        if check is None:
            continue
        first = first or check
        observations += [o.model_copy(update={"path": f"{label}: {o.path}"}) for o in check.observations]
    if first is None:
        return CheckResult(id=check_id, description=missing or check_id, metric=check_id, comparator="",
                           threshold=None, unit_kind="percent", severity=severity, statistic="point",
                           verdict=Verdict.NOT_RUN, reason=missing or "no point decided it")
    verdict = _worst([o.verdict for o in observations])
    bad = [o for o in observations if o.verdict is verdict and verdict is not Verdict.PASS]
    reason = "; ".join(f"{o.path}: {o.reason or o.verdict.value}" for o in bad[:5])
    return first.model_copy(update={"severity": severity, "verdict": verdict, "reason": reason,
                                    "reason_msgs": [], "observations": observations})
