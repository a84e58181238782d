"""The sweep's result data: ``measurements["bandwidth_curve"]`` and the checks of its result.json.

``bandwidth_curve``::

    {"tier_fio_read_bps": float|None,   # fio's read of the tier as provisioned: what the fractions are of
     "tier_fio": {...},                 # that leaf's text, interval and evidence
     "concurrency": int,
     "baseline": {"ttft_p50_ms", "ttft_p50_interval_ms": [lo, hi], "throughput_tok_s", "throughput_interval"},
     "thresholds": {"ttft_p50_reduction": float, "throughput_gain": float},   # G3's, after the profile's overrides
     "points": [{"provisioned_read_bps", "fraction", "fio_read_bps", "ttft_p50_ms", "ttft_p50_interval_ms",
                 "throughput_tok_s", "throughput_interval", "verdicts": {check: verdict}, "error",
                 "restore_bytes_per_request", "throttle_slices", ...}],
     "bracket": {"ttft_p50_reduction": {"status", "lowest_pass_bps", "highest_not_pass_bps", "relative_width"},
                 "throughput_gain": {...}},
     "throttle_quantization": None | {"text", "slices_range", ...},   # restores within a few of
                                        # blk-throttle's slices (throttleslice.py)
     "protocol": {"fractions", "bracket_width", "max_points"},
     "estimator": None}                 # filled by the estimator's calibration

Points are highest rate first. TTFT p50 is the pooled median of the point's repetitions (G3's
figure); its interval is the 95% t interval of the repetitions' p50s; throughput is the mean of the
repetitions' output throughput with its t interval (``sweepdata.sweep_table``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from harness.config.gatespec import GateSpec
from harness.config.profile import BandwidthSpec, ThresholdOverride
from harness.gates.evaluate import check_overrides
from harness.pipelines.bandwidth.bracket import bracket
from harness.pipelines.bandwidth.points import PointOutcome
from harness.pipelines.bandwidth.throttleslice import quantization
from harness.pipelines.bandwidth.verdicts import CURVE, RATE_CHECK, VALIDITY, merged
from harness.records.outcome import CheckResult
from harness.units import parse_quantity


def thresholds(g3: GateSpec, overrides: Sequence[ThresholdOverride]) -> dict[str, float]:
    ovs = check_overrides(g3, overrides)
    out = {}
    for cid in CURVE:
        check = g3.check(cid)
        text = ovs[cid].threshold if cid in ovs else check.threshold
        out[cid] = float(parse_quantity(str(text), check.unit_kind).value)
    return out


def curve(tier_bps: Optional[float], tier_leaf: dict[str, Any], baseline: dict[str, Any], g3: GateSpec,
          outcomes: Sequence[PointOutcome], overrides: Sequence[ThresholdOverride],
          spec: BandwidthSpec, concurrency: int) -> dict[str, Any]:
    points = [o.record for o in outcomes]
    return {
        "tier_fio_read_bps": tier_bps,
        "concurrency": concurrency,
        "tier_fio": {k: tier_leaf.get(k) for k in ("text", "detail", "evidence", "inconclusive") if k in tier_leaf},
        "baseline": {k: baseline.get(k) for k in ("ttft_p50_ms", "ttft_p50_interval_ms", "throughput_tok_s",
                                                  "throughput_interval", "repetitions")},
        "thresholds": thresholds(g3, overrides),
        "points": points,
        "bracket": {cid: bracket(points, cid) for cid in CURVE},
        "throttle_quantization": quantization(points),
        "protocol": {"fractions": list(spec.fractions), "bracket_width": spec.bracket_width,
                     "max_points": spec.max_points},
        "estimator": None,
    }


def result_checks(outcomes: Sequence[PointOutcome]) -> list[CheckResult]:
    """The sweep's checks: the rate check and G3's validity blockers at every point (blockers: the
    curve's evidence), G3's curve blockers at every point (advisory: the curve itself)."""
    labels = [f"{o.record['label']} ({o.record['fraction']:.0%})" for o in outcomes]
    out = [merged(RATE_CHECK, [(lab, o.rate) for lab, o in zip(labels, outcomes)], severity="blocker",
                  missing="no rate of the sweep was measured")]
    decided = {c.id for o in outcomes for c in o.checks}
    for cid in (*VALIDITY, *CURVE):
        if decided and cid not in decided:  # left out of the sweep's G3 checks (no recompute arm measured)
            continue
        per = [(lab, next((c for c in o.checks if c.id == cid), None)) for lab, o in zip(labels, outcomes)]
        out.append(merged(cid, per, severity="advisory" if cid in CURVE else "blocker",
                          missing=f"no delivered rate measured {cid}"))
    return out
