"""Expected next to measured: per arm and concurrency, the predicted and the measured TTFT p50, the
factor between them, and, when they disagree beyond the limit, the most likely cause.

Pure: takes the estimate dict (``plan.Estimate.as_dict``) and the measured sweep tables as the
gate pipelines record them (``{arm: {"<concurrency>": {"ttft_p50_ms": ..., "output_throughput":
...}}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

DEFAULT_FACTOR = 2.0  # gates/G3.yaml estimate_agreement


def agreement_factor(predicted: float, measured: float) -> float:
    """max(measured / predicted, predicted / measured): 1 is perfect agreement, symmetric."""
    if predicted <= 0 or measured <= 0:
        raise ValueError("agreement needs two positive figures")
    return max(measured / predicted, predicted / measured)


def likely_cause(arm: Mapping[str, Any], predicted_ms: float, measured_ms: float,
                 recompute_ms: Optional[float]) -> str:
    """The most likely reason a measured TTFT p50 is far from the prediction."""
    offload = bool(arm.get("offload"))
    if measured_ms < predicted_ms:
        if offload:
            return ("measured far faster than the tier's fio bandwidth allows: reads may have come from the "
                    "page cache or the engine's own prefix cache (check the cold-restore counters)")
        return "recompute measured far faster than predicted: the efficiency or peak figure is too low"
    if offload and recompute_ms is not None and abs(measured_ms / recompute_ms - 1) < 0.25:
        return "measured like the recompute prediction: no KV hits, the context was recomputed"
    if offload:
        return (f"measured {measured_ms / predicted_ms:.1f}x slower than predicted from {_bw_source(arm)}: the "
                "engine's restore got less than its fio bandwidth from the tier (smaller reads and fewer in "
                "flight than fio's, or a busy device) or recomputed part of the context; advisory: no verdict "
                "depends on it, the TTFT checks stand on what was measured")
    return "recompute measured far slower than predicted: the efficiency or peak figure is too high"


def _bw_source(arm: Mapping[str, Any]) -> str:
    """The probe the prediction rests on, e.g. "1.02 GB/s (fio seq-read of fast-disk in G3)"."""
    bw = arm.get("read_bw")
    source = arm.get("read_bw_source") or "the tier's read bandwidth"
    return f"{bw / 1e9:.2f} GB/s ({source})" if isinstance(bw, (int, float)) and bw > 0 else str(source)


def expected_vs_measured(estimate: Mapping[str, Any], sweeps: Mapping[str, Mapping[str, Mapping[str, Any]]],
                         *, arms: Optional[list[str]] = None, factor: float = DEFAULT_FACTOR,
                         recompute_arm: Optional[str] = None) -> dict[str, Any]:
    """Rows of expected vs measured (the report's section and the ``estimate_agreement`` check)."""
    est_arms: Mapping[str, Any] = estimate.get("arms") or {}
    rows: list[dict[str, Any]] = []
    for arm_name in arms if arms is not None else list(sweeps):
        arm = est_arms.get(arm_name) or {}
        measured_table = sweeps.get(arm_name) or {}
        for conc, m in sorted(measured_table.items(), key=lambda kv: int(kv[0])):
            pt = (arm.get("points") or {}).get(str(conc))
            row: dict[str, Any] = {"arm": arm_name, "concurrency": int(conc),
                                   "measured_ttft_p50_ms": m.get("ttft_p50_ms"),
                                   "measured_output_throughput": m.get("output_throughput"),
                                   "predicted_ttft_p50_ms": None, "predicted_output_throughput": None,
                                   "factor": None, "agrees": None, "cause": ""}
            if not pt:
                row["cause"] = arm.get("missing") or "no prediction for this arm (see the estimate's notes)"
                rows.append(row)
                continue
            row["predicted_ttft_p50_ms"] = pt["ttft_s"] * 1000.0
            row["predicted_output_throughput"] = pt["output_tokens_per_s"]
            row["bottleneck"] = pt.get("bottleneck")
            measured = row["measured_ttft_p50_ms"]
            if measured is None or measured <= 0:
                row["cause"] = "not measured"
                rows.append(row)
                continue
            f = agreement_factor(row["predicted_ttft_p50_ms"], float(measured))
            row["factor"] = f
            row["agrees"] = f <= factor
            if not row["agrees"]:
                rec = (est_arms.get(recompute_arm or "") or {}).get("points", {}).get(str(conc))
                row["cause"] = likely_cause(arm, row["predicted_ttft_p50_ms"], float(measured),
                                            rec["ttft_s"] * 1000.0 if rec else None)
            rows.append(row)
    return {"factor_limit": factor, "rows": rows}


def agreement_measured(table: Mapping[str, Any]) -> dict[str, Any]:
    """The ``estimate.ttft_p50_factor.<arm>-c<N>`` leaves the gate check reads (value None when
    there is no prediction or no measurement: NOT_RUN, never PASS)."""
    out: dict[str, Any] = {}
    for row in table.get("rows", []):
        key = f"{row['arm']}-c{row['concurrency']}"
        pred, meas = row.get("predicted_ttft_p50_ms"), row.get("measured_ttft_p50_ms")
        text = "" if pred is None or meas is None else f"predicted {pred / 1000:.3f} s, measured {meas / 1000:.3f} s"
        out[key] = {"value": row.get("factor"), "text": text, "detail": row.get("cause") or text, "evidence": []}
    return {"ttft_p50_factor": out}
