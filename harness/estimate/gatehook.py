"""The expected block of a G2/G3 result: what the estimator predicts for the arms just measured,
next to what was measured, and the leaves of the advisory check ``estimate_agreement``.

The prediction uses the fio read bandwidth measured on each arm's target in this campaign and the
configured compute (the emulator's rates; a real engine's accelerator preset x efficiency), never
the sweep it is compared with. When a prediction cannot be made (no bandwidth, no peak), the
leaves carry ``value: None`` (NOT_RUN) and the block says why; the estimator never fails a gate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Optional

from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.errors import KvgateError
from harness.estimate.compare import agreement_measured, expected_vs_measured
from harness.estimate.hardware import Accelerator, find_accelerator
from harness.estimate.loader import geometry_for_profile
from harness.estimate.plan import EstimateInputs, estimate_profile

log = logging.getLogger(__name__)


def inventory_accelerator(inventory: Inventory) -> tuple[Optional[Accelerator], Optional[float]]:
    for node in inventory.nodes_with_role("server") or inventory.nodes:
        acc = node.accelerators
        if acc is not None and acc.model:
            mem = float(acc.memory) if acc.memory else None
            return find_accelerator(acc.model) or Accelerator(acc.model, mem, None, "not a preset"), mem
    return None, None


def expected_block(profile: Profile, inventory: Inventory, read_bw: Mapping[str, float],
                   sweeps: Mapping[str, Mapping[str, Mapping[str, Any]]], *, factor: float = 2.0
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(measured leaves ``{"estimate": ...}``, the report block for ``measurements["expected"]``)."""
    arms = [a for a in sweeps if sweeps[a]]
    try:
        geom = geometry_for_profile(profile)
        acc, mem = inventory_accelerator(inventory)
        inp = EstimateInputs(geometry=geom, accelerator=acc, hbm_bytes=mem)
        for arm, bw in read_bw.items():
            inp.read_bw[arm] = bw
            inp.read_bw_source[arm] = "fio seq-read of its target in this campaign"
        est = estimate_profile(profile, inp).as_dict()
    except (KvgateError, ValueError, KeyError) as exc:
        log.warning("estimate not available: %s", exc)
        rows = {"factor_limit": factor, "rows": [
            {"arm": a, "concurrency": int(c), "predicted_ttft_p50_ms": None,
             "measured_ttft_p50_ms": t.get("ttft_p50_ms"), "factor": None, "agrees": None,
             "cause": f"no estimate: {exc}"} for a in arms for c, t in sweeps[a].items()]}
        return {"estimate": agreement_measured(rows)}, {"available": False, "reason": str(exc), **rows}
    table = expected_vs_measured(est, sweeps, arms=arms, factor=factor, recompute_arm=profile.recompute)
    compare: dict[str, Any] = {}
    base, cand = sweeps.get(profile.baseline) or {}, sweeps.get(profile.candidate) or {}
    for c, pred in (est.get("compare") or {}).items():
        mb, mc = base.get(c) or {}, cand.get(c) or {}
        measured_red = measured_gain = None
        if mb.get("ttft_p50_ms") and mc.get("ttft_p50_ms"):
            measured_red = 1 - mc["ttft_p50_ms"] / mb["ttft_p50_ms"]
        if mb.get("output_throughput") and mc.get("output_throughput"):
            measured_gain = mc["output_throughput"] / mb["output_throughput"] - 1
        compare[c] = {"predicted_reduction": pred["ttft_reduction"], "measured_reduction": measured_red,
                      "predicted_gain": pred["throughput_gain"], "measured_gain": measured_gain}
    block = {
        "available": True,
        "kv_per_token": est["kv"]["per_token"], "kv_per_request": est["kv"]["per_request"],
        "request_tokens": est["kv"]["request_tokens"], "break_even_bw": est.get("break_even_bw"),
        "model_source": est["model"]["source"],
        "read_bw": {a: e.get("read_bw") for a, e in (est.get("arms") or {}).items()},
        "compare": compare if profile.candidate in sweeps else {},
        "notes": est["notes"],
        **table,
    }
    return {"estimate": agreement_measured(table)}, block


def agreement_factor_of(spec_checks: list[Any]) -> float:
    """The factor the gate file sets for ``estimate_agreement`` (default 2x)."""
    for check in spec_checks:
        if getattr(check, "id", "") == "estimate_agreement":
            value = check.threshold_value
            if value:
                return float(value)
    return 2.0


def add_expected(run: Any, measured: dict[str, Any], charts: dict[str, Any], read_bw: Mapping[str, float]) -> None:
    """Put the estimate next to the measurement: ``measured["estimate"]`` (the check's leaves) and
    ``charts["expected"]`` (the report's section, stored in result.json's measurements)."""
    sweeps = charts.get("sweep") or {}
    leaves, block = expected_block(run.profile, run.inventory, read_bw, sweeps,
                                   factor=agreement_factor_of(list(run.spec.checks)))
    measured.update(leaves)
    charts["expected"] = block


def fio_value(fio: Mapping[str, Any]) -> Optional[float]:
    """The seq-read bandwidth (B/s) of a pipeline's ``fio`` measured subtree, or None."""
    leaf = fio.get("seq_read_bw") if isinstance(fio, Mapping) else None
    value = leaf.get("value") if isinstance(leaf, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def baseline_read_bw(profile: Profile, g2: Any) -> Optional[float]:
    """The baseline target's fio read bandwidth from the G2 result G3 compares against."""
    storage = profile.arm(profile.baseline).storage
    if storage is None:
        return None
    try:
        result = g2.load_result()
    except KvgateError:
        return None
    from harness.estimate.measured import fio_read_bw

    return fio_read_bw(result.measurements.get("fio") or {}, storage)
